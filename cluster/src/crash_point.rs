//! Named points where a test stops the process dead between two steps, as a kill would:
//! `strata-server --allow-fault-injection` arms one from the environment (`STRATA_CRASH_AT`),
//! and the first code to reach it aborts the process (no unwinding, no destructors: what a
//! SIGKILL leaves; what the process handed the OS stays, so this is not a power cut). One
//! point per process, whatever group reaches it; for tests only. Nothing is armed otherwise;
//! an unarmed point costs one load of a `OnceLock`.

use std::sync::OnceLock;

/// The environment variable `strata-server` arms a point from (with `--allow-fault-injection`).
pub const ENV: &str = "STRATA_CRASH_AT";

/// A snapshot install unpacked and checked, before anything is named or changed.
pub const INSTALL_UNPACKED: &str = "install-unpacked";
/// A snapshot install past the step that names its file current (which names nothing when
/// the current snapshot is newer or is this one already), before the engine swaps the
/// partition.
pub const INSTALL_NAMED_CURRENT: &str = "install-named-current";
/// A snapshot installed in the engine, before openraft hears of it.
pub const INSTALL_SWAPPED: &str = "install-swapped";

/// Every point, for the server to check a name against.
pub const POINTS: [&str; 3] = [INSTALL_UNPACKED, INSTALL_NAMED_CURRENT, INSTALL_SWAPPED];

static ARMED: OnceLock<&'static str> = OnceLock::new();

/// Arms the point named `name`; false when no point has that name (nothing is armed then).
/// One point per process: a second call changes nothing.
pub fn arm(name: &str) -> bool {
    match POINTS.iter().find(|p| **p == name) {
        Some(p) => {
            let _ = ARMED.set(p);
            true
        }
        None => false,
    }
}

/// Aborts the process when `name` is the armed point.
pub fn reached(name: &str) {
    if ARMED.get().is_some_and(|a| *a == name) {
        eprintln!("crash point {name} reached: aborting");
        std::process::abort();
    }
}
