//! `cargo xtask demo`: boots the test VM and shows an agent's shell confined by `fp run --deny`,
//! next to the same commands outside any session.
use crate::kernels;
use crate::{setup, step::Report};
use crate::{test_kernel, vm};
use anyhow::{Result, bail};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Which pinned kernel to boot.
    #[arg(long, default_value = "6.12")]
    kernel: String,
}

/// Runs in the guest; `@FP@` becomes the fp binary.
const SCRIPT: &str = r#"
set -e
mkdir -p /tmp/project/.secrets
echo 'AKIA-DEMO-NOT-A-REAL-KEY' > /tmp/project/.secrets/api-key
echo 'print("hello")' > /tmp/project/main.py
agent='
  echo "[agent] cat main.py";                cat /tmp/project/main.py
  echo "[agent] cat .secrets/api-key";       cat /tmp/project/.secrets/api-key
  echo "[agent] cd .secrets; cat api-key";   (cd /tmp/project/.secrets && cat api-key)
  echo "[agent] cat via a symlink";          ln -sf /tmp/project/.secrets/api-key /tmp/k; cat /tmp/k
  echo "[agent] echo ... | xargs cat";       echo /tmp/project/.secrets/api-key | xargs cat
  echo "[agent] rm .secrets/api-key";        rm -f /tmp/project/.secrets/api-key
  true'
echo "=== Outside any session (kernel $(uname -r)): the agent's shell reads the key ==="
sh -c "$agent" 2>&1 | sed 's/^/    /'
echo 'AKIA-DEMO-NOT-A-REAL-KEY' > /tmp/project/.secrets/api-key
echo
echo "=== fp run --deny /tmp/project/.secrets -- sh -c ... : the kernel refuses every route ==="
@FP@ run --deny /tmp/project/.secrets -- sh -c "$agent" 2>&1 | sed 's/^/    /'
echo
echo "=== After the session ==="
echo "    the key is intact: $(cat /tmp/project/.secrets/api-key)"
echo "    fp pins left in bpffs: $(ls /sys/fs/bpf | grep -c fp || true); fp cgroups left: $(ls /sys/fs/cgroup | grep -c '^fp$' || true)"
"#;

pub fn main(args: DemoArgs) -> Result<ExitCode> {
    setup::run(Report::ChangesOnly)?;
    let fp = test_kernel::build_fp()?;
    let kernel = kernels::ensure(kernels::find(&args.kernel)?, Report::ChangesOnly)?;
    let run = vm::VmRun {
        timeout: Duration::from_secs(300),
        rw: Vec::new(),
        env: vm::guest_env(),
        cwd: "/".into(),
        command: vec!["sh".into(), "-c".into(), SCRIPT.replace("@FP@", &fp.display().to_string())],
        cmdline: None,
        cpus: vm::CPUS,
        clock: vm::GuestClock::Host,
    };
    let finished = vm::boot(&kernel, &run)?;
    let denied = finished.output.matches("fp: denied").count();
    if finished.exit_code != 0 || denied < 5 || !finished.output.contains("the key is intact: AKIA")
    {
        bail!(
            "the demo did not show what it should (exit {}, {denied} denials)",
            finished.exit_code
        );
    }
    println!(
        "demo: {denied} operations denied in the kernel; the same commands succeeded outside the session"
    );
    Ok(ExitCode::SUCCESS)
}
