//! Which native graphics API the wgpu engine runs on (`--backend wgpu|vulkan|metal|dx12`):
//! the best adapter of any API, or one named. A named API this machine has no adapter for
//! is refused, saying where that API runs and which adapters this machine has. In the
//! browser the API is WebGPU's own choice: only `wgpu` applies there.

use super::*;

/// A native graphics API of wgpu, or any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GpuApi {
    /// The best adapter of any API this build of wgpu has.
    #[default]
    Any,
    Vulkan,
    Metal,
    Dx12,
}

impl GpuApi {
    /// Every name [`GpuApi::parse`] takes.
    pub const NAMES: [&'static str; 4] = ["wgpu", "vulkan", "metal", "dx12"];

    pub fn parse(name: &str) -> Option<GpuApi> {
        match name {
            "wgpu" => Some(GpuApi::Any),
            "vulkan" => Some(GpuApi::Vulkan),
            "metal" => Some(GpuApi::Metal),
            "dx12" => Some(GpuApi::Dx12),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GpuApi::Any => "wgpu",
            GpuApi::Vulkan => "vulkan",
            GpuApi::Metal => "metal",
            GpuApi::Dx12 => "dx12",
        }
    }

    /// The wgpu backends an instance for this API enables.
    pub fn backends(self) -> wgpu::Backends {
        match self {
            GpuApi::Any => wgpu::Backends::default(),
            GpuApi::Vulkan => wgpu::Backends::VULKAN,
            GpuApi::Metal => wgpu::Backends::METAL,
            GpuApi::Dx12 => wgpu::Backends::DX12,
        }
    }

    /// Where the API's drivers exist (wgpu builds Metal for Apple targets only, DX12 for
    /// Windows only).
    fn runs_on(self) -> &'static str {
        match self {
            GpuApi::Any => "any system with a GPU driver",
            GpuApi::Vulkan => "Linux, Windows and Android with a Vulkan driver",
            GpuApi::Metal => "macOS and iOS",
            GpuApi::Dx12 => "Windows",
        }
    }

    /// Why this machine gave no adapter for the API, with the adapters it does have.
    pub(crate) fn no_adapter(self, why: impl std::fmt::Display, found: &[AdapterLine]) -> Error {
        let here = match found {
            [] => "none".to_string(),
            found => found
                .iter()
                .map(AdapterLine::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        };
        match self {
            GpuApi::Any => Error::Gpu(format!(
                "no GPU adapter available ({why}); WebGPU/Vulkan/Metal/DX12 needed"
            )),
            api => Error::Gpu(format!(
                "backend '{}' has no adapter on this machine ({why}; {} runs on {}); adapters here: {here}",
                api.name(),
                api.name(),
                api.runs_on()
            )),
        }
    }
}

/// One adapter a machine has, as `stem4d parity` lists them.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterLine {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub software: bool,
}

impl std::fmt::Display for AdapterLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let software = if self.software { ", software" } else { "" };
        write!(
            f,
            "{} on {} ({}{software})",
            self.name, self.backend, self.device_type
        )
    }
}

impl AdapterSummary {
    /// This adapter as `stem4d parity` lists adapters.
    pub fn line(&self) -> AdapterLine {
        AdapterLine {
            name: self.name.clone(),
            backend: self.backend.clone(),
            device_type: self.device_type.clone(),
            software: self.software,
        }
    }
}

/// Every adapter of every API this build of wgpu has (none in the browser, which offers
/// one adapter at a time).
pub async fn adapters() -> Vec<AdapterLine> {
    #[cfg(target_arch = "wasm32")]
    return Vec::new();
    #[cfg(not(target_arch = "wasm32"))]
    {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        instance
            .enumerate_adapters(wgpu::Backends::all())
            .await
            .iter()
            .map(|a| {
                let info = a.get_info();
                AdapterLine {
                    name: info.name.clone(),
                    backend: format!("{:?}", info.backend),
                    device_type: format!("{:?}", info.device_type),
                    software: is_software(&info),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_to_itself() {
        for name in GpuApi::NAMES {
            assert_eq!(GpuApi::parse(name).map(GpuApi::name), Some(name));
        }
        assert_eq!(GpuApi::parse("opengl"), None);
    }

    #[test]
    fn a_named_api_without_an_adapter_says_where_it_runs_and_what_is_here() {
        let here = [AdapterLine {
            name: "llvmpipe".into(),
            backend: "Vulkan".into(),
            device_type: "Cpu".into(),
            software: true,
        }];
        let e = GpuApi::Metal.no_adapter("none found", &here).to_string();
        assert_eq!(
            e,
            "GPU: backend 'metal' has no adapter on this machine (none found; metal runs on macOS and iOS); adapters here: llvmpipe on Vulkan (Cpu, software)"
        );
    }
}
