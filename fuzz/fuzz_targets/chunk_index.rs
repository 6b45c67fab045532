//! The whole open path on one arbitrary file named `fuzz.h5`: HDF5 superblock, object
//! headers, chunk index, format detection, then a full decode (sum-dp) when it opens.
//! Errors are expected; panics, hangs and huge allocations are the bugs, and so is a
//! gathered open (the browser's: reads fetched round by round) ending otherwise than a
//! plain one.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stem4d::formats::{Acquisition, OpenOptions};
use stem4d::products::{ProductKind, ProductParams};
use stem4d::source::{ByteSource, FileSet, MemSource};

/// What an open ended with: the chunk tables, or the error message.
fn outcome(r: &stem4d::Result<Acquisition>) -> String {
    match r {
        Ok(acq) => format!(
            "{:?} {:?}",
            acq.shape,
            acq.parts
                .iter()
                .map(|p| format!("{:?}", p.kind))
                .collect::<Vec<_>>()
        ),
        Err(e) => format!("error: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    for scan_shape in [None, Some([1, 1])] {
        let src: Arc<dyn ByteSource> = Arc::new(MemSource::new("fuzz.h5", data.to_vec()));
        let Ok(files) = FileSet::new(vec![src.clone()]) else {
            return;
        };
        let opts = OpenOptions {
            scan_shape,
            dataset: None,
        };
        let plain = Acquisition::open(files, &opts);
        let (gathered, _) =
            pollster::block_on(Acquisition::open_gathered(vec![src.clone()], &opts));
        assert_eq!(outcome(&plain), outcome(&gathered));
        match plain {
            Ok(acq) => {
                let sum = ProductParams::new(ProductKind::SumDp);
                if let Err(e) = stem4d::cpu::compute(&acq, &sum, Default::default()) {
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
