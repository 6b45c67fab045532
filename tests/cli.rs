//! The `stem4d` binary as a user runs it: `info --json`, `product`, and its refusals.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use stem4d::frames::Correction;

use common::*;
use serde_json::Value;

const ARINA_U16: [&str; 4] = [
    "arina_u16_master.h5",
    "arina_u16_data_000001.h5",
    "arina_u16_data_000002.h5",
    "arina_u16.h5",
];

fn stem4d(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stem4d"))
        .args(args)
        .output()
        .expect("run stem4d")
}

/// `stem4d product --backend cpu OPTIONS --out OUT FILES...`.
fn cpu_product(options: &[&str], out: &str, files: &[String]) -> Output {
    let mut args = vec!["product", "--backend", "cpu"];
    args.extend_from_slice(options);
    args.extend(["--out", out]);
    args.extend(files.iter().map(String::as_str));
    stem4d(&args)
}

fn data(name: &str) -> String {
    fixtures().join("data").join(name).display().to_string()
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "stem4d-cli-{tag}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Copy fixture files in, so nothing a test does can touch the real fixtures.
    fn copy_fixtures(&self, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .map(|n| {
                let dst = self.path(n);
                std::fs::copy(fixtures().join("data").join(n), &dst).expect("copy fixture");
                dst.display().to_string()
            })
            .collect()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `info --json` reports the logical shape and the metadata C-AXES asks for.
#[test]
fn info_json_describes_the_arina_fixture() {
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let mut args = vec!["info", "--json"];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    assert!(o.status.success(), "info failed: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("info --json prints JSON");
    for key in INFO_KEYS {
        assert!(v.get(key).is_some(), "info --json lacks '{key}': {v}");
    }
    let shape: Vec<u64> = v["shape"]
        .as_array()
        .expect("shape is an array")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(shape, [5, 7, 13, 11]);
}

fn bf_reference() -> (Value, PathBuf) {
    let fx = fixture_named("arina_u16");
    let p = fx["products"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["kind"] == "bf"
                && f64s(&p["params"]["center"]) == Some(vec![6.3, 4.8])
                && p["params"]["radius"].as_f64() == Some(3.5)
                && !p["params"]["mask_bad_pixels"].as_bool().unwrap_or(false)
                && p["params"]["bin"].as_u64().unwrap_or(1) == 1
        })
        .expect("bf reference with center 6.3,4.8 radius 3.5")
        .clone();
    let path = fixtures().join(p["ref"].as_str().unwrap());
    (p, path)
}

/// The CLI's `.npy` of a BF image: the reference's values and dtype, uint64 (C-DTYPE, C-MASK).
#[test]
fn product_bf_matches_the_reference() {
    let tmp = TempDir::new("bf");
    let out = tmp.path("bf.npy");
    let out_s = out.display().to_string();
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let mut args = vec![
        "product", "--kind", "bf", "--center", "6.3,4.8", "--radius", "3.5", "--out", &out_s,
    ];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    assert!(o.status.success(), "product failed: {}", stderr(&o));
    let (_, reference) = bf_reference();
    let got = read_npy(&out);
    let want = read_npy(&reference);
    against_numpy("cli bf", "bf", &got, &want).unwrap();
}

/// `--out NAME.tif` (decision 0034): the image's values as TIFF, its pixel size where
/// ImageJ reads it (the scan step for scan images, the detector step for patterns), equal to
/// the `.npy` of the same product; vectors and the 4-D binned acquisition are refused by name.
#[test]
fn product_tiff_holds_the_values_and_the_pixel_size() {
    use tiff::decoder::{Decoder, DecodingResult};
    use tiff::tags::Tag;
    let tmp = TempDir::new("tiff");
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let info = stem4d(
        &[
            &["info", "--json"][..],
            &files.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    let info: Value = serde_json::from_slice(&info.stdout).expect("info --json");
    let cal = &info["calibration"];
    let scan_step = cal["scan_step"]
        .as_f64()
        .expect("the fixture has a scan step");
    let det_step = cal["detector_step"]
        .as_f64()
        .expect("the fixture has a detector step");
    let det_units = cal["detector_units"].as_str().unwrap();
    let bf = ["--kind", "bf", "--center", "6.3,4.8", "--radius", "3.5"];
    let cases: [(&[&str], f64, String); 2] = [
        (
            &bf,
            scan_step,
            format!("unit={}", cal["scan_units"].as_str().unwrap()),
        ),
        (&["--kind", "sum-dp"], det_step, format!("unit={det_units}")),
    ];
    for (options, step, unit) in cases {
        let npy = tmp.path("image.npy");
        let tif = tmp.path("image.TIF");
        let _ = std::fs::remove_file(&npy);
        let _ = std::fs::remove_file(&tif);
        for out in [&npy, &tif] {
            let o = cpu_product(options, &out.display().to_string(), &files);
            assert!(o.status.success(), "{options:?}: {}", stderr(&o));
        }
        let want = read_npy(&npy);
        let bytes = std::fs::read(&tif).unwrap();
        let mut d = Decoder::new(std::io::Cursor::new(&bytes[..])).expect("a TIFF");
        let (w, h) = d.dimensions().unwrap();
        assert_eq!([h as usize, w as usize], want.shape[..], "{options:?}");
        let text = d.get_tag_ascii_string(Tag::ImageDescription).unwrap();
        assert!(
            text.starts_with("ImageJ=") && text.contains(&unit),
            "{options:?}: {text}"
        );
        let r = d.get_tag(Tag::XResolution).unwrap().into_u64_vec().unwrap();
        let per_unit = r[0] as f64 / r[1] as f64;
        assert!(
            (per_unit * step - 1.0).abs() < 1e-8,
            "{options:?}: {per_unit} per unit, step {step}"
        );
        let DecodingResult::U32(got) = d.read_image().unwrap() else {
            panic!("{options:?}: uint64 sums that fit are uint32")
        };
        let got: Vec<f64> = got.iter().map(|&x| x as f64).collect();
        assert_eq!(got, want.data.to_f64(), "{options:?}");
    }
    for (kind, words) in [("fit-bf", "fit-bf has shape [3]"), ("binned", "4-D")] {
        let tif = tmp.path(&format!("{kind}.tiff"));
        let o = cpu_product(&["--kind", kind], &tif.display().to_string(), &files);
        assert!(
            !o.status.success() && stderr(&o).contains(words) && stderr(&o).contains(".npy"),
            "{kind}: {}",
            stderr(&o)
        );
        assert!(!tif.exists(), "{kind}: nothing is written");
    }
}

/// `--line R0,C0,R1,C1 --out NAME.csv`: the image's profile, distances in the scan's unit;
/// along a row through pixel centres, the row's values of the `.npy`; CoM gives both planes;
/// a CSV without a line, or a line without a CSV, is refused before anything is computed.
#[test]
fn product_line_profile_is_written_as_csv() {
    let tmp = TempDir::new("csv");
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let bf = ["--kind", "bf", "--center", "6.3,4.8", "--radius", "3.5"];
    let npy = tmp.path("bf.npy");
    let o = cpu_product(&bf, &npy.display().to_string(), &files);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = read_npy(&npy).data.to_f64();
    let csv = tmp.path("bf.csv");
    let o = cpu_product(
        &[&bf[..], &["--line", "2,0,2,6"]].concat(),
        &csv.display().to_string(),
        &files,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("distance_nm,value"));
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 7, "{text}");
    for (c, row) in rows.iter().enumerate() {
        assert_eq!(row, &vec![c as f64 * 0.25, want[2 * 7 + c]], "column {c}");
    }
    let com = tmp.path("com.csv");
    let o = cpu_product(
        &["--kind", "com", "--line", "0,0,4,6"],
        &com.display().to_string(),
        &files,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&com).unwrap();
    assert!(
        text.starts_with("distance_nm,value_row,value_col\n"),
        "{text}"
    );
    let lonely = tmp.path("lonely.csv");
    let o = cpu_product(&bf, &lonely.display().to_string(), &files);
    assert!(
        !o.status.success() && stderr(&o).contains("--line"),
        "{}",
        stderr(&o)
    );
    let o = cpu_product(
        &[&bf[..], &["--line", "0,0,1,1"]].concat(),
        &tmp.path("x.npy").display().to_string(),
        &files,
    );
    assert!(
        !o.status.success() && stderr(&o).contains("NAME.csv"),
        "{}",
        stderr(&o)
    );
    assert!(!lonely.exists());
}

#[test]
fn unknown_backend_is_refused() {
    let tmp = TempDir::new("backend");
    let out = tmp.path("x.npy").display().to_string();
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let mut args = vec![
        "product",
        "--kind",
        "sum-dp",
        "--backend",
        "nope",
        "--out",
        &out,
    ];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    assert!(!o.status.success(), "--backend nope succeeded");
    assert!(
        stderr(&o).to_lowercase().contains("unknown backend"),
        "stderr: {}",
        stderr(&o)
    );
    assert!(!Path::new(&out).exists(), "an output was written");
}

#[test]
fn bad_input_is_one_line_naming_the_file() {
    let bad = fixtures()
        .join("bad/text_file/notes.h5")
        .display()
        .to_string();
    let o = stem4d(&["info", &bad]);
    assert!(!o.status.success(), "info on a text file succeeded");
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("stem4d: error: "), "stderr: {err}");
    assert!(lines[0].contains("notes.h5"), "stderr: {err}");
}

/// A missing scan shape is an error that names `--scan-shape` (C-SCAN).
#[test]
fn missing_scan_shape_asks_for_it() {
    let files = [data("arina_u8_master.h5"), data("arina_u8_data_000001.h5")];
    let o = stem4d(&["info", &files[0], &files[1]]);
    assert!(
        !o.status.success(),
        "arina_u8 without --scan-shape succeeded"
    );
    assert!(
        stderr(&o).contains("--scan-shape"),
        "stderr: {}",
        stderr(&o)
    );
    // and with it, it opens
    let o = stem4d(&["info", "--scan-shape", "4,6", &files[0], &files[1]]);
    assert!(
        o.status.success(),
        "arina_u8 with --scan-shape 4,6 failed: {}",
        stderr(&o)
    );
}

#[test]
fn out_onto_an_input_is_refused() {
    let tmp = TempDir::new("overwrite");
    let files = tmp.copy_fixtures(&ARINA_U16);
    for target in [&files[0], &files[1]] {
        let before = std::fs::read(target).unwrap();
        let mut args = vec!["product", "--kind", "sum-dp", "--out", target.as_str()];
        args.extend(files.iter().map(String::as_str));
        let o = stem4d(&args);
        assert!(!o.status.success(), "--out {target} (an input) succeeded");
        assert!(stderr(&o).contains("overwrite"), "stderr: {}", stderr(&o));
        assert_eq!(
            std::fs::read(target).unwrap(),
            before,
            "{target} was modified"
        );
    }
}

/// An `--out` that is another name of a file the run reads (a hard link to an Arina data
/// file, or the `--mask` file itself) is refused by the file's identity and changes nothing;
/// an output replaced over an existing file never changes another name of that file.
#[cfg(unix)]
#[test]
fn out_onto_another_name_of_a_read_file_is_refused() {
    let tmp = TempDir::new("identity");
    let files = tmp.copy_fixtures(&ARINA_U16);
    let link = tmp.path("result.npy");
    std::fs::hard_link(&files[1], &link).unwrap();
    let before = std::fs::read(&files[1]).unwrap();
    let link_s = link.display().to_string();
    let o = cpu_product(&["--kind", "sum-dp"], &link_s, &files);
    assert!(
        !o.status.success(),
        "--out a hard link to an input succeeded"
    );
    assert!(
        stderr(&o).contains("a file this run reads"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(&files[1]).unwrap(),
        before,
        "the data file changed"
    );
    // The mask is read too: --out onto it is refused and leaves it as it was.
    let mask = tmp.path("mask.npy");
    std::fs::copy(fixtures().join("masks/arina_u16_bool.npy"), &mask).unwrap();
    let mask_before = std::fs::read(&mask).unwrap();
    let mask_s = mask.display().to_string();
    let o = cpu_product(&["--kind", "mask", "--mask", &mask_s], &mask_s, &files);
    assert!(!o.status.success(), "--out onto the mask succeeded");
    assert_eq!(
        std::fs::read(&mask).unwrap(),
        mask_before,
        "the mask changed"
    );
    // An existing output is replaced as a new file: another name of the old one keeps it.
    let out = tmp.path("total.npy");
    std::fs::write(&out, b"old").unwrap();
    let keep = tmp.path("kept.npy");
    std::fs::hard_link(&out, &keep).unwrap();
    let out_s = out.display().to_string();
    let o = cpu_product(&["--kind", "total"], &out_s, &files);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&keep).unwrap(), b"old");
    assert!(std::fs::read(&out).unwrap().starts_with(b"\x93NUMPY"));
    let leftovers: Vec<_> = std::fs::read_dir(&tmp.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "a temporary file was left");
}

/// `stem4d bench viewer` times every interaction of the page's session natively (lavapipe in
/// CI: the figures are labelled as a software adapter's). `--crop` reaches every command.
#[test]
fn bench_viewer_times_every_interaction() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let o = stem4d(&[
        "bench",
        "viewer",
        "--synthetic",
        "6,5,16,16",
        "--crop",
        "1,6,0,4",
        "--reps",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("[5, 4, 16, 16]"), "{out}");
    for line in [
        "load",
        "drag BF disk",
        "drag ADF annulus",
        "drag DF disk",
        "DPC rotation",
        "iDPC rotation",
        "pattern at cursor",
        "mean pattern over a scan ROI",
    ] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }
    assert!(
        out.contains("software adapter") || !out.contains("llvmpipe"),
        "{out}"
    );
}

/// `stem4d bench gpu` says how the masked sums meet; `--no-subgroups` times the kernels of a
/// browser without subgroups (lavapipe has subgroups, so the two runs differ).
#[test]
fn bench_gpu_names_the_masked_sum_kernel_it_times() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "gpu", "--synthetic", "6,5,16,16", "--reps", "2"];
        args.extend_from_slice(extra);
        let o = stem4d(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let on = run(&[]);
    assert!(on.contains("masked sums meet through subgroups"), "{on}");
    assert!(on.contains("kernel BF"), "{on}");
    let off = run(&["--no-subgroups"]);
    assert!(
        off.contains("masked sums meet in workgroup memory"),
        "{off}"
    );
    assert!(off.contains("kernel BF"), "{off}");
}

/// `stem4d bench gpu --decode-only` times the GPU decode of a compressed acquisition and
/// nothing else.
#[test]
fn bench_gpu_decode_only_times_only_the_decode() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let o = stem4d(&[
        "bench",
        "gpu",
        "--synthetic",
        "6,5,16,16",
        "--compressed",
        "--reps",
        "2",
        "--decode-only",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let kernels: Vec<&str> = out.lines().filter(|l| l.contains("kernel ")).collect();
    assert!(
        kernels.iter().any(|l| l.contains("GPU bslz4 decode")),
        "{out}"
    );
    assert!(
        kernels
            .iter()
            .all(|l| l.contains("decode") || l.contains("LZ4") || l.contains("unshuffle")),
        "{out}"
    );
}

/// `stem4d bench kernel-stats` lists the driver's figures for every kernel, or says which
/// Vulkan extension no device has (lavapipe lacks it).
#[test]
fn kernel_stats_lists_every_kernel_or_names_the_missing_extension() {
    let o = stem4d(&["bench", "kernel-stats"]);
    let out = String::from_utf8_lossy(&o.stdout);
    if o.status.success() {
        for k in stem4d::kernels::ALL {
            assert!(
                out.lines()
                    .any(|l| l.split_whitespace().nth(1) == Some(k.entry)),
                "{} missing: {out}",
                k.entry
            );
        }
    } else {
        let err = stderr(&o);
        assert!(
            err.contains("VK_KHR_pipeline_executable_properties") || err.contains("Vulkan"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `stem4d bench export-chunks` writes the stored chunks as they are, in frame order, with
/// their sizes: each one decodes to its synthetic frame.
#[test]
fn export_chunks_writes_each_stored_chunk_in_frame_order() {
    use stem4d::contract::Shape4;
    use stem4d::formats::synthetic;
    let dir = TempDir::new("export");
    let prefix = dir.path("syn");
    let o = stem4d(&[
        "bench",
        "export-chunks",
        "--synthetic",
        "3,4,20,17",
        "--compressed",
        "--out",
        prefix.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sizes = std::fs::read(dir.path("syn.sizes")).unwrap();
    let data = std::fs::read(dir.path("syn.chunks")).unwrap();
    assert_eq!(sizes.len(), 12 * 8);
    let shape = Shape4 {
        scan: [3, 4],
        det: [20, 17],
    };
    let mut at = 0;
    for (f, s) in sizes.chunks_exact(8).enumerate() {
        let n = u64::from_le_bytes(s.try_into().unwrap()) as usize;
        let mut frame = vec![0u8; 20 * 17 * 2];
        stem4d::decode::bslz4::decode_into(&data[at..at + n], 2, &mut frame).unwrap();
        let want: Vec<u8> = (0..20 * 17)
            .flat_map(|k| synthetic::sample(shape, f, k).to_le_bytes())
            .collect();
        assert_eq!(frame, want, "frame {f}");
        at += n;
    }
    assert_eq!(at, data.len());
}

/// `--kernels DIR` builds DIR/NAME.wgsl in place of the kernel NAME and says so: the embedded
/// text copied there passes parity, a CoM kernel that adds one to every total fails it (so
/// the replacement is what ran), and a file that names no kernel, does not compile or needs
/// more workgroup memory than the device has is refused by name.
#[test]
fn kernel_overrides_replace_kernels_by_name() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let body = stem4d::kernels::COM_MOMENTS.body;
    let parity = |dir: &TempDir| {
        let d = dir.0.display().to_string();
        stem4d(&["parity", "--synthetic", "6,5,16,16", "--kernels", &d])
    };
    let bench = |dir: &TempDir| {
        let d = dir.0.display().to_string();
        stem4d(&[
            "bench",
            "gpu",
            "--synthetic",
            "6,5,16,16",
            "--reps",
            "2",
            "--kernels",
            &d,
        ])
    };
    let same = TempDir::new("kernels-same");
    std::fs::write(same.path("com_moments.wgsl"), body).unwrap();
    let o = parity(&same);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}{out}", stderr(&o));
    assert!(
        out.contains("kernels replaced from") && out.contains("com_moments"),
        "{out}"
    );

    let off = TempDir::new("kernels-off");
    let call = "add_moment(o, st);";
    assert!(
        body.contains(call),
        "the CoM kernel adds its totals with `{call}`"
    );
    std::fs::write(
        off.path("com_moments.wgsl"),
        body.replace(call, "add_moment(o, add64(st, vec2<u32>(1u, 0u)));"),
    )
    .unwrap();
    let o = parity(&off);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        !o.status.success(),
        "a wrong CoM kernel passed parity:\n{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("com ") && l.ends_with("FAIL")),
        "{out}"
    );

    let unknown = TempDir::new("kernels-unknown");
    std::fs::write(unknown.path("nonsense.wgsl"), body).unwrap();
    let o = parity(&unknown);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("nonsense.wgsl") && err.contains("no kernel is named nonsense"),
        "{err}"
    );

    let broken = TempDir::new("kernels-broken");
    // Naming a storage barrier sends it the SPIR-V way first on Vulkan, which gives way to
    // the WGSL build and its error.
    std::fs::write(
        broken.path("com_moments.wgsl"),
        "// storageBarrier();\nfn broken(",
    )
    .unwrap();
    let o = bench(&broken);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("replaced kernels: com_moments"), "{err}");

    // More workgroup memory than the device allows: refused before it is built, and parity
    // fails rather than falling back to a CPU-only table.
    let big = TempDir::new("kernels-big");
    let entry = "fn com_moments(\n    @builtin(workgroup_id) wg: vec3<u32>,\n    @builtin(local_invocation_index) lid: u32,\n) {\n";
    assert!(body.contains(entry), "the CoM entry point's signature");
    std::fs::write(
        big.path("com_moments.wgsl"),
        format!(
            "var<workgroup> padding: array<u32, 65536>;\n{}",
            body.replace(entry, &format!("{entry}    padding[lid] = 0u;\n"))
        ),
    )
    .unwrap();
    let o = parity(&big);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("replaced kernel com_moments")
            && err.contains("270336 bytes of workgroup memory"),
        "{err}"
    );
}

/// `stem4d parity --mask-bad-pixels` compares the GPU with the CPU reference as the page
/// computes them: the hot pixels found in arina_u16's mean pattern (65534 at a few pixels)
/// are left out on both sides, so every product passes; without the zeroing on the GPU side
/// the totals differed by the hot pixels' counts. The EMD float32 fixture masked has a weak
/// DPC (about 2e-3 px against CoMs of 5 px): its iDPC holds 1e-5·max|φ| only with the scan
/// mean taken off before the CoM is rounded to float32 (C-IDPC-GPU, C-BAD-FOUND).
#[test]
fn parity_with_bad_pixels_masked_passes_on_real_hot_pixels() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let arina: Vec<String> = ARINA_U16.iter().map(|f| data(f)).collect();
    for files in [arina, vec![data("emd_f32.h5")]] {
        let mut args: Vec<&str> = vec!["parity"];
        args.extend(files.iter().map(String::as_str));
        args.push("--mask-bad-pixels");
        let o = stem4d(&args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!out.contains("FAIL"), "{out}");
        assert!(out.matches("PASS").count() >= 14, "{out}");
    }
}

/// A product parameter is named by its flag on the command line and by its field on the page
/// (`stem4d.product`): the shared layer names the field, the CLI says it its way.
#[test]
fn missing_and_bad_parameters_are_named_by_flag() {
    let tmp = TempDir::new("params");
    let out = tmp.path("x.npy").display().to_string();
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    for (extra, want) in [
        (
            vec!["--kind", "bf", "--radius", "3"],
            "product 'bf' needs --center R,C",
        ),
        (
            vec!["--kind", "pattern"],
            "product 'pattern' needs --at R,C",
        ),
        (
            vec!["--kind", "pattern", "--at", "9,0"],
            "--at 9,0 is outside the 5x7 scan",
        ),
        (
            vec!["--kind", "total", "--bin", "40"],
            "--bin 40 is larger than the 13x11 detector",
        ),
        // Values the vocabulary's flag parsers refuse: the CLI's own errors, as before the
        // flags were derived from the shared type (status 1, the flag and the value said).
        (
            vec!["--kind", "nope"],
            "unknown product kind 'nope' (one of: sum-dp",
        ),
        (
            vec!["--kind", "bf", "--center", "4", "--radius", "3"],
            "--center expects 2 comma-separated numbers, got '4'",
        ),
        (
            vec!["--kind", "rect", "--rect", "1,2,3"],
            "--rect expects 4 comma-separated numbers, got '1,2,3'",
        ),
        (
            vec!["--kind", "sum-dp", "--scan-roi", "0,2,x,4"],
            "--scan-roi expects 4 comma-separated numbers, got '0,2,x,4'",
        ),
        (
            vec!["--kind", "pattern", "--at", "1;2"],
            "--at expects 2 comma-separated numbers, got '1;2'",
        ),
    ] {
        let o = cpu_product(&extra, &out, &files);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("stem4d: error: "),
            "{extra:?}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
    }
    let p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Bf);
    let shape = stem4d::contract::Shape4 {
        scan: [5, 7],
        det: [13, 11],
    };
    let e = p
        .validate(shape, Correction::default())
        .unwrap_err()
        .to_string();
    assert_eq!(e, "product 'bf' needs 'center'");
}

/// A scan shape whose product matches the frame count only modulo 2^64 is refused, from the
/// command line and from an EMPAD file name, with the true product, and no output is written
/// (C-SCAN). 5 x 3689348814741910328 = 2^64 + 24 (a 24-frame stack); 2 x 9223372036854775811
/// = 2^64 + 6 (a 6-frame EMPAD file).
#[test]
fn scan_shapes_that_wrap_around_are_refused() {
    let tmp = TempDir::new("wrap");
    let out = tmp.path("bf.npy");
    let out_s = out.display().to_string();
    let stack = data("lz4_stack_u16.h5");
    for args in [
        vec![
            "info",
            stack.as_str(),
            "--scan-shape",
            "5,3689348814741910328",
        ],
        vec![
            "product",
            "--kind",
            "bf",
            "--center",
            "5,4",
            "--radius",
            "2",
            "--out",
            &out_s,
            stack.as_str(),
            "--scan-shape",
            "5,3689348814741910328",
        ],
    ] {
        let o = stem4d(&args);
        assert!(!o.status.success(), "{args:?} passed");
        let e = stderr(&o);
        assert!(
            e.contains("wrong scan shape 5x3689348814741910328")
                && e.contains("18446744073709551640 positions but the data hold 24 frames"),
            "{e}"
        );
    }
    assert!(!out.exists(), "an output was written");
    let raw = tmp.path("empad_hot_x9223372036854775811_y2.raw");
    std::fs::copy(fixtures().join("data").join("empad_hot_x3_y2.raw"), &raw).unwrap();
    let o = stem4d(&["info", raw.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("18446744073709551622 positions but the data hold 6 frames"),
        "{}",
        stderr(&o)
    );
}

/// A side input must be a regular file of a size a mask can have: `/dev/zero` and a FIFO are
/// refused at once by name (they never end, or block), as is a file too large for a mask of
/// this detector.
#[cfg(unix)]
#[test]
fn side_inputs_are_bounded_regular_files() {
    let tmp = TempDir::new("side");
    let out = tmp.path("m.npy").display().to_string();
    let fifo = tmp.path("mask.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let big = tmp.path("big.npy");
    std::fs::write(&big, vec![0u8; 2 << 20]).unwrap();
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let mut masks = vec![("/dev/zero".to_string(), "must be a regular file")];
    if made.is_ok_and(|s| s.success()) {
        masks.push((fifo.display().to_string(), "must be a regular file"));
    }
    masks.push((
        big.display().to_string(),
        "more than a mask of this detector can",
    ));
    for (mask, want) in masks {
        // Refused before it is read (a FIFO would block, /dev/zero never end).
        let o = cpu_product(&["--kind", "mask", "--mask", &mask], &out, &files);
        assert!(!o.status.success(), "--mask {mask} succeeded");
        assert!(
            stderr(&o).contains(want) && stderr(&o).contains(&mask),
            "{}",
            stderr(&o)
        );
    }
}

/// Synthetic shapes whose sizes pass what the engine indexes are refused up front, by their
/// true sizes (the product of 5 x 3689348814741910328 wraps to 24 in 64 bits).
#[test]
fn synthetic_shapes_past_the_engine_are_refused() {
    for (dims, want) in [
        (
            "5,3689348814741910328,4,4",
            "18446744073709551640 positions",
        ),
        (
            "4294967296,4294967297,16,16",
            "18446744078004518912 positions",
        ),
        ("6,5,4294967296,4294967296", "18446744073709551616 pixels"),
    ] {
        let o = stem4d(&["info", "--synthetic", dims]);
        assert!(!o.status.success(), "--synthetic {dims} passed");
        assert!(stderr(&o).contains(want), "{dims}: {}", stderr(&o));
    }
}

/// Options that would be silently ignored are errors: `--mask` with a product that takes no
/// mask, `--dataset` on an EMPAD raw file (which holds no data sets).
#[test]
fn options_that_would_be_ignored_are_refused() {
    let tmp = TempDir::new("ignored");
    let out = tmp.path("x.npy").display().to_string();
    let mask = fixtures()
        .join("masks/arina_u16_bool.npy")
        .display()
        .to_string();
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let o = cpu_product(&["--kind", "total", "--mask", &mask], &out, &files);
    assert!(!o.status.success(), "--mask with --kind total passed");
    assert!(
        stderr(&o).contains("--mask is used only by --kind mask (it was given with --kind total)"),
        "{}",
        stderr(&o)
    );
    let raw = data("empad_hot_x3_y2.raw");
    let o = stem4d(&["info", raw.as_str(), "--dataset", "/data"]);
    assert!(!o.status.success(), "--dataset on an EMPAD file passed");
    assert!(
        stderr(&o).contains("empad_hot_x3_y2.raw: an EMPAD raw file holds no data sets"),
        "{}",
        stderr(&o)
    );
    // A second input that nothing reads: an Arina set with an unrelated stack, a stack with
    // another stack, an EMPAD raw with a second raw.
    let stack = data("lz4_stack_u16.h5");
    let other = data("gzip_stack_u16.h5");
    let mut arina_and_stack = files.clone();
    arina_and_stack.push(stack.clone());
    for (inputs, extra, shape) in [
        (arina_and_stack, "lz4_stack_u16.h5", None),
        (vec![stack.clone(), other], "gzip_stack_u16.h5", Some("6,4")),
        (
            vec![raw.clone(), data("scan_x4_y3.raw")],
            "scan_x4_y3.raw",
            None,
        ),
    ] {
        let mut args = vec!["info"];
        args.extend(inputs.iter().map(String::as_str));
        if let Some(shape) = shape {
            args.extend(["--scan-shape", shape]);
        }
        let o = stem4d(&args);
        assert_eq!(o.status.code(), Some(1), "{inputs:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("{extra}: given with "))
                && stderr(&o).contains("the acquisition does not use it"),
            "{inputs:?}: {}",
            stderr(&o)
        );
    }
}

/// `--memory-budget`: products within 256 KiB are the bytes of those without a budget, from
/// the compressed resident the engine takes and from the streaming plan picked with
/// `--memory-plan` (the Arina fixture's GPU decode windows alone are larger than the
/// budget); the plan taken is said on standard error, `info` lists the plans, `bench gpu`
/// times the compressed resident's kernels and the streaming pass, and a budget that is no
/// number of bytes, or a plan that is none, is refused.
#[test]
fn a_memory_budget_streams_the_same_products() {
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped: no STEM4D_REQUIRE_GPU");
        return;
    }
    let dir = TempDir::new("budget");
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    for kind in [
        &["--kind", "bf", "--center", "6,5", "--radius", "3"][..],
        &["--kind", "idpc", "--rotation", "12"],
        &["--kind", "mean-dp", "--mask-bad-pixels"],
        &["--kind", "binned", "--bin", "2"],
    ] {
        let run = |budget: &[&str], out: &str| {
            let out = dir.path(out).display().to_string();
            let mut args = vec!["product", "--backend", "wgpu", "--out", &out];
            args.extend_from_slice(kind);
            args.extend_from_slice(budget);
            args.extend(files.iter().map(String::as_str));
            let o = stem4d(&args);
            assert!(o.status.success(), "{kind:?} {budget:?}: {}", stderr(&o));
            (
                std::fs::read(&out).expect("the product is written"),
                stderr(&o),
            )
        };
        let (plain, _) = run(&[], "plain.npy");
        let (budgeted, said) = run(&["--memory-budget", "256KiB"], "budget.npy");
        assert!(
            plain == budgeted,
            "{kind:?}: the same bytes within the budget"
        );
        assert!(said.contains("memory plan: compressed"), "{said}");
        assert!(said.contains("compressed resident: "), "{said}");
        let streaming = ["--memory-budget", "256KiB", "--memory-plan", "streaming"];
        let (streamed, said) = run(&streaming, "streamed.npy");
        assert!(plain == streamed, "{kind:?}: the same bytes streamed");
        assert!(said.contains("memory plan: streaming"), "{said}");
    }
    let mut args = vec!["info", "--json", "--memory-budget", "262144"];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("info --json prints JSON");
    assert_eq!(v["memory_plan"]["kind"], "compressed", "{v}");
    let kinds: Vec<&str> = v["memory_plans"]
        .as_array()
        .expect("the plans are listed")
        .iter()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    assert_eq!(
        &kinds[..4],
        ["resident", "compressed", "streaming", "cpu"],
        "{v}"
    );
    for (plan, says) in [("compressed", "compressed: "), ("streaming", "stream pass")] {
        let mut args = vec!["bench", "gpu", "--reps", "2", "--memory-budget", "262144"];
        args.extend(["--memory-plan", plan]);
        args.extend(files.iter().map(String::as_str));
        let o = stem4d(&args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains(says),
            "{plan}: {out}{}",
            stderr(&o)
        );
    }
    let o = stem4d(&["info", "--memory-plan", "sideways", &files[0]]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not a memory plan"),
        "{}",
        stderr(&o)
    );
    for bad in ["lots", "0", "12TB"] {
        let o = stem4d(&["info", "--memory-budget", bad, &files[0]]);
        assert!(!o.status.success(), "--memory-budget {bad} accepted");
        assert!(stderr(&o).contains("--memory-budget"), "{}", stderr(&o));
    }
}

/// An Arina master named alone opens with its data files and companion found in its own
/// folder (as libhdf5 resolves external links): the same acquisition and products as with
/// every file listed. A master whose data file is not there names the missing file.
#[test]
fn a_master_alone_finds_its_files_in_its_folder() {
    let dir = TempDir::new("master_alone");
    let all = dir.copy_fixtures(&ARINA_U16);
    let master = all[0].clone();
    let info = |files: &[&str]| {
        let mut args = vec!["info", "--json"];
        args.extend_from_slice(files);
        let o = stem4d(&args);
        assert!(o.status.success(), "{files:?}: {}", stderr(&o));
        serde_json::from_slice::<Value>(&o.stdout).expect("info --json prints JSON")
    };
    let alone = info(&[&master]);
    let listed = info(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(alone["shape"], listed["shape"], "{alone}");
    assert_eq!(alone["source_sha256"], listed["source_sha256"], "{alone}");
    assert_eq!(
        alone["scan_shape_source"], listed["scan_shape_source"],
        "the companion's scan shape: {alone}"
    );
    let product = |files: &[&str], out: &str| {
        let out = dir.path(out).display().to_string();
        let mut args = vec![
            "product",
            "--kind",
            "total",
            "--backend",
            "cpu",
            "--out",
            &out,
        ];
        args.extend_from_slice(files);
        let o = stem4d(&args);
        assert!(o.status.success(), "{files:?}: {}", stderr(&o));
        std::fs::read(&out).expect("written")
    };
    assert!(
        product(&[&master], "alone.npy")
            == product(
                &all.iter().map(String::as_str).collect::<Vec<_>>(),
                "listed.npy"
            )
    );
    // Nothing found beside the master may be overwritten either.
    let o = stem4d(&[
        "product",
        "--kind",
        "total",
        "--backend",
        "cpu",
        "--out",
        &dir.path("arina_u16_data_000002.h5").display().to_string(),
        &master,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("would overwrite"), "{}", stderr(&o));
    let lone = TempDir::new("master_lone");
    lone.copy_fixtures(&["arina_u16_master.h5"]);
    let o = stem4d(&[
        "info",
        &lone.path("arina_u16_master.h5").display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("linked file 'arina_u16_data_000001.h5'"),
        "{}",
        stderr(&o)
    );
}

/// `--backend vulkan` runs the wgpu engine on Vulkan (lavapipe here) and gives the
/// reference's integer product byte for byte; `--backend metal` and `dx12` on a machine
/// without them say so, naming where they run and the adapters this machine has; `parity`
/// lists every adapter it finds, checks the APIs it is given and writes its rows as JSON.
#[test]
fn named_graphics_apis_run_or_say_why_not() {
    let tmp = TempDir::new("apis");
    let files: Vec<String> = ARINA_U16.iter().map(|n| data(n)).collect();
    let product = |backend: &str, out: &str| {
        let mut args = vec![
            "product",
            "--kind",
            "bf",
            "--center",
            "6,5",
            "--radius",
            "3",
            "--backend",
            backend,
            "--out",
            out,
        ];
        args.extend(files.iter().map(String::as_str));
        stem4d(&args)
    };
    let cpu = tmp.path("cpu.npy").display().to_string();
    assert!(product("cpu", &cpu).status.success());
    let absent: &[&str] = match std::env::consts::OS {
        "macos" => &["dx12"],
        "windows" => &["metal"],
        _ => &["metal", "dx12"],
    };
    for api in absent {
        let out = tmp.path(&format!("{api}.npy")).display().to_string();
        let o = product(api, &out);
        let said = stderr(&o);
        assert!(!o.status.success(), "--backend {api} succeeded");
        assert!(
            said.contains(&format!("backend '{api}' has no adapter on this machine"))
                && said.contains("adapters here:"),
            "{said}"
        );
        assert!(!Path::new(&out).exists(), "an output was written");
    }
    if std::env::var_os("STEM4D_REQUIRE_GPU").is_none() {
        eprintln!("skipped the Vulkan half: no STEM4D_REQUIRE_GPU");
        return;
    }
    let vulkan = tmp.path("vulkan.npy").display().to_string();
    let o = product("vulkan", &vulkan);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&vulkan).unwrap(),
        std::fs::read(&cpu).unwrap()
    );
    let json = tmp.path("parity.json").display().to_string();
    let mut args = vec!["parity", "--backends", "cpu,vulkan", "--json", &json];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.starts_with("adapters found: "), "{out}");
    assert!(
        out.lines().nth(1).is_some_and(|l| l.contains("Vulkan")),
        "{out}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    let on = |backend: &'static str| rows.iter().filter(move |r| r["backend"] == backend);
    assert!(on("cpu").count() >= 16 && on("vulkan").count() == on("cpu").count());
    for r in on("vulkan") {
        assert_eq!(r["pass"], true, "{r}");
        assert!(
            r["adapter"].as_str().is_some_and(|a| a.contains("Vulkan")),
            "{r}"
        );
    }
    let bf = on("vulkan").find(|r| r["product"] == "bf").unwrap();
    assert_eq!(bf["bound"], "identical", "{bf}");
    assert_eq!(bf["max_abs_error"], 0.0, "{bf}");
    assert!(!doc["adapters"].as_array().unwrap().is_empty());
    // Asked for, CUDA and a missing API are refused, never a CPU-only pass.
    for (backends, says) in [("cpu,cuda", "not built"), ("metal", "has no adapter")] {
        if backends == "metal" && std::env::consts::OS == "macos" {
            continue;
        }
        let mut args = vec!["parity", "--backends", backends];
        args.extend(files.iter().map(String::as_str));
        let o = stem4d(&args);
        assert!(
            !o.status.success() && stderr(&o).contains(says),
            "{}",
            stderr(&o)
        );
    }
}

/// `stem4d prepare` writes a prepared acquisition that opens like any file and gives the same
/// products (the CPU reference: byte for byte); it refuses another name ending and an output
/// that is one of its inputs, and leaves no partial file behind.
#[test]
fn prepare_writes_an_acquisition_that_gives_the_same_products() {
    let dir = TempDir::new("prepare");
    let files = dir.copy_fixtures(&ARINA_U16);
    let out = dir.path("arina.stem4d").display().to_string();
    let mut args = vec!["prepare", "--out", out.as_str()];
    args.extend(files.iter().map(String::as_str));
    let o = stem4d(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let bf = ["--kind", "bf", "--center", "31.5,31.5", "--radius", "9.5"];
    let (a, b) = (dir.path("a.npy"), dir.path("b.npy"));
    let o = cpu_product(&bf, &a.display().to_string(), &files);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cpu_product(&bf, &b.display().to_string(), std::slice::from_ref(&out));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let o = stem4d(&["info", "--json", out.as_str()]);
    let info: Value = serde_json::from_slice(&o.stdout).expect("info json");
    assert_eq!(info["format"], "prepared");
    assert!(
        info["scan_shape_source"]
            .as_str()
            .is_some_and(|s| s.contains("arina_u16_master.h5")),
        "{info}"
    );
    // Another ending, and an input as the output: refused, the input untouched.
    let wrong = dir.path("arina.h5").display().to_string();
    let o = stem4d(&["prepare", "--out", wrong.as_str(), files[0].as_str()]);
    assert!(
        !o.status.success() && stderr(&o).contains(".stem4d"),
        "{}",
        stderr(&o)
    );
    let before = std::fs::read(&out).unwrap();
    let o = stem4d(&["prepare", "--out", out.as_str(), out.as_str()]);
    assert!(
        !o.status.success() && stderr(&o).contains("overwrite"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
    let partial = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial"));
    assert!(!partial, "a partial file was left");
}

/// `stem4d compare`: the files of three acquisitions of one detector (the Arina fixture, its
/// prepared copy, a prepared crop of it) give each its own product, byte for byte what
/// `stem4d product` writes for it, listed in compare.json; on the GPU too where there is
/// one. A fourth of another detector shape is refused by name and nothing is written; a
/// file of no acquisition is refused by name.
#[test]
fn compare_writes_each_acquisitions_product_with_one_detector() {
    let tmp = TempDir::new("compare");
    let mut files = tmp.copy_fixtures(&ARINA_U16);
    files.extend(tmp.copy_fixtures(&["arina_u16.stem4d", "arina_u16_crop.stem4d"]));
    let detector = ["--kind", "bf", "--center", "6.3,4.6", "--radius", "2.7"];
    let want = |names: &[&str], tag: &str| -> Vec<u8> {
        let out = tmp.path(&format!("want_{tag}.npy")).display().to_string();
        let paths: Vec<String> = names
            .iter()
            .map(|n| tmp.path(n).display().to_string())
            .collect();
        let o = cpu_product(&detector, &out, &paths);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read(&out).unwrap()
    };
    let whole = want(&ARINA_U16, "whole");
    let crop = want(&["arina_u16_crop.stem4d"], "crop");
    for backend in ["cpu", "wgpu"] {
        if backend == "wgpu" && engine().is_none() {
            continue;
        }
        let dir = tmp.path(&format!("grid_{backend}"));
        let dir_s = dir.display().to_string();
        let mut args = vec!["compare", "--backend", backend, "--out-dir", &dir_s];
        args.extend(detector);
        args.extend(files.iter().map(String::as_str));
        let o = stem4d(&args);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
        let table = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            table.contains("arina_u16_crop.stem4d") && table.contains("3x5"),
            "{table}"
        );
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap())
                .unwrap();
        let listed: Vec<(String, String)> = index["acquisitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["primary"].as_str().unwrap().into(),
                    a["output"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(listed.len(), 3, "{index}");
        for (primary, output) in &listed {
            let got = std::fs::read(dir.join(output)).unwrap();
            let expected = if primary == "arina_u16_crop.stem4d" {
                &crop
            } else {
                &whole
            };
            assert!(
                got == *expected,
                "{backend}: {primary} ({output}) differs from stem4d product"
            );
        }
        assert_eq!(index["params"]["radius"], 2.7);
    }
    // Another detector shape: refused by name before anything is written.
    let other = tmp.copy_fixtures(&["emd_u16_contig.h5"]);
    let dir = tmp.path("refused").display().to_string();
    let mut args = vec!["compare", "--out-dir", &dir];
    args.extend(detector);
    args.extend(files.iter().chain(&other).map(String::as_str));
    let o = stem4d(&args);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("emd_u16_contig.h5: its detector is 8×9 pixels and that of arina_u16_master.h5 is 13×11"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new(&dir).exists(), "an output was written");
    // A file of no acquisition among several.
    let notes = tmp.path("notes.txt");
    std::fs::write(&notes, "beam current 50 pA").unwrap();
    let notes = notes.display().to_string();
    let mut args = vec!["compare", "--out-dir", &dir];
    args.extend(detector);
    args.extend(files.iter().map(String::as_str));
    args.push(&notes);
    let o = stem4d(&args);
    assert!(
        !o.status.success() && stderr(&o).contains("notes.txt: no acquisition"),
        "{}",
        stderr(&o)
    );
}
