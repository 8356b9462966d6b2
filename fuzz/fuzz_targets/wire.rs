//! cargo-fuzz wrapper of `saker_fuzz_targets::wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| saker_fuzz_targets::wire(data));
