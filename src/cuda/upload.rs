//! How the CUDA resident's stored samples are made (C-BAD, C-BIN, C-BIN-COMPOSE): decoded on
//! the device where the GPU decoder takes the acquisition (`decode.rs`), else read and
//! decoded by the frame reader (`frames::FrameReader`) and copied block by block; the
//! file's bad pixels and the sentinel zeroed and the detector binned there
//! (`zero_masked_*`, `bin_frames_*`); float32 corrected and binned by the frame pipeline
//! and audited for the exact sums. Integer samples can be held compressed instead
//! (`packed.rs`, decision 0064): each window staged and encoded, never whole unpacked.

use cudarc::driver::{
    CudaSlice, CudaView, CudaViewMut, DeviceRepr, PushKernelArg, ValidAsZeroBits,
};

use super::packed::{Packed, PackedBuilder};

use super::engine::{driver_error, CudaEngine};
use super::resident::{alloc, over, read, Stored};
use crate::contract::Dtype;
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::{Correction, FrameReader, Samples};
use crate::upload::plan::FloatRange;

/// Bytes of stored samples read and copied at a time.
const BLOCK_BYTES: usize = 256 << 20;
/// The stored samples made, the audited range of float32 ones, and whether the frames
/// were decoded on the device.
pub(super) struct Made {
    pub stored: Stored,
    pub float: Option<FloatRange>,
    pub on_gpu: bool,
}

/// The stored samples of `acq` under `corr`: its own sample type, u32 once binned, float32
/// as its bits; integer samples compressed where `compressed` asks (float32 stays raw).
pub(super) fn stored_frames(
    engine: &CudaEngine,
    acq: &Acquisition,
    corr: Correction,
    compressed: bool,
    window_frames: usize,
) -> Result<Made> {
    let reader = FrameReader::new(acq);
    let zeroing = Zeroing::of(engine, acq, corr)?;
    if acq.dtype == Dtype::F32 {
        let (frames, range) = float_frames(engine, acq, &reader, corr)?;
        return Ok(Made {
            stored: Stored::F32(frames),
            float: Some(range),
            on_gpu: false,
        });
    }
    // One decision for the whole upload: the device decodes, or the CPU does.
    let on_gpu = super::decode::supported(acq, corr);
    let src = Source {
        acq,
        reader: &reader,
        zeroing: &zeroing,
        on_gpu,
        window_frames: window_frames.max(1),
    };
    let stored = match (acq.dtype, corr.bin, compressed) {
        (Dtype::U8, 1, false) => Stored::U8(raw_frames::<u8>(engine, &src, "u8")?),
        (Dtype::U16, 1, false) => Stored::U16(raw_frames::<u16>(engine, &src, "u16")?),
        (Dtype::U32, 1, false) => Stored::U32(raw_frames::<u32>(engine, &src, "u32")?),
        (Dtype::U8, b, false) => Stored::U32(binned_frames::<u8>(engine, &src, b, "u8")?),
        (Dtype::U16, b, false) => Stored::U32(binned_frames::<u16>(engine, &src, b, "u16")?),
        (_, b, false) => Stored::U32(binned_frames::<u32>(engine, &src, b, "u32")?),
        (Dtype::U8, 1, true) => Stored::Packed(packed_frames::<u8>(engine, &src, "u8")?),
        (Dtype::U16, 1, true) => Stored::Packed(packed_frames::<u16>(engine, &src, "u16")?),
        (_, 1, true) => Stored::Packed(packed_frames::<u32>(engine, &src, "u32")?),
        (Dtype::U8, b, true) => Stored::Packed(packed_binned::<u8>(engine, &src, b, "u8")?),
        (Dtype::U16, b, true) => Stored::Packed(packed_binned::<u16>(engine, &src, b, "u16")?),
        (_, b, true) => Stored::Packed(packed_binned::<u32>(engine, &src, b, "u32")?),
    };
    Ok(Made {
        stored,
        float: None,
        on_gpu,
    })
}

/// Where integer frames come from: the acquisition, its frame reader (the CPU path), what
/// the correction zeroes, whether the device decodes them, and the most frames a window
/// given to a compressed build or a bin holds.
struct Source<'a> {
    acq: &'a Acquisition,
    reader: &'a FrameReader<'a>,
    zeroing: &'a Zeroing,
    on_gpu: bool,
    window_frames: usize,
}

/// What the correction zeroes before any bin: the file's bad pixels (one byte per pixel, 1
/// bad) and the saturation sentinel, when bad-pixel masking is on.
struct Zeroing {
    bad: CudaSlice<u8>,
    sentinel: u32,
    use_sentinel: u32,
    on: bool,
}

impl Zeroing {
    fn of(engine: &CudaEngine, acq: &Acquisition, corr: Correction) -> Result<Zeroing> {
        let det_len = acq.shape.det_len();
        let bad: Vec<u8> = match (corr.mask_bad_pixels, &acq.pixel_mask) {
            (true, Some(m)) => m.iter().map(|&b| b as u8).collect(),
            _ => vec![0; det_len],
        };
        let (sentinel, use_sentinel) = match (corr.mask_bad_pixels, acq.dtype.sentinel()) {
            (true, Some(v)) => (v, 1),
            _ => (0, 0),
        };
        Ok(Zeroing {
            bad: engine
                .stream
                .clone_htod(&bad)
                .map_err(driver_error("bad-pixel mask"))?,
            sentinel,
            use_sentinel,
            on: corr.mask_bad_pixels,
        })
    }
}

/// Frames a block holds: about [`BLOCK_BYTES`] of `T` samples.
fn block_frames<T>(acq: &Acquisition) -> usize {
    let frame_bytes = acq.shape.det_len() * std::mem::size_of::<T>();
    (BLOCK_BYTES / frame_bytes.max(1)).clamp(1, acq.shape.frames().max(1))
}

/// `f(f0, f1, samples)` on the frames of `acq` in blocks ([`block_frames`]), `samples` the
/// files' little-endian samples of frames `[f0, f1)` as `T`; the upload's progress said
/// (and a cancel heard) after each.
fn for_each_block<T: bytemuck::Pod>(
    acq: &Acquisition,
    reader: &FrameReader,
    mut f: impl FnMut(usize, usize, Vec<T>) -> Result<()>,
) -> Result<()> {
    let (frames, step) = (acq.shape.frames(), block_frames::<T>(acq));
    let mut f0 = 0;
    while f0 < frames {
        let f1 = (f0 + step).min(frames);
        f(
            f0,
            f1,
            bytemuck::pod_collect_to_vec(&reader.read_raw(f0, f1)?),
        )?;
        crate::watch::step(crate::watch::UPLOAD, f1 as u64, frames as u64)?;
        f0 = f1;
    }
    Ok(())
}

/// Float32 frames corrected and binned by the frame pipeline (C-BIN-COMPOSE), copied block
/// by block as their bits, and the range of their values audited for the exact sums.
fn float_frames(
    engine: &CudaEngine,
    acq: &Acquisition,
    reader: &FrameReader,
    corr: Correction,
) -> Result<(CudaSlice<u32>, FloatRange)> {
    let shape = acq.shape.binned(corr.bin);
    let (frames, det_len) = (shape.frames(), shape.det_len());
    let mut out = alloc::<u32>(engine, frames * det_len, "the resident acquisition")?;
    let mut range = FloatRange::default();
    let step = block_frames::<f32>(acq);
    let mut f0 = 0;
    while f0 < frames {
        let f1 = (f0 + step).min(frames);
        let block = reader.block(f0, f1, corr)?;
        let Samples::Float(samples) = &block.samples else {
            return Err(Error::Gpu(
                "CUDA: float32 frames came back as integers".into(),
            ));
        };
        range.take(samples);
        let bits: Vec<u32> = samples.iter().map(|v| v.to_bits()).collect();
        engine
            .stream
            .memcpy_htod(&bits, &mut out.slice_mut(f0 * det_len..f1 * det_len))
            .map_err(driver_error("upload"))?;
        crate::watch::step(crate::watch::UPLOAD, f1 as u64, frames as u64)?;
        f0 = f1;
    }
    engine.synchronize()?;
    Ok((out, range))
}

/// The stored samples of every frame, unbinned: decoded on the device where the GPU decoder
/// takes the acquisition (`decode.rs`), else read and decoded on the CPU and copied block by
/// block; then the file's bad pixels and the sentinel zeroed where masking is on.
fn raw_frames<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
    engine: &CudaEngine,
    src: &Source,
    t: &str,
) -> Result<CudaSlice<T>> {
    let (acq, reader, zeroing) = (src.acq, src.reader, src.zeroing);
    let (frames, det_len) = (acq.shape.frames(), acq.shape.det_len());
    let mut out = alloc::<T>(engine, frames * det_len, "the resident acquisition")?;
    if src.on_gpu {
        super::decode::decode_frames::<T>(engine, acq, |f0, f1, decoded| {
            engine
                .stream
                .memcpy_dtod(
                    &decoded.slice(0..(f1 - f0) * det_len),
                    &mut out.slice_mut(f0 * det_len..f1 * det_len),
                )
                .map_err(driver_error("place the decoded frames"))
        })?;
    } else {
        for_each_block::<T>(acq, reader, |f0, f1, samples| {
            engine
                .stream
                .memcpy_htod(&samples, &mut out.slice_mut(f0 * det_len..f1 * det_len))
                .map_err(driver_error("upload"))
        })?;
    }
    zero_masked(engine, zeroing, t, &mut out.slice_mut(..), frames)?;
    engine.synchronize()?;
    Ok(out)
}

/// The file's bad pixels and the sentinel zeroed in the `n_frames` frames of `frames`,
/// where masking is on.
fn zero_masked<T: DeviceRepr>(
    engine: &CudaEngine,
    zeroing: &Zeroing,
    t: &str,
    frames: &mut CudaViewMut<T>,
    n_frames: usize,
) -> Result<()> {
    if !zeroing.on {
        return Ok(());
    }
    let (frame_len, n_frames) = ((frames.len() / n_frames.max(1)) as u64, n_frames as u64);
    let f = engine.function(&format!("zero_masked_{t}"))?;
    let mut l = engine.stream.launch_builder(&f);
    l.arg(frames)
        .arg(&frame_len)
        .arg(&n_frames)
        .arg(&zeroing.bad)
        .arg(&zeroing.sentinel)
        .arg(&zeroing.use_sentinel);
    // SAFETY: the arguments match zero_masked's signature (wgsl/zero_pixels.cu); `frames`
    // holds `n_frames` frames of `frame_len` samples.
    unsafe { l.launch(over(frame_len * n_frames)) }.map_err(driver_error("zero_masked"))?;
    Ok(())
}

/// `sink(f0, f1, window)` for the stored samples of every frame, in order, frames
/// `[f0, f1)` in `window`: decoded on the device, or read and decoded on the CPU and copied
/// block by block through one staging buffer; each cut into windows of at most
/// `src.window_frames` frames.
fn for_each_window<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
    engine: &CudaEngine,
    src: &Source,
    mut sink: impl FnMut(usize, usize, &CudaView<T>) -> Result<()>,
) -> Result<()> {
    let det_len = src.acq.shape.det_len();
    let mut cut = |f0: usize, f1: usize, frames: &CudaSlice<T>| -> Result<()> {
        let mut a = f0;
        while a < f1 {
            let b = (a + src.window_frames).min(f1);
            sink(a, b, &frames.slice((a - f0) * det_len..(b - f0) * det_len))?;
            a = b;
        }
        Ok(())
    };
    if src.on_gpu {
        return super::decode::decode_frames::<T>(engine, src.acq, cut);
    }
    let step = block_frames::<T>(src.acq);
    let mut staging = alloc::<T>(engine, step * det_len, "the upload staging")?;
    for_each_block::<T>(src.acq, src.reader, |f0, f1, samples| {
        engine
            .stream
            .memcpy_htod(&samples, &mut staging.slice_mut(0..samples.len()))
            .map_err(driver_error("upload"))?;
        cut(f0, f1, &staging)
    })
}

/// Windows given to a compressed build must come in order: a tile spans two of them.
fn in_order(expected: &mut usize, f0: usize, f1: usize) -> Result<()> {
    if f0 != *expected {
        return Err(Error::Gpu(format!(
            "CUDA: the compressed upload was given frames {f0}..{f1} after frame {expected}"
        )));
    }
    *expected = f1;
    Ok(())
}

/// Every frame, unbinned, compressed window by window (bad pixels zeroed first).
fn packed_frames<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
    engine: &CudaEngine,
    src: &Source,
    t: &str,
) -> Result<Packed> {
    let (frames, det_len) = (src.acq.shape.frames(), src.acq.shape.det_len());
    let mut packed = PackedBuilder::<T>::new(engine, frames, det_len)?;
    let mut next = 0;
    for_each_window::<T>(engine, src, |f0, f1, window| {
        in_order(&mut next, f0, f1)?;
        packed.stage(engine, f1 - f0, |staged| {
            engine
                .stream
                .memcpy_dtod(&window.slice(0..(f1 - f0) * det_len), staged)
                .map_err(driver_error("stage the frames"))?;
            zero_masked(engine, src.zeroing, t, staged, f1 - f0)
        })
    })?;
    packed.finish(engine)
}

/// Every frame binned `b × b` into u32 (bad pixels zeroed first), compressed window by
/// window; a sum past uint32 is refused by name.
fn packed_binned<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
    engine: &CudaEngine,
    src: &Source,
    b: usize,
    t: &str,
) -> Result<Packed> {
    let acq = src.acq;
    let (frames, out_len) = (acq.shape.frames(), acq.shape.binned(b).det_len());
    let mut packed = PackedBuilder::<u32>::new(engine, frames, out_len)?;
    let mut overflow = alloc::<u32>(engine, 1, "bin overflow flag")?;
    let bin = Bin {
        det: acq.shape.det.map(|d| d as u32),
        b: b as u32,
    };
    let mut next = 0;
    for_each_window::<T>(engine, src, |f0, f1, window| {
        in_order(&mut next, f0, f1)?;
        packed.stage(engine, f1 - f0, |staged| {
            bin.launch(
                engine,
                src.zeroing,
                t,
                window,
                (f1 - f0, staged),
                &mut overflow,
            )
        })
    })?;
    refuse_overflow(engine, acq, b, &overflow)?;
    packed.finish(engine)
}

/// A sum past uint32 in a bin, refused by name (as the CPU reference refuses it).
fn refuse_overflow(
    engine: &CudaEngine,
    acq: &Acquisition,
    b: usize,
    overflow: &CudaSlice<u32>,
) -> Result<()> {
    if read(engine, overflow)?.first().is_some_and(|&o| o != 0) {
        return Err(Error::format(
            &acq.primary,
            format!("a {b}x{b} binned sum exceeds uint32: use a smaller bin"),
        ));
    }
    Ok(())
}

/// The bin `bin_frames` applies: the detector it bins and the bin.
struct Bin {
    det: [u32; 2],
    b: u32,
}

impl Bin {
    /// Bin the first `n` frames of `src` into `out` (`(n, out)`), a sum past uint32 flagged
    /// in `overflow`.
    fn launch<T: DeviceRepr>(
        &self,
        engine: &CudaEngine,
        zeroing: &Zeroing,
        t: &str,
        src: &CudaView<T>,
        (n, out): (usize, &mut CudaViewMut<u32>),
        overflow: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let f = engine.function(&format!("bin_frames_{t}"))?;
        let (n_frames, samples) = (n as u64, out.len() as u64);
        let mut l = engine.stream.launch_builder(&f);
        l.arg(src)
            .arg(out)
            .arg(&n_frames)
            .arg(&self.det[0])
            .arg(&self.det[1])
            .arg(&self.b)
            .arg(&zeroing.bad)
            .arg(&zeroing.sentinel)
            .arg(&zeroing.use_sentinel)
            .arg(overflow);
        // SAFETY: the arguments match bin_frames's signature (wgsl/tile_frames.cu); `src`
        // holds `n` frames of the detector, `out` `n` binned frames.
        unsafe { l.launch(over(samples)) }.map_err(driver_error("bin_frames"))?;
        Ok(())
    }
}

/// Every frame binned `b × b` into u32 (bad pixels zeroed first), window by window; a sum
/// past uint32 is refused by name.
fn binned_frames<T: DeviceRepr + ValidAsZeroBits + bytemuck::Pod>(
    engine: &CudaEngine,
    src: &Source,
    b: usize,
    t: &str,
) -> Result<CudaSlice<u32>> {
    let acq = src.acq;
    let (frames, out_len) = (acq.shape.frames(), acq.shape.binned(b).det_len());
    let mut out = alloc::<u32>(engine, frames * out_len, "the binned resident acquisition")?;
    let mut overflow = alloc::<u32>(engine, 1, "bin overflow flag")?;
    let bin = Bin {
        det: acq.shape.det.map(|d| d as u32),
        b: b as u32,
    };
    for_each_window::<T>(engine, src, |f0, f1, window| {
        let mut dst = out.slice_mut(f0 * out_len..f1 * out_len);
        bin.launch(
            engine,
            src.zeroing,
            t,
            window,
            (f1 - f0, &mut dst),
            &mut overflow,
        )
    })?;
    refuse_overflow(engine, acq, b, &overflow)?;
    Ok(out)
}
