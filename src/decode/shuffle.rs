//! HDF5 byte shuffle (filter 2): byte `b` of every element is stored together.

pub fn unshuffle(src: &[u8], elem: usize) -> Vec<u8> {
    if elem <= 1 {
        return src.to_vec();
    }
    let n = src.len() / elem;
    let mut dst = vec![0u8; src.len()];
    for b in 0..elem {
        let plane = &src[b * n..(b + 1) * n];
        for (k, v) in plane.iter().enumerate() {
            dst[k * elem + b] = *v;
        }
    }
    // A trailing partial element (never produced by HDF5 for whole elements) is kept as is.
    dst[n * elem..].copy_from_slice(&src[n * elem..]);
    dst
}
