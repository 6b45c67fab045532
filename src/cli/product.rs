//! `stem4d product`: one product of the files given, on the backend asked for, written as
//! `.npy`, as TIFF where `--out` ends in `.tif`/`.tiff`, or as a line profile's CSV
//! (`--line`, `--out NAME.csv`); whole or not at all, never over a file the run reads. And
//! `--backend`'s names.

use std::path::{Path, PathBuf};

use super::memory::{plan_words, product_within};
use super::{open_acquisition, refuse_input_overwrite, write_new_file, ProductArgs};
use crate::error::{Error, Result};
use crate::products::ProductKind;
use crate::upload::memory::CudaHeld;

/// `--backend`: the CPU reference, the wgpu engine on the best graphics API or a named
/// one, or CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Backend {
    Cpu,
    Wgpu(crate::gpu::GpuApi),
    /// The native CUDA backend (`src/cuda/`), in a binary built with `--features cuda`.
    Cuda,
}

impl Backend {
    pub(super) fn parse(name: &str) -> Result<Backend> {
        match name {
            "cpu" => Ok(Backend::Cpu),
            "cuda" if cfg!(feature = "cuda") => Ok(Backend::Cuda),
            "cuda" => Err(Error::param(
                "backend 'cuda' is not built into this binary (build it with `cargo build --release --features cuda`); use --backend cpu, wgpu, vulkan, metal or dx12",
            )),
            other => crate::gpu::GpuApi::parse(other)
                .map(Backend::Wgpu)
                .ok_or_else(|| {
                    Error::param(format!(
                        "unknown backend '{other}' (one of: cpu, wgpu, vulkan, metal, dx12, cuda)"
                    ))
                }),
        }
    }

    /// A GPU backend, for the commands that time one (`bench gpu`).
    pub(super) fn gpu(name: &str) -> Result<crate::gpu::GpuApi> {
        match Backend::parse(name)? {
            Backend::Wgpu(api) => Ok(api),
            Backend::Cpu => Err(Error::param(
                "--backend cpu: this command times a GPU backend (wgpu, vulkan, metal, dx12)",
            )),
            Backend::Cuda => Err(Error::param(
                "--backend cuda: this command times the wgpu engine (wgpu, vulkan, metal, dx12); CUDA products are timed by `stem4d product --backend cuda`",
            )),
        }
    }
}

pub(super) fn product(p: ProductArgs) -> Result<()> {
    let backend = Backend::parse(&p.backend)?;
    let (mut params, corr) = (p.params, p.correction);
    // A mask given to a product that takes none would be silently ignored: refuse it.
    if p.mask.is_some() && params.kind != ProductKind::Mask {
        return Err(Error::param(format!(
            "--mask is used only by --kind mask (it was given with --kind {})",
            params.kind.name()
        )));
    }
    let acq = open_acquisition(&p.open)?;
    if let Some(m) = &p.mask {
        // At most an 8-byte value per (binned or not) detector pixel, after its header.
        let limit = NPY_HEADER_MAX_BYTES + acq.shape.det_len() as u64 * 8;
        let bytes = read_side_input(m, "mask", limit)?;
        params.mask = Some(crate::products::npy::mask_from_npy(
            &m.display().to_string(),
            &bytes,
        )?);
    }
    // Every file the run reads: the inputs and the mask. Refused as --out before computing,
    // and again right before writing.
    let read: Vec<PathBuf> = p.open.files.iter().chain(&p.mask).cloned().collect();
    refuse_input_overwrite(&p.out, &acq, &read)?;
    let tiff = crate::products::tiff::is_tiff_path(&p.out);
    let csv = p
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    match (csv, p.line) {
        (true, None) => {
            return Err(Error::param(format!(
                "{}: a .csv output is a line profile: give --line R0,C0,R1,C1",
                p.out.display()
            )))
        }
        (false, Some(_)) => {
            return Err(Error::param(
                "--line writes a line profile as CSV: give --out NAME.csv",
            ))
        }
        _ => {}
    }
    if (tiff || csv) && params.kind == ProductKind::Binned {
        return Err(Error::param(format!(
            "{}: the binned acquisition is 4-D, not an image: write it as .npy",
            p.out.display()
        )));
    }
    if backend == Backend::Cpu && params.kind == ProductKind::Binned {
        // The whole acquisition, binned: written as it streams, never held (see --help).
        let name = p.out.display().to_string();
        return write_new_file(&p.out, &acq, &read, |w| {
            crate::cpu::write_binned_npy(&acq, corr, crate::frames::BLOCK_BYTES, w, &name)
        });
    }
    let out = match backend {
        Backend::Wgpu(api) if !p.budget.is_default() => {
            product_within(&acq, &params, corr, p.budget, api)?
        }
        Backend::Cuda if !p.budget.is_default() => {
            let held = cuda_held(p.budget)?;
            cuda_product(&mut Engines::default(), &acq, &params, corr, held)?
        }
        Backend::Cpu if !p.budget.is_default() => {
            eprintln!(
                "stem4d: memory plan: {}",
                plan_words(&crate::upload::memory::cpu_plan(corr.bin))
            );
            crate::cpu::compute(&acq, &params, corr)?
        }
        _ => compute_on(backend, &mut Engines::default(), &acq, &params, corr)?,
    };
    let pixel = crate::products::tiff::pixel_of(params.kind, &acq.calibration, corr.bin);
    let bytes = match (tiff, p.line) {
        (true, _) => crate::products::tiff::to_bytes(&out, pixel.as_ref(), params.kind.name())?,
        (false, Some([r0, c0, r1, c1])) => crate::display::line_profile::csv(
            &out,
            [r0, c0],
            [r1, c1],
            pixel.as_ref(),
            params.kind.name(),
        )?
        .into_bytes(),
        (false, None) => crate::products::npy::to_bytes(&out),
    };
    write_new_file(&p.out, &acq, &read, |w| {
        w.write_all(&bytes).map_err(|e| Error::Io {
            file: p.out.display().to_string(),
            message: format!("cannot write output: {e}"),
        })
    })
}

/// The GPU engines a run has started, kept for its next product (`stem4d compare`).
#[derive(Default)]
pub(super) struct Engines {
    wgpu: Option<crate::gpu::Engine>,
    #[cfg(feature = "cuda")]
    cuda: Option<crate::cuda::CudaEngine>,
}

/// One product of `acq` with the correction `corr` on `backend`, the whole acquisition
/// resident on a GPU backend; its engine started once for a run's products.
pub(super) fn compute_on(
    backend: Backend,
    engines: &mut Engines,
    acq: &crate::formats::Acquisition,
    params: &crate::products::ProductParams,
    corr: crate::frames::Correction,
) -> Result<crate::products::ProductArray> {
    match backend {
        Backend::Cpu => crate::cpu::compute(acq, params, corr),
        Backend::Wgpu(api) => {
            let engine = match &mut engines.wgpu {
                Some(e) => e,
                slot => slot.insert(pollster::block_on(crate::gpu::Engine::on(api, &[]))?),
            };
            pollster::block_on(crate::products::gpu::compute(engine, acq, params, corr))
        }
        Backend::Cuda => cuda_product(engines, acq, params, corr, CudaHeld::Raw),
    }
}

/// How `--memory-plan` asks the CUDA backend to hold the acquisition
/// (`CudaHeld::for_plan`), or the refusal of what it cannot.
pub(super) fn cuda_held(budget: super::memory::BudgetArgs) -> Result<CudaHeld> {
    CudaHeld::for_plan(budget.memory_budget, budget.memory_plan).ok_or_else(|| {
        Error::param(
            "--backend cuda holds the whole acquisition, raw (--memory-plan resident) or compressed (--memory-plan compressed); --memory-budget and the streaming and cpu plans are the wgpu engine's",
        )
    })
}

/// One product on the CUDA backend, its engine started once for a run's products; a
/// compressed resident's size is said on standard error (the output's provenance).
#[cfg(feature = "cuda")]
fn cuda_product(
    engines: &mut Engines,
    acq: &crate::formats::Acquisition,
    params: &crate::products::ProductParams,
    corr: crate::frames::Correction,
    held: CudaHeld,
) -> Result<crate::products::ProductArray> {
    let engine = match &mut engines.cuda {
        Some(e) => e,
        slot => {
            let e = crate::cuda::CudaEngine::new()?;
            eprintln!("stem4d: backend cuda on {}", e.line());
            slot.insert(e)
        }
    };
    params.validate(acq.shape, corr)?;
    let res = crate::cuda::CudaResident::upload_held(engine, acq, corr, held)?;
    if held == CudaHeld::Compressed {
        eprintln!("stem4d: {}", res.held_words());
    }
    crate::cuda::compute_resident(engine, acq, &res, params)
}

#[cfg(not(feature = "cuda"))]
fn cuda_product(
    _: &mut Engines,
    _: &crate::formats::Acquisition,
    _: &crate::products::ProductParams,
    _: crate::frames::Correction,
    _: CudaHeld,
) -> Result<crate::products::ProductArray> {
    Err(Error::param("backend 'cuda' is not built into this binary"))
}

/// The largest `.npy` header a side input may have (numpy writes 128 bytes or a few more).
const NPY_HEADER_MAX_BYTES: u64 = 64 << 10;

/// A side input (`what`: the mask) read whole: a regular file (never a device, FIFO or
/// directory, which could hang or never end) of at most `limit` bytes.
fn read_side_input(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let io = |message: String| Error::Io {
        file: path.display().to_string(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| io(format!("cannot read {what}: {e}")))?;
    if !meta.is_file() {
        return Err(io(format!("the {what} must be a regular file")));
    }
    if meta.len() > limit {
        return Err(io(format!(
            "the {what} holds {} bytes, more than a mask of this detector can ({limit} at most)",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| io(format!("cannot read {what}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(io(format!(
            "the {what} grew past {limit} bytes while it was read"
        )));
    }
    Ok(bytes)
}
