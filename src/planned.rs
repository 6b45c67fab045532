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
use crate::upload::packed::PackBudget;

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

/// What building a compressed plan gave.
pub enum Compressed {
    /// The compressed resident.
    Built(Box<Resident>),
    /// Its packed segments passed the budget and the plan was the engine's choice: the
    /// next plan that fits (streaming or the CPU reference), and why.
    Next(MemoryPlan, String),
}

/// Build the compressed resident `plan` describes (its blocks of scan rows) within
/// `choice`'s budget, calling `progress(positions_done, positions)`. Where the packed
/// segments pass the budget, the next plan of `plans` that fits is returned instead, unless
/// the user picked the compressed plan by name: then the error stands. Bad pixels found in
/// the mean pattern are not zeroed yet (the caller settles them). Where the open deferred
/// `acq`'s B-tree leaves, the blocks read them from `feed` (decision 0047).
pub async fn build_compressed(
    engine: &Engine,
    (acq, feed): (&Acquisition, Option<&crate::formats::IndexFeed>),
    corr: Correction,
    plan: &MemoryPlan,
    plans: &[MemoryPlan],
    choice: PlanChoice,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Compressed> {
    let rows = plan.rows_per_block.unwrap_or(1);
    // A plan the engine chose may give up on a projection: the next one is streamed.
    let budget = choice.budget.map(|bytes| PackBudget {
        bytes,
        give_up_on_projection: choice.plan.is_none(),
    });
    match engine
        .upload_packed((acq, feed), corr, rows, plan.gpu_decode, budget, progress)
        .await
    {
        Ok(res) => Ok(Compressed::Built(Box::new(res))),
        Err(Error::GpuOutOfMemory(why)) if choice.plan.is_none() => {
            let next: Vec<MemoryPlan> = plans
                .iter()
                .filter(|p| p.kind != PlanKind::Compressed)
                .cloned()
                .collect();
            Ok(Compressed::Next(memory::choose(&next, plan.bin), why))
        }
        Err(e) => Err(e),
    }
}

/// [`build_compressed`], the resident's found bad pixels zeroed (as `gpu::compute` settles
/// a raw one) and its sizes said through `say`.
pub async fn compressed_resident(
    engine: &Engine,
    acq: &Acquisition,
    corr: Correction,
    plan: &MemoryPlan,
    plans: &[MemoryPlan],
    choice: PlanChoice,
    say: &mut dyn FnMut(String),
) -> Result<Compressed> {
    let quiet = &mut |_, _| {};
    let built = build_compressed(engine, (acq, None), corr, plan, plans, choice, quiet).await?;
    let Compressed::Built(mut res) = built else {
        return Ok(built);
    };
    if let Some(p) = &res.packed {
        say(format!(
            "compressed resident: {} bytes packed for {} raw ({:.2}x), scratch {} bytes",
            p.packed_bytes,
            p.raw_bytes,
            p.ratio(),
            p.scratch_bytes
        ));
    }
    crate::products::gpu::settle_bad_pixels(engine, acq, &mut res).await?;
    Ok(Compressed::Built(res))
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
        match compressed_resident(engine, acq, corr, &plan, &all, choice, say).await? {
            Compressed::Built(res) => {
                return crate::products::gpu::compute_resident(engine, acq, &res, params).await
            }
            Compressed::Next(next, why) => {
                plan = next;
                say(format!("{why}; memory plan: {}", plan_words(&plan)));
            }
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
