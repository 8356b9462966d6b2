//! Compaction of a sealed chunk volume: its live records copied to the tail, the index
//! switched to the copies (a chunk deleted meanwhile gets a tombstone after its copy), then
//! the volume's file removed.

use std::fs;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use saker_durable::sync_dir;

use super::replay::image_is_whole;
use super::{check_put_header, volume_path, Loc, Volumes};
use crate::error::ChunkError;
use crate::id::ChunkId;

impl Volumes {
    /// Copies the live records of sealed volume `volume` to the tail, then removes it. Skipped
    /// when another compaction runs (the next delete in the volume tries again).
    pub fn compact(&self, volume: u32) -> Result<(), ChunkError> {
        let Some(_running) = self.compacting.try_lock() else {
            return Ok(());
        };
        // Under the append lock: a put moves from pending to the index only while holding it,
        // and a sealed volume gets no new puts, so this list is every chunk that will ever be
        // in the volume — unless a put there is still pending (then try again later).
        let (live, file) = {
            let tail = self.tail.lock();
            if tail.volume == volume || tail.pending.values().any(|&v| v == volume) {
                return Ok(());
            }
            let st = self.state.read();
            let Some(v) = st.volumes.get(&volume) else {
                return Ok(()); // compacted already
            };
            if v.damaged {
                return Ok(());
            }
            let live: Vec<(ChunkId, Loc)> = st
                .index
                .iter()
                .filter(|(_, l)| l.volume == volume)
                .map(|(id, l)| (*id, *l))
                .collect();
            (live, v.file.clone())
        };
        // A live chunk that reads as corrupt stays where it is, reported corrupt: a copy of it
        // would be a volume's last put at the next open, cut as torn, and the chunk not found.
        if let Some((id, _)) = live.iter().find(|(id, l)| !image_is_whole(&file, l, *id)) {
            tracing::error!(volume, chunk = %id, "a live chunk in a chunk volume is corrupt; the volume is kept whole, never compacted");
            if let Some(v) = self.state.write().volumes.get_mut(&volume) {
                v.damaged = true;
            }
            return Ok(());
        }
        let mut moved = Vec::with_capacity(live.len());
        let mut last_volume = None;
        for (id, old) in live {
            let mut record = vec![0u8; old.record_len() as usize];
            file.read_exact_at(&mut record, old.offset)?;
            check_put_header(id, &old, &record)?;
            let (v, offset) = self.append(&mut self.tail.lock(), &record)?;
            last_volume = Some(v);
            moved.push((
                id,
                old,
                Loc {
                    volume: v,
                    offset,
                    ..old
                },
            ));
        }
        if let Some(v) = last_volume {
            // Volumes written between the first and last copy are in the same dirty set.
            self.group_commit(Some(v))?;
        }
        {
            let mut tail = self.tail.lock();
            let mut gone = Vec::new();
            let mut st = self.state.write();
            for (id, old, new) in moved {
                if st.index.get(&id) == Some(&old) {
                    st.index.insert(id, new);
                    if let Some(v) = st.volumes.get_mut(&new.volume) {
                        v.live += new.record_len();
                    }
                } else {
                    gone.push((id, new)); // deleted during the copy
                }
            }
            st.volumes.remove(&volume);
            drop(st);
            // A chunk deleted while it was copied: its tombstone precedes the copy, so write
            // one after it (not synced, like every delete).
            for (id, new) in gone {
                self.append_tombstone(&mut tail, id, new.written_ns);
            }
        }
        fs::remove_file(volume_path(&self.dir, volume))?;
        sync_dir(&self.dir)?;
        self.compacted.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(volume, "volume compacted");
        Ok(())
    }
}
