//! Background workers (the reconciler, the move driver, the node-removal
//! driver, session expiry)
//! run supervised: a worker that panics is logged, counted
//! (`kubebyon_worker_restarts`), marked down (`kubebyon_worker_up` 0, and
//! `/readyz` answers 503 naming it) and started again after a back-off of
//! 1, 2, 4 … 30 s. A worker that returns is started again the same way.

use std::time::Duration;

use crate::server::metrics::{WorkerLabel, global};

/// The wait before the `n`th restart in a row (from 1): 1 s, 2 s, 4 s, … up to 30 s.
fn restart_wait(n: u32) -> Duration {
    super::backoff::backoff(Duration::from_secs(1), n, Duration::from_secs(30))
}

/// Runs `start()`'s future as `worker`, again whenever it panics or returns.
pub async fn supervise<F, Fut>(worker: &'static str, start: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut restarts = 0u32;
    loop {
        global().mark_worker(worker, true);
        let started = tokio::time::Instant::now();
        let ended = tokio::spawn(start()).await;
        global().mark_worker(worker, false);
        global().worker_restarts.get_or_create(&WorkerLabel { worker }).inc();
        match ended {
            Err(e) if e.is_panic() => tracing::error!(worker, "background worker panicked; restarting it"),
            _ => tracing::error!(worker, "background worker stopped; restarting it"),
        }
        // A worker that ran a while starts the back-off anew.
        restarts = if started.elapsed() > Duration::from_secs(300) { 1 } else { restarts + 1 };
        tokio::time::sleep(restart_wait(restarts)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn restart_wait_table() {
        assert_eq!([1, 2, 3, 6, 7, 40].map(|n| restart_wait(n).as_secs()), [1, 2, 4, 30, 30, 30]);
    }

    /// A worker that panics is marked down, counted, and runs again.
    #[tokio::test]
    async fn a_panicking_worker_is_restarted_and_reported() {
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        let label = WorkerLabel { worker: "test-worker" };
        let before = global().worker_restarts.get_or_create(&label).get();
        tokio::spawn(supervise("test-worker", move || {
            let n = r.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    panic!("the first run fails");
                }
                std::future::pending::<()>().await;
            }
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(global().workers_down(), vec!["test-worker"], "down while it waits to restart");
        assert_eq!(global().workers_up.get_or_create(&label).get(), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "started again");
        assert!(global().workers_down().is_empty());
        assert_eq!(global().workers_up.get_or_create(&label).get(), 1);
        assert_eq!(global().worker_restarts.get_or_create(&label).get(), before + 1);
    }
}
