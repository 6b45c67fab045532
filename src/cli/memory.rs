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
}

/// One product on the GPU within `budget` bytes: the plan the engine takes is said on
/// standard error (the output's provenance), then followed.
pub(super) fn product_within(
    acq: &Acquisition,
    params: &ProductParams,
    corr: Correction,
    budget: u64,
) -> Result<crate::products::ProductArray> {
    let engine = pollster::block_on(crate::gpu::Engine::new())?;
    let all = crate::gpu::memory_plans(acq, corr, engine.adapter.limits, Some(budget));
    let plan = memory::choose(&all, corr.bin);
    eprintln!("stem4d: memory plan: {}", plan_words(&plan));
    match plan.kind {
        PlanKind::Resident => {
            pollster::block_on(crate::products::gpu::compute(&engine, acq, params, corr))
        }
        PlanKind::Streaming => {
            use crate::products::stream::{compute_streamed, only, Blocks};
            let ps = std::slice::from_ref(params);
            let blocks = Blocks::of(&plan);
            only(pollster::block_on(compute_streamed(
                &engine,
                acq,
                ps,
                corr,
                blocks,
                &mut |_, _| {},
            ))?)
        }
        PlanKind::Cpu => crate::cpu::compute(acq, params, corr),
    }
}

/// The plans of an acquisition on this machine's GPU within a budget, and the one taken
/// (`info --memory-budget`).
pub(super) struct PlansHere {
    budget: u64,
    taken: memory::MemoryPlan,
    all: Vec<memory::MemoryPlan>,
}

impl PlansHere {
    /// The CPU reference alone where no GPU adapter is found.
    pub(super) fn of(acq: &Acquisition, corr: Correction, budget: u64) -> Result<Self> {
        let all = match pollster::block_on(crate::gpu::Engine::new()) {
            Ok(engine) => crate::gpu::memory_plans(acq, corr, engine.adapter.limits, Some(budget)),
            Err(e) if e.is_gpu_unsupported() => vec![memory::cpu_plan(corr.bin)],
            Err(e) => return Err(e),
        };
        let taken = memory::choose(&all, corr.bin);
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
        println!(
            "memory plans within {} bytes (taken: {}):",
            self.budget,
            plan_words(&self.taken)
        );
        for p in &self.all {
            let fits = if p.fits { "fits   " } else { "no     " };
            println!("  {fits} {}", plan_words(p));
        }
    }
}

/// A memory plan in a line.
pub(super) fn plan_words(p: &memory::MemoryPlan) -> String {
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

fn json_of<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::param(format!("cannot serialise the plans: {e}")))
}
