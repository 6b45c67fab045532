//! stem4d: 4D-STEM acquisitions `I[scan_row, scan_col, det_row, det_col]` read from local
//! files, decoded and reduced exactly. Modules follow the data: [`source`] (bytes of local
//! files) → [`hdf5_index`] and [`formats`] (what the files hold) → [`decode`] (CPU codecs) →
//! [`frames`] (decoded, corrected frames) → [`pattern`] (bad pixels, BF disk) → [`upload`]
//! (reads, windows, staging, the resident plan) → [`gpu`] (the engine) → [`kernels`] (one
//! WGSL kernel's host side each) → [`products`] (what users ask for, with the [`cpu`]
//! reference beside) → [`display`] → [`session`] (one acquisition being viewed) → shells
//! (`cli`, `web`). ARCHITECTURE.md draws it.

// In the order of the data flow (ARCHITECTURE.md draws it).
pub mod clock;
pub mod contract;
pub mod error;

pub mod cpu;
#[cfg(all(feature = "cuda", not(target_arch = "wasm32")))]
pub mod cuda;
pub mod decode;
pub mod display;
pub mod formats;
pub mod frames;
pub mod gpu;
pub mod hdf5_index;
pub mod kernels;
pub mod parity;
pub mod pattern;
pub mod planned;
pub mod products;
pub mod session;
pub mod source;
pub mod upload;
pub mod watch;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{Error, Result};
