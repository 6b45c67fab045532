//! What the mean pattern says about the detector, GPU-free: hot and dead pixels (found on
//! the exact float64 mean of the frames as products see them) and the BF disk (a fit that
//! rejects isolated pixels and says when it is implausible). Both backends compute the mean
//! their own way; these rules then run on the host, once, the same for both, and
//! `tests/fixtures/make_fixtures.py` implements them again in numpy.
//! docs/decisions/0001-hot-pixels-and-bf-fit.md says how the thresholds were chosen.

mod bad_pixels;
mod bf_fit;
mod known;
mod window;

pub use bad_pixels::{detect, BadPixels, RULE};
pub use bf_fit::{fit, BfFit};
pub use known::{file_known, union};
