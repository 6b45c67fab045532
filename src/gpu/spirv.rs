//! SPIR-V of the kernels as naga writes it for Vulkan, with the one change that makes it say
//! what WGSL says: every WGSL barrier is workgroup-scoped (`storageBarrier` orders the
//! storage accesses of one workgroup's invocations, never across workgroups), but naga 30
//! gives a `storageBarrier` Device memory scope. On NVIDIA that is a device-wide fence each
//! time, and the LZ4 copies hold one between every two steps of a block: on the H200 it cost
//! 0.47 ms of a 2.5 ms window (decision 0009). So on Vulkan the engine builds a
//! kernel that has such a barrier from this SPIR-V, each control barrier's memory scope set
//! to its execution scope (Workgroup), passed through to the driver with a pipeline layout
//! made from the entry point's own bindings; every other kernel, and every other backend
//! (the browser's included), takes the WGSL text as it is. `stem4d bench kernel-stats`
//! shows the driver's figures for the same SPIR-V.

/// What the SPIR-V is written for.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Vulkan 1.3: SPIR-V 1.6 and workgroup memory zeroed by the driver (as wgpu then asks
    /// for); before it SPIR-V 1.3 with the zeroing written out.
    pub vulkan_1_3: bool,
    /// wgpu's runtime checks (index clamping, loop bounds, division checks) left out, to
    /// show what they cost; never for the engine.
    pub unchecked: bool,
    /// Storage-buffer indices left to the driver's robust buffer access (as wgpu does where
    /// it enabled `robustBufferAccess2`); clamped in the shader otherwise.
    pub robust_buffers: bool,
    /// Bindings numbered as wgpu's Vulkan backend numbers a layout's descriptors: each
    /// group's in order from 0 (wgpu-hal compacts them, and remaps the modules it writes
    /// itself, not the ones passed through); else as the WGSL numbers them.
    pub wgpu_bindings: bool,
}

impl Target {
    /// The engine's passthrough kernels: every check written into the shader, workgroup
    /// memory zeroed by the shader, SPIR-V any Vulkan 1.1 driver takes.
    pub const ENGINE: Target = Target {
        vulkan_1_3: false,
        unchecked: false,
        robust_buffers: false,
        wgpu_bindings: true,
    };
}

/// What a binding of the entry point holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingKind {
    Uniform,
    Storage { read_only: bool },
}

/// One entry point's SPIR-V and what building it needs.
pub struct EntrySpirv {
    pub words: Vec<u32>,
    /// The bindings the entry point uses: (group, binding, kind).
    pub bindings: Vec<(u32, u32, BindingKind)>,
    pub workgroup_size: [u32; 3],
    /// Control barriers whose memory scope was Device and is now Workgroup.
    pub scoped_barriers: usize,
}

/// The SPIR-V of entry point `entry` of the WGSL module `source` for `t`, its barriers
/// workgroup-scoped.
pub fn entry_spirv(source: &str, entry: &str, t: Target) -> Result<EntrySpirv, String> {
    let mut s = naga_spirv(source, entry, t)?;
    s.scoped_barriers = workgroup_scoped_barriers(&mut s.words);
    Ok(s)
}

/// The SPIR-V as naga writes it.
fn naga_spirv(source: &str, entry: &str, t: Target) -> Result<EntrySpirv, String> {
    use naga::back::spv;
    use naga::proc::BoundsCheckPolicy::{Restrict, Unchecked};
    let m = super::kernels::EntryModule::parse(source, entry)?;
    let mut options = spv::Options {
        lang_version: if t.vulkan_1_3 { (1, 6) } else { (1, 3) },
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: if t.unchecked { Unchecked } else { Restrict },
            buffer: if t.unchecked || t.robust_buffers {
                Unchecked
            } else {
                Restrict
            },
            image_load: Unchecked,
            binding_array: Unchecked,
        },
        zero_initialize_workgroup_memory: if t.vulkan_1_3 {
            spv::ZeroInitializeWorkgroupMemoryMode::Native
        } else {
            spv::ZeroInitializeWorkgroupMemoryMode::Polyfill
        },
        force_loop_bounding: !t.unchecked,
        emit_int_div_checks: !t.unchecked,
        ..Default::default()
    };
    let mut bindings = Vec::new();
    for var in m.used_globals() {
        let Some(b) = &var.binding else {
            continue;
        };
        let kind = match var.space {
            naga::AddressSpace::Uniform => BindingKind::Uniform,
            naga::AddressSpace::Storage { access } => BindingKind::Storage {
                read_only: !access.contains(naga::StorageAccess::STORE),
            },
            other => return Err(format!("binding in {other:?} space")),
        };
        bindings.push((b.group, b.binding, kind));
    }
    bindings.sort_by_key(|&(g, b, _)| (g, b));
    if t.wgpu_bindings {
        for (i, &(group, binding, _)) in bindings.iter().enumerate() {
            let rank = bindings[..i].iter().filter(|b| b.0 == group).count() as u32;
            options.binding_map.insert(
                naga::ResourceBinding { group, binding },
                spv::BindingInfo {
                    descriptor_set: group,
                    binding: rank,
                    binding_array_size: None,
                },
            );
        }
    }
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: entry.to_string(),
    };
    let words =
        spv::write_vec(&m.module, &m.info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
    Ok(EntrySpirv {
        words,
        bindings,
        workgroup_size: m.module.entry_points[m.index].workgroup_size,
        scoped_barriers: 0,
    })
}

const OP_CONSTANT: u32 = 43;
const OP_CONTROL_BARRIER: u32 = 224;
const SCOPE_DEVICE: u32 = 1;
const SCOPE_WORKGROUP: u32 = 2;

/// Gives every `OpControlBarrier` of Workgroup execution scope and Device memory scope the
/// Workgroup memory scope (its execution scope's constant); returns how many it changed.
/// The scopes are ids of integer constants, so they are looked up, never assumed.
pub fn workgroup_scoped_barriers(words: &mut [u32]) -> usize {
    // (offset, length) of each instruction after the 5-word header.
    let mut at = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let len = (words[i] >> 16) as usize;
        if len == 0 || i + len > words.len() {
            return 0;
        }
        at.push((i, len));
        i += len;
    }
    let constant = |id: u32| {
        at.iter().find_map(|&(i, len)| {
            (words[i] & 0xffff == OP_CONSTANT && len == 4 && words[i + 2] == id)
                .then(|| words[i + 3])
        })
    };
    let mut changed = Vec::new();
    for &(i, len) in &at {
        if words[i] & 0xffff != OP_CONTROL_BARRIER || len != 4 {
            continue;
        }
        let (exec, mem) = (words[i + 1], words[i + 2]);
        if constant(exec) == Some(SCOPE_WORKGROUP) && constant(mem) == Some(SCOPE_DEVICE) {
            changed.push(i);
        }
    }
    for &i in &changed {
        words[i + 2] = words[i + 1];
    }
    changed.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels;

    fn barrier_scopes(words: &[u32]) -> Vec<(Option<u32>, Option<u32>)> {
        let mut out = Vec::new();
        let mut consts = std::collections::HashMap::new();
        let mut i = 5;
        while i < words.len() {
            let len = (words[i] >> 16) as usize;
            match words[i] & 0xffff {
                OP_CONSTANT if len == 4 => {
                    consts.insert(words[i + 2], words[i + 3]);
                }
                OP_CONTROL_BARRIER => out.push((words[i + 1], words[i + 2])),
                _ => {}
            }
            i += len;
        }
        out.into_iter()
            .map(|(e, m)| (consts.get(&e).copied(), consts.get(&m).copied()))
            .collect()
    }

    /// The LZ4 copies' storage barriers come out of naga Device-scoped and leave here
    /// Workgroup-scoped, workgroup barriers untouched; the module differs from naga's in
    /// those operands only, and changing it again changes nothing.
    #[test]
    fn storage_barriers_become_workgroup_scoped_and_nothing_else_changes() {
        let k = kernels::BSLZ4;
        let naga = naga_spirv(&k.source(), k.entry, Target::ENGINE).unwrap();
        let s = entry_spirv(&k.source(), k.entry, Target::ENGINE).unwrap();
        assert_eq!(s.words[0], 0x0723_0203, "SPIR-V magic");
        assert!(s.scoped_barriers >= 3, "{} barriers", s.scoped_barriers);
        let before = barrier_scopes(&naga.words);
        let device = (Some(SCOPE_WORKGROUP), Some(SCOPE_DEVICE));
        let workgroup = (Some(SCOPE_WORKGROUP), Some(SCOPE_WORKGROUP));
        assert_eq!(
            before.iter().filter(|&&b| b == device).count(),
            s.scoped_barriers
        );
        assert!(before.contains(&workgroup), "workgroup barriers too");
        assert!(barrier_scopes(&s.words).iter().all(|&b| b == workgroup));
        assert_eq!(naga.words.len(), s.words.len());
        let changed = naga
            .words
            .iter()
            .zip(&s.words)
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(changed, s.scoped_barriers, "one operand a barrier");
        let mut again = s.words.clone();
        assert_eq!(workgroup_scoped_barriers(&mut again), 0);
        assert_eq!(again, s.words);
        assert_eq!(s.workgroup_size, [32, 1, 1]);
    }

    /// A kernel without storage barriers is left as naga wrote it, so the engine builds it
    /// from its WGSL.
    #[test]
    fn kernels_without_storage_barriers_are_unchanged() {
        for k in [
            kernels::BSLZ4_PARSE,
            kernels::BSLZ4_SERIAL,
            kernels::MASKED_SUM,
        ] {
            let s = entry_spirv(&k.source(), k.entry, Target::ENGINE).unwrap();
            assert_eq!(s.scoped_barriers, 0, "{}", k.name);
        }
    }

    /// Each entry point's layout is its own bindings, with read-only storage told apart: the
    /// LZ4 copies bind the parameters, the window, the block table, the scratch, the status
    /// and the sequence tables, and not the resident or the parse's output.
    #[test]
    fn layouts_follow_each_entry_points_own_bindings() {
        let k = kernels::BSLZ4;
        let s = entry_spirv(&k.source(), k.entry, Target::ENGINE).unwrap();
        let ro = BindingKind::Storage { read_only: true };
        let rw = BindingKind::Storage { read_only: false };
        assert_eq!(
            s.bindings,
            vec![
                (0, 0, BindingKind::Uniform),
                (0, 1, ro),
                (0, 2, ro),
                (0, 3, rw),
                (0, 4, rw),
                (0, 8, ro),
                (0, 9, ro),
            ]
        );
        for k in kernels::ALL {
            for (vulkan_1_3, unchecked) in [(true, false), (true, true), (false, false)] {
                let t = Target {
                    vulkan_1_3,
                    unchecked,
                    robust_buffers: true,
                    wgpu_bindings: false,
                };
                let s = entry_spirv(&k.source(), k.entry, t).unwrap();
                assert!(!s.bindings.is_empty(), "{} binds nothing", k.name);
            }
        }
    }

    /// On a hand-written stream: a Device-scoped barrier of Workgroup execution is changed,
    /// one of Device execution is not, and a stream whose last instruction runs past its end
    /// is left alone.
    #[test]
    fn only_workgroup_executed_device_scoped_barriers_change() {
        let op = |code: u32, operands: &[u32]| {
            let mut w = vec![((operands.len() as u32 + 1) << 16) | code];
            w.extend_from_slice(operands);
            w
        };
        let mut words = vec![0x0723_0203, 0x0001_0300, 0, 10, 0];
        words.extend(op(OP_CONSTANT, &[7, 1, SCOPE_DEVICE]));
        words.extend(op(OP_CONSTANT, &[7, 2, SCOPE_WORKGROUP]));
        words.extend(op(OP_CONSTANT, &[7, 3, 0x48]));
        let first = words.len();
        words.extend(op(OP_CONTROL_BARRIER, &[2, 1, 3]));
        let second = words.len();
        words.extend(op(OP_CONTROL_BARRIER, &[1, 1, 3]));
        let mut changed = words.clone();
        assert_eq!(workgroup_scoped_barriers(&mut changed), 1);
        assert_eq!(changed[first + 1..first + 4], [2, 2, 3]);
        assert_eq!(changed[second + 1..second + 4], [1, 1, 3]);
        let mut cut = words[..words.len() - 1].to_vec();
        let before = cut.clone();
        assert_eq!(workgroup_scoped_barriers(&mut cut), 0);
        assert_eq!(cut, before);
    }
}
