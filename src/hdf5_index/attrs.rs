//! Numbers read from attributes and small data sets (calibration), with their units.

use super::*;

/// An attribute that must hold one number (a scan dimension): `None` when absent,
/// `Some(Err(what it holds))` when present but not one number (a string, an array of
/// several values, another type), so the error can name the value instead of ignoring it.
pub fn attr_number(
    attrs: &[hdf5_reader::Attribute],
    name: &str,
) -> Option<std::result::Result<f64, String>> {
    use hdf5_reader::Datatype;
    let a = attrs.iter().find(|a| a.name == name)?;
    Some(match &a.datatype {
        Datatype::FixedPoint { .. } | Datatype::FloatingPoint { .. } => match a.num_elements() {
            Ok(1) => a
                .read_as_f64()
                .or_else(|_| a.read_1d::<f64>().map(|v| v[0]))
                .map_err(|e| format!("unreadable ({e})")),
            Ok(n) => Err(format!("an array of {n} values")),
            Err(e) => Err(format!("unreadable ({e})")),
        },
        _ => Err(match a.read_string() {
            Ok(s) => format!("the string {:?}", s.trim_end_matches('\0')),
            Err(_) => "not a number".to_string(),
        }),
    })
}

/// Read a numeric attribute as f64 whatever its stored integer/float type or rank.
pub fn attr_f64(attrs: &[hdf5_reader::Attribute], name: &str) -> Option<f64> {
    let a = attrs.iter().find(|a| a.name == name)?;
    if let Ok(v) = a.read_as_f64() {
        return Some(v);
    }
    a.read_1d::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .or_else(|| {
            a.read_1d::<i64>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
        .or_else(|| {
            a.read_1d::<u64>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
        .or_else(|| {
            a.read_1d::<i32>()
                .ok()
                .and_then(|v| v.first().map(|&x| x as f64))
        })
}

/// A scalar numeric data set as f64 with its `units` attribute (NeXus style), if it has one.
pub fn dataset_f64_units(h5: &Hdf5File, path: &str) -> Option<(f64, Option<String>)> {
    let value = dataset_f64(h5, path)?;
    let units = h5
        .dataset(path)
        .ok()
        .and_then(|ds| ds.attribute("units").ok())
        .and_then(|a| a.read_string().ok())
        .map(|u| u.trim_end_matches('\0').trim().to_string());
    Some((value, units))
}

/// Read a scalar numeric data set as f64.
pub fn dataset_f64(h5: &Hdf5File, path: &str) -> Option<f64> {
    let ds = h5.dataset(path).ok()?;
    macro_rules! try_type {
        ($t:ty) => {
            if let Ok(a) = ds.read_array::<$t>() {
                return a.iter().next().map(|&v| v as f64);
            }
        };
    }
    try_type!(f64);
    try_type!(u64);
    try_type!(i64);
    try_type!(u32);
    try_type!(i32);
    try_type!(f32);
    try_type!(u16);
    try_type!(i8);
    None
}
