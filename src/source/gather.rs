//! Opening an acquisition where every read is a round trip (a browser's File API: about a
//! millisecond a read, however small). Indexing reads headers and B-tree nodes one by one,
//! each address found in the bytes before it, so it cannot simply be batched. Instead the
//! open runs over [`Gathering`] sources: a read they do not hold fails and is noted, the
//! misses of that attempt are fetched together (in flight at once), and the open is tried
//! again. Every attempt gets further; the one that misses nothing read only fetched bytes,
//! so its result, success or error, is exactly that of an ordinary open. A chunk B-tree
//! costs a round per level (see `hdf5_index::btree_v1`), not a read per node.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{ByteSource, LocalFuture};
use crate::error::{Error, Result};

/// Attempts before the open gives up gathering and reads as it goes.
const MAX_ROUNDS: usize = 64;
/// Fetches in flight at once.
const IN_FLIGHT: usize = 512;

pub struct Gathering {
    inner: Arc<dyn ByteSource>,
    /// Fetched ranges by offset.
    held: Mutex<BTreeMap<u64, Vec<u8>>>,
    missed: Mutex<Vec<(u64, u64)>>,
    gathering: AtomicBool,
}

impl Gathering {
    pub fn new(inner: Arc<dyn ByteSource>) -> Arc<Gathering> {
        Arc::new(Gathering {
            inner,
            held: Mutex::new(BTreeMap::new()),
            missed: Mutex::new(Vec::new()),
            gathering: AtomicBool::new(true),
        })
    }

    /// Copy `[offset, offset + buf.len())` out of one fetched range, if one holds it.
    fn copy_held(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Ok(held) = self.held.lock() else {
            return false;
        };
        let Some((&start, bytes)) = held.range(..=offset).next_back() else {
            return false;
        };
        let from = (offset - start) as usize;
        match bytes.get(from..from + buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    }

    fn take_missed(&self) -> Vec<(u64, u64)> {
        let mut missed = self
            .missed
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        // Overlapping and touching ranges are fetched once.
        missed.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(missed.len());
        for (o, n) in missed {
            match merged.last_mut() {
                Some((lo, len)) if o <= *lo + *len => *len = (*len).max(o + n - *lo),
                _ => merged.push((o, n)),
            }
        }
        merged
    }

    /// Fetch `ranges`, [`IN_FLIGHT`] at a time, and hold them.
    async fn fetch(&self, ranges: Vec<(u64, u64)>) -> Result<()> {
        for batch in ranges.chunks(IN_FLIGHT) {
            let mut bufs: Vec<Vec<u8>> =
                batch.iter().map(|&(_, n)| vec![0u8; n as usize]).collect();
            let reads = batch
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&(o, _), b)| (o, b.as_mut_slice()))
                .collect();
            self.inner.read_many(reads).await?;
            if let Ok(mut held) = self.held.lock() {
                for (&(o, _), b) in batch.iter().zip(bufs) {
                    held.insert(o, b);
                }
            }
        }
        Ok(())
    }

    /// Stop gathering: reads go to the file again and the fetched bytes are dropped.
    fn release(&self) {
        self.gathering.store(false, Ordering::Relaxed);
        if let Ok(mut held) = self.held.lock() {
            held.clear();
        }
    }
}

impl ByteSource for Gathering {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if !self.gathering.load(Ordering::Relaxed) {
            return self.inner.read_at(offset, buf);
        }
        super::check_range(self.name(), self.len(), offset, buf.len() as u64)?;
        if self.copy_held(offset, buf) {
            return Ok(());
        }
        if let Ok(mut m) = self.missed.lock() {
            m.push((offset, buf.len() as u64));
        }
        Err(Error::Io {
            file: self.name().to_string(),
            message: format!("{} bytes at offset {offset} are not fetched yet", buf.len()),
        })
    }

    fn read_many<'a>(&'a self, reads: Vec<(u64, &'a mut [u8])>) -> LocalFuture<'a, Result<()>> {
        self.inner.read_many(reads)
    }

    #[cfg(target_arch = "wasm32")]
    fn read_js(
        &self,
        pieces: Vec<super::JsPiece>,
    ) -> Option<LocalFuture<'_, Result<Vec<super::JsRead>>>> {
        self.inner.read_js(pieces)
    }

    #[cfg(target_arch = "wasm32")]
    fn walk_js(
        &self,
        pieces: Vec<(js_sys::Uint8Array, Vec<u32>)>,
    ) -> Option<LocalFuture<'_, Result<Vec<super::JsRead>>>> {
        self.inner.walk_js(pieces)
    }

    #[cfg(target_arch = "wasm32")]
    fn js_piece(&self) -> u64 {
        self.inner.js_piece()
    }

    #[cfg(target_arch = "wasm32")]
    fn forget_reads_in_flight(&self) {
        self.inner.forget_reads_in_flight()
    }
}

/// Run `open` over `sources` (which it must read through), fetching each attempt's misses
/// together, until an attempt misses nothing; then the sources read straight from their
/// files. Returns the last attempt's result and the number of attempts.
pub async fn open_gathered<T>(
    sources: &[Arc<Gathering>],
    open: impl Fn() -> Result<T>,
) -> (Result<T>, usize) {
    let mut rounds = 0;
    let result = loop {
        rounds += 1;
        let result = open();
        let missed: Vec<_> = sources.iter().map(|s| s.take_missed()).collect();
        if missed.iter().all(Vec::is_empty) {
            break result;
        }
        if rounds == MAX_ROUNDS {
            // Give up gathering: an open that reads as it goes.
            sources.iter().for_each(|s| s.release());
            rounds += 1;
            break open();
        }
        for (s, m) in sources.iter().zip(missed) {
            if let Err(e) = s.fetch(m).await {
                sources.iter().for_each(|s| s.release());
                return (Err(e), rounds);
            }
        }
    };
    sources.iter().for_each(|s| s.release());
    (result, rounds)
}
