//! Opening what the command line names: the acquisition of `OpenArgs` (its Arina files
//! found beside the master, a file it does not read refused, a synthetic one, a crop) and
//! the flags' comma-separated values.

use super::OpenArgs;
use crate::contract::{Dtype, Region};
use crate::error::{Error, Result};
use crate::formats::{Acquisition, OpenOptions};

pub(super) fn open_acquisition(a: &OpenArgs) -> Result<Acquisition> {
    let acq = open_uncropped(a)?;
    match &a.crop {
        Some(s) => {
            let [r0, r1, c0, c1] = parse_list::<usize, 4>(s, "--crop")?;
            acq.crop_scan(Region { r0, r1, c0, c1 })
        }
        None => Ok(acq),
    }
}

fn open_uncropped(a: &OpenArgs) -> Result<Acquisition> {
    if let Some(s) = &a.synthetic {
        let dims = parse_list::<usize, 4>(s, "--synthetic")?;
        return if a.compressed {
            let dtype = match a.synthetic_dtype.as_deref() {
                None | Some("u16") => Dtype::U16,
                Some("u8") => Dtype::U8,
                Some(other) => {
                    return Err(Error::param(format!(
                        "--synthetic-dtype {other}: one of u8, u16"
                    )))
                }
            };
            crate::formats::synthetic::open_compressed_as(dims, dtype)
        } else {
            crate::formats::synthetic::open(dims)
        };
    }
    let opts = open_options(a.scan_shape.as_deref(), a.dataset.clone())?;
    // An Arina master's data files and companion are found in its folder.
    let (acq, _) = crate::formats::beside::open_beside(&a.files, &opts)?;
    // Every file named on the command line must be read: one that is not is a mistake.
    match acq.unused_files.first() {
        Some(extra) => Err(Error::format(
            extra,
            format!(
                "given with {}, but the acquisition does not use it (no link, companion or description names it): open it on its own",
                acq.primary
            ),
        )),
        None => Ok(acq),
    }
}

/// The open options of `--scan-shape` and `--dataset`.
pub(super) fn open_options(
    scan_shape: Option<&str>,
    dataset: Option<String>,
) -> Result<OpenOptions> {
    Ok(OpenOptions {
        scan_shape: scan_shape
            .map(|s| parse_list::<usize, 2>(s, "--scan-shape"))
            .transpose()?,
        dataset,
    })
}

/// `N` comma-separated values of an open flag (`--crop`, `--scan-shape`, `--synthetic`).
pub(super) fn parse_list<T: std::str::FromStr, const N: usize>(
    s: &str,
    flag: &str,
) -> Result<[T; N]> {
    crate::products::flags::list::<T, N>(s).map_err(|e| Error::param(e.say(flag)))
}
