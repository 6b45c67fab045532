//! stem4d: 4D-STEM acquisitions `I[scan_row, scan_col, det_row, det_col]` read from local
//! files, decoded and reduced exactly. Stages: [`source`] → [`hdf5_index`] → [`formats`] →
//! [`frames`] (decode, bad pixels, bin) → [`resident`] → products ([`cpu`] reference,
//! [`gpu`] engine) → [`display`] and the [`viewer`] session the browser page runs.

pub mod contract;
pub mod cpu;
pub mod decode;
pub mod display;
pub mod error;
pub mod formats;
pub mod frames;
pub mod gpu;
pub mod hdf5_index;
pub mod info;
pub mod npy;
#[cfg(not(target_arch = "wasm32"))]
pub mod parity;
pub mod pattern;
pub mod products;
pub mod resident;
pub mod source;
pub mod viewer;
#[cfg(not(target_arch = "wasm32"))]
pub mod viewer_bench;
#[cfg(target_arch = "wasm32")]
pub mod web;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;

pub use error::{Error, Result};
