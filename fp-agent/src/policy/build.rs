//! Building a session's rules, highest layer first: self-protection, the safety floor less its
//! exceptions, the policy's own rules (both schemas), a shipped profile, and the runtime base.
use std::path::PathBuf;

use super::glob::{self, Expansion};
use super::paths::{check_workspace, home_of, path_glob};
use super::{
    Base, EffectivePolicy, ErrorKind, FP_DIRS, FP_SECRET_DIRS, FloorKind, Layer, LoadOptions,
    MAX_GLOB, Op, PolicyError, PolicyFields, RUNTIME_READ, RUNTIME_READ_WRITE, Rule, SAFETY_FLOOR,
    SavedPolicy, Schema, Source, V1Default, V1Tier, V2Tier, Verdict,
};
use super::{boundary, profile, sockets};

/// Where globs of one layer come from, for the rules built from them.
struct RuleBuilder<'a> {
    expansion: Expansion<'a>,
    rules: Vec<Rule>,
}

impl RuleBuilder<'_> {
    fn add(
        &mut self,
        text: &str,
        source: Source,
        tier: String,
        layer: Layer,
        tier_rank: u32,
        verdicts: [Option<Verdict>; 3],
    ) -> Result<(), PolicyError> {
        let glob = glob::prepare(text, self.expansion).map_err(|(kind, message, help)| {
            PolicyError::new(kind, Some(source.clone()), message).with_help(help)
        })?;
        if glob.len() > MAX_GLOB {
            return Err(PolicyError::new(
                ErrorKind::Limit,
                Some(source),
                format!(
                    "rule is {} bytes long after expansion, the limit is {MAX_GLOB}",
                    glob.len()
                ),
            ));
        }
        let (class, literal) = glob::specificity(&glob);
        let ranks = verdicts.map(|v| {
            v.map_or(0, |v| {
                (layer as u32) << 29
                    | tier_rank << 26
                    | class << 24
                    | literal.min(0x3f_ffff) << 2
                    | v.strictness()
            })
        });
        let id = self.rules.len() as u32;
        self.rules.push(Rule {
            id,
            text: text.to_string(),
            glob,
            tier,
            layer,
            source,
            verdicts,
            ranks,
        });
        Ok(())
    }

    fn builtin(
        &mut self,
        text: &str,
        name: &str,
        layer: Layer,
        verdicts: [Option<Verdict>; 3],
    ) -> Result<(), PolicyError> {
        let source = Source::Builtin { builtin: name.to_string() };
        self.add(text, source, name.to_string(), layer, 0, verdicts)
    }
}

const DENY_ALL: [Option<Verdict>; 3] = [Some(Verdict::Deny); 3];
const DENY_CHANGE: [Option<Verdict>; 3] = [None, Some(Verdict::Deny), Some(Verdict::Deny)];

impl EffectivePolicy {
    pub(super) fn build(
        fields: &PolicyFields,
        options: &LoadOptions,
    ) -> Result<EffectivePolicy, PolicyError> {
        let workspace = match &options.workspace {
            Some(ws) => Some(check_workspace(ws)?),
            None => None,
        };
        let home = home_of(options.user.as_deref())?;
        let mut b = RuleBuilder {
            expansion: Expansion { workspace: workspace.as_deref(), home: &home },
            rules: Vec::new(),
        };
        // Self-protection.
        for dir in FP_DIRS.iter().map(PathBuf::from).chain(options.protected_paths.iter().cloned())
        {
            let text = path_glob(&dir)?;
            b.builtin(&text, "self-protection", Layer::SelfProtection, DENY_CHANGE)?;
            b.builtin(
                &format!("{text}/**"),
                "self-protection",
                Layer::SelfProtection,
                DENY_CHANGE,
            )?;
        }
        for dir in
            FP_SECRET_DIRS.iter().map(PathBuf::from).chain(options.secret_paths.iter().cloned())
        {
            let text = path_glob(&dir)?;
            b.builtin(&text, "self-protection secrets", Layer::SelfProtection, DENY_ALL)?;
            let sub = format!("{text}/**");
            b.builtin(&sub, "self-protection secrets", Layer::SelfProtection, DENY_ALL)?;
        }
        // Safety floor, less the operator's named exceptions.
        let exceptions = fields.floor_exceptions.clone().unwrap_or_default();
        for e in &exceptions {
            if !SAFETY_FLOOR.iter().any(|f| f.name == e.value) {
                let names: Vec<&str> = SAFETY_FLOOR.iter().map(|f| f.name).collect();
                return Err(PolicyError::new(
                    ErrorKind::BadValue,
                    Some(e.source.clone()),
                    format!("unknown safety-floor entry \"{}\" in floor_exceptions", e.value),
                )
                .with_help(format!("floor entries: {}", names.join(", "))));
            }
        }
        for entry in SAFETY_FLOOR {
            if exceptions.iter().any(|e| e.value == entry.name) {
                continue;
            }
            let verdicts = match entry.kind {
                FloorKind::Secret => DENY_ALL,
                FloorKind::ReadOnly => DENY_CHANGE,
            };
            for g in entry.globs {
                b.builtin(
                    g,
                    &format!("safety floor {}", entry.name),
                    Layer::SafetyFloor,
                    verdicts,
                )?;
            }
        }
        // The policy itself.
        let (schema, defaults) = policy_rules(fields, &mut b)?;
        // The profile, under it.
        if let Some(name) = &options.profile {
            for file in profile::files(name)? {
                v2_rules(&file, &mut b, Layer::Profile)?;
            }
        }
        // Runtime base.
        let base = fields.base.as_ref().map_or(Base::System, |b| b.value);
        if base == Base::System {
            for g in RUNTIME_READ {
                b.builtin(
                    g,
                    "runtime base",
                    Layer::RuntimeBase,
                    [Some(Verdict::Allow), None, None],
                )?;
            }
            for g in RUNTIME_READ_WRITE {
                let verdicts = [Some(Verdict::Allow), Some(Verdict::Allow), None];
                b.builtin(g, "runtime base", Layer::RuntimeBase, verdicts)?;
            }
            // The workspace directory itself (`<workspace>/**` is what is below it): tools list
            // and open their working directory.
            if workspace.is_some() {
                let read = [Some(Verdict::Allow), None, None];
                b.builtin("<workspace>", "runtime base", Layer::RuntimeBase, read)?;
            }
        }
        let sockets = sockets::build(fields.sockets.as_deref().unwrap_or_default(), b.expansion)?;
        let block_devices = boundary::build_devices(
            fields.block_devices.as_deref().unwrap_or_default(),
            b.expansion,
        )?;
        let kernel_interfaces =
            boundary::build_interfaces(fields.kernel_interfaces.as_deref().unwrap_or_default())?;
        Self::assemble(SavedPolicy {
            schema,
            defaults,
            base,
            rules: b.rules,
            floor_exceptions: exceptions,
            sockets,
            block_devices,
            kernel_interfaces,
            profile: options.profile.clone(),
        })
    }
}

/// The policy's own rules, and its default per op.
fn policy_rules(
    fields: &PolicyFields,
    b: &mut RuleBuilder<'_>,
) -> Result<(Option<Schema>, [Verdict; 3]), PolicyError> {
    use Verdict::{Allow, Deny, Prompt};
    let schema = fields.schema.as_ref().map(|s| s.value);
    match schema {
        Some(Schema::V1) | None => {
            // v1 tiers, strictest first; delete counts as write.
            let tiers: [(V1Tier, u32, [Option<Verdict>; 3]); 4] = [
                (V1Tier::Deny, 4, [Some(Deny); 3]),
                (V1Tier::Prompt, 3, [Some(Prompt); 3]),
                (V1Tier::Read, 2, [Some(Allow), Some(Deny), Some(Deny)]),
                (V1Tier::Write, 1, [Some(Allow); 3]),
            ];
            for (tier, tier_rank, verdicts) in tiers {
                for g in fields.v1_lists[tier as usize].iter().flatten() {
                    b.add(
                        &g.value,
                        g.source.clone(),
                        tier.key().to_string(),
                        Layer::Policy,
                        tier_rank,
                        verdicts,
                    )?;
                }
            }
            let defaults = match fields.default.as_ref().map_or(V1Default::Deny, |d| d.value) {
                V1Default::Deny => [Deny; 3],
                V1Default::Prompt => [Prompt; 3],
                V1Default::Read => [Allow, Deny, Deny],
                V1Default::Write => [Allow; 3],
            };
            Ok((schema, defaults))
        }
        Some(Schema::V2) => {
            let mut defaults = [Deny; 3];
            for op in Op::ALL {
                if let Some(d) = &fields.v2_defaults[op.index()] {
                    defaults[op.index()] = tier_verdict(d.value);
                }
            }
            v2_rules(fields, b, Layer::Policy)?;
            Ok((schema, defaults))
        }
    }
}

/// The per-op lists of schema v2 as rules of `layer`: specificity decides among them, then
/// strictness.
fn v2_rules(
    fields: &PolicyFields,
    b: &mut RuleBuilder<'_>,
    layer: Layer,
) -> Result<(), PolicyError> {
    for op in Op::ALL {
        let i = op.index();
        for tier in V2Tier::ALL {
            let mut verdicts = [None; 3];
            verdicts[i] = Some(tier_verdict(tier));
            let name = format!("{}.{}", op.name(), tier.key());
            for g in fields.v2_lists[i][tier as usize].iter().flatten() {
                b.add(&g.value, g.source.clone(), name.clone(), layer, 0, verdicts)?;
            }
        }
    }
    Ok(())
}

fn tier_verdict(tier: V2Tier) -> Verdict {
    match tier {
        V2Tier::Silent => Verdict::Allow,
        V2Tier::Prompt => Verdict::Prompt,
        V2Tier::Deny => Verdict::Deny,
    }
}
