//! The parity matrix: every product of one acquisition, under each correction, on a backend
//! against the CPU reference, judged by the one judge (`products::judge`). It calls both
//! sides, so it is no backend (`tests/backends_stand_alone.rs` keeps backends apart). `stem4d parity` prints
//! it, `stem4d.parity()` returns it to the page's suite, and the native and wasm tests
//! assert it: one list of products and one judge for all four. The fixtures are the
//! caller's (the files given, the test manifest), and so is the backend (the engine given;
//! CUDA joins here).

use serde::Serialize;

use crate::contract::Region;
use crate::error::Result;
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::gpu::{Engine, Resident};
use crate::products::{ProductKind, ProductParams, ProductRequest};

/// The products of the matrix for `acq`: every kind once, with parameters derived from the
/// acquisition (the fitted BF disk, an asymmetric rectangle and mask, a rotation with a
/// flip), the binned product at bin 2 and a sum over a scan ROI; all with bad-pixel
/// masking `mask_bad_pixels`.
pub fn matrix(acq: &Acquisition, mask_bad_pixels: bool) -> Result<Vec<ProductRequest>> {
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

/// One line of the matrix: a product on one backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The product as the table names it: `bf`, `binned (bin 2)`, `sum-dp (scan ROI)`.
    pub product: String,
    /// `cpu` (the reference) or the backend's name (`wgpu`).
    pub backend: &'static str,
    /// The product's dtype on this backend (empty where there is no value).
    pub dtype: String,
    /// The largest difference from the reference (None where there is no value).
    pub max_error: Option<f64>,
    /// That difference over the reference's largest |value| (None where there is no value
    /// or the reference is all zeros).
    pub max_rel_error: Option<f64>,
    /// The contract's bound the product is held to, in words (empty without a value).
    pub bound: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "is", content = "why")]
pub enum Outcome {
    /// The CPU reference's own value.
    Reference,
    /// The reference refused the product (a binned sum past u32, ...); so must every backend.
    Refused(String),
    /// Within the contract's bound, or refused as the reference refused it.
    Pass,
    /// Out of bounds, a value where the reference refused, or an error other than a refusal.
    Fail(String),
    /// The backend declines this product by design (`Error::GpuUnsupported`: moments past
    /// 64 bits, float32 spans too wide for exact sums); the reference serves it.
    Declined(String),
}

impl Row {
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Fail(_))
    }

    fn new(product: &str, backend: &'static str, outcome: Outcome) -> Row {
        Row {
            product: product.to_string(),
            backend,
            dtype: String::new(),
            max_error: None,
            max_rel_error: None,
            bound: String::new(),
            outcome,
        }
    }
}

/// The name a request has in the table.
fn label(r: &ProductRequest) -> String {
    let name = r.params.kind.name();
    match r.params.scan_roi {
        Some(_) => format!("{name} (scan ROI)"),
        None if r.correction.bin > 1 => format!("{name} (bin {})", r.correction.bin),
        None => name.to_string(),
    }
}

/// The matrix of `requests` on `acq`: the CPU reference, then `engine`'s products (where
/// there is an engine, its rows named `backend`) judged against it. Residents are made as the page makes them: with
/// masking on, the hot and dead pixels of the mean pattern are zeroed as the reference
/// leaves them out. Each correction is uploaded once, for the requests in a row that share it.
pub async fn run(
    engine: Option<&Engine>,
    backend: &'static str,
    acq: &Acquisition,
    requests: &[ProductRequest],
) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut resident: Option<Resident> = None;
    for r in requests {
        let (p, corr, name) = (&r.params, r.correction, label(r));
        let reference = match crate::cpu::compute(acq, p, corr) {
            Ok(c) => c,
            Err(refusal) => {
                rows.push(Row::new(
                    &name,
                    "cpu",
                    Outcome::Refused(refusal.to_string()),
                ));
                if let Some(engine) = engine {
                    let got = crate::products::gpu::compute(engine, acq, p, corr).await;
                    rows.push(refused_too(&name, backend, got));
                }
                continue;
            }
        };
        rows.push(Row {
            dtype: reference.data.dtype_name().to_string(),
            max_error: Some(0.0),
            ..Row::new(&name, "cpu", Outcome::Reference)
        });
        let Some(engine) = engine else { continue };
        if resident.as_ref().is_none_or(|res| res.correction != corr) {
            resident = None;
            match upload(engine, acq, corr).await {
                Ok(res) => resident = Some(res),
                Err(e) => {
                    rows.push(Row::new(&name, backend, error_outcome(e)));
                    continue;
                }
            }
        }
        let Some(res) = &resident else { continue };
        let got = crate::products::gpu::compute_resident(engine, acq, res, p).await;
        let row = judged(&name, backend, p, &reference, got);
        rows.push(row);
    }
    rows
}

/// A backend's answer where the reference refused: it must refuse too.
fn refused_too(
    name: &str,
    backend: &'static str,
    got: Result<crate::products::ProductArray>,
) -> Row {
    let outcome = match got {
        Ok(_) => Outcome::Fail("returned a value".into()),
        Err(_) => Outcome::Pass,
    };
    Row::new(name, backend, outcome)
}

/// A backend's answer judged against the reference (`products::judge`).
fn judged(
    name: &str,
    backend: &'static str,
    p: &ProductParams,
    reference: &crate::products::ProductArray,
    got: Result<crate::products::ProductArray>,
) -> Row {
    match got {
        Ok(got) => {
            let verdict = crate::products::judge::judge(p.kind, &got, reference);
            Row {
                dtype: got.data.dtype_name().to_string(),
                max_error: Some(verdict.max_error),
                max_rel_error: (verdict.scale > 0.0).then(|| verdict.max_error / verdict.scale),
                bound: verdict.bound,
                ..Row::new(
                    name,
                    backend,
                    match verdict.failure {
                        None => Outcome::Pass,
                        Some(f) => Outcome::Fail(f),
                    },
                )
            }
        }
        Err(e) => Row::new(name, backend, error_outcome(e)),
    }
}

/// [`run`] on the CUDA backend, the acquisition held as `held` says: the same requests,
/// references and verdicts, each correction uploaded once for the requests in a row that
/// share it.
#[cfg(all(feature = "cuda", not(target_arch = "wasm32")))]
pub fn run_cuda(
    engine: &crate::cuda::CudaEngine,
    acq: &Acquisition,
    requests: &[ProductRequest],
    held: crate::upload::memory::CudaHeld,
) -> Vec<Row> {
    use crate::cuda::{compute_resident, CudaResident};
    let backend = held.name();
    let upload = |corr| CudaResident::upload_held(engine, acq, corr, held);
    let mut rows = Vec::new();
    let mut resident: Option<CudaResident> = None;
    for r in requests {
        let (p, corr, name) = (&r.params, r.correction, label(r));
        let reference = match crate::cpu::compute(acq, p, corr) {
            Ok(c) => c,
            Err(_) => {
                let got = p
                    .validate(acq.shape, corr)
                    .and_then(|()| upload(corr))
                    .and_then(|res| compute_resident(engine, acq, &res, p));
                rows.push(refused_too(&name, backend, got));
                continue;
            }
        };
        if resident.as_ref().is_none_or(|res| res.correction != corr) {
            resident = None;
            match upload(corr) {
                Ok(res) => resident = Some(res),
                Err(e) => {
                    rows.push(Row::new(&name, backend, error_outcome(e)));
                    continue;
                }
            }
        }
        let Some(res) = &resident else { continue };
        let got = compute_resident(engine, acq, res, p);
        rows.push(judged(&name, backend, p, &reference, got));
    }
    rows
}

async fn upload(engine: &Engine, acq: &Acquisition, corr: Correction) -> Result<Resident> {
    let mut res = engine.upload(acq, corr).await?;
    crate::products::gpu::settle_bad_pixels(engine, acq, &mut res).await?;
    Ok(res)
}

/// A backend's error: declined by design, or a failure.
fn error_outcome(e: crate::error::Error) -> Outcome {
    if e.is_gpu_unsupported() {
        Outcome::Declined(e.to_string())
    } else {
        Outcome::Fail(e.to_string())
    }
}
