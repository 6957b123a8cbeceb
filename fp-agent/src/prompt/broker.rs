//! The fanotify broker: holds opens of prompt-tier paths by session processes until an approval
//! decides them, and answers every other open at once. docs/prompt.md explains the marks.
//!
//! The broker never opens a file on a filesystem it marks: it reads only /proc and the fds the
//! kernel hands it (an open of its own would wait for an answer only it can give).
use std::collections::HashSet;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::fanotify::{
    EventFFlags, Fanotify, FanotifyEvent, FanotifyResponse, InitFlags, MarkFlags, MaskFlags,
    Response,
};
use tokio::sync::mpsc;

use super::approvals::{Access, Approvals, GrantsChanged, Open, OpenRequest, PromptOutcome};
use super::command::ApprovalCommand;
use crate::policy::{EffectivePolicy, KernelDisposition, Op, Verdict};
use crate::session::Cgroup2;

/// The permission events the broker answers.
const PERMISSION_EVENTS: MaskFlags = MaskFlags::FAN_OPEN_PERM.union(MaskFlags::FAN_OPEN_EXEC_PERM);
/// Longest wait for an opener to go to sleep on its event (its syscall is unreadable before).
const SYSCALL_RUNNING_WAIT: Duration = Duration::from_millis(50);
/// Every rename of a file or directory (reported once, from its old directory).
const RENAME_EVENTS: MaskFlags = MaskFlags::FAN_MOVED_FROM.union(MaskFlags::FAN_ONDIR);

/// A live session, as the host knows it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub id: String,
    /// Its cgroup id (its key in the kernel maps).
    pub cgroup: u64,
    pub agent: String,
    pub policy: Arc<EffectivePolicy>,
}

/// The host's sessions, as the broker asks about them.
///
/// Called on the broker thread for every event it sees: an implementation must never wait for a
/// lock that another thread may hold while it opens a file (loading a policy, writing the audit
/// log), or that open and the broker wait for each other. Hold a snapshot (`Arc` swapped under a
/// lock held only to clone or replace it).
pub trait SessionLookup: Send + Sync {
    /// The session whose cgroup directory is `cgroup` (an absolute path under the cgroup2
    /// mount). The broker asks for the opener's cgroup, then each ancestor.
    fn session(&self, cgroup: &Path) -> Option<SessionInfo>;
    /// Every live session's policy: a file is cached as "never prompted" only when none of them
    /// prompts for it.
    fn policies(&self) -> Vec<Arc<EffectivePolicy>>;
}

#[derive(Clone)]
pub struct BrokerConfig {
    /// A path on each filesystem session processes can reach; each filesystem is marked whole.
    pub filesystems: Vec<PathBuf>,
    /// Undecided approvals are denied after this long.
    pub approval_timeout: Duration,
    pub approval_command: Option<ApprovalCommand>,
    pub cgroup2: Cgroup2,
    /// Most files cached as never prompted (one ignore mark each); the cache is flushed when full.
    pub ignore_cache_limit: usize,
    /// Called from the broker thread at least every `heartbeat_interval` while it serves events
    /// (the kernel half refreshes its heartbeat map here). It must not block or open files.
    pub heartbeat: Option<Heartbeat>,
    pub heartbeat_interval: Duration,
    /// Called with the opener's session cgroup and the (`st_dev`, `st_ino`) of a session's open
    /// once it is answered, before an allow reaches the opener (the kernel half stops refusing
    /// that session's reads of it as pending).
    pub settled: Option<Settled>,
    /// Called with every live grant at start (none) and whenever they change (the kernel half
    /// mirrors them into its `GRANTS` map, so the opens they cover are allowed without a pending
    /// entry).
    pub grants_changed: Option<GrantsChanged>,
}

pub type Heartbeat = Arc<dyn Fn() + Send + Sync>;
pub type Settled = Arc<dyn Fn(u64, u64, u64) + Send + Sync>;

impl BrokerConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
    pub const DEFAULT_IGNORE_CACHE_LIMIT: usize = 65_536;
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

    pub fn new(cgroup2: Cgroup2, filesystems: Vec<PathBuf>) -> Self {
        BrokerConfig {
            filesystems,
            approval_timeout: Self::DEFAULT_TIMEOUT,
            approval_command: None,
            cgroup2,
            ignore_cache_limit: Self::DEFAULT_IGNORE_CACHE_LIMIT,
            heartbeat: None,
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            settled: None,
            grants_changed: None,
        }
    }
}

/// What the broker thread and the answers of held opens share.
struct Shared {
    group: Fanotify,
    /// Reports renames on the marked filesystems (after the fact): a renamed file or directory
    /// may have moved cached files to prompt-tier paths, so each one flushes the cache.
    renames: Fanotify,
    sessions: Arc<dyn SessionLookup>,
    cgroup2: Cgroup2,
    /// Bumped by [`PromptBroker::sessions_changed`]: a cache entry computed under an older
    /// generation may be stale.
    generation: AtomicU64,
    ignore_marks: AtomicUsize,
    ignore_cache_limit: usize,
    /// `st_dev` of marked filesystems whose renames cannot be watched (no file handles, e.g.
    /// 9p): their files are never cached, since a rename there would go unnoticed.
    unwatched: Mutex<HashSet<u64>>,
    settled: Option<Settled>,
}

/// A running broker. Dropping it without [`PromptBroker::shutdown`] also stops it.
pub struct PromptBroker {
    approvals: Arc<Approvals>,
    shared: Arc<Shared>,
    /// Written to stop the broker thread.
    stop: Option<OwnedFd>,
    threads: Vec<JoinHandle<()>>,
}

impl PromptBroker {
    /// Creates the fanotify group, marks the filesystems and starts the broker and timeout
    /// threads. Every prompt outcome arrives on the returned receiver: drain it into the audit
    /// log from a thread that is not the broker's (it never blocks the broker).
    pub fn start(
        config: BrokerConfig,
        sessions: Arc<dyn SessionLookup>,
    ) -> anyhow::Result<(PromptBroker, mpsc::UnboundedReceiver<PromptOutcome>)> {
        let group = Fanotify::init(
            InitFlags::FAN_CLASS_CONTENT
                | InitFlags::FAN_CLOEXEC
                | InitFlags::FAN_NONBLOCK
                | InitFlags::FAN_UNLIMITED_QUEUE
                | InitFlags::FAN_UNLIMITED_MARKS
                | InitFlags::FAN_REPORT_TID,
            EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
        )
        .context("fanotify_init (FAN_CLASS_CONTENT needs CAP_SYS_ADMIN)")?;
        // Renames are directory-entry events: only a group reporting file ids receives them.
        let renames = Fanotify::init(
            InitFlags::FAN_CLASS_NOTIF
                | InitFlags::FAN_CLOEXEC
                | InitFlags::FAN_NONBLOCK
                | InitFlags::from_bits_retain(libc::FAN_REPORT_FID),
            EventFFlags::O_RDONLY,
        )
        .context("fanotify_init of the rename watch")?;
        let (approvals, outcomes) = Approvals::new(
            config.approval_timeout,
            config.approval_command.clone(),
            config.grants_changed.clone(),
        );
        let shared = Arc::new(Shared {
            group,
            renames,
            sessions,
            cgroup2: config.cgroup2.clone(),
            generation: AtomicU64::new(0),
            ignore_marks: AtomicUsize::new(0),
            ignore_cache_limit: config.ignore_cache_limit,
            unwatched: Mutex::new(HashSet::new()),
            settled: config.settled.clone(),
        });
        let (stop_read, stop_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating the broker's stop pipe")?;
        let mut threads = Vec::new();
        let (a, s) = (Arc::clone(&approvals), Arc::clone(&shared));
        let heartbeat = (config.heartbeat.clone(), config.heartbeat_interval);
        threads.push(
            std::thread::Builder::new()
                .name("fp-prompt-broker".into())
                .spawn(move || broker_loop(&s, &a, &stop_read, heartbeat))?,
        );
        let a = Arc::clone(&approvals);
        threads.push(
            std::thread::Builder::new()
                .name("fp-prompt-timeouts".into())
                .spawn(move || a.run_timeouts())?,
        );
        let broker = PromptBroker { approvals, shared, stop: Some(stop_write), threads };
        // Marks only once the broker thread answers: an open on a marked filesystem before that
        // (by any thread of this process, say while holding a lock this one needs) would wait
        // forever.
        for fs in &config.filesystems {
            broker.mark_filesystem(fs)?;
        }
        Ok((broker, outcomes))
    }

    /// The approval store: list, decide, subscribe, grants.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Marks one more filesystem (one mounted after the broker started).
    pub fn mark_filesystem(&self, path: &Path) -> anyhow::Result<()> {
        self.shared.mark_filesystem(path)
    }

    /// Stops watching a filesystem (before unmounting it). Its cached files stay cached.
    pub fn unmark_filesystem(&self, path: &Path) -> anyhow::Result<()> {
        let flags = MarkFlags::FAN_MARK_REMOVE | MarkFlags::FAN_MARK_FILESYSTEM;
        let context = || format!("removing the fanotify marks of {}", path.display());
        self.shared
            .group
            .mark(flags, PERMISSION_EVENTS, AT_FDCWD, Some(path))
            .with_context(context)?;
        let dev = nix::sys::stat::stat(path).with_context(context)?.st_dev;
        if self.shared.unwatched.lock().unwrap().remove(&dev) {
            return Ok(());
        }
        self.shared.renames.mark(flags, RENAME_EVENTS, AT_FDCWD, Some(path)).with_context(context)
    }

    /// Call after a session starts or its policy changes, before its processes run: files cached
    /// as never prompted may be prompt-tier under the new policy.
    pub fn sessions_changed(&self) -> anyhow::Result<()> {
        self.shared.invalidate_cache()
    }

    /// Stops the broker: pending approvals are denied (failed closed), then the group closes.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = nix::unistd::write(&stop, b"x");
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for PromptBroker {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

impl Shared {
    fn mark_filesystem(&self, path: &Path) -> anyhow::Result<()> {
        let flags = MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_FILESYSTEM;
        let context = || format!("fanotify_mark of the filesystem of {}", path.display());
        // Before the permission mark: a file cached meanwhile could otherwise not be dropped.
        match self.renames.mark(flags, RENAME_EVENTS, AT_FDCWD, Some(path)) {
            Ok(()) => {}
            // Rename reports carry file handles, which some filesystems cannot make.
            Err(Errno::EOPNOTSUPP | Errno::ENODEV | Errno::EXDEV) => {
                let dev = nix::sys::stat::stat(path).with_context(context)?.st_dev;
                if self.unwatched.lock().unwrap().insert(dev) {
                    tracing::info!(
                        "renames on the filesystem of {} cannot be watched: its files are \
                         answered without the ignore-mark cache",
                        path.display()
                    );
                }
            }
            Err(e) => return Err(e).with_context(context),
        }
        self.group.mark(flags, PERMISSION_EVENTS, AT_FDCWD, Some(path)).with_context(context)
    }

    /// Cached files may be prompt-tier now: drop them, and any being cached right now.
    fn invalidate_cache(&self) -> anyhow::Result<()> {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.flush_ignore_cache()
    }

    /// Reads every queued rename report; any (or a lost one) invalidates the cache.
    fn drain_renames(&self) {
        let mut renamed = false;
        loop {
            match self.renames.read_events() {
                Ok(events) if !events.is_empty() => renamed = true,
                Err(Errno::EINTR) => {}
                Ok(_) | Err(Errno::EAGAIN) => break,
                Err(e) => {
                    tracing::warn!("reading rename reports: {e}");
                    renamed = true;
                    break;
                }
            }
        }
        if renamed && let Err(e) = self.invalidate_cache() {
            tracing::warn!("{e:#}");
        }
    }

    fn flush_ignore_cache(&self) -> anyhow::Result<()> {
        self.ignore_marks.store(0, Ordering::SeqCst);
        // FAN_MARK_FLUSH without MOUNT/FILESYSTEM removes the inode marks only: the ignore marks.
        self.group
            .mark(MarkFlags::FAN_MARK_FLUSH, MaskFlags::empty(), AT_FDCWD, None::<&Path>)
            .context("flushing the fanotify ignore marks")
    }

    /// Answers an open by a process of the session of cgroup `session`: settled in the kernel
    /// before an allow is sent, so the opener's first read is not refused as pending.
    fn answer_session(&self, event: &FanotifyEvent, session: u64, allow: bool) {
        let settle = || {
            if let (Some(settled), Some(fd)) = (&self.settled, event.fd())
                && let Ok(stat) = nix::sys::stat::fstat(fd)
            {
                settled(session, stat.st_dev, stat.st_ino);
            }
        };
        if allow {
            settle();
        }
        self.answer(event, allow);
        if !allow {
            settle();
        }
    }

    fn answer(&self, event: &FanotifyEvent, allow: bool) {
        let Some(fd) = event.fd() else { return };
        let response = if allow { Response::FAN_ALLOW } else { Response::FAN_DENY };
        if let Err(e) = self.group.write_response(FanotifyResponse::new(fd, response)) {
            // ENOENT: the opener was killed while waiting.
            tracing::debug!("fanotify answer for pid {}: {e}", event.pid());
        }
    }

    /// Caches a file no live session is prompted for as an ignore mark, so its next opens never
    /// reach userspace. Only single-link regular files: another name could be prompt-tier.
    fn cache_if_never_prompted(&self, fd: BorrowedFd<'_>, path: &[u8]) {
        let generation = self.generation.load(Ordering::SeqCst);
        let Ok(stat) = nix::sys::stat::fstat(fd) else { return };
        if stat.st_mode & libc::S_IFMT != libc::S_IFREG
            || stat.st_nlink != 1
            || self.unwatched.lock().unwrap().contains(&stat.st_dev)
        {
            return;
        }
        let prompted = self.sessions.policies().iter().any(|policy| {
            Op::ALL.iter().any(|op| policy.decide(path, *op).verdict == Verdict::Prompt)
        });
        if prompted {
            return;
        }
        if self.ignore_marks.fetch_add(1, Ordering::SeqCst) >= self.ignore_cache_limit
            && let Err(e) = self.flush_ignore_cache()
        {
            tracing::warn!("{e:#}");
        }
        let flags = MarkFlags::FAN_MARK_ADD
            | MarkFlags::FAN_MARK_IGNORED_MASK
            | MarkFlags::FAN_MARK_IGNORED_SURV_MODIFY;
        if let Err(e) = self.group.mark(flags, PERMISSION_EVENTS, fd, None::<&Path>) {
            tracing::debug!("ignore mark: {e}");
        }
        // A session started meanwhile: its policy was not consulted.
        if self.generation.load(Ordering::SeqCst) != generation
            && let Err(e) = self.flush_ignore_cache()
        {
            tracing::warn!("{e:#}");
        }
    }

    /// The session of thread `tid`, from its cgroup and then the cgroup's ancestors.
    fn session_of(&self, tid: i32) -> anyhow::Result<Option<SessionInfo>> {
        if tid <= 0 {
            return Err(anyhow!("the opener is outside the broker's pid namespace"));
        }
        let text = std::fs::read_to_string(format!("/proc/{tid}/cgroup"))
            .with_context(|| format!("reading /proc/{tid}/cgroup"))?;
        let relative = text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or_else(|| anyhow!("thread {tid} has no cgroup v2 membership"))?;
        let mut dir = self.cgroup2.mount.join(relative.trim_start_matches('/'));
        loop {
            if let Some(session) = self.sessions.session(&dir) {
                return Ok(Some(session));
            }
            if dir == self.cgroup2.mount || !dir.pop() {
                return Ok(None);
            }
        }
    }
}

fn broker_loop(
    shared: &Arc<Shared>,
    approvals: &Arc<Approvals>,
    stop: &OwnedFd,
    (heartbeat, interval): (Option<Heartbeat>, Duration),
) {
    let timeout = match heartbeat {
        Some(_) => PollTimeout::try_from(interval).unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    };
    let mut last_beat: Option<std::time::Instant> = None;
    loop {
        if let Some(beat) = &heartbeat
            && last_beat.is_none_or(|t| t.elapsed() >= interval)
        {
            beat();
            last_beat = Some(std::time::Instant::now());
        }
        let mut fds = [
            PollFd::new(shared.group.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.renames.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => tracing::error!("poll on the fanotify group: {e}"),
        }
        let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[1]) {
            shared.drain_renames();
        }
        let stopping = ready(&fds[2]);
        if stopping {
            // Deny what waits and what is still queued, then let the group close.
            approvals.close("the broker stopped");
        }
        drain(shared, approvals);
        if stopping {
            return;
        }
    }
}

/// Handles every queued event.
fn drain(shared: &Arc<Shared>, approvals: &Arc<Approvals>) {
    loop {
        match shared.group.read_events() {
            Ok(events) if events.is_empty() => return,
            Ok(events) => {
                for event in events {
                    handle(shared, approvals, event);
                }
            }
            Err(Errno::EAGAIN) => return,
            Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::error!("reading fanotify events: {e}");
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        }
    }
}

fn handle(shared: &Arc<Shared>, approvals: &Arc<Approvals>, event: FanotifyEvent) {
    let mask = event.mask();
    let Some(fd) = event.fd() else { return }; // queue overflow: no permission event is lost
    if !event.check_version() {
        tracing::error!("fanotify event version {} is unknown: denied", event.version());
        return shared.answer(&event, false);
    }
    let exec = mask.contains(MaskFlags::FAN_OPEN_EXEC_PERM);
    if !exec && !mask.contains(MaskFlags::FAN_OPEN_PERM) {
        return;
    }
    let tid = event.pid();
    let session = match shared.session_of(tid) {
        Ok(Some(session)) => session,
        Ok(None) => {
            shared.answer(&event, true);
            if let Ok(path) = event_path(fd) {
                shared.cache_if_never_prompted(fd, &path);
            }
            return;
        }
        Err(e) => {
            tracing::warn!("open by thread {tid} denied: cannot tell its session: {e:#}");
            return shared.answer(&event, false);
        }
    };
    let access = if exec {
        Access::Exec
    } else {
        match open_access(tid) {
            // The FAN_OPEN_EXEC_PERM event of the same open decides it.
            Opening::InExec => return shared.answer_session(&event, session.cgroup, true),
            Opening::Access(access) => access,
        }
    };
    // Read only when an outcome is recorded: an allowed open needs no comm.
    let request = |path: Vec<u8>, rule: Option<String>| {
        let open = Open {
            session: session.id.clone(),
            agent: session.agent.clone(),
            pid: tid,
            comm: comm(tid),
            access,
            path: String::new(),
            rule,
        };
        OpenRequest::new(open, path)
    };
    let path = match event_path(fd) {
        Ok(path) => path,
        Err(e) => {
            shared.answer_session(&event, session.cgroup, false);
            let reason = format!("the opened file has no path: {e:#}");
            approvals.failed_closed(request(Vec::new(), None), reason);
            return;
        }
    };
    let (verdict, rule, deferred) = decide(&session.policy, &path, access);
    match verdict {
        Verdict::Allow => {
            shared.answer_session(&event, session.cgroup, true);
            shared.cache_if_never_prompted(fd, &path);
        }
        Verdict::Deny => {
            shared.answer_session(&event, session.cgroup, false);
            // The kernel denies and records what it decides itself; a deferred denial is ours.
            if deferred {
                approvals.defer_denied(request(path, rule));
            }
        }
        Verdict::Prompt => {
            let shared = Arc::clone(shared);
            let cgroup = session.cgroup;
            let answer = Box::new(move |allow| shared.answer_session(&event, cgroup, allow));
            approvals.hold(request(path, rule), answer);
        }
    }
}

/// The strictest verdict over the ops of `access`: its deciding rule's text, and whether the
/// kernel tables deferred it to userspace.
fn decide(
    policy: &EffectivePolicy,
    path: &[u8],
    access: Access,
) -> (Verdict, Option<String>, bool) {
    let rank = |v: Verdict| match v {
        Verdict::Allow => 0,
        Verdict::Prompt => 1,
        Verdict::Deny => 2,
    };
    let mut strictest: Option<(Verdict, Option<String>, bool)> = None;
    for op in access.policy_ops() {
        let decision = policy.decide(path, *op);
        if strictest.as_ref().is_none_or(|(v, ..)| rank(decision.verdict) > rank(*v)) {
            let rule = decision.rule.and_then(|r| policy.rule(r)).map(|r| r.text.clone());
            let deferred = decision.kernel == KernelDisposition::Defer;
            strictest = Some((decision.verdict, rule, deferred));
        }
    }
    strictest.unwrap_or((Verdict::Deny, None, false))
}

/// The path of an event's file, from the fd the kernel opened for us (never by reopening it).
fn event_path(fd: BorrowedFd<'_>) -> anyhow::Result<Vec<u8>> {
    let link = nix::fcntl::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str())
        .context("readlink of the event fd")?;
    let mut path = link.as_bytes().to_vec();
    if path.first() != Some(&b'/') {
        return Err(anyhow!("not a path: {}", String::from_utf8_lossy(&path)));
    }
    // An unlinked file (opened through /proc/PID/fd): decide on the name it had.
    if let Some(name) = path.strip_suffix(b" (deleted)")
        && nix::sys::stat::fstat(fd).is_ok_and(|s| s.st_nlink == 0)
    {
        path.truncate(name.len());
    }
    Ok(path)
}

fn comm(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_default()
}

/// What the blocked thread is doing, from its syscall (the open flags are not in the event).
#[derive(Debug, PartialEq, Eq)]
enum Opening {
    /// Inside execve: this FAN_OPEN_PERM comes with the exec event of the same open.
    InExec,
    Access(Access),
}

fn open_access(tid: i32) -> Opening {
    // The opener queues the event, then sleeps until answered; until it sleeps, its syscall reads
    // as `running`, so that is retried (briefly: it cannot get past the open without us).
    let deadline = std::time::Instant::now() + SYSCALL_RUNNING_WAIT;
    while let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/syscall")) {
        if let Some((nr, args)) = parse_syscall(&text) {
            return syscall_opening(tid, nr, &args);
        }
        if !text.starts_with("running") || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::yield_now();
    }
    Opening::Access(Access::ReadWrite)
}

/// `/proc/TID/syscall`: the number and six arguments in hex (or `running` / `-1 ...`).
fn parse_syscall(text: &str) -> Option<(i64, [u64; 6])> {
    let mut fields = text.split_whitespace();
    let nr = fields.next()?.parse().ok()?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(fields.next()?.strip_prefix("0x")?, 16).ok()?;
    }
    Some((nr, args))
}

fn syscall_opening(tid: i32, nr: i64, args: &[u64; 6]) -> Opening {
    let flags = match nr {
        libc::SYS_execve | libc::SYS_execveat => return Opening::InExec,
        libc::SYS_openat | libc::SYS_open_by_handle_at => Some(args[2]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => Some(args[1]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => Some(libc::O_WRONLY as u64),
        libc::SYS_openat2 => open_how_flags(tid, args[2]),
        // io_uring and anything else: the mode is unknown.
        _ => None,
    };
    Opening::Access(flags.map_or(Access::ReadWrite, flags_access))
}

/// `struct open_how.flags` (its first field) from the opener's memory.
fn open_how_flags(tid: i32, address: u64) -> Option<u64> {
    let mem = std::fs::File::open(format!("/proc/{tid}/mem")).ok()?;
    let mut flags = [0u8; 8];
    mem.read_exact_at(&mut flags, address).ok()?;
    Some(u64::from_ne_bytes(flags))
}

fn flags_access(flags: u64) -> Access {
    let flags = flags as i32;
    let writes = flags & (libc::O_TRUNC | libc::O_CREAT) != 0;
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY if !writes => Access::Read,
        libc::O_WRONLY => Access::Write,
        _ => Access::ReadWrite,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_and_open_flags() {
        let line = "257 0xffffff9c 0x7ffd1234 0x0 0x0 0x0 0x0 0x7ffd 0x7f00\n";
        let (nr, args) = parse_syscall(line).unwrap();
        assert_eq!(nr, libc::SYS_openat);
        assert_eq!(syscall_opening(0, nr, &args), Opening::Access(Access::Read));
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(parse_syscall("-1 0x7ffd 0x7f00\n"), None);
        let at = |flags: i32| syscall_opening(0, libc::SYS_openat, &[0, 0, flags as u64, 0, 0, 0]);
        assert_eq!(at(libc::O_WRONLY | libc::O_CREAT), Opening::Access(Access::Write));
        assert_eq!(at(libc::O_RDWR), Opening::Access(Access::ReadWrite));
        assert_eq!(at(libc::O_RDONLY | libc::O_TRUNC), Opening::Access(Access::ReadWrite));
        assert_eq!(syscall_opening(0, libc::SYS_execve, &[0; 6]), Opening::InExec);
        assert_eq!(
            syscall_opening(0, libc::SYS_io_uring_enter, &[0; 6]),
            Opening::Access(Access::ReadWrite)
        );
    }
}
