//! `.npy` (format 1.0/2.0) writer and a reader for masks and test references.

use crate::error::{Error, Result};
use crate::products::{ArrayData, ProductArray};

const MAGIC: &[u8] = b"\x93NUMPY";

fn descr(data: &ArrayData) -> &'static str {
    match data {
        ArrayData::U8(_) => "|u1",
        ArrayData::U16(_) => "<u2",
        ArrayData::U32(_) => "<u4",
        ArrayData::U64(_) => "<u8",
        ArrayData::F32(_) => "<f4",
        ArrayData::F64(_) => "<f8",
    }
}

/// The `.npy` (format 1.0) header of a C-order array of `shape` and `descr` (`<u4`, ...):
/// what precedes the values, padded so that they start at a multiple of 64 bytes.
pub fn header(shape: &[usize], descr: &str) -> Vec<u8> {
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that data starts at a multiple of 64 bytes, header ends with '\n'.
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(header.len() + 10);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

pub fn to_bytes(a: &ProductArray) -> Vec<u8> {
    let mut out = header(&a.shape, descr(&a.data));
    out.reserve(a.data.len() * 8);
    match &a.data {
        ArrayData::U8(v) => out.extend_from_slice(v),
        ArrayData::U16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ArrayData::U32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ArrayData::U64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ArrayData::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        ArrayData::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
    out
}

/// A parsed `.npy`: bool arrays come back as `U8` (0/1), signed ints as `F64`.
pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<ProductArray> {
    let bad = |m: &str| Error::format(name, format!("not a valid .npy file: {m}"));
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("missing \\x93NUMPY signature"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(bad("unsupported version")),
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated header"))?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\'')?.split('\'').next())
        .ok_or_else(|| bad("no descr"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(
            "Fortran order is not supported; save with np.ascontiguousarray",
        ));
    }
    let shape_txt = field("shape")
        .and_then(|r| r.strip_prefix('(')?.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let shape: Vec<usize> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("bad shape")))
        .collect::<Result<_>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad("shape overflows"))?;
    let data = &bytes[start + hlen..];
    let need = |w: usize| -> Result<&[u8]> {
        count
            .checked_mul(w)
            .and_then(|n| data.get(..n))
            .ok_or_else(|| bad("data shorter than the shape says"))
    };
    macro_rules! le {
        ($t:ty, $w:expr) => {
            need($w)?
                .chunks_exact($w)
                .map(|b| <$t>::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect::<Vec<$t>>()
        };
    }
    let data = match descr {
        "|b1" | "|u1" | "<u1" => ArrayData::U8(need(1)?.to_vec()),
        "<u2" => ArrayData::U16(le!(u16, 2)),
        "<u4" => ArrayData::U32(le!(u32, 4)),
        "<u8" => ArrayData::U64(le!(u64, 8)),
        "<f4" => ArrayData::F32(le!(f32, 4)),
        "<f8" => ArrayData::F64(le!(f64, 8)),
        "|i1" => ArrayData::F64(need(1)?.iter().map(|&b| b as i8 as f64).collect()),
        "<i4" => ArrayData::F64(le!(i32, 4).into_iter().map(|v| v as f64).collect()),
        "<i8" => ArrayData::F64(le!(i64, 8).into_iter().map(|v| v as f64).collect()),
        other => return Err(bad(&format!("unsupported dtype {other}"))),
    };
    Ok(ProductArray { shape, data })
}

/// A detector mask from a `.npy`: bool/uint8 → boolean mask, float → weighted mask.
pub fn mask_from_npy(name: &str, bytes: &[u8]) -> Result<crate::contract::DetectorMask> {
    use crate::contract::DetectorMask;
    let a = from_bytes(name, bytes)?;
    if a.shape.len() != 2 {
        return Err(Error::format(
            name,
            format!("mask must be 2-D (Kr, Kc), got shape {:?}", a.shape),
        ));
    }
    Ok(match a.data {
        ArrayData::U8(v) => DetectorMask::Bool(v.into_iter().map(|x| x != 0).collect()),
        other => DetectorMask::Weighted(other.to_f64()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let a = ProductArray {
            shape: vec![2, 3],
            data: ArrayData::U64(vec![1, 2, 3, 4, 5, u64::MAX]),
        };
        let b = to_bytes(&a);
        assert_eq!((b.len() - a.data.len() * 8) % 64, 0);
        assert_eq!(from_bytes("t", &b).unwrap(), a);
        let one = ProductArray {
            shape: vec![3],
            data: ArrayData::F64(vec![1.0, 2.0, 3.5]),
        };
        assert_eq!(from_bytes("t", &to_bytes(&one)).unwrap(), one);
    }
}
