//! Retired mappings (empty segments and freed large blocks) wait here before going back to
//! the OS, so a program that frees and re-allocates does not pay mmap/munmap each time.
//! A mapping older than `RETYPE_MALLOC_PURGE_DELAY` ms is unmapped at the next cache
//! operation; the cache never holds more than [`CACHE_MAX_BYTES`].

use core::ptr;
use core::sync::atomic::Ordering;

use crate::consts::HEADER_SIZE;
use crate::lock::SpinLock;
use crate::{config, os, registry, stats};

/// Upper bound on bytes kept mapped but unused.
const CACHE_MAX_BYTES: usize = 256 << 20;

/// The list node lives at the end of the retired mapping's header area, clear of the fields
/// that hardened mode reads to diagnose a free of a pointer into a retired mapping.
const NODE_OFFSET: usize = HEADER_SIZE - 64;

struct Node {
    next: *mut Node,
    len: usize,
    freed_at: u64,
}

pub(crate) struct List {
    head: *mut Node,
    bytes: usize,
}

// SAFETY: the nodes are owned by the list and only touched under its lock.
unsafe impl Send for List {}

pub(crate) static CACHE: SpinLock<List> = SpinLock::new(List {
    head: ptr::null_mut(),
    bytes: 0,
});

/// Takes a cached mapping whose length lies in `[min, max]`; returns it and its length.
pub(crate) unsafe fn take(min: usize, max: usize) -> Option<(*mut u8, usize)> {
    purge(false);
    let mut list = CACHE.lock();
    let mut link: *mut *mut Node = &mut list.head;
    // SAFETY: every node in the list is a live mapping owned by the cache.
    unsafe {
        while !(*link).is_null() {
            let node = *link;
            if (*node).len >= min && (*node).len <= max {
                *link = (*node).next;
                let len = (*node).len;
                list.bytes -= len;
                stats::lower(&stats::SEGMENTS_CACHED, 1);
                let base = node.cast::<u8>().sub(NODE_OFFSET);
                node.write_bytes(0, 1);
                return Some((base, len));
            }
            link = &mut (*node).next;
        }
    }
    None
}

/// Retires the mapping `[p, p+len)`; unmaps it at once if caching is off or the cache is full.
pub(crate) unsafe fn put(p: *mut u8, len: usize) {
    let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
    {
        let mut list = CACHE.lock();
        if delay > 0 && list.bytes + len <= CACHE_MAX_BYTES {
            // SAFETY: the caller gives us the whole mapping; bytes in its header become the node.
            let node = unsafe {
                let node = p.add(NODE_OFFSET).cast::<Node>();
                node.write(Node {
                    next: list.head,
                    len,
                    freed_at: os::now_ms(),
                });
                node
            };
            list.head = node;
            list.bytes += len;
            stats::add(&stats::SEGMENTS_CACHED, 1);
            drop(list);
            purge(false);
            return;
        }
    }
    // SAFETY: the mapping is ours and no longer referenced.
    unsafe { release(p, len) };
}

/// Unmaps every cached mapping older than the purge delay (all of them if `all`).
pub(crate) fn purge(all: bool) {
    let delay = config::PURGE_DELAY_MS.load(Ordering::Relaxed);
    let now = os::now_ms();
    let mut expired: *mut Node = ptr::null_mut();
    {
        let mut list = CACHE.lock();
        let mut link: *mut *mut Node = &mut list.head;
        // SAFETY: nodes are live mappings owned by the list.
        unsafe {
            while !(*link).is_null() {
                let node = *link;
                if all || now.saturating_sub((*node).freed_at) >= delay {
                    *link = (*node).next;
                    list.bytes -= (*node).len;
                    (*node).next = expired;
                    expired = node;
                } else {
                    link = &mut (*node).next;
                }
            }
        }
    }
    while !expired.is_null() {
        // SAFETY: `expired` nodes were unlinked above and are owned by this function.
        unsafe {
            let next = (*expired).next;
            stats::lower(&stats::SEGMENTS_CACHED, 1);
            stats::add(&stats::PURGED, 1);
            release(expired.cast::<u8>().sub(NODE_OFFSET), (*expired).len);
            expired = next;
        }
    }
}

unsafe fn release(p: *mut u8, len: usize) {
    registry::clear(p, len);
    // SAFETY: the caller owns the mapping.
    unsafe { os::unmap(p, len) };
}
