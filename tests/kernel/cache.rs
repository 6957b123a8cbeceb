//! The verdict cache (fp-ebpf/src/cache.rs) and the directory cache (fp-ebpf/src/dirs.rs)
//! against everything that can change a cached file's path without touching the file: a session process keeps a cached, allowed file within reach
//! (its working directory, an open descriptor reopened through /proc/self/fd) while a process
//! outside every session moves its directory, renames it, moves the mount it lives on, and
//! meanwhile creates and removes files and drops the dentry cache, so that freed dentries come
//! back as files under the denied directory. Every open (and every change of the file's times)
//! after a move completed must be denied.
//! (Reloads swap the tables id that entries are keyed by: tests/kernel/reload.rs reads a file
//! before and after a reload denies it.)
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use fp_agent::{
    kernel,
    policy::{EffectivePolicy, LoadOptions},
    session::{Cgroup2, Manager, Sink},
};
use fp_tests::{TempTree, exclusive, in_cgroup, manager_session};

const ROUNDS: usize = 20;

fn sh(script: &str) {
    let status = Command::new("sh").args(["-c", script]).status().unwrap();
    assert!(status.success(), "{script}");
}

/// What the session process does each round: fill the cache with an allowed file, ask the
/// outsider to move it under `secret` (and wait until it has), then open it again, and set its
/// times (`touch -c`: `inode_setattr`, an inode hook, which reads the entries opens leave). A
/// file on a moved mount keeps its times settable: inode hooks decide within the file's own
/// filesystem (docs/hooks.md). The directory cache (fp-ebpf/src/dirs.rs) likewise: a file
/// created beside `f` before the move (`g`, never opened, so only its directory's entry can
/// decide it) and a file created after it must be refused once the directory or mount moved.
fn session_script(base: &Path) -> String {
    format!(
        r#"
B={base}
leak() {{ echo "LEAK $1"; }}
ask() {{ : > $B/req.$1; while [ ! -e $B/done.$1 ]; do sleep 0.01; done; }}
for i in $(seq 1 {ROUNDS}); do
  (cd $B/allowed/d$i && cat f >/dev/null && cat f >/dev/null && touch -c f && : > g && ask dir$i &&
   {{ cat f 2>/dev/null && leak dir$i; touch -c f 2>/dev/null && leak touch-dir$i;
     cat g 2>/dev/null && leak sibling-dir$i; : > h 2>/dev/null && leak create-dir$i; }})
  exec 4< $B/allowed/f$i
  cat /proc/self/fd/4 >/dev/null && cat /proc/self/fd/4 >/dev/null && touch -c /proc/self/fd/4 && ask file$i
  cat /proc/self/fd/4 2>/dev/null && leak file$i; touch -c /proc/self/fd/4 2>/dev/null && leak touch-file$i
  exec 4<&-
  (cd $B/allowed/m$i && cat f >/dev/null && cat f >/dev/null && ask mount$i && cat f 2>/dev/null && leak mount$i;
   : > h 2>/dev/null && leak create-mount$i)
  for f in $B/allowed/j*; do cat $f >/dev/null 2>&1; done
  for f in $B/secret/c*; do cat $f 2>/dev/null && leak churn; done
done
echo DONE
"#,
        base = base.display()
    )
}

#[test]
fn cached_allows_never_outlive_a_move_a_mount_move_or_an_evicted_dentry() {
    let _g = exclusive();
    let t = TempTree::new("cache");
    let base = t.join("base");
    std::fs::create_dir_all(&base).unwrap();
    let b = base.display().to_string();
    // A private tree of its own, so that its mounts can be moved (not under a shared mount).
    sh(&format!("mount -t tmpfs fp-cache {b} && mount --make-rprivate {b}"));
    sh(&format!("mkdir {b}/allowed {b}/secret"));
    for i in 1..=ROUNDS {
        sh(&format!(
            "mkdir {b}/allowed/d{i} {b}/allowed/m{i} && echo x > {b}/allowed/d{i}/f && \
             echo x > {b}/allowed/f{i} && mount -t tmpfs fp-cache-m{i} {b}/allowed/m{i} && \
             echo x > {b}/allowed/m{i}/f && mkdir {b}/secret/m{i}"
        ));
    }
    let policy =
        EffectivePolicy::from_deny_paths(&[base.join("secret")], &LoadOptions::default()).unwrap();
    let parent = Cgroup2::find().unwrap().mount.join("fp");
    let manager =
        Manager::start(parent, kernel::pin_root().join("cache-test"), Sink::Stderr, None).unwrap();
    let (cgroup, id) = manager_session(&manager, "cache-test", policy);
    let mut cmd = in_cgroup(&cgroup, &session_script(&base));
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut session = cmd.spawn().unwrap();

    // The outsider: answers each request once its move is done, and churns the dentry cache.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut step = 0usize;
    let mut answered = 0usize;
    while answered < 3 * ROUNDS
        && Instant::now() < deadline
        && session.try_wait().unwrap().is_none()
    {
        for i in 1..=ROUNDS {
            for (kind, mv) in [
                ("dir", format!("mv {b}/allowed/d{i} {b}/secret/d{i}")),
                ("file", format!("mv {b}/allowed/f{i} {b}/secret/f{i}")),
                ("mount", format!("mount --move {b}/allowed/m{i} {b}/secret/m{i}")),
            ] {
                let (req, done) =
                    (base.join(format!("req.{kind}{i}")), base.join(format!("done.{kind}{i}")));
                if req.exists() && !done.exists() {
                    sh(&mv);
                    std::fs::write(&done, "").unwrap();
                    answered += 1;
                }
            }
        }
        step += 1;
        sh(&format!(
            "for k in 1 2 3 4 5; do echo c > {b}/secret/c{step}_$k; echo j > {b}/allowed/j{step}_$k; done; \
             rm -f {b}/secret/c{old}_* {b}/allowed/j{old}_*",
            old = step.saturating_sub(4)
        ));
        if step.is_multiple_of(8) {
            std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = session.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    manager.end(id, None, "test over").unwrap();
    manager.shutdown("test over").unwrap();
    for i in 1..=ROUNDS {
        sh(&format!("umount {b}/secret/m{i}"));
    }
    sh(&format!("umount {b}"));
    assert_eq!(answered, 3 * ROUNDS, "the session stopped asking: {stdout}");
    assert!(stdout.contains("DONE"), "the session script did not finish: {stdout}");
    let leaks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("LEAK")).collect();
    assert!(leaks.is_empty(), "cached allows outlived what changed the path: {leaks:?}");
    fp_tests::assert_nothing_left_behind();
}

/// The test kernels show the counters the cache needs (as `fp kernel offsets` reports), so the
/// test above exercises the cache rather than the walk alone.
#[test]
fn the_verdict_cache_is_on_in_the_test_kernels() {
    let out = fp_tests::fp().args(["kernel", "offsets", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", fp_tests::stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verdict_cache"], true, "{report}");
    // bpf_rdonly_cast came with 6.2.
    let old = report["kernel"].as_str().is_some_and(|k| k.starts_with("6.1."));
    assert_eq!(report["sequence_reads"], if old { "helper" } else { "load" }, "{report}");
}

/// Runs the shell `script` in a session under `default = "read"`, the workspace writable and
/// `deny_paths = [deny]` (TOML strings), after `setup` ran outside it; both get the workspace
/// (`$W`). The script ends by printing DONE, and reports a wrong verdict as a line starting with
/// LEAK (allowed) or DENIED (refused).
fn workspace_session(name: &str, deny: &str, setup: &str, script: &str) {
    let _g = exclusive();
    let t = TempTree::new(name);
    let ws = t.join("ws");
    let w = ws.display().to_string();
    sh(&format!("W={w}\nmkdir -p $W\n{setup}"));
    let file = t.join("policy.toml");
    std::fs::write(
        &file,
        format!(
            "[file_policy]\ndefault = \"read\"\nwrite_paths = [\"<workspace>/**\"]\n\
             deny_paths = [{deny}]\n"
        ),
    )
    .unwrap();
    let options = LoadOptions {
        policy_files: vec![file],
        workspace: Some(ws.clone()),
        ..LoadOptions::default()
    };
    let policy = EffectivePolicy::load(&options).unwrap();
    let parent = Cgroup2::find().unwrap().mount.join("fp");
    let pins = kernel::pin_root().join(format!("{name}-test"));
    let manager = Manager::start(parent, pins, Sink::Stderr, None).unwrap();
    let (cgroup, id) = manager_session(&manager, &format!("{name}-test"), policy);
    let out = in_cgroup(&cgroup, &format!("W={w}\n{script}\necho DONE")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    manager.end(id, None, "test over").unwrap();
    manager.shutdown("test over").unwrap();
    assert!(
        stdout.contains("DONE"),
        "the session script did not finish: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrong: Vec<&str> =
        stdout.lines().filter(|l| l.starts_with("LEAK") || l.starts_with("DENIED")).collect();
    assert!(wrong.is_empty(), "wrong verdicts: {wrong:?}");
    fp_tests::assert_nothing_left_behind();
}

/// The directory cache keeps a directory's longest LPM match only where no LPM key lies at or
/// below it (fp-ebpf/src/dirs.rs). Names created beside others in such a directory take it
/// (allowed by the workspace's subtree rule); in a directory holding an exact rule, the rule
/// still decides its name after siblings filled the directory's entry. The denied names do not
/// exist when the session starts, so no inode-table entry stands for their rules: only the path
/// decides.
#[test]
fn a_directorys_longest_match_decides_its_names_only_where_no_rule_lies_below_it() {
    // `true`, not `:`: a failed redirection of a special builtin ends the shell.
    workspace_session(
        "dir-lpm",
        r#""<workspace>/d/secret", "<workspace>/d/deep/k""#,
        "mkdir -p $W/plain $W/d/deep",
        r#"
for i in $(seq 1 20); do
  true > $W/plain/f$i || echo "DENIED plain/f$i"; cat $W/plain/f$i >/dev/null || echo "DENIED read plain/f$i"
  true > $W/d/f$i || echo "DENIED d/f$i"; true > $W/d/deep/f$i || echo "DENIED d/deep/f$i"
  true > $W/d/secret 2>/dev/null || true; [ -e $W/d/secret ] && echo "LEAK d/secret" && rm $W/d/secret
  mkfifo $W/d/deep/k 2>/dev/null && echo "LEAK d/deep/k" && rm $W/d/deep/k
done"#,
    );
}

/// The directory cache's verdict for names no name entry can match (fp-ebpf/src/dirs.rs) answers
/// only such names: after siblings filled their directory's entries, names that a basename,
/// suffix or prefix rule matches are still refused when created, opened or removed, and so is a
/// hardlink (made before the session) of a denied file, which its inode-table entry decides.
#[test]
fn a_directorys_verdict_for_unmatched_names_never_answers_a_name_a_rule_matches() {
    workspace_session(
        "dir-unmatched",
        r#""<workspace>/secret/key", "**/.env", "**/*.pem", "**/id_rsa*""#,
        "mkdir -p $W/plain $W/secret && echo k > $W/secret/key && ln $W/secret/key $W/plain/alias\n\
         echo e > $W/plain/.env && echo p > $W/plain/old.pem && echo i > $W/plain/id_rsa_old",
        r#"
P=$W/plain
for i in $(seq 1 20); do
  true > $P/f$i || echo "DENIED f$i"; cat $P/f$i >/dev/null || echo "DENIED read f$i"
  true > $P/g$i.txt || echo "DENIED g$i.txt"; rm $P/g$i.txt || echo "DENIED rm g$i.txt"
  for n in .env new$i.pem id_rsa$i; do
    true > $P/$n 2>/dev/null && echo "LEAK create $n"
  done
  for n in .env old.pem id_rsa_old alias; do
    cat $P/$n >/dev/null 2>&1 && echo "LEAK read $n"; rm $P/$n 2>/dev/null && echo "LEAK rm $n"
  done
done"#,
    );
}
