//! The hardlinks below the trees a session's policy keeps read-only (writes withheld, reads not),
//! looked for after the session starts (crate::kernel::tables): listing `~/.rustup` takes
//! seconds, which a session's start must not wait for. Meanwhile the session's flag
//! `SESSION_LINKS_PENDING` has the kernel refuse writes to every file with several links; once
//! the listing is done, the session switches to its complete tables (a new tables id, as a reload)
//! and the flag goes.
use std::time::Instant;

use super::Manager;
use crate::kernel::tables::InodeTable;

impl Manager {
    /// Looks for the hardlinks `inodes` deferred on a thread of its own, then switches the
    /// session of cgroup `id` to its complete tables, if it still has tables `tables_id` (a
    /// reload meanwhile started a listing of its own).
    pub(super) fn complete_links_later(&self, id: u64, tables_id: u64, inodes: &InodeTable) {
        if !inodes.pending() {
            return;
        }
        let (this, inodes) = (self.this.clone(), inodes.clone());
        let spawned = std::thread::Builder::new().name("fp-hardlinks".into()).spawn(move || {
            let started = Instant::now();
            let dirs: Vec<String> =
                inodes.deferred.iter().map(|s| s.dir.display().to_string()).collect();
            let complete = inodes.complete();
            let Some(manager) = this.upgrade() else { return };
            match manager.complete_links(id, tables_id, complete) {
                Ok(true) => tracing::info!(
                    "session with cgroup {id}: hardlinks below {} recorded in {:.1} s; writes to \
                     files with several links are decided by the policy again",
                    dirs.join(", "),
                    started.elapsed().as_secs_f64()
                ),
                Ok(false) => {}
                Err(e) => tracing::error!(
                    "session with cgroup {id}: installing its tables with the hardlinks below {}: \
                     {e:#}; writes to files with several links stay refused",
                    dirs.join(", ")
                ),
            }
        });
        if let Err(e) = spawned {
            tracing::error!(
                "session with cgroup {id}: no thread to look for hardlinks ({e}); writes to files \
                 with several links stay refused"
            );
        }
    }

    /// Switches the session of cgroup `id` from tables `tables_id` to the same policy with the
    /// complete inode table `complete`; false if it has ended or has other tables now.
    fn complete_links(
        &self,
        id: u64,
        tables_id: u64,
        complete: InodeTable,
    ) -> anyhow::Result<bool> {
        let mut sessions = self.sessions.lock().unwrap();
        let Some(live) = sessions.get_mut(&id).filter(|live| live.tables_id == tables_id) else {
            return Ok(false);
        };
        let context = live.context.clone();
        self.replace_tables(live, context, complete)?;
        Ok(true)
    }
}
