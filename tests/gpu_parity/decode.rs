//! Chunks decoded for the GPU (`src/kernels/decode.rs`): bitshuffle+LZ4 and LZ4 decoded on
//! the GPU equal the CPU
//! decoder's samples, corrupt chunks are refused by name, and chunks handed to a chunk
//! decoder (the browser's Workers) make the same resident.

use crate::common::*;
use stem4d::cpu;
use stem4d::products::gpu as products;

/// Bitshuffle+LZ4 and LZ4 decoded on the GPU (compressed bytes uploaded) equal the CPU
/// decoder, sample for sample, with and without bad-pixel masking, unbinned and binned
/// (partial edge blocks), whole and split across buffers (C-DECODE-GPU, C-BAD, C-BIN; a bin
/// whose sums pass u32 is refused on both: C-BIN-COMPOSE).
#[test]
fn gpu_decode_equals_the_cpu_decoder() {
    use stem4d::frames::{Correction, FrameReader, Samples};
    use stem4d::upload::gpu_decode as decode;
    let Some(engine) = engine() else { return };
    let m = manifest();
    let mut checked = 0;
    for fx in m["fixtures"].as_array().unwrap() {
        let acq = open_fixture(fx);
        if !decode::supported(&acq, Correction::default()) {
            continue;
        }
        let n = acq.shape.frames();
        for (mask_bad_pixels, bin) in [(false, 1), (true, 1), (true, 2), (false, 3)] {
            let corr = Correction {
                mask_bad_pixels,
                bin,
            };
            let Ok(block) = FrameReader::new(&acq).block(0, n, corr) else {
                // The contract refuses this bin here (a sum past u32): the GPU must too.
                let err = pollster::block_on(engine.upload(&acq, corr)).err();
                assert!(
                    err.is_some_and(|e| e.to_string().contains("exceeds uint32")),
                    "{}",
                    fx["name"]
                );
                continue;
            };
            let Samples::Int(want) = block.samples else {
                panic!("integer samples");
            };
            let mut limits = engine.adapter.limits;
            let whole = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
            // Dectris's 8 KiB blocks all take the parsed path when their tables fit.
            if fx["filters"].to_string().contains("bitshuffle") {
                assert_eq!(whole.gpu_inflated_in_place, 0, "{}", fx["name"]);
            }
            // One tile per buffer: windows of whole chunks then cross tiles and buffers.
            limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
            let split = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
            // Both through the GPU decoder, not the CPU path (which builds no block tables).
            for res in [&whole, &split] {
                assert!(
                    res.upload_times
                        .0
                        .iter()
                        .any(|(step, _)| *step == "block tables"),
                    "{}: GPU decode",
                    fx["name"]
                );
            }
            for res in [&whole, &split] {
                let got = pollster::block_on(products::frames(&engine, res, 0, n)).unwrap();
                if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
                    let det = res.plan.shape.det_len();
                    panic!(
                        "{} masked={mask_bad_pixels} bin={bin}: GPU decode differs at frame {}, pixel {}: {} vs {}",
                        fx["name"],
                        i / det,
                        i % det,
                        got[i],
                        want[i]
                    );
                }
                assert_eq!(got.len(), want.len());
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 8,
        "only {checked} bitshuffle fixtures decoded on the GPU"
    );
}

/// Corrupt bitshuffle/LZ4 chunks give the file's name and the problem, never a wrong image
/// (C-DECODE-GPU).
#[test]
fn gpu_decode_refuses_corrupt_chunks_by_name() {
    let Some(engine) = engine() else { return };
    corrupt_bslz4_refused(|case, acq| {
        assert!(
            stem4d::upload::gpu_decode::supported(acq, Default::default()),
            "{case}"
        );
        pollster::block_on(engine.upload(acq, Default::default())).map(drop)
    });
}

/// The compressed synthetic acquisition (bitshuffle+LZ4 chunks in memory) decodes on the GPU
/// to the same samples the generator gives, and its products equal the CPU reference
/// (C-SYNTH).
#[test]
fn compressed_synthetic_decodes_on_the_gpu_to_the_generated_samples() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    // Blocks inflated in workgroup memory (≤ 8 KiB) and in place (16 KiB, and a 9.4 KiB
    // partial block), with a raw tail of n % 8 elements.
    for (dims, block) in [([2, 3, 130, 101], 4096), ([2, 3, 130, 101], 8192)] {
        let acq = synthetic::open_compressed_blocks(dims, block).unwrap();
        assert!(stem4d::upload::gpu_decode::supported(
            &acq,
            Default::default()
        ));
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let n = acq.shape.frames();
        let got = pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap();
        let det = acq.shape.det_len();
        for (i, v) in got.iter().enumerate() {
            let want = synthetic::sample(acq.shape, i / det, i % det) as u32;
            assert_eq!(*v, want, "{dims:?} blocks of {block}: sample {i}");
        }
    }
    let acq = synthetic::open_compressed([5, 7, 33, 29]).unwrap();
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Adf);
    (p.center, p.inner, p.outer) = (Some([16.0, 14.5]), Some(3.0), Some(11.0));
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(
        gpu,
        cpu::compute(&acq, &p, stem4d::frames::Correction::default()).unwrap()
    );
    // The uint8 synthetic (`--synthetic-dtype u8`), on an odd shape whose frames are not
    // whole 8 KiB blocks: its samples on the GPU, and an ADF equal to the CPU's.
    let dims = [3, 5, 37, 41];
    let acq = synthetic::open_compressed_as(dims, stem4d::contract::Dtype::U8).unwrap();
    assert_eq!(acq.dtype, stem4d::contract::Dtype::U8);
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let n = acq.shape.frames();
    let got = pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap();
    let det = acq.shape.det_len();
    let mut bright = 0;
    for (i, v) in got.iter().enumerate() {
        let want = synthetic::sample_u8(acq.shape, i / det, i % det) as u32;
        assert_eq!(*v, want, "u8 {dims:?}: sample {i}");
        bright += (want > 200) as usize;
    }
    assert!(bright > 0, "the u8 synthetic's disk is bright");
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(
        gpu,
        cpu::compute(&acq, &p, stem4d::frames::Correction::default()).unwrap()
    );
    assert!(synthetic::open_compressed_as(dims, stem4d::contract::Dtype::U32).is_err());
}

/// LZ4 (32004) chunks take the GPU decoder itself (not the CPU fallback) and match the CPU.
#[test]
fn lz4_chunks_take_the_gpu_decoder() {
    use stem4d::frames::{Correction, FrameReader, Samples};
    let Some(engine) = engine() else { return };
    let fx = fixture_named("lz4_stack_u16");
    let acq = open_fixture(&fx);
    let corr = Correction {
        mask_bad_pixels: true,
        bin: 2,
    };
    let plan = stem4d::upload::plan::ResidentPlan::new(
        acq.shape.binned(2),
        acq.dtype,
        true,
        engine.adapter.limits,
    )
    .unwrap();
    let res = pollster::block_on(stem4d::upload::gpu_decode::upload(
        &engine,
        &acq,
        None,
        corr,
        &plan,
        &mut |_, _| {},
    ))
    .unwrap()
    .expect("the GPU decoder takes these LZ4 chunks");
    let n = acq.shape.frames();
    let Samples::Int(want) = FrameReader::new(&acq).block(0, n, corr).unwrap().samples else {
        panic!("integer samples");
    };
    assert_eq!(
        pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap(),
        want
    );
}

/// A [`ChunkDecoder`] standing in for the browser's decode Workers: it decodes with the
/// crate's pipeline, last job first (answers must still come back in job order), counts the
/// chunks, and fails every job from `fail_from` on.
struct TestDecoder {
    jobs: std::sync::atomic::AtomicUsize,
    fail_from: usize,
}

impl stem4d::frames::ChunkDecoder for TestDecoder {
    fn decode<'a>(
        &'a self,
        jobs: Vec<stem4d::frames::ChunkJob>,
    ) -> stem4d::frames::LocalFuture<'a, Vec<Result<Vec<u8>, String>>> {
        use std::sync::atomic::Ordering;
        let mut out: Vec<_> = jobs
            .iter()
            .rev()
            .map(|j| {
                let seen = self.jobs.fetch_add(1, Ordering::Relaxed);
                if seen >= self.fail_from {
                    return Err("worker refused the chunk".to_string());
                }
                stem4d::decode::decode_chunk(&j.filters, j.filter_mask, &j.raw, j.expected, j.elem)
                    .map_err(|e| e.0)
            })
            .collect();
        out.reverse();
        Box::pin(std::future::ready(out))
    }

    fn workers(&self) -> usize {
        3
    }
}

/// Chunks the WGSL decoder does not take (deflate, shuffle) go to the engine's chunk decoder
/// (the browser's Worker pool) once each, ahead of the window that packs them; the resident
/// is the same bytes as when the reader decodes them itself, for whole, cropped and binned
/// uploads; a chunk the decoder refuses is named by file and chunk.
#[test]
fn chunks_decoded_by_a_chunk_decoder_make_the_same_resident() {
    use std::sync::atomic::AtomicUsize;
    use stem4d::contract::Region;
    use stem4d::frames::Correction;
    use stem4d::gpu::Engine;
    use stem4d::upload::plan::DeviceLimits;
    let (Some(plain), Some(mut offloading)) = (engine(), engine()) else {
        return;
    };
    offloading.set_chunk_decoder(Box::new(TestDecoder {
        jobs: AtomicUsize::new(0),
        fail_from: usize::MAX / 2,
    }));
    assert_eq!(offloading.chunk_decode_workers(), 3);
    for name in ["gzip_stack_u16", "gzip_noshuffle_u32_3d"] {
        let acq = open_fixture(&fixture_named(name));
        let chunks = match &acq.parts[0].kind {
            stem4d::formats::PartKind::Hdf5(ix) => ix.chunks.len(),
            _ => unreachable!(),
        };
        let [rows, cols] = acq.shape.scan;
        let crop = Region {
            r0: 1,
            r1: rows,
            c0: 0,
            c1: cols - 1,
        };
        for (what, acq, bin) in [
            ("whole", acq.clone(), 1),
            ("binned", acq.clone(), 2),
            ("cropped", acq.clone().crop_scan(crop).unwrap(), 1),
        ] {
            let corr = Correction {
                mask_bad_pixels: true,
                bin,
            };
            let limits = DeviceLimits {
                // Several windows and buffers even for a fixture: chunks span windows.
                max_buffer_size: 4096,
                max_storage_binding: 4096,
            };
            let resident = |e: &Engine| {
                let res = pollster::block_on(e.upload_with_limits(&acq, corr, limits)).unwrap();
                let mut bytes = Vec::new();
                for (b, seg) in res.buffers.iter().zip(&res.plan.segments) {
                    bytes.extend(pollster::block_on(e.read_back(b, seg.bytes)).unwrap());
                }
                (bytes, res.offloaded_chunks)
            };
            let (want, none) = resident(&plain);
            let (got, offloaded) = resident(&offloading);
            assert_eq!(none, 0);
            assert!(want == got, "{name} {what}: resident differs");
            // Each chunk once, though windows split chunks (a crop skips none here: its
            // rows still cross every chunk of the stack).
            assert!(
                offloaded > 0 && offloaded <= chunks,
                "{name} {what}: {offloaded} of {chunks} chunks offloaded"
            );
            if what == "whole" {
                assert_eq!(offloaded, chunks, "{name}: every chunk decoded once");
            }
        }
    }
    let mut failing = engine().unwrap();
    failing.set_chunk_decoder(Box::new(TestDecoder {
        jobs: AtomicUsize::new(0),
        fail_from: 2,
    }));
    let acq = open_fixture(&fixture_named("gzip_stack_u16"));
    let e = pollster::block_on(failing.upload(&acq, Correction::default()))
        .err()
        .expect("a refused chunk fails the upload")
        .to_string();
    assert!(
        e.contains(&acq.primary) && e.contains("chunk [") && e.contains("worker refused"),
        "{e}"
    );
}
