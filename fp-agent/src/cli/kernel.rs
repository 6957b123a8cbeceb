//! `fp kernel`: what the running kernel offers fp.
use std::process::ExitCode;

use crate::{exit, kernel};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Exit 0 when fp can enforce here, and say through which backend and why: the BPF LSM
    /// where `bpf` is in the active LSM list, else fmod_ret programs on the kernel's security_*
    /// functions, or the one FP_BACKEND names. Attaches pass-through programs briefly (on the
    /// BPF LSM also per cgroup, to an empty cgroup of its own). Also says what fmod_ret programs
    /// can do here.
    Probe {
        #[arg(long)]
        json: bool,
    },
    /// Print the kernel struct offsets the programs use, resolved from this kernel's BTF, and
    /// whether the verdict cache can be on (docs/performance.md, The verdict cache).
    Offsets {
        #[arg(long)]
        json: bool,
    },
}

pub fn main(cmd: Command) -> ExitCode {
    match cmd {
        Command::Probe { json } => {
            let result = crate::session::Cgroup2::find().and_then(|h| kernel::probe(&h.mount));
            let fmod_ret = kernel::probe_fmod_ret();
            let chosen = kernel::chosen_backend();
            if json {
                let error = result.as_ref().err().map(|e| format!("{e:#}"));
                let fmod_ret = match &fmod_ret {
                    Ok(facts) => serde_json::json!(facts),
                    Err(e) => serde_json::json!({ "attaches": false, "error": format!("{e:#}") }),
                };
                let active = kernel::active_lsms();
                let bpf_lsm = active.as_deref().is_some_and(|l| l.split(',').any(|l| l == "bpf"));
                println!(
                    "{}",
                    serde_json::json!({
                        "kernel": kernel::kernel_release(),
                        "enforces": result.is_ok(),
                        "backend": chosen.as_ref().ok().map(|c| c.backend.name()),
                        "why": chosen.as_ref().ok().map(|c| &c.why),
                        "bpf_lsm": bpf_lsm,
                        "active_lsms": active,
                        "error": error,
                        "fmod_ret": fmod_ret,
                    })
                );
            } else {
                match &result {
                    Ok(chosen) => println!(
                        "fp enforces through the {} backend on kernel {}: {}",
                        chosen.backend.name(),
                        kernel::kernel_release(),
                        chosen.why
                    ),
                    Err(e) => eprintln!("fp: {e:#}"),
                }
                print_fmod_ret(&fmod_ret);
            }
            ExitCode::from(if result.is_ok() { exit::OK } else { exit::NO_BACKEND })
        }
        Command::Offsets { json } => {
            let resolved = kernel::btf::Btf::from_sys().and_then(|btf| {
                let loads = kernel::rdonly_cast_ids(btf).is_some();
                Ok((kernel::resolve_offsets(btf)?, kernel::seq_counters(btf).is_some(), loads))
            });
            match resolved {
                Ok((offsets, cache, loads)) if json => println!(
                    "{}",
                    serde_json::json!({
                        "kernel": kernel::kernel_release(),
                        "offsets": offsets,
                        "verdict_cache": cache,
                        "sequence_reads": if loads { "load" } else { "helper" },
                    })
                ),
                Ok((offsets, cache, loads)) => {
                    for o in offsets {
                        let offset =
                            o.offset.map_or_else(|| "absent".to_owned(), |o| o.to_string());
                        println!("{:<26} {}.{} = {offset}", o.global, o.strukt, o.field);
                    }
                    println!(
                        "verdict cache: {}",
                        if cache {
                            "on (rename_lock and mount_lock found in /proc/kallsyms)"
                        } else {
                            "off (rename_lock and mount_lock hidden in /proc/kallsyms)"
                        }
                    );
                    println!(
                        "sequence reads: {}",
                        if loads {
                            "one load each (bpf_rdonly_cast)"
                        } else {
                            "a bpf_probe_read_kernel call each (no bpf_rdonly_cast before Linux 6.2)"
                        }
                    );
                }
                Err(e) => {
                    eprintln!("fp: {e:#}");
                    return ExitCode::from(exit::MISSING_FIELD);
                }
            }
            ExitCode::SUCCESS
        }
    }
}

/// What fmod_ret programs can do here, after the verdict on the chosen backend.
fn print_fmod_ret(facts: &anyhow::Result<kernel::FModRetFacts>) {
    let facts = match facts {
        Ok(facts) => facts,
        Err(e) => return println!("fmod_ret programs: not probed: {e:#}"),
    };
    match &facts.error {
        None => println!("fmod_ret programs on the security_* functions attach here"),
        Some(e) => {
            println!("fmod_ret programs on the security_* functions do not attach here: {e}")
        }
    }
    if !facts.missing.is_empty() {
        println!("  functions missing: {}", facts.missing.join(", "));
    }
    for o in &facts.other_arguments {
        println!(
            "  {}({}) takes other arguments than its hook ({})",
            o.function,
            o.parameters.join(", "),
            o.hook_parameters.join(", ")
        );
    }
    match facts.ftrace_enabled {
        Some(true) => println!("  kernel.ftrace_enabled = 1"),
        Some(false) => println!("  kernel.ftrace_enabled = 0: no fmod_ret program runs"),
        None => println!("  kernel.ftrace_enabled unreadable"),
    }
    match facts.preemption.model {
        Some(model) if model.inside_programs() => println!(
            "  preemption `{}` ({}): tasks preempted inside programs, fmod_ret cannot enforce",
            model.name(),
            facts.preemption.source
        ),
        Some(model) => println!("  preemption `{}` ({})", model.name(), facts.preemption.source),
        None => println!("  preemption unknown: {}", facts.preemption.source),
    }
}
