#![no_main]
//! Fuzz target: `strata_format::fuzz_bodies::block` (the LZ4 decompressor on hostile payloads).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_format::fuzz_bodies::block(data));
