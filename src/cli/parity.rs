//! `stem4d parity`: the parity matrix (`parity`) of the given acquisition on each backend
//! asked for, printed as a table (product × backend: max error, pass/fail) after the
//! adapters the machine has, and written as JSON rows with `--json`.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::gpu::{AdapterLine, Engine, GpuApi};
use crate::parity::{self, Outcome, Row};
use crate::upload::memory::CudaHeld;

/// What `stem4d parity` checks and where it writes.
pub struct ParityArgs {
    pub mask_bad_pixels: bool,
    /// Kernels replaced by name (`--kernels DIR`).
    pub overrides: Vec<(String, String)>,
    /// The wgpu backends, in the order given (the CPU reference is always computed).
    pub apis: Vec<GpuApi>,
    /// The CUDA backend's residents asked for too (after the wgpu ones): `cuda` (raw),
    /// `cuda-compressed`.
    pub cuda: Vec<CudaHeld>,
    pub json: Option<PathBuf>,
    /// The files the run reads (the JSON never replaces one).
    pub read: Vec<PathBuf>,
}

/// `--backends`: `cpu` (the reference, always computed), `wgpu`, `vulkan`, `metal`, `dx12`,
/// `cuda` and `cuda-compressed` (the CUDA backend holding the acquisition compressed;
/// both refused in a binary built without it). Each name once, in the order given.
pub fn parse_backends(list: &str) -> Result<(Vec<GpuApi>, Vec<CudaHeld>)> {
    let mut apis = Vec::new();
    let mut cuda = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match (name, CudaHeld::parse(name)) {
            ("cpu", _) => {}
            (_, Some(_)) if !cfg!(feature = "cuda") => {
                return Err(Error::param(format!(
                    "--backends {name}: the cuda backend is not built into this binary (build it with `cargo build --release --features cuda`)"
                )))
            }
            (_, Some(h)) => {
                if !cuda.contains(&h) {
                    cuda.push(h);
                }
            }
            (other, None) => match GpuApi::parse(other) {
                Some(api) if !apis.contains(&api) => apis.push(api),
                Some(_) => {}
                None => {
                    return Err(Error::param(format!(
                        "--backends: unknown backend '{other}' (one of: cpu, wgpu, vulkan, metal, dx12, cuda, cuda-compressed)"
                    )))
                }
            },
        }
    }
    Ok((apis, cuda))
}

/// Every product on each backend of `args` against the CPU reference. A backend named
/// (or kernels replaced) that cannot start is an error: a CPU-only table would read as a
/// pass. `wgpu` alone without an adapter leaves the reference's rows.
pub fn run(acq: &Acquisition, args: &ParityArgs) -> Result<()> {
    let adapters = pollster::block_on(crate::gpu::adapters());
    println!("adapters found: {}", adapters.len());
    for a in &adapters {
        println!("  {a}");
    }
    let cuda_devices = cuda_devices();
    match &cuda_devices {
        Ok(names) => {
            println!("CUDA devices found: {}", names.len());
            names.iter().for_each(|n| println!("  {n}"));
        }
        Err(why) => println!("CUDA devices: none ({why})"),
    }
    let requests = parity::matrix(acq, args.mask_bad_pixels)?;
    println!(
        "parity: {:?} {:?} {}  bad pixels masked: {}",
        acq.format,
        acq.shape.as_array(),
        acq.dtype.name(),
        args.mask_bad_pixels
    );
    println!(
        "{:<22} {:<10} {:<44} {:>12}  result",
        "product", "backend", "", "max error"
    );
    // (row, the adapter that computed it)
    let mut all: Vec<(Row, Option<String>)> = Vec::new();
    if args.apis.is_empty() {
        let rows = pollster::block_on(parity::run(None, "cpu", acq, &requests));
        all.extend(rows.into_iter().map(|r| (r, None)));
    }
    for (i, &api) in args.apis.iter().enumerate() {
        let engine = pollster::block_on(Engine::on(api, &args.overrides));
        let engine = match engine {
            Err(e) if !args.overrides.is_empty() || api != GpuApi::Any => return Err(e),
            engine => engine,
        };
        let adapter = engine.as_ref().ok().map(|e| e.adapter.line().to_string());
        match (&engine, &adapter) {
            (Ok(_), Some(a)) => println!("{:<22} {:<10} {a}", "", api.name()),
            (Err(e), _) => println!("{:<22} {:<10} unavailable: {e}", "", api.name()),
            _ => {}
        }
        let rows = pollster::block_on(parity::run(
            engine.as_ref().ok(),
            api.name(),
            acq,
            &requests,
        ));
        // The reference's rows once, with the first backend.
        all.extend(
            rows.into_iter()
                .filter(|r| i == 0 || r.backend != "cpu")
                .map(|r| {
                    let on = (r.backend != "cpu").then(|| adapter.clone()).flatten();
                    (r, on)
                }),
        );
    }
    if !args.cuda.is_empty() {
        all.extend(cuda_rows(acq, &requests, &args.cuda)?);
    }
    all.iter().for_each(|(r, _)| print_row(r));
    if let Some(path) = &args.json {
        write_json(path, acq, args, (&adapters, &cuda_devices), &all)?;
    }
    let failed = all.iter().filter(|(r, _)| r.failed()).count();
    if failed > 0 {
        return Err(Error::Gpu(format!("{failed} products failed parity")));
    }
    Ok(())
}

/// The CUDA devices the driver sees (`--backends cuda` takes the first), or why there are
/// none.
fn cuda_devices() -> std::result::Result<Vec<String>, String> {
    #[cfg(feature = "cuda")]
    return crate::cuda::devices().map_err(|e| e.to_string());
    #[cfg(not(feature = "cuda"))]
    Err("this binary is built without the CUDA backend".into())
}

/// The CUDA backend's rows, for each resident asked for: asked for by name, so a machine
/// without CUDA is an error.
#[cfg(feature = "cuda")]
fn cuda_rows(
    acq: &Acquisition,
    requests: &[crate::products::ProductRequest],
    held: &[CudaHeld],
) -> Result<Vec<(Row, Option<String>)>> {
    let engine = crate::cuda::CudaEngine::new()?;
    let line = engine.line();
    let mut rows = Vec::new();
    for &h in held {
        println!("{:<22} {:<10} {line}", "", h.name());
        rows.extend(
            parity::run_cuda(&engine, acq, requests, h)
                .into_iter()
                .map(|r| (r, Some(line.clone()))),
        );
    }
    Ok(rows)
}

#[cfg(not(feature = "cuda"))]
fn cuda_rows(
    _: &Acquisition,
    _: &[crate::products::ProductRequest],
    _: &[CudaHeld],
) -> Result<Vec<(Row, Option<String>)>> {
    Err(Error::param("--backends cuda: not built into this binary"))
}

/// The matrix as JSON: the acquisition, the adapters and CUDA devices found (`null`: none,
/// or no CUDA backend in this binary), and one object per row
/// (product, backend, adapter, dtype, max abs and relative error, bound, outcome, pass).
fn write_json(
    path: &Path,
    acq: &Acquisition,
    args: &ParityArgs,
    (adapters, cuda): (&[AdapterLine], &std::result::Result<Vec<String>, String>),
    rows: &[(Row, Option<String>)],
) -> Result<()> {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(r, adapter)| {
            json!({
                "product": r.product,
                "backend": r.backend,
                "adapter": adapter,
                "dtype": r.dtype,
                "max_abs_error": r.max_error,
                "max_rel_error": r.max_rel_error,
                "bound": r.bound,
                "outcome": r.outcome,
                "pass": !r.failed(),
            })
        })
        .collect();
    let doc = json!({
        "files": acq.files.files().iter().map(|f| f.name()).collect::<Vec<_>>(),
        "format": format!("{:?}", acq.format),
        "shape": acq.shape.as_array(),
        "dtype": acq.dtype.name(),
        "bad_pixels_masked": args.mask_bad_pixels,
        "adapters": adapters,
        "cuda_devices": cuda.as_ref().ok(),
        "rows": rows,
    });
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::param(format!("parity JSON: {e}")))?;
    super::write_new_file(path, acq, &args.read, |w| {
        w.write_all(text.as_bytes()).map_err(|e| Error::Io {
            file: path.display().to_string(),
            message: format!("cannot write: {e}"),
        })
    })
}

fn print_row(r: &Row) {
    let (name, backend) = (&r.product, r.backend);
    let err = match r.max_error {
        Some(e) if r.outcome == Outcome::Reference => format!("{e}"),
        Some(e) => format!("{e:.3e}"),
        None => "-".into(),
    };
    let (dtype, result) = match &r.outcome {
        Outcome::Reference => (
            "float64 / exact integers".to_string(),
            "reference".to_string(),
        ),
        Outcome::Refused(why) => {
            println!("{name:<22} {backend:<10} refused: {why}");
            return;
        }
        Outcome::Pass if r.max_error.is_none() => (String::new(), "PASS (refused too)".into()),
        Outcome::Pass => (r.dtype.clone(), "PASS".into()),
        // The table's old form: the verdict last (the first value out of bounds is in
        // the row's outcome for the page and the tests).
        Outcome::Fail(_) if r.max_error.is_some() => (r.dtype.clone(), "FAIL".into()),
        Outcome::Fail(why) => (String::new(), format!("FAIL ({why})")),
        Outcome::Declined(why) => (String::new(), format!("n/a: {why}")),
    };
    println!("{name:<22} {backend:<10} {dtype:<44} {err:>12}  {result}");
}
