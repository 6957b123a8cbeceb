//! The op `fp policy explain --op` decides (a contract: its accepted values are the ops' names).
use fp_common::policy::Op;
use fp_common::refer::MoveKind;

/// What `fp policy explain --op` decides: one op on each path, a move from one path to
/// another, a connection to a unix socket served from outside the session, or a kind of perf
/// event. Its values are the ops' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainOp {
    File(Op),
    Move(MoveKind),
    Connect,
    Perf,
}

impl ExplainOp {
    const ALL: [ExplainOp; 8] = [
        ExplainOp::File(Op::Read),
        ExplainOp::File(Op::Write),
        ExplainOp::File(Op::Delete),
        ExplainOp::Move(MoveKind::Rename),
        ExplainOp::Move(MoveKind::Exchange),
        ExplainOp::Move(MoveKind::Link),
        ExplainOp::Connect,
        ExplainOp::Perf,
    ];
}

impl clap::ValueEnum for ExplainOp {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = match self {
            ExplainOp::File(op) => clap::builder::PossibleValue::new(op.name()),
            ExplainOp::Move(kind) => clap::builder::PossibleValue::new(kind.name()),
            ExplainOp::Connect => clap::builder::PossibleValue::new("connect"),
            ExplainOp::Perf => clap::builder::PossibleValue::new("perf"),
        };
        Some(match self {
            ExplainOp::File(_) => value,
            ExplainOp::Connect => {
                value.help("connect(2) or send to a unix socket (PATH or @NAME) served from outside the session")
            }
            ExplainOp::Perf => value.help(
                "perf_event_open(2) of each KIND: user (a process's user-space counters), \
                 cpu-wide, kernel, tracepoint",
            ),
            ExplainOp::Move(MoveKind::Rename) => value.help("rename(SRC, DST)"),
            ExplainOp::Move(MoveKind::Exchange) => {
                value.help("renameat2(SRC, DST, RENAME_EXCHANGE)")
            }
            ExplainOp::Move(MoveKind::Link) => value.help("link(SRC, DST)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    #[test]
    fn explain_accepts_the_op_names() {
        let names: Vec<_> = ExplainOp::ALL
            .iter()
            .map(|op| op.to_possible_value().unwrap().get_name().to_owned())
            .collect();
        assert_eq!(
            names,
            ["read", "write", "delete", "rename", "exchange", "link", "connect", "perf"]
        );
        assert_eq!(ExplainOp::from_str("link", false), Ok(ExplainOp::Move(MoveKind::Link)));
        assert_eq!(ExplainOp::from_str("read", false), Ok(ExplainOp::File(Op::Read)));
    }
}
