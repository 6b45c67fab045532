//! `stem4d._stem4d`: the engine behind the `stem4d` Python package (`python/stem4d/`).
//! An acquisition is opened as the CLI opens it (an Arina master's files found beside it),
//! products are the CLI's (one parameter vocabulary: the page's JSON, which the Python
//! wrapper writes from keyword arguments) with the CLI's dtypes and shapes, and every error
//! is a `stem4d.Error` carrying the engine's one-line message. Products and frame reads run
//! on a thread of their own while the caller's waits with the interpreter released, so that
//! Ctrl-C (KeyboardInterrupt) stops them at their next block ([`interruptible`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::ndarray::{ArrayD, IxDyn};
use numpy::IntoPyArray;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use stem4d::cuda::{CudaEngine, CudaResident};
use stem4d::formats::{Acquisition as Acq, OpenOptions};
use stem4d::frames::{Correction, FrameReader};
use stem4d::gpu::{Engine, GpuApi, Resident};
use stem4d::planned::{compute_planned, PlanChoice};
use stem4d::products::{ArrayData, ProductArray, ProductRequest};
use stem4d::upload::memory::CudaHeld;

create_exception!(
    _stem4d,
    Error,
    PyException,
    "An error of the stem4d engine: the message names the file and the problem."
);

fn err(e: stem4d::Error) -> PyErr {
    Error::new_err(e.to_string())
}

/// How often the waiting thread wakes to pass on progress and run Python's signal handlers.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Run `work` on a thread of its own, watched (`stem4d::watch`), while this thread waits
/// with the interpreter released. It wakes at each step the work reports and every
/// [`POLL`], calls `progress(stage, done, total)` where given, and lets Python's signal
/// handlers run: a KeyboardInterrupt (or an exception raised by `progress`) cancels the
/// work, which stops at its next block and leaves the acquisition as it was; the exception
/// is raised once it has.
fn interruptible<T: Send>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce() -> stem4d::Result<T> + Send,
) -> PyResult<T> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let cancel = stem4d::watch::Cancel::default();
    let (tx, mut rx) = channel::<(&'static str, u64, u64)>();
    std::thread::scope(|s| {
        let watch = cancel.clone();
        let worker = s.spawn(move || {
            let heard: stem4d::watch::Progress = Box::new(move |stage, done, total| {
                // The waiting thread may have stopped listening: nothing to tell then.
                let _ = tx.send((stage, done, total));
            });
            stem4d::watch::watched(watch, Some(heard), work)
        });
        let mut raised: Option<PyErr> = None;
        loop {
            let (got, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
            rx = back;
            match got {
                Ok(step) => {
                    if let (Some(p), None) = (progress, &raised) {
                        if let Err(e) = p.call1(step) {
                            cancel.cancel();
                            raised = Some(e);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The work is over: its progress went with its watch.
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if raised.is_none() {
                if let Err(e) = py.check_signals() {
                    cancel.cancel();
                    raised = Some(e);
                }
            }
        }
        let out = worker
            .join()
            .map_err(|_| Error::new_err("the stem4d engine panicked"))?;
        match raised {
            Some(e) => Err(e),
            None => out.map_err(err),
        }
    })
}

/// Where products are computed.
enum Backend {
    Cpu,
    Wgpu {
        engine: Arc<Mutex<Engine>>,
        /// The resident, made at the first product (no budget or plan asked for).
        resident: Option<Box<Resident>>,
    },
    /// The native CUDA backend (the package is built with it; the driver and NVRTC are
    /// found at run time).
    Cuda {
        engine: Arc<CudaEngine>,
        /// The resident, made at the first product.
        resident: Option<Box<CudaResident>>,
        /// Raw, or compressed (`memory_plan="compressed"`, decision 0064).
        held: CudaHeld,
    },
}

/// The process's CUDA engine, made at its first use (its kernels compiled by NVRTC once).
fn shared_cuda() -> stem4d::Result<Arc<CudaEngine>> {
    static ENGINE: Mutex<Option<Arc<CudaEngine>>> = Mutex::new(None);
    let mut made = ENGINE
        .lock()
        .map_err(|_| stem4d::Error::Gpu("the CUDA engine was poisoned by a panic".into()))?;
    if let Some(e) = made.as_ref() {
        return Ok(e.clone());
    }
    let e = Arc::new(CudaEngine::new()?);
    *made = Some(e.clone());
    Ok(e)
}

/// One opened acquisition.
#[pyclass(module = "stem4d._stem4d")]
struct Acquisition {
    acq: Acq,
    corr: Correction,
    choice: PlanChoice,
    backend: Mutex<Backend>,
    backend_name: String,
    /// What the engine said while computing (plans taken, fallbacks), oldest first.
    provenance: Mutex<Vec<String>>,
    files: Vec<PathBuf>,
}

fn array(py: Python<'_>, p: ProductArray) -> PyResult<Py<PyAny>> {
    let shape = IxDyn(&p.shape);
    let bad = |e: numpy::ndarray::ShapeError| Error::new_err(format!("product shape: {e}"));
    Ok(match p.data {
        ArrayData::U8(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
        ArrayData::U16(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
        ArrayData::U32(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
        ArrayData::U64(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
        ArrayData::F32(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
        ArrayData::F64(v) => ArrayD::from_shape_vec(shape, v)
            .map_err(bad)?
            .into_pyarray(py)
            .into_any()
            .unbind(),
    })
}

/// The process's GPU engine on `api`, made at its first use: a device and its pipelines
/// take a while to build, and acquisitions opened one after another share them.
fn shared_engine(api: GpuApi) -> stem4d::Result<Arc<Mutex<Engine>>> {
    static ENGINES: Mutex<Vec<(GpuApi, Arc<Mutex<Engine>>)>> = Mutex::new(Vec::new());
    let mut made = ENGINES
        .lock()
        .map_err(|_| stem4d::Error::Gpu("the GPU engine was poisoned by a panic".into()))?;
    if let Some((_, e)) = made.iter().find(|(a, _)| *a == api) {
        return Ok(e.clone());
    }
    let e = Arc::new(Mutex::new(pollster::block_on(Engine::on(api, &[]))?));
    made.push((api, e.clone()));
    Ok(e)
}

/// The GPU engine `backend` asks for: `wgpu` (the best adapter) and the named graphics APIs
/// (`vulkan`, `metal`, `dx12`) must have one (its error is raised), `auto` takes a hardware
/// adapter where there is one and otherwise says why not (`open` then tries CUDA).
fn engine_for(
    backend: &str,
    notes: &mut Vec<String>,
) -> stem4d::Result<Option<Arc<Mutex<Engine>>>> {
    let software = |e: &Arc<Mutex<Engine>>| {
        e.lock()
            .map(|e| e.adapter.software.then(|| e.adapter.name.clone()))
            .unwrap_or(None)
    };
    match backend {
        "cpu" => Ok(None),
        "auto" => match shared_engine(GpuApi::Any) {
            Ok(e) => match software(&e) {
                None => Ok(Some(e)),
                Some(name) => {
                    notes.push(format!("backend auto: wgpu has only {name}, a software adapter"));
                    Ok(None)
                }
            },
            Err(e) => {
                notes.push(format!("backend auto: wgpu has no adapter ({e})"));
                Ok(None)
            }
        },
        // Made by `open` itself: it is not a wgpu engine.
        "cuda" => Ok(None),
        other => match GpuApi::parse(other) {
            Some(api) => shared_engine(api).map(Some),
            None => Err(stem4d::Error::param(format!(
                "backend '{other}' is not one of 'auto', 'wgpu', 'vulkan', 'metal', 'dx12', 'cuda', 'cpu'"
            ))),
        },
    }
}

/// Where `open` computes for `backend` (see [`engine_for`]), and its name for
/// `Acquisition.backend`. `cuda` is the CUDA engine or its error; `auto` without a hardware
/// adapter for wgpu (a compute node with the NVIDIA driver but no Vulkan loader, say) takes
/// CUDA where it is, else the CPU reference, and says which in `notes`.
fn backend_for(
    backend: &str,
    choice: PlanChoice,
    notes: &mut Vec<String>,
) -> stem4d::Result<(Backend, String)> {
    let planned = choice.budget.is_some() || choice.plan.is_some();
    let cuda = |engine: Arc<CudaEngine>, held: CudaHeld| {
        let name = format!("cuda ({})", engine.line());
        let chosen = Backend::Cuda {
            engine,
            resident: None,
            held,
        };
        (chosen, name)
    };
    if backend == "cuda" {
        let held = CudaHeld::for_plan(choice.budget, choice.plan).ok_or_else(|| {
            stem4d::Error::param(
                "backend 'cuda' holds the whole acquisition, raw (memory_plan='resident') or compressed (memory_plan='compressed'); memory_budget and the streaming and cpu plans are the wgpu engine's",
            )
        })?;
        return Ok(cuda(shared_cuda()?, held));
    }
    let engine = engine_for(backend, notes)?;
    if let Some(engine) = engine {
        let name = match engine.lock() {
            Ok(e) => format!("wgpu ({}, {})", e.adapter.name, e.adapter.backend),
            Err(_) => return Err(stem4d::Error::Gpu("the GPU engine was poisoned".into())),
        };
        let chosen = Backend::Wgpu {
            engine,
            resident: None,
        };
        return Ok((chosen, name));
    }
    if backend == "auto" {
        // A memory budget or plan is the wgpu engine's: then the CPU reference, said so.
        let found = match planned {
            true => Err(stem4d::Error::param(
                "a memory budget or plan is the wgpu engine's",
            )),
            false => shared_cuda(),
        };
        match found {
            Ok(e) => {
                notes.push(format!(
                    "backend auto: CUDA on {} computes the products",
                    e.line()
                ));
                return Ok(cuda(e, CudaHeld::Raw));
            }
            Err(e) => notes.push(format!(
                "backend auto: not CUDA either ({e}), so the CPU reference computes the products"
            )),
        }
    }
    Ok((Backend::Cpu, "cpu".to_string()))
}

/// Open the acquisition of `paths` (see `stem4d.open`).
#[pyfunction]
#[pyo3(signature = (paths, scan_shape=None, dataset=None, bin=1, mask_bad_pixels=false, memory_budget=None, memory_plan=None, backend="auto", crop=None))]
#[allow(clippy::too_many_arguments)]
fn open(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    scan_shape: Option<(usize, usize)>,
    dataset: Option<String>,
    bin: usize,
    mask_bad_pixels: bool,
    memory_budget: Option<u64>,
    memory_plan: Option<String>,
    backend: &str,
    crop: Option<(usize, usize, usize, usize)>,
) -> PyResult<Acquisition> {
    let plan = memory_plan
        .as_deref()
        .map(stem4d::upload::memory::parse_plan)
        .transpose()
        .map_err(Error::new_err)?;
    let backend = backend.to_string();
    py.detach(move || -> stem4d::Result<Acquisition> {
        if paths.is_empty() {
            return Err(stem4d::Error::param("stem4d.open: no files given"));
        }
        let opts = OpenOptions {
            scan_shape: scan_shape.map(|(r, c)| [r, c]),
            dataset,
        };
        let (acq, files) = stem4d::formats::beside::open_beside(&paths, &opts)?;
        // Only the chunks of the scan rows and columns kept are read (C-CROP).
        let acq = match crop {
            Some((r0, r1, c0, c1)) => acq.crop_scan(stem4d::contract::Region { r0, r1, c0, c1 })?,
            None => acq,
        };
        let corr = Correction {
            mask_bad_pixels,
            bin,
        };
        corr.validate(acq.shape)?;
        let mut notes = Vec::new();
        let choice = PlanChoice {
            budget: memory_budget,
            plan,
        };
        let (chosen, name) = backend_for(&backend, choice, &mut notes)?;
        Ok(Acquisition {
            acq,
            corr,
            choice,
            backend: Mutex::new(chosen),
            backend_name: name,
            provenance: Mutex::new(notes),
            files,
        })
    })
    .map_err(err)
}

impl Acquisition {
    fn compute(&self, request: &str) -> stem4d::Result<ProductArray> {
        let json: serde_json::Value = serde_json::from_str(request)
            .map_err(|e| stem4d::Error::param(format!("product parameters: {e}")))?;
        let ProductRequest { params, correction } = ProductRequest::from_json(&json)?;
        if correction != self.corr {
            return Err(stem4d::Error::param(
                "bin and mask_bad_pixels belong to stem4d.open: open the acquisition again to change them",
            ));
        }
        params.validate(self.acq.shape, self.corr)?;
        let mut said = Vec::new();
        let mut backend = self
            .backend
            .lock()
            .map_err(|_| stem4d::Error::param("an earlier product panicked"))?;
        let out = match &mut *backend {
            Backend::Cpu => stem4d::cpu::compute(&self.acq, &params, self.corr),
            Backend::Cuda {
                engine,
                resident,
                held,
            } => {
                if resident.is_none() {
                    let res = CudaResident::upload_held(engine, &self.acq, self.corr, *held)?;
                    if *held == CudaHeld::Compressed {
                        said.push(res.held_words());
                    }
                    *resident = Some(Box::new(res));
                }
                match resident.as_ref() {
                    Some(res) => stem4d::cuda::compute_resident(engine, &self.acq, res, &params),
                    None => Err(stem4d::Error::Gpu("no CUDA resident was made".into())),
                }
            }
            Backend::Wgpu { engine, resident } => {
                let engine = &*engine
                    .lock()
                    .map_err(|_| stem4d::Error::Gpu("the GPU engine was poisoned".into()))?;
                if self.choice.budget.is_none() && self.choice.plan.is_none() {
                    if resident.is_none() {
                        let mut res = pollster::block_on(engine.upload(&self.acq, self.corr))?;
                        pollster::block_on(stem4d::products::gpu::settle_bad_pixels(
                            engine, &self.acq, &mut res,
                        ))?;
                        *resident = Some(Box::new(res));
                    }
                    match resident.as_ref() {
                        Some(res) => pollster::block_on(stem4d::products::gpu::compute_resident(
                            engine, &self.acq, res, &params,
                        )),
                        None => Err(stem4d::Error::Gpu("no resident was made".into())),
                    }
                } else {
                    pollster::block_on(compute_planned(
                        engine,
                        &self.acq,
                        &params,
                        self.corr,
                        self.choice,
                        &mut |line| said.push(line),
                    ))
                }
            }
        };
        if let Ok(mut p) = self.provenance.lock() {
            p.extend(said);
        }
        out
    }
}

#[pymethods]
impl Acquisition {
    /// `(scan rows, scan cols, detector rows, detector cols)` as stored (before the bin).
    #[getter]
    fn shape(&self) -> (usize, usize, usize, usize) {
        let [a, b, c, d] = self.acq.shape.as_array();
        (a, b, c, d)
    }

    /// The samples' numpy dtype name (`uint8`, `uint16`, `uint32`, `float32`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.acq.dtype.name()
    }

    #[getter]
    fn bin(&self) -> usize {
        self.corr.bin
    }

    #[getter]
    fn mask_bad_pixels(&self) -> bool {
        self.corr.mask_bad_pixels
    }

    /// Where products are computed: `cpu`, or `wgpu (ADAPTER, BACKEND)`.
    #[getter]
    fn backend(&self) -> String {
        self.backend_name.clone()
    }

    /// Every file the acquisition reads (those given and those found beside them).
    #[getter]
    fn files(&self) -> Vec<PathBuf> {
        self.files.clone()
    }

    /// What the engine said while computing: plans taken, fallbacks.
    #[getter]
    fn provenance(&self) -> Vec<String> {
        self.provenance
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// `stem4d info --json` of the acquisition, as JSON text.
    fn info_json(&self) -> PyResult<String> {
        serde_json::to_string(&stem4d::formats::info::Info::of(&self.acq, false))
            .map_err(|e| Error::new_err(format!("info: {e}")))
    }

    /// One product from the page's JSON parameters (`{"kind": "bf", "center": [r, c], …}`);
    /// `progress(stage, done, total)` hears the steps of long work.
    #[pyo3(signature = (request, progress=None))]
    fn product_json(
        &self,
        py: Python<'_>,
        request: &str,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let out = interruptible(py, progress.as_ref(), || self.compute(request))?;
        array(py, out)
    }

    /// Write the acquisition as a prepared file at `out` (`NAME.stem4d`, as `stem4d prepare`
    /// writes it): never one of the files it was opened from; Ctrl-C stops it, and a file
    /// stopped short is never left.
    #[pyo3(signature = (out, progress=None))]
    fn prepare(
        &self,
        py: Python<'_>,
        out: PathBuf,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        use stem4d::formats::prepared::EXTENSION;
        use stem4d::upload::prepare;
        if !out.to_string_lossy().ends_with(EXTENSION) {
            return Err(Error::new_err(format!(
                "{}: a prepared acquisition is named NAME{EXTENSION}",
                out.display()
            )));
        }
        let same = |p: &PathBuf| matches!((p.canonicalize(), out.canonicalize()), (Ok(a), Ok(b)) if a == b);
        if let Some(input) = self.files.iter().find(|p| same(p)) {
            return Err(Error::new_err(format!(
                "{} would overwrite {}, a file the acquisition is read from",
                out.display(),
                input.display()
            )));
        }
        let acq = &self.acq;
        interruptible(py, progress.as_ref(), || {
            prepare::write(acq, &out, prepare::BLOCK_BYTES, None, &mut |_, _| {}).map(|_| ())
        })
    }

    /// The frames of scan rows `[r0, r1)`, decoded as stored (no bin, no bad pixels
    /// zeroed), row after row: `((r1 - r0) · scan cols, Kr, Kc)`.
    #[pyo3(signature = (r0, r1, progress=None))]
    fn frames(
        &self,
        py: Python<'_>,
        r0: usize,
        r1: usize,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let acq = &self.acq;
        let [rows, cols] = acq.shape.scan;
        if r0 > r1 || r1 > rows {
            return Err(Error::new_err(format!(
                "{}: scan rows {r0}..{r1} are not within the {rows} rows",
                acq.primary
            )));
        }
        let (f0, f1) = (r0 * cols, r1 * cols);
        let bytes = interruptible(py, progress.as_ref(), || read_frames(acq, f0, f1))?;
        let [kr, kc] = acq.shape.det;
        let n = f1 - f0;
        let size = acq.dtype.size();
        let data = match acq.dtype {
            stem4d::contract::Dtype::U8 => ArrayData::U8(bytes),
            stem4d::contract::Dtype::U16 => ArrayData::U16(
                bytes
                    .chunks_exact(size)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect(),
            ),
            stem4d::contract::Dtype::U32 => ArrayData::U32(
                bytes
                    .chunks_exact(size)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            stem4d::contract::Dtype::F32 => ArrayData::F32(
                bytes
                    .chunks_exact(size)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
        };
        array(
            py,
            ProductArray {
                shape: vec![n, kr, kc],
                data,
            },
        )
    }
}

/// Frames `[f0, f1)` as stored, read in blocks of about `frames::BLOCK_BYTES` (the CLI's
/// and the CPU reference's) so that the read reports its progress and can be stopped
/// between blocks.
fn read_frames(acq: &Acq, f0: usize, f1: usize) -> stem4d::Result<Vec<u8>> {
    let frame_bytes = (acq.shape.det_len() * acq.dtype.size()).max(1);
    let step = (stem4d::frames::BLOCK_BYTES / frame_bytes).max(1);
    let reader = FrameReader::new(acq);
    let mut out = Vec::with_capacity((f1 - f0) * frame_bytes);
    let mut f = f0;
    while f < f1 {
        let end = (f + step).min(f1);
        out.extend_from_slice(&reader.read_raw(f, end)?);
        stem4d::watch::step(stem4d::watch::FRAMES, (end - f0) as u64, (f1 - f0) as u64)?;
        f = end;
    }
    Ok(out)
}

#[pymodule]
fn _stem4d(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<Acquisition>()?;
    m.add("Error", m.py().get_type::<Error>())?;
    Ok(())
}
