#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| retype_fuzz::symbols::symbolize(data));
