//! What the prompt broker costs (`cargo xtask bench prompt`, root, native): open+close of files
//! on a filesystem the broker marks, by a process outside every session, and new files created
//! outside every session while the broker marks the filesystem (a session sharing the host's
//! mount namespace) or a session's own mount namespace. Prints one `BENCH <name> <value> <unit>`
//! line per figure; docs/prompt.md records a run.
//!
//! Usage: prompt_bench [--quick]
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fp_agent::policy::{EffectivePolicy, FileKind, LoadOptions, parse_str};
use fp_agent::prompt::{BrokerConfig, PromptBroker, SessionLookup};
use fp_agent::session::{Cgroup2, SessionContext};

/// One session, whose processes this benchmark never runs: it only makes `prompted/` prompt-tier.
struct OneSession {
    policy: Arc<EffectivePolicy>,
}

impl SessionLookup for OneSession {
    fn session(&self, _cgroup: &Path) -> Option<SessionContext> {
        None
    }
    fn policies(&self) -> Vec<Arc<EffectivePolicy>> {
        vec![Arc::clone(&self.policy)]
    }
}

fn open_close(path: &Path) {
    drop(std::fs::File::open(path).expect("open"));
}

/// Mean ns per open+close of `iterations` opens.
fn mean_open(path: &Path, iterations: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        open_close(path);
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

/// Each open+close timed on its own: (p50, p99) in ns.
fn latencies(path: &Path, iterations: u32) -> (f64, f64) {
    let mut samples: Vec<u128> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            open_close(path);
            start.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64;
    (at(0.50), at(0.99))
}

/// Opens per second of `threads` threads opening `path` for `duration`.
fn throughput(path: &Path, threads: u32, duration: Duration) -> f64 {
    let deadline = Instant::now() + duration;
    let counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        open_close(path);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("bench thread")).collect()
    });
    counts.iter().sum::<u64>() as f64 / duration.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (iterations, runs, window) = if quick {
        (1_000, 3, Duration::from_millis(300))
    } else {
        (10_000, 41, Duration::from_secs(3))
    };
    if !nix::unistd::geteuid().is_root() {
        anyhow::bail!("the prompt benchmark needs root (fanotify permission events)");
    }
    // A tmpfs: the filesystem mark then touches nothing else on the host.
    let dir = tempfile::Builder::new().prefix("fp-prompt-bench-").tempdir_in("/dev/shm")?;
    let plain: PathBuf = dir.path().join("plain");
    let prompted: PathBuf = dir.path().join("prompted/file");
    std::fs::create_dir(dir.path().join("prompted"))?;
    std::fs::write(&plain, "x")?;
    std::fs::write(&prompted, "x")?;
    let cold: Vec<PathBuf> = (0..iterations).map(|i| dir.path().join(format!("cold{i}"))).collect();
    for path in &cold {
        std::fs::write(path, "x")?;
    }
    let text = format!(
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"{}/prompted/**\"]\n",
        dir.path().display()
    );
    let fields = parse_str(Path::new("bench.toml"), &text, FileKind::Policy)?;
    let policy = Arc::new(EffectivePolicy::from_fields(&fields, &LoadOptions::default())?);

    let (base_p50, base_p99) = latencies(&plain, iterations);
    let base_rate = throughput(&plain, 2, window);

    let config = BrokerConfig::new(Cgroup2::find()?, vec![dir.path().to_path_buf()]);
    let (broker, _outcomes) = PromptBroker::start(config, Arc::new(OneSession { policy }))?;
    let start = Instant::now();
    for path in &cold {
        open_close(path);
    }
    let first_open = start.elapsed().as_nanos() as f64 / cold.len() as f64;
    // A prompt-tier file is never cached: every open is a round trip, answered allow.
    let (p50, p99) = latencies(&prompted, iterations);
    let rate = throughput(&prompted, 2, window);
    // Cached vs unmarked, alternating (the cached file's ignore mark outlives the unmarking) so
    // that the host's other load weighs on both alike.
    open_close(&plain);
    let (mut unmarked, mut cached) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        broker.unmark_filesystem(dir.path())?;
        unmarked.push(mean_open(&plain, iterations));
        broker.mark_filesystem(dir.path())?;
        cached.push(mean_open(&plain, iterations));
    }
    broker.unmark_filesystem(dir.path())?;
    let files = if quick { 200 } else { 2_000 };
    let [new_files, opens] = outside_session(&broker, dir.path(), files, iterations, runs)?;
    broker.shutdown();
    let (baseline, cached) = (median(unmarked), median(cached));

    println!("BENCH open+close-unmarked {baseline:.0} ns");
    println!("BENCH open+close-marked-cached {cached:.0} ns");
    println!("BENCH added-per-open-cached {:.0} ns", cached - baseline);
    println!("BENCH first-open-of-a-file {first_open:.0} ns");
    println!("BENCH round-trip-p50 {p50:.0} ns (unmarked p50 {base_p50:.0} ns)");
    println!("BENCH round-trip-p99 {p99:.0} ns (unmarked p99 {base_p99:.0} ns)");
    println!("BENCH added-round-trip-p99 {:.0} ns", p99 - base_p99);
    println!("BENCH broker-opens-per-second {rate:.0} /s (unmarked {base_rate:.0} /s, 2 threads)");
    for (name, figures) in [("new-file", new_files), ("open+close", opens)] {
        let [none, filesystem, namespace] = figures.map(median);
        println!("BENCH {name}-outside-unmarked {none:.0} ns");
        println!(
            "BENCH {name}-outside-filesystem-marked {filesystem:.0} ns ({:.3}x)",
            filesystem / none
        );
        println!(
            "BENCH {name}-outside-session-namespace-marked {namespace:.0} ns ({:.3}x)",
            namespace / none
        );
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What this process, outside every session, pays in `dir` with [nothing marked, `dir`'s
/// filesystem marked, the mount of `dir` in a session's own mount namespace marked], `runs`
/// rounds interleaved: the mean ns per new file (create, write, close, as `tar -x` does; `files`
/// of them) and per open+close of an existing file (`iterations` of them). The namespace's mark
/// raises no event for these opens, but it is on their filesystem, which fanotify then checks.
fn outside_session(
    broker: &PromptBroker,
    dir: &Path,
    files: u32,
    iterations: u32,
    runs: u32,
) -> anyhow::Result<[[Vec<f64>; 3]; 2]> {
    // The session: a process in a mount namespace of its own, as `fp run` makes them.
    let mut session = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "slave", "sleep", "600"])
        .spawn()?;
    let ours = std::fs::read_link("/proc/self/ns/mnt")?;
    let its = format!("/proc/{}/ns/mnt", session.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_link(&its).ok().is_none_or(|ns| ns == ours) {
        anyhow::ensure!(Instant::now() < deadline, "unshare --mount did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let in_session = PathBuf::from(format!("/proc/{}/root{}", session.id(), dir.display()));
    // No ignore mark left by the steps before (see below).
    broker.sessions_changed()?;
    let (mut figures, mut opens): ([Vec<f64>; 3], [Vec<f64>; 3]) = Default::default();
    let existing = dir.join("plain");
    for round in 0..runs {
        for (mode, (figure, open)) in figures.iter_mut().zip(&mut opens).enumerate() {
            match mode {
                1 => broker.mark_filesystem(dir)?,
                2 => broker.mark_mount(&in_session)?,
                _ => {}
            }
            let target = dir.join(format!("new-{round}-{mode}"));
            std::fs::create_dir(&target)?;
            let start = Instant::now();
            for i in 0..files {
                std::fs::write(target.join(i.to_string()), "x")?;
            }
            figure.push(start.elapsed().as_nanos() as f64 / f64::from(files));
            open.push(mean_open(&existing, iterations));
            match mode {
                // With the files it cached meanwhile: their ignore marks are inode marks on the
                // filesystem, which would make every later open there take fanotify's slower path.
                1 => {
                    broker.unmark_filesystem(dir)?;
                    broker.sessions_changed()?;
                }
                2 => broker.unmark_mount(&in_session)?,
                _ => {}
            }
            std::fs::remove_dir_all(&target)?;
        }
    }
    session.kill()?;
    session.wait()?;
    Ok([figures, opens])
}
