//! The baseline: seL4's derivation list, a doubly-linked list in preorder of
//! the derivation forest (the same order as the tree). Inserting a capability
//! whose neighbours are unknown and looking for ancestors walk the list.

use alloc::vec::Vec;

use super::{starts_inside, CapId, Found, Mdb, MdbError, RangeQuery, Relation};
use crate::caps::cap::Key;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Link {
    key: Key,
    prev: u32,
    next: u32,
    live: bool,
}

const EMPTY: Link = Link {
    key: Key::EMPTY,
    prev: NIL,
    next: NIL,
    live: false,
};

/// The doubly-linked list mapping database.
#[derive(Clone, Debug, PartialEq)]
pub struct List {
    links: Vec<Link>,
    head: u32,
    len: usize,
}

impl List {
    fn link(&self, n: u32) -> &Link {
        &self.links[n as usize]
    }

    fn opt(n: u32) -> Option<CapId> {
        (n != NIL).then_some(n)
    }
}

impl Mdb for List {
    fn new() -> List {
        List {
            links: Vec::new(),
            head: NIL,
            len: 0,
        }
    }

    fn name(&self) -> &'static str {
        "list"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn insert(&mut self, id: CapId, key: Key) -> Result<(), MdbError> {
        if self.contains(id) {
            return Err(MdbError::DuplicateEntry);
        }
        if self.links.len() <= id as usize {
            self.links.resize(id as usize + 1, EMPTY);
        }
        let (mut prev, mut next) = (NIL, self.head);
        while next != NIL && (self.link(next).key, next) < (key, id) {
            prev = next;
            next = self.link(next).next;
        }
        self.links[id as usize] = Link {
            key,
            prev,
            next,
            live: true,
        };
        match prev {
            NIL => self.head = id,
            p => self.links[p as usize].next = id,
        }
        if next != NIL {
            self.links[next as usize].prev = id;
        }
        self.len += 1;
        Ok(())
    }

    fn remove(&mut self, id: CapId) -> Result<(), MdbError> {
        if !self.contains(id) {
            return Err(MdbError::EntryNotFound);
        }
        let Link { prev, next, .. } = *self.link(id);
        match prev {
            NIL => self.head = next,
            p => self.links[p as usize].next = next,
        }
        if next != NIL {
            self.links[next as usize].prev = prev;
        }
        self.links[id as usize] = EMPTY;
        self.len -= 1;
        Ok(())
    }

    fn contains(&self, id: CapId) -> bool {
        self.links.get(id as usize).is_some_and(|l| l.live)
    }

    fn key(&self, id: CapId) -> Option<Key> {
        self.contains(id).then(|| self.link(id).key)
    }

    fn first(&self) -> Option<CapId> {
        List::opt(self.head)
    }

    fn successor(&self, id: CapId) -> Option<CapId> {
        self.contains(id).then(|| List::opt(self.link(id).next))?
    }

    fn predecessor(&self, id: CapId) -> Option<CapId> {
        self.contains(id).then(|| List::opt(self.link(id).prev))?
    }

    fn seek(&self, k: &Key, inclusive: bool) -> Option<CapId> {
        let mut n = self.head;
        while n != NIL {
            let x = &self.link(n).key;
            if x > k || (inclusive && x == k) {
                return Some(n);
            }
            n = self.link(n).next;
        }
        None
    }

    fn has_descendants(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let mut n = self.link(id).next;
        while n != NIL && self.link(n).key == k {
            n = self.link(n).next;
        }
        n != NIL && starts_inside(&self.link(n).key, &k)
    }

    fn has_ancestors(&self, id: CapId) -> bool {
        let Some(k) = self.key(id) else { return false };
        let mut n = self.link(id).prev;
        while n != NIL {
            let a = self.link(n).key;
            if a.root != k.root {
                return false;
            }
            if a != k && a.end() >= k.end() {
                return true;
            }
            n = self.link(n).prev;
        }
        false
    }

    fn query(&self, root: u8, addr: u64, size: u64, max: Relation) -> Found {
        let mut q = RangeQuery::new(root, addr, size, max);
        let mut n = self.head;
        while n != NIL {
            let k = self.link(n).key;
            if (k.root, k.base) >= (root, addr + size) || q.offer(n, &k) {
                break;
            }
            n = self.link(n).next;
        }
        q.best
    }
}
