//! The native `stem4d` command: `info`, `product`, `bench`. Its flags are a contract that
//! tests outside the project rely on; keep them exactly.

mod bench;
#[cfg(feature = "cuda")]
mod bench_cuda;
pub mod bench_gpu;
pub mod bench_report;
pub mod bench_viewer;
mod compare;
mod memory;
mod open;
mod output;
pub mod parity;
mod product;

use bench::*;
use memory::{plan_words, BudgetArgs, PlansHere};
use open::{open_acquisition, open_options};
use output::{refuse_input_overwrite, write_new_file};
use product::{product, Backend};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::formats::{Acquisition, PartKind};
use crate::frames::Correction;
use crate::hdf5_index::Layout;
use crate::products::flags::FlagError;
use crate::products::ProductParams;

#[derive(Parser)]
#[command(
    name = "stem4d",
    version,
    about = "4D-STEM acquisitions: inspect, reduce, benchmark"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct OpenArgs {
    /// Input files: an Arina master with its data files (and companion), or one HDF5/EMPAD file.
    #[arg(required_unless_present = "synthetic")]
    files: Vec<PathBuf>,
    /// Generate a uint16 acquisition R,C,KR,KC in memory instead of reading files (benchmarks).
    #[arg(long, value_name = "R,C,KR,KC", conflicts_with = "files")]
    synthetic: Option<String>,
    /// With --synthetic: hold it as Arina-like bitshuffle+LZ4 chunks in memory (one per
    /// frame), so uploads go through the decoders (the GPU decoder on `wgpu`).
    #[arg(long, requires = "synthetic")]
    compressed: bool,
    /// With --synthetic --compressed: the samples' type, u16 (the default) or u8 (the
    /// uint16 samples divided by 4, at most 255).
    #[arg(long, value_name = "u8|u16", requires = "compressed")]
    synthetic_dtype: Option<String>,
    /// Scan shape ROWS,COLS when the files do not carry it (or to override it).
    #[arg(long, value_name = "R,C")]
    scan_shape: Option<String>,
    /// HDF5 path of the 3D/4D data set (default: detected).
    #[arg(long, value_name = "PATH")]
    dataset: Option<String>,
    /// Keep only scan rows R0..R1 and columns C0..C1 (half-open): what fits when the whole
    /// acquisition does not.
    #[arg(long, value_name = "R0,R1,C0,C1")]
    crop: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Describe an acquisition: shape, dtype, format, filters, chunk table, calibration.
    Info {
        #[command(flatten)]
        open: OpenArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// List every chunk even for long tables.
        #[arg(long)]
        chunks: bool,
        /// With it, the memory plans on this machine's GPU are listed too.
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Compute one product and write it as .npy (or TIFF: --out NAME.tif).
    ///
    /// The CPU backend (the reference) streams the frames in blocks of 64 MiB decoded: it
    /// holds a few blocks (about 250 MB) and the product, whatever the acquisition's size;
    /// `--kind binned` goes to the file as it is made.
    Product(Box<ProductArgs>),
    /// Every product on every available backend against the CPU reference, as a table.
    Parity {
        #[command(flatten)]
        open: OpenArgs,
        #[arg(long)]
        mask_bad_pixels: bool,
        /// Build DIR/NAME.wgsl in place of the kernel NAME (experiments; see `bench gpu`).
        #[arg(long, value_name = "DIR")]
        kernels: Option<PathBuf>,
        /// The backends checked, comma-separated: cpu (the reference, always computed),
        /// wgpu (the best adapter), vulkan, metal, dx12, cuda (a binary built with `--features cuda`),
        /// cuda-compressed (the CUDA backend holding the acquisition compressed).
        #[arg(long, default_value = "cpu,wgpu")]
        backends: String,
        /// Also write the matrix as JSON rows (product, backend, adapter, dtype, errors,
        /// bound, outcome, pass).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
    },
    /// Write a prepared acquisition (NAME.stem4d): the frames decoded once into the GPU
    /// resident's layout, each block with its SHA-256, so that a reopen copies them into
    /// GPU memory and decodes nothing. Opened like any acquisition afterwards.
    Prepare {
        #[command(flatten)]
        open: OpenArgs,
        /// The prepared file to write (.stem4d); never one of the inputs.
        #[arg(long, value_name = "NAME.stem4d")]
        out: PathBuf,
        /// The payload: packed (counts cut to each sector's bit width, expanded on the GPU
        /// at a reopen; float32 stays raw) or raw (the resident's tiles as they are).
        #[arg(long, value_enum, default_value = "packed")]
        payload: PayloadArg,
    },
    /// One product of several acquisitions with one shared detector (the page's compare
    /// grid): the files are grouped into acquisitions by their names (an Arina master with
    /// its data files and companion, .mib with .hdr, .raw with .xml, every other HDF5 or
    /// .stem4d file), a detector of another shape is refused, and each acquisition's
    /// product goes into DIR as NAME_KIND.npy, listed in DIR/compare.json.
    Compare(Box<CompareFlags>),
    /// Benchmarks that print figures.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Decoded GB/s per stage of the CPU decode path (all cores).
    Decode {
        #[command(flatten)]
        open: OpenArgs,
        /// Repetitions; the median is reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// Stage times (read, decode, upload, first product) and per-product GPU kernel times.
    Gpu {
        #[command(flatten)]
        open: OpenArgs,
        /// Kernel repetitions per timed batch.
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// BF disk radius in detector pixels.
        #[arg(long, default_value_t = 30.0)]
        bf_radius: f64,
        /// Build DIR/NAME.wgsl (the text after the common prelude) in place of the kernel
        /// NAME: variants timed on a remote GPU without a rebuild. The output says which.
        #[arg(long, value_name = "DIR")]
        kernels: Option<PathBuf>,
        /// Run the kernels of a browser without WebGPU's `subgroups` (workgroup memory or
        /// atomics in place of subgroup operations) where the adapter has subgroups.
        #[arg(long)]
        no_subgroups: bool,
        /// Time only the GPU decode of the first window (decode kernel experiments).
        #[arg(long)]
        decode_only: bool,
        /// Within a budget the whole acquisition does not fit, the streaming pass of every
        /// product together is timed instead.
        #[command(flatten)]
        budget: BudgetArgs,
        /// Also write the figures as JSON (`scripts/benchmarks_md.py --update` takes it).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// The GPU backend timed: wgpu (the best adapter), vulkan, metal, dx12, or cuda (a
        /// binary built with `--features cuda`: upload and kernel times only).
        #[arg(long, default_value = "wgpu")]
        backend: String,
    },
    /// The Vulkan driver's statistics for every kernel (registers, workgroup memory,
    /// instructions), through VK_KHR_pipeline_executable_properties.
    KernelStats {
        /// Without wgpu's runtime checks (index clamping, loop bounds, division checks).
        #[arg(long)]
        unchecked: bool,
    },
    /// Write the stored (still compressed) chunks of a one-data-set acquisition as
    /// PREFIX.chunks (bytes, in frame order) and PREFIX.sizes (u64 LE per chunk):
    /// `scripts/synthetic_h5.py` wraps them into an HDF5 file for load benchmarks.
    ExportChunks {
        #[command(flatten)]
        open: OpenArgs,
        #[arg(long, value_name = "PREFIX")]
        out: PathBuf,
    },
    /// The viewer's interactions (the page's own session code) timed natively: view change
    /// to GPU done, median per interaction.
    Viewer {
        #[command(flatten)]
        open: OpenArgs,
        /// Updates per interaction.
        #[arg(long, default_value_t = 30)]
        reps: usize,
        #[command(flatten)]
        budget: BudgetArgs,
        /// Run the kernels of a browser without WebGPU's `subgroups` (no subgroup
        /// operations), for figures set beside such a page's.
        #[arg(long)]
        no_subgroups: bool,
        /// Also write the figures as JSON (`scripts/benchmarks_md.py --update` takes it).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
    },
}

/// `stem4d compare`'s flags: the product's and the correction's as `product` takes them.
#[derive(Args)]
struct CompareFlags {
    /// The files of every acquisition.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Scan shape ROWS,COLS of files that do not carry it (every acquisition's).
    #[arg(long, value_name = "R,C")]
    scan_shape: Option<String>,
    #[command(flatten)]
    params: ProductParams,
    #[command(flatten)]
    correction: Correction,
    /// Where the products are computed (as `product --backend`).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// The folder the products and compare.json go into (made if missing; no file the run
    /// reads is ever replaced).
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
}

/// `stem4d product`: the product's flags and the acquisition's correction come from the
/// types the page's JSON is read into too (`products::ProductRequest`).
#[derive(Args)]
struct ProductArgs {
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    params: ProductParams,
    #[command(flatten)]
    correction: Correction,
    #[command(flatten)]
    budget: BudgetArgs,
    /// The detector mask of `--kind mask`, a `.npy` of the detector's shape: bool or uint8
    /// select pixels (nonzero), other dtypes weight them.
    #[arg(long, value_name = "MASK.npy")]
    mask: Option<PathBuf>,
    /// Where the product is computed: cpu (the reference), wgpu (the best GPU adapter), wgpu
    /// on a named graphics API (vulkan, metal, dx12), or cuda (a binary built with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// The output: `.npy` (exact, any product), an image as TIFF (`.tif`, `.tiff`) with
    /// its pixel size for ImageJ/Fiji (float64 values rounded to float32), or a line profile
    /// of an image as CSV (`.csv`, with --line).
    #[arg(long, value_name = "OUT.npy")]
    out: PathBuf,
    /// With --out NAME.csv: the image's profile along the line from (R0, C0) to (R1, C1),
    /// in pixel indices (pixel centres at integers), one sample a pixel, bilinear between
    /// pixels; distances in the calibrated unit.
    #[arg(long, value_name = "R0,C0,R1,C1", allow_hyphen_values = true, value_parser = crate::products::flags::list::<f64, 4>)]
    line: Option<[f64; 4]>,
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            if let Some(message) = flag_error(&e) {
                eprintln!("stem4d: error: {message}");
                return 1;
            }
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("stem4d: error: {}", say_error(&e));
            1
        }
    }
}

/// A product flag's value the vocabulary refused (`products::flags`), said as the CLI's own
/// errors are (exit status 1), naming the flag.
fn flag_error(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    use std::error::Error as _;
    let refused = e.source()?.downcast_ref::<FlagError>()?;
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split(' ').next().unwrap_or(s).to_string(),
        _ => "the flag".to_string(),
    };
    Some(refused.say(&flag))
}

/// An error as the command line says it: a product parameter by its flag (`--center R,C`
/// where the page says `'center'`), everything else as it is.
fn say_error(e: &Error) -> String {
    let Error::ProductParam { field, message } = e else {
        return e.to_string();
    };
    let (flag, value) = match *field {
        "center" => ("--center", " R,C"),
        "radius" => ("--radius", " R"),
        "inner" => ("--inner", " R"),
        "outer" => ("--outer", " R"),
        "rect" => ("--rect", " R0,R1,C0,C1"),
        "mask" => ("--mask", " MASK.npy"),
        "at" => ("--at", " R,C"),
        "bin" => ("--bin", ""),
        "rotation" => ("--rotation", ""),
        _ => return message.clone(),
    };
    message
        .replace(&format!("needs '{field}'"), &format!("needs {flag}{value}"))
        .replace(&format!("'{field}'"), flag)
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Info {
            open,
            json,
            chunks,
            budget,
        } => {
            let acq = open_acquisition(&open)?;
            let info = crate::formats::info::Info::of(&acq, chunks);
            let plans = (!budget.is_default())
                .then(|| PlansHere::of(&acq, Correction::default(), budget))
                .transpose()?;
            if json {
                let mut v = serde_json::to_value(&info)
                    .map_err(|e| Error::param(format!("cannot serialise info: {e}")))?;
                if let Some(plans) = &plans {
                    plans.add_to_json(&mut v)?;
                }
                let s = serde_json::to_string_pretty(&v)
                    .map_err(|e| Error::param(format!("cannot serialise info: {e}")))?;
                println!("{s}");
            } else {
                print!("{}", info.text());
                if let Some(plans) = &plans {
                    plans.print();
                }
            }
            Ok(())
        }
        Cmd::Product(p) => product(*p),
        Cmd::Compare(c) => {
            let c = *c;
            compare::compare(compare::CompareArgs {
                files: c.files,
                scan_shape: c.scan_shape,
                params: c.params,
                correction: c.correction,
                backend: c.backend,
                out_dir: c.out_dir,
            })
        }
        Cmd::Prepare { open, out, payload } => prepare(&open, &out, payload),
        Cmd::Bench {
            what: BenchCmd::Decode { open, repeat },
        } => bench_decode(&open, repeat.max(1)),
        Cmd::Bench {
            what:
                BenchCmd::Gpu {
                    open,
                    reps,
                    bf_radius,
                    kernels,
                    no_subgroups,
                    decode_only,
                    json,
                    budget,
                    backend,
                },
        } => {
            if backend == "cuda" {
                if kernels.is_some() || no_subgroups || decode_only {
                    return Err(Error::param(
                        "--kernels, --no-subgroups and --decode-only time the wgpu engine, not --backend cuda",
                    ));
                }
                let held = crate::cli::product::cuda_held(budget)?;
                return bench_cuda_here(&open, reps.max(2), bf_radius, held, json.as_deref());
            }
            bench_gpu(
                &open,
                GpuBench {
                    reps: reps.max(2),
                    bf_radius,
                    subgroups: !no_subgroups,
                    decode_only,
                    json,
                    budget,
                    api: Backend::gpu(&backend)?,
                },
                &kernel_overrides(kernels)?,
            )
        }
        Cmd::Bench {
            what: BenchCmd::KernelStats { unchecked },
        } => kernel_stats(unchecked),
        Cmd::Bench {
            what: BenchCmd::ExportChunks { open, out },
        } => export_chunks(&open_acquisition(&open)?, &out),
        Cmd::Bench {
            what:
                BenchCmd::Viewer {
                    open,
                    reps,
                    budget,
                    no_subgroups,
                    json,
                },
        } => crate::cli::bench_viewer::run(
            open_acquisition(&open)?,
            reps.max(1),
            budget,
            !no_subgroups,
            json.as_deref(),
        ),
        Cmd::Parity {
            open,
            mask_bad_pixels,
            kernels,
            backends,
            json,
        } => {
            let (apis, cuda) = crate::cli::parity::parse_backends(&backends)?;
            let acq = open_acquisition(&open)?;
            crate::cli::parity::run(
                &acq,
                &crate::cli::parity::ParityArgs {
                    mask_bad_pixels,
                    overrides: kernel_overrides(kernels)?,
                    apis,
                    cuda,
                    json,
                    read: open.files.clone(),
                },
            )
        }
    }
}

/// `stem4d prepare --payload`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum PayloadArg {
    Packed,
    Raw,
}

/// `stem4d prepare`: the acquisition of `open` written as a prepared acquisition at `out`.
fn prepare(open: &OpenArgs, out: &Path, payload: PayloadArg) -> Result<()> {
    if !out
        .to_string_lossy()
        .ends_with(crate::formats::prepared::EXTENSION)
    {
        return Err(Error::param(format!(
            "--out {}: a prepared acquisition is named NAME{}",
            out.display(),
            crate::formats::prepared::EXTENSION
        )));
    }
    let acq = open_acquisition(open)?;
    refuse_input_overwrite(out, &acq, &open.files)?;
    let t = Instant::now();
    use crate::formats::prepared::Payload;
    use crate::upload::prepare::{write_with, Preparer, BLOCK_BYTES};
    let payload = match payload {
        PayloadArg::Packed => Payload::Smallest,
        PayloadArg::Raw => Payload::Raw,
    };
    let d = write_with(
        Preparer::with_payload(acq.clone(), BLOCK_BYTES, payload),
        out,
        &mut |_, _| {},
    )?;
    let bytes: u64 = d.blocks.iter().map(|b| b.bytes).sum();
    let kind = match d.layout.is_packed() {
        true => "packed",
        false => "raw",
    };
    println!(
        "{}: {:?} {} prepared from {} in {} blocks ({bytes} bytes of {kind} payload) in {:.2} s",
        out.display(),
        d.shape,
        d.dtype,
        acq.primary,
        d.blocks.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The replacement kernels of `--kernels DIR`, announced so that their figures are never
/// taken for the embedded kernels'.
fn kernel_overrides(dir: Option<PathBuf>) -> Result<Vec<(String, String)>> {
    let Some(dir) = dir else {
        return Ok(Vec::new());
    };
    let overrides = crate::kernels::overrides_from(&dir)?;
    let names: Vec<&str> = overrides.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "kernels replaced from {}: {}",
        dir.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    );
    Ok(overrides)
}

/// `bench gpu --backend cuda`, where the binary has the CUDA backend.
#[cfg(feature = "cuda")]
fn bench_cuda_here(
    open: &OpenArgs,
    reps: usize,
    bf_radius: f64,
    held: crate::upload::memory::CudaHeld,
    json: Option<&Path>,
) -> Result<()> {
    bench_cuda::bench_cuda(open, reps, bf_radius, held, json)
}

#[cfg(not(feature = "cuda"))]
fn bench_cuda_here(
    _: &OpenArgs,
    _: usize,
    _: f64,
    _: crate::upload::memory::CudaHeld,
    _: Option<&Path>,
) -> Result<()> {
    Err(Error::param(
        "--backend cuda: not built into this binary (build it with `cargo build --release --features cuda`)",
    ))
}
