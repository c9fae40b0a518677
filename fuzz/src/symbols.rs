//! The symbolizer's input: an object file (ELF, DWARF) that a recording's
//! module record names, as `trace sites` and `trace leaks` read it.

use object::{Object, ObjectSection, ObjectSymbol};
use retype::sites::symbols::Symbolizer;
use retype_trace::{Module, Trace};

use crate::scratch;

/// The bytes as the object of a module loaded at 0 that spans the address
/// space; the addresses looked up are its symbols' and sections' (as far as
/// `object` reads them), so that mutated files still reach their DWARF.
pub fn symbolize(data: &[u8]) {
    let path = scratch::file("object.so", data);
    let trace = Trace {
        modules: vec![Module {
            path: path.display().to_string(),
            base: 0,
            start: 0,
            end: u64::MAX,
            build_id: Vec::new(),
            segment: 0,
        }],
        ..Trace::default()
    };
    let mut symbolizer = Symbolizer::new(&trace);
    for ret in addresses(data) {
        // A return address: the call before it is looked up.
        for frame in symbolizer.frames(0, ret.wrapping_add(1)).iter() {
            let _ = frame.label();
        }
    }
}

/// Up to 16 addresses in the object: its entry, symbols and sections.
fn addresses(data: &[u8]) -> Vec<u64> {
    let mut out = vec![0x1000];
    if let Ok(file) = object::File::parse(data) {
        out.push(file.entry());
        out.extend(file.symbols().take(8).map(|s| s.address()));
        out.extend(file.sections().take(6).map(|s| s.address()));
    }
    out.truncate(16);
    out
}
