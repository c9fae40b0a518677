//! Shadow page tables (seed 001 §3.5.2): the application's own record of
//! what it mapped, so that finding a mapping, its capabilities or a free
//! stretch of address space needs no invocation. A tree of 512-entry tables
//! as the hardware's (9 bits of the page number a level, 4 KiB pages at the
//! leaves); each leaf-table entry is a mapping of one or more consecutive
//! pages within that table, with the capabilities behind it.
//!
//! Barrelfish tried two ways to hold a table's entries, both here
//! ([`Kind`]): a linked list ordered by entry index (memory in proportion to
//! the mappings, a lookup walks the list), or an array of 512 slots (memory
//! in proportion to the tables, a lookup is one index). [`Shadow::bytes`]
//! counts what each holds (Figure 3.1).

use retype_core::caps::{CapRef, Rights};

/// Entries per table, and the bits of the page number each level takes.
const ENTRIES: usize = 512;
const BITS: u32 = 9;
const PAGE_BITS: u32 = 12;

/// What the application keeps about one mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The Mapping capability the `map` invocation made.
    pub mapping: CapRef,
    /// The Frame mapped, and the offset into it of the first page.
    pub frame: CapRef,
    pub offset: u64,
    /// Pages mapped, all in one leaf table.
    pub pages: u16,
    pub rights: Rights,
}

/// How a table holds its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    List,
    Array,
}

/// Why an insertion was refused (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShadowError {
    /// The pages overlap a mapping already recorded.
    Overlap,
    /// The mapping has no pages, crosses its leaf table's end, or lies
    /// beyond the levels' reach.
    Shape,
}

enum Item {
    Table(Box<Table>),
    Map(Entry),
}

struct Link {
    index: u16,
    span: u16,
    item: Item,
    next: Option<Box<Link>>,
}

/// One table's entries.
enum Table {
    /// Ordered by index.
    List(Option<Box<Link>>),
    /// One pointer a slot, as Barrelfish's array of vnodes; `owner[i]`: the
    /// slot whose item covers slot `i` (`FREE` if none).
    Array {
        items: Box<[Option<Box<Item>>]>,
        owner: Box<[u16]>,
    },
}

const FREE: u16 = u16::MAX;

impl Table {
    fn new(kind: Kind) -> Table {
        match kind {
            Kind::List => Table::List(None),
            Kind::Array => Table::Array {
                items: (0..ENTRIES).map(|_| None).collect(),
                owner: vec![FREE; ENTRIES].into_boxed_slice(),
            },
        }
    }

    /// The item covering slot `i`, with its first slot.
    fn covering(&self, i: u16) -> Option<(u16, &Item)> {
        match self {
            Table::List(head) => {
                let mut l = head.as_deref();
                while let Some(link) = l {
                    if link.index > i {
                        return None;
                    }
                    if i < link.index + link.span {
                        return Some((link.index, &link.item));
                    }
                    l = link.next.as_deref();
                }
                None
            }
            Table::Array { items, owner } => {
                let at = owner[i as usize];
                (at != FREE).then(|| (at, &**items[at as usize].as_ref().expect("owned")))
            }
        }
    }

    fn covering_mut(&mut self, i: u16) -> Option<&mut Item> {
        match self {
            Table::List(head) => {
                let mut l = head.as_deref_mut();
                while let Some(link) = l {
                    if link.index > i {
                        return None;
                    }
                    if i < link.index + link.span {
                        return Some(&mut link.item);
                    }
                    l = link.next.as_deref_mut();
                }
                None
            }
            Table::Array { items, owner } => {
                let at = owner[i as usize];
                (at != FREE).then(|| &mut **items[at as usize].as_mut().expect("owned"))
            }
        }
    }

    /// Puts `item` over slots `[i, i + span)`, all of which must be free.
    fn insert(&mut self, i: u16, span: u16, item: Item) -> Result<(), ShadowError> {
        if (i..i + span).any(|s| self.covering(s).is_some()) {
            return Err(ShadowError::Overlap);
        }
        match self {
            Table::List(head) => {
                let mut at = head;
                while at.as_ref().is_some_and(|l| l.index < i) {
                    at = &mut at.as_mut().expect("checked").next;
                }
                let next = at.take();
                *at = Some(Box::new(Link {
                    index: i,
                    span,
                    item,
                    next,
                }));
            }
            Table::Array { items, owner } => {
                items[i as usize] = Some(Box::new(item));
                owner[i as usize..(i + span) as usize].fill(i);
            }
        }
        Ok(())
    }

    /// Takes out the item whose first slot is `i`.
    fn remove(&mut self, i: u16) -> Option<Item> {
        match self {
            Table::List(head) => {
                let mut at = head;
                while at.as_ref().is_some_and(|l| l.index < i) {
                    at = &mut at.as_mut().expect("checked").next;
                }
                if at.as_ref().is_none_or(|l| l.index != i) {
                    return None;
                }
                let link = at.take().expect("checked");
                *at = link.next;
                Some(link.item)
            }
            Table::Array { items, owner } => {
                let item = items[i as usize].take()?;
                owner
                    .iter_mut()
                    .filter(|o| **o == i)
                    .for_each(|o| *o = FREE);
                Some(*item)
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Table::List(head) => head.is_none(),
            Table::Array { owner, .. } => owner.iter().all(|&o| o == FREE),
        }
    }

    /// The items in slot order: (first slot, slots, item).
    fn items(&self) -> Vec<(u16, u16, &Item)> {
        match self {
            Table::List(head) => {
                let mut out = Vec::new();
                let mut l = head.as_deref();
                while let Some(link) = l {
                    out.push((link.index, link.span, &link.item));
                    l = link.next.as_deref();
                }
                out
            }
            Table::Array { items, owner } => (0..ENTRIES as u16)
                .filter_map(|i| {
                    let item = &**items[i as usize].as_ref()?;
                    let span = owner.iter().filter(|&&o| o == i).count() as u16;
                    Some((i, span, item))
                })
                .collect(),
        }
    }

    /// Bytes this table and the tables under it hold.
    fn bytes(&self) -> usize {
        let own = match self {
            Table::List(_) => self.items().len() * std::mem::size_of::<Link>(),
            Table::Array { items, owner } => {
                let held = items.iter().flatten().count() * std::mem::size_of::<Item>();
                std::mem::size_of_val(&**items) + std::mem::size_of_val(&**owner) + held
            }
        };
        let below: usize = self
            .items()
            .iter()
            .map(|(_, _, item)| match item {
                Item::Table(t) => std::mem::size_of::<Table>() + t.bytes(),
                Item::Map(_) => 0,
            })
            .sum();
        own + below
    }
}

/// An address space's shadow page tables: `levels` levels of tables, so
/// virtual addresses below 2^(12 + 9 × levels).
pub struct Shadow {
    kind: Kind,
    levels: u32,
    root: Table,
}

impl Shadow {
    pub fn new(kind: Kind, levels: u32) -> Shadow {
        assert!((1..=4).contains(&levels), "{levels} levels");
        Shadow {
            kind,
            levels,
            root: Table::new(kind),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Bytes of address space the tables reach.
    pub fn reach(&self) -> u64 {
        1 << (PAGE_BITS + BITS * self.levels)
    }

    /// The slot of page `page` at `level` (0: the leaf table).
    fn slot(page: u64, level: u32) -> u16 {
        ((page >> (BITS * level)) & (ENTRIES as u64 - 1)) as u16
    }

    /// Records a mapping of `e.pages` pages from `va` (page aligned).
    pub fn insert(&mut self, va: u64, e: Entry) -> Result<(), ShadowError> {
        let page = va >> PAGE_BITS;
        let i = Self::slot(page, 0);
        if !va.is_multiple_of(1 << PAGE_BITS)
            || va >= self.reach()
            || e.pages == 0
            || i as usize + e.pages as usize > ENTRIES
        {
            return Err(ShadowError::Shape);
        }
        let kind = self.kind;
        let mut t = &mut self.root;
        for level in (1..self.levels).rev() {
            let s = Self::slot(page, level);
            if t.covering(s).is_none() {
                t.insert(s, 1, Item::Table(Box::new(Table::new(kind))))?;
            }
            t = match t.covering_mut(s) {
                Some(Item::Table(next)) => next.as_mut(),
                _ => unreachable!("interior slots hold tables"),
            };
        }
        t.insert(i, e.pages, Item::Map(e))
    }

    /// The mapping covering `va`, with the address of its first page.
    pub fn lookup(&self, va: u64) -> Option<(u64, &Entry)> {
        if va >= self.reach() {
            return None;
        }
        let page = va >> PAGE_BITS;
        let mut t = &self.root;
        for level in (1..self.levels).rev() {
            t = match t.covering(Self::slot(page, level))? {
                (_, Item::Table(next)) => next.as_ref(),
                (_, Item::Map(_)) => return None,
            };
        }
        match t.covering(Self::slot(page, 0))? {
            (first, Item::Map(e)) => Some((
                ((page & !(ENTRIES as u64 - 1)) + first as u64) << PAGE_BITS,
                e,
            )),
            (_, Item::Table(_)) => None,
        }
    }

    /// Forgets the mapping whose first page is at `va`; a table left empty
    /// goes too.
    pub fn remove(&mut self, va: u64) -> Option<Entry> {
        if va >= self.reach() {
            return None;
        }
        fn go(t: &mut Table, page: u64, level: u32) -> Option<Entry> {
            let s = Shadow::slot(page, level);
            if level == 0 {
                return match t.remove(s)? {
                    Item::Map(e) => Some(e),
                    Item::Table(_) => unreachable!("leaf slots hold mappings"),
                };
            }
            let Some(Item::Table(next)) = t.covering_mut(s) else {
                return None;
            };
            let e = go(next, page, level - 1)?;
            if next.is_empty() {
                t.remove(s);
            }
            Some(e)
        }
        go(&mut self.root, va >> PAGE_BITS, self.levels - 1)
    }

    /// The mapped ranges in address order: (first page's address, bytes).
    pub fn mappings(&self) -> Vec<(u64, u64)> {
        fn go(t: &Table, base: u64, level: u32, out: &mut Vec<(u64, u64)>) {
            for (i, span, item) in t.items() {
                let page = base + ((i as u64) << (BITS * level));
                match item {
                    Item::Table(next) => go(next, page, level - 1, out),
                    Item::Map(_) => out.push((page << PAGE_BITS, (span as u64) << PAGE_BITS)),
                }
            }
        }
        let mut out = Vec::new();
        go(&self.root, 0, self.levels - 1, &mut out);
        out
    }

    /// The lowest address from which `bytes` (whole pages) are unmapped, as
    /// a virtual-region allocator asks: no invocation needed.
    pub fn find_free(&self, bytes: u64) -> Option<u64> {
        let bytes = bytes.div_ceil(1 << PAGE_BITS) << PAGE_BITS;
        let mut at = 0;
        for (va, len) in self.mappings() {
            if va - at >= bytes {
                return Some(at);
            }
            at = va + len;
        }
        (self.reach() - at >= bytes && bytes > 0).then_some(at)
    }

    /// Bytes the shadow tables hold (Figure 3.1).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Shadow>() + self.root.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    use crate::{Options, Vm};

    /// A slot reference in some real CSpace (the entries are only kept).
    fn entry(n: u32, pages: u16) -> Entry {
        static CSPACE: OnceLock<retype_core::caps::CSpace> = OnceLock::new();
        let cspace = *CSPACE.get_or_init(|| {
            let o = Options {
                ram: 4 << 20,
                dirty_bits: false,
                ..Options::default()
            };
            Vm::new(o).expect("a small space").boot().cspace
        });
        let r = CapRef::l1(cspace, n);
        Entry {
            mapping: r,
            frame: r,
            offset: n as u64,
            pages,
            rights: Rights::RW,
        }
    }

    /// The reference: a map from first page to pages.
    fn model_lookup(m: &BTreeMap<u64, (u16, u32)>, page: u64) -> Option<(u64, u32)> {
        let (&first, &(pages, n)) = m.range(..=page).next_back()?;
        (page < first + pages as u64).then_some((first << PAGE_BITS, n))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// On random inserts and removes both kinds agree with a map of
        /// ranges: every lookup, refusal, the listing and the free search.
        #[test]
        fn both_kinds_behave_as_a_map_of_ranges(
            ops in prop::collection::vec((any::<bool>(), 0u64..2048, 1u16..40), 1..120)
        ) {
            for kind in [Kind::List, Kind::Array] {
                let mut s = Shadow::new(kind, 2);
                let mut m: BTreeMap<u64, (u16, u32)> = BTreeMap::new();
                for (n, &(add, page, pages)) in ops.iter().enumerate() {
                    let va = page << PAGE_BITS;
                    if add {
                        let fits = (page % 512) + pages as u64 <= 512;
                        let free = (page..page + pages as u64).all(|p| model_lookup(&m, p).is_none());
                        let want = if !fits { Err(ShadowError::Shape) }
                            else if !free { Err(ShadowError::Overlap) } else { Ok(()) };
                        prop_assert_eq!(s.insert(va, entry(n as u32, pages)), want);
                        if want.is_ok() { m.insert(page, (pages, n as u32)); }
                    } else {
                        let got = s.remove(va).map(|e| e.offset as u32);
                        prop_assert_eq!(got, m.remove(&page).map(|(_, n)| n));
                    }
                }
                for page in 0..2048 {
                    let got = s.lookup(page << PAGE_BITS).map(|(va, e)| (va, e.offset as u32));
                    prop_assert_eq!(got, model_lookup(&m, page), "{:?} page {}", kind, page);
                }
                let want: Vec<_> = m.iter().map(|(&p, &(n, _))| (p << PAGE_BITS, (n as u64) << PAGE_BITS)).collect();
                prop_assert_eq!(s.mappings(), want);
                // Pages from 2088 on are never mapped, so every run is found below 4096.
                let used: Vec<bool> = (0..4096).map(|p| model_lookup(&m, p).is_some()).collect();
                for pages in [1u64, 7, 100, 600] {
                    let mut run = 0;
                    let first = (0..4096u64).find(|&p| {
                        run = if used[p as usize] { 0 } else { run + 1 };
                        run == pages
                    });
                    let want = first.map(|p| (p + 1 - pages) << PAGE_BITS);
                    prop_assert_eq!(s.find_free(pages << PAGE_BITS), want);
                }
            }
        }
    }

    /// Figure 3.1's shape: the list holds memory in proportion to the
    /// mappings, the array to the tables; emptied, both give the tables back.
    #[test]
    fn a_list_holds_less_than_an_array_and_both_shrink_when_emptied() {
        let mut list = Shadow::new(Kind::List, 4);
        let mut array = Shadow::new(Kind::Array, 4);
        let empty = (list.bytes(), array.bytes());
        // 64 leaf tables, each one mapping of all 512 pages.
        for t in 0..64u64 {
            for s in [&mut list, &mut array] {
                s.insert(t << 21, entry(t as u32, 512)).unwrap();
            }
        }
        assert!(
            list.bytes() * 20 < array.bytes(),
            "{} {}",
            list.bytes(),
            array.bytes()
        );
        let (l1, a1) = (list.bytes(), array.bytes());
        // Twice the mappings in the same tables: the list grows by a link
        // a mapping, the array barely.
        for s in [&mut list, &mut array] {
            for t in 0..64u64 {
                s.remove(t << 21).unwrap();
                s.insert(t << 21, entry(0, 256)).unwrap();
                s.insert((t << 21) + (256 << PAGE_BITS), entry(1, 256))
                    .unwrap();
            }
        }
        // The array holds one more boxed item a mapping, not another table.
        assert!(list.bytes() > l1 && array.bytes() >= a1 && array.bytes() - a1 < a1 / 50);
        for s in [&mut list, &mut array] {
            for t in 0..64u64 {
                s.remove(t << 21).unwrap();
                s.remove((t << 21) + (256 << PAGE_BITS)).unwrap();
            }
        }
        assert_eq!((list.bytes(), array.bytes()), empty);
    }
}
