//! The thin vertical slice, for real: `fp run --deny` confines a command in the kernel.
use std::path::Path;

use fp_agent::owner::Owner;
use fp_tests::{TempTree, exclusive, run_confined, run_outside, statuses, stderr, stdout};

#[test]
fn denied_paths_fail_inside_the_session_and_work_outside() {
    let _g = exclusive();
    let t = TempTree::new("basic");
    let secret = t.file("secret/f", "top secret\n");
    t.file("allowed", "fine\n");
    let d = t.join("secret").display().to_string();
    let a = t.join("allowed").display().to_string();
    let script = statuses(&format!(
        "cat: cat {d}/f\nls: ls {d}\nwrite: echo x > {d}/f\nnew: echo x > {d}/new\nrm: rm -f {d}/f\nallowed: cat {a}\nallowed_write: echo more >> {a}"
    ));
    let inside = run_confined(&[&t.join("secret")], &[], &script);
    let got = stdout(&inside);
    for denied in ["cat=denied", "ls=denied", "write=denied", "new=denied", "rm=denied"] {
        assert!(
            got.contains(denied),
            "expected {denied} inside the session:\n{got}\n{}",
            stderr(&inside)
        );
    }
    assert!(got.contains("allowed=ok") && got.contains("allowed_write=ok"), "{got}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    assert!(!t.join("secret/new").exists());

    let outside = stdout(&run_outside(&script));
    for ok in ["cat=ok", "ls=ok", "write=ok", "new=ok", "rm=ok", "allowed=ok"] {
        assert!(outside.contains(ok), "expected {ok} outside any session:\n{outside}");
    }
}

/// The command starts in `--workspace`, not where fp was started.
#[test]
fn the_command_starts_in_its_workspace() {
    let _g = exclusive();
    let t = TempTree::new("enter");
    let ws = t.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let out = run_confined(&[&t.join("nothing")], &["--workspace", ws.to_str().unwrap()], "pwd");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), ws.display().to_string());
}

#[test]
fn denials_are_reported_on_stderr_and_in_the_log() {
    let _g = exclusive();
    let t = TempTree::new("report");
    t.file("secret/f", "x");
    let f = t.join("secret/f").display().to_string();
    let out = run_confined(&[&t.join("secret")], &[], &format!("cat {f}; rm {f}; true"));
    let err = stderr(&out);
    assert!(err.contains(&format!("fp: denied file_open {f} by cat")), "{err}");
    assert!(err.contains(&format!("fp: denied path_unlink {f} by rm")), "{err}");

    // With --audit-log the session and its denials go to a chained, signed audit log instead.
    let log = t.join("audit.log");
    let out = run_confined(
        &[&t.join("secret")],
        &["--audit-log", log.to_str().unwrap()],
        &format!("cat {f}; true"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("fp: denied"), "{}", stderr(&out));
    let pubkey = format!("{}.pub", log.display());
    let verify = fp_tests::fp()
        .args(["audit", "verify", "--json", "--pubkey", &pubkey])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));
    let replay = fp_tests::fp()
        .args(["audit", "replay", "--json", "--pubkey", &pubkey])
        .arg(&log)
        .output()
        .unwrap();
    let timeline = stdout(&replay);
    for expected in
        [format!("\"path\":\"{f}\""), "\"comm\":\"cat\"".into(), "\"hook\":\"file_open\"".into()]
    {
        assert!(timeline.contains(&expected), "{expected} missing from {timeline}");
    }
    let raw = std::fs::read_to_string(&log).unwrap();
    assert!(raw.contains("session-start") && raw.contains("session-end"), "{raw}");
    // Appending to an existing log needs the key that signs it.
    let again = run_confined(&[&t.join("secret")], &["--audit-log", log.to_str().unwrap()], "true");
    assert_eq!(again.status.code(), Some(125), "{}", stderr(&again));
    assert!(stderr(&again).contains("--audit-key"), "{}", stderr(&again));
}

#[test]
fn children_of_children_stay_confined() {
    let _g = exclusive();
    let t = TempTree::new("nested");
    let f = t.file("secret/f", "x").display().to_string();
    let script = statuses(&format!(
        "nested: sh -c 'sh -c \"cat {f}\"'\nsubshell: (cat {f})\nsetsid: setsid -w sh -c 'cat {f}'\nbackground: sh -c 'cat {f} & wait $!'"
    ));
    let got = stdout(&run_confined(&[&t.join("secret")], &[], &script));
    for name in ["nested", "subshell", "setsid", "background"] {
        assert!(got.contains(&format!("{name}=denied")), "{name} escaped:\n{got}");
    }
}

#[test]
fn aliases_of_a_denied_path_are_denied() {
    let _g = exclusive();
    let t = TempTree::new("alias");
    t.file("secret/sub/f", "x");
    let (d, base) = (t.join("secret").display().to_string(), t.0.display().to_string());
    std::os::unix::fs::symlink(t.join("secret/sub/f"), t.join("link-file")).unwrap();
    std::os::unix::fs::symlink(t.join("secret/sub"), t.join("link-dir")).unwrap();
    std::os::unix::fs::symlink(t.join("link-file"), t.join("link-chain")).unwrap();
    std::fs::create_dir(t.join("open")).unwrap();
    let script = statuses(&format!(
        "symlink_file: cat {base}/link-file\nsymlink_dir: cat {base}/link-dir/f\nsymlink_chain: cat {base}/link-chain\n\
         relative: cd {d}/sub && cat f\ndotdot: cat {base}/open/../secret/sub/f\nslashes: cat {base}//secret/./sub//f\n\
         proc_root: cat /proc/self/root{d}/sub/f\nproc_cwd: cd {d}/sub && cat /proc/self/cwd/f"
    ));
    let got = stdout(&run_confined(&[&t.join("secret")], &[], &script));
    for name in [
        "symlink_file",
        "symlink_dir",
        "symlink_chain",
        "relative",
        "dotdot",
        "slashes",
        "proc_root",
        "proc_cwd",
    ] {
        assert!(got.contains(&format!("{name}=denied")), "{name} was not denied:\n{got}");
    }
}

/// Python that walks 20 components of 250 bytes below `base` with O_PATH directory fds (which
/// do not open the directories), then opens `f` there: more than PATH_MAX from the root.
fn deep_open(base: &Path, create: bool) -> String {
    let c = "d".repeat(250);
    let (mkdir, open) = if create {
        (
            "os.mkdir(c, dir_fd=fd); ",
            "f = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd); os.write(f, b'x')",
        )
    } else {
        ("", "os.open('f', os.O_RDONLY, dir_fd=fd)")
    };
    format!(
        "python3 -c \"
import os
c = '{c}'
fd = os.open('{base}', os.O_PATH | os.O_DIRECTORY)
for i in range(20):
    {mkdir}fd = os.open(c, os.O_PATH | os.O_DIRECTORY, dir_fd=fd)
try:
    {open}; print('long=ok')
except PermissionError:
    print('long=denied')
\"",
        base = base.display()
    )
}

#[test]
fn a_path_the_kernel_cannot_resolve_fully_is_denied() {
    let _g = exclusive();
    let t = TempTree::new("long");
    assert!(stdout(&run_outside(&deep_open(&t.0, true))).contains("long=ok"));
    let out = run_confined(&[&t.join("unrelated")], &[], &deep_open(&t.0, false));
    assert!(stdout(&out).contains("long=denied"), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("unresolved-path"), "{}", stderr(&out));
    // Outside the session nothing is denied.
    assert!(stdout(&run_outside(&deep_open(&t.0, false))).contains("long=ok"));
}

#[test]
fn enforcement_keeps_working_while_fp_is_paused() {
    let _g = exclusive();
    let t = TempTree::new("paused");
    let f = t.file("secret/f", "x").display().to_string();
    // The session stops fp (its parent), reads, then lets fp continue.
    let script = format!(
        "kill -STOP $PPID; ls -d /sys/fs/bpf/fp/v*/ >/dev/null && echo pinned; cat {f} >/dev/null 2>&1; echo paused=$?; kill -CONT $PPID"
    );
    let out = run_confined(&[&t.join("secret")], &[], &script);
    let got = stdout(&out);
    assert!(got.contains("pinned") && got.contains("paused=1"), "{got}\n{}", stderr(&out));
}

/// Starts `fp run --deny <t>/secret -- sh -c "touch <t>/ready; <then>"` and returns once the
/// session's command runs.
fn session_running(t: &TempTree, then: &str) -> std::process::Child {
    let ready = t.join("ready");
    let mut session = fp_tests::fp()
        .args(["run", "--deny"])
        .arg(t.join("secret"))
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}; {then}", ready.display()))
        .spawn()
        .unwrap();
    // Loading and verifying the programs takes a while under TCG, more on a loaded host: wait
    // for the session itself, with a deadline only for a start that never comes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !ready.exists() {
        assert!(session.try_wait().unwrap().is_none(), "fp run exited before the session started");
        assert!(std::time::Instant::now() < deadline, "session did not start within 300 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    session
}

#[test]
fn other_processes_are_never_affected() {
    let _g = exclusive();
    let t = TempTree::new("outside");
    let f = t.file("secret/f", "visible outside\n");
    let mut session = session_running(&t, "sleep 2");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "visible outside\n");
    assert!(session.wait().unwrap().success());
    fp_tests::assert_nothing_left_behind();
}

/// `run_cnt` of the loaded BPF program `name` (bpf_stats on), by `bpftool`, which shows the
/// whole name from BTF or the kernel's, cut to 15 bytes.
fn run_count(name: &str) -> u64 {
    let out = std::process::Command::new("bpftool").args(["prog", "show", "--json"]).output();
    let programs: serde_json::Value = serde_json::from_slice(&out.unwrap().stdout).unwrap();
    let named = |p: &&serde_json::Value| p["name"].as_str().is_some_and(|n| name.starts_with(n));
    let program = programs.as_array().unwrap().iter().find(named);
    program.unwrap_or_else(|| panic!("{name} is not loaded"))["run_cnt"].as_u64().unwrap_or(0)
}

/// The checks of pending files are per cgroup (docs/hooks.md), attached only to the sessions
/// whose tables can prompt (tests/kernel/reload.rs): with a session that cannot, no read or write
/// runs them, the session's own, an outsider's, or one in the cgroup that holds the sessions. The
/// other hooks' programs run for every task, and return at their session check outside sessions.
#[test]
fn no_read_runs_a_pending_check_while_no_session_can_prompt() {
    let _g = exclusive();
    let t = TempTree::new("percgroup");
    let f = t.file("open/f", "x\n");
    let stats = "/proc/sys/kernel/bpf_stats_enabled";
    let was = std::fs::read_to_string(stats).unwrap();
    std::fs::write(stats, "1").unwrap();
    // The session reads and changes a file's mode, then sleeps while outsiders work.
    let pid = t.join("pid");
    let script = format!(
        "cat {f} >/dev/null; chmod 644 {f}; echo $$ > {}; exec sleep 10",
        pid.display(),
        f = f.display()
    );
    let mut session = session_running(&t, &script);
    std::thread::sleep(std::time::Duration::from_millis(500)); // `sleep`'s own opens
    let (chmod, permission) = (run_count("fp_path_chmod"), run_count("fp_file_permission"));
    let mode = std::fs::metadata(&f).unwrap().permissions();
    for _ in 0..200 {
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "x\n");
        std::fs::set_permissions(&f, mode.clone()).unwrap();
    }
    let outside = (run_count("fp_path_chmod"), run_count("fp_file_permission"));
    // `0::/<parent>/<session>`, read from outside the session's cgroup namespace: the parent as
    // this host's cgroup2 mount shows it.
    let pid = std::fs::read_to_string(&pid).unwrap();
    let line = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.trim())).unwrap();
    let session_cgroup = line.trim().trim_start_matches("0::");
    let parent = Path::new(&fp_agent_cgroup_mount())
        .join(session_cgroup.trim_start_matches('/'))
        .parent()
        .unwrap()
        .to_owned();
    let f = f.display();
    let script = format!("for i in $(seq 50); do cat {f} >/dev/null; chmod 644 {f}; done");
    let in_parent = fp_tests::in_cgroup(&parent, &script).status().unwrap();
    let in_parent_permission = run_count("fp_file_permission");
    let ended = session.wait().unwrap();
    std::fs::write(stats, was).unwrap();
    assert!(ended.success() && in_parent.success());
    assert!(chmod > 0, "the session's own chmod ran fp's program");
    assert!(outside.0 >= chmod + 200, "every chmod runs the global program");
    assert_eq!(permission, 0, "a session that cannot prompt ran the pending check");
    assert_eq!(outside.1, 0, "200 reads outside ran the pending check");
    assert_eq!(in_parent_permission, 0, "50 cats in the sessions' parent ran the pending check");
    fp_tests::assert_nothing_left_behind();
}

#[test]
fn exit_status_is_the_commands() {
    let _g = exclusive();
    let none = Path::new("/nonexistent-fp-test");
    assert_eq!(run_confined(&[none], &[], "exit 7").status.code(), Some(7));
    assert_eq!(run_confined(&[none], &[], "kill -TERM $$").status.code(), Some(128 + 15));
    let out =
        fp_tests::fp().args(["run", "--deny", "/x", "--", "/nonexistent/cmd"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    fp_tests::assert_nothing_left_behind();
}

/// Where the BPF LSM is active fp enforces through it, and an operator may choose the fmod_ret
/// backend instead.
#[test]
fn both_backends_enforce_where_the_bpf_lsm_is_active() {
    let _g = exclusive();
    fp_tests::assert_session_denies_its_secret(&[], "bpf_lsm");
    let fmod_ret = [("FP_BACKEND", "fmod_ret")];
    let out = fp_tests::fp().envs(fmod_ret).args(["kernel", "probe", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let probe: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((&probe["backend"], &probe["bpf_lsm"]), (&"fmod_ret".into(), &true.into()));
    assert_eq!(probe["why"], "FP_BACKEND=fmod_ret");
    fp_tests::assert_session_denies_its_secret(&fmod_ret, "fmod_ret");
    fp_tests::assert_nothing_left_behind();
}

/// The probe also removes what a probe killed midway left (its empty cgroup), and only that.
#[test]
fn probe_reports_bpf_lsm_support() {
    let _g = exclusive();
    let cgroup2 = fp_agent_cgroup_mount();
    let mut exited = std::process::Command::new("true").spawn().unwrap();
    exited.wait().unwrap();
    // Named as probes name them (`fp_agent::owner`): a dead pid's, one with this process's pid
    // but another start time (a reused pid's), this process's own; and as older fp versions did.
    let me = Owner::current().unwrap();
    let reused = Owner { start: me.start.map(|s| s + 1), ..me };
    let killed = Owner { pid: exited.id(), start: None };
    let dead: Vec<_> = [reused.name("fp-probe-"), killed.name("fp-probe-")]
        .iter()
        .map(|n| Path::new(&cgroup2).join(n))
        .collect();
    let running_probe = Path::new(&cgroup2).join(me.name("fp-probe-"));
    for dir in dead.iter().chain([&running_probe]) {
        std::fs::create_dir(dir).unwrap();
    }
    let out = fp_tests::fp().args(["kernel", "probe", "--json"]).output().unwrap();
    let kept = running_probe.exists();
    std::fs::remove_dir(&running_probe).unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"bpf_lsm\":true"), "{}", stdout(&out));
    fp_tests::assert_fmod_ret_attaches(&stdout(&out));
    assert!(kept, "a live process's probe cgroup was removed");
    // The per-cgroup twin was attached to an empty cgroup of the probe's own, removed after.
    let left: Vec<_> = std::fs::read_dir(&cgroup2)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fp-probe-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    fp_tests::assert_nothing_left_behind();
}

#[test]
fn sessions_cannot_reach_fp_itself_even_as_root() {
    let _g = exclusive();
    let t = TempTree::new("self");
    let cgroup2 = fp_agent_cgroup_mount();
    let script = statuses(&format!(
        "bpf: bpftool prog show\n\
         signal_fp: kill -TERM $PPID\n\
         trace_fp: cat /proc/$PPID/environ\n\
         own_cgroup: echo $$ > {cgroup2}/cgroup.procs && [ \"$(cat /proc/self/cgroup)\" = 0::/ ]\n\
         own_child: sleep 1 & kill $!"
    ));
    let out = run_confined(&[&t.join("nothing")], &[], &script);
    let got = stdout(&out);
    for denied in ["bpf=denied", "signal_fp=denied", "trace_fp=denied"] {
        assert!(got.contains(denied), "expected {denied}:\n{got}\n{}", stderr(&out));
    }
    // The cgroup mount shows the session its own cgroup, the root of its cgroup namespace: a
    // write there stays inside (leaving by a handed-over fd of the host's hierarchy is refused:
    // tests/escape/boundary.rs, `a_session_makes_cgroups_of_its_own`).
    assert!(got.contains("own_cgroup=ok"), "{got}\n{}", stderr(&out));
    assert!(got.contains("own_child=ok"), "signals inside the session still work:\n{got}");
    assert!(stderr(&out).contains("self-protection"), "{}", stderr(&out));
}

/// Where cgroup2 is mounted in the VM.
fn fp_agent_cgroup_mount() -> String {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .and_then(|l| l.split(' ').nth(4))
        .unwrap()
        .to_owned()
}

/// Every way of changing the mount table, for [`statuses`], with the hook that refuses each in a
/// session. `$T` is the test's tree: `existing` and `newroot` are tmpfs mounts made beforehand,
/// outside the session. busybox and perl print the kernel's error (EACCES) as it is; perl passes
/// strings to syscall() from variables (literals are read-only).
const MOUNT_CHANGES: &str = r#"tmpfs_over_a_path: busybox mount -t tmpfs none $T/over
bind_mount: busybox mount --bind $T/src $T/bind
remount: busybox mount -o remount,ro $T/existing
umount: busybox umount $T/existing
new_mount_api: perl -e 'my ($type, $empty) = ("tmpfs", ""); my $fs = syscall(430, $type, 0); $fs >= 0 or die "fsopen: $!\n"; syscall(431, $fs, 6, 0, 0, 0) == 0 or die "fsconfig: $!\n"; my $m = syscall(432, $fs, 0, 0); $m >= 0 or die "fsmount: $!\n"; syscall(429, $m, $empty, -100, $ARGV[0], 4) == 0 or die "move_mount: $!\n"' $T/over
open_tree_move_mount: perl -e 'my $empty = ""; my $m = syscall(428, -100, $ARGV[0], 1); $m >= 0 or die "open_tree: $!\n"; syscall(429, $m, $empty, -100, $ARGV[1], 4) == 0 or die "move_mount: $!\n"' $T/src $T/bind
pivot_root: unshare -m --propagation unchanged sh -c 'cd $T/newroot && pivot_root . old'
user_namespace: unshare -Urm --propagation unchanged busybox mount -t tmpfs none $T/over"#;

/// The hooks that refuse [`MOUNT_CHANGES`] in a session (a remount reaches sb_mount first).
const MOUNT_HOOKS: [&str; 5] =
    ["sb_mount", "sb_umount", "sb_kern_mount", "move_mount", "sb_pivotroot"];

/// Runs `command` in a private mount namespace where `$T/existing` and `$T/newroot` are tmpfs
/// mounts, so nothing mounted there reaches the host (or outlives the command).
fn in_private_mount_namespace(t: &TempTree, command: &[&str]) -> std::process::Output {
    for dir in ["over", "src", "bind", "existing", "newroot"] {
        std::fs::create_dir(t.join(dir)).unwrap();
    }
    std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs none $T/existing && mount -t tmpfs none $T/newroot \
             && mkdir $T/newroot/old && exec \"$@\"",
        )
        .arg("sh")
        .args(command)
        .env("T", &t.0)
        .output()
        .unwrap()
}

/// A mount could hide a path behind another tree or show a tree under another name: a session,
/// even as root and in its own user namespace, may not change the mount table at all, while the
/// same commands work outside any session. fp and the session run in a private mount namespace,
/// so a regression cannot leave a mount on the host.
#[test]
fn sessions_cannot_change_the_mount_table_even_as_root() {
    let _g = exclusive();
    let script = statuses(MOUNT_CHANGES);
    let names: Vec<&str> =
        MOUNT_CHANGES.lines().filter_map(|l| l.split_once(": ")).map(|(n, _)| n).collect();

    let outside = TempTree::new("mounts-outside");
    let out = in_private_mount_namespace(&outside, &["sh", "-c", &script]);
    let got = stdout(&out);
    for name in &names {
        assert!(
            got.contains(&format!("{name}=ok\n")),
            "{name} failed outside any session:\n{got}{}",
            stderr(&out)
        );
    }

    let inside = TempTree::new("mounts-inside");
    let fp = fp_tests::fp_bin();
    let deny = inside.join("nothing").display().to_string();
    let out = in_private_mount_namespace(
        &inside,
        &[&fp, "run", "--deny", &deny, "--", "sh", "-c", &script],
    );
    fp_tests::assert_nothing_left_behind();
    let (got, err) = (stdout(&out), stderr(&out));
    for name in &names {
        assert!(got.contains(&format!("{name}=denied\n")), "{name} was not refused:\n{got}\n{err}");
    }
    for hook in MOUNT_HOOKS {
        assert!(err.contains(&format!("fp: denied {hook} ")), "no {hook} event:\n{err}");
    }
    assert!(err.contains("self-protection"), "{err}");
}

/// open_tree(2) clones a directory into a detached tree whose fd opens files by paths relative to
/// that directory, around every rule on their real paths (here a glob no inode entry backs):
/// the kernel cannot name such a file from a namespace root, so a session's open of it fails
/// closed, while the same open outside any session works.
#[test]
fn files_in_detached_mount_trees_fail_closed() {
    let _g = exclusive();
    let t = TempTree::new("open-tree");
    t.file("data/x.pem", "key\n");
    let data = t.join("data");
    let policy = t.file(
        "policy.toml",
        &format!(
            "[file_policy]\ndefault = \"write\"\ndeny_paths = [\"{}/*.pem\"]\n",
            data.display()
        ),
    );
    let script = statuses(&format!(
        "plain: cat {d}/x.pem\nclone: {helper} open-tree {d} x.pem",
        d = data.display(),
        helper = env!("CARGO_BIN_EXE_fp-escape-helper")
    ));
    let outside = stdout(&run_outside(&script));
    assert!(outside.contains("plain=ok") && outside.contains("clone=ok"), "{outside}");
    let out = run_confined(&[], &["--policy", policy.to_str().unwrap()], &script);
    let (got, err) = (stdout(&out), stderr(&out));
    assert!(got.contains("plain=denied") && got.contains("clone=denied"), "{got}{err}");
    assert!(err.contains("unresolved"), "the clone's open is denied as unresolved: {err}");
}

/// Where BPF LSM works but bpffs is not mounted (some hosts do not mount it at boot), `fp run`
/// mounts it for the session and unmounts it when the command is done. A private mount namespace
/// without bpffs stands in for such a host, so the host's own bpffs is never touched.
#[test]
fn fp_run_unmounts_the_bpffs_it_mounted() {
    let _g = exclusive();
    let t = TempTree::new("bpffs-mount");
    let fp = fp_tests::fp_bin();
    let bpffs = "grep -c ' /sys/fs/bpf bpf ' /proc/self/mounts";
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "umount -l /sys/fs/bpf && echo before=$({bpffs}) \
             && \"$@\" && echo after=$({bpffs})"
        ))
        .args(["sh", &fp, "run", "--deny"])
        .arg(t.join("secret"))
        .args(["--", "sh", "-c", &format!("echo during=$({bpffs})")])
        .output()
        .unwrap();
    let got = stdout(&out);
    assert!(out.status.success(), "{got}{}", stderr(&out));
    assert_eq!(got, "before=0\nduring=1\nafter=0\n", "{}", stderr(&out));
    fp_tests::assert_nothing_left_behind();
}
