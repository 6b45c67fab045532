//! The viewing session the page drives, on lavapipe: open → resident → derived totals and
//! CoM; view updates recompute only the planes whose inputs changed; hover readouts are the
//! exact products; products re-upload on a new bin; float32 data falls back to the CPU.
//!
//! One module per thing proved: `opening` (what an open does, refuses and releases),
//! `readouts` (hover readouts equal the CPU reference), `updates` (what an update redraws
//! and times), `dpc_polar` (DPC magnitude and direction) and `view_states` (what a view
//! state may ask for).

#[path = "../common/mod.rs"]
mod common;

mod budget;
mod compare;
mod dpc_polar;
mod opening;
mod readouts;
mod updates;
mod view_states;

use common::*;
use serde_json::json;
use stem4d::cpu;
use stem4d::formats::Acquisition;
use stem4d::frames::Correction;
use stem4d::gpu::Engine;
use stem4d::products::ProductParams;
use stem4d::session::{OpenRequest, Session, ViewState};

fn fixture_acq(name: &str) -> Acquisition {
    open_fixture(&fixture_named(name))
}

fn open(engine: &Engine, name: &str, req: OpenRequest) -> Session {
    let acq = fixture_acq(name);
    let mut stages = Vec::new();
    let s = pollster::block_on(Session::open(engine, acq, &req, 0.0, &mut |st, d, n| {
        stages.push((st.to_string(), d, n))
    }))
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    if s.profile.products_on == "gpu" {
        let last = stages
            .iter()
            .rev()
            .find(|s| s.0.contains("upload"))
            .unwrap();
        assert_eq!(last.1, last.2, "{name}: upload progress ends at the total");
    }
    s
}

/// Fixture `name` opened unbinned, and the acquisition the CPU reference reads.
fn open_unbinned(engine: &Engine, name: &str) -> (Session, Acquisition) {
    let req = OpenRequest {
        bin: 1,
        ..Default::default()
    };
    (open(engine, name, req), fixture_acq(name))
}

fn state(v: serde_json::Value) -> ViewState {
    serde_json::from_value(v).unwrap()
}

fn bf_state(center: [f64; 2], radius: f64, cursor: [usize; 2]) -> ViewState {
    state(json!({
        "image": {"kind": "bf", "center": center, "radius": radius, "cursor": cursor},
        "pattern": {"source": "cursor", "display": {"log": true}}
    }))
}

fn cpu_at(acq: &Acquisition, p: &ProductParams, k: usize) -> f64 {
    cpu::compute(acq, p, Correction::default())
        .unwrap()
        .data
        .to_f64()[k]
}
