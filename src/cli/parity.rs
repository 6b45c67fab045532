//! `stem4d parity`: every product on every available backend against the CPU reference,
//! under the contract's bounds, printed as a table (product × backend: max error, pass/fail).

use crate::contract::Region;
use crate::error::Result;
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::products::{ProductKind, ProductParams, ProductRequest};

/// Parameters for each kind, derived from the acquisition (fitted BF disk, inner quarter...).
pub fn default_params(acq: &Acquisition, mask_bad_pixels: bool) -> Result<Vec<ProductRequest>> {
    let corr = Correction {
        mask_bad_pixels,
        bin: 1,
    };
    let fit = ProductParams::new(ProductKind::FitBf);
    let f = crate::cpu::compute(acq, &fit, corr)?.data.to_f64();
    let [kr, kc] = acq.shape.det;
    let [rr, rc] = acq.shape.scan;
    let center = [f[0], f[1]];
    let radius = f[2].max(1.0);
    let mut out = Vec::new();
    for kind in ProductKind::ALL {
        let mut p = ProductParams::new(kind);
        p.center = Some(center);
        p.radius = Some(radius);
        p.inner = Some(radius * 1.5);
        p.outer = Some(radius * 3.0);
        p.rect = Some(Region {
            r0: kr / 4,
            r1: kr - kr / 3,
            c0: kc / 5,
            c1: kc - kc / 4,
        });
        p.at = Some([rr / 2, rc / 3]);
        p.rotation = 17.5;
        p.flip = true;
        if kind == ProductKind::Mask {
            p.mask = Some(crate::contract::DetectorMask::Bool(
                (0..kr * kc)
                    .map(|k| (k / kc + 2 * (k % kc)) % 5 == 0)
                    .collect(),
            ));
        }
        let bin = match kind {
            ProductKind::Binned => 2.min(kr.min(kc)),
            _ => 1,
        };
        out.push(ProductRequest {
            params: p,
            correction: Correction { bin, ..corr },
        });
    }
    let mut roi = ProductParams::new(ProductKind::SumDp);
    roi.scan_roi = Some(Region {
        r0: 0,
        r1: rr.div_ceil(2),
        c0: rc / 3,
        c1: rc,
    });
    out.push(ProductRequest {
        params: roi,
        correction: corr,
    });
    Ok(out)
}

/// Every product on every available backend against the CPU reference; `overrides` replace
/// kernels by name (`stem4d parity --kernels DIR`).
pub fn run(acq: &Acquisition, mask_bad_pixels: bool, overrides: &[(String, String)]) -> Result<()> {
    let engine = pollster::block_on(crate::gpu::Engine::with_kernels(overrides));
    // Replaced kernels are what is being checked: without them built there is nothing to
    // compare, and a CPU-only table would read as a pass.
    let engine = match engine {
        Err(e) if !overrides.is_empty() => return Err(e),
        engine => engine,
    };
    let params = default_params(acq, mask_bad_pixels)?;
    let backend = match &engine {
        Ok(e) => format!(
            "wgpu ({}{})",
            e.adapter.name,
            if e.adapter.software { ", software" } else { "" }
        ),
        Err(e) => format!("wgpu unavailable: {e}"),
    };
    println!(
        "parity: {:?} {:?} {}  bad pixels masked: {mask_bad_pixels}",
        acq.format,
        acq.shape.as_array(),
        acq.dtype.name()
    );
    println!(
        "{:<22} {:<10} {:<44} {:>12}  result",
        "product", "backend", "", "max error"
    );
    println!("{:<22} {:<10} {backend}", "", "");
    let mut failed = 0;
    let mut resident: Option<crate::gpu::Resident> = None;
    for ProductRequest {
        params: p,
        correction: corr,
    } in &params
    {
        let corr = *corr;
        let label = match p.scan_roi {
            Some(_) => format!("{} (scan ROI)", p.kind.name()),
            None if corr.bin > 1 => format!("{} (bin {})", p.kind.name(), corr.bin),
            None => p.kind.name().to_string(),
        };
        let cpu = match crate::cpu::compute(acq, p, corr) {
            Ok(c) => c,
            Err(refusal) => {
                // The contract refuses this product here (e.g. a binned sum past u32): every
                // backend must refuse it too, never return a value.
                println!("{label:<22} {:<10} refused: {refusal}", "cpu");
                if let Ok(engine) = &engine {
                    let gpu =
                        pollster::block_on(crate::products::gpu::compute(engine, acq, p, corr));
                    if gpu.is_ok() {
                        failed += 1;
                    }
                    println!(
                        "{label:<22} {:<10} {:<44} {:>12}  {}",
                        "wgpu",
                        "",
                        "-",
                        if gpu.is_ok() {
                            "FAIL (returned a value)"
                        } else {
                            "PASS (refused too)"
                        }
                    );
                }
                continue;
            }
        };
        println!(
            "{label:<22} {:<10} {:<44} {:>12}  reference",
            "cpu", "float64 / exact integers", "0"
        );
        let Ok(engine) = &engine else { continue };
        if resident.as_ref().is_none_or(|r| r.correction != corr) {
            resident = None;
            // As the page and `products::gpu::compute` make it: with masking on, the hot and
            // dead pixels of the mean pattern are zeroed as the CPU reference leaves them out.
            let made = pollster::block_on(async {
                let mut r = engine.upload(acq, corr).await?;
                crate::products::gpu::settle_bad_pixels(engine, acq, &mut r).await?;
                Ok::<_, crate::error::Error>(r)
            });
            match made {
                Ok(r) => resident = Some(r),
                Err(e) => {
                    println!(
                        "{label:<22} {:<10} {:<44} {:>12}  n/a: {e}",
                        "wgpu", "", "-"
                    );
                    continue;
                }
            }
        }
        let Some(res) = &resident else { continue };
        match pollster::block_on(crate::products::gpu::compute_resident(engine, acq, res, p)) {
            Ok(got) => {
                let verdict = crate::products::judge::judge(p.kind, &got, &cpu);
                let (err, pass) = (verdict.max_error, verdict.pass());
                if !pass {
                    failed += 1;
                }
                println!(
                    "{label:<22} {:<10} {:<44} {err:>12.3e}  {}",
                    "wgpu",
                    got.data.dtype_name(),
                    if pass { "PASS" } else { "FAIL" }
                );
            }
            Err(e) => println!(
                "{label:<22} {:<10} {:<44} {:>12}  n/a: {e}",
                "wgpu", "", "-"
            ),
        }
    }
    println!("{:<10} cuda backend not built into this binary", "");
    if failed > 0 {
        return Err(crate::error::Error::Gpu(format!(
            "{failed} products failed parity"
        )));
    }
    Ok(())
}
