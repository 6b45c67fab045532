//! Resident buffers of an acquisition being replaced, kept for the next upload to reuse.
//! Opening a file after another freed ~19 GB of buffers and allocated as much again: in
//! Chromium on the H200 that load waited 0.62–0.69 s for its staging buffers, against
//! 0.09–0.11 s with the old buffers reused, and loaded in 2.61–3.10 s instead of 3.5–3.9 s
//! (decision 0016). A reused buffer is cleared first, so it reads as a new one does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Buffers set aside, each taken at most once, by its exact size; and how many were taken.
#[derive(Default)]
pub(crate) struct SetAside(Mutex<Vec<wgpu::Buffer>>, AtomicUsize);

impl SetAside {
    pub(crate) fn keep(&self, buffers: impl IntoIterator<Item = wgpu::Buffer>) {
        if let Ok(mut kept) = self.0.lock() {
            kept.extend(buffers);
        }
    }

    /// Free every buffer still set aside.
    pub(crate) fn release(&self) {
        if let Ok(mut kept) = self.0.lock() {
            kept.clear();
        }
    }

    /// Keep one buffer of each of `sizes` (a plan's segments) where one is set aside, and
    /// free the others now, before the upload makes any: the old and new never add up.
    pub(crate) fn keep_only(&self, sizes: impl IntoIterator<Item = u64>) {
        let Ok(mut kept) = self.0.lock() else {
            return;
        };
        let mut reused = Vec::new();
        for size in sizes {
            if let Some(k) = kept.iter().position(|b| b.size() == size) {
                reused.push(kept.swap_remove(k));
            }
        }
        *kept = reused;
    }

    /// A buffer of `size` bytes set aside, if there is one.
    pub(crate) fn take(&self, size: u64) -> Option<wgpu::Buffer> {
        let mut kept = self.0.lock().ok()?;
        let k = kept.iter().position(|b| b.size() == size)?;
        self.1.fetch_add(1, Ordering::Relaxed);
        Some(kept.swap_remove(k))
    }

    /// Buffers taken since the engine started.
    pub(crate) fn taken(&self) -> usize {
        self.1.load(Ordering::Relaxed)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.lock().map_or(0, |kept| kept.len())
    }
}
