//! Long work its caller can follow and stop. Uploads, streamed passes, the CPU reference
//! and frame reads call [`step`] between their blocks; a caller that put a watch on this
//! thread ([`watched`]; the page's worker, which runs one request at a time, [`install`])
//! hears their progress there and stops them by [`Cancel::cancel`] from any thread: the
//! work returns [`Error::Cancelled`] at its next step and leaves nothing half made (each
//! step falls between whole blocks). Work nobody watches reads a thread-local and goes on.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// What a step belongs to, as its progress and a cancel name it.
pub const UPLOAD: &str = "reading, decoding and uploading frames";
pub const COMPRESS: &str = "reading, decoding and compressing frames";
pub const STREAM: &str = "streaming the files for a product";
pub const CPU: &str = "computing on the CPU reference";
pub const FRAMES: &str = "reading frames";
pub const PREPARE: &str = "writing the prepared file";

/// The caller's handle on the work it runs: cancelled from any thread, seen at the work's
/// next [`step`].
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Ready for the next work (the page's worker keeps one for good).
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Hears `(stage, done, total)` at every step.
pub type Progress = Box<dyn FnMut(&'static str, u64, u64)>;

struct Watch {
    cancel: Cancel,
    progress: Option<Progress>,
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

/// Run `f` on this thread watched by `cancel` and `progress`; the watch before it is
/// back afterwards.
pub fn watched<T>(cancel: Cancel, progress: Option<Progress>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Watch>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            WATCH.with(|w| *w.borrow_mut() = before);
        }
    }
    let before = WATCH.with(|w| w.replace(Some(Watch { cancel, progress })));
    let _restore = Restore(before);
    f()
}

/// Watch this thread's work for good (until replaced).
pub fn install(cancel: Cancel, progress: Option<Progress>) {
    WATCH.with(|w| *w.borrow_mut() = Some(Watch { cancel, progress }));
}

/// One step of long work of `stage`: `done` of `total` (in its own units). The watcher
/// hears it; a cancelled watcher stops the work here.
pub fn step(stage: &'static str, done: u64, total: u64) -> Result<()> {
    WATCH.with(|w| {
        // A progress callback that itself steps finds the watch busy: nothing to tell.
        let Ok(mut w) = w.try_borrow_mut() else {
            return Ok(());
        };
        let Some(w) = w.as_mut() else {
            return Ok(());
        };
        if let Some(p) = w.progress.as_mut() {
            p(stage, done, total);
        }
        match w.cancel.is_cancelled() {
            true => Err(Error::Cancelled(stage.to_string())),
            false => Ok(()),
        }
    })
}

/// A block of long work is done: `progress(done, total)` hears it, as the caller asked,
/// then the watch ([`step`] of `stage`), which stops cancelled work here.
pub fn report(
    progress: &mut dyn FnMut(usize, usize),
    stage: &'static str,
    done: usize,
    total: usize,
) -> Result<()> {
    progress(done, total);
    step(stage, done as u64, total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_watch_stops_at_the_next_step_and_is_gone_after() {
        let cancel = Cancel::default();
        let seen = std::rc::Rc::new(RefCell::new(Vec::new()));
        let heard = seen.clone();
        let out = watched(
            cancel.clone(),
            Some(Box::new(move |s, d, t| heard.borrow_mut().push((s, d, t)))),
            || -> Result<u64> {
                step(STREAM, 1, 3)?;
                cancel.cancel();
                step(STREAM, 2, 3)?;
                step(STREAM, 3, 3)?;
                Ok(3)
            },
        );
        let e = out.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "cancelled while streaming the files for a product");
        assert_eq!(*seen.borrow(), vec![(STREAM, 1, 3), (STREAM, 2, 3)]);
        // Nobody watches now: steps go on.
        assert!(step(STREAM, 3, 3).is_ok());
    }
}
