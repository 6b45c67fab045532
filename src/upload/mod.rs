//! Upload: from the files' bytes to an acquisition resident on the GPU. The read scheduler
//! (which windows of which files, in what order, how many in flight), the staging ring, the
//! chunk slots GPU decode fills, the plan of the resident buffers and their reuse. Only
//! `gpu_decode` and `resident` record GPU work; the rest is plain Rust shared by web and native.

pub mod ahead;
pub(crate) mod chunk_slots;
pub mod gpu_decode;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod host_staging;
pub mod memory;
pub mod packed;
pub mod plan;
pub mod prepare;
pub(crate) mod prepared;
pub(crate) mod segment_slots;
pub(crate) mod set_aside;
pub(crate) mod src_slots;
mod to_gpu;
pub(crate) mod window_bytes;
pub(crate) mod window_reads;
