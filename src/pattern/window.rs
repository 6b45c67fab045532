//! 3 × 3 neighbourhoods on a `[rows, cols]` detector, clipped at its edges, and medians as
//! numpy takes them (the mean of the two middle values of an even count).

/// The detector indices of the 3 × 3 window about `k`, `k` itself included when `centre`,
/// in row-major order, clipped to the detector.
pub fn window(k: usize, det: [usize; 2], centre: bool, out: &mut Vec<usize>) {
    out.clear();
    let [rows, cols] = det;
    let (r, c) = (k / cols, k % cols);
    for i in r.saturating_sub(1)..=(r + 1).min(rows - 1) {
        for j in c.saturating_sub(1)..=(c + 1).min(cols - 1) {
            let q = i * cols + j;
            if centre || q != k {
                out.push(q);
            }
        }
    }
}

/// The median of `v` (sorted in place; NaN-free input); `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_clip_at_the_edges_and_medians_average_the_middle_pair() {
        let mut w = Vec::new();
        window(0, [3, 4], false, &mut w);
        assert_eq!(w, vec![1, 4, 5]);
        window(5, [3, 4], true, &mut w);
        assert_eq!(w, vec![0, 1, 2, 4, 5, 6, 8, 9, 10]);
        window(11, [3, 4], false, &mut w);
        assert_eq!(w, vec![6, 7, 10]);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
