//! The session manager over a fake kernel half: cgroups are plain directories in a temp dir, the
//! kernel maps a few sets, the ring buffer a queue.
use std::{
    collections::{HashMap, HashSet, VecDeque},
    os::fd::RawFd,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use fp_common::{
    kernel::{
        DecisionEvent, EVENT_DENIED, GrantValue, Hook, KernelOp, PendingKey, Reason,
        SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT, SESSION_LINKS_PENDING, SESSION_PERF,
        SessionCounters, SessionInfo,
    },
    policy::{NO_RULE, PrefixKeyData, TableVerdict},
};

use super::{
    Cgroup2, Manager, Mode, SessionSpec,
    enforce::Enforce,
    event::policy_hash,
    parent::Parent,
    reader::{EventSource, Outputs, Sink},
};
use crate::{
    audit,
    kernel::{MapUsage, tables::InodeTable},
    policy::{Device, EffectivePolicy, KernelTables, LoadOptions, Peer},
};

/// The kernel maps, as the tests look at them.
#[derive(Default)]
struct Maps {
    /// Installed tables ids.
    tables: HashSet<u64>,
    /// Cgroups the checks of pending files are attached to.
    holds: HashSet<u64>,
    sessions: HashMap<u64, SessionInfo>,
    /// Every value written to `sessions`, in order.
    written: Vec<SessionInfo>,
    /// The unix sockets served from outside each session that it may use.
    unix_peers: HashMap<u64, Vec<Peer>>,
    /// The block devices each session may open past the floor.
    block_devices: HashMap<u64, Vec<Device>>,
    counters: HashMap<u64, SessionCounters>,
    settled: Vec<(u64, u64, u64)>,
    pending: Vec<PendingKey>,
    swept: Option<(HashSet<u64>, HashSet<u64>)>,
    fail_set_session: bool,
}

struct FakeKernel(Arc<Mutex<Maps>>);

impl Enforce for FakeKernel {
    fn install_tables(&mut self, id: u64, _: &KernelTables, _: &InodeTable) -> anyhow::Result<()> {
        assert!(self.0.lock().unwrap().tables.insert(id), "tables {id} installed twice");
        Ok(())
    }
    fn remove_tables(&mut self, id: u64, _: &KernelTables, _: &InodeTable) -> anyhow::Result<()> {
        self.0.lock().unwrap().tables.remove(&id);
        Ok(())
    }
    fn attach_holds(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()> {
        assert!(path.is_dir(), "attached to a cgroup that is not there");
        self.0.lock().unwrap().holds.insert(cgroup);
        Ok(())
    }
    fn set_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        let mut maps = self.0.lock().unwrap();
        if maps.fail_set_session {
            anyhow::bail!("SESSIONS is full");
        }
        maps.sessions.insert(cgroup, info);
        maps.written.push(info);
        maps.counters.entry(cgroup).or_default();
        Ok(())
    }
    fn session(&mut self, cgroup: u64) -> anyhow::Result<SessionInfo> {
        let maps = self.0.lock().unwrap();
        maps.sessions.get(&cgroup).copied().ok_or_else(|| anyhow::anyhow!("no session {cgroup}"))
    }
    fn set_unix_peers(&mut self, cgroup: u64, peers: &[Peer]) -> anyhow::Result<()> {
        self.0.lock().unwrap().unix_peers.insert(cgroup, peers.to_vec());
        Ok(())
    }
    fn set_block_devices(&mut self, cgroup: u64, devices: &[Device]) -> anyhow::Result<()> {
        self.0.lock().unwrap().block_devices.insert(cgroup, devices.to_vec());
        Ok(())
    }
    fn end_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        let mut maps = self.0.lock().unwrap();
        maps.unix_peers.remove(&cgroup);
        maps.block_devices.remove(&cgroup);
        maps.sessions.remove(&cgroup);
        maps.counters.remove(&cgroup);
        Ok(())
    }
    fn sessions(&mut self) -> anyhow::Result<Vec<(u64, SessionInfo)>> {
        Ok(self.0.lock().unwrap().sessions.iter().map(|(k, v)| (*k, *v)).collect())
    }
    fn counters(&mut self, cgroup: u64) -> anyhow::Result<SessionCounters> {
        Ok(self.0.lock().unwrap().counters.get(&cgroup).copied().unwrap_or_default())
    }
    fn sweep(&mut self, tables: &HashSet<u64>, cgroups: &HashSet<u64>) -> anyhow::Result<usize> {
        self.0.lock().unwrap().swept = Some((tables.clone(), cgroups.clone()));
        Ok(0)
    }
    fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<PendingKey>> {
        Ok(std::mem::take(&mut self.0.lock().unwrap().pending))
    }
    fn settle(&mut self, cgroup: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        self.0.lock().unwrap().settled.push((cgroup, st_dev, st_ino));
        Ok(())
    }
    fn set_grants(&mut self, _: &[(u32, PrefixKeyData, GrantValue)]) -> anyhow::Result<()> {
        Ok(())
    }
    fn usage(&mut self) -> anyhow::Result<Vec<MapUsage>> {
        Ok(Vec::new())
    }
    fn hooks(&self) -> Vec<String> {
        Vec::new()
    }
    fn backend(&self) -> crate::kernel::Backend {
        crate::kernel::Backend::BpfLsm
    }
    fn unload(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

struct Queue(Arc<Mutex<VecDeque<DecisionEvent>>>);

impl EventSource for Queue {
    fn next_event(&mut self, record: &mut dyn FnMut(DecisionEvent)) -> bool {
        let Some(&ev) = self.0.lock().unwrap().front() else { return false };
        record(ev);
        self.0.lock().unwrap().pop_front();
        true
    }
    fn raw_fd(&self) -> RawFd {
        -1
    }
}

/// A manager over fakes, with what it recorded and what is queued for it.
struct Fixture {
    manager: Arc<Manager>,
    maps: Arc<Mutex<Maps>>,
    queue: Arc<Mutex<VecDeque<DecisionEvent>>>,
    records: Arc<Mutex<Vec<audit::Event>>>,
    parent: PathBuf,
}

fn fixture(root: &Path, state: Option<PathBuf>, maps: Maps) -> Fixture {
    let hierarchy =
        Cgroup2 { mount: root.to_path_buf(), root: PathBuf::from("/"), nsdelegate: false };
    let parent = root.join("fp");
    std::fs::create_dir_all(&parent).unwrap();
    let (maps, queue) = (Arc::new(Mutex::new(maps)), Arc::new(Mutex::new(VecDeque::new())));
    let records = Arc::new(Mutex::new(Vec::new()));
    let seen = records.clone();
    let observer = Arc::new(move |e: &audit::Event| seen.lock().unwrap().push(e.clone()));
    let manager = Manager::assemble(
        hierarchy,
        Parent { path: parent.clone(), hold: None },
        Box::new(FakeKernel(maps.clone())),
        Box::new(Queue(queue.clone())),
        None,
        Outputs { sink: Sink::Stderr, observer: Some(observer) },
        state,
    );
    Fixture { manager, maps, queue, records, parent }
}

impl Fixture {
    fn records(&self) -> Vec<audit::Event> {
        std::mem::take(&mut self.records.lock().unwrap())
    }
}

fn deny(paths: &[&str]) -> EffectivePolicy {
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    EffectivePolicy::from_deny_paths(&paths, &LoadOptions::default()).unwrap()
}

/// The policy `default = "write"` and the `[file_policy]` lines `text`, for a session of root in
/// the workspace /w.
fn writable_and(text: &str) -> EffectivePolicy {
    let options = LoadOptions {
        policy_text: Some(format!("[file_policy]\ndefault = \"write\"\n{text}")),
        workspace: Some("/w".into()),
        user: Some("root".into()),
        ..LoadOptions::default()
    };
    EffectivePolicy::load(&options).unwrap()
}

fn spec(name: &str, policy: EffectivePolicy, mode: Mode, full_audit: bool) -> SessionSpec {
    SessionSpec {
        name: name.into(),
        agent: "test-agent".into(),
        policy,
        mode,
        full_audit,
        uid: 1000,
        workspace: Some("/w".into()),
        pid: 1,
        command: vec!["true".into()],
    }
}

#[test]
fn the_session_start_names_the_profile_under_its_policy() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let options = LoadOptions {
        profile: Some("claude-code".into()),
        workspace: Some("/w".into()),
        user: Some("root".into()),
        ..LoadOptions::default()
    };
    let policy = EffectivePolicy::load(&options).unwrap();
    let (_, _, id) = f.manager.create(spec("s1", policy, Mode::Enforce, false)).unwrap();
    f.manager.started(id);
    match &f.records()[..] {
        [audit::Event::SessionStart(start)] => {
            assert_eq!(start.profile.as_deref(), Some("claude-code"));
        }
        other => panic!("{other:?}"),
    }
    f.manager.end(id, Some(0), "command exited").unwrap();
}

#[test]
fn a_session_is_installed_once_and_ended_without_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let policy = deny(&["/srv/x"]);
    let expected_hash = policy_hash(&policy);
    let (name, path, id) = f.manager.create(spec("s1", policy, Mode::Audit, true)).unwrap();
    assert_eq!((name.as_str(), path.as_path()), ("s1", f.parent.join("s1").as_path()));
    assert!(path.is_dir());
    {
        let maps = f.maps.lock().unwrap();
        assert_eq!(maps.tables.len(), 1);
        let info = maps.sessions[&id];
        assert!(maps.tables.contains(&info.tables));
        assert_eq!(info.flags, SESSION_AUDIT_ONLY | SESSION_FULL_AUDIT);
    }
    assert!(f.records().is_empty(), "recorded once a process joins");
    f.manager.started(id);
    match &f.records()[..] {
        [audit::Event::SessionStart(start)] => {
            assert_eq!((start.session.as_str(), start.cgroup), ("s1", id));
            assert_eq!(
                (start.policy_hash.as_str(), start.profile.as_deref()),
                (&*expected_hash, None)
            );
        }
        other => panic!("{other:?}"),
    }
    let summary = f.manager.session(id).unwrap();
    assert_eq!((summary.mode, summary.policy_hash.as_str()), (Mode::Audit, &*expected_hash));
    assert_eq!(f.manager.find("s1"), Some(id));

    f.maps.lock().unwrap().counters.get_mut(&id).unwrap().dropped = 3;
    assert_eq!(f.manager.end(id, Some(0), "command exited").unwrap().dropped, 3);
    let maps = f.maps.lock().unwrap();
    assert!(maps.tables.is_empty() && maps.sessions.is_empty());
    assert!(!path.exists());
    match &f.records()[..] {
        [audit::Event::Loss(loss), audit::Event::SessionEnd(end)] => {
            assert_eq!((loss.count, loss.at.as_str()), (3, "kernel-ringbuf"));
            assert_eq!((end.session.as_str(), end.exit_code), ("s1", Some(0)));
        }
        other => panic!("{other:?}"),
    }
    assert!(f.manager.sessions().is_empty());
}

#[test]
fn a_session_the_kernel_refuses_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps { fail_set_session: true, ..Maps::default() });
    let err = f.manager.create(spec("s1", deny(&["/srv/x"]), Mode::Enforce, false)).unwrap_err();
    assert!(format!("{err:#}").contains("SESSIONS is full"), "{err:#}");
    assert!(f.maps.lock().unwrap().tables.is_empty(), "the new tables are rolled back");
    assert!(f.maps.lock().unwrap().sessions.is_empty(), "the session is forgotten");
    assert!(!f.parent.join("s1").exists(), "the cgroup is removed");
    assert!(f.records().is_empty());
    assert!(f.manager.sessions().is_empty());
}

/// A session ended before any process joined it (its client gave up, its first process could not
/// be moved in) leaves no record: nothing ran in it.
#[test]
fn a_session_no_process_joined_leaves_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let (_, path, id) =
        f.manager.create(spec("s1", deny(&["/srv/x"]), Mode::Enforce, false)).unwrap();
    f.manager.end(id, None, "its first process could not join it").unwrap();
    assert!(f.records().is_empty(), "{:?}", f.records());
    assert!(!path.exists() && f.manager.sessions().is_empty());
    assert!(f.maps.lock().unwrap().tables.is_empty());
}

#[test]
fn a_reload_switches_tables_and_keeps_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let (first, second) = (deny(&["/srv/x"]), deny(&["/srv/x", "/srv/y"]));
    let (old_hash, new_hash) = (policy_hash(&first), policy_hash(&second));
    let (_, _, id) = f.manager.create(spec("s1", first, Mode::Enforce, true)).unwrap();
    let old_tables = f.maps.lock().unwrap().sessions[&id].tables;
    f.records();

    let hashes = f.manager.reload(id, second, "test").unwrap();
    assert_eq!(hashes, (old_hash.clone(), new_hash.clone()));
    {
        let maps = f.maps.lock().unwrap();
        let info = maps.sessions[&id];
        assert_ne!(info.tables, old_tables);
        assert_eq!(maps.tables, HashSet::from([info.tables]), "the old tables are removed");
        assert_eq!(info.flags, SESSION_FULL_AUDIT);
    }
    match &f.records()[..] {
        [audit::Event::PolicyReload(r)] => {
            assert_eq!((&r.old_policy_hash, &r.policy_hash), (&old_hash, &new_hash));
            assert_eq!(r.session.as_deref(), Some("s1"));
        }
        other => panic!("{other:?}"),
    }

    // A switch the kernel refuses keeps the session on its tables, and its new ones go.
    let tables = f.maps.lock().unwrap().sessions[&id].tables;
    f.maps.lock().unwrap().fail_set_session = true;
    assert!(f.manager.reload(id, deny(&["/srv/z"]), "test").is_err());
    assert_eq!(f.maps.lock().unwrap().tables, HashSet::from([tables]));
    assert_eq!(f.manager.session(id).unwrap().policy_hash, new_hash);
    assert!(f.records().is_empty());
}

/// A session whose policy keeps a tree read-only starts before that tree is listed for hardlinks,
/// with writes to files of several links refused (`SESSION_LINKS_PENDING`); once listed, it
/// switches to its complete tables, its flags otherwise kept, with no record (its policy is the
/// same).
#[test]
fn a_read_only_tree_is_listed_for_hardlinks_after_the_session_starts() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let tree = dir.path().join("registry");
    std::fs::create_dir(&tree).unwrap();
    let policy = writable_and(&format!("read_paths = [\"{}/**\"]\n", tree.display()));
    let (_, _, id) = f.manager.create(spec("s1", policy, Mode::Enforce, true)).unwrap();
    f.manager.started(id);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.maps.lock().unwrap().written.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let maps = f.maps.lock().unwrap();
    let [first, complete] = maps.written[..] else { panic!("{:?}", maps.written) };
    assert_eq!(first.flags, SESSION_FULL_AUDIT | SESSION_LINKS_PENDING);
    assert_eq!(complete.flags, SESSION_FULL_AUDIT);
    assert_eq!(maps.sessions[&id], complete);
    assert_eq!(maps.tables, HashSet::from([complete.tables]), "the first tables are removed");
    let records = f.records();
    assert!(matches!(records[..], [audit::Event::SessionStart(_)]), "{records:?}");
}

/// A session's `sockets` reach the kernel with its tables, as what each entry names when they
/// are installed (a path that names no socket, nothing); a reload replaces them, the end removes
/// them.
#[test]
fn socket_entries_reach_the_kernel_with_the_tables() {
    let with = |sockets: &str| writable_and(&format!("sockets = [{sockets}]\n"));
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let first = with("\"@agent\", \"/nonexistent/*.sock\"");
    let (_, _, id) = f.manager.create(spec("s1", first, Mode::Enforce, false)).unwrap();
    assert_eq!(f.maps.lock().unwrap().unix_peers[&id], [Peer::Abstract(b"agent".to_vec())]);
    f.manager.reload(id, with("\"@other\""), "test").unwrap();
    assert_eq!(f.maps.lock().unwrap().unix_peers[&id], [Peer::Abstract(b"other".to_vec())]);
    f.manager.end(id, Some(0), "command exited").unwrap();
    assert!(f.maps.lock().unwrap().unix_peers.is_empty());
}

/// A session's `kernel_interfaces` reach the kernel as flags beside its mode's, and its
/// `block_devices` as what each entry names (a glob that names no block device, nothing); a
/// reload replaces both, keeping the mode's flags; the end removes the devices.
#[test]
fn floor_exceptions_reach_the_kernel_with_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let first =
        writable_and("kernel_interfaces = [\"perf\"]\nblock_devices = [\"/nonexistent*\"]\n");
    let (_, _, id) = f.manager.create(spec("s1", first, Mode::Audit, false)).unwrap();
    {
        let maps = f.maps.lock().unwrap();
        assert_eq!(maps.sessions[&id].flags, SESSION_AUDIT_ONLY | SESSION_PERF);
        assert_eq!(maps.block_devices[&id], []);
    }
    f.manager.reload(id, writable_and(""), "test").unwrap();
    assert_eq!(f.maps.lock().unwrap().sessions[&id].flags, SESSION_AUDIT_ONLY);
    f.manager.end(id, Some(0), "command exited").unwrap();
    assert!(f.maps.lock().unwrap().block_devices.is_empty());
}

/// The checks of pending files (kernel::HOLD_HOOKS) are attached only to sessions whose tables
/// can hold an open for the broker: at the start, or by the reload that gives them such tables,
/// before the switch; and they stay.
#[test]
fn pending_checks_are_attached_when_the_tables_can_hold_an_open() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let (_, _, plain) =
        f.manager.create(spec("s1", deny(&["/srv/x"]), Mode::Enforce, false)).unwrap();
    let asks = writable_and("prompt_paths = [\"/srv/secret/**\"]\n");
    let (_, _, asking) = f.manager.create(spec("s2", asks, Mode::Enforce, false)).unwrap();
    assert_eq!(f.maps.lock().unwrap().holds, HashSet::from([asking]));

    f.maps.lock().unwrap().fail_set_session = true;
    assert!(f.manager.reload(plain, writable_and("prompt_paths = [\"**/.env\"]\n"), "t").is_err());
    assert!(f.maps.lock().unwrap().holds.contains(&plain), "attached before the switch");
    f.maps.lock().unwrap().fail_set_session = false;
    f.manager.reload(asking, deny(&["/srv/x"]), "test").unwrap();
    assert!(f.maps.lock().unwrap().holds.contains(&asking), "files may still be pending");
}

/// Item 9 of issue 13: an answered open settles the opener's session's pending key only.
#[test]
fn an_answered_open_settles_the_openers_session_only() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let (_, _, a) = f.manager.create(spec("a", deny(&["/srv/x"]), Mode::Enforce, false)).unwrap();
    let (_, _, _b) = f.manager.create(spec("b", deny(&["/srv/x"]), Mode::Enforce, false)).unwrap();
    f.manager.settle(a, 7, 42).unwrap();
    assert_eq!(f.maps.lock().unwrap().settled, [(a, 7, 42)]);
}

fn event(session: u64, path: &[u8]) -> DecisionEvent {
    // SAFETY: DecisionEvent is plain old data; all-zero is a valid value.
    let mut ev: DecisionEvent = unsafe { std::mem::zeroed() };
    ev.session = session;
    ev.hook = Hook::FileOpen as u8;
    ev.op = KernelOp::Read as u8;
    ev.reason = Reason::PathRule as u8;
    ev.verdict = TableVerdict::Deny as u8;
    ev.flags = EVENT_DENIED;
    ev.rule_id = NO_RULE;
    ev.path[..path.len()].copy_from_slice(path);
    ev.path_len = path.len() as u32;
    ev
}

#[test]
fn events_are_recorded_for_their_session_and_unknown_ones_counted() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(dir.path(), None, Maps::default());
    let policy = deny(&["/srv/x"]);
    let policy_hash = policy_hash(&policy);
    let (_, _, id) = f.manager.create(spec("s1", policy, Mode::Enforce, false)).unwrap();
    f.records();
    f.queue.lock().unwrap().extend([event(id, b"/srv/x"), event(id + 1, b"/srv/x")]);
    f.manager.drain();
    match &f.records()[..] {
        [audit::Event::Decision(d), audit::Event::Loss(loss)] => {
            assert_eq!((d.session.as_str(), d.cgroup), ("s1", id));
            assert_eq!((d.decision, &d.policy_hash), (audit::Verdict::Deny, &policy_hash));
            assert_eq!(d.path, audit::RawPath(b"/srv/x".to_vec()));
            assert_eq!((loss.count, loss.at.as_str()), (1, "unknown-session"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_restarted_agent_takes_over_saved_sessions_and_kills_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let first = fixture(dir.path(), Some(state.clone()), Maps::default());
    let policy = deny(&["/srv/x"]);
    let policy_hash = policy_hash(&policy);
    let (_, path, id) = first.manager.create(spec("s1", policy, Mode::Audit, false)).unwrap();
    assert!(state.join(format!("session-{id}.json")).is_file());
    let info = first.maps.lock().unwrap().sessions[&id];

    // The agent died: its programs still confine s1 and a session no agent saved.
    let unsaved = SessionInfo { tables: 99, ..SessionInfo::default() };
    let pending = PendingKey { session: id, ino: 5, dev: 8, _pad: 0 };
    let maps = Maps {
        sessions: HashMap::from([(id, info), (4242, unsaved)]),
        pending: vec![pending],
        ..Maps::default()
    };
    let second = fixture(dir.path(), Some(state.clone()), maps);
    second.manager.take_over().unwrap();

    let records = second.records();
    let adopted = records.iter().find_map(|r| match r {
        audit::Event::SessionAdopt(a) => Some(a),
        _ => None,
    });
    let adopted = adopted.expect("s1 is adopted");
    assert_eq!((adopted.session.as_str(), adopted.cgroup), ("s1", id));
    assert_eq!(adopted.policy_hash, policy_hash);
    assert!(records.iter().any(|r| matches!(r,
        audit::Event::SessionEnd(e) if e.session == "cgroup-4242"
            && e.reason.contains("could not take it over"))));
    assert!(records.iter().any(|r| matches!(r,
        audit::Event::Decision(d) if d.session == "s1"
            && d.decision == audit::Verdict::PromptDenied && d.ino == 5)));

    let maps = second.maps.lock().unwrap();
    let now = maps.sessions[&id];
    assert_ne!(now.tables, info.tables, "fresh tables");
    assert_eq!(now.flags, SESSION_AUDIT_ONLY, "the session keeps its flags");
    assert!(!maps.sessions.contains_key(&4242));
    assert_eq!(maps.swept, Some((HashSet::from([now.tables]), HashSet::from([id]))));
    drop(maps);
    let summary = second.manager.session(id).unwrap();
    assert_eq!((summary.id.as_str(), summary.mode), ("s1", Mode::Audit));
    assert!(path.is_dir(), "its processes keep running");
}
