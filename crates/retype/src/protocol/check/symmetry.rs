//! The symmetry reduction: states that differ only by how their
//! operations are numbered are one class, counted and explored once.
//!
//! The node code uses an operation id only as a name (see
//! `retype_core::caps::protocol::symmetry`), and so does the model: a
//! start takes the lowest free id, which a renaming maps onto another free
//! id of the renamed state, and an id is freed when nothing names it. So a
//! renaming of ids maps every step onto a step, properties keep their
//! truth, and a class's states have the same futures up to renaming: the
//! search may explore one state per class (docs/model-check.md).
//!
//! A class is named without trying renamings: every part of a state names
//! at most one operation (a message, a slot's lock, an operation's entry in
//! the model, ...), so a state is what names none plus, per id, the set of
//! parts naming it. The key hashes the first and the sorted list of the
//! sets' hashes (each a sum of its parts' hashes, the id left out); a task
//! is named by its place in that list, which every state of the class
//! gives it.

use std::hash::{BuildHasher, Hash, Hasher};

use retype_core::caps::protocol::symmetry::anonymous;

use super::model::{Op, State};
use super::search::{hasher, Canon, TASKS};

/// Where a part of the model's own state sits, so that equal contents of
/// two kinds hash apart.
#[derive(Hash)]
enum Part {
    Message,
    Operation,
}

/// The class of `s` under renaming of operation ids.
pub fn canon(s: &State) -> Canon {
    let b = hasher();
    let mut h = b.build_hasher();
    let mut parts = [0u64; TASKS];
    let mut add = |id: u64, x: u64| {
        let p = &mut parts[id as usize];
        *p = p.wrapping_add(x);
    };
    for n in &s.nodes {
        n.hash_by_op(&mut h, &b, &mut add);
    }
    for (c, q) in s.chans.iter().enumerate() {
        h.write_usize(q.len());
        for (i, m) in q.iter().enumerate() {
            add(m.op().id, b.hash_one((Part::Message, c, i, anonymous(m))));
        }
    }
    for (id, op) in s.ops.iter().enumerate() {
        if *op != Op::Free {
            add(id as u64, b.hash_one((Part::Operation, op)));
        }
    }
    s.broken.hash(&mut h);
    // Ids named nowhere are free and interchangeable: they rank last.
    let mut ids: Vec<(bool, u64, usize)> = (0..s.ops.len())
        .map(|i| (s.ops[i] == Op::Free && parts[i] == 0, parts[i], i))
        .collect();
    ids.sort_unstable();
    h.write_usize(ids.iter().filter(|i| !i.0).count());
    let mut rank = [0; TASKS];
    for (r, &(free, part, i)) in ids.iter().enumerate() {
        if !free {
            h.write_u64(part);
        }
        rank[i] = r as u8;
    }
    Canon {
        key: h.finish(),
        rank,
    }
}
