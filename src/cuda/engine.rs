//! The CUDA device, its stream and the kernels: every `wgsl/*.cu` file after `common.cu`,
//! compiled by NVRTC for the device's own architecture into a CUBIN (no PTX that a driver
//! older than the toolkit could refuse).

use std::ffi::CString;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};

use crate::error::{Error, Result};

/// The CUDA sources, `common.cu` first: one module holds every kernel.
const SOURCES: [(&str, &str); 14] = [
    ("common.cu", include_str!("../../wgsl/common.cu")),
    ("masked_sum.cu", include_str!("../../wgsl/masked_sum.cu")),
    ("packed.cu", include_str!("../../wgsl/packed.cu")),
    (
        "masked_sum_packed.cu",
        include_str!("../../wgsl/masked_sum_packed.cu"),
    ),
    (
        "com_moments_packed.cu",
        include_str!("../../wgsl/com_moments_packed.cu"),
    ),
    (
        "pattern_reduce_packed.cu",
        include_str!("../../wgsl/pattern_reduce_packed.cu"),
    ),
    ("com_moments.cu", include_str!("../../wgsl/com_moments.cu")),
    (
        "pattern_reduce.cu",
        include_str!("../../wgsl/pattern_reduce.cu"),
    ),
    ("zero_pixels.cu", include_str!("../../wgsl/zero_pixels.cu")),
    ("tile_frames.cu", include_str!("../../wgsl/tile_frames.cu")),
    ("fft.cu", include_str!("../../wgsl/fft.cu")),
    ("dpc_curl.cu", include_str!("../../wgsl/dpc_curl.cu")),
    ("bslz4.cu", include_str!("../../wgsl/bslz4.cu")),
    ("unshuffle.cu", include_str!("../../wgsl/unshuffle.cu")),
];

/// A driver error, said as what was being done.
pub(super) fn driver_error(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Gpu(format!("CUDA: {what}: {e}"))
}

/// Whether the NVIDIA driver library loads: cudarc panics on a call into a missing one.
fn driver_present() -> Result<()> {
    // SAFETY: only probes whether the library loads (cudarc's own search).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::Gpu(
            "CUDA is not available on this machine: the NVIDIA driver library (libcuda) was not found".into(),
        ));
    }
    Ok(())
}

/// Whether NVRTC loads (cudarc panics on a call into a missing library).
fn nvrtc_present() -> Result<()> {
    // SAFETY: only probes whether the library loads (cudarc's own search).
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Gpu(
            "CUDA is not available on this machine: NVRTC (libnvrtc, the CUDA toolkit's run-time compiler) was not found; add the toolkit's lib64 folder to LD_LIBRARY_PATH".into(),
        ));
    }
    Ok(())
}

/// The CUDA devices the driver sees, by name, as `stem4d parity` lists the machine's
/// adapters; or why there are none. Nothing is compiled and no context is made.
pub fn devices() -> Result<Vec<String>> {
    use cudarc::driver::result::device;
    driver_present()?;
    let n = CudaContext::device_count().map_err(driver_error("count the devices"))?;
    (0..n)
        .map(|i| {
            let d = device::get(i).map_err(driver_error("a device"))?;
            device::get_name(d).map_err(driver_error("a device's name"))
        })
        .collect()
}

pub struct CudaEngine {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    /// The device's name and compute capability, as provenance names the backend.
    pub name: String,
    pub compute_capability: (i32, i32),
}

impl CudaEngine {
    /// The first CUDA device with the kernels compiled for it, or why there is none: no
    /// driver library, no NVRTC, no device, or a compile error with NVRTC's log.
    pub fn new() -> Result<CudaEngine> {
        driver_present()?;
        nvrtc_present()?;
        let ctx = CudaContext::new(0).map_err(driver_error("no device 0"))?;
        let compute_capability = ctx
            .compute_capability()
            .map_err(driver_error("compute capability"))?;
        let name = ctx.name().map_err(driver_error("device name"))?;
        let module = compile(&ctx, compute_capability)?;
        let stream = ctx.default_stream();
        Ok(CudaEngine {
            ctx,
            stream,
            module,
            name,
            compute_capability,
        })
    }

    /// The kernel `name` (an `extern "C"` entry point of `wgsl/*.cu`).
    pub(super) fn function(&self, name: &str) -> Result<CudaFunction> {
        self.module
            .load_function(name)
            .map_err(|e| Error::Gpu(format!("CUDA: kernel {name}: {e}")))
    }

    /// Wait for everything queued on the stream.
    pub(super) fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(driver_error("synchronize"))
    }

    /// One line for provenance and `stem4d parity`.
    pub fn line(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("{} (CUDA, sm_{major}{minor})", self.name)
    }
}

/// Compile every source into one CUBIN for the device's architecture and load it.
fn compile(ctx: &Arc<CudaContext>, arch: (i32, i32)) -> Result<Arc<CudaModule>> {
    ctx.load_module(cudarc::nvrtc::Ptx::from_binary(compile_kernels(arch)?))
        .map_err(driver_error("load the kernels"))
}

/// Every source compiled by NVRTC into one CUBIN for `sm_{major}{minor}`, or NVRTC's log.
/// NVRTC needs no driver and no device, so CI compiles the kernels for several
/// architectures on a machine without a GPU (`tests/cuda.rs`).
pub fn compile_kernels((major, minor): (i32, i32)) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result as nvrtc, sys};
    nvrtc_present()?;
    let text: String = SOURCES
        .iter()
        // `#line` so that NVRTC's log names the file and line of each error.
        .map(|(name, src)| format!("#line 1 \"wgsl/{name}\"\n{src}\n"))
        .collect();
    let nvrtc_err = |what: &str, e: nvrtc::NvrtcError| Error::Gpu(format!("NVRTC: {what}: {e}"));
    let src = CString::new(text).map_err(|_| Error::Gpu("NVRTC: a NUL in the sources".into()))?;
    let prog = nvrtc::create_program(&src, Some(c"stem4d.cu"))
        .map_err(|e| nvrtc_err("create the program", e))?;
    let arch = format!("--gpu-architecture=sm_{major}{minor}");
    let opts = [arch.as_str(), "--std=c++17"];
    // SAFETY: `prog` was just created and is destroyed once, below.
    let compiled = unsafe { nvrtc::compile_program(prog, &opts) };
    let out = compiled
        .map_err(|e| {
            // SAFETY: `prog` is live.
            let log = unsafe { nvrtc::get_program_log(prog) }
                .map(|l| {
                    let bytes: Vec<u8> = l
                        .iter()
                        .take_while(|&&c| c != 0)
                        .map(|&c| c as u8)
                        .collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                })
                .unwrap_or_default();
            Error::Gpu(format!(
                "NVRTC: compiling for sm_{major}{minor} failed ({e}): {log}"
            ))
        })
        .and_then(|()| {
            let mut size = 0usize;
            // SAFETY: `prog` compiled; `size` is written by NVRTC.
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .map_err(|e| nvrtc_err("CUBIN size", e))?;
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` holds the `size` bytes NVRTC writes.
            unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| nvrtc_err("CUBIN", e))?;
            Ok(cubin)
        });
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}
