//! A vector of mostly empty entries whose copies share storage until they
//! are written: its elements sit in fixed chunks behind reference counts, a
//! write copies only the chunk it lands in, and chunks never written are
//! one shared chunk of defaults that iteration and hashing skip.
//!
//! Why: the slots of a CSpace and their protocol state are hundreds of
//! entries of which few are in use and a step changes one or two, and the
//! model checker (`retype caps check`) copies a node at every step, hashes
//! it, checks it and keeps every node on its search path. Whole vectors
//! made a step cost tens of kilobytes copied and hashed. A general
//! persistent vector (rpds's) shares as well, but walking its tree to
//! iterate took half of the checker's time.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::ops::{Index, IndexMut};

/// Elements per chunk: small enough that a write copies little, large
/// enough that a copy of the vector is a short list of pointers.
const CHUNK: usize = 16;

/// Every element at or past `len` is the default.
#[derive(Clone)]
pub struct CowVec<T> {
    chunks: Vec<Arc<[T; CHUNK]>>,
    /// The chunk of defaults every unwritten chunk shares.
    empty: Arc<[T; CHUNK]>,
    len: usize,
}

impl<T: Copy + Default> Default for CowVec<T> {
    fn default() -> Self {
        CowVec {
            chunks: Vec::new(),
            empty: Arc::new([T::default(); CHUNK]),
            len: 0,
        }
    }
}

impl<T: Copy + Default + PartialEq> CowVec<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| &self.chunks[i / CHUNK][i % CHUNK])
    }

    /// The element `i`, the chunk holding it copied first if it is shared.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        (i < self.len).then(|| &mut Arc::make_mut(&mut self.chunks[i / CHUNK])[i % CHUNK])
    }

    /// Grows to `len` elements, the new ones default.
    pub fn grow(&mut self, len: usize) {
        while self.chunks.len() * CHUNK < len {
            self.chunks.push(Arc::clone(&self.empty));
        }
        self.len = self.len.max(len);
    }

    /// The chunks that were ever written, with the index of their first
    /// element.
    fn written(&self) -> impl Iterator<Item = (usize, &[T; CHUNK])> {
        let empty = &self.empty;
        self.chunks
            .iter()
            .enumerate()
            .filter(move |(_, c)| !Arc::ptr_eq(c, empty))
            .map(|(k, c)| (k * CHUNK, &**c))
    }

    /// Every element that is not the default, with its index, in order.
    pub fn occupied(&self) -> impl Iterator<Item = (usize, &T)> {
        self.written().flat_map(|(first, c)| {
            c.iter()
                .enumerate()
                .filter(|(_, x)| **x != T::default())
                .map(move |(j, x)| (first + j, x))
        })
    }
}

impl<T: Copy + Default + PartialEq> Index<usize> for CowVec<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        self.get(i).expect("index in bounds")
    }
}

impl<T: Copy + Default + PartialEq> IndexMut<usize> for CowVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.get_mut(i).expect("index in bounds")
    }
}

impl<T: Copy + Default + PartialEq> PartialEq for CowVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.occupied().eq(other.occupied())
    }
}

impl<T: Copy + Default + Eq> Eq for CowVec<T> {}

/// Its length and the elements that are not the default, with their
/// indices: what equality compares.
impl<T: Copy + Default + PartialEq + Hash> Hash for CowVec<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_usize(self.len);
        self.occupied().for_each(|x| x.hash(h));
    }
}

impl<T: Copy + Default + PartialEq + fmt::Debug> fmt::Debug for CowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.occupied()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;
    use proptest::prelude::*;
    use std::collections::hash_map::RandomState;

    fn occupied(v: &[u8]) -> Vec<(usize, &u8)> {
        v.iter().enumerate().filter(|(_, x)| **x != 0).collect()
    }

    proptest! {
        /// Against a plain vector: every write and growth of a copy shows
        /// in that copy alone; equal vectors hash alike.
        #[test]
        fn copies_are_independent(ops in prop::collection::vec((0usize..80, 0u8..4, any::<bool>()), 1..200)) {
            let (mut a, mut b) = (CowVec::default(), CowVec::default());
            let (mut ra, mut rb): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
            let hasher = RandomState::new();
            for (i, v, copy) in ops {
                if copy {
                    b = a.clone();
                    rb = ra.clone();
                }
                if i >= a.len() {
                    a.grow(i + 1);
                    ra.resize(i + 1, 0);
                }
                a[i] = v;
                ra[i] = v;
                prop_assert_eq!(a.occupied().collect::<Vec<_>>(), occupied(&ra));
                prop_assert_eq!(b.occupied().collect::<Vec<_>>(), occupied(&rb));
                prop_assert_eq!(a.len(), ra.len());
                prop_assert!((0..ra.len()).all(|i| a[i] == ra[i]));
                prop_assert_eq!(a == b, ra == rb);
                if a == b {
                    prop_assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
                }
            }
        }
    }
}
