//! One product along a memory plan (`upload::memory`): the plan a budget leaves, or the one
//! picked by name, followed as the CLI's `product` and the Python package follow it. A
//! compressed resident that passes the budget gives way to the next plan, and every plan
//! taken is said through `say` (the output's provenance). Like `parity`, this is no
//! backend: the CPU plan runs the reference.

use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::gpu::{Engine, Resident};
use crate::products::{ProductArray, ProductParams};
use crate::upload::memory::{self, MemoryPlan, PlanKind};

/// What decides the plan: a budget in bytes (`None`: the adapter's), a plan by name.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanChoice {
    pub budget: Option<u64>,
    pub plan: Option<PlanKind>,
}

impl PlanChoice {
    /// The plan among `all` at `bin`: the one named (refused, saying why, if it does not
    /// fit), else the fastest that fits.
    pub fn pick(&self, all: &[MemoryPlan], bin: usize) -> Result<MemoryPlan> {
        match self.plan {
            Some(kind) => memory::pick(all, kind, bin).map_err(Error::param),
            None => Ok(memory::choose(all, bin)),
        }
    }
}

/// A plan in a line.
pub fn plan_words(p: &MemoryPlan) -> String {
    let bin = match p.bin {
        1 => String::new(),
        b => format!(" at bin {b}"),
    };
    format!(
        "{}{bin}, {} bytes held, peak {} bytes: {}",
        p.kind.name(),
        p.payload_bytes,
        p.peak_bytes,
        p.note
    )
}

/// The compressed resident `plan` describes within `budget`, its found bad pixels zeroed (as
/// `gpu::compute` settles a raw one); its sizes are said through `say`.
pub async fn compressed_resident(
    engine: &Engine,
    acq: &Acquisition,
    corr: Correction,
    plan: &MemoryPlan,
    budget: Option<u64>,
    say: &mut dyn FnMut(String),
) -> Result<Resident> {
    let rows = plan.rows_per_block.unwrap_or(1);
    let mut res = engine
        .upload_packed(acq, corr, rows, plan.gpu_decode, budget, &mut |_, _| {})
        .await?;
    if let Some(p) = &res.packed {
        say(format!(
            "compressed resident: {} bytes packed for {} raw ({:.2}x), scratch {} bytes",
            p.packed_bytes,
            p.raw_bytes,
            p.raw_bytes as f64 / p.packed_bytes.max(1) as f64,
            p.scratch_bytes
        ));
    }
    crate::products::gpu::settle_bad_pixels(engine, acq, &mut res).await?;
    Ok(res)
}

/// One product of `acq` under `corr` on `engine` along the plan `choice` leaves.
pub async fn compute_planned(
    engine: &Engine,
    acq: &Acquisition,
    params: &ProductParams,
    corr: Correction,
    choice: PlanChoice,
    say: &mut dyn FnMut(String),
) -> Result<ProductArray> {
    let all = crate::gpu::memory_plans(acq, corr, engine.adapter.limits, choice.budget);
    let mut plan = choice.pick(&all, corr.bin)?;
    say(format!("memory plan: {}", plan_words(&plan)));
    if plan.kind == PlanKind::Compressed {
        match compressed_resident(engine, acq, corr, &plan, choice.budget, say).await {
            Ok(res) => {
                return crate::products::gpu::compute_resident(engine, acq, &res, params).await
            }
            Err(Error::GpuOutOfMemory(why)) if choice.plan.is_none() => {
                let next: Vec<_> = all
                    .into_iter()
                    .filter(|p| p.kind != PlanKind::Compressed)
                    .collect();
                plan = memory::choose(&next, corr.bin);
                say(format!("{why}; memory plan: {}", plan_words(&plan)));
            }
            Err(e) => return Err(e),
        }
    }
    match plan.kind {
        PlanKind::Resident => crate::products::gpu::compute(engine, acq, params, corr).await,
        PlanKind::Compressed => Err(Error::Gpu("the compressed plan was not built".into())),
        PlanKind::Streaming => {
            use crate::products::stream::{compute_streamed, only, Blocks};
            let ps = std::slice::from_ref(params);
            only(compute_streamed(engine, acq, ps, corr, Blocks::of(&plan), &mut |_, _| {}).await?)
        }
        PlanKind::Cpu => crate::cpu::compute(acq, params, corr),
    }
}
