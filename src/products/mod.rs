//! Products stage: what a user can ask for, with the same names and meanings on every
//! backend and in the CLI (`stem4d product --kind KIND ...`) and the page (`stem4d.product`).

pub mod dpc_rotation;
#[cfg(not(target_arch = "wasm32"))]
pub mod flags;
pub mod gpu;
pub mod gpu_float;
pub mod host_exact;
pub mod judge;
pub mod npy;
mod params;
pub mod stream;
pub mod tiff;

pub(crate) use params::wire;
pub use params::{ProductParams, ProductRequest};

use serde::Serialize;

use crate::contract::Dtype;
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProductKind {
    SumDp,
    MeanDp,
    MaxDp,
    Total,
    Bf,
    Adf,
    Df,
    Rect,
    Mask,
    Com,
    Dpc,
    Idpc,
    Binned,
    Pattern,
    FitBf,
    DpcRotation,
}

impl ProductKind {
    pub const ALL: [ProductKind; 16] = [
        ProductKind::SumDp,
        ProductKind::MeanDp,
        ProductKind::MaxDp,
        ProductKind::Total,
        ProductKind::Bf,
        ProductKind::Adf,
        ProductKind::Df,
        ProductKind::Rect,
        ProductKind::Mask,
        ProductKind::Com,
        ProductKind::Dpc,
        ProductKind::Idpc,
        ProductKind::Binned,
        ProductKind::Pattern,
        ProductKind::FitBf,
        ProductKind::DpcRotation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProductKind::SumDp => "sum-dp",
            ProductKind::MeanDp => "mean-dp",
            ProductKind::MaxDp => "max-dp",
            ProductKind::Total => "total",
            ProductKind::Bf => "bf",
            ProductKind::Adf => "adf",
            ProductKind::Df => "df",
            ProductKind::Rect => "rect",
            ProductKind::Mask => "mask",
            ProductKind::Com => "com",
            ProductKind::Dpc => "dpc",
            ProductKind::Idpc => "idpc",
            ProductKind::Binned => "binned",
            ProductKind::Pattern => "pattern",
            ProductKind::FitBf => "fit-bf",
            ProductKind::DpcRotation => "dpc-rotation",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                Error::param(format!(
                    "unknown product kind '{s}' (one of: {})",
                    names.join(" ")
                ))
            })
    }
}

/// A product's values, in the dtype the contract gives it (C-DTYPE).
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl ArrayData {
    pub fn len(&self) -> usize {
        match self {
            ArrayData::U8(v) => v.len(),
            ArrayData::U16(v) => v.len(),
            ArrayData::U32(v) => v.len(),
            ArrayData::U64(v) => v.len(),
            ArrayData::F32(v) => v.len(),
            ArrayData::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype_name(&self) -> &'static str {
        match self {
            ArrayData::U8(_) => "uint8",
            ArrayData::U16(_) => "uint16",
            ArrayData::U32(_) => "uint32",
            ArrayData::U64(_) => "uint64",
            ArrayData::F32(_) => "float32",
            ArrayData::F64(_) => "float64",
        }
    }

    /// Values as f64 (comparisons and display only: u64 above 2^53 round).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            ArrayData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U16(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U32(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::F64(v) => v.clone(),
        }
    }

    /// Narrow u32 samples back to the source dtype (max-dp and pattern keep it; C-DTYPE).
    pub fn from_samples_u32(v: Vec<u32>, dtype: Dtype, binned: bool) -> ArrayData {
        match (dtype, binned) {
            (Dtype::U8, false) => ArrayData::U8(v.into_iter().map(|x| x as u8).collect()),
            (Dtype::U16, false) => ArrayData::U16(v.into_iter().map(|x| x as u16).collect()),
            _ => ArrayData::U32(v),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProductArray {
    pub shape: Vec<usize>,
    pub data: ArrayData,
}
