//! `stem4d bench kernel-stats`: what the Vulkan driver made of each kernel — registers,
//! workgroup memory, instructions, as `VK_KHR_pipeline_executable_properties` reports them.
//! How many workgroups fit a multiprocessor follows from these (on the H200 it bounded the
//! LZ4 copies while each block was made in workgroup memory: see `wgsl/bslz4.wgsl`).
//!
//! wgpu does not expose the extension, so this opens its own Vulkan device and builds each
//! kernel from the SPIR-V the engine's Vulkan device builds: naga's, with the options wgpu's
//! Vulkan backend uses (index clamping, loop bounding, division checks, native
//! workgroup-memory zeroing), or for a kernel with storage barriers the engine's own
//! (`gpu::spirv`: barriers workgroup-scoped, every check in the shader), into a pipeline
//! layout derived from the kernel's own bindings.

use ash::vk;

use super::kernels::{self, Kernel};
use super::spirv;
use crate::error::{Error, Result};

/// One driver statistic of one kernel's executable.
pub struct Stat {
    pub name: String,
    pub value: String,
}

/// The driver's statistics for `kernel`'s compute executable.
pub struct KernelStats {
    pub kernel: &'static str,
    pub entry: &'static str,
    pub stats: Vec<Stat>,
}

fn vk_err(what: &str) -> impl Fn(vk::Result) -> Error + '_ {
    move |e| Error::Gpu(format!("kernel statistics: {what}: {e}"))
}

/// The bindings an entry point uses, by group: (binding, descriptor type).
type Bindings = Vec<Vec<(u32, vk::DescriptorType)>>;

/// The SPIR-V of `k`'s entry point as the engine builds it on Vulkan: wgpu's translation
/// (with the checks wgpu's Vulkan backend writes on a device with robust buffer access,
/// unless `unchecked`), or for a kernel with storage barriers the engine's own, barriers
/// workgroup-scoped (see [`spirv`]).
fn kernel_spirv(k: &Kernel, vulkan_1_3: bool, unchecked: bool) -> Result<(Vec<u32>, Bindings)> {
    let bad = |e: String| Error::Gpu(format!("kernel {}: {e}", k.name));
    let source = k.source();
    let as_wgpu = spirv::Target {
        vulkan_1_3,
        unchecked,
        robust_buffers: true,
        wgpu_bindings: false,
    };
    let mut s = spirv::entry_spirv(&source, k.entry, as_wgpu).map_err(bad)?;
    if s.scoped_barriers > 0 && !unchecked {
        let engine = spirv::Target {
            wgpu_bindings: false,
            ..spirv::Target::ENGINE
        };
        s = spirv::entry_spirv(&source, k.entry, engine).map_err(bad)?;
    }
    let mut groups: Bindings = Vec::new();
    for (g, binding, kind) in s.bindings {
        let ty = match kind {
            spirv::BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            spirv::BindingKind::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
        };
        let g = g as usize;
        if groups.len() <= g {
            groups.resize(g + 1, Vec::new());
        }
        groups[g].push((binding, ty));
    }
    Ok((s.words, groups))
}

/// Statistics of every kernel, on the first Vulkan device that has the extension
/// (`unchecked`: see [`spirv`]).
pub fn all(unchecked: bool) -> Result<(String, Vec<KernelStats>)> {
    // SAFETY: loading the system's Vulkan loader; every handle made below is destroyed
    // before returning, children before parents.
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| Error::Gpu(format!("kernel statistics: no Vulkan loader ({e})")))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let instance = unsafe {
        entry.create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
    }
    .map_err(vk_err("creating the instance"))?;
    let out = with_instance(&instance, unchecked);
    unsafe { instance.destroy_instance(None) };
    out
}

fn with_instance(instance: &ash::Instance, unchecked: bool) -> Result<(String, Vec<KernelStats>)> {
    let ext = ash::khr::pipeline_executable_properties::NAME;
    let physicals =
        unsafe { instance.enumerate_physical_devices() }.map_err(vk_err("listing devices"))?;
    let has_ext = |pd: vk::PhysicalDevice| {
        unsafe { instance.enumerate_device_extension_properties(pd) }
            .unwrap_or_default()
            .iter()
            .any(|p| p.extension_name_as_c_str() == Ok(ext))
    };
    let pd = physicals
        .iter()
        .copied()
        .find(|&pd| has_ext(pd))
        .ok_or_else(|| {
            Error::Gpu(format!(
                "kernel statistics: no Vulkan device has {}",
                ext.to_string_lossy()
            ))
        })?;
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let name = props
        .device_name_as_c_str()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let queue = unsafe { instance.get_physical_device_queue_family_properties(pd) }
        .iter()
        .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .ok_or_else(|| Error::Gpu(format!("kernel statistics: {name} has no compute queue")))?;
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(queue as u32)
        .queue_priorities(&priorities)];
    let exts = [ext.as_ptr()];
    let mut exec = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
        .pipeline_executable_info(true);
    // Vulkan 1.3 zeroes workgroup memory natively (as wgpu then asks for); before it naga
    // writes the zeroing out.
    let vulkan_1_3 = props.api_version >= vk::API_VERSION_1_3;
    let mut v13 =
        vk::PhysicalDeviceVulkan13Features::default().shader_zero_initialize_workgroup_memory(true);
    let mut info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&exts)
        .push_next(&mut exec);
    if vulkan_1_3 {
        info = info.push_next(&mut v13);
    }
    let device = unsafe { instance.create_device(pd, &info, None) }
        .map_err(vk_err("creating the device"))?;
    let loader = ash::khr::pipeline_executable_properties::Device::new(instance, &device);
    // Stops at the first kernel that fails, as the device must be destroyed either way.
    let out: Result<Vec<KernelStats>> = kernels::ALL
        .iter()
        .map(|k| {
            kernel_stats(&device, &loader, k, vulkan_1_3, unchecked).map(|stats| KernelStats {
                kernel: k.name,
                entry: k.entry,
                stats,
            })
        })
        .collect();
    unsafe { device.destroy_device(None) };
    out.map(|out| (name, out))
}

fn kernel_stats(
    device: &ash::Device,
    loader: &ash::khr::pipeline_executable_properties::Device,
    k: &Kernel,
    vulkan_1_3: bool,
    unchecked: bool,
) -> Result<Vec<Stat>> {
    let (words, groups) = kernel_spirv(k, vulkan_1_3, unchecked)?;
    let mut layouts = Vec::new();
    let mut made = Ok(());
    for g in &groups {
        let bindings: Vec<_> = g
            .iter()
            .map(|&(b, ty)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        match unsafe { device.create_descriptor_set_layout(&info, None) } {
            Ok(l) => layouts.push(l),
            Err(e) => {
                made = Err(vk_err("creating a set layout")(e));
                break;
            }
        }
    }
    let stats = made.and_then(|()| with_layouts(device, loader, k, &words, &layouts));
    for l in layouts {
        unsafe { device.destroy_descriptor_set_layout(l, None) };
    }
    stats
}

fn with_layouts(
    device: &ash::Device,
    loader: &ash::khr::pipeline_executable_properties::Device,
    k: &Kernel,
    words: &[u32],
    layouts: &[vk::DescriptorSetLayout],
) -> Result<Vec<Stat>> {
    let module = unsafe {
        device.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
    }
    .map_err(vk_err("creating a shader module"))?;
    let layout = unsafe {
        device.create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default().set_layouts(layouts),
            None,
        )
    };
    let out = match layout {
        Ok(layout) => {
            let out = with_pipeline(device, loader, k, module, layout);
            unsafe { device.destroy_pipeline_layout(layout, None) };
            out
        }
        Err(e) => Err(vk_err("creating a pipeline layout")(e)),
    };
    unsafe { device.destroy_shader_module(module, None) };
    out
}

fn with_pipeline(
    device: &ash::Device,
    loader: &ash::khr::pipeline_executable_properties::Device,
    k: &Kernel,
    module: vk::ShaderModule,
    layout: vk::PipelineLayout,
) -> Result<Vec<Stat>> {
    let entry = std::ffi::CString::new(k.entry)
        .map_err(|_| Error::Gpu(format!("kernel {}: entry point name", k.name)))?;
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(&entry);
    let info = vk::ComputePipelineCreateInfo::default()
        .stage(stage)
        .layout(layout)
        .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR);
    let pipeline =
        unsafe { device.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) }
            .map_err(|(_, e)| vk_err("building a pipeline")(e))?[0];
    let out = read_stats(loader, pipeline);
    unsafe { device.destroy_pipeline(pipeline, None) };
    out.map_err(|e| Error::Gpu(format!("kernel {}: {e}", k.name)))
}

fn read_stats(
    loader: &ash::khr::pipeline_executable_properties::Device,
    pipeline: vk::Pipeline,
) -> Result<Vec<Stat>> {
    let pinfo = vk::PipelineInfoKHR::default().pipeline(pipeline);
    let execs = unsafe { loader.get_pipeline_executable_properties(&pinfo) }
        .map_err(vk_err("listing executables"))?;
    let mut out = Vec::new();
    for i in 0..execs.len() as u32 {
        let einfo = vk::PipelineExecutableInfoKHR::default()
            .pipeline(pipeline)
            .executable_index(i);
        let stats = unsafe { loader.get_pipeline_executable_statistics(&einfo) }
            .map_err(vk_err("reading statistics"))?;
        for s in stats {
            let name = c_text(&s.name);
            // SAFETY: the union member read is the one `format` names.
            let value = unsafe {
                match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                        (s.value.b32 != 0).to_string()
                    }
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => s.value.f64.to_string(),
                    _ => "?".into(),
                }
            };
            out.push(Stat { name, value });
        }
    }
    Ok(out)
}

fn c_text(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kernel's set layout is its entry point's own bindings as Vulkan descriptors: the
    /// LZ4 copies (built with workgroup-scoped barriers) bind the parameters as a uniform
    /// buffer and six storage buffers; every kernel builds for every target.
    #[test]
    fn set_layouts_follow_each_entry_points_own_bindings() {
        let (words, groups) = kernel_spirv(&kernels::BSLZ4, true, false).unwrap();
        assert_eq!(words[0], 0x0723_0203, "SPIR-V magic");
        let storage = vk::DescriptorType::STORAGE_BUFFER;
        let want: Vec<_> = [1, 2, 3, 4, 8, 9].iter().map(|&b| (b, storage)).collect();
        assert_eq!(groups[0][0], (0, vk::DescriptorType::UNIFORM_BUFFER));
        assert_eq!(groups[0][1..], want[..]);
        for k in kernels::ALL {
            for (vulkan_1_3, unchecked) in [(true, false), (true, true), (false, false)] {
                let (_, groups) = kernel_spirv(&k, vulkan_1_3, unchecked).unwrap();
                assert!(
                    groups.iter().any(|g| !g.is_empty()),
                    "{} binds nothing",
                    k.name
                );
            }
        }
    }
}
