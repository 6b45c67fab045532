//! Random-access byte sources over several named files. HDF5 external links name their
//! targets by file name, so a [`FileSet`] resolves names among the files the user opened.
//! Sources are read-only by construction: nothing here can write to an input.

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
}

/// The byte ranges `(source, offset, len)`, back to back, read in as few calls as possible:
/// ranges lying close together in one file come in one read. A browser's File API read
/// costs about half a millisecond whatever its size, so 262,144 chunk-sized reads took
/// 155 s where 88 window-sized ones take a fraction of a second.
pub fn read_coalesced(ranges: &[(&Arc<dyn ByteSource>, u64, u64)]) -> Result<Vec<u8>> {
    // Merge ranges at most this far apart (the bytes between are read and dropped) …
    const GAP: u64 = 1 << 20;
    // … into reads of at most this many bytes.
    const SPAN: u64 = 256 << 20;
    let total: usize = ranges.iter().map(|r| r.2 as usize).sum();
    let mut out = vec![0u8; total];
    let mut span = Vec::new();
    let (mut k, mut at) = (0, 0usize);
    while k < ranges.len() {
        let (source, lo, n) = ranges[k];
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
        if gapless {
            // Back to back in the file as in `out`: straight in, no copy.
            let n = (hi - lo) as usize;
            source.read_at(lo, &mut out[at..at + n])?;
            at += n;
        } else {
            span.resize((hi - lo) as usize, 0);
            source.read_at(lo, &mut span)?;
            for &(_, o, n) in &ranges[k..e] {
                let (o, n) = ((o - lo) as usize, n as usize);
                out[at..at + n].copy_from_slice(&span[o..o + n]);
                at += n;
            }
        }
        k = e;
    }
    Ok(out)
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
