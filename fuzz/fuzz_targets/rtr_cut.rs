#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| retype_fuzz::trace::rtr_cut(data));
