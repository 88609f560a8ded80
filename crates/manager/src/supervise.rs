//! Supervision of the daemon's background tasks: a panic is never swallowed. A task that
//! panics is logged (error level, with the panic text) and restarted; one that panics
//! [`MAX_PANICS`] times within [`WINDOW`] fails the daemon loudly instead of limping on.

use std::future::Future;
use std::time::{Duration, Instant};

/// Panics tolerated within [`WINDOW`] before the daemon fails.
pub(crate) const MAX_PANICS: usize = 5;
/// The window over which panics are counted.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// Run `make()` as a task; on panic log and restart it (after `backoff`); return
/// `Err(message)` after too many panics, `Ok(())` if the task returns normally.
pub(crate) async fn supervise<F, Fut>(
    name: &'static str,
    backoff: Duration,
    make: F,
) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut panics: Vec<Instant> = Vec::new();
    loop {
        match tokio::spawn(make()).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_panic() => {
                let text = panic_text(e.into_panic());
                let now = Instant::now();
                panics.retain(|t| now.duration_since(*t) < WINDOW);
                panics.push(now);
                tracing::error!(task = name, panic = %text, restarts = panics.len(), "background task panicked; restarting it");
                if panics.len() >= MAX_PANICS {
                    return Err(format!(
                        "background task {name} panicked {} times within {} s (last: {text})",
                        panics.len(),
                        WINDOW.as_secs()
                    ));
                }
                tokio::time::sleep(backoff).await;
            }
            Err(_) => return Ok(()), // cancelled: the daemon is shutting down
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_panicking_task_is_restarted_and_then_runs() {
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let out = rt().block_on(supervise("t", Duration::from_millis(1), move || {
            let r = r.clone();
            async move {
                if r.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("boom");
                }
            }
        }));
        assert_eq!(out, Ok(()));
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_task_that_keeps_panicking_fails_loudly() {
        let out = rt().block_on(supervise("tick", Duration::from_millis(1), || async {
            panic!("always")
        }));
        let e = out.unwrap_err();
        assert!(e.contains("tick") && e.contains("always"), "{e}");
    }
}
