//! `stem4d compare`: one product of several acquisitions with one shared detector (the
//! page's compare grid, issue #33): the files grouped into acquisitions by their names
//! (`formats::grouping`), each opened as `stem4d product` opens one, a detector of another
//! shape refused by name, then one `.npy` per acquisition in the output folder with
//! `compare.json` naming them, and a table of what each shows.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::product::{compute_on, Backend, Engines};
use super::{open_options, write_new_file};
use crate::error::{Error, Result};
use crate::formats::{Acquisition, OpenOptions};
use crate::frames::Correction;
use crate::products::{ProductArray, ProductParams};

/// What `stem4d compare` was asked.
pub(super) struct CompareArgs {
    pub files: Vec<PathBuf>,
    pub scan_shape: Option<String>,
    pub params: ProductParams,
    pub correction: Correction,
    pub backend: String,
    pub out_dir: PathBuf,
}

/// The acquisitions among `files`, each opened with the files it reads (an Arina master's
/// found beside it); a file no acquisition reads is refused by name, as `product` does.
fn acquisitions(files: &[PathBuf], opts: &OpenOptions) -> Result<Vec<(Acquisition, Vec<PathBuf>)>> {
    let names: Vec<String> = files
        .iter()
        .map(|p| crate::source::base_name(&p.display().to_string()).to_string())
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let groups = crate::formats::grouping::acquisitions(&refs);
    if let Some(&k) = groups.left_out.first() {
        return Err(Error::format(
            &names[k],
            "no acquisition among the files reads it (not a data file, nor one an acquisition's names pair with): leave it out",
        ));
    }
    if groups.acquisitions.len() < 2 {
        return Err(Error::param(
            "compare takes the files of two acquisitions or more; for one, use `stem4d product`",
        ));
    }
    groups
        .acquisitions
        .iter()
        .map(|group| {
            let paths: Vec<PathBuf> = group.iter().map(|&k| files[k].clone()).collect();
            let (acq, read) = crate::formats::beside::open_beside(&paths, opts)?;
            if let Some(extra) = acq.unused_files.first() {
                return Err(Error::format(
                    extra,
                    format!(
                        "given with {}, but that acquisition does not use it",
                        acq.primary
                    ),
                ));
            }
            Ok((acq, read))
        })
        .collect()
}

/// The output's name for acquisition `acq`: its primary file's stem (an Arina master's
/// without `_master`), the product's kind, a number where two would meet.
fn output_name(acq: &Acquisition, kind: &str, taken: &mut Vec<String>) -> String {
    let stem = acq
        .primary
        .rsplit_once('.')
        .map_or(acq.primary.as_str(), |(s, _)| s);
    let stem = stem.strip_suffix("_master").unwrap_or(stem);
    let mut name = format!("{stem}_{kind}.npy");
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{stem}_{kind}_{n}.npy");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// Min, max and mean of a product's values (its first component for CoM and DPC).
fn summary(p: &ProductArray) -> (f64, f64, f64) {
    let v = p.data.to_f64();
    let n = match p.shape.len() {
        3 if p.shape[0] == 2 => v.len() / 2,
        _ => v.len(),
    };
    let v = &v[..n];
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    (lo, hi, v.iter().sum::<f64>() / n.max(1) as f64)
}

/// The product's parameters as the page's JSON names them.
fn params_json(p: &ProductParams) -> serde_json::Value {
    let region = |r: Option<crate::contract::Region>| r.map(|r| [r.r0, r.r1, r.c0, r.c1]);
    json!({
        "kind": p.kind.name(), "center": p.center, "radius": p.radius, "inner": p.inner,
        "outer": p.outer, "rect": region(p.rect), "scanRoi": region(p.scan_roi), "at": p.at,
        "rotation": p.rotation, "flip": p.flip,
    })
}

pub(super) fn compare(a: CompareArgs) -> Result<()> {
    let backend = Backend::parse(&a.backend)?;
    let opts = open_options(a.scan_shape.as_deref(), None)?;
    let acqs = acquisitions(&a.files, &opts)?;
    let (first, _) = &acqs[0];
    for (acq, _) in &acqs[1..] {
        crate::session::check_shared_detector(
            &first.primary,
            first,
            &acq.primary,
            acq,
            a.correction.bin,
        )?;
    }
    for (acq, _) in &acqs {
        a.params
            .validate(acq.shape, a.correction)
            .map_err(|e| Error::format(&acq.primary, e.to_string()))?;
    }
    std::fs::create_dir_all(&a.out_dir).map_err(|e| Error::Io {
        file: a.out_dir.display().to_string(),
        message: format!("cannot make the output folder: {e}"),
    })?;
    let read: Vec<PathBuf> = acqs.iter().flat_map(|(_, r)| r.clone()).collect();
    let kind = a.params.kind.name();
    let mut engines = Engines::default();
    let mut taken = Vec::new();
    let mut listed = Vec::new();
    println!(
        "{:<40} {:>11} {:>14} {:>14} {:>14}",
        "acquisition", "scan", "min", "max", "mean"
    );
    for (acq, _) in &acqs {
        let product = compute_on(backend, &mut engines, acq, &a.params, a.correction)?;
        let name = output_name(acq, kind, &mut taken);
        let path = a.out_dir.join(&name);
        let bytes = crate::products::npy::to_bytes(&product);
        write_new_file(&path, acq, &read, |w| {
            w.write_all(&bytes).map_err(|e| Error::Io {
                file: path.display().to_string(),
                message: format!("cannot write output: {e}"),
            })
        })?;
        let (lo, hi, mean) = summary(&product);
        let scan = format!("{}x{}", acq.shape.scan[0], acq.shape.scan[1]);
        println!(
            "{:<40} {scan:>11} {lo:>14.6e} {hi:>14.6e} {mean:>14.6e}",
            acq.primary
        );
        listed.push(json!({
            "primary": acq.primary,
            "files": acq.files.files().iter().map(|f| f.name()).collect::<Vec<_>>(),
            "shape": acq.shape.as_array(),
            "output": name,
            "min": lo, "max": hi, "mean": mean,
        }));
    }
    let index = json!({
        "product": kind,
        "params": params_json(&a.params),
        "bin": a.correction.bin,
        "mask_bad_pixels": a.correction.mask_bad_pixels,
        "backend": a.backend,
        "acquisitions": listed,
    });
    let text = serde_json::to_string_pretty(&index)
        .map_err(|e| Error::param(format!("compare.json: {e}")))?;
    let path: &Path = &a.out_dir.join("compare.json");
    write_new_file(path, &acqs[0].0, &read, |w| {
        w.write_all(text.as_bytes()).map_err(|e| Error::Io {
            file: path.display().to_string(),
            message: format!("cannot write: {e}"),
        })
    })
}
