//! The whole open path on one arbitrary file named `fuzz.h5`: HDF5 superblock, object
//! headers, chunk index, format detection, then a full decode (sum-dp) when it opens.
//! Errors are expected; panics, hangs and huge allocations are the bugs.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stem4d::formats::{Acquisition, OpenOptions};
use stem4d::products::{ProductKind, ProductParams};
use stem4d::source::{ByteSource, FileSet, MemSource};

fuzz_target!(|data: &[u8]| {
    for scan_shape in [None, Some([1, 1])] {
        let src: Arc<dyn ByteSource> = Arc::new(MemSource::new("fuzz.h5", data.to_vec()));
        let Ok(files) = FileSet::new(vec![src]) else {
            return;
        };
        let opts = OpenOptions {
            scan_shape,
            dataset: None,
        };
        match Acquisition::open(files, &opts) {
            Ok(acq) => {
                if let Err(e) = stem4d::cpu::compute(&acq, &ProductParams::new(ProductKind::SumDp))
                {
                    assert!(
                        e.to_string().contains("fuzz.h5") || matches!(e, stem4d::Error::Param(_)),
                        "{e}"
                    );
                }
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.is_empty());
            }
        }
    }
});
