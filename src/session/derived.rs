//! Quantities derived once per resident acquisition (totals, CoM moments) and the planes
//! made from products for display.

use super::*;

/// Quantities derived once per resident acquisition.
pub(super) struct Derived {
    pub(super) totals: wgpu::Buffer,
    pub(super) moments: Option<wgpu::Buffer>,
    /// Scan mean of the exact CoM (DPC/iDPC subtract it).
    pub(super) com_mean: [f64; 2],
}

pub(super) async fn exact_u64(engine: &Engine, buf: &wgpu::Buffer, offset: u64) -> Result<u64> {
    let b = engine.read_back_range(buf, offset, 8).await?;
    Ok(u64::from_le_bytes([
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
    ]))
}

/// Totals and CoM moments of a resident acquisition, computed once; the exact CoM comes
/// back once so DPC means and iDPC use exact values (C-DPC-MEAN).
pub(super) async fn derive(engine: &Engine, res: &Resident) -> Result<Derived> {
    let shape = res.plan.shape;
    let n = shape.frames() as u64;
    let totals = engine.storage("totals", n * 8);
    let all = SparseMask::all(shape.det).indices;
    let list = crate::kernels::masked_sum::DetectorList::new(engine, &all)?;
    let mut enc = engine.device.create_command_encoder(&Default::default());
    crate::kernels::masked_sum::encode_masked_sums(engine, &mut enc, res, &list, &totals)?;
    engine.queue.submit([enc.finish()]);
    let (moments, com) = match crate::kernels::com_moments::moments_fit_64(res) {
        Ok(()) => {
            let buf = engine.storage("com moments", n * 24);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            crate::kernels::com_moments::encode_com_moments(engine, &mut enc, res, &buf)?;
            engine.queue.submit([enc.finish()]);
            let m =
                crate::kernels::com_moments::parse_moments(&engine.read_back(&buf, n * 24).await?);
            (Some(buf), Some(gp::com_from_moments(&m)))
        }
        // u32 detectors whose moments could overflow: CoM/DPC/iDPC are refused, not wrong.
        Err(_) => (None, None),
    };
    let com_mean = com.as_deref().map_or([0.0; 2], crate::cpu::scan_means);
    Ok(Derived {
        totals,
        moments,
        com_mean,
    })
}

/// Magnitude and direction planes (float32, from float64) of a DPC product
/// `[g_r plane, g_c plane]` (`contract::dpc_polar`, C-DPC-POLAR).
pub(super) fn polar_planes(dpc: &ProductArray) -> [Vec<f32>; 2] {
    let g = dpc.data.to_f64();
    let n = g.len() / 2;
    let (mut magnitude, mut angle) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for k in 0..n {
        let [m, a] = crate::contract::dpc_polar([g[k], g[n + k]]);
        magnitude.push(m as f32);
        angle.push(a as f32);
    }
    [magnitude, angle]
}

/// One plane of a product read back to the host (float32 acquisitions), for display.
pub(super) fn plane_of(a: &ProductArray, kind: ProductKind, axis: u32) -> Vec<f32> {
    let a = a.data.to_f64();
    let two = matches!(kind, ProductKind::Com | ProductKind::Dpc);
    let n = if two { a.len() / 2 } else { a.len() };
    let start = if two { axis.min(1) as usize * n } else { 0 };
    a[start..start + n].iter().map(|&v| v as f32).collect()
}
