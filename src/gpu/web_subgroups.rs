//! WebGPU's `subgroups` feature in the browser. wgpu 30's WebGPU backend has no name for it,
//! so it neither reports it nor asks for it, and the page summed masks without subgroups
//! (in workgroup memory, or atomically on NVIDIA) although Chromium offers them. Until wgpu
//! maps the feature, `GPUAdapter.requestDevice` is wrapped so that a device is asked for
//! with `subgroups` wherever its adapter has them, and the engine learns whether the device
//! it got has them; the subgroup kernels are then built after the `enable subgroups;`
//! directive WGSL requires and naga 30 does not parse ([`SUBGROUP_DIRECTIVE`]).

use wasm_bindgen::prelude::*;

/// Put before a subgroup kernel's text in the browser only (naga rejects it natively).
/// The uniformity analysis of subgroup calls is off: `com_moments_packed_quad` passes
/// values within a quad, whose four invocations share their loops, inside loops that
/// differ between quads, which the analysis cannot see.
pub const SUBGROUP_DIRECTIVE: &str = "enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n";

#[wasm_bindgen(inline_js = r#"
let granted = false;
export function ask_for_subgroups() {
  const A = globalThis.GPUAdapter;
  if (!A || A.prototype.stem4dAsksForSubgroups) return;
  const request = A.prototype.requestDevice;
  A.prototype.requestDevice = function (desc) {
    const d = desc || {};
    if (!this.features.has('subgroups')) {
      granted = false;
      return request.call(this, d);
    }
    const features = Array.from(d.requiredFeatures || []);
    if (!features.includes('subgroups')) features.push('subgroups');
    return request.call(this, { ...d, requiredFeatures: features }).then(
      (device) => {
        granted = device.features.has('subgroups');
        return device;
      },
      () => {
        granted = false;
        return request.call(this, d);
      },
    );
  };
  A.prototype.stem4dAsksForSubgroups = true;
}
export function subgroups_granted() {
  return granted;
}
"#)]
extern "C" {
    /// Wrap `GPUAdapter.prototype.requestDevice` (once per JS realm).
    fn ask_for_subgroups();
    /// Whether the last device asked for through the wrapper has `subgroups`.
    fn subgroups_granted() -> bool;
}

/// Call before the engine asks for its device.
pub fn ask() {
    ask_for_subgroups();
}

/// Whether the device the engine just got has `subgroups`.
pub fn granted() -> bool {
    subgroups_granted()
}
