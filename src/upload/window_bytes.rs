//! A decode window's stored bytes as they arrived: in memory, or (the browser) as the File
//! API's buffers. Those go through the header walks and into the GPU without being copied
//! into wasm memory, which the one thread that builds and submits every window had to do
//! before: with it gone the 5.6 GB file loaded in 7.1 s instead of 10.4 s in Chromium on the
//! H200, and in 5.2 s with the staging ring below (decision 0015).

use std::ops::Range;

use crate::decode::walk::Walked;
use crate::decode::{Slice, Stored};
#[cfg(target_arch = "wasm32")]
use crate::error::Result;

/// A chunk's header walk: its parameter and blocks, or why it is not bitshuffle/LZ4.
pub type ChunkWalk =
    std::result::Result<(u32, Vec<crate::decode::BlockRef>), crate::decode::DecodeError>;

pub enum WindowBytes {
    /// Chunks back to back.
    Host(Vec<u8>),
    /// A span of the file as it is, from this offset.
    HostSpan(Vec<u8>, u64),
    /// Natively, chunks back to back (this many bytes) already in a lent staging slot (until
    /// taken out), with their header walks, written by the thread that read them
    /// (`window_reads::read_staged`).
    #[cfg(not(target_arch = "wasm32"))]
    Staged(
        Option<crate::upload::host_staging::Lent>,
        usize,
        Vec<ChunkWalk>,
    ),
    #[cfg(target_arch = "wasm32")]
    Js(JsBytes),
}

impl WindowBytes {
    pub fn len(&self) -> usize {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => v.len(),
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(_, len, _) => *len,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(j) => j.len,
        }
    }

    /// Where the window starts in its file, when it holds a span of the file as it is (the
    /// bytes between chunks included); `None` when its chunks lie back to back.
    pub fn file_offset(&self) -> Option<u64> {
        match self {
            WindowBytes::Host(_) => None,
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => None,
            WindowBytes::HostSpan(_, lo) => Some(*lo),
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(j) => Some(j.file_offset),
        }
    }

    /// The header walks of the window's chunks, where the Workers that read it did them.
    pub fn walked(&self) -> Option<&Walked> {
        match self {
            WindowBytes::Host(_) | WindowBytes::HostSpan(..) => None,
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => None,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(j) => j.walked.as_ref(),
        }
    }

    /// The bytes, where they are in this process's readable memory (natively, unless
    /// staged already).
    pub fn host_bytes(&self) -> Option<&[u8]> {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => Some(v),
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => None,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(_) => None,
        }
    }

    /// Natively, the staging slot the window was read into, taken out (once).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn take_staged(&mut self) -> Option<crate::upload::host_staging::Lent> {
        match self {
            WindowBytes::Staged(slot, ..) => slot.take(),
            _ => None,
        }
    }

    /// The header walks the reading thread did (all of the window's chunks), taken out;
    /// empty where it did none.
    pub fn take_walks(&mut self) -> Vec<ChunkWalk> {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(_, _, walks) => std::mem::take(walks),
            _ => Vec::new(),
        }
    }

    /// Whether the bytes are the File API's own buffers (the browser's reads).
    pub fn is_file_api(&self) -> bool {
        match self {
            WindowBytes::Host(_) | WindowBytes::HostSpan(..) => false,
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => false,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(_) => true,
        }
    }

    /// A copy of the `len` bytes at `at`, if the window holds them where they can be read.
    pub fn copy_out(&self, at: usize, len: usize) -> Option<Vec<u8>> {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => {
                v.get(at..at.checked_add(len)?).map(<[u8]>::to_vec)
            }
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => None,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(j) => j.copy_out(at, len),
        }
    }

    /// The bytes of `range` (within [`WindowBytes::len`]): one chunk's, nothing past them.
    pub fn chunk(&self, range: Range<usize>) -> Slice<'_, WindowBytes> {
        Slice {
            inner: self,
            base: range.start,
            len: range.len(),
        }
    }

    /// Let the window go, its host buffer kept for the next read (`source::recycle`).
    pub fn recycle(self) {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => crate::source::recycle(v),
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => {}
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(_) => {}
        }
    }

    /// Write the window into `buffer` from its start through the queue, the last word
    /// zero-padded (natively windows go through `host_staging` instead).
    #[cfg(target_arch = "wasm32")]
    pub fn write_to(&self, queue: &wgpu::Queue, buffer: &wgpu::Buffer) {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => write_words(queue, buffer, 0, v),
            WindowBytes::Js(j) => j.write_to(queue, buffer),
        }
    }
}

/// `bytes` at `offset` (a multiple of 4): whole words as they are, the tail padded.
#[cfg(target_arch = "wasm32")]
fn write_words(queue: &wgpu::Queue, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
    let whole = bytes.len() & !3;
    queue.write_buffer(buffer, offset, &bytes[..whole]);
    if whole < bytes.len() {
        let mut tail = [0u8; 4];
        tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
        queue.write_buffer(buffer, offset + whole as u64, &tail);
    }
}

impl Stored for WindowBytes {
    fn stored_len(&self) -> usize {
        self.len()
    }

    fn be_u32_at(&self, at: usize) -> Option<u32> {
        match self {
            WindowBytes::Host(v) | WindowBytes::HostSpan(v, _) => v[..].be_u32_at(at),
            // Staging memory is written, never read back.
            #[cfg(not(target_arch = "wasm32"))]
            WindowBytes::Staged(..) => None,
            #[cfg(target_arch = "wasm32")]
            WindowBytes::Js(j) => j.be_u32_at(at),
        }
    }
}

/// A window read by the File API: consecutive pieces, each a JS `Uint8Array`.
#[cfg(target_arch = "wasm32")]
pub struct JsBytes {
    /// Where the span starts in its file.
    file_offset: u64,
    pieces: Vec<js_sys::Uint8Array>,
    views: Vec<js_sys::DataView>,
    starts: Vec<usize>,
    /// Each piece's length, kept here: asking a piece is a call into JS, and the header
    /// walks read a few million words of a large file.
    lens: Vec<usize>,
    len: usize,
    walked: Option<Walked>,
}

#[cfg(target_arch = "wasm32")]
impl JsBytes {
    /// The pieces of a span read from `file_offset` on, with their Workers' walks if every
    /// piece has one (a failed walk ends them: the chunks after it are not walked).
    pub fn new(reads: Vec<crate::source::JsRead>, file_offset: u64) -> Result<JsBytes> {
        let (mut starts, mut lens) = (Vec::with_capacity(reads.len()), Vec::new());
        let mut len = 0usize;
        // The walks so far, how many chunks they cover, and the first failure.
        let mut walks = reads
            .iter()
            .all(|r| r.walk.is_some())
            .then(|| (Vec::new(), 0usize, None));
        let mut pieces = Vec::with_capacity(reads.len());
        for r in reads {
            starts.push(len);
            lens.push(r.bytes.length() as usize);
            len += r.bytes.length() as usize;
            if let (Some((words, walked, failed)), Some(piece)) = (&mut walks, r.walk) {
                if failed.is_none() {
                    // This piece's chunks follow those walked so far.
                    *failed = piece.failed.map(|(k, why)| (*walked + k, why));
                    *walked += Walked::count(&piece.words);
                    words.extend_from_slice(&piece.words);
                }
            }
            pieces.push(r.bytes);
        }
        let walked = match walks {
            Some((words, _, failed)) => Some(
                Walked::new(words, failed)
                    .map_err(|e| crate::error::Error::Gpu(format!("chunk header walks: {e}")))?,
            ),
            None => None,
        };
        let views = pieces
            .iter()
            .map(|p| {
                js_sys::DataView::new(&p.buffer(), p.byte_offset() as usize, p.length() as usize)
            })
            .collect();
        Ok(JsBytes {
            file_offset,
            pieces,
            views,
            starts,
            lens,
            len,
            walked,
        })
    }

    /// Where the span starts in its file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// Each piece with the `decode::walk` job list of those of `chunks` (in the window's
    /// order, offsets within the span) that lie in it, for the Workers to walk; `None` where
    /// the window is walked already, or a chunk lies across two pieces or before one
    /// listed ahead of it (the pieces' walks follow each other).
    pub fn piece_jobs(
        &self,
        elem: usize,
        chunks: impl Iterator<Item = crate::decode::walk::Job>,
    ) -> Option<Vec<(js_sys::Uint8Array, Vec<u32>)>> {
        if self.walked.is_some() {
            return None;
        }
        let mut lists: Vec<Vec<crate::decode::walk::Job>> =
            self.pieces.iter().map(|_| Vec::new()).collect();
        let mut k = 0;
        for mut job in chunks {
            let end = job.at.checked_add(job.stored).filter(|&e| e <= self.len)?;
            while k < self.pieces.len() && job.at >= self.starts[k] + self.lens[k] {
                k += 1;
            }
            let (s, n) = (*self.starts.get(k)?, self.lens[k]);
            if job.at < s || end > s + n {
                return None;
            }
            job.at -= s;
            lists[k].push(job);
        }
        let jobs = lists
            .iter()
            .map(|l| crate::decode::walk::encode_jobs(elem, l));
        Some(self.pieces.iter().cloned().zip(jobs).collect())
    }

    fn byte(&self, at: usize) -> Option<u8> {
        let k = self.starts.partition_point(|&s| s <= at).checked_sub(1)?;
        let off = at - self.starts[k];
        (off < self.lens[k]).then(|| self.pieces[k].get_index(off as u32))
    }

    /// A copy of the `len` bytes at `at` (a B-tree node: small), if the span holds them.
    fn copy_out(&self, at: usize, len: usize) -> Option<Vec<u8>> {
        if at.checked_add(len)? > self.len {
            return None;
        }
        let k = self.starts.partition_point(|&s| s <= at).checked_sub(1)?;
        let off = at - self.starts[k];
        if off + len <= self.lens[k] {
            let mut out = vec![0u8; len];
            self.pieces[k]
                .subarray(off as u32, (off + len) as u32)
                .copy_to(&mut out);
            return Some(out);
        }
        (at..at + len).map(|i| self.byte(i)).collect()
    }

    /// Through wasm memory and the queue: where the buffers are not WebGPU's own, so that
    /// [`Staging`] cannot take them either.
    fn write_to(&self, queue: &wgpu::Queue, buffer: &wgpu::Buffer) {
        let mut all = vec![0u8; self.len];
        for (p, (&s, &n)) in self.pieces.iter().zip(self.starts.iter().zip(&self.lens)) {
            p.copy_to(&mut all[s..s + n]);
        }
        write_words(queue, buffer, 0, &all);
    }
}

#[cfg(target_arch = "wasm32")]
impl Stored for JsBytes {
    fn stored_len(&self) -> usize {
        self.len
    }

    fn be_u32_at(&self, at: usize) -> Option<u32> {
        let k = self.starts.partition_point(|&s| s <= at).checked_sub(1)?;
        let off = at - self.starts[k];
        if off + 4 <= self.lens[k] {
            // DataView reads big-endian unless told otherwise.
            return Some(self.views[k].get_uint32(off));
        }
        // A word across two pieces.
        let mut b = [0u8; 4];
        for (i, x) in b.iter_mut().enumerate() {
            *x = self.byte(at + i)?;
        }
        Some(u32::from_be_bytes(b))
    }
}

/// Mappable buffers the File API's pieces are copied into, then copied on the GPU into a
/// window's storage buffer. On the H200 machine Chromium took 5.0–5.7 GB/s this way against
/// 1.9–2.7 GB/s through `GPUQueue.writeBuffer` (decision 0015; presumably as a
/// mapping is shared memory the GPU process copies once, where a queue write travels in
/// pieces through its command stream). Each buffer is mapped again once the GPU has copied
/// from it.
#[cfg(target_arch = "wasm32")]
pub struct Staging {
    ring: Vec<StagingSlot>,
    next: usize,
    /// The slot filled last, to map again after the submit that copies from it.
    filled: Option<usize>,
    /// Buffers made since the ring was taken for an upload ([`Staging::made`]).
    made: u32,
}

#[cfg(target_arch = "wasm32")]
struct StagingSlot {
    buffer: wgpu::Buffer,
    mapped: Option<wasm_bindgen_futures::JsFuture>,
}

#[cfg(target_arch = "wasm32")]
impl StagingSlot {
    /// A staging buffer of `size` bytes, its mapping for write asked for at once.
    fn new(device: &wgpu::Device, size: u64) -> StagingSlot {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("decode staging"),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        StagingSlot {
            mapped: buffer.as_webgpu().map(map_for_write),
            buffer,
        }
    }
}

#[cfg(target_arch = "wasm32")]
use crate::upload::plan::DECODE_STAGING_SLOTS as STAGING_SLOTS;

#[cfg(target_arch = "wasm32")]
fn map_for_write(b: &wgpu::webgpu::GpuBuffer) -> wasm_bindgen_futures::JsFuture {
    // GPUMapMode.WRITE
    wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(JsValue::from(b.map_async(2))))
}

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::JsValue;

#[cfg(target_arch = "wasm32")]
impl Staging {
    pub fn new() -> Staging {
        Staging {
            ring: Vec::new(),
            next: 0,
            filled: None,
            made: 0,
        }
    }

    /// `bytes`, zero-padded to a whole word, in a staging buffer: it and the bytes to copy.
    /// `None` where the buffers are not WebGPU's own (the caller writes through the queue).
    pub async fn fill(
        &mut self,
        device: &wgpu::Device,
        bytes: &JsBytes,
        times: &mut crate::gpu::UploadTimes,
        t: &mut f64,
    ) -> Result<Option<(wgpu::Buffer, u64)>> {
        let gpu_err = |what: &str, e: JsValue| {
            crate::error::Error::Gpu(format!("{what} a staging buffer failed: {e:?}"))
        };
        let need = (bytes.len as u64).next_multiple_of(4).max(4);
        let k = self.next % STAGING_SLOTS;
        self.next += 1;
        if self.ring.get(k).is_none_or(|s| s.buffer.size() < need) {
            let slot = StagingSlot::new(device, need.max(crate::upload::plan::DECODE_WINDOW));
            self.made += 1;
            match self.ring.get_mut(k) {
                Some(s) => *s = slot,
                None => self.ring.push(slot),
            }
        }
        let slot = &mut self.ring[k];
        let Some(raw) = slot.buffer.as_webgpu() else {
            return Ok(None);
        };
        if let Some(m) = slot.mapped.take() {
            times.lap("copy to the GPU", t);
            m.await.map_err(|e| gpu_err("mapping", e))?;
            times.lap("staging buffer waits", t);
        }
        let range = raw
            .get_mapped_range_with_f64_and_f64(0.0, need as f64)
            .map_err(|e| gpu_err("reading the mapping of", e))?;
        let view = js_sys::Uint8Array::new(&range);
        for (p, &s) in bytes.pieces.iter().zip(&bytes.starts) {
            view.set(p, s as u32);
        }
        // The padding of the last word: what an earlier window left there.
        for at in bytes.len..need as usize {
            view.set_index(at as u32, 0);
        }
        raw.unmap();
        self.filled = Some(k);
        Ok(Some((slot.buffer.clone(), need)))
    }

    /// The whole ring made and mapped now, before any upload needs it: in Chromium a
    /// page's first mappings of these buffers are fresh shared memory, and the first load of
    /// a fresh page waited 55–64 ms for them, against 0–1 ms with the ring made while the
    /// page was idle (H200, decision 0015).
    pub fn made_now(device: &wgpu::Device) -> Staging {
        let ring = (0..STAGING_SLOTS)
            .map(|_| StagingSlot::new(device, crate::upload::plan::DECODE_WINDOW))
            .collect();
        Staging {
            ring,
            next: 0,
            filled: None,
            made: 0,
        }
    }

    /// Buffers the ring made for the upload it was taken for (none where it was made or
    /// kept before: the profile's `staging_buffers_made`).
    pub fn made(&self) -> u32 {
        self.made
    }

    /// Count the buffers made from now on (an upload takes the ring).
    pub fn count_from_now(&mut self) {
        self.made = 0;
    }

    /// Whether the next upload can take the ring as it is: every buffer mapped or being
    /// mapped (an upload that failed part-way may have left one unmapped).
    pub fn reusable(&self) -> bool {
        self.filled.is_none() && self.ring.iter().all(|s| s.mapped.is_some())
    }

    /// Map the buffer filled last again: call once the copy from it is submitted.
    pub fn release(&mut self) {
        if let Some(k) = self.filled.take() {
            if let Some(raw) = self.ring[k].buffer.as_webgpu() {
                self.ring[k].mapped = Some(map_for_write(raw));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_chunks_read_their_own_bytes_only() {
        let w = WindowBytes::Host((0u8..16).collect());
        let c = w.chunk(4..10);
        assert_eq!(c.stored_len(), 6);
        assert_eq!(c.be_u32_at(0), Some(0x0405_0607));
        assert_eq!(c.be_u32_at(2), Some(0x0607_0809));
        // A word that would run into the next chunk's bytes is past this chunk's end.
        assert_eq!(c.be_u32_at(3), None);
        assert_eq!(c.be_u32_at(usize::MAX), None);
    }
}
