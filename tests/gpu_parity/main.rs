//! The WGSL kernels against the CPU reference on whatever adapter wgpu finds (lavapipe in
//! CI): integer products byte for byte, CoM the float32 rounding of the exact quotient,
//! DPC within 2e-6 px, iDPC within 1e-5 · max|φ|. `STEM4D_REQUIRE_GPU=1` makes a missing
//! adapter a failure (CI sets it); otherwise the test says it was skipped.
//!
//! One module per thing proved: `parity` (whole products equal the CPU's), `exact_sums`
//! (masked sums and CoM moments exact on every path), `residents` (residents split across
//! buffers, made on the GPU, reused), `decode` (chunks decoded on the GPU or by a chunk
//! decoder) and `source_reads` (how often the source is read).

#[path = "../common/mod.rs"]
mod common;

mod decode;
mod exact_sums;
mod parity;
mod residents;
mod source_reads;

use common::*;
use stem4d::products::{ArrayData, ProductArray};

/// A GPU product against the CPU reference, under the contract's bound for `kind`:
/// C-BOUND-COM, C-BOUND-DPC, C-BOUND-IDPC on float32 (C-DTYPE), identical values else
/// (C-BOUND-INT).
fn check(kind: &str, what: &str, gpu: &ProductArray, cpu: &ProductArray) -> Result<(), String> {
    match kind {
        "com" | "dpc" | "idpc" => {
            let (ArrayData::F32(g), ArrayData::F64(c)) = (&gpu.data, &cpu.data) else {
                return Err(format!("{what}: GPU {kind} must be float32, CPU float64"));
            };
            if gpu.shape != cpu.shape {
                return Err(format!("{what}: shape {:?} != {:?}", gpu.shape, cpu.shape));
            }
            let scale = c.iter().fold(0f64, |m, v| m.max(v.abs()));
            for (i, (&g, &c)) in g.iter().zip(c).enumerate() {
                let ok = match kind {
                    "com" => g == c as f32,
                    "dpc" => (g as f64 - c).abs() <= 2e-6,
                    _ => (g as f64 - c).abs() <= 1e-5 * scale,
                };
                if !ok {
                    return Err(format!("{what}: [{i}] GPU {g:e} vs CPU {c:e}"));
                }
            }
            Ok(())
        }
        // Weighted masks: float64 from exact per-weight sums, within the CPU bound.
        _ if matches!(gpu.data, ArrayData::F64(_)) => compare(what, kind, gpu, cpu, 1e-12),
        _ => compare(what, kind, gpu, cpu, 0.0),
    }
}
