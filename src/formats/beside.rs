//! Natively, the files of an acquisition found beside those named, as libhdf5 resolves
//! external links: an Arina master's data files (the targets of its links) and its
//! companion `<name>.h5` (which holds the scan shape), looked up in the folder of the file
//! that names them. In the browser only dropped files can be read, so there a missing link
//! target stays an error naming it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::{Acquisition, OpenOptions};
use crate::source::{base_name, ByteSource, FileSet, FsSource};

/// Open the acquisition of `paths`, adding from their folders the files it links and an
/// Arina master's companion. Returns it with every path it reads.
pub fn open_beside(paths: &[PathBuf], opts: &OpenOptions) -> Result<(Acquisition, Vec<PathBuf>)> {
    let mut all = paths.to_vec();
    for p in paths {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(prefix) = name.strip_suffix("_master.h5") {
            let companion = p.with_file_name(format!("{prefix}.h5"));
            if companion.is_file() && !named(&all, &companion) {
                all.push(companion);
            }
        }
    }
    // Each round adds the link targets the open missed (an Arina master names them all at
    // once); a folder holds finitely many.
    loop {
        match Acquisition::open(open_files(&all)?, opts) {
            Err(Error::MissingFile {
                missing,
                referenced_by,
                also_missing,
            }) => {
                let by = referenced_by.split(':').next().unwrap_or_default();
                let folder = all
                    .iter()
                    .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(by))
                    .and_then(|p| p.parent().map(Path::to_path_buf));
                let beside = |name: &str| {
                    folder
                        .as_ref()
                        .map(|f| f.join(base_name(name)))
                        .filter(|p| p.is_file())
                };
                match beside(&missing).filter(|p| !named(&all, p)) {
                    Some(first) => all.push(first),
                    None => {
                        return Err(Error::MissingFile {
                            missing,
                            referenced_by,
                            also_missing,
                        })
                    }
                }
                for p in also_missing.iter().filter_map(|n| beside(n)) {
                    if !named(&all, &p) {
                        all.push(p);
                    }
                }
            }
            opened => return opened.map(|acq| (acq, all)),
        }
    }
}

/// The named files as a set of sources, opened read-only.
pub fn open_files(paths: &[PathBuf]) -> Result<FileSet> {
    let files = paths
        .iter()
        .map(|p| FsSource::open(p).map(|s| Arc::new(s) as Arc<dyn ByteSource>))
        .collect::<Result<Vec<_>>>()?;
    FileSet::new(files)
}

/// Whether a file of `p`'s name is among `all` (a set holds one file per name).
fn named(all: &[PathBuf], p: &Path) -> bool {
    all.iter().any(|q| q.file_name() == p.file_name())
}
