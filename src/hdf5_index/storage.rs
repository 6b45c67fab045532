//! A byte source as hdf5-reader's storage: pages read on demand and kept, small reads served
//! from them.

use super::*;

pub(super) const HDF5_MAGIC: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// hdf5-reader storage over one of our byte sources. Metadata comes in many small reads (a
/// B-tree node's header, then its entries, ...): those are served from a few cached 64 KiB
/// pages, so each costs one read of the source, which in a browser is a File API call of
/// about half a millisecond whatever its size.
pub(super) struct SourceStorage {
    src: Arc<dyn ByteSource>,
    pages: Mutex<Vec<(u64, Arc<Vec<u8>>)>>,
}

pub(super) const PAGE: u64 = 64 << 10;

/// Reads up to this size go through the page cache; larger ones go straight to the source.
pub(super) const SMALL_READ: usize = 16 << 10;

pub(super) const PAGES_KEPT: usize = 16;

impl SourceStorage {
    pub(super) fn new(src: Arc<dyn ByteSource>) -> Self {
        SourceStorage {
            src,
            pages: Mutex::new(Vec::new()),
        }
    }

    fn page(&self, index: u64) -> Result<Arc<Vec<u8>>> {
        if let Ok(pages) = self.pages.lock() {
            if let Some((_, p)) = pages.iter().find(|(i, _)| *i == index) {
                return Ok(p.clone());
            }
        }
        let start = index * PAGE;
        let len = PAGE.min(self.src.len().saturating_sub(start));
        let page = Arc::new(self.src.read_vec(start, len)?);
        if let Ok(mut pages) = self.pages.lock() {
            if pages.len() == PAGES_KEPT {
                pages.remove(0);
            }
            pages.push((index, page.clone()));
        }
        Ok(page)
    }

    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if len > SMALL_READ {
            return self.src.read_vec(offset, len as u64);
        }
        let mut out = Vec::with_capacity(len);
        let end = offset + len as u64;
        let mut at = offset;
        while at < end {
            let page = self.page(at / PAGE)?;
            let from = (at % PAGE) as usize;
            let take = (end - at).min((page.len() - from.min(page.len())) as u64) as usize;
            if take == 0 {
                break;
            }
            out.extend_from_slice(&page[from..from + take]);
            at += take as u64;
        }
        Ok(out)
    }
}

impl Storage for SourceStorage {
    fn len(&self) -> u64 {
        self.src.len()
    }
    fn read_range(&self, offset: u64, len: usize) -> H5Result<StorageBuffer> {
        // Like hdf5-reader's own storages: a range past the end is an error, never a short
        // buffer (its parser indexes the buffer it asked for; a short one panicked).
        let file_len = self.src.len();
        if (offset as u128) + (len as u128) > file_len as u128 {
            return Err(H5Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: file_len.saturating_sub(offset),
            });
        }
        let buf = self
            .read(offset, len)
            .map_err(|e| H5Error::Io(std::io::Error::other(e.to_string())))?;
        Ok(StorageBuffer::from_vec(buf))
    }
}

pub(super) fn is_hdf5(src: &dyn ByteSource) -> Result<bool> {
    let mut at = 0u64;
    while at + 8 <= src.len() {
        let mut sig = [0u8; 8];
        src.read_at(at, &mut sig)?;
        if &sig == HDF5_MAGIC {
            return Ok(true);
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    Ok(false)
}
