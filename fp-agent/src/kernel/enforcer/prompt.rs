//! The prompt broker's side of the maps: files pending its answer, its remembered grants, and its
//! heartbeat.

use anyhow::anyhow;
use aya::maps::{HashMap, LpmTrie, MapData, lpm_trie::Key};
use fp_common::{
    kernel::{GrantValue, PendingKey, maps},
    policy::PrefixKeyData,
};

use super::{Enforcer, gone};
use crate::policy::kernel_dev;

impl Enforcer {
    /// Opens the broker never answered (it died) that no agent has recorded yet: each is
    /// returned once, and its reads stay refused until a broker answers a new open of the file.
    pub fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<PendingKey>> {
        let mut map: HashMap<_, PendingKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let fresh: Vec<PendingKey> =
            map.iter().filter_map(Result::ok).filter(|(_, v)| *v == 1).map(|(k, _)| k).collect();
        for key in &fresh {
            // Present means pending to the programs, whatever the value: 2 marks it recorded.
            map.insert(key, 2, 0)?;
        }
        Ok(fresh)
    }

    /// Takes the prompt broker's heartbeat map (once), so that beats never wait behind a session
    /// start holding the enforcer.
    pub fn take_broker_clock(&mut self) -> anyhow::Result<BrokerClock> {
        let map = self
            .maps
            .remove(maps::BROKER)
            .ok_or_else(|| anyhow!("{} already taken", maps::BROKER))?;
        Ok(BrokerClock(aya::maps::Array::try_from(map)?))
    }

    /// The broker answered the open of (`st_dev`, `st_ino`) by the session of cgroup `cgroup`:
    /// its reads are no longer refused as pending.
    pub fn settle(&mut self, cgroup: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        let mut map: HashMap<_, PendingKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let key = PendingKey { session: cgroup, ino: st_ino, dev: kernel_dev(st_dev), _pad: 0 };
        Ok(gone(map.remove(&key))?)
    }

    /// Makes the `GRANTS` map hold exactly `grants` (prefix length in bits, key, value; see
    /// `fp_common::kernel::GrantScope::key`): the new ones are written first, then the others
    /// removed. Prompt verdicts of opens they cover are allowed in the kernel until they expire.
    pub fn set_grants(
        &mut self,
        grants: &[(u32, PrefixKeyData, GrantValue)],
    ) -> anyhow::Result<()> {
        let mut map: LpmTrie<_, PrefixKeyData, GrantValue> =
            LpmTrie::try_from(self.map_mut(maps::GRANTS)?)?;
        for (bits, key, value) in grants {
            map.insert(&Key::new(*bits, *key), value, 0)?;
        }
        let wanted = |k: &Key<PrefixKeyData>| {
            grants.iter().any(|(bits, key, _)| k.prefix_len() == *bits && k.data() == *key)
        };
        let stale: Vec<_> = map.keys().collect::<Result<_, _>>()?;
        for key in stale.iter().filter(|k| !wanted(k)) {
            gone(map.remove(key))?;
        }
        Ok(())
    }
}

/// The prompt broker's heartbeat in the kernel.
pub struct BrokerClock(aya::maps::Array<MapData, u64>);

impl BrokerClock {
    /// The prompt broker is alive now: opens with prompt or defer verdicts are left to it for
    /// the next `BROKER_HEARTBEAT_TIMEOUT_NS`.
    pub fn beat(&mut self) -> anyhow::Result<()> {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)?;
        self.0.set(0, now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64, 0)?;
        Ok(())
    }
}
