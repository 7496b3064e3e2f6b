#![no_main]
//! Fuzz target: `strata_format::fuzz_bodies::record` on arbitrary bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_format::fuzz_bodies::record(data));
