//! iDPC on the GPU (`wgsl/fft.wgsl`): 2-D FFTs of any scan size (Stockham radix-2 for powers of two,
//! Bluestein's chirp-z otherwise, both from float64 tables made here) around the Fourier
//! integration filter of the contract (C-IDPC, C-IDPC-GPU). The phase stays on the GPU for
//! the display; the product reads it back.
//!
//! Its parity tests: `tests/gpu_parity/fft.rs`.

use crate::kernels::uniform;
use bytemuck::{Pod, Zeroable};
use rustfft::num_complex::Complex;

use crate::error::Result;

use crate::gpu::{Engine, Recorder};
use crate::kernels::{self, grid};

/// The host's float64 tables of one axis of length `n`, shared by every GPU backend (the
/// same plan and twiddles, C-IDPC-GPU): radix-2 twiddles of the transform length, and for
/// a length that is not a power of two Bluestein's chirp and the spectra of its kernel.
pub struct AxisTables {
    pub n: u32,
    /// The transform length: `n`, or Bluestein's power of two `m ≥ 2n − 1`.
    pub span: u32,
    /// exp(−2πi k/span) for k < span/2.
    pub twiddles: Vec<Complex<f64>>,
    /// Bluestein's chirp and the forward and inverse spectra of its kernel.
    pub bluestein: Option<[Vec<Complex<f64>>; 3]>,
}

impl AxisTables {
    pub fn new(n: u32) -> AxisTables {
        if n.is_power_of_two() {
            return AxisTables {
                n,
                span: n,
                twiddles: twiddles(n),
                bluestein: None,
            };
        }
        let m = (2 * n - 1).next_power_of_two();
        let w = chirp(n);
        // Kernel b_j = conj(w_|j|) on the circle of length m; its spectrum for both directions.
        let spectrum = |inverse: bool| {
            let mut b = vec![Complex::new(0.0, 0.0); m as usize];
            for k in 0..n as usize {
                let v = if inverse { w[k] } else { w[k].conj() };
                b[k] = v;
                if k > 0 {
                    b[m as usize - k] = v;
                }
            }
            rustfft::FftPlanner::new()
                .plan_fft_forward(m as usize)
                .process(&mut b);
            b
        };
        let (fwd, inv) = (spectrum(false), spectrum(true));
        AxisTables {
            n,
            span: m,
            twiddles: twiddles(m),
            bluestein: Some([w, fwd, inv]),
        }
    }
}

/// Complex float64 values as the kernels read them: float32 (re, im) pairs.
pub fn f32_pairs(v: &[Complex<f64>]) -> Vec<f32> {
    v.iter().flat_map(|c| [c.re as f32, c.im as f32]).collect()
}

/// How one axis of length `n` is transformed.
enum Axis {
    Pow2 {
        n: u32,
        twiddles: wgpu::Buffer,
    },
    Bluestein {
        n: u32,
        m: u32,
        twiddles: wgpu::Buffer,
        chirp: wgpu::Buffer,
        kernel_fwd: wgpu::Buffer,
        kernel_inv: wgpu::Buffer,
    },
}

fn upload(engine: &Engine, v: &[Complex<f64>]) -> wgpu::Buffer {
    let words: Vec<u32> = f32_pairs(v).into_iter().map(f32::to_bits).collect();
    engine.input(&words)
}

/// exp(−2πi m/n) for m < n/2.
fn twiddles(n: u32) -> Vec<Complex<f64>> {
    (0..(n / 2).max(1))
        .map(|m| Complex::from_polar(1.0, -2.0 * std::f64::consts::PI * m as f64 / n as f64))
        .collect()
}

/// Bluestein's chirp exp(−iπ k²/n), with k² reduced mod 2n exactly before the angle.
fn chirp(n: u32) -> Vec<Complex<f64>> {
    (0..n as u64)
        .map(|k| {
            let e = (k * k) % (2 * n as u64);
            Complex::from_polar(1.0, -std::f64::consts::PI * e as f64 / n as f64)
        })
        .collect()
}

impl Axis {
    fn new(engine: &Engine, n: u32) -> Axis {
        let t = AxisTables::new(n);
        match t.bluestein {
            None => Axis::Pow2 {
                n,
                twiddles: upload(engine, &t.twiddles),
            },
            Some([w, fwd, inv]) => Axis::Bluestein {
                n,
                m: t.span,
                twiddles: upload(engine, &t.twiddles),
                chirp: upload(engine, &w),
                kernel_fwd: upload(engine, &fwd),
                kernel_inv: upload(engine, &inv),
            },
        }
    }

    /// Complex values a work buffer must hold per transform.
    fn span(&self) -> u32 {
        match self {
            Axis::Pow2 { n, .. } => *n,
            Axis::Bluestein { m, .. } => *m,
        }
    }
}

fn params(engine: &Engine, p: FftParams, threads: u32) -> (wgpu::Buffer, (u32, u32)) {
    let groups = grid(threads.div_ceil(256));
    let buf = engine.uniform(&FftParams {
        groups_x: groups.0,
        ..p
    });
    (buf, groups)
}

/// Radix-2 Stockham transforms of `rows` × `n` in `a` (scratch `b`); the result ends in `a`.
/// Inverse transforms are scaled by `scale` on their last pass.
#[allow(clippy::too_many_arguments)]
fn pow2(
    rec: &mut Recorder,
    twiddles: &wgpu::Buffer,
    n: u32,
    rows: u32,
    inverse: bool,
    scale: f32,
    a: &wgpu::Buffer,
    b: &wgpu::Buffer,
) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    let (mut src, mut dst) = (a, b);
    let mut p = 1;
    while p < n {
        let (u, groups) = params(
            rec.engine,
            FftParams {
                n,
                p,
                rows,
                inverse: inverse as u32,
                scale,
                ..Default::default()
            },
            rows * n / 2,
        );
        rec.dispatch(
            &kernels::FFT,
            &[(0, &u), (1, src), (2, twiddles), (3, dst)],
            groups,
        )?;
        std::mem::swap(&mut src, &mut dst);
        p *= 2;
    }
    if !std::ptr::eq(src, a) {
        rec.copy(src, a, rows as u64 * n as u64 * 8);
    }
    Ok(())
}

/// Transforms of `rows` rows of the axis in `a` (scratch `b`); result in `a`, unscaled forward,
/// scaled by 1/n inverse.
fn rows_fft(
    rec: &mut Recorder,
    axis: &Axis,
    rows: u32,
    inverse: bool,
    a: &wgpu::Buffer,
    b: &wgpu::Buffer,
) -> Result<()> {
    match axis {
        Axis::Pow2 { n, twiddles } => {
            let scale = if inverse { 1.0 / *n as f32 } else { 1.0 };
            pow2(rec, twiddles, *n, rows, inverse, scale, a, b)
        }
        Axis::Bluestein {
            n,
            m,
            twiddles,
            chirp,
            kernel_fwd,
            kernel_inv,
        } => {
            let base = FftParams {
                n: *m,
                rows,
                inverse: inverse as u32,
                width: *n,
                scale: 1.0,
                ..Default::default()
            };
            let (u, g) = params(rec.engine, base, rows * m);
            rec.dispatch(
                &kernels::FFT_CHIRP_IN,
                &[(0, &u), (1, a), (2, chirp), (3, b)],
                g,
            )?;
            pow2(rec, twiddles, *m, rows, false, 1.0, b, a)?;
            let kernel = if inverse { kernel_inv } else { kernel_fwd };
            rec.dispatch(
                &kernels::FFT_MUL,
                &[(0, &u), (1, b), (2, kernel), (3, a)],
                g,
            )?;
            pow2(rec, twiddles, *m, rows, true, 1.0 / *m as f32, a, b)?;
            let scale = if inverse { 1.0 / *n as f32 } else { 1.0 };
            let (u, g) = params(rec.engine, FftParams { scale, ..base }, rows * n);
            rec.dispatch(
                &kernels::FFT_CHIRP_OUT,
                &[(0, &u), (1, a), (2, chirp), (3, b)],
                g,
            )?;
            rec.copy(b, a, rows as u64 * *n as u64 * 8);
            Ok(())
        }
    }
}

fn transpose(
    rec: &mut Recorder,
    width: u32,
    height: u32,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
) -> Result<()> {
    let (u, g) = params(
        rec.engine,
        FftParams {
            width,
            height,
            ..Default::default()
        },
        width * height,
    );
    rec.dispatch(&kernels::FFT_TRANSPOSE, &[(0, &u), (1, src), (3, dst)], g)
}

/// Fraction bits of the scan mean's fixed-point reference in `idpc_pack`: as many as keep
/// `m · 2^k` and `ref · t` (each at most `bound · 2^k`) below 2^63, up to 16.
pub fn reference_shift(bound: u128) -> u32 {
    (0..=16u32)
        .rev()
        .find(|&k| bound.max(1) << k < 1u128 << 63)
        .unwrap_or(0)
}

/// The pack's parameters for a `rows × cols` scan (every GPU backend's `idpc_pack` and
/// `idpc_pack_com`): flip and rotation of `dpc`, and its scan mean, which for exact moments
/// none above `moments_bound` is split into a fixed-point reference and the rest of it.
pub fn pack_params([r, c]: [u32; 2], dpc: DpcSettings, moments_bound: Option<u128>) -> FftParams {
    let (s, co) = dpc.rotation.to_radians().sin_cos();
    let mut p = FftParams {
        width: c,
        height: r,
        flip: dpc.flip as u32,
        mean_r: dpc.mean[0] as f32,
        mean_c: dpc.mean[1] as f32,
        cos_t: co as f32,
        sin_t: s as f32,
        ..Default::default()
    };
    if let Some(bound) = moments_bound {
        let k = reference_shift(bound);
        let fixed = |m: f64| {
            (m.max(0.0) * (1u64 << k) as f64)
                .round()
                .min(u32::MAX as f64)
        };
        let (ar, ac) = (fixed(dpc.mean[0]), fixed(dpc.mean[1]));
        p.ref_r = ar as u32;
        p.ref_c = ac as u32;
        p.ref_shift = k;
        p.mean_r = (dpc.mean[0] - ar / (1u64 << k) as f64) as f32;
        p.mean_c = (dpc.mean[1] - ac / (1u64 << k) as f64) as f32;
    }
    p
}

/// Record the DPC of the contract for every position of a `rows × cols` scan as (g_r, g_c)
/// float32 pairs, row-major, into `out` (`idpc_pack`: from exact moments, centred in exact
/// integers about the fixed-point scan mean first, so each component is good to the
/// contract's DPC bound however small it is against the CoM).
fn pack(
    rec: &mut Recorder,
    [r, c]: [u32; 2],
    centre: CentreSource,
    dpc: DpcSettings,
    out: &wgpu::Buffer,
) -> Result<()> {
    let (kernel, src, bound) = match centre {
        CentreSource::Moments { buf, bound } => (&kernels::IDPC_PACK, buf, Some(bound)),
        CentreSource::Com(b) => (&kernels::IDPC_PACK_COM, b, None),
    };
    let p = pack_params([r, c], dpc, bound);
    let (u, g) = params(rec.engine, p, r * c);
    rec.dispatch(kernel, &[(0, &u), (3, out), (4, src)], g)
}

/// Record the DPC vectors of a `scan` from `centre` as (g_r, g_c) float32 pairs in `out`
/// (at least `8 · rows · cols` bytes): what the DPC magnitude and direction images show.
pub fn encode_dpc_pairs(
    engine: &Engine,
    enc: &mut wgpu::CommandEncoder,
    scan: [usize; 2],
    centre: CentreSource,
    dpc: DpcSettings,
    out: &wgpu::Buffer,
) -> Result<()> {
    let mut rec = Recorder::new(engine, enc);
    pack(&mut rec, [scan[0] as u32, scan[1] as u32], centre, dpc, out)?;
    rec.finish();
    Ok(())
}

/// Where iDPC takes the centre of mass from.
#[derive(Clone, Copy, Debug)]
pub enum CentreSource<'a> {
    /// Exact integer moments: three u64 per position (total, Σ i·I, Σ j·I), none above
    /// `bound` ([`crate::kernels::com_moments::moment_bound`]).
    Moments { buf: &'a wgpu::Buffer, bound: u128 },
    /// The CoM as float32 (row, col) per position.
    Com(&'a wgpu::Buffer),
}

/// DPC settings of an iDPC image: scan mean of the CoM, rotation (degrees) and flip.
#[derive(Clone, Copy, Debug)]
pub struct DpcSettings {
    pub mean: [f64; 2],
    pub rotation: f64,
    pub flip: bool,
}

/// iDPC for one scan shape: plans for both axes and the work buffers, reused across
/// rotations while the user turns the DPC.
pub struct Idpc {
    rows: u32,
    cols: u32,
    row_axis: Axis,
    col_axis: Axis,
    w0: wgpu::Buffer,
    /// Holds the phase (complex, real part meaningful) after [`Idpc::encode`].
    pub phase: wgpu::Buffer,
}

impl Idpc {
    pub fn new(engine: &Engine, scan: [usize; 2]) -> Idpc {
        let (rows, cols) = (scan[0] as u32, scan[1] as u32);
        let row_axis = Axis::new(engine, cols);
        let col_axis = Axis::new(engine, rows);
        let cells =
            (rows as u64 * row_axis.span() as u64).max(cols as u64 * col_axis.span() as u64);
        Idpc {
            rows,
            cols,
            row_axis,
            col_axis,
            w0: engine.storage("idpc work", cells * 8),
            phase: engine.storage("idpc phase", cells * 8),
        }
    }

    /// Record iDPC of the DPC from `centre` (exact moments or a CoM plane); the phase ends
    /// in `self.phase` as (φ, ≈0) pairs, row-major.
    pub fn encode(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        centre: CentreSource,
        dpc: DpcSettings,
    ) -> Result<()> {
        let (r, c) = (self.rows, self.cols);
        let (a, b) = (&self.w0, &self.phase);
        let mut rec = Recorder::new(engine, enc);
        pack(&mut rec, [r, c], centre, dpc, a)?;
        rows_fft(&mut rec, &self.row_axis, r, false, a, b)?;
        transpose(&mut rec, c, r, a, b)?;
        rows_fft(&mut rec, &self.col_axis, c, false, b, a)?;
        let (u, g) = params(
            engine,
            FftParams {
                width: r,
                height: c,
                ..Default::default()
            },
            r * c,
        );
        rec.dispatch(&kernels::IDPC_FILTER, &[(0, &u), (1, b), (3, a)], g)?;
        rows_fft(&mut rec, &self.col_axis, c, true, a, b)?;
        transpose(&mut rec, r, c, a, b)?;
        rows_fft(&mut rec, &self.row_axis, r, true, b, a)?;
        rec.finish();
        Ok(())
    }

    /// The phase read back as f64 (real parts).
    pub async fn read(&self, engine: &Engine) -> Result<Vec<f64>> {
        let n = self.rows as u64 * self.cols as u64;
        let bytes = engine.read_back(&self.phase, n * 8).await?;
        let v: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(v.chunks_exact(2).map(|c| c[0] as f64).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::reference_shift;

    /// The fixed-point reference keeps `bound · 2^k` below 2^63: 16 fraction bits for a
    /// 192² u16 detector (bound ≈ 2^38.7), fewer for larger bounds, none at 2^63.
    #[test]
    fn reference_shift_keeps_the_numerator_in_64_bits() {
        let bound_192 = 65_535u128 * 192 * 192 * 192;
        assert_eq!(reference_shift(bound_192), 16);
        assert_eq!(reference_shift(1 << 50), 12);
        assert_eq!(reference_shift((1 << 63) - 1), 0);
        assert_eq!(reference_shift(0), 16);
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct FftParams {
        pub n: u32,
        pub p: u32,
        pub rows: u32,
        pub inverse: u32,
        pub width: u32,
        pub height: u32,
        pub groups_x: u32,
        pub flip: u32,
        pub scale: f32,
        pub mean_r: f32,
        pub mean_c: f32,
        pub cos_t: f32,
        pub sin_t: f32,
        /// `idpc_pack`: the scan mean's fixed-point reference per axis, `ref / 2^ref_shift`
        /// (`mean_r`/`mean_c` then hold the rest of the mean).
        pub ref_r: u32,
        pub ref_c: u32,
        pub ref_shift: u32,
    }
}
