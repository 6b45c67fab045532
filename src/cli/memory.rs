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
        match self.memory_plan {
            Some(kind) => memory::pick(all, kind, bin).map_err(Error::param),
            None => Ok(memory::choose(all, bin)),
        }
    }
}

/// One product on the GPU within `args`' budget or along its plan: the plan the engine
/// takes is said on standard error (the output's provenance), then followed. A compressed
/// resident that passes the budget is streamed instead, and that is said too.
pub(super) fn product_within(
    acq: &Acquisition,
    params: &ProductParams,
    corr: Correction,
    args: BudgetArgs,
) -> Result<crate::products::ProductArray> {
    let engine = pollster::block_on(crate::gpu::Engine::new())?;
    let budget = args.memory_budget;
    let all = crate::gpu::memory_plans(acq, corr, engine.adapter.limits, budget);
    let mut plan = args.plan_of(&all, corr.bin)?;
    eprintln!("stem4d: memory plan: {}", plan_words(&plan));
    if plan.kind == PlanKind::Compressed {
        match compressed_resident(&engine, acq, corr, &plan, budget) {
            Ok(res) => {
                return pollster::block_on(crate::products::gpu::compute_resident(
                    &engine, acq, &res, params,
                ))
            }
            Err(Error::GpuOutOfMemory(why)) if args.memory_plan.is_none() => {
                let next: Vec<_> = all
                    .into_iter()
                    .filter(|p| p.kind != PlanKind::Compressed)
                    .collect();
                plan = memory::choose(&next, corr.bin);
                eprintln!("stem4d: {why}; memory plan: {}", plan_words(&plan));
            }
            Err(e) => return Err(e),
        }
    }
    match plan.kind {
        PlanKind::Resident => {
            pollster::block_on(crate::products::gpu::compute(&engine, acq, params, corr))
        }
        PlanKind::Compressed => Err(Error::Gpu("the compressed plan was not built".into())),
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

/// The compressed resident `plan` describes within `budget`, its found bad pixels zeroed
/// (as `products::gpu::compute` settles a raw one), and its sizes said on standard error.
pub(super) fn compressed_resident(
    engine: &crate::gpu::Engine,
    acq: &Acquisition,
    corr: Correction,
    plan: &memory::MemoryPlan,
    budget: Option<u64>,
) -> Result<crate::gpu::Resident> {
    let rows = plan.rows_per_block.unwrap_or(1);
    let mut res = pollster::block_on(engine.upload_packed(
        acq,
        corr,
        rows,
        plan.gpu_decode,
        budget,
        &mut |_, _| {},
    ))?;
    if let Some(p) = &res.packed {
        eprintln!(
            "stem4d: compressed resident: {} bytes packed for {} raw ({:.2}x), scratch {} bytes",
            p.packed_bytes,
            p.raw_bytes,
            p.raw_bytes as f64 / p.packed_bytes.max(1) as f64,
            p.scratch_bytes
        );
    }
    pollster::block_on(crate::products::gpu::settle_bad_pixels(
        engine, acq, &mut res,
    ))?;
    Ok(res)
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
