//! naga's view of a kernel: its module and entry point, the workgroup memory it takes, and
//! replacement kernel texts for experiments (`--kernels DIR`).

/// A WGSL module as naga reads and validates it, and one of its entry points: what
/// [`workgroup_bytes`] and `bench kernel-stats` (`kernel_stats.rs`) look into.
#[cfg(not(target_arch = "wasm32"))]
pub struct EntryModule {
    pub module: naga::Module,
    pub info: naga::valid::ModuleInfo,
    /// The entry point's index in `module.entry_points`.
    pub index: usize,
}

#[cfg(not(target_arch = "wasm32"))]
impl EntryModule {
    pub fn parse(source: &str, entry: &str) -> std::result::Result<EntryModule, String> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .validate(&module)
            .map_err(|e| e.emit_to_string(source))?;
        let index = module
            .entry_points
            .iter()
            .position(|e| e.name == entry)
            .ok_or_else(|| format!("no entry point {entry}"))?;
        Ok(EntryModule {
            module,
            info,
            index,
        })
    }

    /// The module's global variables that the entry point uses.
    pub fn used_globals(&self) -> impl Iterator<Item = &naga::GlobalVariable> {
        let uses = self.info.get_entry_point(self.index);
        self.module
            .global_variables
            .iter()
            .filter(move |(h, _)| !uses[*h].is_empty())
            .map(|(_, g)| g)
    }
}

/// Bytes of workgroup memory the entry point `entry` of the WGSL module `source` uses (naga's
/// layout of the workgroup variables it touches). wgpu does not hold a kernel to the device's
/// limit, and a driver given more than it has can fail at launch rather than at build (a
/// variant 8 bytes over the H200's 48 KiB built there and never finished), so replaced
/// kernels are checked with this before they are built, and the embedded ones against
/// WebGPU's guaranteed 16 KiB in `tests/shader_validation.rs`.
#[cfg(not(target_arch = "wasm32"))]
pub fn workgroup_bytes(source: &str, entry: &str) -> std::result::Result<u32, String> {
    let m = EntryModule::parse(source, entry)?;
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(m.module.to_ctx())
        .map_err(|e| e.to_string())?;
    Ok(m.used_globals()
        .filter(|g| g.space == naga::AddressSpace::WorkGroup)
        .map(|g| layouter[g.ty].size)
        .sum())
}

/// Replacement kernel texts from `dir` for experiments: each `NAME.wgsl` there replaces the
/// kernel NAME (its text after the common prelude: for a subgroup kernel, the whole of it,
/// `masked_sum.wgsl` included; for a decode kernel, `decode_common.wgsl` included). A file
/// that names no kernel is refused by name.
#[cfg(not(target_arch = "wasm32"))]
pub fn overrides_from(dir: &std::path::Path) -> crate::error::Result<Vec<(String, String)>> {
    use crate::error::Error;
    let names: Vec<&str> = super::compute_kernels().map(|k| k.name).collect();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::param(format!("{}: cannot list the kernels: {e}", dir.display())))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| Error::param(format!("{}: {e}", dir.display())))?
            .path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let Some(stem) = name.strip_suffix(".wgsl") else {
            continue;
        };
        if !names.contains(&stem) {
            return Err(Error::param(format!(
                "{}: no kernel is named {stem} (one of: {})",
                path.display(),
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::param(format!("{}: {e}", path.display())))?;
        out.push((stem.to_string(), text));
    }
    out.sort();
    Ok(out)
}
