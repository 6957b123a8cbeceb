//! Reloading a session's policy swaps its kernel tables atomically: a process hammering a file
//! that both policies deny never gets through during the swaps, and each policy applies once
//! swapped in.
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
    let out = hammer.wait_with_output().unwrap();
    let leaks = String::from_utf8_lossy(&out.stdout).matches("LEAK").count();
    manager.end(id, None, "test over").unwrap();
    manager.shutdown("test over").unwrap();
    assert_eq!(leaks, 0, "the denied file was read {leaks} times during reloads");
    fp_tests::assert_nothing_left_behind();
}
