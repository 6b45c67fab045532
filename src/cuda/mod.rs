//! The native CUDA backend (`--backend cuda`, cargo feature `cuda`): the same products as the
//! wgpu engine from kernels of its own in CUDA C (`wgsl/*.cu`, each beside the WGSL kernel
//! family it mirrors), compiled at run time by NVRTC to a CUBIN for the running device.
//! cudarc loads the driver and NVRTC dynamically, so a binary built with the feature starts
//! on a machine without CUDA and says that CUDA is absent (decision 0039).
//!
//! The resident is frame-major (frame f's pixel k at `f · Kr · Kc + k`), in the source's
//! sample type or u32 once binned; the bad pixels and the bin are applied on the GPU
//! (`resident.rs`). Products share the wgpu engine's host arithmetic (exact quotients,
//! DPC from CoM), never the CPU reference's, so parity can catch a kernel's bug.

pub mod bench;
mod decode;
mod detector_set;
mod engine;
mod idpc;
mod packed;
mod products;
mod resident;
mod resident_float;
mod upload;

pub use engine::{compile_kernels, devices, CudaEngine};
pub use products::{compute, compute_resident};
pub use resident::CudaResident;
