//! cargo-fuzz wrapper of `saker_fuzz_targets::snapshot`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saker_fuzz_targets::snapshot(data));
