//! The live blocks of a recorded heap, as one event after another changes
//! them: what [`sites`](crate::sites), [`timeline`](crate::timeline) and the
//! temporaries count all walk the trace through this one model.
//!
//! The rules are [`Summary`](crate::summary::Summary)'s: a realloc frees its
//! old block and allocates a new one at its own stack (as heaptrack counts
//! it), a block handed out at an address still live replaces the old one (a
//! free the trace missed), and a new segment (program image) starts empty.
//!
//! A block is **temporary** by heaptrack's definition: it was freed before
//! the thread that allocated it allocated anything else.
//!
//! In a sampled recording a block counts as what it stands for
//! ([`Kind::weigh`]): its size is the estimate of the bytes, its `calls` the
//! estimate of the calls, so live bytes and every sum over blocks are
//! estimates of the full recording's.

use std::collections::HashMap;

use crate::event::{Event, Op};
use crate::kind::{Kind, Weight};

/// A live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its bytes (in a sampled recording, the estimate of the bytes it stands for).
    pub size: u64,
    /// The calls it stands for: 1 unless the recording is sampled.
    pub calls: u64,
    /// The stack that allocated it (0: none recorded).
    pub stack: u32,
    /// The thread that allocated it, and when the call started.
    pub thread: u32,
    pub born_ns: u64,
    /// Its allocation's number among all allocations, to tell whether it was
    /// its thread's last.
    serial: u64,
}

/// What one event did to the heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The blocks it ended, each with whether it was temporary: a free's or a
    /// realloc's old block, and a block its new one replaced.
    pub freed: [Option<(Block, bool)>; 2],
    /// The block it handed out.
    pub allocated: Option<Block>,
    /// An allocating call that returned NULL.
    pub failed: bool,
}

/// The live blocks by address and their bytes.
pub struct Heap {
    /// What a recorded block stands for.
    kind: Kind,
    live: HashMap<u64, Block>,
    bytes: u64,
    /// Each thread's last allocation, by serial.
    last: HashMap<u32, u64>,
    serial: u64,
}

impl Heap {
    /// An empty heap of a recording of kind `kind`.
    pub fn new(kind: Kind) -> Heap {
        Heap {
            kind,
            live: HashMap::new(),
            bytes: 0,
            last: HashMap::new(),
            serial: 0,
        }
    }

    /// What a recorded allocation of `size` bytes stands for.
    pub fn weigh(&self, size: u64) -> Weight {
        self.kind.weigh(size)
    }

    /// Empties the heap, as a new program image starts.
    pub fn clear(&mut self) {
        self.live.clear();
        self.last.clear();
        self.bytes = 0;
    }

    /// Bytes live now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The live blocks, in no order.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.live.values()
    }

    /// Applies event `e`.
    pub fn apply(&mut self, e: &Event) -> Change {
        let mut c = Change::default();
        match e.op {
            Op::Free => c.freed[0] = self.end(e.ptr),
            Op::Realloc if e.ptr != 0 && e.size == 0 && e.ret == 0 => c.freed[0] = self.end(e.ptr),
            _ if e.ret == 0 => c.failed = true,
            _ => {
                if e.op == Op::Realloc {
                    c.freed[0] = self.end(e.ptr);
                }
                self.serial += 1;
                let w = self.kind.weigh(e.size);
                let b = Block {
                    size: w.bytes,
                    calls: w.calls,
                    stack: e.stack,
                    thread: e.thread,
                    born_ns: e.time_ns,
                    serial: self.serial,
                };
                self.last.insert(e.thread, self.serial);
                c.freed[1] = self.live.insert(e.ret, b).map(|old| {
                    self.bytes -= old.size;
                    (old, false)
                });
                self.bytes = self.bytes.saturating_add(b.size);
                c.allocated = Some(b);
            }
        }
        c
    }

    /// Frees the block at `ptr`, if live: it and whether it was temporary.
    fn end(&mut self, ptr: u64) -> Option<(Block, bool)> {
        let b = self.live.remove(&ptr)?;
        self.bytes -= b.size;
        Some((b, self.last.get(&b.thread) == Some(&b.serial)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, thread: u32, ptr: u64, size: u64, ret: u64) -> Event {
        Event {
            op,
            thread,
            ptr,
            size,
            ret,
            ..Event::default()
        }
    }

    /// heaptrack's definition: freed before its thread allocated again, by
    /// whichever thread frees it; another thread's allocations do not count.
    #[test]
    fn a_block_is_temporary_until_its_thread_allocates_again() {
        let mut h = Heap::new(Kind::Full);
        let temporary = |c: Change| c.freed[0].map(|(_, t)| t);
        h.apply(&ev(Op::Malloc, 1, 0, 8, 0x10));
        h.apply(&ev(Op::Malloc, 2, 0, 8, 0x20));
        assert_eq!(temporary(h.apply(&ev(Op::Free, 2, 0x10, 0, 0))), Some(true));
        h.apply(&ev(Op::Malloc, 1, 0, 8, 0x30));
        h.apply(&ev(Op::Malloc, 1, 0, 8, 0x40));
        assert_eq!(
            temporary(h.apply(&ev(Op::Free, 1, 0x30, 0, 0))),
            Some(false)
        );
        assert_eq!(temporary(h.apply(&ev(Op::Free, 1, 0x40, 0, 0))), Some(true));
        // A realloc frees first: the block it moves was its thread's last.
        h.apply(&ev(Op::Malloc, 1, 0, 8, 0x50));
        let c = h.apply(&ev(Op::Realloc, 1, 0x50, 16, 0x60));
        assert_eq!(temporary(c), Some(true));
        assert_eq!(h.bytes(), 8 + 16);
        assert_eq!(temporary(h.apply(&ev(Op::Free, 1, 0x99, 0, 0))), None);
    }
}
