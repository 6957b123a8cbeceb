//! The fanotify broker: holds opens of prompt-tier paths by session processes until an approval
//! decides them, and answers every other open at once. docs/prompt.md explains the marks.
//!
//! The broker never opens a file on a filesystem it marks: it reads only /proc and the fds the
//! kernel hands it (an open of its own would wait for an answer only it can give).
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd as _, AsRawFd, BorrowedFd, FromRawFd as _, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, FcntlArg, OFlag};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::fanotify::{
    EventFFlags, Fanotify, FanotifyEvent, FanotifyResponse, InitFlags, MarkFlags, MaskFlags,
    Response,
};
use tokio::sync::mpsc;

use super::approvals::{Access, Approvals, Open, OpenRequest, PromptOutcome};
use super::command::ApprovalCommand;
use super::mounts::Namespace;
use super::opener::{Opening, comm, event_path, open_access};
use super::setup::{BrokerConfig, Heartbeat, SessionLookup, Settled};
use crate::policy::{EffectivePolicy, KernelDisposition, Op, Verdict};
use crate::session::{Cgroup2, SessionContext};

/// The permission events the broker answers.
const PERMISSION_EVENTS: MaskFlags = MaskFlags::FAN_OPEN_PERM.union(MaskFlags::FAN_OPEN_EXEC_PERM);
/// Longest wait (ms) before a newly watched mount namespace is polled.
const MOUNT_WATCH_MS: u16 = 500;
/// Every rename of a file or directory (reported once, from its old directory).
const RENAME_EVENTS: MaskFlags = MaskFlags::FAN_MOVED_FROM.union(MaskFlags::FAN_ONDIR);

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
    /// `st_dev` of the filesystems whose renames are watched: only their files are cached, since
    /// a rename elsewhere would go unnoticed (not watched: a filesystem without file handles,
    /// e.g. 9p, or one only a session's own scope mounts are marked on).
    watched: Mutex<HashSet<u64>>,
    /// The own mount namespaces of sessions (by cgroup id), whose new mounts are marked as they
    /// appear.
    namespaces: Mutex<HashMap<u64, Vec<Arc<Namespace>>>>,
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
        // Renames are directory-entry events: only a group reporting file ids receives them.
        let renames = Fanotify::init(
            InitFlags::FAN_CLASS_NOTIF
                | InitFlags::FAN_CLOEXEC
                | InitFlags::FAN_NONBLOCK
                | InitFlags::from_bits_retain(libc::FAN_REPORT_FID),
            EventFFlags::O_RDONLY,
        )
        .context("fanotify_init of the rename watch")?;
        // Created second, its fd above the rename watch's: see `above`.
        let group = above(
            &renames,
            Fanotify::init(
                InitFlags::FAN_CLASS_CONTENT
                    | InitFlags::FAN_CLOEXEC
                    | InitFlags::FAN_NONBLOCK
                    | InitFlags::FAN_UNLIMITED_QUEUE
                    | InitFlags::FAN_UNLIMITED_MARKS
                    | InitFlags::FAN_REPORT_TID,
                EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC,
            )
            .context("fanotify_init (FAN_CLASS_CONTENT needs CAP_SYS_ADMIN)")?,
        )?;
        let (approvals, outcomes) = Approvals::new(
            config.approval_timeout,
            config.approval_command.clone().map(ApprovalCommand::runner),
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
            watched: Mutex::new(HashSet::new()),
            namespaces: Mutex::new(HashMap::new()),
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

    /// Marks the whole filesystem of `path`: every open on it, through any mount.
    pub fn mark_filesystem(&self, path: &Path) -> anyhow::Result<()> {
        self.shared.mark(path, MarkFlags::FAN_MARK_FILESYSTEM, true)
    }

    /// Marks the one mount `path` is on, as the broker marks a scope it made a mount of its own
    /// in a session's namespace: opens through other mounts of its filesystem raise no event, and
    /// renames are not watched (its files are not cached).
    pub fn mark_mount(&self, path: &Path) -> anyhow::Result<()> {
        self.shared.mark(path, MarkFlags::FAN_MARK_MOUNT, false)
    }

    /// Removes the permission mark of the one mount `path` is on.
    pub fn unmark_mount(&self, path: &Path) -> anyhow::Result<()> {
        let flags = MarkFlags::FAN_MARK_REMOVE | MarkFlags::FAN_MARK_MOUNT;
        self.shared.group.mark(flags, PERMISSION_EVENTS, AT_FDCWD, Some(path)).with_context(|| {
            format!("removing the fanotify mark of the mount of {}", path.display())
        })
    }

    /// Marks the mounts of the session of cgroup `session` in its own mount `namespaces` now,
    /// and every mount that appears below their scopes later (a filesystem mounted on the host
    /// propagates into them), until [`PromptBroker::forget_mounts`]. Replaces what was watched for
    /// the session before; none: nothing is watched for it.
    pub fn watch_mounts(&self, session: u64, namespaces: Vec<Namespace>) -> anyhow::Result<()> {
        let namespaces: Vec<Arc<Namespace>> = namespaces.into_iter().map(Arc::new).collect();
        for ns in &namespaces {
            self.shared.mark_namespace(ns)?;
        }
        let mut watched = self.shared.namespaces.lock().unwrap();
        if namespaces.is_empty() {
            watched.remove(&session);
        } else {
            watched.insert(session, namespaces);
        }
        Ok(())
    }

    /// Stops watching the namespaces of sessions `live` says have ended (the namespaces are
    /// released).
    pub fn forget_mounts(&self, live: impl Fn(u64) -> bool) {
        self.shared.namespaces.lock().unwrap().retain(|session, _| live(*session));
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
        if !self.shared.watched.lock().unwrap().remove(&dev) {
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
    /// Marks the filesystem or mount (`object`) of `path` for permission events and, with
    /// `renames`, its filesystem for renames (dirent events need a filesystem or inode mark), so
    /// that its files may be cached. The rename watch is not free for the rest of the host: every
    /// rename on the filesystem becomes a notification.
    fn mark(&self, path: &Path, object: MarkFlags, renames: bool) -> anyhow::Result<()> {
        let flags = MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_FILESYSTEM;
        let context = || format!("fanotify_mark of {}", path.display());
        // Before the permission mark: a file cached meanwhile could otherwise not be dropped.
        if renames {
            let dev = nix::sys::stat::stat(path).with_context(context)?.st_dev;
            match self.renames.mark(flags, RENAME_EVENTS, AT_FDCWD, Some(path)) {
                Ok(()) => {
                    self.watched.lock().unwrap().insert(dev);
                }
                // Rename reports carry file handles, which some filesystems cannot make.
                Err(Errno::EOPNOTSUPP | Errno::ENODEV | Errno::EXDEV) => tracing::info!(
                    "renames on the filesystem of {} cannot be watched: its files are answered \
                     without the ignore-mark cache",
                    path.display()
                ),
                Err(e) => return Err(e).with_context(context),
            }
        }
        let flags = MarkFlags::FAN_MARK_ADD | object;
        self.group.mark(flags, PERMISSION_EVENTS, AT_FDCWD, Some(path)).with_context(context)
    }

    /// Marks every mount of `ns` below its scopes. Renames are watched (and files cached) except
    /// on the mounts of scopes fp made mounts of their own: only the scope's opens raise events
    /// there, and renames elsewhere on the filesystem (by anyone) then cost nothing. A mount that
    /// cannot be marked (gone since the table was read) is only logged: an open through an
    /// unmarked mount fails closed.
    fn mark_namespace(&self, ns: &Namespace) -> anyhow::Result<()> {
        for (mount, cache) in ns.mounts()? {
            if let Err(e) = self.mark(&mount, MarkFlags::FAN_MARK_MOUNT, cache) {
                let at = ns.inside(&mount);
                // procfs, sysfs and the like refuse permission events (FS_DISALLOW_NOTIFY_PERM).
                let why = match e.root_cause().downcast_ref::<Errno>() {
                    Some(Errno::EINVAL) => "its filesystem allows no permission events".to_owned(),
                    _ => format!("{e:#}"),
                };
                tracing::warn!(
                    "prompt tier: opens through the session's mount at {} cannot wait for an \
                     approval ({why}): a prompt-tier file opened there stays unreadable and \
                     unwritable",
                    at.display()
                );
            }
        }
        Ok(())
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
            || !self.watched.lock().unwrap().contains(&stat.st_dev)
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
    fn session_of(&self, tid: i32) -> anyhow::Result<Option<SessionContext>> {
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
        // Held outside the lock: a namespace forgotten meanwhile stays open until polled.
        let namespaces: Vec<Arc<Namespace>> =
            shared.namespaces.lock().unwrap().values().flatten().cloned().collect();
        let mut fds = vec![
            PollFd::new(shared.group.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.renames.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        fds.extend(namespaces.iter().map(|ns| PollFd::new(ns.mount_table(), PollFlags::POLLPRI)));
        // A namespace watched after this poll began is polled from the next round: its table
        // reports every change since it was opened.
        let bounded = (0..=i32::from(MOUNT_WATCH_MS)).contains(&i32::from(timeout));
        let timeout = match namespaces.is_empty() || bounded {
            true => timeout,
            false => PollTimeout::from(MOUNT_WATCH_MS),
        };
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => tracing::error!("poll on the fanotify group: {e}"),
        }
        let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[1]) {
            shared.drain_renames();
        }
        for (ns, fd) in namespaces.iter().zip(&fds[3..]) {
            if ready(fd)
                && let Err(e) = shared.mark_namespace(ns)
            {
                tracing::warn!("marking new mounts of a session: {e:#}");
            }
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

/// `group` with an fd above `low`'s. A process killed while a permission event of `group` waits
/// releases its fds highest first (the exit's task works run last in, first out), and the waiting
/// opener holds a reference on the marks of every group on the file's objects, among them the
/// rename watch's filesystem mark: released first, the rename watch would wait for that opener,
/// which waits for `group`'s release to answer it, forever. Released first, `group` answers it.
fn above(low: &impl AsRawFd, group: Fanotify) -> anyhow::Result<Fanotify> {
    if group.as_raw_fd() > low.as_raw_fd() {
        return Ok(group);
    }
    let fd = nix::fcntl::fcntl(&group, FcntlArg::F_DUPFD_CLOEXEC(low.as_raw_fd() + 1))
        .context("moving the fanotify group's fd")?;
    // SAFETY: `fd` is a new duplicate of the fanotify group's fd, owned by nothing else.
    Ok(unsafe { Fanotify::from_raw_fd(fd) })
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
            session: session.session.clone(),
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
