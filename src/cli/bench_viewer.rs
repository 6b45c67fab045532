//! `stem4d bench viewer`: the browser viewer's interactions (`viewer::Session`, the same
//! code the page runs in its Worker) timed natively, from the view-state change to the GPU
//! finishing the image, limits and pattern it implies (no canvas draw). Set beside the
//! in-page figures of `e2e/h200.py`, it separates the engine's cost from the browser's.

#![cfg(not(target_arch = "wasm32"))]

use std::time::Instant;

use serde_json::{json, Value};

use crate::cli::bench_gpu::wait;
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::gpu::Engine;
use crate::products::{ProductKind, ProductParams};
use crate::session::{OpenRequest, Session, ViewState};

/// The view state of the k-th update of one interaction.
type ViewAt<'a> = Box<dyn Fn(usize) -> Value + 'a>;

fn state(v: Value) -> Result<ViewState> {
    serde_json::from_value(v).map_err(|e| Error::param(format!("bench view state: {e}")))
}

/// Median milliseconds of `reps` updates, the k-th to `view(k)` (each differs from the last).
fn median_update(
    engine: &Engine,
    s: &mut Session,
    reps: usize,
    view: &dyn Fn(usize) -> Value,
) -> Result<f64> {
    pollster::block_on(s.update(engine, &state(view(reps + 1))?))?;
    wait(engine)?;
    let mut ms = Vec::with_capacity(reps);
    for k in 0..reps {
        let st = state(view(k))?;
        let t = Instant::now();
        pollster::block_on(s.update(engine, &st))?;
        wait(engine)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// Print the load time and the median time of each interaction (`subgroups`: where the
/// adapter has them; off, the kernels the page runs).
pub(super) fn run(
    acq: Acquisition,
    reps: usize,
    budget: super::memory::BudgetArgs,
    subgroups: bool,
    json: Option<&std::path::Path>,
) -> Result<()> {
    let mut engine = pollster::block_on(Engine::new())?;
    engine.use_subgroups(subgroups);
    let shape = acq.shape;
    println!(
        "bench viewer: {:?} {:?} {} on {}, masked sums meet {}{}",
        acq.format,
        shape.as_array(),
        acq.dtype.name(),
        engine.adapter.name,
        engine.masked_sum_path(),
        if engine.adapter.software {
            " (software adapter: correctness only, not a speed figure)"
        } else {
            ""
        }
    );
    let a = &engine.adapter;
    let mut report = crate::cli::bench_report::BenchReport::new(
        format!("{}, {}, driver {}", a.name, a.backend, a.driver),
        a.software,
    );
    let t = Instant::now();
    let req = OpenRequest {
        bin: 1,
        memory_budget: budget.memory_budget,
        memory_plan: budget.memory_plan,
        ..Default::default()
    };
    let mut s = pollster::block_on(Session::open(&engine, acq, &req, 0.0, &mut |_, _, _| {}))?;
    pollster::block_on(s.prepare(&engine))?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("  load (upload + totals + CoM + BF fit)   {load_ms:9.2} ms");
    report.push("load", format!("{load_ms:.2} ms"));
    let [kr, kc] = shape.det;
    let [rows, cols] = shape.scan;
    let (cr, cc) = (kr as f64 / 2.0, kc as f64 / 2.0);
    let r = kr.min(kc) as f64 * 0.16;
    let cursor = [rows / 2, cols / 2];
    let pattern = json!({"source": "cursor"});
    let wiggle = |k: usize| (k % 7) as f64 * 0.5;
    if s.profile.memory_plan.kind == crate::upload::memory::PlanKind::Streaming {
        return streamed(&engine, &mut s, reps, cursor, report, json);
    }
    let lines: Vec<(&str, ViewAt<'_>)> = vec![
        (
            "drag BF disk -> new image",
            Box::new(
                |k| json!({"image": {"kind": "bf", "center": [cr + wiggle(k), cc], "radius": r, "cursor": cursor}, "pattern": pattern}),
            ),
        ),
        (
            "drag ADF annulus -> new image",
            Box::new(
                |k| json!({"image": {"kind": "adf", "center": [cr + wiggle(k), cc], "inner": 2.0 * r, "outer": 3.0 * r, "cursor": cursor}, "pattern": pattern}),
            ),
        ),
        (
            "drag DF disk -> new image",
            Box::new(
                |k| json!({"image": {"kind": "df", "center": [cr + wiggle(k), cc], "radius": r, "cursor": cursor}, "pattern": pattern}),
            ),
        ),
        (
            "DPC rotation -> new image",
            Box::new(
                |k| json!({"image": {"kind": "dpc", "rotation": k as f64, "cursor": cursor}, "pattern": pattern}),
            ),
        ),
        (
            "iDPC rotation -> new image",
            Box::new(
                |k| json!({"image": {"kind": "idpc", "rotation": k as f64, "cursor": cursor}, "pattern": pattern}),
            ),
        ),
        (
            "pattern at cursor",
            Box::new(
                |k| json!({"image": {"kind": "dpc", "cursor": [k % rows, (k * 7) % cols]}, "pattern": pattern}),
            ),
        ),
        (
            "mean pattern over a scan ROI",
            Box::new(|k| {
                let r1 = (rows / 2 + k % 7).min(rows);
                json!({"image": {"kind": "dpc", "cursor": cursor, "roi": [0, r1, 0, cols / 2]}, "pattern": {"source": "mean"}})
            }),
        ),
    ];
    for (name, view) in &lines {
        let ms = median_update(&engine, &mut s, reps, view.as_ref())?;
        println!("  {name:<38} {ms:9.2} ms  (median of {reps})");
        let mut value = format!("{ms:.2} ms");
        if let Some(g) = gpu_times(&engine, &mut s, reps.min(10), view.as_ref())? {
            println!("    {g}");
            // The row keeps the total; the per-kernel breakdown stays in the printed run.
            let busy = g.split(" (median").next().unwrap_or(&g);
            value = format!("{value} ({busy})");
        }
        report.push(*name, value);
    }
    // The page's "find rot" (key T): the least-curl rotation and flip from the resident's
    // moments, its 180° branch from the iDPC phase against the ADF annulus (decision 0033).
    let mut find = ProductParams::new(ProductKind::DpcRotation);
    find.center = Some([cr, cc]);
    find.inner = Some(2.0 * r);
    find.outer = Some(3.0 * r);
    let corr = s.correction();
    pollster::block_on(s.product(&engine, &find, corr))?;
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let found = pollster::block_on(s.product(&engine, &find, corr))?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(found);
    }
    ms.sort_by(f64::total_cmp);
    let name = "find DPC rotation (curl + branch, read back)";
    println!("  {name:<38} {:9.2} ms  (median of {reps})", ms[reps / 2]);
    report.push(name, format!("{:.2} ms", ms[reps / 2]));
    match json {
        Some(path) => report.write(path),
        None => Ok(()),
    }
}

/// A streamed session (decision 0036): detectors resized about the BF centre, drawn from the
/// ring sums the open made, and one detector off the centre, a pass over the files.
fn streamed(
    engine: &Engine,
    s: &mut Session,
    reps: usize,
    cursor: [usize; 2],
    mut report: crate::cli::bench_report::BenchReport,
    json: Option<&std::path::Path>,
) -> Result<()> {
    let pattern = &json!({"source": "cursor"});
    let mut lines: Vec<(&str, ViewAt<'_>, usize)> = Vec::new();
    if let Some(rings) = &s.profile.streamed_ring_sums {
        let c = rings.center;
        println!(
            "  ring sums about ({:.2}, {:.2}): {} rings, {} bytes",
            c[0], c[1], rings.rings, rings.bytes
        );
        lines.push((
            "resize BF disk about the BF centre (ring sums)",
            Box::new(
                move |k| json!({"image": {"kind": "bf", "center": c, "radius": 10 + k % 7, "cursor": cursor}, "pattern": pattern}),
            ),
            reps,
        ));
        lines.push((
            "resize ADF annulus about the BF centre (ring sums)",
            Box::new(
                move |k| json!({"image": {"kind": "adf", "center": c, "inner": 20 + k % 5, "outer": 40 + k % 7, "cursor": cursor}, "pattern": pattern}),
            ),
            reps,
        ));
    } else {
        println!("  no ring sums: {:?}", s.profile.warnings);
    }
    let [kr, kc] = s.acq.shape.det.map(|n| n as f64 / 2.0 + 0.37);
    lines.push((
        "BF disk off the centre (one pass over the files)",
        Box::new(
            move |k| json!({"image": {"kind": "bf", "center": [kr + k as f64, kc], "radius": 12.5, "cursor": cursor}, "pattern": pattern}),
        ),
        1,
    ));
    for (name, view, n) in &lines {
        let ms = median_update(engine, s, *n, view.as_ref())?;
        println!("  {name:<50} {ms:9.2} ms  (median of {n})");
        report.push(*name, format!("{ms:.2} ms"));
    }
    match json {
        Some(path) => report.write(path),
        None => Ok(()),
    }
}

/// The GPU's own time in `reps` further updates, by pass timestamps where the adapter has
/// them (each dispatch then a pass of its own): the medians of the passes' sum and of each
/// kernel's time in an update, as one line; None without timestamps.
fn gpu_times(
    engine: &Engine,
    s: &mut Session,
    reps: usize,
    view: &dyn Fn(usize) -> Value,
) -> Result<Option<String>> {
    if !engine.time_passes(true) {
        return Ok(None);
    }
    let timed = (|| {
        pollster::block_on(engine.pass_times())?;
        let mut steps = Vec::with_capacity(reps);
        for k in 0..reps {
            pollster::block_on(s.update(engine, &state(view(2 * reps + k))?))?;
            wait(engine)?;
            if let Some(t) = pollster::block_on(engine.pass_times())? {
                steps.push(t);
            }
        }
        Ok(steps)
    })();
    engine.time_passes(false);
    let steps: Vec<crate::gpu::pass_clock::PassTimes> = timed?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut names: Vec<&str> = steps
        .iter()
        .flat_map(|t| t.passes.iter().map(|p| p.0))
        .collect();
    names.sort_unstable();
    names.dedup();
    let kernels: Vec<String> = names
        .iter()
        .map(|n| {
            let per_step = steps.iter().map(|t| {
                t.passes
                    .iter()
                    .filter(|p| p.0 == *n)
                    .map(|p| p.1)
                    .sum::<f64>()
            });
            format!("{n} {:.3}", median(per_step.collect()))
        })
        .collect();
    Ok(Some(format!(
        "GPU busy {:.3} ms (median of {}, a pass per dispatch): {}",
        median(steps.iter().map(|t| t.busy_ms).collect()),
        steps.len(),
        kernels.join(", ")
    )))
}
