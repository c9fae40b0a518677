//! The trace readers: the `.rtr` codec, whole and cut at every byte, and the
//! importers of `retype trace convert`, through the file-level entry
//! `format::load` as the command line calls them. A trace that reads is
//! also summarised (`trace info`), counted per stack (`trace sites`) and
//! converted to every writable format, and must read back from `.rtr` as it
//! was.

use retype_trace::format::{self, Format};
use retype_trace::sites::per_stack;
use retype_trace::summary::Summary;
use retype_trace::window::Window;
use retype_trace::{Event, Trace};

use crate::{place, scratch};

/// `Trace::read` of the bytes; an error names the byte it stopped at.
pub fn rtr(data: &[u8]) {
    match Trace::read(data) {
        Ok(t) => {
            if let Some(cut) = t.cut_short {
                assert!(
                    cut.at_byte <= data.len() as u64,
                    "cut past the end: {cut:?}"
                );
                assert_eq!(cut.events, t.events.len() as u64, "{cut:?}");
            }
            use_trace(&t);
        }
        Err(e) => {
            assert!(e.offset <= data.len() as u64, "error past the end: {e}");
            place::assert_names_line_or_byte(&e);
        }
    }
}

/// The bytes cut at every length: each prefix reads (as cut short) or fails
/// without a panic, and when the whole reads, what a prefix reads is the
/// start of it (a killed recording reads up to its last flush).
pub fn rtr_cut(data: &[u8]) {
    let whole = Trace::read(data).ok();
    for len in 0..data.len() {
        let Ok(part) = Trace::read(&data[..len]) else {
            continue;
        };
        if let Some(whole) = &whole {
            let n = part.events.len();
            assert!(
                n <= whole.events.len(),
                "{len} bytes read more events than all"
            );
            let op = |t: &Trace| -> Vec<_> {
                // Stacks are named per segment, and a cut can lose a stack's record.
                t.events[..n]
                    .iter()
                    .map(|e| (e.op, e.ptr, e.size, e.ret, e.time_ns))
                    .collect()
            };
            assert_eq!(
                op(&part),
                op(whole),
                "the first {len} bytes read other events"
            );
        }
    }
}

/// A malloc-lab `.rep` file.
pub fn rep(data: &[u8]) {
    import(data, Format::Rep, "in.rep");
}

/// `valgrind --trace-malloc=yes` output.
pub fn valgrind(data: &[u8]) {
    import(data, Format::Valgrind, "in.vg");
}

/// A wee_alloc trace.
pub fn wee_alloc(data: &[u8]) {
    import(data, Format::WeeAlloc, "in.trace");
}

/// retype's CSV.
pub fn csv(data: &[u8]) {
    import(data, Format::Csv, "in.csv");
}

/// `trace convert --from FORMAT` of a file holding `data`.
fn import(data: &[u8], from: Format, name: &str) {
    let path = scratch::file(name, data);
    match format::load(&path, Some(from)) {
        Ok(t) => use_trace(&t),
        Err(e) => place::assert_names_place(&e, &path),
    }
}

/// What the commands do with a trace that reads: info, sites, and convert
/// to every output format; the `.rtr` copy reads back equal.
fn use_trace(t: &Trace) {
    let _ = Summary::of(t);
    let _ = per_stack(t, Window::ALL);
    for (to, name) in [(Format::Csv, "out.csv"), (Format::Rep, "out.rep")] {
        let path = scratch::remove(name);
        format::save(t, &path, to).unwrap_or_else(|e| panic!("convert to {to}: {e:#}"));
    }
    let mut bytes = Vec::new();
    t.write(&mut bytes).expect("a Vec takes every byte");
    let back = Trace::read(&bytes[..]).unwrap_or_else(|e| panic!("its .rtr copy: {e}"));
    // Stacks may be numbered otherwise in the copy; each event keeps its frames.
    let frames = |t: &Trace| -> Vec<_> {
        let of = |e| t.stack_of(e).map(|s| (s.frames.clone(), s.truncated));
        t.events
            .iter()
            .map(|e| (Event { stack: 0, ..*e }, of(e)))
            .collect()
    };
    assert_eq!(
        frames(&back),
        frames(t),
        "the .rtr copy reads back other events"
    );
    let rest = |t: &Trace| {
        (
            t.meta.clone(),
            t.threads.clone(),
            t.segments.clone(),
            t.modules.clone(),
        )
    };
    assert_eq!(rest(&back), rest(t), "the .rtr copy reads back otherwise");
}
