//! `kernels::dpc_curl` (the DPC rotation's sums) against the float64 reference
//! `products::dpc_rotation::curl_div_sums`, on an odd, rectangular scan of several
//! workgroups of cells, both flips.

use crate::common::*;
use stem4d::products::dpc_rotation::curl_div_sums;

#[test]
fn curl_sums_on_the_gpu_equal_the_reference_within_float32() {
    let Some(engine) = engine() else { return };
    for scan in [[37usize, 29usize], [2, 3], [5, 130]] {
        let n = scan[0] * scan[1];
        // A smooth field with a curl and a divergence of its own, rounded to float32.
        let (mut dr, mut dc) = (vec![0f64; n], vec![0f64; n]);
        for k in 0..n {
            let (r, c) = ((k / scan[1]) as f64, (k % scan[1]) as f64);
            dr[k] = ((0.31 * r).sin() + 0.2 * (0.17 * c).cos()) as f32 as f64;
            dc[k] = ((0.23 * c + 0.4).cos() - 0.3 * (0.29 * r).sin()) as f32 as f64;
        }
        let words: Vec<u32> = (0..n)
            .flat_map(|k| [(dr[k] as f32).to_bits(), (dc[k] as f32).to_bits()])
            .collect();
        let field = engine.input(&words);
        let got = pollster::block_on(stem4d::kernels::dpc_curl::curl_sums(&engine, &field, scan))
            .unwrap();
        for (f, flip) in [false, true].into_iter().enumerate() {
            let want = curl_div_sums(&dr, &dc, scan, flip);
            let scale = want[0] + want[2];
            for q in 0..3 {
                assert!(
                    (got[f][q] - want[q]).abs() <= 1e-5 * scale.max(1e-30),
                    "{scan:?} flip {flip} sum {q}: {} against {}",
                    got[f][q],
                    want[q]
                );
            }
        }
    }
}
