//! Merlin MIB (`src/formats/mib.rs`) on the real files RosettaSciIO tests with
//! (`../shared/data/mib-rosettasciio/`, zipped; GPL-3.0, see its README): every processed
//! file opens with the detector shape, pixel type and scan shape its headers give and its
//! frames decoded big-endian as the test reads them itself; raw (R64) files decode to
//! frames that agree with the processed recordings of the same detector settings; the hot
//! pixel RosettaSciIO's file names sits where they say. Then broken files, each refused
//! naming the file and the problem.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use stem4d::contract::Dtype;
use stem4d::frames::FrameReader;

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

/// Every member of the zip file `zip` written into `dir` (through the central directory,
/// deflated or stored), their paths returned.
fn unzip(zip: &Path, dir: &Path) -> Vec<PathBuf> {
    let b = std::fs::read(zip).expect("the zip reads");
    let end = (0..b.len() - 21)
        .rev()
        .find(|&i| b[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .expect("an end of central directory");
    let (count, mut at) = (u16_at(&b, end + 10), u32_at(&b, end + 16));
    let mut out = Vec::new();
    for _ in 0..count {
        assert_eq!(
            b[at..at + 4],
            [0x50, 0x4b, 0x01, 0x02],
            "a central directory entry"
        );
        let method = u16_at(&b, at + 10);
        let packed = u32_at(&b, at + 20);
        let (name_len, extra, comment) = (
            u16_at(&b, at + 28),
            u16_at(&b, at + 30),
            u16_at(&b, at + 32),
        );
        let local = u32_at(&b, at + 42);
        let name = String::from_utf8_lossy(&b[at + 46..at + 46 + name_len]).to_string();
        at += 46 + name_len + extra + comment;
        let data = local + 30 + u16_at(&b, local + 26) + u16_at(&b, local + 28);
        let bytes = &b[data..data + packed];
        let plain = match method {
            0 => bytes.to_vec(),
            8 => miniz_oxide::inflate::decompress_to_vec(bytes).expect("the member inflates"),
            m => panic!("{name}: zip method {m}"),
        };
        let path = dir.join(Path::new(&name).file_name().expect("a member name"));
        std::fs::write(&path, plain).expect("the member is written");
        out.push(path);
    }
    out
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stem4d-mib-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a temp dir");
    d
}

/// The header fields of the first frame of `mib`.
fn fields(bytes: &[u8]) -> Vec<String> {
    let text: String = bytes[..384].iter().map(|&b| b as char).collect();
    text.split(',').map(|s| s.trim().to_string()).collect()
}

/// A raw (R64) recording's last frame, decoded, against the processed recording the same
/// detector made with the same settings (`…RAW.mib` and `….mib`): different exposures, so
/// not equal, but the same dead and noisy pixels, rows and columns, chip edges and beam:
/// at least 99.5 % of the pixels agree, and fewer do for the frame flipped either way.
fn raw_agrees_with_processed(name: &str, raw: &stem4d::formats::Acquisition, dir: &Path) {
    let processed = dir.join(name.replace("RAW.mib", ".mib"));
    let other = open_paths(
        &[processed.clone(), processed.with_extension("hdr")],
        Some([1, raw.shape.frames()]),
        None,
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        (raw.shape.det, raw.dtype),
        (other.shape.det, other.dtype),
        "{name}"
    );
    let last = raw.shape.frames() - 1;
    let a = FrameReader::new(raw).read_raw(last, last + 1).unwrap();
    let b = FrameReader::new(&other).read_raw(last, last + 1).unwrap();
    assert!(a.iter().all(|&v| v <= 1), "{name}: 1-bit counters above 1");
    let [rows, cols] = raw.shape.det;
    let agree = |flip: &dyn Fn(usize, usize) -> usize| {
        let same = (0..rows * cols)
            .filter(|&k| a[flip(k / cols, k % cols)] == b[k])
            .count();
        same as f64 / (rows * cols) as f64
    };
    let as_is = agree(&|i, j| i * cols + j);
    let up_down = agree(&|i, j| (rows - 1 - i) * cols + j);
    let left_right = agree(&|i, j| i * cols + cols - 1 - j);
    assert!(
        as_is >= 0.995 && as_is > up_down && as_is > left_right,
        "{name}: {as_is} of the pixels agree with {} ({up_down} flipped up-down, {left_right} left-right)",
        processed.display()
    );
}

#[test]
fn real_merlin_files_open_as_their_headers_say() {
    let shared = root().join("../shared/data/mib-rosettasciio");
    let dir = temp_dir("real");
    let mut files = Vec::new();
    for zip in [
        "Merlin_Single_Quad",
        "Merlin_navigation4x2_ROI",
        "Merlin_navigation4x2_signalNx256_ROI",
    ] {
        files.extend(unzip(&shared.join(format!("{zip}.zip")), &dir));
    }
    let mibs: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "mib"))
        .collect();
    assert_eq!(mibs.len(), 24, "{files:?}");
    let (mut opened, mut raw) = (0, 0);
    for mib in mibs {
        let name = mib.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(mib).unwrap();
        let f = fields(&bytes);
        let hdr = mib.with_extension("hdr");
        let frames = {
            let head: usize = f[2].parse().unwrap();
            let pixels = f[4].parse::<usize>().unwrap() * f[5].parse::<usize>().unwrap();
            let per = head
                + match f[6].as_str() {
                    "U08" => pixels,
                    "U16" => 2 * pixels,
                    "U32" => 4 * pixels,
                    // These raw recordings are all of 1-bit counters.
                    _ => pixels / 8,
                };
            bytes.len() / per
        };
        // Frames each their own trigger record no lines: one scan row of them.
        let got = open_paths(&[mib.clone(), hdr], Some([1, frames]), None);
        if f[6] == "R64" {
            let acq = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            raw_agrees_with_processed(&name, &acq, &dir);
            raw += 1;
            continue;
        }
        let acq = got.unwrap_or_else(|e| panic!("{name}: {e}"));
        let (rows, cols): (usize, usize) = (f[5].parse().unwrap(), f[4].parse().unwrap());
        assert_eq!(acq.shape.det, [rows, cols], "{name}");
        let (dtype, size) = match f[6].as_str() {
            "U08" => (Dtype::U8, 1),
            "U16" => (Dtype::U16, 2),
            _ => (Dtype::U32, 4),
        };
        assert_eq!(acq.dtype, dtype, "{name}");
        assert_eq!(acq.shape.frames(), frames, "{name}");
        // The last frame, decoded here from its big-endian bytes.
        let head: usize = f[2].parse().unwrap();
        let per = head + rows * cols * size;
        let at = (frames - 1) * per + head;
        let want: Vec<u8> = bytes[at..at + rows * cols * size]
            .chunks_exact(size)
            .flat_map(|s| s.iter().rev().copied().collect::<Vec<u8>>())
            .collect();
        let read = FrameReader::new(&acq).read_raw(frames - 1, frames).unwrap();
        assert!(read == want, "{name}: the last frame");
        opened += 1;
    }
    assert_eq!((opened, raw), (20, 4));
    // Lines recorded in the .hdr: 2 lines of 4; the hot pixel at x = 52, y = 39.
    let hot = dir.join("002_merlin_test_roi_sig256x128_nav4x2_hot_pixel_52x_39y.mib");
    let acq = open_paths(&[hot.clone(), hot.with_extension("hdr")], None, None).unwrap();
    assert_eq!(acq.shape.scan, [2, 4]);
    let p = stem4d::cpu::compute(
        &acq,
        &stem4d::products::ProductParams::new(stem4d::products::ProductKind::MaxDp),
        Default::default(),
    )
    .unwrap();
    let v = p.data.to_f64();
    let top = (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
    assert_eq!((top / 256, top % 256), (39, 52));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broken_mib_files_are_refused_by_name() {
    let dir = temp_dir("bad");
    let header = |head: usize, ty: &str, w: usize, h: usize| {
        let mut b =
            format!("MQ1,000001,{head:05},01,{w:04},{h:04},{ty},   1x1,01,2024").into_bytes();
        b.resize(head, 0);
        b
    };
    let frame = |ty: &str, w: usize, h: usize, size: usize| {
        let mut b = header(384, ty, w, h);
        b.extend(std::iter::repeat_n(1u8, w * h * size));
        b
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.mib", Vec::new(), "empty"),
        (
            "notmib.mib",
            b"HDF\x89 something else entirely".to_vec(),
            "not a Merlin MIB file",
        ),
        (
            "short.mib",
            [frame("U16", 8, 6, 2), frame("U16", 8, 6, 2)[..200].to_vec()].concat(),
            "not a whole number",
        ),
        (
            "mixed.mib",
            [frame("U16", 8, 6, 2), frame("U08", 8, 12, 1)].concat(),
            "differs from the first",
        ),
        // A raw frame header that does not end with its counter depth (the year is 2024).
        ("raw.mib", frame("R64", 8, 6, 8), "not one of 1, 6, 12"),
    ];
    for (name, bytes, says) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = open_paths(&[p], Some([1, 2]), None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with(name) && e.contains(says), "{name}: {e}");
    }
    // A .hdr alone names the frames it wants.
    let hdr = dir.join("scan.hdr");
    std::fs::write(&hdr, "HDR,\t\nFrames in Acquisition (Number):\t4\nEnd\t\n").unwrap();
    let e = open_paths(&[hdr], None, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("scan.mib") && e.contains("open it together"),
        "{e}"
    );
    // A .hdr whose lines disagree with the frames: the scan shape is refused by name.
    let mib = dir.join("lines.mib");
    std::fs::write(
        &mib,
        [
            frame("U08", 4, 4, 1),
            frame("U08", 4, 4, 1),
            frame("U08", 4, 4, 1),
        ]
        .concat(),
    )
    .unwrap();
    let hdr = dir.join("lines.hdr");
    std::fs::write(
        &hdr,
        "HDR,\t\nFrames in Acquisition (Number):\t4\nFrames per Trigger (Number):\t2\nEnd\t\n",
    )
    .unwrap();
    let e = open_paths(&[mib, hdr], None, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("lines.mib") && e.contains("2x2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
