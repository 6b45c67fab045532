//! GPU timestamps at the start and end of each dispatch and canvas draw, where the adapter
//! has `timestamp-query`: what the GPU itself spends on an update, told apart from the
//! submit, the completion report and (in the page) Chromium's round trips, on the same
//! kernels natively and in the browser. Off unless a benchmark turns it on; while it is on,
//! each dispatch gets a compute pass of its own (timestamps are per pass in WebGPU), so the
//! span of a timed update is not an untimed one's, but each kernel's own time is.

use std::sync::Mutex;

use crate::error::{Error, Result};

/// Timestamp pairs one update may take; passes beyond them go untimed (and are counted).
const PAIRS: u32 = 256;

pub struct PassClock {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    /// Period of a tick in nanoseconds (1 on the web, where timestamps are nanoseconds).
    period_ns: f64,
    taken: Mutex<Taken>,
}

#[derive(Default)]
struct Taken {
    labels: Vec<&'static str>,
    untimed: u32,
}

/// The timed passes of an update, in recording order.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PassTimes {
    /// (kernel name or "display", milliseconds from its start to its end on the GPU).
    pub passes: Vec<(&'static str, f64)>,
    /// Their sum: the GPU's own work.
    pub busy_ms: f64,
    /// From the first pass's start to the last pass's end.
    pub span_ms: f64,
    /// Passes recorded once every pair was taken.
    pub untimed: u32,
}

impl PassClock {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> PassClock {
        PassClock {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("pass clock"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * PAIRS,
            }),
            resolved: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("pass clock"),
                size: 16 * PAIRS as u64,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            period_ns: queue.get_timestamp_period() as f64,
            taken: Mutex::default(),
        }
    }

    /// The next free pair for a pass of `label`: (start index, end index), or None when all
    /// are taken.
    fn take(&self, label: &'static str) -> Option<(u32, u32)> {
        let mut t = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let k = t.labels.len() as u32;
        if k >= PAIRS {
            t.untimed += 1;
            return None;
        }
        t.labels.push(label);
        Some((2 * k, 2 * k + 1))
    }

    pub fn compute_writes(
        &self,
        label: &'static str,
    ) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        self.take(label)
            .map(|(a, b)| wgpu::ComputePassTimestampWrites {
                query_set: &self.set,
                beginning_of_pass_write_index: Some(a),
                end_of_pass_write_index: Some(b),
            })
    }

    pub fn render_writes(
        &self,
        label: &'static str,
    ) -> Option<wgpu::RenderPassTimestampWrites<'_>> {
        self.take(label)
            .map(|(a, b)| wgpu::RenderPassTimestampWrites {
                query_set: &self.set,
                beginning_of_pass_write_index: Some(a),
                end_of_pass_write_index: Some(b),
            })
    }

    /// Record the resolve of the pairs taken since the last call into `enc` and start over;
    /// [`PassClock::times`] reads them once `enc` has run.
    pub(crate) fn resolve(&self, enc: &mut wgpu::CommandEncoder) -> (Vec<&'static str>, u32) {
        let t = std::mem::take(&mut *self.taken.lock().unwrap_or_else(|e| e.into_inner()));
        if !t.labels.is_empty() {
            enc.resolve_query_set(&self.set, 0..2 * t.labels.len() as u32, &self.resolved, 0);
        }
        (t.labels, t.untimed)
    }

    pub(crate) fn resolved(&self) -> &wgpu::Buffer {
        &self.resolved
    }

    /// The pass times from resolved ticks (`bytes`: start and end, u64 each, per label).
    pub(crate) fn times(
        &self,
        labels: Vec<&'static str>,
        untimed: u32,
        bytes: &[u8],
    ) -> Result<PassTimes> {
        pass_times(labels, untimed, bytes, self.period_ns)
    }
}

fn pass_times(
    labels: Vec<&'static str>,
    untimed: u32,
    bytes: &[u8],
    period_ns: f64,
) -> Result<PassTimes> {
    if bytes.len() < 16 * labels.len() {
        return Err(Error::Gpu("the pass timestamps came back short".into()));
    }
    let tick = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    };
    let ms = |ticks: u64| ticks as f64 * period_ns / 1e6;
    let mut passes = Vec::with_capacity(labels.len());
    let (mut first, mut last) = (u64::MAX, 0u64);
    for (k, label) in labels.into_iter().enumerate() {
        let (a, b) = (tick(2 * k), tick(2 * k + 1));
        first = first.min(a);
        last = last.max(b);
        // A pass whose end reads before its start (clocks of different queues or a
        // driver's reset) counts as nothing rather than as years.
        passes.push((label, ms(b.saturating_sub(a))));
    }
    Ok(PassTimes {
        busy_ms: passes.iter().map(|p| p.1).sum(),
        span_ms: if passes.is_empty() {
            0.0
        } else {
            ms(last.saturating_sub(first))
        },
        passes,
        untimed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|t| t.to_le_bytes()).collect()
    }

    #[test]
    fn pass_times_are_each_pass_own_and_the_whole_span() {
        let t = pass_times(
            vec!["a", "b"],
            3,
            &ticks(&[1_000, 3_000, 5_000, 5_500]),
            2.0,
        )
        .unwrap();
        assert_eq!(t.passes, vec![("a", 0.004), ("b", 0.001)]);
        assert!((t.busy_ms - 0.005).abs() < 1e-12);
        assert!((t.span_ms - 0.009).abs() < 1e-12);
        assert_eq!(t.untimed, 3);
    }

    #[test]
    fn an_end_before_its_start_counts_as_nothing_and_short_data_is_an_error() {
        let t = pass_times(vec!["a"], 0, &ticks(&[9, 4]), 1.0).unwrap();
        assert_eq!(t.passes, vec![("a", 0.0)]);
        assert!(pass_times(vec!["a", "b"], 0, &ticks(&[1, 2]), 1.0).is_err());
        let none = pass_times(Vec::new(), 0, &[], 1.0).unwrap();
        assert_eq!((none.busy_ms, none.span_ms), (0.0, 0.0));
    }
}
