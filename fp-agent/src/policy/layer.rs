//! Layering the per-agent overlay over the operator's global `[file_policy]`, field by field:
//! a non-empty overlay field replaces the global one, an omitted (or empty) one inherits it.
use super::error::{ErrorKind, PolicyError};
use super::parse::{GlobList, PolicyFields, schema_name};

/// The overlay layered over `global`; None when neither sets any policy field (no schema key in
/// either), which fp treats as "no policy" and refuses to run a session with.
pub fn layer(
    global: &PolicyFields,
    overlay: &PolicyFields,
) -> Result<Option<PolicyFields>, PolicyError> {
    if let (Some(g), Some(o)) = (&global.schema, &overlay.schema)
        && g.value != o.value
    {
        return Err(PolicyError::new(
            ErrorKind::MixedSchemas,
            Some(o.source.clone()),
            format!(
                "this policy uses schema {} but the global config ({}) uses schema {}",
                schema_name(o.value),
                g.source,
                schema_name(g.value)
            ),
        )
        .with_help("layering works field by field, so both layers must use the same schema"));
    }
    let lists = |g: &Option<GlobList>, o: &Option<GlobList>| match o {
        Some(list) if !list.is_empty() => o.clone(),
        _ => g.clone(),
    };
    let mut out = PolicyFields {
        schema: overlay.schema.clone().or_else(|| global.schema.clone()),
        default: overlay.default.clone().or_else(|| global.default.clone()),
        base: overlay.base.clone().or_else(|| global.base.clone()),
        floor_exceptions: global.floor_exceptions.clone(),
        sockets: lists(&global.sockets, &overlay.sockets),
        block_devices: lists(&global.block_devices, &overlay.block_devices),
        kernel_interfaces: lists(&global.kernel_interfaces, &overlay.kernel_interfaces),
        ..PolicyFields::default()
    };
    for i in 0..4 {
        out.v1_lists[i] = lists(&global.v1_lists[i], &overlay.v1_lists[i]);
    }
    for op in 0..3 {
        out.v2_defaults[op] =
            overlay.v2_defaults[op].clone().or_else(|| global.v2_defaults[op].clone());
        for tier in 0..3 {
            out.v2_lists[op][tier] = lists(&global.v2_lists[op][tier], &overlay.v2_lists[op][tier]);
        }
    }
    Ok(out.schema.is_some().then_some(out))
}
