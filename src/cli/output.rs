//! Writing outputs: whole or not at all, never over a file the run reads.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::formats::Acquisition;

/// Write the output, refusing to overwrite a file the run read (`read`). The bytes go to a
/// temporary file beside it, renamed into place once whole: a failed run leaves no
/// half-written output, and an existing output's file is replaced, never truncated, so no
/// other name of that file (a hard link) changes.
pub(super) fn write_new_file(
    path: &Path,
    acq: &Acquisition,
    read: &[PathBuf],
    fill: impl FnOnce(&mut dyn std::io::Write) -> Result<()>,
) -> Result<()> {
    refuse_input_overwrite(path, acq, read)?;
    let io = |message: String| Error::Io {
        file: path.display().to_string(),
        message,
    };
    let name = path
        .file_name()
        .ok_or_else(|| io("--out names no file".into()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.partial", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let written = std::fs::File::create(&temp)
        .map_err(|e| io(format!("cannot write output: {e}")))
        .and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            fill(&mut w)?;
            use std::io::Write;
            w.flush()
                .map_err(|e| io(format!("cannot write output: {e}")))
        })
        .and_then(|()| {
            std::fs::rename(&temp, path).map_err(|e| io(format!("cannot write output: {e}")))
        });
    written.inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Whether `a` and `b` name the same file: the same device and inode on Unix (hard links
/// included), the same resolved path elsewhere.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// An existing `path` that is a file the run read (by identity: a hard link or another path
/// to it counts) or has an input's name is never written.
pub(super) fn refuse_input_overwrite(
    path: &Path,
    acq: &Acquisition,
    read: &[PathBuf],
) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let name = crate::source::base_name(&path.display().to_string()).to_string();
    let same = read.iter().find(|r| same_file(path, r));
    let same_name = acq.files.files().iter().any(|f| f.name() == name);
    if same.is_some() || same_name {
        let what = same.map_or_else(|| name.clone(), |r| r.display().to_string());
        return Err(Error::param(format!(
            "--out {} would overwrite {what}, a file this run reads",
            path.display()
        )));
    }
    Ok(())
}
