//! iDPC through the GPU FFTs (`src/kernels/fft.rs`, `wgsl/fft.wgsl`) within the contract's
//! bound for any scan size.

use crate::common::*;
use stem4d::cpu;
use stem4d::products::gpu as products;

/// iDPC on the GPU (Stockham and Bluestein FFTs around the Fourier-integration filter)
/// against the CPU reference's float64 FFT, on power-of-two, odd and mixed scan sizes
/// (C-IDPC-GPU, within C-BOUND-IDPC).
#[test]
fn idpc_on_the_gpu_meets_the_contract_bound_for_any_scan_size() {
    use stem4d::kernels::fft::{DpcSettings, Idpc};
    let Some(engine) = engine() else { return };
    // [6, 5, 64, 64]: a scan so small that the DPC varies by ~0.1 px around a CoM of ~32 px;
    // a float32 CoM would carry ~2e-6 px of rounding into a phase of ~0.05.
    for dims in [
        [8, 16, 9, 7],
        [5, 7, 11, 9],
        [12, 10, 9, 9],
        [1, 6, 8, 8],
        [27, 18, 7, 9],
        [6, 5, 64, 64],
    ] {
        let acq = stem4d::formats::synthetic::open(dims).unwrap();
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let m =
            pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &res)).unwrap();
        let com = products::com_from_moments(&m);
        let n = acq.shape.frames() as u64;
        let moments = engine.input(
            &m.iter()
                .flat_map(|v| v.iter().flat_map(|x| [*x as u32, (*x >> 32) as u32]))
                .collect::<Vec<u32>>(),
        );
        let _ = n;
        for (rotation, flip) in [(0.0, false), (33.0, true)] {
            let settings = DpcSettings {
                mean: cpu::scan_means(&com),
                rotation,
                flip,
            };
            let idpc = Idpc::new(&engine, acq.shape.scan);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            idpc.encode(
                &engine,
                &mut enc,
                stem4d::kernels::fft::CentreSource::Moments {
                    buf: &moments,
                    bound: stem4d::kernels::com_moments::moment_bound(&res),
                },
                settings,
            )
            .unwrap();
            engine.queue.submit([enc.finish()]);
            let got = pollster::block_on(idpc.read(&engine)).unwrap();
            let want = cpu::idpc(&cpu::dpc_from_com(&com, rotation, flip), acq.shape.scan);
            let scale = want.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0f64, f64::max);
            eprintln!("{dims:?} rot {rotation}: max |phase| {scale:e}, max error {worst:e}");
            assert!(
                worst <= 1e-5 * scale,
                "{dims:?} rot {rotation}: max |Δ| {worst:e} vs bound {:e}",
                1e-5 * scale
            );
        }
    }
}
