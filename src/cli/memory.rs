//! The CLI's side of memory plans (`upload::memory`): `--memory-budget`, the plans `info`
//! lists, and a product computed along the plan a budget leaves.

use clap::Args;

use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::products::ProductParams;
use crate::upload::memory::{self, PlanKind};

/// `--memory-budget`: the GPU memory an acquisition may take (`upload::memory`).
#[derive(Args, Clone, Copy)]
pub(super) struct BudgetArgs {
    /// Bytes of GPU memory the engine may use (`262144`, `256KiB`, `8GiB`): it takes the
    /// fastest exact plan at native sampling within them (the whole acquisition resident,
    /// streamed in blocks of scan rows, or the CPU reference) and says which.
    #[arg(long, value_name = "BYTES", value_parser = crate::upload::memory::parse_budget)]
    pub(super) memory_budget: Option<u64>,
    /// The memory plan to take (resident, compressed, streaming, cpu) instead of the
    /// fastest that fits: refused, by name, when it does not fit.
    #[arg(long, value_name = "PLAN", value_parser = crate::upload::memory::parse_plan)]
    pub(super) memory_plan: Option<PlanKind>,
}

impl BudgetArgs {
    /// Whether the engine's choice is left alone.
    pub(super) fn is_default(&self) -> bool {
        self.memory_budget.is_none() && self.memory_plan.is_none()
    }

    /// The plan these arguments take among `all` at `bin`.
    pub(super) fn plan_of(
        &self,
        all: &[memory::MemoryPlan],
        bin: usize,
    ) -> Result<memory::MemoryPlan> {
        self.choice().pick(all, bin)
    }

    pub(super) fn choice(&self) -> crate::planned::PlanChoice {
        crate::planned::PlanChoice {
            budget: self.memory_budget,
            plan: self.memory_plan,
        }
    }
}

/// One product on the GPU within `args`' budget or along its plan
/// (`planned`): each plan taken is said on standard error (the output's
/// provenance).
pub(super) fn product_within(
    acq: &Acquisition,
    params: &ProductParams,
    corr: Correction,
    args: BudgetArgs,
    api: crate::gpu::GpuApi,
) -> Result<crate::products::ProductArray> {
    let engine = pollster::block_on(crate::gpu::Engine::on(api, &[]))?;
    pollster::block_on(crate::planned::compute_planned(
        &engine,
        acq,
        params,
        corr,
        args.choice(),
        &mut |line| eprintln!("stem4d: {line}"),
    ))
}

/// [`crate::planned::compressed_resident`], its sizes said on standard error.
pub(super) fn compressed_resident(
    engine: &crate::gpu::Engine,
    acq: &Acquisition,
    corr: Correction,
    (plan, all): (&memory::MemoryPlan, &[memory::MemoryPlan]),
    args: BudgetArgs,
) -> Result<crate::planned::Compressed> {
    pollster::block_on(crate::planned::compressed_resident(
        engine,
        acq,
        corr,
        plan,
        all,
        args.choice(),
        &mut |line| eprintln!("stem4d: {line}"),
    ))
}

/// The plans of an acquisition on this machine's GPU within a budget, and the one taken
/// (`info --memory-budget`).
pub(super) struct PlansHere {
    budget: Option<u64>,
    taken: memory::MemoryPlan,
    all: Vec<memory::MemoryPlan>,
}

impl PlansHere {
    /// The CPU reference alone where no GPU adapter is found.
    pub(super) fn of(acq: &Acquisition, corr: Correction, args: BudgetArgs) -> Result<Self> {
        let budget = args.memory_budget;
        let all = match pollster::block_on(crate::gpu::Engine::new()) {
            Ok(engine) => crate::gpu::memory_plans(acq, corr, engine.adapter.limits, budget),
            Err(e) if e.is_gpu_unsupported() => vec![memory::cpu_plan(corr.bin)],
            Err(e) => return Err(e),
        };
        let taken = args.plan_of(&all, corr.bin)?;
        Ok(PlansHere { budget, taken, all })
    }

    /// `info --json`'s keys: `memory_budget`, `memory_plan`, `memory_plans`.
    pub(super) fn add_to_json(&self, info: &mut serde_json::Value) -> Result<()> {
        if let Some(map) = info.as_object_mut() {
            map.insert("memory_budget".into(), self.budget.into());
            map.insert("memory_plan".into(), json_of(&self.taken)?);
            map.insert("memory_plans".into(), json_of(&self.all)?);
        }
        Ok(())
    }

    /// `info`'s lines: the plan taken, then every plan and whether it fits.
    pub(super) fn print(&self) {
        let within = match self.budget {
            Some(b) => format!("within {b} bytes"),
            None => "on this adapter".into(),
        };
        println!(
            "memory plans {within} (taken: {}):",
            plan_words(&self.taken)
        );
        for p in &self.all {
            let fits = if p.fits { "fits   " } else { "no     " };
            println!("  {fits} {}", plan_words(p));
        }
    }
}

pub(super) use crate::planned::plan_words;

fn json_of<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::param(format!("cannot serialise the plans: {e}")))
}
