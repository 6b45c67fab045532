//! Every WGSL kernel parses and validates with naga under WebGPU's capabilities (no native
//! extras; the subgroup kernels with subgroup operations and nothing more), and
//! translates to SPIR-V and MSL (the Metal target's gate); every uniform struct has the
//! layout of its single Rust definition.

use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};
use stem4d::kernels;

fn module(k: &kernels::Kernel) -> (naga::Module, naga::valid::ModuleInfo) {
    let src = k.source();
    let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| {
        panic!(
            "{}.wgsl does not parse:\n{}",
            k.name,
            e.emit_to_string(&src)
        )
    });
    let mut validator = if k.needs_subgroups() {
        let mut v = Validator::new(ValidationFlags::all(), Capabilities::SUBGROUP);
        v.subgroup_stages(ShaderStages::COMPUTE | ShaderStages::FRAGMENT)
            .subgroup_operations(
                SubgroupOperationSet::BASIC
                    | SubgroupOperationSet::VOTE
                    | SubgroupOperationSet::ARITHMETIC
                    | SubgroupOperationSet::BALLOT
                    | SubgroupOperationSet::SHUFFLE
                    | SubgroupOperationSet::SHUFFLE_RELATIVE
                    | SubgroupOperationSet::QUAD_FRAGMENT_COMPUTE,
            );
        v
    } else {
        Validator::new(ValidationFlags::all(), Capabilities::empty())
    };
    let info = validator.validate(&module).unwrap_or_else(|e| {
        panic!(
            "{}.wgsl does not validate:\n{}",
            k.name,
            e.emit_to_string(&src)
        )
    });
    (module, info)
}

#[test]
fn every_kernel_validates_for_webgpu() {
    for k in kernels::compute_kernels() {
        let (module, _) = module(&k);
        assert!(
            module
                .entry_points
                .iter()
                .any(|e| e.name == k.entry && e.stage == naga::ShaderStage::Compute),
            "{}: no compute entry point {}",
            k.name,
            k.entry
        );
    }
}

#[test]
fn the_display_module_has_its_vertex_and_fragment_stages() {
    let (module, _) = module(&kernels::RENDER);
    for (entry, stage) in [
        ("vs_main", naga::ShaderStage::Vertex),
        ("fs_main", naga::ShaderStage::Fragment),
    ] {
        assert!(
            module
                .entry_points
                .iter()
                .any(|e| e.name == entry && e.stage == stage),
            "display.wgsl: no {stage:?} entry point {entry}"
        );
    }
}

/// Every module the engine builds: the compute kernels (those with subgroups too) and the
/// display's render module.
fn all_modules() -> impl Iterator<Item = kernels::Kernel> {
    kernels::compute_kernels().chain([kernels::RENDER])
}

#[test]
fn every_kernel_translates_to_spirv_and_msl() {
    for k in all_modules() {
        let (module, info) = module(&k);
        naga::back::spv::write_vec(&module, &info, &naga::back::spv::Options::default(), None)
            .unwrap_or_else(|e| panic!("{}: SPIR-V: {e}", k.name));
        let pipeline = naga::back::msl::PipelineOptions::default();
        naga::back::msl::write_string(
            &module,
            &info,
            &naga::back::msl::Options::default(),
            &pipeline,
        )
        .unwrap_or_else(|e| panic!("{}: MSL: {e}", k.name));
    }
}

#[test]
fn every_wgsl_file_is_a_kernel_or_a_prelude() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".cu") {
            // The CUDA backend's kernels: each beside the WGSL family it mirrors, and every
            // one compiled into the backend's module (src/cuda/engine.rs).
            let dir = entry.path().with_file_name(format!("{stem}.wgsl"));
            assert!(dir.exists(), "wgsl/{name} mirrors no wgsl/{stem}.wgsl");
            let engine =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cuda/engine.rs");
            let engine = std::fs::read_to_string(engine).unwrap();
            assert!(
                engine.contains(&format!("\"../../wgsl/{name}\"")),
                "wgsl/{name} is not compiled by src/cuda/engine.rs"
            );
            continue;
        }
        let stem = name.trim_end_matches(".wgsl");
        // A prelude (`// stem4d:after …`) is embedded in the kernels that name it.
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            stem == "common"
                || all_modules().any(|k| k.name == stem || k.body.contains(text.as_str())),
            "wgsl/{name} is not embedded by src/kernels (build.rs)"
        );
    }
}

#[test]
fn uniform_structs_match_their_rust_layout() {
    let mut checked = std::collections::BTreeSet::new();
    for k in all_modules() {
        let (module, _) = module(&k);
        for layout in kernels::UNIFORMS {
            let name = layout.name;
            let Some((_, ty)) = module
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
            else {
                continue;
            };
            let naga::TypeInner::Struct { members, span } = &ty.inner else {
                panic!("{name} is not a struct");
            };
            checked.insert(name);
            assert_eq!(*span as usize, layout.size, "{}: {name} size", k.name);
            let wgsl: Vec<(&str, usize)> = members
                .iter()
                .map(|m| (m.name.as_deref().unwrap_or(""), m.offset as usize))
                .collect();
            assert_eq!(wgsl, layout.fields, "{}: {name} fields and offsets", k.name);
        }
    }
    for layout in kernels::UNIFORMS {
        assert!(
            checked.contains(layout.name),
            "{} is in no WGSL module",
            layout.name
        );
    }
}

/// The registry build.rs makes holds exactly the compute entry points naga finds in each
/// file, under their own names; nothing is listed by hand.
#[test]
fn the_registry_is_every_compute_entry_point_of_wgsl() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let mut found = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().to_string();
        let kernels_of_file: Vec<_> = kernels::compute_kernels()
            .filter(|k| k.file == file)
            .collect();
        let Some(k) = kernels_of_file.first() else {
            continue;
        };
        let (module, _) = module(k);
        // The file's own entry points: a subgroup kernel's module also holds its base's.
        let text = std::fs::read_to_string(dir.join(&file)).unwrap();
        for e in module
            .entry_points
            .iter()
            .filter(|e| e.stage == naga::ShaderStage::Compute)
            .filter(|e| text.contains(&format!("fn {}(", e.name)))
        {
            let k = kernels_of_file
                .iter()
                .find(|k| k.name == e.name)
                .unwrap_or_else(|| panic!("wgsl/{file}: {} is not in the registry", e.name));
            assert_eq!(k.entry, k.name, "one name for kernel and entry point");
            found.insert(e.name.clone());
        }
    }
    for k in kernels::compute_kernels() {
        assert!(
            found.contains(k.name),
            "{}: no such entry point in wgsl/{}",
            k.name,
            k.file
        );
    }
}

/// WebGPU guarantees every adapter 16 KiB of workgroup memory a workgroup; wgpu does not hold
/// kernels to it, so each entry point is measured here (naga's layout, as the engine measures
/// replaced kernels). The LZ4 copies keep only the entries of the sequences being made
/// there (264 bytes, as the H200's driver reports): the block itself in workgroup memory
/// left a multiprocessor six blocks at a time (see `wgsl/bslz4.wgsl`).
#[test]
fn every_kernel_fits_webgpus_workgroup_memory() {
    const WEBGPU_GUARANTEED: u32 = 16_384;
    for k in kernels::compute_kernels() {
        let bytes = kernels::workgroup_bytes(&k.source(), k.entry)
            .unwrap_or_else(|e| panic!("{}: {e}", k.name));
        assert!(
            bytes <= WEBGPU_GUARANTEED,
            "{} ({}): {bytes} bytes of workgroup memory",
            k.name,
            k.entry
        );
        if k.entry == "bslz4" {
            assert_eq!(bytes, 264, "bslz4' workgroup memory");
        }
    }
}

/// The CUDA mirror of fft.wgsl takes `FftParams` by value: its `struct FftParams` in
/// wgsl/fft.cu names the Rust uniform's fields in the same order, each 4 bytes, so the bytes
/// the host passes are the ones the kernels read.
#[test]
fn the_cuda_fft_params_are_the_uniforms_layout() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl/fft.cu");
    let text = std::fs::read_to_string(dir).unwrap();
    let start = text
        .find("struct FftParams {")
        .expect("struct FftParams in wgsl/fft.cu");
    let body = &text[start + "struct FftParams {".len()..];
    let body = &body[..body.find("};").unwrap()];
    let mut names = Vec::new();
    for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let (ty, fields) = decl.split_once(' ').unwrap();
        assert!(ty == "u32" || ty == "float", "a field of 4 bytes, not {ty}");
        names.extend(fields.split(',').map(|f| f.trim().to_string()));
    }
    let layout = stem4d::kernels::FftParams::LAYOUT;
    let rust: Vec<String> = layout.fields.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names, rust, "wgsl/fft.cu's FftParams fields");
    for (k, (_, offset)) in layout.fields.iter().enumerate() {
        assert_eq!(*offset, 4 * k, "FftParams packs 4-byte fields");
    }
    assert_eq!(layout.size, 4 * rust.len());
}
