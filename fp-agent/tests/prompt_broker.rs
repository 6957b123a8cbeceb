//! The prompt broker on this host's own fanotify (root only, no VM): session processes live in a
//! throwaway cgroup, files in a temporary directory on /dev/shm (a tmpfs, so the filesystem mark
//! costs nothing to the rest of the host). Each test removes its cgroup and directory.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fp_agent::policy::{EffectivePolicy, FileKind, LoadOptions, parse_str};
use fp_agent::prompt::{
    Access, ApprovalCommand, BrokerConfig, Decider, Decision, OutcomeKind, PromptBroker,
    PromptOutcome, Remember, SessionLookup, Surface,
};
use fp_agent::session::{Cgroup2, SessionCgroup, SessionContext};
use tokio::sync::mpsc::UnboundedReceiver;

const WAIT: Duration = Duration::from_secs(10);
const CLI: Decider = Decider { uid: 0, surface: Surface::Cli };

struct Lookup {
    cgroup: PathBuf,
    session: SessionContext,
}

impl SessionLookup for Lookup {
    fn session(&self, cgroup: &Path) -> Option<SessionContext> {
        (cgroup == self.cgroup).then(|| self.session.clone())
    }
    fn policies(&self) -> Vec<Arc<EffectivePolicy>> {
        vec![Arc::clone(&self.session.policy)]
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    cgroup: Option<SessionCgroup>,
    broker: Option<PromptBroker>,
    outcomes: UnboundedReceiver<PromptOutcome>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.remove().expect("removing the test cgroup");
        }
        if let Some(broker) = self.broker.take() {
            broker.shutdown();
        }
    }
}

/// A broker whose one session prompts for `<dir>/secrets/**` and `<dir>/bin/**`; None (test
/// skipped) when not root.
fn fixture(configure: impl FnOnce(&mut BrokerConfig)) -> Option<Fixture> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: the prompt broker tests need root (fanotify permission events)");
        return None;
    }
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = tempfile::Builder::new().prefix("fp-prompt-").tempdir_in("/dev/shm").unwrap();
    for sub in ["secrets", "bin", "open"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    for name in ["a", "b", "c"] {
        std::fs::write(dir.path().join("secrets").join(name), format!("secret {name}")).unwrap();
    }
    std::fs::write(dir.path().join("open/x"), "open x").unwrap();
    let d = dir.path().display();
    let text = format!(
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"{d}/secrets/**\", \"{d}/bin/**\"]\n"
    );
    let fields = parse_str(Path::new("test.toml"), &text, FileKind::Policy).unwrap();
    let policy = EffectivePolicy::from_fields(&fields, &LoadOptions::default()).unwrap();
    let hierarchy = Cgroup2::find().unwrap();
    let name =
        format!("fp-prompt-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let root = hierarchy.mount.clone();
    let cgroup = SessionCgroup::create(&hierarchy, &root, &name).unwrap();
    let session = SessionContext::new(name.clone(), "tester".into(), cgroup.id, Arc::new(policy));
    let lookup = Arc::new(Lookup { cgroup: cgroup.path.clone(), session });
    let mut config = BrokerConfig::new(hierarchy, vec![dir.path().to_path_buf()]);
    configure(&mut config);
    let (broker, outcomes) = PromptBroker::start(config, lookup).unwrap();
    Some(Fixture { dir, cgroup: Some(cgroup), broker: Some(broker), outcomes })
}

impl Fixture {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn broker(&self) -> &PromptBroker {
        self.broker.as_ref().unwrap()
    }

    /// `script` in `sh`, inside the session cgroup.
    fn in_session(&self, script: &str) -> Child {
        let procs = self.cgroup.as_ref().unwrap().path.join("cgroup.procs");
        let script = format!("echo $$ > {}; {script}", procs.display());
        outside(&script)
    }

    /// The only pending approval, once there is one.
    fn pending(&self) -> fp_agent::prompt::Approval {
        let deadline = Instant::now() + WAIT;
        loop {
            let list = self.broker().approvals().list();
            if let [one] = list.as_slice() {
                return one.clone();
            }
            assert!(list.len() <= 1, "more than one approval: {list:?}");
            assert!(Instant::now() < deadline, "no approval was opened");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn outcome(&mut self) -> PromptOutcome {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(o) = self.outcomes.try_recv() {
                return o;
            }
            assert!(Instant::now() < deadline, "no prompt outcome");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn approve(&self, id: u64, remember: Option<Remember>, duration: Option<Duration>) {
        self.broker().approvals().decide(id, Decision::Approve, remember, duration, CLI).unwrap();
    }
}

fn outside(script: &str) -> Child {
    Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// fanotify refuses with EPERM (a content-class group cannot choose the errno).
fn assert_refused(out: &Output) {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Operation not permitted"), "{out:?}");
}

fn still_running(child: &mut Child) -> bool {
    std::thread::sleep(Duration::from_millis(100));
    child.try_wait().unwrap().is_none()
}

#[test]
fn approve_lets_the_held_read_through() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let mut child = f.in_session(&format!("exec cat {}", f.path("secrets/a").display()));
    let approval = f.pending();
    assert!(still_running(&mut child), "the open is held");
    assert_eq!(approval.open.comm, "cat");
    assert_eq!(approval.open.agent, "tester");
    assert_eq!(approval.open.access, Access::Read);
    assert_eq!(Path::new(&approval.open.path), f.path("secrets/a"));
    assert!(approval.open.rule.as_deref().is_some_and(|r| r.ends_with("/secrets/**")));
    f.approve(approval.id, None, None);
    let out = finish(child);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"secret a");
    let outcome = f.outcome();
    assert_eq!(outcome.outcome, OutcomeKind::Approved);
    assert_eq!(outcome.decided_by, Some(CLI));
    // A second decision is told the first one won.
    let late = f.broker().approvals().decide(approval.id, Decision::Deny, None, None, CLI);
    assert!(matches!(late, Err(fp_agent::prompt::DecideError::AlreadyDecided(_))), "{late:?}");
}

#[test]
fn deny_and_timeout_refuse_the_open() {
    let Some(mut f) = fixture(|c| c.approval_timeout = Duration::from_millis(300)) else { return };
    let child = f.in_session(&format!("exec cat {}", f.path("secrets/a").display()));
    let approval = f.pending();
    f.broker().approvals().decide(approval.id, Decision::Deny, None, None, CLI).unwrap();
    let out = finish(child);
    assert!(!out.status.success());
    assert_refused(&out);
    assert_eq!(f.outcome().outcome, OutcomeKind::Denied);

    let child = f.in_session(&format!("exec cat {}", f.path("secrets/b").display()));
    let out = finish(child);
    assert_refused(&out);
    let outcome = f.outcome();
    assert_eq!(outcome.outcome, OutcomeKind::TimedOut);
    assert!(outcome.latency_us >= 300_000, "{outcome:?}");
}

#[test]
fn remember_dir_allows_the_next_open_until_it_expires() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let child = f.in_session(&format!("exec cat {}", f.path("secrets/a").display()));
    let approval = f.pending();
    f.approve(approval.id, Some(Remember::Dir), Some(Duration::from_secs(1)));
    assert!(finish(child).status.success());
    let grant = f.outcome().grant.expect("a grant");
    assert_eq!(Path::new(&grant.path), f.path("secrets"));
    assert_eq!(f.broker().approvals().grants(), vec![grant.clone()]);

    let out = finish(f.in_session(&format!("exec cat {}", f.path("secrets/b").display())));
    assert_eq!(out.stdout, b"secret b", "{out:?}");
    let granted = f.outcome();
    assert_eq!(granted.outcome, OutcomeKind::Granted);
    assert_eq!(granted.grant.map(|g| g.id), Some(grant.id));

    std::thread::sleep(Duration::from_millis(1100));
    assert!(f.broker().approvals().grants().is_empty(), "the grant expired");
    let child = f.in_session(&format!("exec cat {}", f.path("secrets/c").display()));
    let approval = f.pending();
    f.broker().approvals().decide(approval.id, Decision::Deny, None, None, CLI).unwrap();
    assert!(!finish(child).status.success());
}

#[test]
fn concurrent_opens_of_one_file_make_one_approval() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let file = f.path("secrets/a");
    let first = f.in_session(&format!("exec cat {}", file.display()));
    let second = f.in_session(&format!("exec cat {}", file.display()));
    let deadline = Instant::now() + WAIT;
    let approval = loop {
        let approval = f.pending();
        if approval.opens == 2 {
            break approval;
        }
        assert!(Instant::now() < deadline, "the second open did not join: {approval:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    f.approve(approval.id, None, None);
    for child in [first, second] {
        assert_eq!(finish(child).stdout, b"secret a");
    }
    assert_eq!(f.outcome().opens, 2);
}

#[test]
fn processes_outside_the_session_are_never_held() {
    let Some(f) = fixture(|_| {}) else { return };
    let files: Vec<String> = ["secrets/a", "secrets/b", "open/x"]
        .iter()
        .map(|p| f.path(p).display().to_string())
        .collect();
    let started = Instant::now();
    let out = finish(outside(&format!("cat {}", files.join(" "))));
    assert_eq!(out.stdout, b"secret asecret bopen x");
    // Held, it would wait for the approval timeout (60 s); a loaded host may take seconds.
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(f.broker().approvals().list().is_empty());
    // Session reads of paths no prompt rule covers are not held either.
    let out = finish(f.in_session(&format!("exec cat {}", files[2])));
    assert_eq!(out.stdout, b"open x");
}

#[test]
fn exec_of_a_prompt_tier_binary_is_held_once() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let binary = f.path("bin/true");
    std::fs::copy("/bin/true", &binary).unwrap();
    let mut child = f.in_session(&format!("exec {}", binary.display()));
    let approval = f.pending();
    assert_eq!(approval.open.access, Access::Exec);
    assert!(still_running(&mut child));
    f.approve(approval.id, None, None);
    let out = finish(child);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(f.outcome().outcome, OutcomeKind::Approved);
    assert!(f.outcomes.try_recv().is_err(), "one exec, one approval");
}

#[test]
fn a_write_open_is_put_to_the_approver_as_a_write() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let file = f.path("secrets/a");
    let child = f.in_session(&format!("echo changed > {}", file.display()));
    let approval = f.pending();
    assert_eq!(approval.open.access, Access::Write);
    f.broker().approvals().decide(approval.id, Decision::Deny, None, None, CLI).unwrap();
    assert!(!finish(child).status.success());
    assert_eq!(f.outcome().outcome, OutcomeKind::Denied);
    assert_eq!(std::fs::read(&file).unwrap(), b"secret a");
}

fn command(script: &str) -> ApprovalCommand {
    ApprovalCommand {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn approval_command_approves_with_a_grant() {
    let cmd = command(r#"grep -q '"comm":"cat"' && echo '{"remember": "path"}'"#);
    let Some(mut f) = fixture(|c| c.approval_command = Some(cmd)) else { return };
    let out = finish(f.in_session(&format!("exec cat {}", f.path("secrets/a").display())));
    assert_eq!(out.stdout, b"secret a", "{out:?}");
    let outcome = f.outcome();
    assert_eq!(outcome.outcome, OutcomeKind::Approved);
    assert_eq!(outcome.decided_by.map(|d| d.surface), Some(Surface::Command));
    assert_eq!(outcome.grant.map(|g| g.scope), Some(Remember::Path));
}

#[test]
fn approval_command_denies() {
    let Some(mut f) = fixture(|c| c.approval_command = Some(command("exit 1"))) else {
        return;
    };
    let out = finish(f.in_session(&format!("exec cat {}", f.path("secrets/a").display())));
    assert_refused(&out);
    assert_eq!(f.outcome().outcome, OutcomeKind::Denied);
}

#[test]
fn shutdown_denies_pending_opens() {
    let Some(mut f) = fixture(|_| {}) else { return };
    let child = f.in_session(&format!("exec cat {}", f.path("secrets/a").display()));
    f.pending();
    f.broker.take().unwrap().shutdown();
    let out = finish(child);
    assert_refused(&out);
    let outcome = f.outcome();
    assert_eq!(outcome.outcome, OutcomeKind::FailedClosed);
    assert!(outcome.reason.is_some());
}

/// Item 9 of issue 13: an answered open settles the pending key of the opener's session only
/// (by its cgroup id), not of every session.
#[test]
fn an_answered_open_is_settled_for_the_openers_session() {
    use std::os::unix::fs::MetadataExt as _;
    let settled = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&settled);
    let Some(mut f) = fixture(|c| {
        c.settled = Some(Arc::new(move |session, dev, ino| {
            seen.lock().unwrap().push((session, dev, ino));
        }));
    }) else {
        return;
    };
    let child = f.in_session(&format!("exec cat {}", f.path("secrets/a").display()));
    let approval = f.pending();
    f.approve(approval.id, None, None);
    assert!(finish(child).status.success());
    assert_eq!(f.outcome().outcome, OutcomeKind::Approved);
    let file = std::fs::metadata(f.path("secrets/a")).unwrap();
    let session = f.cgroup.as_ref().unwrap().id;
    assert_eq!(*settled.lock().unwrap(), [(session, file.dev(), file.ino())]);
}

#[test]
fn the_broker_thread_beats_while_it_serves() {
    let beats = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&beats);
    let Some(f) = fixture(|c| {
        c.heartbeat = Some(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        c.heartbeat_interval = Duration::from_millis(20);
    }) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(beats.load(Ordering::SeqCst) >= 3, "{} beats", beats.load(Ordering::SeqCst));
    drop(f);
}

#[test]
fn a_cached_file_renamed_into_a_prompt_tier_path_is_held_again() {
    let Some(f) = fixture(|_| {}) else { return };
    let (before, after) = (f.path("open/moved"), f.path("secrets/moved"));
    std::fs::write(&before, "moved").unwrap();
    // Read outside the session: no session is prompted for it, so it is cached.
    let out = finish(outside(&format!("cat {}", before.display())));
    assert_eq!(out.stdout, b"moved");
    std::fs::rename(&before, &after).unwrap();
    // The rename report arrives after the fact; give the broker a moment to flush.
    std::thread::sleep(Duration::from_millis(200));
    let child = f.in_session(&format!("exec cat {}", after.display()));
    let approval = f.pending();
    assert_eq!(Path::new(&approval.open.path), after);
    f.approve(approval.id, None, None);
    assert_eq!(finish(child).stdout, b"moved");
}
