//! Reads posted to the page's pool and still in flight, by their pieces: a read let go
//! before it was awaited (a streamed pass starts the next block's first windows while a
//! block uploads, then lets them go: decision 0046) is awaited by whoever asks for the same
//! pieces next, instead of being read twice.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::source::JsPiece;

/// A piece as reads in flight tell them apart: its range, and whether it is walked or
/// checked (what the Worker answers with).
type PieceKey = (u64, u64, bool, bool);

/// The pieces of one read, as [`ReadsInFlight`] finds it again.
#[derive(Clone, PartialEq)]
pub struct ReadKey(Vec<PieceKey>);

impl ReadKey {
    pub fn of(pieces: &[JsPiece]) -> ReadKey {
        ReadKey(
            pieces
                .iter()
                .map(|p| (p.offset, p.len, p.walk.is_some(), p.check.is_some()))
                .collect(),
        )
    }
}

/// Reads a source keeps in flight: a streamed block's windows read ahead (two) and the next
/// block's, with room to spare. The oldest goes first (its reads finish unseen).
const KEPT: usize = 8;

/// Reads that found their pieces in flight already, since the page loaded.
static TAKEN: AtomicU64 = AtomicU64::new(0);

pub fn reads_taken_in_flight() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

/// One source's reads in flight: each the promise of the pool's answers.
#[derive(Default)]
pub struct ReadsInFlight {
    kept: RefCell<VecDeque<(ReadKey, js_sys::Promise)>>,
}

impl ReadsInFlight {
    /// The promise of `key`'s answers: the one in flight where it is, else `post`'s (the
    /// read posted now), kept until [`ReadsInFlight::answered`].
    pub fn promise(
        &self,
        key: &ReadKey,
        post: impl FnOnce() -> Result<js_sys::Promise>,
    ) -> Result<js_sys::Promise> {
        let found = self
            .kept
            .borrow()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, p)| p.clone());
        if let Some(p) = found {
            TAKEN.fetch_add(1, Ordering::Relaxed);
            return Ok(p);
        }
        let p = post()?;
        let mut kept = self.kept.borrow_mut();
        if kept.len() >= KEPT {
            kept.pop_front();
        }
        kept.push_back((key.clone(), p.clone()));
        Ok(p)
    }

    /// `key`'s answers came (or failed): a later read of the same pieces reads them again.
    pub fn answered(&self, key: &ReadKey) {
        self.kept.borrow_mut().retain(|(k, _)| k != key);
    }

    /// Let go of every read in flight (a pass that stopped early never took them).
    pub fn clear(&self) {
        self.kept.borrow_mut().clear();
    }
}
