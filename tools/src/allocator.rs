//! How the binaries configure their allocator (mimalloc; the library leaves the choice to its
//! users).

/// mimalloc's option `purge_delay`: its index in `mi_option_e` (mimalloc.h of the v3 sources
/// that `libmimalloc-sys` 0.1 builds; the enum keeps deprecated entries so the numbers hold).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds a freed page stays resident before mimalloc gives it back to the kernel.
/// mimalloc v3 waits 1,000 ms by default; a storage engine's flushes and compactions free
/// tens of MiB of transient buffers a second, so the process held 10–25 MiB more than it
/// used through every YCSB phase (docs/PERFORMANCE.md, "Memory"). 10 ms is mimalloc v2's
/// default: the throughput measured level.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Makes mimalloc give freed pages back after `PURGE_DELAY_MS` rather than a second, unless
/// the environment sets `MIMALLOC_PURGE_DELAY` (which then wins, for measuring the choice).
/// Call first thing in `main`.
pub fn return_freed_memory_promptly() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` takes a valid option index and a value and only stores the
    // value; mimalloc reads the option on each purge decision, so setting it while running is
    // supported (it is how `mi_option_set` is documented to be used).
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purge_delay() -> std::ffi::c_long {
        // SAFETY: reads an option by a valid index.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
        }
    }

    /// The index names the option whose v3 default is 1,000 ms (no other option has that
    /// default), and the call sets it.
    #[test]
    fn the_purge_delay_is_the_option_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(purge_delay(), 1000, "index {MI_OPTION_PURGE_DELAY} is not mimalloc's purge_delay");
        return_freed_memory_promptly();
        assert_eq!(purge_delay(), PURGE_DELAY_MS);
    }
}
