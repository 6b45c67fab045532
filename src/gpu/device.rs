//! Device setup within the adapter's limits: features, kernels built (with overrides and
//! workgroup-scoped variants on Vulkan), and the pipelines the engine dispatches.

use super::*;

pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_lowercase();
    info.device_type == wgpu::DeviceType::Cpu
        || ["llvmpipe", "lavapipe", "swiftshader", "warp", "softpipe"]
            .iter()
            .any(|s| name.contains(s))
}

/// NVIDIA GPUs run the masked sum faster with sixteen times the atomics than with workgroup
/// memory (H200, BF r=30: 0.56 against 0.83 ms); on other GPUs, whose atomics were not
/// measured, workgroup memory keeps the atomic traffic low. The browser gives no PCI vendor
/// (wgpu 30 fills only the name), so the name is read as well.
pub(super) fn prefers_atomic_sums(info: &wgpu::AdapterInfo) -> bool {
    const NVIDIA: u32 = 0x10de;
    info.vendor == NVIDIA || info.name.to_lowercase().contains("nvidia")
}

impl Engine {
    /// Pick the best adapter, request its real buffer limits (the defaults silently cap at
    /// 128/256 MiB) and build every pipeline.
    pub async fn new() -> Result<Engine> {
        Engine::with_kernels(&[]).await
    }

    /// [`Engine::new`] building `overrides` — (kernel name, WGSL that follows the common
    /// prelude) — in place of those kernels' embedded texts: kernel variants timed or checked
    /// on a remote GPU without a rebuild (`stem4d bench gpu --kernels DIR`).
    pub async fn with_kernels(overrides: &[(String, String)]) -> Result<Engine> {
        Engine::on(GpuApi::Any, overrides).await
    }

    /// [`Engine::with_kernels`] on the graphics API `api` (`--backend vulkan|metal|dx12`).
    pub async fn on(api: GpuApi, overrides: &[(String, String)]) -> Result<Engine> {
        if cfg!(target_arch = "wasm32") && api != GpuApi::Any {
            return Err(Error::param(format!(
                "backend '{}': in the browser, WebGPU chooses the graphics API",
                api.name()
            )));
        }
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api.backends(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let found = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await;
        let adapter = match found {
            Ok(adapter) => adapter,
            Err(e) => return Err(api.no_adapter(e, &super::adapters().await)),
        };
        let info = adapter.get_info();
        let al = adapter.limits();
        let limits = wgpu::Limits {
            max_buffer_size: al.max_buffer_size,
            max_storage_buffer_binding_size: al.max_storage_buffer_binding_size,
            max_compute_workgroups_per_dimension: al.max_compute_workgroups_per_dimension,
            // WebGPU's default is 8; the decode kernels bind up to 6.
            max_storage_buffers_per_shader_stage: al.max_storage_buffers_per_shader_stage.min(8),
            ..wgpu::Limits::downlevel_defaults()
        };
        // Subgroups where the adapter has them (in the browser asked for apart from wgpu:
        // `web_subgroups`), timestamps for the benchmarks' pass clock, and natively inside
        // encoders for the uploads' batch clock (`batch_clock`).
        let features = adapter.features()
            & (wgpu::Features::SUBGROUP
                | wgpu::Features::TIMESTAMP_QUERY
                | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
        #[cfg(target_arch = "wasm32")]
        web_subgroups::ask();
        // SPIR-V passed through on Vulkan, for the kernels whose barriers naga scopes wider
        // than WGSL does (see `spirv`).
        let passthrough = wgpu::Features::PASSTHROUGH_SHADERS;
        let spirv_barriers = cfg!(not(target_arch = "wasm32"))
            && info.backend == wgpu::Backend::Vulkan
            && adapter.features().contains(passthrough);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("stem4d"),
                required_features: if spirv_barriers {
                    features | passthrough
                } else {
                    features
                },
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("cannot open the GPU device on {}: {e}", info.name)))?;
        #[cfg(target_arch = "wasm32")]
        let device_subgroups = web_subgroups::granted();
        #[cfg(not(target_arch = "wasm32"))]
        let device_subgroups = features.contains(wgpu::Features::SUBGROUP);
        let lost = Arc::new(Mutex::new(None));
        let lost_cb = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut l) = lost_cb.lock() {
                *l = Some(format!("{reason:?}: {msg}"));
            }
        });
        let adapter_summary = AdapterSummary {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info),
            software: is_software(&info),
            limits: DeviceLimits {
                max_buffer_size: al.max_buffer_size,
                max_storage_binding: al.max_storage_buffer_binding_size as u64,
            },
        };
        #[cfg(not(target_arch = "wasm32"))]
        check_override_sizes(
            overrides,
            device.limits().max_compute_workgroup_storage_size,
            &info.name,
        )?;
        let mut pipelines = if spirv_barriers {
            scoped_pipelines(&device, overrides).await
        } else {
            Vec::new()
        };
        let scoped_kernels: Vec<&'static str> = pipelines.iter().map(|p| p.0).collect();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        for k in kernels::ALL {
            if !scoped_kernels.contains(&k.name) {
                pipelines.push((k.name, build_pipeline(&device, &k, overrides)));
            }
        }
        if let Some(e) = scope.pop().await {
            let replaced: Vec<&str> = overrides.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::Gpu(format!(
                "shader pipeline rejected by {}{}: {e}",
                info.name,
                if replaced.is_empty() {
                    String::new()
                } else {
                    format!(" (replaced kernels: {})", replaced.join(", "))
                }
            )));
        }
        // The subgroup kernels are an optimisation: a driver that rejects them leaves the
        // workgroup-memory kernels in charge.
        let mut subgroups = false;
        if device_subgroups {
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let extra: Vec<_> = kernels::SUBGROUP_KERNELS
                .iter()
                .map(|k| (k.name, build_pipeline(&device, k, overrides)))
                .collect();
            if scope.pop().await.is_none() {
                pipelines.extend(extra);
                subgroups = true;
            }
        }
        Ok(Engine {
            instance,
            raw_adapter: adapter,
            device,
            queue,
            adapter: adapter_summary,
            lost,
            pipelines: pipelines
                .into_iter()
                .map(|(n, p)| {
                    let layout = p.get_bind_group_layout(0);
                    (n, p, layout)
                })
                .collect(),
            scoped_kernels,
            subgroups,
            atomic_sums: prefers_atomic_sums(&info),
            chunk_decoder: None,
            set_aside: Default::default(),
            decode_slots: Mutex::new((false, None)),
            memory_ceiling: std::sync::atomic::AtomicU64::new(u64::MAX),
            memory_peak: std::sync::atomic::AtomicU64::new(0),
            renderers: Mutex::new(Vec::new()),
            clock: Mutex::new(None),
            batch_clock: Default::default(),
            #[cfg(target_arch = "wasm32")]
            staging: Default::default(),
        })
    }

    pub(crate) fn pipeline(
        &self,
        k: &Kernel,
    ) -> Result<(&wgpu::ComputePipeline, &wgpu::BindGroupLayout)> {
        self.pipelines
            .iter()
            .find(|(n, _, _)| *n == k.name)
            .map(|(_, p, l)| (p, l))
            .ok_or_else(|| Error::Gpu(format!("kernel {} not built", k.name)))
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        match self.lost.lock().ok().and_then(|l| l.clone()) {
            Some(why) => Err(Error::DeviceLost(format!(
                "the GPU device was lost ({why}); reopen the acquisition to recover"
            ))),
            None => Ok(()),
        }
    }
}

/// Replaced kernels that use more workgroup memory than the device allows, refused by name
/// before they are built (see [`kernels::workgroup_bytes`]).
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn check_override_sizes(
    overrides: &[(String, String)],
    limit: u32,
    adapter: &str,
) -> Result<()> {
    for k in kernels::compute_kernels() {
        if !overrides.iter().any(|(name, _)| name == k.name) {
            continue;
        }
        // A text naga cannot read is reported by the build, with the driver's words.
        if let Ok(bytes) = kernels::workgroup_bytes(&k.source_with(overrides), k.entry) {
            if bytes > limit {
                return Err(Error::Gpu(format!(
                    "replaced kernel {} uses {bytes} bytes of workgroup memory; {adapter} allows {limit}",
                    k.name
                )));
            }
        }
    }
    Ok(())
}

/// `k`'s pipeline from its WGSL (replaced by `overrides`); errors surface through the
/// caller's error scope.
pub(super) fn build_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    overrides: &[(String, String)],
) -> wgpu::ComputePipeline {
    let text = k.source_with(overrides);
    #[cfg(target_arch = "wasm32")]
    let text = if k.needs_subgroups() {
        format!("{}{text}", web_subgroups::SUBGROUP_DIRECTIVE)
    } else {
        text
    };
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(k.name),
        source: wgpu::ShaderSource::Wgsl(text.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: None,
        module: &module,
        entry_point: Some(k.entry),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// The kernels built from SPIR-V with their storage barriers workgroup-scoped (see
/// [`scoped_pipeline`]).
#[cfg(not(target_arch = "wasm32"))]
pub(super) async fn scoped_pipelines(
    device: &wgpu::Device,
    overrides: &[(String, String)],
) -> Vec<(&'static str, wgpu::ComputePipeline)> {
    let mut out = Vec::new();
    for k in kernels::ALL {
        if let Some(p) = scoped_pipeline(device, &k, overrides).await {
            out.push((k.name, p));
        }
    }
    out
}

/// None on the web: the browser translates the WGSL itself.
#[cfg(target_arch = "wasm32")]
pub(super) async fn scoped_pipelines(
    _: &wgpu::Device,
    _: &[(String, String)],
) -> Vec<(&'static str, wgpu::ComputePipeline)> {
    Vec::new()
}

/// `k`'s pipeline from SPIR-V with its storage barriers workgroup-scoped (see `spirv`), when
/// it has one and the driver takes the module; otherwise none, and `k` is built from its WGSL
/// (whose errors then name a module naga or the driver refused). The text test only spares
/// the other kernels a second translation; the SPIR-V decides.
#[cfg(not(target_arch = "wasm32"))]
pub(super) async fn scoped_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    overrides: &[(String, String)],
) -> Option<wgpu::ComputePipeline> {
    let source = k.source_with(overrides);
    if !source.contains("storageBarrier") {
        return None;
    }
    let s = spirv::entry_spirv(&source, k.entry, spirv::Target::ENGINE).ok()?;
    // The engine binds every kernel's buffers as group 0.
    if s.scoped_barriers == 0 || s.bindings.iter().any(|b| b.0 != 0) {
        return None;
    }
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let p = passthrough_pipeline(device, k, s);
    let failed = internal.pop().await.is_some();
    (!(validation.pop().await.is_some() || failed)).then_some(p)
}

/// A pipeline from SPIR-V the driver takes as it is, with the layout of the entry point's
/// own bindings (wgpu does not reflect a passed-through module).
#[cfg(not(target_arch = "wasm32"))]
pub(super) fn passthrough_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    s: spirv::EntrySpirv,
) -> wgpu::ComputePipeline {
    let entries: Vec<wgpu::BindGroupLayoutEntry> = s
        .bindings
        .iter()
        .map(|&(_, binding, kind)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: match kind {
                    spirv::BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
                    spirv::BindingKind::Storage { read_only } => {
                        wgpu::BufferBindingType::Storage { read_only }
                    }
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(k.name),
        entries: &entries,
    });
    let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(k.name),
        bind_group_layouts: &[Some(&group)],
        immediate_size: 0,
    });
    let [x, y, z] = s.workgroup_size;
    // SAFETY: naga wrote and validated this module from the kernel's WGSL, with every
    // runtime check wgpu writes; the one change is a barrier's memory scope narrowed to
    // what WGSL specifies for it.
    let module = unsafe {
        device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(k.name),
            entry_points: vec![wgpu::PassthroughShaderEntryPoint {
                name: k.entry.into(),
                workgroup_size: (x, y, z),
            }]
            .into(),
            spirv: Some(s.words.into()),
            ..Default::default()
        })
    };
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: Some(&layout),
        module: &module,
        entry_point: Some(k.entry),
        compilation_options: Default::default(),
        cache: None,
    })
}
