//! The pixels products already leave out, on the detector they see.

use crate::frames::Correction;

/// On the detector binned `corr.bin` (from an unbinned `det`): with bad-pixel masking, the
/// pixels whose every unbinned pixel the file's `pixel_mask` flags (their sums are 0); none
/// without masking. They are neither judged nor used (C-BAD-FOUND).
pub fn file_known(pixel_mask: Option<&[bool]>, det: [usize; 2], corr: Correction) -> Vec<bool> {
    let b = corr.bin.max(1);
    let [or, oc] = [det[0].div_ceil(b), det[1].div_ceil(b)];
    let mut known = vec![false; or * oc];
    let Some(mask) = pixel_mask.filter(|_| corr.mask_bad_pixels) else {
        return known;
    };
    for (k, known) in known.iter_mut().enumerate() {
        let (bi, bj) = (k / oc, k % oc);
        *known = (bi * b..((bi + 1) * b).min(det[0]))
            .all(|i| (bj * b..((bj + 1) * b).min(det[1])).all(|j| mask[i * det[1] + j]));
    }
    known
}

/// `a` with the pixels of `b` added.
pub fn union(mut a: Vec<bool>, b: Option<&[bool]>) -> Vec<bool> {
    if let Some(b) = b {
        for (x, &y) in a.iter_mut().zip(b) {
            *x |= y;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binned_pixel_is_known_bad_when_all_its_pixels_are() {
        // 3 × 5 detector, bin 2: blocks (0,0) fully flagged, (0,1) partly, edge block (1,2)
        // holds one pixel, flagged.
        let mut mask = vec![false; 15];
        for k in [0, 1, 5, 6, 2, 14] {
            mask[k] = true;
        }
        let on = Correction {
            mask_bad_pixels: true,
            bin: 2,
        };
        assert_eq!(
            file_known(Some(&mask), [3, 5], on),
            vec![true, false, false, false, false, true]
        );
        let off = Correction {
            mask_bad_pixels: false,
            bin: 2,
        };
        assert_eq!(file_known(Some(&mask), [3, 5], off), vec![false; 6]);
        let one = Correction {
            mask_bad_pixels: true,
            bin: 1,
        };
        assert_eq!(file_known(Some(&mask), [3, 5], one), mask);
        assert_eq!(
            union(vec![true, false], Some(&[false, true])),
            vec![true, true]
        );
    }
}
