//! How the binaries configure their allocator (mimalloc; the library leaves the choice to its
//! users).

/// mimalloc's option `purge_delay`: its index in `mi_option_e` (mimalloc.h of the v3 sources
/// that `libmimalloc-sys` 0.1 builds; the enum keeps deprecated entries so the numbers hold).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds a freed page stays resident before mimalloc gives it back to the kernel.
/// mimalloc v3 waits 1,000 ms by default (for pages and arenas alike); a storage engine's
/// flushes and compactions free tens of MiB of buffers a second, so the processes held up to
/// tens of MiB more than they used at their peaks (docs/PERFORMANCE.md, "Memory"). 10 ms is
/// the page delay mimalloc v2 used (v2 waited ten times longer for arenas); the throughput
/// measured level.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// True when the environment sets the purge delay for mimalloc itself (its option names are
/// case-insensitive; `reset_delay` is the option's former name).
fn purge_delay_set_by_environment() -> bool {
    std::env::vars_os().any(|(name, _)| {
        name.to_str().is_some_and(|n| {
            n.eq_ignore_ascii_case("MIMALLOC_PURGE_DELAY") || n.eq_ignore_ascii_case("MIMALLOC_RESET_DELAY")
        })
    })
}

/// Makes mimalloc give freed pages back after `PURGE_DELAY_MS` rather than a second, unless
/// the environment sets the delay (which then wins, for measuring the choice). Call first
/// thing in `main`, before any other thread starts: mimalloc stores the option with a plain
/// write that its other threads read. (`mi_option_set_default` would not do: mimalloc reads
/// every option from the environment when the process loads, after which a default is
/// ignored.)
pub fn return_freed_memory_promptly() {
    if purge_delay_set_by_environment() {
        return;
    }
    // SAFETY: a valid option index and a value, called before the binary starts threads (the
    // caller's contract above), so no other thread reads the option while it is written.
    // mimalloc reads the option at each purge decision, so a value set after its start takes
    // effect from then on (purges already scheduled keep their time).
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
    /// default), and the call sets it. (The call's precondition holds here although the test
    /// harness runs threads: this test binary allocates through the system allocator, so no
    /// thread of it reads mimalloc's options.)
    #[test]
    fn the_purge_delay_is_the_option_set() {
        if purge_delay_set_by_environment() {
            return;
        }
        assert_eq!(purge_delay(), 1000, "index {MI_OPTION_PURGE_DELAY} is not mimalloc's purge_delay");
        return_freed_memory_promptly();
        assert_eq!(purge_delay(), PURGE_DELAY_MS);
    }
}
