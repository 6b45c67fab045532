//! Waits on the GPU that end when the GPU is done, not when Chromium next looks.
//!
//! Chromium's GPU process checks for finished GPU work after each batch of commands a page
//! sends (`WebGPUDecoderImpl::HandleDawnCommands` polls the device), and otherwise only on
//! its command buffer's delayed work: 2 ms after the last batch, then every 1 ms. A mapping
//! or `onSubmittedWorkDone` awaited with nothing else sent is therefore reported on that
//! timer, up to 2 ms after the GPU finished: as long as a whole pattern update takes there
//! (decision 0011). While such a wait is pending the page keeps one empty
//! error-scope round trip in flight; each is a batch that makes the GPU process look, so
//! the wait ends within one round trip of the work finishing.
//!
//! Only the waits of interaction are nudged: an update's fence and readbacks. An upload
//! sends commands all the time, and nudging its staging and GPU waits made its loads no
//! faster (decision 0011).
//!
//! Natively the device is polled by the caller, and the future is simply awaited.

use std::future::Future;

/// How long a wait is nudged. A longer wait is reported by the GPU process's own 1 ms
/// polling, a small share of it, and the round trips would only keep that process busy.
#[cfg(target_arch = "wasm32")]
const NUDGE_FOR_MS: f64 = 25.0;

/// `fut`, a wait on work submitted to `device`, awaited with the GPU process nudged.
#[cfg(target_arch = "wasm32")]
pub(crate) async fn nudged<F: Future>(device: &wgpu::Device, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let until = crate::clock::now_ms() + NUDGE_FOR_MS;
    loop {
        // Pushed and popped at once: the scope catches nothing of anyone else's, however
        // many scopes are open around it.
        let round_trip = device.push_error_scope(wgpu::ErrorFilter::Internal).pop();
        if let Some(out) = first(fut.as_mut(), Box::pin(round_trip)).await {
            return out;
        }
        if crate::clock::now_ms() > until {
            return fut.await;
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) async fn nudged<F: Future>(_device: &wgpu::Device, fut: F) -> F::Output {
    fut.await
}

/// `Some` of `wait`'s output if it is ready by the time `round_trip` is, else `None`.
#[cfg(any(target_arch = "wasm32", test))]
async fn first<F: Future, R: Future + Unpin>(
    mut wait: std::pin::Pin<&mut F>,
    mut round_trip: R,
) -> Option<F::Output> {
    use std::task::Poll;
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(out) = wait.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        match std::pin::Pin::new(&mut round_trip).poll(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::first;
    use std::future::{pending, ready, Future};
    use std::task::{Context, Poll, Waker};

    fn now<F: Future>(f: F) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_finished_wait_wins_over_its_round_trip() {
        let mut wait = std::pin::pin!(ready(7));
        assert_eq!(now(first(wait.as_mut(), ready(()))), Some(Some(7)));
    }

    #[test]
    fn a_round_trip_back_first_asks_for_another() {
        let mut wait = std::pin::pin!(pending::<u8>());
        assert_eq!(now(first(wait.as_mut(), ready(()))), Some(None));
        // Neither back yet: still waiting, and the wait stays usable for the next round.
        assert_eq!(now(first(wait.as_mut(), pending::<()>())), None);
    }
}
