//! `retype_malloc::stats()` against a model: threads allocate and free blocks of known sizes
//! and the figures move by exactly their size classes' sizes (large blocks: by the bytes asked
//! for); the heaps' bytes add up to the totals, glibc's `mallinfo2` fields hold together, and
//! the JSON and XML forms carry the same figures. Only the model test allocates with this
//! allocator (the harness uses the system's), and its threads run one after the other, so
//! every heap can be walked when the statistics are taken.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use retype_malloc::{self as rm, size_class, HeapState, Stats};

/// What the model predicts the statistics move by.
#[derive(Debug, Default, PartialEq, Eq)]
struct Moved {
    in_use: usize,
    large_blocks: usize,
    large_live: usize,
}

fn moved(before: &Stats, after: &Stats) -> Moved {
    Moved {
        in_use: after.heap_total().in_use - before.heap_total().in_use,
        large_blocks: after.large_blocks - before.large_blocks,
        large_live: after.large_live - before.large_live,
    }
}

/// What a block of `size` bytes adds in the model.
fn model(size: usize) -> Moved {
    if size <= size_class::MEDIUM_MAX {
        Moved {
            in_use: size_class::block_size(size_class::class_of(size)),
            ..Moved::default()
        }
    } else {
        Moved {
            in_use: 0,
            large_blocks: 1,
            large_live: size,
        }
    }
}

fn add(a: &mut Moved, b: Moved) {
    a.in_use += b.in_use;
    a.large_blocks += b.large_blocks;
    a.large_live += b.large_live;
}

/// The sums and identities every snapshot keeps.
fn check_holds_together(s: &Stats) {
    for h in &s.heaps {
        let b = &h.bytes;
        assert_eq!(b.held, b.in_use + b.free + b.kept + b.spilled, "{h:?}");
    }
    let t = s.heap_total();
    assert_eq!(t.held, s.heaps.iter().map(|h| h.bytes.held).sum::<usize>());
    assert_eq!(
        t.in_use,
        s.heaps.iter().map(|h| h.bytes.in_use).sum::<usize>()
    );
    assert!(t.held <= s.segment_bytes, "{s:?}");
    assert_eq!(s.segment_bytes, s.segments * rm::SEGMENT_SIZE);
    assert_eq!(
        s.mapped,
        s.segment_bytes + s.cached + s.reserve + s.large_mapped
    );
    assert!(s.mapped <= s.mapped_peak);
    assert!(s.large_live <= s.large_mapped);
    let m = s.mallinfo();
    assert_eq!(m.arena, m.uordblks + m.fordblks, "{m:?}");
    assert_eq!(m.arena + m.hblkhd, s.mapped);
    assert_eq!((m.uordblks, m.hblks), (t.in_use, s.large_blocks));
    assert!(m.fsmblks <= m.fordblks && m.keepcost <= m.fordblks, "{m:?}");
}

/// The most bytes seen in spills, to check that the model test saw some.
static SPILLED: AtomicUsize = AtomicUsize::new(0);

/// Blocks of a thread: their sizes, and whether each is freed before the others.
type Blocks = Vec<(usize, bool)>;

fn threads() -> impl Strategy<Value = Vec<Blocks>> {
    let size = prop_oneof![
        // Sizes repeated fill pages, and frees into full pages spill.
        4 => prop::sample::select(vec![24usize, 1000, 16 * 1024, 64 * 1024]),
        4 => 1usize..=1024,
        3 => 1025usize..=size_class::MEDIUM_MAX,
        1 => size_class::MEDIUM_MAX + 1..=1usize << 20,
    ];
    prop::collection::vec(prop::collection::vec((size, any::<bool>()), 1..80), 1..4)
}

/// Each thread, one after another, allocates its blocks, frees those marked, then the
/// rest: the statistics its own thread takes move as the model says at each step.
#[test]
fn stats_move_as_the_blocks_do() {
    // First the case a CI run drew: a thread of large blocks only, which takes no heap.
    one_thread(vec![(size_class::MEDIUM_MAX + 1, false), (1 << 20, true)]);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(24));
    runner
        .run(&threads(), |threads| {
            threads.into_iter().for_each(one_thread);
            let s = rm::stats();
            check_holds_together(&s);
            // The threads exited: their heaps wait in the pool, walked.
            assert!(
                s.heaps.iter().all(|h| h.state == HeapState::Abandoned),
                "{s:?}"
            );
            Ok(())
        })
        .unwrap();
    assert!(SPILLED.load(Ordering::Relaxed) > 0, "no case spilled");
}

/// Runs a thread that allocates `blocks`, checking the statistics it takes.
fn one_thread(blocks: Blocks) {
    std::thread::spawn(move || {
        let before = rm::stats();
        check_holds_together(&before);
        assert!(before.heaps.iter().all(|h| h.state != HeapState::Running));
        let mut expect = Moved::default();
        let live: Vec<(usize, bool)> = blocks
            .iter()
            .map(|&(size, early)| {
                // SAFETY: plain allocation, freed below.
                let p = unsafe { rm::malloc(size) };
                assert!(!p.is_null());
                add(&mut expect, model(size));
                (p as usize, early)
            })
            .collect();
        let during = rm::stats();
        check_holds_together(&during);
        assert_eq!(moved(&before, &during), expect);
        // A thread takes a heap at its first small or medium block; large blocks need none.
        let small = blocks
            .iter()
            .any(|&(size, _)| size <= size_class::MEDIUM_MAX);
        assert_eq!(
            during.heaps.iter().any(|h| h.state == HeapState::Own),
            small,
            "{blocks:?}"
        );

        let mut left = Moved::default();
        for (&(p, early), &(size, _)) in live.iter().zip(&blocks) {
            if early {
                // SAFETY: a live block of this thread, freed once.
                unsafe { rm::free(p as *mut u8) };
            } else {
                add(&mut left, model(size));
            }
        }
        let after_some = rm::stats();
        check_holds_together(&after_some);
        SPILLED.fetch_max(after_some.heap_total().spilled, Ordering::Relaxed);
        assert_eq!(moved(&before, &after_some), left);

        for &(p, early) in &live {
            if !early {
                // SAFETY: as above.
                unsafe { rm::free(p as *mut u8) };
            }
        }
        let after = rm::stats();
        check_holds_together(&after);
        assert_eq!(moved(&before, &after), Moved::default());
    })
    .join()
    .unwrap();
}

/// The JSON form parses, has the documented keys, and carries the figures.
#[test]
fn the_json_form_carries_the_figures() {
    let s = rm::stats();
    let mut text = Vec::new();
    s.write_json(&mut |piece| text.extend_from_slice(piece));
    let v: serde_json::Value = serde_json::from_slice(&text)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&text)));
    let get = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}")) as usize;
    assert_eq!(get("mapped"), s.mapped);
    assert_eq!(get("large_blocks"), s.large_blocks);
    assert_eq!(get("segment_bytes"), s.segment_bytes);
    assert!(
        v["small_live"].is_null(),
        "counted only with RETYPE_MALLOC_STATS"
    );
    let keys = [
        "mapped",
        "mapped_peak",
        "segments",
        "segment_bytes",
        "cached",
        "cached_segments",
        "cached_returned",
        "reserve",
        "large_mapped",
        "large_blocks",
        "large_live",
        "small_live",
        "live_peak",
        "pages_claimed",
        "heaps_created",
        "heaps_adopted",
        "purged",
        "system_calls",
        "heap_total",
        "heaps",
    ];
    let mut have: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut want = keys.to_vec();
    have.sort();
    want.sort();
    assert_eq!(have, want);
    let heaps = v["heaps"].as_array().unwrap();
    assert_eq!(heaps.len(), s.heaps.len());
    let t = &v["heap_total"];
    for key in ["held", "in_use", "free", "kept", "spilled"] {
        let sum: u64 = heaps.iter().map(|h| h[key].as_u64().unwrap()).sum();
        assert_eq!(t[key].as_u64(), Some(sum), "{key}");
    }
    assert_eq!(t["heaps"].as_u64(), Some(s.heaps.len() as u64));
    for (h, j) in s.heaps.iter().zip(heaps) {
        assert_eq!(j["state"], h.state.name());
        assert_eq!(j["held"].as_u64(), Some(h.bytes.held as u64));
    }
}

/// An element of the XML form: its name and attributes.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    depth: usize,
}

/// Parses `xml` as far as `malloc_info`'s form needs (elements with quoted attributes, no
/// text), failing unless it is well formed: tags closed in order, one root.
fn elements(xml: &str) -> Vec<Element> {
    let mut open: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut rest = xml.trim();
    let mut roots = 0;
    while !rest.is_empty() {
        assert!(rest.starts_with('<'), "text outside tags: {rest:.40}");
        let end = rest.find('>').expect("unclosed tag");
        let tag = &rest[1..end];
        rest = rest[end + 1..].trim_start();
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                open.pop().as_deref(),
                Some(name),
                "closing tag out of order"
            );
            continue;
        }
        let (body, empty) = match tag.strip_suffix('/') {
            Some(b) => (b, true),
            None => (tag, false),
        };
        let mut words = body.split(' ');
        let name = words.next().unwrap().to_string();
        assert!(name.chars().all(|c| c.is_ascii_alphabetic()), "{name}");
        let attrs = words
            .map(|w| {
                let (k, v) = w.split_once('=').expect("attribute without value");
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .expect("unquoted attribute");
                (k.to_string(), v.to_string())
            })
            .collect();
        if open.is_empty() {
            roots += 1;
        }
        out.push(Element {
            name: name.clone(),
            attrs,
            depth: open.len(),
        });
        if !empty {
            open.push(name);
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    assert_eq!(roots, 1);
    out
}

fn attr(e: &Element, k: &str) -> usize {
    e.attrs
        .iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("{k} in {e:?}"))
        .1
        .parse()
        .unwrap()
}

/// The XML form is well formed, has a `<heap>` per thread heap with its bytes held, and its
/// totals are those of `mallinfo2`.
#[test]
fn the_xml_form_is_glibcs_with_the_same_totals() {
    let s = rm::stats();
    let mut text = Vec::new();
    s.write_xml(&mut |piece| text.extend_from_slice(piece));
    let text = String::from_utf8(text).unwrap();
    let all = elements(&text);
    assert_eq!(all[0].name, "malloc");
    let heaps: Vec<&Element> = all.iter().filter(|e| e.name == "heap").collect();
    assert_eq!(heaps.len(), s.heaps.len(), "{text}");
    let held: Vec<usize> = all
        .iter()
        .filter(|e| e.depth == 2 && e.name == "system" && e.attrs[0].1 == "current")
        .map(|e| attr(e, "size"))
        .collect();
    assert_eq!(
        held,
        s.heaps.iter().map(|h| h.bytes.held).collect::<Vec<_>>()
    );
    let total = |name: &str, kind: &str| {
        let e = all
            .iter()
            .find(|e| e.depth == 1 && e.name == name && e.attrs[0].1 == kind)
            .unwrap_or_else(|| panic!("{name} {kind} in {text}"));
        (attr(e, "count"), attr(e, "size"))
    };
    let m = s.mallinfo();
    assert_eq!(total("total", "fast"), (m.smblks, m.fsmblks));
    assert_eq!(
        total("total", "fast").1 + total("total", "rest").1,
        m.fordblks
    );
    assert_eq!(total("total", "mmap"), (m.hblks, m.hblkhd));
    let size = |kind| {
        let e = all
            .iter()
            .find(|e| e.depth == 1 && e.name == "system" && e.attrs[0].1 == kind)
            .unwrap();
        attr(e, "size")
    };
    assert_eq!(size("current"), s.mapped);
    assert_eq!(size("max"), s.mapped_peak);
}
