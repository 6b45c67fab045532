//! Random-access byte sources over several named files. HDF5 external links name their
//! targets by file name, so a [`FileSet`] resolves names among the files the user opened.
//! Sources are read-only by construction: nothing here can write to an input.

#[cfg(target_arch = "wasm32")]
pub mod blob;
mod gather;
#[cfg(target_arch = "wasm32")]
pub mod in_flight;

pub use gather::{open_gathered, Gathering};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::{Error, Result};

/// A read-only, random-access file. Native: `std::fs`; browser: a `File`/`Blob`.
pub trait ByteSource: Send + Sync {
    /// The file name (no directories), used to resolve links and in every error message.
    fn name(&self) -> &str;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; a range past the end is an error, never a short read.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;

    fn read_vec(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        check_range(self.name(), self.len(), offset, len)?;
        let mut buf = vec![0u8; len as usize];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }

    /// The browser: the file's `pieces` as the File API delivers them, read in parallel by
    /// the page's Workers and never copied into wasm memory, each Worker walking the chunk
    /// headers its piece was asked to; `None` where the source cannot read that way.
    #[cfg(target_arch = "wasm32")]
    fn read_js(&self, _pieces: Vec<JsPiece>) -> Option<LocalFuture<'_, Result<Vec<JsRead>>>> {
        None
    }

    /// The browser: let go of reads [`ByteSource::read_js`] started whose caller let them
    /// go unawaited and nobody asked for again (a streamed pass that stopped early).
    #[cfg(target_arch = "wasm32")]
    fn forget_reads_in_flight(&self) {}

    /// The browser: the header walks of chunks in pieces read already (each piece's
    /// buffer with its `decode::walk` job list), done by the page's Workers, the pieces
    /// transferred to them and back; `None` where the source has no Workers to walk them.
    #[cfg(target_arch = "wasm32")]
    fn walk_js(
        &self,
        _pieces: Vec<(js_sys::Uint8Array, Vec<u32>)>,
    ) -> Option<LocalFuture<'_, Result<Vec<JsRead>>>> {
        None
    }

    /// The size [`ByteSource::read_js`] pieces are cut at (between chunks; one chunk may pass
    /// it): [`JS_PIECE`], smaller in tests.
    #[cfg(target_arch = "wasm32")]
    fn js_piece(&self) -> u64 {
        JS_PIECE
    }

    /// Fill each `(offset, buffer)` at once. A browser overlaps the reads (one File API read
    /// is slow, several in flight are not); elsewhere they run one after another.
    fn read_many<'a>(&'a self, reads: Vec<(u64, &'a mut [u8])>) -> LocalFuture<'a, Result<()>> {
        let done = reads
            .into_iter()
            .try_for_each(|(offset, buf)| self.read_at(offset, buf));
        Box::pin(std::future::ready(done))
    }
}

/// The largest single File API read of [`ByteSource::read_js`] (one chunk may pass it): on
/// the H200 machine 15 Workers read 3.1–3.5 GB/s together in 32–64 MiB reads against
/// 1.8 GB/s in 4 MiB ones (decision 0013).
#[cfg(target_arch = "wasm32")]
pub const JS_PIECE: u64 = 32 << 20;

/// One range of a [`ByteSource::read_js`] read, and the chunks its Worker walks
/// (a `decode::walk` job list; offsets within the piece), or what it checks of the piece.
#[cfg(target_arch = "wasm32")]
pub struct JsPiece {
    pub offset: u64,
    pub len: u64,
    pub walk: Option<Vec<u32>>,
    pub check: Option<PieceCheck>,
}

/// What a Worker checks of a prepared file's payload block it read (decision 0045): its
/// SHA-256 where `hash` (not where the GPU hashes the block, decision 0056), and where
/// `index` is given (sample bits, detector pixels, tiles) the structure of a packed
/// block's index.
#[cfg(target_arch = "wasm32")]
pub struct PieceCheck {
    pub index: Option<(u32, usize, u64)>,
    pub hash: bool,
}

/// What a Worker found of a piece it checked: its SHA-256 (empty where not asked for), and
/// the outcome of the index check where it was asked for (the reason where it failed).
#[cfg(target_arch = "wasm32")]
pub struct PieceChecked {
    pub digest: Vec<u8>,
    pub index: Option<std::result::Result<(), String>>,
}

/// A piece as read: its bytes and, when asked, the walks of its chunks up to the first that
/// failed (its place in the piece's list and why), or what its Worker checked (`None`
/// where it could not: the caller checks the piece then).
#[cfg(target_arch = "wasm32")]
pub struct JsRead {
    pub bytes: js_sys::Uint8Array,
    pub walk: Option<crate::decode::walk::PieceWalk>,
    pub checked: Option<PieceChecked>,
}

/// A future that stays on its thread (the browser's futures hold JS handles).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A future polled once when made: the reads it posts (the browser's File API reads, which
/// run in Workers) are in flight while the caller does other work; awaited later. A source
/// that reads synchronously finishes in that first poll.
pub enum Started<'a, T> {
    Running(LocalFuture<'a, T>),
    Done(T),
}

impl<'a, T> Started<'a, T> {
    pub fn new(mut fut: LocalFuture<'a, T>) -> Started<'a, T> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => Started::Done(v),
            std::task::Poll::Pending => Started::Running(fut),
        }
    }

    pub async fn finish(self) -> T {
        match self {
            Started::Running(f) => f.await,
            Started::Done(v) => v,
        }
    }
}

/// Ranges of a file at most this far apart are read as one span, the bytes between included:
/// one File API read costs about a millisecond whatever its size.
pub const SPAN_GAP: u64 = 1 << 20;

/// Buffers of whole windows kept for the next read ([`buffer`], [`recycle`]): a fresh 64 MiB
/// buffer is mapped anew by the allocator and costs a page fault per 4 KiB as it is
/// written, which held the native load of the 5.6 GB file at 1.3 GB/s of reads where the
/// page cache gives 14 (decision 0024).
static KEPT: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// At most this many bytes of buffers are kept.
const KEPT_BYTES: usize = 1 << 30;

/// A buffer of `len` zero bytes, one kept from an earlier read where one is large enough.
pub fn buffer(len: usize) -> Vec<u8> {
    let kept = KEPT.lock().ok().and_then(|mut k| {
        let i = k.iter().position(|v| v.capacity() >= len)?;
        Some(k.swap_remove(i))
    });
    match kept {
        // What it held is left in it (every byte of a read buffer is read over): zeroing
        // 64 MiB a window cost as much as the read.
        Some(mut v) => {
            v.truncate(len);
            v.resize(len, 0);
            v
        }
        None => vec![0u8; len],
    }
}

/// Keep `v` for a later [`buffer`] (within [`KEPT_BYTES`]; small ones are let go).
pub fn recycle(v: Vec<u8>) {
    if v.capacity() < (1 << 20) {
        return;
    }
    if let Ok(mut k) = KEPT.lock() {
        let held: usize = k.iter().map(Vec::capacity).sum();
        if held + v.capacity() <= KEPT_BYTES {
            k.push(v);
        }
    }
}

/// The byte ranges `(source, offset, len)`, back to back, read in as few calls as possible:
/// ranges lying close together in one file come in one span, cut into pieces that are read
/// together. A browser's File API read costs about a millisecond whatever its size and
/// streams at about half a GB/s alone, so 262,144 chunk-sized reads took 155 s where 88
/// window-sized ones take a fraction of that, and pieces in flight together go faster still.
pub async fn read_coalesced(ranges: &[(&Arc<dyn ByteSource>, u64, u64)]) -> Result<Vec<u8>> {
    // Merge ranges at most this far apart (the bytes between are read and dropped) …
    const GAP: u64 = SPAN_GAP;
    // … into spans of at most this many bytes, read in pieces of this size.
    const SPAN: u64 = 256 << 20;
    const PIECE: usize = 4 << 20;
    struct Span {
        lo: u64,
        hi: u64,
        ranges: std::ops::Range<usize>,
        gapless: bool,
    }
    let total: usize = ranges.iter().map(|r| r.2 as usize).sum();
    let mut out = buffer(total);
    let mut rest: &mut [u8] = &mut out;
    let mut k = 0;
    while k < ranges.len() {
        // The spans of one run of ranges from the same source, read by one `read_many`.
        let source = ranges[k].0;
        let mut spans = Vec::new();
        while k < ranges.len() && Arc::ptr_eq(ranges[k].0, source) {
            let (_, lo, n) = ranges[k];
            let mut hi = lo + n;
            let mut e = k + 1;
            let mut gapless = true;
            while let Some(&(s, o, n)) = ranges.get(e) {
                if !Arc::ptr_eq(s, source) || o < hi || o - hi > GAP || o + n - lo > SPAN {
                    break;
                }
                gapless &= o == hi;
                hi = o + n;
                e += 1;
            }
            spans.push(Span {
                lo,
                hi,
                ranges: k..e,
                gapless,
            });
            k = e;
        }
        // Each span's place in `out`; a gapless span is read straight into it, a span with
        // gaps into scratch first.
        let mut places = Vec::with_capacity(spans.len());
        for s in &spans {
            let n: usize = ranges[s.ranges.clone()].iter().map(|r| r.2 as usize).sum();
            let (place, tail) = std::mem::take(&mut rest).split_at_mut(n);
            places.push(place);
            rest = tail;
        }
        let mut scratch: Vec<Vec<u8>> = spans
            .iter()
            .map(|s| match s.gapless {
                true => Vec::new(),
                false => buffer((s.hi - s.lo) as usize),
            })
            .collect();
        let mut reads = Vec::new();
        for ((s, place), buf) in spans.iter().zip(places.iter_mut()).zip(scratch.iter_mut()) {
            let dst: &mut [u8] = if s.gapless { place } else { buf };
            for (i, piece) in dst.chunks_mut(PIECE).enumerate() {
                reads.push((s.lo + (i * PIECE) as u64, piece));
            }
        }
        source.read_many(reads).await?;
        let mut copies = Vec::new();
        for ((s, place), buf) in spans.iter().zip(places).zip(&scratch) {
            if s.gapless {
                continue;
            }
            let mut place: &mut [u8] = place;
            for &(_, o, n) in &ranges[s.ranges.clone()] {
                let (o, n) = ((o - s.lo) as usize, n as usize);
                let (dst, rest) = std::mem::take(&mut place).split_at_mut(n);
                copies.push((dst, &buf[o..o + n]));
                place = rest;
            }
        }
        copy_all(copies);
        scratch.into_iter().for_each(recycle);
    }
    Ok(out)
}

/// Each `(dst, src)` copied: natively on the CPU's threads at once (a window's thousands
/// of chunks out of the span read around them).
fn copy_all(copies: Vec<(&mut [u8], &[u8])>) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        copies
            .into_par_iter()
            .with_min_len(64)
            .for_each(|(dst, src)| dst.copy_from_slice(src));
    }
    #[cfg(target_arch = "wasm32")]
    for (dst, src) in copies {
        dst.copy_from_slice(src);
    }
}

pub(crate) fn check_range(name: &str, file_len: u64, offset: u64, len: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(Error::Io {
            file: name.to_string(),
            message: format!(
                "read of {len} bytes at offset {offset} goes past the end of the file ({file_len} bytes): the file is truncated or corrupt"
            ),
        }),
    }
}

/// In-memory source (tests, and small files in the browser).
pub struct MemSource {
    name: String,
    bytes: Arc<[u8]>,
}

impl MemSource {
    pub fn new(name: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Self {
        Self {
            name: name.into(),
            bytes: bytes.into(),
        }
    }
}

impl ByteSource for MemSource {
    fn name(&self) -> &str {
        &self.name
    }
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        check_range(&self.name, self.len(), offset, buf.len() as u64)?;
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes[start..start + buf.len()]);
        Ok(())
    }
}

/// The files one acquisition was opened from, looked up by file name.
#[derive(Clone, Default)]
pub struct FileSet {
    files: Vec<Arc<dyn ByteSource>>,
}

impl FileSet {
    pub fn new(files: Vec<Arc<dyn ByteSource>>) -> Result<Self> {
        if files.is_empty() {
            return Err(Error::param("no input files given"));
        }
        for (i, f) in files.iter().enumerate() {
            if files[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::param(format!(
                    "two input files share the name '{}': links are resolved by file name",
                    f.name()
                )));
            }
        }
        Ok(Self { files })
    }

    pub fn files(&self) -> &[Arc<dyn ByteSource>] {
        &self.files
    }

    /// Find a file by the name a link uses; directories in the link are ignored since the
    /// browser only knows base names.
    pub fn get(&self, link_name: &str) -> Option<Arc<dyn ByteSource>> {
        let base = base_name(link_name);
        self.files.iter().find(|f| f.name() == base).cloned()
    }
}

pub fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::FsSource;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::fs::File;
    use std::path::Path;

    use super::{base_name, check_range, ByteSource};
    use crate::error::{Error, Result};

    /// A local file opened read-only.
    pub struct FsSource {
        name: String,
        file: File,
        len: u64,
    }

    impl FsSource {
        pub fn open(path: &Path) -> Result<Self> {
            let shown = path.display().to_string();
            let io = |e: std::io::Error| Error::Io {
                file: shown.clone(),
                message: format!("cannot open: {e}"),
            };
            let file = File::open(path).map_err(io)?;
            let meta = file.metadata().map_err(io)?;
            if !meta.is_file() {
                return Err(Error::Io {
                    file: shown,
                    message: "not a regular file".into(),
                });
            }
            Ok(Self {
                name: base_name(&shown).to_string(),
                file,
                len: meta.len(),
            })
        }
    }

    impl ByteSource for FsSource {
        fn name(&self) -> &str {
            &self.name
        }
        fn len(&self) -> u64 {
            self.len
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            check_range(&self.name, self.len, offset, buf.len() as u64)?;
            read_exact_at(&self.file, offset, buf).map_err(|e| Error::Io {
                file: self.name.clone(),
                message: format!("read of {} bytes at offset {offset} failed: {e}", buf.len()),
            })
        }

        /// The reads on the CPU's threads at once: one thread copies a file out of the page
        /// cache at about 2 GB/s, several together at the memory's speed (decision 0024).
        fn read_many<'a>(
            &'a self,
            reads: Vec<(u64, &'a mut [u8])>,
        ) -> super::LocalFuture<'a, Result<()>> {
            use rayon::prelude::*;
            let done = reads
                .into_par_iter()
                .try_for_each(|(offset, buf)| self.read_at(offset, buf));
            Box::pin(std::future::ready(done))
        }
    }

    #[cfg(unix)]
    fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }

    #[cfg(windows)]
    fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> std::io::Result<()> {
        use std::os::windows::fs::FileExt;
        while !buf.is_empty() {
            let n = file.seek_read(buf, offset)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
            offset += n as u64;
        }
        Ok(())
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the pieces of every `read_many` call.
    struct Recording {
        inner: MemSource,
        calls: Mutex<Vec<Vec<(u64, usize)>>>,
    }

    impl ByteSource for Recording {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.inner.read_at(offset, buf)
        }
        fn read_many<'a>(&'a self, reads: Vec<(u64, &'a mut [u8])>) -> LocalFuture<'a, Result<()>> {
            let pieces = reads.iter().map(|(o, b)| (*o, b.len())).collect();
            self.calls.lock().unwrap().push(pieces);
            let done = reads
                .into_iter()
                .try_for_each(|(o, b)| self.inner.read_at(o, b));
            Box::pin(std::future::ready(done))
        }
    }

    fn recording(name: &str, len: usize, seed: u8) -> Arc<Recording> {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + seed as usize) as u8).collect();
        Arc::new(Recording {
            inner: MemSource::new(name, bytes),
            calls: Mutex::new(Vec::new()),
        })
    }

    /// Back-to-back, gapped and far-apart ranges of two files come back in order, byte for
    /// byte; each run of one file is one `read_many` of pieces of at most 4 MiB.
    #[test]
    fn coalesced_reads_return_every_range_in_order() {
        let (a, b) = (recording("a", 24 << 20, 1), recording("b", 1 << 20, 2));
        let (sa, sb): (Arc<dyn ByteSource>, Arc<dyn ByteSource>) = (a.clone(), b.clone());
        let ranges: Vec<(&Arc<dyn ByteSource>, u64, u64)> = vec![
            (&sa, 100, 5 << 20), // a gapless span of 9 MiB: 3 pieces
            (&sa, 100 + (5 << 20), 4 << 20),
            (&sa, 100 + (11 << 20), 1000), // 2 MiB on: a span with a gap of 10: 2 pieces
            (&sa, 1110 + (11 << 20), 6 << 20),
            (&sa, 23 << 20, 7), // far on: a span of 1 piece
            (&sb, 0, 10),       // another file
            (&sb, 300, 10),
            (&sa, 3, 5), // back in the first file, before the last range: a new span
        ];
        let got = pollster::block_on(read_coalesced(&ranges)).unwrap();
        let mut want = Vec::new();
        for (s, o, n) in &ranges {
            want.extend(s.read_vec(*o, *n).unwrap());
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "coalesced bytes differ");
        let calls = a.calls.lock().unwrap();
        assert_eq!(calls.len(), 2, "two runs of file a: {calls:?}");
        assert!(calls.iter().flatten().all(|&(_, n)| n <= 4 << 20));
        assert_eq!(calls[0].len(), 6, "{:?}", calls[0]);
        assert_eq!(calls[1], vec![(3, 5)]);
        assert_eq!(b.calls.lock().unwrap().as_slice(), &[vec![(0, 310)]]);
    }
}
