//! Benchmarks the CLI runs: CPU decode (`bench decode`), the kernels' driver statistics
//! (`bench kernel-stats`) and the GPU products (`bench gpu`); figures go to BENCHMARKS.md.

use super::*;

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(super) fn bench_decode(open: &OpenArgs, repeat: usize) -> Result<()> {
    use rayon::prelude::*;
    let t = Instant::now();
    let acq = open_acquisition(open)?;
    let t_index = t.elapsed().as_secs_f64();
    let logical = acq.logical_bytes() as f64;
    let stored = acq.stored_bytes() as f64;
    let threads = rayon::current_num_threads();
    println!(
        "bench decode: {:?} {:?} {} ({:.3} GB decoded, {:.3} GB stored), {threads} threads",
        acq.format,
        acq.shape.as_array(),
        acq.dtype.name(),
        logical / 1e9,
        stored / 1e9
    );
    println!("  open+index          {:8.3} ms", t_index * 1e3);

    // Stage 1: read the stored chunk bytes (the page cache is warm after the first repeat).
    let mut reads = Vec::new();
    let mut chunks: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    for _ in 0..repeat {
        chunks.clear();
        let t = Instant::now();
        for (pi, part) in acq.parts.iter().enumerate() {
            if let PartKind::Hdf5(ix) = &part.kind {
                if let Layout::Chunked { .. } = ix.layout {
                    let got: Vec<(usize, usize, Vec<u8>)> = ix
                        .chunks
                        .par_iter()
                        .enumerate()
                        .map(|(ci, c)| part.source.read_vec(c.offset, c.size).map(|b| (pi, ci, b)))
                        .collect::<Result<_>>()?;
                    chunks.extend(got);
                }
            }
        }
        reads.push(t.elapsed().as_secs_f64());
    }
    // Stage 2: decode from memory.
    let mut decodes = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        chunks
            .par_iter()
            .try_for_each(|(pi, ci, raw)| -> Result<()> {
                let PartKind::Hdf5(ix) = &acq.parts[*pi].kind else {
                    return Ok(());
                };
                let cs = ix.chunk_shape().unwrap_or(&[]);
                let logical = cs.iter().product::<u64>() as usize * ix.dtype.size();
                let c = &ix.chunks[*ci];
                crate::decode::decode_chunk(
                    &ix.filters,
                    c.filter_mask,
                    raw,
                    logical,
                    ix.dtype.size(),
                )
                .map(|_| ())
                .map_err(|e| Error::Decode {
                    file: ix.file.clone(),
                    chunk: format!("{:?}", c.coords),
                    message: e.0,
                })
            })?;
        decodes.push(t.elapsed().as_secs_f64());
    }
    // Stage 3: the whole CPU path a product uses (read + decode + widen), streamed.
    let mut streams = Vec::new();
    let reader = crate::frames::FrameReader::new(&acq).with_block_bytes(256 << 20);
    for _ in 0..repeat {
        let t = Instant::now();
        let mut n = 0usize;
        reader.for_each_block(crate::frames::Correction::default(), |b| {
            n += b.count;
            Ok(())
        })?;
        streams.push(t.elapsed().as_secs_f64());
    }
    let report = |name: &str, secs: f64, bytes: f64, what: &str| {
        println!(
            "  {name:<18}  {:8.3} ms  {:7.3} GB/s {what}",
            secs * 1e3,
            bytes / secs / 1e9
        );
    };
    if !chunks.is_empty() {
        report("read chunks", median(reads), stored, "stored");
        report("decode chunks", median(decodes), logical, "decoded");
    }
    report("read+decode+widen", median(streams), logical, "decoded");
    Ok(())
}

pub(super) fn export_chunks(acq: &Acquisition, prefix: &Path) -> Result<()> {
    use std::io::Write;
    let [part] = acq.parts.as_slice() else {
        return Err(Error::param(
            "export-chunks takes an acquisition of one data set",
        ));
    };
    let PartKind::Hdf5(ix) = &part.kind else {
        return Err(Error::param("export-chunks takes a chunked HDF5 data set"));
    };
    let mut chunks: Vec<_> = ix.chunks.iter().collect();
    chunks.sort_by(|a, b| a.coords.cmp(&b.coords));
    let with_ext = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    let create = |p: &Path| {
        std::fs::File::create(p)
            .map(std::io::BufWriter::new)
            .map_err(|e| Error::param(format!("{}: {e}", p.display())))
    };
    let (cp, sp) = (with_ext(".chunks"), with_ext(".sizes"));
    let (mut data, mut sizes) = (create(&cp)?, create(&sp)?);
    let io = |p: &Path, e: std::io::Error| Error::param(format!("{}: {e}", p.display()));
    for c in chunks {
        let bytes = part.source.read_vec(c.offset, c.size)?;
        data.write_all(&bytes).map_err(|e| io(&cp, e))?;
        sizes
            .write_all(&c.size.to_le_bytes())
            .map_err(|e| io(&sp, e))?;
    }
    data.flush().map_err(|e| io(&cp, e))?;
    sizes.flush().map_err(|e| io(&sp, e))?;
    println!("wrote {} and {}", cp.display(), sp.display());
    Ok(())
}

pub(super) fn kernel_stats(unchecked: bool) -> Result<()> {
    let (device, kernels) = crate::gpu::kernel_stats::all(unchecked)?;
    println!(
        "kernel statistics on {device} (naga's SPIR-V as wgpu's Vulkan backend writes it{})",
        if unchecked {
            ", without its runtime checks"
        } else {
            ""
        }
    );
    for k in kernels {
        let line: Vec<String> = k
            .stats
            .iter()
            .map(|s| format!("{} {}", s.name, s.value))
            .collect();
        println!("  {:<14} {:<16} {}", k.kernel, k.entry, line.join(", "));
    }
    Ok(())
}

/// What `bench gpu` times.
pub(super) struct GpuBench {
    pub(super) reps: usize,
    pub(super) bf_radius: f64,
    pub(super) subgroups: bool,
    pub(super) decode_only: bool,
    pub(super) json: Option<PathBuf>,
    pub(super) budget: super::memory::BudgetArgs,
    /// The graphics API the engine runs on.
    pub(super) api: crate::gpu::GpuApi,
}

pub(super) fn bench_gpu(
    open: &OpenArgs,
    b: GpuBench,
    overrides: &[(String, String)],
) -> Result<()> {
    let GpuBench {
        reps,
        bf_radius,
        subgroups,
        decode_only,
        json,
        budget,
        api,
    } = b;
    let t = Instant::now();
    let acq = open_acquisition(open)?;
    let t_open = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut engine = pollster::block_on(crate::gpu::Engine::on(api, overrides))?;
    engine.use_subgroups(subgroups);
    let t_device = t.elapsed().as_secs_f64();
    let a = &engine.adapter;
    println!(
        "bench gpu: {:?} {:?} {} ({:.2} GB) on {} ({}, {}), masked sums meet {}{}",
        acq.format,
        acq.shape.as_array(),
        acq.dtype.name(),
        acq.logical_bytes() as f64 / 1e9,
        a.name,
        a.backend,
        a.driver,
        engine.masked_sum_path(),
        if a.software {
            "  [SOFTWARE ADAPTER: correctness only, not a GPU timing]"
        } else {
            ""
        }
    );
    let mut report = crate::cli::bench_report::BenchReport::new(
        format!("{}, {}, driver {}", a.name, a.backend, a.driver),
        a.software,
    );
    let scoped = engine.workgroup_scoped_kernels();
    if !scoped.is_empty() {
        println!(
            "  kernels built from SPIR-V with workgroup-scoped storage barriers: {}",
            scoped.join(", ")
        );
    }
    let mut compressed = None;
    if !budget.is_default() {
        use crate::upload::memory::PlanKind;
        let corr = crate::frames::Correction::default();
        let limits = engine.adapter.limits;
        let all = crate::gpu::memory_plans(&acq, corr, limits, budget.memory_budget);
        let plan = budget.plan_of(&all, 1)?;
        let within = budget
            .memory_budget
            .map_or("on this adapter".into(), |b| format!("within {b} bytes"));
        println!("  memory plan {within}: {}", super::plan_words(&plan));
        if plan.kind != PlanKind::Compressed {
            // A compressed plan is reported once built (it may pass the budget).
            report.push("memory plan", plan.kind.name().to_string());
        }
        match plan.kind {
            PlanKind::Resident => {}
            PlanKind::Compressed => compressed = Some((plan, all)),
            _ => return bench_stream(&engine, &acq, &plan, bf_radius, report, json.as_deref()),
        }
    }
    engine.reset_memory_peak();
    let t = Instant::now();
    let mut res = match &compressed {
        Some((plan, all)) => {
            use crate::planned::Compressed;
            let corr = crate::frames::Correction::default();
            // A kept prepared payload (no blocks of rows to build) is one reopen: its
            // batches timed as a resident upload's are.
            let kept = plan.rows_per_block.is_none();
            engine.time_upload_batches(kept);
            let built =
                super::memory::compressed_resident(&engine, &acq, corr, (plan, all), budget);
            engine.time_upload_batches(false);
            match built? {
                Compressed::Built(res) => {
                    report.push("memory plan", "compressed");
                    *res
                }
                Compressed::Next(plan, why) => {
                    // As a session does: the next plan that fits, streaming or the CPU.
                    println!("  {why}: {}", super::plan_words(&plan));
                    report.push("memory plan", plan.kind.name().to_string());
                    return bench_stream(&engine, &acq, &plan, bf_radius, report, json.as_deref());
                }
            }
        }
        None => {
            // The GPU's side of the load, printed beside the host's laps: this upload's
            // batches only, so that no streamed block or compressed build reads back
            // timestamps of its own.
            engine.time_upload_batches(true);
            let res = pollster::block_on(engine.upload(&acq, crate::frames::Correction::default()));
            engine.time_upload_batches(false);
            res?
        }
    };
    crate::cli::bench_gpu::wait(&engine)?;
    let t_upload = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let first = pollster::block_on(crate::kernels::masked_sum::masked_sums(
        &engine,
        &res,
        &crate::contract::SparseMask::all(acq.shape.det).indices,
    ))?;
    let t_first = t.elapsed().as_secs_f64();
    let stages = [
        ("open+index", t_open),
        ("device", t_device),
        ("read+decode+upload", t_upload),
        ("first product (total)", t_first),
    ];
    for (key, seconds) in stages {
        report.push(format!("stage {key}"), format!("{:.3} ms", seconds * 1e3));
    }
    println!(
        "  stage  open+index                 {:9.3} ms",
        t_open * 1e3
    );
    println!(
        "  stage  device                     {:9.3} ms",
        t_device * 1e3
    );
    println!(
        "  stage  read+decode+upload         {:9.3} ms  ({:.2} GB resident in {} buffers, {:.2} GB/s)",
        t_upload * 1e3,
        res.plan.payload_bytes as f64 / 1e9,
        res.buffers.len(),
        res.plan.payload_bytes as f64 / t_upload / 1e9
    );
    if let Some(p) = &res.packed {
        let ratio = p.ratio();
        // A synthetic acquisition has no files to compare the packed bytes with.
        let of_files = match acq.stored_bytes() {
            0 => String::new(),
            stored => format!(
                "; {:.2}x the files' {:.3} GB",
                p.packed_bytes as f64 / stored as f64,
                stored as f64 / 1e9
            ),
        };
        println!(
            "           compressed: {:.3} GB packed for {:.3} GB raw ({ratio:.2}x{of_files}), scratch {:.3} GB",
            p.packed_bytes as f64 / 1e9,
            p.raw_bytes as f64 / 1e9,
            p.scratch_bytes as f64 / 1e9
        );
        report.push("compressed bytes", p.packed_bytes.to_string());
        report.push("compressed ratio", format!("{ratio:.3}"));
        if acq.stored_bytes() > 0 {
            report.push(
                "compressed of stored",
                format!("{:.3}", p.packed_bytes as f64 / acq.stored_bytes() as f64),
            );
        }
    }
    if let Some(peak) = engine.memory_peak() {
        println!(
            "           measured peak of GPU memory {:.3} GB (predicted {:.3} GB)",
            peak as f64 / 1e9,
            res.plan.peak_bytes as f64 / 1e9
        );
        report.push("measured peak bytes", peak.to_string());
    }
    // Where the upload's time went, step by step (the host's side of it; the GPU's work
    // overlaps these).
    for (step, ms) in &res.upload_times.0 {
        println!("           of which {step:<22} {ms:9.3} ms");
        report.push(format!("stage upload: {step}"), format!("{ms:.3} ms"));
    }
    // The GPU's side, where its batches were timed (a prepared reopen's, a GPU decode's
    // windows).
    if let Some(g) = &res.gpu_batches {
        println!(
            "           GPU: {} batches busy {:.3} ms (longest {:.3} ms), idle between them {:.3} ms",
            g.batches, g.busy_ms, g.longest_ms, g.idle_ms
        );
        report.push("upload GPU batches", g.batches.to_string());
        report.push("upload GPU busy", format!("{:.3} ms", g.busy_ms));
        report.push(
            "upload GPU longest batch",
            format!("{:.3} ms", g.longest_ms),
        );
        report.push(
            "upload GPU idle between batches",
            format!("{:.3} ms", g.idle_ms),
        );
    }
    println!(
        "  stage  first product (total)      {:9.3} ms  ({} positions read back)",
        t_first * 1e3,
        first.len()
    );
    let mut lines = Vec::new();
    if !decode_only {
        // Freshly allocated memory reads slowly at first on some drivers: warm up for ~1 s.
        let warm = Instant::now();
        while warm.elapsed().as_secs_f64() < 1.0 {
            crate::cli::bench_gpu::products(&engine, &res, bf_radius, 2)?;
        }
        lines = crate::cli::bench_gpu::products(&engine, &res, bf_radius, reps)?;
        lines.extend(crate::cli::bench_gpu::ring_products(
            &engine, &mut res, bf_radius, reps,
        )?);
    }
    if crate::upload::gpu_decode::supported(&acq, crate::frames::Correction::default()) {
        lines.extend(pollster::block_on(crate::cli::bench_gpu::decode_window(
            &engine, &acq, &res, reps,
        ))?);
    }
    for line in lines {
        let gbps = line.bytes / line.seconds / 1e9;
        println!(
            "  kernel {:<30} {:9.3} ms  {:8.1} GB/s effective",
            line.name,
            line.seconds * 1e3,
            gbps
        );
        // The key leaves out what follows a colon (how ring sums split a mask), which
        // says how the figure was made, not which figure it is.
        let key = line.name.split(':').next().unwrap_or_default().trim();
        report.push(
            format!("kernel {key}"),
            format!("{:.3} ms ({gbps:.1} GB/s effective)", line.seconds * 1e3),
        );
    }
    match json {
        Some(path) => report.write(&path),
        None => Ok(()),
    }
}

/// Time one streaming pass computing the products a first look needs together: total, BF
/// and ADF about the detector centre, CoM, and the sum and max patterns (the CPU reference
/// where the plan is the CPU's).
fn bench_stream(
    engine: &crate::gpu::Engine,
    acq: &Acquisition,
    plan: &crate::upload::memory::MemoryPlan,
    bf_radius: f64,
    mut report: crate::cli::bench_report::BenchReport,
    json: Option<&Path>,
) -> Result<()> {
    use crate::products::{ProductKind, ProductParams};
    let [kr, kc] = acq.shape.det;
    let centre = [kr as f64 / 2.0 - 0.5, kc as f64 / 2.0 - 0.5];
    let with = |kind, f: &dyn Fn(&mut ProductParams)| {
        let mut p = ProductParams::new(kind);
        f(&mut p);
        p
    };
    let ps = vec![
        with(ProductKind::Total, &|_| {}),
        with(ProductKind::Bf, &|p| {
            p.center = Some(centre);
            p.radius = Some(bf_radius);
        }),
        with(ProductKind::Adf, &|p| {
            p.center = Some(centre);
            p.inner = Some(bf_radius * 1.5);
            p.outer = Some(bf_radius * 3.0);
        }),
        with(ProductKind::Com, &|_| {}),
        with(ProductKind::SumDp, &|_| {}),
        with(ProductKind::MaxDp, &|_| {}),
    ];
    let corr = crate::frames::Correction::default();
    let laps0 = crate::products::stream::PASS_TIMES.ms();
    let t = Instant::now();
    match plan.kind {
        crate::upload::memory::PlanKind::Cpu => {
            for p in &ps {
                crate::cpu::compute(acq, p, corr)?;
            }
        }
        _ => {
            let blocks = crate::products::stream::Blocks::of(plan);
            pollster::block_on(crate::products::stream::compute_streamed(
                engine,
                acq,
                &ps,
                corr,
                blocks,
                &mut |_, _| {},
            ))?;
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let stored = acq.stored_bytes() as f64;
    println!(
        "  stream pass (total, BF, ADF, CoM, sum and max patterns) {:9.1} ms  ({:.2} GB stored, {:.2} GB/s)",
        seconds * 1e3,
        stored / 1e9,
        stored / seconds / 1e9
    );
    // Its blocks' uploads (each lap summed over the blocks) against the products' parts.
    for (step, ms) in crate::products::stream::PASS_TIMES.since(&laps0) {
        println!("           of which {step:<34} {ms:9.1} ms");
    }
    report.push(
        "stream pass (6 products)",
        format!(
            "{:.1} ms ({:.2} GB/s stored)",
            seconds * 1e3,
            stored / seconds / 1e9
        ),
    );
    match json {
        Some(path) => report.write(path),
        None => Ok(()),
    }
}
