//! iDPC and the DPC rotation on the CUDA backend (`wgsl/fft.cu`, `wgsl/dpc_curl.cu`): the
//! wgpu engine's plan (`kernels::fft`), with the same float64 host tables
//! ([`AxisTables`]) and pack parameters ([`pack_params`]), and the same closed-form angle
//! and branch rule (`products::dpc_rotation`). Only the kernels are CUDA's own.

use cudarc::driver::{CudaSlice, DeviceRepr, PushKernelArg};

use super::engine::{driver_error, CudaEngine};
use super::resident::{alloc, over, read};
use crate::error::Result;
use crate::kernels::fft::{f32_pairs, pack_params, AxisTables, DpcSettings, FftParams};
use crate::products::dpc_rotation::{branch, check_scan, least_of_both_flips, Rotation};

// SAFETY: FftParams is `#[repr(C)]` of 4-byte fields only (`uniform!`), the layout of
// `struct FftParams` in wgsl/fft.cu (tests/shader_validation.rs compares the two).
unsafe impl DeviceRepr for FftParams {}

/// Where the DPC comes from: exact moments on the device (three u64 per position, none
/// above `bound`), or a CoM plane already less its scan mean (float32 (row, col) pairs).
#[derive(Clone, Copy)]
pub enum Centre<'a> {
    Moments {
        buf: &'a CudaSlice<u64>,
        bound: u128,
    },
    Com(&'a CudaSlice<f32>),
}

/// One axis's tables on the device.
struct Axis {
    n: u32,
    span: u32,
    twiddles: CudaSlice<f32>,
    /// Bluestein's chirp and its kernel's forward and inverse spectra.
    bluestein: Option<[CudaSlice<f32>; 3]>,
}

impl Axis {
    fn new(engine: &CudaEngine, n: u32) -> Result<Axis> {
        let t = AxisTables::new(n);
        let up = |v: &[rustfft::num_complex::Complex<f64>]| {
            engine
                .stream
                .clone_htod(&f32_pairs(v))
                .map_err(driver_error("FFT tables"))
        };
        let bluestein = match &t.bluestein {
            Some([w, fwd, inv]) => Some([up(w)?, up(fwd)?, up(inv)?]),
            None => None,
        };
        Ok(Axis {
            n,
            span: t.span,
            twiddles: up(&t.twiddles)?,
            bluestein,
        })
    }
}

/// Launch the `fft.cu` kernel `name` over `threads` items with `src` (and a table) into
/// `dst`.
fn launch(
    engine: &CudaEngine,
    name: &str,
    p: FftParams,
    threads: u64,
    src: &CudaSlice<f32>,
    table: Option<&CudaSlice<f32>>,
    dst: &mut CudaSlice<f32>,
) -> Result<()> {
    let f = engine.function(name)?;
    let mut l = engine.stream.launch_builder(&f);
    l.arg(&p).arg(src);
    if let Some(t) = table {
        l.arg(t);
    }
    l.arg(dst);
    // SAFETY: the arguments match the kernel's signature in wgsl/fft.cu; every buffer holds
    // the items the parameters name.
    unsafe { l.launch(over(threads)) }.map_err(driver_error("an FFT kernel"))?;
    Ok(())
}

/// Radix-2 Stockham transforms of `rows` × `n` in `a` (scratch `b`); the result ends in
/// `a`; inverse transforms scaled by `scale` on their last pass.
#[allow(clippy::too_many_arguments)]
fn pow2(
    engine: &CudaEngine,
    twiddles: &CudaSlice<f32>,
    n: u32,
    rows: u32,
    inverse: bool,
    scale: f32,
    a: &mut CudaSlice<f32>,
    b: &mut CudaSlice<f32>,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let mut in_a = true;
    let mut p = 1;
    while p < n {
        let params = FftParams {
            n,
            p,
            rows,
            inverse: inverse as u32,
            scale,
            ..Default::default()
        };
        let threads = rows as u64 * n as u64 / 2;
        if in_a {
            launch(engine, "fft", params, threads, a, Some(twiddles), b)?;
        } else {
            launch(engine, "fft", params, threads, b, Some(twiddles), a)?;
        }
        in_a = !in_a;
        p *= 2;
    }
    if !in_a {
        copy(engine, b, a, rows as usize * n as usize)?;
    }
    Ok(())
}

/// The first `complex` values of `src` into `dst`.
fn copy(
    engine: &CudaEngine,
    src: &CudaSlice<f32>,
    dst: &mut CudaSlice<f32>,
    complex: usize,
) -> Result<()> {
    engine
        .stream
        .memcpy_dtod(
            &src.slice(0..2 * complex),
            &mut dst.slice_mut(0..2 * complex),
        )
        .map_err(driver_error("FFT copy"))
}

/// Transforms of `rows` rows of `axis` in `a` (scratch `b`); result in `a`, unscaled forward,
/// scaled by 1/n inverse.
fn rows_fft(
    engine: &CudaEngine,
    axis: &Axis,
    rows: u32,
    inverse: bool,
    a: &mut CudaSlice<f32>,
    b: &mut CudaSlice<f32>,
) -> Result<()> {
    let n = axis.n;
    let scale = if inverse { 1.0 / n as f32 } else { 1.0 };
    let Some([chirp, kernel_fwd, kernel_inv]) = &axis.bluestein else {
        return pow2(engine, &axis.twiddles, n, rows, inverse, scale, a, b);
    };
    let m = axis.span;
    let base = FftParams {
        n: m,
        rows,
        inverse: inverse as u32,
        width: n,
        scale: 1.0,
        ..Default::default()
    };
    let cells = rows as u64 * m as u64;
    launch(engine, "fft_chirp_in", base, cells, a, Some(chirp), b)?;
    pow2(engine, &axis.twiddles, m, rows, false, 1.0, b, a)?;
    let kernel = if inverse { kernel_inv } else { kernel_fwd };
    launch(engine, "fft_mul", base, cells, b, Some(kernel), a)?;
    pow2(engine, &axis.twiddles, m, rows, true, 1.0 / m as f32, a, b)?;
    let out = FftParams { scale, ..base };
    launch(
        engine,
        "fft_chirp_out",
        out,
        rows as u64 * n as u64,
        a,
        Some(chirp),
        b,
    )?;
    copy(engine, b, a, rows as usize * n as usize)
}

/// iDPC of one scan shape on the device: both axes' tables and the work buffers.
pub struct CudaIdpc {
    rows: u32,
    cols: u32,
    row_axis: Axis,
    col_axis: Axis,
    w0: CudaSlice<f32>,
    /// Holds the phase (complex, real part meaningful) after [`CudaIdpc::run`].
    phase: CudaSlice<f32>,
}

impl CudaIdpc {
    pub fn new(engine: &CudaEngine, scan: [usize; 2]) -> Result<CudaIdpc> {
        let (rows, cols) = (scan[0] as u32, scan[1] as u32);
        let row_axis = Axis::new(engine, cols)?;
        let col_axis = Axis::new(engine, rows)?;
        let cells =
            (rows as usize * row_axis.span as usize).max(cols as usize * col_axis.span as usize);
        Ok(CudaIdpc {
            rows,
            cols,
            row_axis,
            col_axis,
            w0: alloc(engine, 2 * cells, "iDPC work")?,
            phase: alloc(engine, 2 * cells, "iDPC phase")?,
        })
    }

    /// The phase of the DPC from `centre` with `dpc`'s mean, rotation and flip, row-major.
    pub fn run(
        &mut self,
        engine: &CudaEngine,
        centre: Centre,
        dpc: DpcSettings,
    ) -> Result<Vec<f64>> {
        let (r, c) = (self.rows, self.cols);
        let (a, b) = (&mut self.w0, &mut self.phase);
        pack(engine, [r, c], centre, dpc, a)?;
        rows_fft(engine, &self.row_axis, r, false, a, b)?;
        let cells = r as u64 * c as u64;
        let t = |width, height| FftParams {
            width,
            height,
            ..Default::default()
        };
        launch(engine, "fft_transpose", t(c, r), cells, a, None, b)?;
        rows_fft(engine, &self.col_axis, c, false, b, a)?;
        launch(engine, "idpc_filter", t(r, c), cells, b, None, a)?;
        rows_fft(engine, &self.col_axis, c, true, a, b)?;
        launch(engine, "fft_transpose", t(r, c), cells, a, None, b)?;
        rows_fft(engine, &self.row_axis, r, true, b, a)?;
        let pairs = engine
            .stream
            .clone_dtoh(&b.slice(0..2 * cells as usize))
            .map_err(driver_error("read the phase"))?;
        engine.synchronize()?;
        Ok(pairs.chunks_exact(2).map(|z| z[0] as f64).collect())
    }
}

/// The DPC of every position of a `rows × cols` scan as (g_r, g_c) float32 pairs in `out`.
fn pack(
    engine: &CudaEngine,
    [r, c]: [u32; 2],
    centre: Centre,
    dpc: DpcSettings,
    out: &mut CudaSlice<f32>,
) -> Result<()> {
    let n = r as u64 * c as u64;
    let bound = match centre {
        Centre::Moments { bound, .. } => Some(bound),
        Centre::Com(_) => None,
    };
    let p = pack_params([r, c], dpc, bound);
    let (name, f) = match centre {
        Centre::Moments { .. } => ("idpc_pack", engine.function("idpc_pack")?),
        Centre::Com(_) => ("idpc_pack_com", engine.function("idpc_pack_com")?),
    };
    let mut l = engine.stream.launch_builder(&f);
    l.arg(&p);
    match centre {
        Centre::Moments { buf, .. } => l.arg(buf),
        Centre::Com(buf) => l.arg(buf),
    };
    l.arg(out);
    // SAFETY: the arguments match the kernel's signature in wgsl/fft.cu.
    unsafe { l.launch(over(n)) }.map_err(driver_error(name))?;
    Ok(())
}

/// `[no flip, flip]` × `[ΣC², ΣC·D, ΣD²]` of the field in `field` (scan `rows × cols`).
fn curl_sums(
    engine: &CudaEngine,
    field: &CudaSlice<f32>,
    [r, c]: [u32; 2],
) -> Result<[[f64; 3]; 2]> {
    let cells = (r as u64).saturating_sub(1) * (c as u64).saturating_sub(1);
    let cfg = over(cells);
    let blocks = cfg.grid_dim.0 as usize;
    let mut partials = alloc::<f64>(engine, 6 * blocks, "DPC curl partials")?;
    let f = engine.function("dpc_curl")?;
    let mut l = engine.stream.launch_builder(&f);
    l.arg(&r).arg(&c).arg(field).arg(&mut partials);
    // SAFETY: the arguments match dpc_curl's signature (wgsl/dpc_curl.cu).
    unsafe { l.launch(cfg) }.map_err(driver_error("dpc_curl"))?;
    let mut sums = [[0f64; 3]; 2];
    for part in read(engine, &partials)?.chunks_exact(6) {
        for (q, v) in part.iter().enumerate() {
            sums[q / 3][q % 3] += v;
        }
    }
    Ok(sums)
}

/// The DPC rotation (`products::dpc_rotation`) from `centre` with its scan `mean`: the
/// field packed without rotation, the curl sums, the closed-form angle, then the iDPC phase
/// at it against the dark-field image `dark` for the branch.
pub fn rotation(
    engine: &CudaEngine,
    scan: [usize; 2],
    centre: Centre,
    mean: [f64; 2],
    dark: &[f64],
) -> Result<Rotation> {
    check_scan(scan)?;
    let rc = [scan[0] as u32, scan[1] as u32];
    let plain = DpcSettings {
        mean,
        rotation: 0.0,
        flip: false,
    };
    let mut field = alloc::<f32>(engine, 2 * scan[0] * scan[1], "DPC rotation field")?;
    pack(engine, rc, centre, plain, &mut field)?;
    let (flip, theta, curl_energy) = least_of_both_flips(curl_sums(engine, &field, rc)?)?;
    let turned = DpcSettings {
        rotation: theta,
        flip,
        ..plain
    };
    let phase = CudaIdpc::new(engine, scan)?.run(engine, centre, turned)?;
    Ok(Rotation {
        theta_deg: branch(theta, &phase, dark),
        flip,
        curl_energy,
    })
}
