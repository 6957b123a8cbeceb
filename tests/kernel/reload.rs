//! Reloading a session's policy swaps its kernel tables atomically: a process hammering a file
//! that both policies deny never gets through during the swaps, one hammering a file both allow
//! is never refused, and each policy applies once swapped in.
use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use fp_agent::{
    kernel,
    policy::{EffectivePolicy, LoadOptions},
    session::{Cgroup2, Manager, Sink},
};
use fp_tests::{TempTree, exclusive, in_cgroup, manager_session};

fn deny(paths: &[PathBuf]) -> EffectivePolicy {
    EffectivePolicy::from_deny_paths(paths, &LoadOptions::default()).unwrap()
}

#[test]
fn reloads_swap_tables_without_a_gap() {
    let _g = exclusive();
    let t = TempTree::new("reload");
    let secret = t.file("secret", "s\n");
    let other = t.file("other", "o\n");
    let free = t.file("free", "f\n");
    let parent = Cgroup2::find().unwrap().mount.join("fp");
    let manager =
        Manager::start(parent, kernel::pin_root().join("reload-test"), Sink::Stderr, None).unwrap();
    let (cgroup, id) =
        manager_session(&manager, "reload-test", deny(std::slice::from_ref(&secret)));
    let s = secret.display();
    let mut hammer =
        in_cgroup(&cgroup, &format!("while :; do cat {s} >/dev/null 2>&1 && echo LEAK; done"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    // A decision that runs while the tables are swapped decides under the tables it began with.
    let mut allowed = in_cgroup(
        &cgroup,
        // Truncations (decided in full every time, no cache answers them) without a fork in
        // between: most of its time is spent deciding.
        &format!("while :; do : > {} || echo REFUSED; done", free.display()),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let both = [secret.clone(), other.clone()];
    for i in 0..40 {
        let policy = if i % 2 == 0 { deny(&both) } else { deny(std::slice::from_ref(&secret)) };
        manager.reload(id, policy, "test").unwrap();
    }
    // The last reload (i = 39) left only `secret` denied; one more makes `other` denied too.
    let read_other = |cgroup: &Path| {
        in_cgroup(cgroup, &format!("cat {}", other.display())).output().unwrap().status.success()
    };
    assert!(read_other(&cgroup), "other is allowed under the first policy");
    manager.reload(id, deny(&both), "test").unwrap();
    assert!(!read_other(&cgroup), "other is denied once the second policy is swapped in");
    hammer.kill().unwrap();
    allowed.kill().unwrap();
    let out = hammer.wait_with_output().unwrap();
    let leaks = String::from_utf8_lossy(&out.stdout).matches("LEAK").count();
    let out = allowed.wait_with_output().unwrap();
    let refused = String::from_utf8_lossy(&out.stdout).matches("REFUSED").count();
    manager.end(id, None, "test over").unwrap();
    manager.shutdown("test over").unwrap();
    assert_eq!(leaks, 0, "the denied file was read {leaks} times during reloads");
    assert_eq!(refused, 0, "the allowed file was refused {refused} times during reloads");
    fp_tests::assert_nothing_left_behind();
}

/// A session whose tables cannot prompt has no check of pending files on its reads, writes and
/// maps (`kernel::HOLD_HOOKS`); the reload that gives it a prompt rule attaches them before its
/// tables are switched: to its cgroup on the BPF LSM backend, for every task on fmod_ret (where
/// no task runs them while no session can prompt).
#[test]
fn a_reload_to_tables_that_can_prompt_attaches_the_pending_checks_first() {
    let _g = exclusive();
    let t = TempTree::new("reload-holds");
    let file = t.file("f", "x\n");
    let pins = kernel::pin_root().join("reload-holds-test");
    let parent = Cgroup2::find().unwrap().mount.join("fp");
    let manager = Manager::start(parent, pins.clone(), Sink::Stderr, None).unwrap();
    let (cgroup, id) = manager_session(&manager, "reload-holds", deny(&[t.join("secret")]));
    let links = match manager.backend() {
        Some(kernel::Backend::BpfLsm) => pins.join(kernel::SESSION_LINKS).join(id.to_string()),
        _ => pins.clone(),
    };
    let attached = |hook: &str| links.join(format!("link_{hook}")).exists();
    let read = || {
        in_cgroup(&cgroup, &format!("cat {}", file.display())).output().unwrap().status.success()
    };
    assert!(pins.join("link_path_chmod").exists() && read(), "the other hooks are global");
    assert!(!kernel::HOLD_HOOKS.iter().any(|h| attached(h)), "no prompt rule, no pending checks");
    let asks = format!(
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"{}/**\"]\n",
        t.join("asked").display()
    );
    let options = LoadOptions { policy_text: Some(asks), ..LoadOptions::default() };
    manager.reload(id, EffectivePolicy::load(&options).unwrap(), "test").unwrap();
    assert!(kernel::HOLD_HOOKS.iter().all(|h| attached(h)), "attached by the reload");
    assert!(read(), "a file no prompt holds is read as before");
    manager.end(id, None, "test over").unwrap();
    manager.shutdown("test over").unwrap();
    fp_tests::assert_nothing_left_behind();
}
