//! Natively, GPU timestamps at the start and end of each batch of work an upload submits
//! (a prepared reopen's batch of copies and expansions, a GPU decode's window;
//! `TIMESTAMP_QUERY_INSIDE_ENCODERS`): how long the GPU worked on each batch and how long
//! it sat between them, beside the host's laps. They showed that a prepared reopen's
//! "staging slots" lap was not a wait for the GPU, busy 90–240 ms of a 1.0–1.3 s reopen
//! (decision 0052). Off where the device lacks the feature (the browser's WebGPU has no
//! timestamps inside encoders).

use super::Engine;
use crate::error::Result;

/// Batches one upload may time (two queries each, within wgpu's 4,096 a query set);
/// batches past them go untimed.
pub(crate) const MOST_BATCHES: usize = 2048;

/// What the GPU did with an upload's batches.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuBatchTimes {
    /// Batches timed.
    pub batches: u32,
    /// Their GPU time, each from its first command to its last, summed.
    pub busy_ms: f64,
    /// The gaps between one batch's end and the next one's start, summed.
    pub idle_ms: f64,
    /// The longest batch.
    pub longest_ms: f64,
}

/// The clock of one upload: a query pair per batch.
pub(crate) struct BatchClock {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    period_ns: f64,
    taken: u32,
    cap: u32,
}

impl BatchClock {
    /// A clock for up to `batches` batches; `None` unless a benchmark asked for it
    /// ([`Engine::time_upload_batches`], which the device must allow), or with nothing to
    /// time.
    pub(crate) fn new(engine: &Engine, batches: usize) -> Option<BatchClock> {
        let cap = batches.min(MOST_BATCHES) as u32;
        if cap == 0 || !engine.times_upload_batches() {
            return None;
        }
        Some(BatchClock {
            set: engine.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("upload batch clock"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * cap,
            }),
            resolved: engine.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("upload batch clock"),
                size: 16 * cap as u64,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            period_ns: engine.queue.get_timestamp_period() as f64,
            taken: 0,
            cap,
        })
    }

    /// Stamp the start of a batch at the head of `enc`: its index, or `None` once every
    /// pair is taken.
    fn start(&mut self, enc: &mut wgpu::CommandEncoder) -> Option<u32> {
        if self.taken >= self.cap {
            return None;
        }
        let k = self.taken;
        self.taken += 1;
        enc.write_timestamp(&self.set, 2 * k);
        Some(k)
    }

    /// Stamp the end of batch `k` at the tail of `enc`.
    fn end(&self, enc: &mut wgpu::CommandEncoder, k: u32) {
        enc.write_timestamp(&self.set, 2 * k + 1);
    }

    /// The batches' times, once every batch was submitted.
    pub(crate) async fn times(self, engine: &Engine) -> Result<GpuBatchTimes> {
        let n = self.taken;
        if n == 0 {
            return Ok(batch_times(&[], self.period_ns));
        }
        let mut enc = engine.device.create_command_encoder(&Default::default());
        enc.resolve_query_set(&self.set, 0..2 * n, &self.resolved, 0);
        engine.queue.submit([enc.finish()]);
        let bytes = engine.read_back(&self.resolved, 16 * n as u64).await?;
        let ticks: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        Ok(batch_times(&ticks, self.period_ns))
    }
}

/// What `record` writes into `enc`, between a start and an end stamp of `clock` where
/// there is one with pairs left.
pub(crate) fn stamped<R>(
    clock: Option<&mut BatchClock>,
    enc: &mut wgpu::CommandEncoder,
    record: impl FnOnce(&mut wgpu::CommandEncoder) -> R,
) -> R {
    let stamp = clock.and_then(|c| c.start(enc).map(|k| (c, k)));
    let out = record(enc);
    if let Some((c, k)) = stamp {
        c.end(enc, k);
    }
    out
}

/// The times of the batches whose (start, end) ticks `ticks` holds in submission order.
fn batch_times(ticks: &[u64], period_ns: f64) -> GpuBatchTimes {
    let ms = |t: u64| t as f64 * period_ns / 1e6;
    let pairs: Vec<(u64, u64)> = ticks.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let mut out = GpuBatchTimes {
        batches: pairs.len() as u32,
        busy_ms: 0.0,
        idle_ms: 0.0,
        longest_ms: 0.0,
    };
    for (i, &(a, z)) in pairs.iter().enumerate() {
        let busy = ms(z.saturating_sub(a));
        out.busy_ms += busy;
        out.longest_ms = out.longest_ms.max(busy);
        if let Some(&(_, before)) = i.checked_sub(1).and_then(|j| pairs.get(j)) {
            out.idle_ms += ms(a.saturating_sub(before));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_idle_come_from_the_pairs_in_order() {
        // Ticks of 2 ns: batches of 10, 30 and 5 ticks, gaps of 20 and 0.
        let t = batch_times(&[100, 110, 130, 160, 160, 165], 2.0);
        assert_eq!(t.batches, 3);
        assert!((t.busy_ms - 45.0 * 2e-6).abs() < 1e-12);
        assert!((t.idle_ms - 20.0 * 2e-6).abs() < 1e-12);
        assert!((t.longest_ms - 30.0 * 2e-6).abs() < 1e-12);
        // A clock that went backwards (another queue's reset) counts as no time.
        let b = batch_times(&[50, 40], 1.0);
        assert_eq!((b.batches, b.busy_ms), (1, 0.0));
        assert_eq!(batch_times(&[], 1.0).batches, 0);
    }
}
