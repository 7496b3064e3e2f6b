//! Retrying retryable errors with exponential backoff and full jitter.

use std::time::Duration;

use rand::Rng;

use crate::error::{Error, Result};

/// How to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all (the first included).
    pub max_attempts: u32,
    /// Delay cap of the first retry.
    pub initial_backoff: Duration,
    /// Largest delay cap.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(2),
        }
    }
}

/// Runs `f` until it succeeds, fails with an error that is not retryable, or runs out of
/// attempts. Between attempts it sleeps a uniformly random time up to a cap that doubles each
/// time ("full jitter"), so many clients backing off at once spread out instead of colliding.
///
/// # Errors
/// The last error of `f`.
pub fn with_retry<T>(policy: RetryPolicy, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let mut cap = policy.initial_backoff;
    let mut attempt = 1;
    loop {
        match f() {
            Err(e) if e.is_retryable() && attempt < policy.max_attempts => {
                let ms = cap.as_millis().max(1) as u64;
                std::thread::sleep(Duration::from_millis(rand::thread_rng().gen_range(0..=ms)));
                cap = (cap * 2).min(policy.max_backoff);
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// True for errors [`with_retry`] retries.
pub fn is_retryable(e: &Error) -> bool {
    e.is_retryable()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_busy_then_succeeds_and_gives_up_on_other_errors() {
        let p = RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        };
        let mut n = 0;
        let r = with_retry(p, || {
            n += 1;
            if n < 3 { Err(Error::Busy("x".into())) } else { Ok(n) }
        });
        assert_eq!(r.unwrap(), 3);
        let mut m = 0;
        let r: Result<()> = with_retry(p, || {
            m += 1;
            Err(Error::Closed)
        });
        assert!(r.is_err());
        assert_eq!(m, 1);
        let mut k = 0;
        let r: Result<()> = with_retry(p, || {
            k += 1;
            Err(Error::Busy("y".into()))
        });
        assert!(r.unwrap_err().is_retryable());
        assert_eq!(k, 5);
    }
}
