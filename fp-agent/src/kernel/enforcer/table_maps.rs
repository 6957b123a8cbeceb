//! A session's compiled tables in the maps: installed under a fresh tables id, removed whole.

use anyhow::{Context as _, anyhow};
use aya::maps::{HashMap, LpmTrie, lpm_trie::Key};
use fp_common::{
    kernel::maps,
    policy::{
        InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey, ScopeValue,
        TableHeader,
    },
};

use super::{Enforcer, gone};
use crate::kernel::tables;
use crate::policy::KernelTables;

/// The `INTERIOR` keys of tables `id`: each directory with its NUL, so that the longest-prefix
/// lookup of `dir\0` finds exactly it. Directories too long for a key are left out: the
/// programs count such a directory as anchored without looking.
fn interior_keys(
    id: u64,
    tables: &KernelTables,
) -> impl Iterator<Item = (u32, PrefixKeyData)> + '_ {
    tables.interior().filter_map(move |dir| {
        let mut bytes = dir.to_vec();
        bytes.push(0);
        PrefixKeyData::new(id, &bytes)
    })
}

impl Enforcer {
    /// Installs `tables` under the new id `id`, the header last (evaluations of an id without a
    /// header deny). On error nothing of them stays behind.
    pub fn install_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let written = self.write_tables(id, tables, inodes);
        if written.is_err() {
            let _ = self.remove_tables(id, tables, inodes);
        }
        written.context("writing the session's tables into the kernel maps (full?)")
    }

    fn write_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let mut prefixes: LpmTrie<_, PrefixKeyData, PrefixValue> =
            LpmTrie::try_from(self.map_mut(maps::PREFIXES)?)?;
        for (bytes, value) in tables.prefixes() {
            let (bits, key) = PrefixKeyData::new(id, bytes)
                .ok_or_else(|| anyhow!("compiled prefix longer than an LPM key"))?;
            prefixes.insert(&Key::new(bits, key), value, 0)?;
        }
        let mut interior: LpmTrie<_, PrefixKeyData, u8> =
            LpmTrie::try_from(self.map_mut(maps::INTERIOR)?)?;
        for (bits, key) in interior_keys(id, tables) {
            interior.insert(&Key::new(bits, key), 1, 0)?;
        }
        let mut names: HashMap<_, NameKey, NameValue> =
            HashMap::try_from(self.map_mut(maps::NAMES)?)?;
        for (key, value) in tables.names() {
            names.insert(NameKey { tables_id: id, ..*key }, value, 0)?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for (scope_id, value) in tables.scopes().iter().enumerate().skip(1) {
            scopes.insert(
                ScopeKey { tables_id: id, scope_id: scope_id as u16, _pad: [0; 6] },
                value,
                0,
            )?;
        }
        let mut map: HashMap<_, InodeKey, InodeValue> =
            HashMap::try_from(self.map_mut(maps::INODES)?)?;
        for (key, value) in inodes.keyed(id) {
            map.insert(key, value, 0)?;
        }
        let mut headers: HashMap<_, u64, TableHeader> =
            HashMap::try_from(self.map_mut(maps::HEADERS)?)?;
        headers.insert(id, tables.header(), 0)?;
        Ok(())
    }

    /// Removes tables `id`, the header first. Entries already gone are not an error.
    pub fn remove_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let mut headers: HashMap<_, u64, TableHeader> =
            HashMap::try_from(self.map_mut(maps::HEADERS)?)?;
        gone(headers.remove(&id))?;
        let mut prefixes: LpmTrie<_, PrefixKeyData, PrefixValue> =
            LpmTrie::try_from(self.map_mut(maps::PREFIXES)?)?;
        for (bytes, _) in tables.prefixes() {
            if let Some((bits, key)) = PrefixKeyData::new(id, bytes) {
                gone(prefixes.remove(&Key::new(bits, key)))?;
            }
        }
        let mut interior: LpmTrie<_, PrefixKeyData, u8> =
            LpmTrie::try_from(self.map_mut(maps::INTERIOR)?)?;
        for (bits, key) in interior_keys(id, tables) {
            gone(interior.remove(&Key::new(bits, key)))?;
        }
        let mut names: HashMap<_, NameKey, NameValue> =
            HashMap::try_from(self.map_mut(maps::NAMES)?)?;
        for (key, _) in tables.names() {
            gone(names.remove(&NameKey { tables_id: id, ..*key }))?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for scope_id in 1..tables.scopes().len() {
            gone(scopes.remove(&ScopeKey {
                tables_id: id,
                scope_id: scope_id as u16,
                _pad: [0; 6],
            }))?;
        }
        let mut map: HashMap<_, InodeKey, InodeValue> =
            HashMap::try_from(self.map_mut(maps::INODES)?)?;
        for (key, _) in inodes.keyed(id) {
            gone(map.remove(&key))?;
        }
        Ok(())
    }
}
