#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccl_bench::fuzz::summary_stats(data));
