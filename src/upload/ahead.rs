//! Work started ahead of its use, a bounded number at a time, its results kept in order.
//! The page's reopen of a prepared acquisition starts each block's digest as soon as the
//! block is read and awaits it a few blocks later (`upload::prepared`, decision 0042).

use std::collections::VecDeque;
use std::future::Future;

/// `finish` of each item's started work, in the items' order. `start` runs on an item as
/// soon as it comes; once more than `ahead` started items wait, the oldest is finished
/// before the next item is started.
pub async fn finished_in_order<I, S, R, F>(
    items: impl IntoIterator<Item = I>,
    ahead: usize,
    mut start: impl FnMut(I) -> S,
    mut finish: impl FnMut(S) -> F,
) -> Vec<R>
where
    F: Future<Output = R>,
{
    let mut out = Vec::new();
    let mut started = VecDeque::with_capacity(ahead + 1);
    for item in items {
        started.push_back(start(item));
        if started.len() > ahead {
            if let Some(oldest) = started.pop_front() {
                out.push(finish(oldest).await);
            }
        }
    }
    for rest in started {
        out.push(finish(rest).await);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::finished_in_order;
    use std::cell::RefCell;

    /// The order in which items are started (`s`) and finished (`f`).
    fn events(n: u32, ahead: usize) -> (Vec<u32>, String) {
        let log = RefCell::new(String::new());
        let out = pollster::block_on(finished_in_order(
            0..n,
            ahead,
            |i| {
                log.borrow_mut().push_str(&format!("s{i} "));
                i
            },
            |i| {
                log.borrow_mut().push_str(&format!("f{i} "));
                async move { i * 10 }
            },
        ));
        (out, log.into_inner().trim_end().to_string())
    }

    #[test]
    fn results_keep_the_items_order_and_at_most_ahead_wait() {
        let (out, log) = events(7, 2);
        assert_eq!(out, vec![0, 10, 20, 30, 40, 50, 60]);
        assert_eq!(log, "s0 s1 s2 f0 s3 f1 s4 f2 s5 f3 s6 f4 f5 f6");
        let (out, log) = events(3, 0);
        assert_eq!(out, vec![0, 10, 20]);
        assert_eq!(log, "s0 f0 s1 f1 s2 f2");
        // Fewer items than the look-ahead: all started, then all finished.
        let (_, log) = events(3, 4);
        assert_eq!(log, "s0 s1 s2 f0 f1 f2");
        assert_eq!(events(0, 4), (vec![], String::new()));
    }
}
