//! The DPC rotation's sums on the GPU (`wgsl/dpc_curl.wgsl`): per workgroup of scan cells,
//! ΣC², ΣC·D and ΣD² of a DPC field and of it with its components swapped; the host adds the
//! partials in float64 and solves for the angle (`products::dpc_rotation`).
//!
//! Its parity tests: `tests/gpu_parity/dpc_curl.rs`.

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::Engine;
use crate::kernels::{self, uniform};

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct CurlParams {
        pub rows: u32,
        pub cols: u32,
        pub groups_x: u32,
        pub _pad0: u32,
    }
}

/// `[no flip, flip]` × `[ΣC², ΣC·D, ΣD²]` of `field` (one `vec2<f32>` (g_r, g_c) per scan
/// position of `scan`, row-major).
pub async fn curl_sums(
    engine: &Engine,
    field: &wgpu::Buffer,
    scan: [usize; 2],
) -> Result<[[f64; 3]; 2]> {
    let cells = scan[0].saturating_sub(1) * scan[1].saturating_sub(1);
    let workgroups = cells.div_ceil(256).max(1) as u32;
    let groups = kernels::grid(workgroups);
    let bytes = workgroups as u64 * 6 * 4;
    let partials = engine.storage("dpc curl partials", bytes);
    let params = engine.uniform(&CurlParams {
        rows: scan[0] as u32,
        cols: scan[1] as u32,
        groups_x: groups.0,
        ..Default::default()
    });
    let mut enc = engine.device.create_command_encoder(&Default::default());
    engine.dispatch(
        &mut enc,
        &kernels::DPC_CURL,
        &[&params, field, &partials],
        groups,
    )?;
    engine.queue.submit([enc.finish()]);
    let got = engine.read_back(&partials, bytes).await?;
    let mut sums = [[0f64; 3]; 2];
    for part in got.chunks_exact(24) {
        for q in 0..6 {
            let v = f32::from_le_bytes([
                part[4 * q],
                part[4 * q + 1],
                part[4 * q + 2],
                part[4 * q + 3],
            ]);
            sums[q / 3][q % 3] += v as f64;
        }
    }
    Ok(sums)
}
