//! A capability: its type, the region it names, rights, badge, and for a
//! Mapping what it maps where. Also the mapping database's ordering key.

use core::cmp::Ordering;

use super::types::CapType;

/// Access rights (Barrelfish's READ, WRITE, EXECUTE, GRANT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Rights(u8);

impl Rights {
    pub const NONE: Rights = Rights(0);
    pub const READ: Rights = Rights(1);
    pub const WRITE: Rights = Rights(2);
    pub const EXECUTE: Rights = Rights(4);
    pub const GRANT: Rights = Rights(8);
    pub const ALL: Rights = Rights(15);
    pub const RW: Rights = Rights(3);

    pub fn bits(self) -> u8 {
        self.0
    }

    pub fn from_bits(bits: u8) -> Rights {
        Rights(bits & Rights::ALL.0)
    }

    pub fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn intersect(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }
}

/// Where a Mapping capability's entries are: which page table (by its
/// object base), which entries, and what part of the mapped object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MapInfo {
    /// Base address of the page table object holding the entries.
    pub ptable: u64,
    pub entry: u16,
    pub pte_count: u16,
    /// Byte offset of the first mapped byte inside the mapped object.
    pub offset: u64,
    /// The mapped object: its type, base and size.
    pub target: CapType,
    pub target_base: u64,
    pub target_size: u64,
    pub flags: Rights,
}

/// A capability as stored in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cap {
    pub ty: CapType,
    pub base: u64,
    pub size: u64,
    pub rights: Rights,
    /// seL4 badge of an Endpoint or Notification; 0 is unbadged.
    pub badge: u64,
    pub map: Option<MapInfo>,
}

impl Cap {
    /// A fresh capability with all rights, as retype makes it.
    pub fn new(ty: CapType, base: u64, size: u64) -> Cap {
        Cap {
            ty,
            base,
            size,
            rights: Rights::ALL,
            badge: 0,
            map: None,
        }
    }

    pub fn end(&self) -> u64 {
        self.base + self.size
    }

    /// The ordering key: everything but rights, which copies may differ in.
    pub fn key(&self) -> Key {
        let eq = match self.map {
            Some(m) => [m.ptable, m.entry as u64],
            None => [self.badge, 0],
        };
        Key {
            root: self.ty.root(),
            ty: self.ty as u8,
            base: self.base,
            size: self.size,
            eq,
        }
    }

    /// Two capabilities are copies when they name the same object the same way.
    pub fn is_copy(&self, other: &Cap) -> bool {
        self.key() == other.key()
    }
}

/// The mapping database's ordering key without the tie-breaking slot id:
/// (type root, base, −size, type, equality fields) (seed 001 §4.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Key {
    pub root: u8,
    pub ty: u8,
    pub base: u64,
    pub size: u64,
    pub eq: [u64; 2],
}

impl Key {
    /// The key of no capability: what an unused slot of a mapping database holds.
    pub const EMPTY: Key = Key {
        root: 0,
        ty: 0,
        base: 0,
        size: 0,
        eq: [0, 0],
    };

    pub fn end(&self) -> u64 {
        self.base + self.size
    }
}

impl Ord for Key {
    fn cmp(&self, o: &Key) -> Ordering {
        self.root
            .cmp(&o.root)
            .then(self.base.cmp(&o.base))
            .then(o.size.cmp(&self.size))
            .then(self.ty.cmp(&o.ty))
            .then(self.eq.cmp(&o.eq))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Key) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
