//! The intrusive lists: elements carry their own links, so no list ever allocates.
//!
//! [`Queue`]: a doubly linked queue, touched only by the thread that owns it: a heap's page
//! queues (one per size class, plus the full pages) and its segments with free slices.
//! Invariants, checked by [`Queue::check`] (as mimalloc's `mi_page_queue_is_consistent`):
//! 1. `first` is null exactly when `last` is;
//! 2. `first.prev` and `last.next` are null;
//! 3. for consecutive elements a, b: `a.next == b` and `b.prev == a`. So the forward walk ends
//!    at `last` and no element occurs twice: at the first element met again, its `prev` would
//!    name a different predecessor (or be null, for `first`);
//! 4. an element in no queue has null links, so inserting one twice is caught (debug builds)
//!    before it corrupts a queue.
//!
//! [`push`] / [`take_all`]: a lock-free stack (Treiber). Any thread pushes, with one
//! compare-and-swap; only the owner takes, and always the whole stack at once, which is what
//! makes it immune to ABA. Used for a page's blocks freed by other threads and for a heap's
//! full pages that received such a free.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::os;

/// The links of an element of a [`Queue`].
#[repr(C)]
pub(crate) struct Links<T> {
    pub next: *mut T,
    pub prev: *mut T,
}

impl<T> Links<T> {
    /// The links of an element in no queue.
    pub(crate) const NONE: Self = Links {
        next: ptr::null_mut(),
        prev: ptr::null_mut(),
    };
}

/// An element of a [`Queue`].
///
/// # Safety
/// `links` must return the address of [`Links`] inside `*this` that only queue code writes.
pub(crate) unsafe trait Linked: Sized {
    /// Where the links of `this` are (address arithmetic only).
    fn links(this: *mut Self) -> *mut Links<Self>;
}

/// A doubly linked queue of `T`s (see the module documentation for its invariants).
pub(crate) struct Queue<T> {
    pub first: *mut T,
    pub last: *mut T,
}

impl<T> Queue<T> {
    pub(crate) const EMPTY: Self = Queue {
        first: ptr::null_mut(),
        last: ptr::null_mut(),
    };
}

impl<T: Linked> Queue<T> {
    /// Links `e` at the front.
    ///
    /// # Safety
    /// `e` is live and in no queue; the caller owns this queue and its elements.
    pub(crate) unsafe fn push_front(&mut self, e: *mut T) {
        // SAFETY: the caller owns `e` and every element of the queue.
        unsafe {
            os::debug_verify(|| self.check_unlinked(e));
            let l = T::links(e);
            (*l).prev = ptr::null_mut();
            (*l).next = self.first;
            if self.first.is_null() {
                self.last = e;
            } else {
                (*T::links(self.first)).prev = e;
            }
            self.first = e;
        }
    }

    /// Links `e` at the back.
    ///
    /// # Safety
    /// As for [`Queue::push_front`].
    pub(crate) unsafe fn push_back(&mut self, e: *mut T) {
        // SAFETY: the caller owns `e` and every element of the queue.
        unsafe {
            os::debug_verify(|| self.check_unlinked(e));
            let l = T::links(e);
            (*l).next = ptr::null_mut();
            (*l).prev = self.last;
            if self.last.is_null() {
                self.first = e;
            } else {
                (*T::links(self.last)).next = e;
            }
            self.last = e;
        }
    }

    /// Unlinks `e` and clears its links (invariant 4).
    ///
    /// # Safety
    /// `e` is in this queue, which the caller owns.
    pub(crate) unsafe fn remove(&mut self, e: *mut T) {
        // SAFETY: `e` and its neighbours are live elements of the caller's queue.
        unsafe {
            os::debug_verify(|| self.check_neighbours(e));
            let l = T::links(e);
            if (*l).prev.is_null() {
                self.first = (*l).next;
            } else {
                (*T::links((*l).prev)).next = (*l).next;
            }
            if (*l).next.is_null() {
                self.last = (*l).prev;
            } else {
                (*T::links((*l).next)).prev = (*l).prev;
            }
            l.write(Links::NONE);
        }
    }

    /// Whether `e` is in the queue (a walk: for checks only).
    ///
    /// # Safety
    /// The caller owns the queue.
    pub(crate) unsafe fn contains(&self, e: *mut T) -> bool {
        let mut x = self.first;
        while !x.is_null() {
            if x == e {
                return true;
            }
            // SAFETY: elements of an owned queue are live.
            x = unsafe { (*T::links(x)).next };
        }
        false
    }

    /// Walks the queue checking invariants 1 to 3, calling `each` on every element; returns
    /// the length. Ends even on a corrupt queue whose elements are live (see invariant 3).
    ///
    /// # Safety
    /// The caller owns the queue; every element reachable from `first` is live.
    pub(crate) unsafe fn check(
        &self,
        mut each: impl FnMut(*mut T) -> Result<(), &'static str>,
    ) -> Result<usize, &'static str> {
        if self.first.is_null() != self.last.is_null() {
            return Err("queue: only one of first and last is null");
        }
        let mut prev: *mut T = ptr::null_mut();
        let mut e = self.first;
        let mut n = 0;
        while !e.is_null() {
            // SAFETY: `e` is reachable from `first`, hence live.
            let (next, back) = unsafe { ((*T::links(e)).next, (*T::links(e)).prev) };
            if back != prev {
                return Err("queue: an element's back link is not its predecessor");
            }
            each(e)?;
            n += 1;
            prev = e;
            e = next;
        }
        if self.last != prev {
            return Err("queue: last is not the final element");
        }
        Ok(n)
    }

    /// Invariant 4 for an element about to be inserted.
    unsafe fn check_unlinked(&self, e: *mut T) -> Result<(), &'static str> {
        // SAFETY: `e` is live (the caller's precondition).
        let l = unsafe { &*T::links(e) };
        if !l.next.is_null() || !l.prev.is_null() || self.first == e {
            return Err("queue: inserting an element that is already in a queue");
        }
        Ok(())
    }

    /// Invariant 3 around an element about to be removed: its neighbours (or the queue's ends)
    /// point back to it, so it is in this queue.
    unsafe fn check_neighbours(&self, e: *mut T) -> Result<(), &'static str> {
        // SAFETY: `e` and its neighbours are live (the caller's precondition).
        let ok = unsafe {
            let l = &*T::links(e);
            (if l.prev.is_null() {
                self.first == e
            } else {
                (*T::links(l.prev)).next == e
            }) && (if l.next.is_null() {
                self.last == e
            } else {
                (*T::links(l.next)).prev == e
            })
        };
        if ok {
            Ok(())
        } else {
            Err("queue: removing an element that is not in this queue")
        }
    }
}

/// Pushes `node` onto the lock-free stack `head`; `next` is the address of `node`'s link.
///
/// # Safety
/// `node` is live, on no stack, and stays live until the owner takes it; `next` points into it.
#[inline]
pub(crate) unsafe fn push<T>(head: &AtomicPtr<T>, node: *mut T, next: *mut *mut T) {
    let mut h = head.load(Ordering::Relaxed);
    loop {
        // SAFETY: until the exchange below publishes `node`, this thread alone writes its link.
        unsafe { *next = h };
        match head.compare_exchange_weak(h, node, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(current) => h = current,
        }
    }
}

/// Takes the whole stack `head` (the owner only); the last element pushed comes first.
#[inline]
pub(crate) fn take_all<T>(head: &AtomicPtr<T>) -> *mut T {
    // A plain load first: an empty stack, the common case, costs no locked instruction.
    if head.load(Ordering::Relaxed).is_null() {
        return ptr::null_mut();
    }
    head.swap(ptr::null_mut(), Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Node {
        links: Links<Node>,
        next_on_stack: *mut Node,
    }

    // SAFETY: `links` points at the node's own links field.
    unsafe impl Linked for Node {
        fn links(this: *mut Self) -> *mut Links<Self> {
            this.wrapping_byte_add(core::mem::offset_of!(Node, links))
                .cast()
        }
    }

    fn nodes<const N: usize>() -> [Node; N] {
        core::array::from_fn(|_| Node {
            links: Links::NONE,
            next_on_stack: ptr::null_mut(),
        })
    }

    #[test]
    fn queue_operations_keep_it_consistent() {
        let mut n = nodes::<4>();
        let [a, b, c, d] = n.each_mut().map(|x| x as *mut Node);
        let mut q = Queue::EMPTY;
        // SAFETY: the nodes outlive the queue and are in no other queue.
        unsafe {
            assert_eq!(q.check(|_| Ok(())), Ok(0));
            q.push_front(b);
            q.push_front(a);
            q.push_back(c);
            q.push_back(d);
            assert_eq!(q.check(|_| Ok(())), Ok(4));
            q.remove(c);
            assert!(!q.contains(c) && q.contains(d));
            assert_eq!(q.check(|_| Ok(())), Ok(3));
            q.remove(a);
            q.remove(d);
            assert_eq!((q.first, q.last), (b, b));
            assert_eq!(q.check(|_| Ok(())), Ok(1));
            assert_eq!(
                q.check(|_| Err("element check")),
                Err("element check"),
                "an element's failed check is reported"
            );
        }
    }

    /// The checks can fail: each kind of corruption is reported, and a cycle does not hang.
    #[test]
    fn corrupt_queues_are_reported() {
        let mut n = nodes::<3>();
        let [a, b, c] = n.each_mut().map(|x| x as *mut Node);
        let fresh = move |q: &mut Queue<Node>| {
            // SAFETY: the nodes outlive the queue; each is unlinked first.
            unsafe {
                for e in [a, b, c] {
                    (*e).links = Links::NONE;
                }
                *q = Queue::EMPTY;
                for e in [a, b, c] {
                    q.push_back(e);
                }
                assert_eq!(q.check(|_| Ok(())), Ok(3));
            }
        };
        let mut q = Queue::EMPTY;
        // SAFETY: every link written below points at one of the live nodes (or is null).
        unsafe {
            fresh(&mut q);
            (*c).links.prev = a; // b → c, but c's back link skips b
            assert!(q.check(|_| Ok(())).unwrap_err().contains("back link"));

            fresh(&mut q);
            q.last = b; // c is still reachable after the recorded last element
            assert!(q.check(|_| Ok(())).unwrap_err().contains("last"));

            fresh(&mut q);
            (*c).links.next = a; // a cycle: a → b → c → a
            assert!(q.check(|_| Ok(())).unwrap_err().contains("back link"));

            fresh(&mut q);
            q.first = ptr::null_mut();
            assert!(q.check(|_| Ok(())).unwrap_err().contains("null"));

            fresh(&mut q);
            assert!(q.check_unlinked(b).is_err(), "b is already queued");
            let mut lone = nodes::<1>();
            let mut other = Queue::EMPTY;
            other.push_back(&raw mut lone[0]);
            assert!(other.check_neighbours(a).is_err(), "a is in another queue");
        }
    }

    #[test]
    fn concurrent_pushes_are_all_taken() {
        const PER_THREAD: usize = 1000;
        let head = AtomicPtr::new(ptr::null_mut());
        let mut all: Vec<Node> = (0..4 * PER_THREAD)
            .map(|_| Node {
                links: Links::NONE,
                next_on_stack: ptr::null_mut(),
            })
            .collect();
        let chunks: Vec<usize> = all
            .chunks_mut(PER_THREAD)
            .map(|c| c.as_mut_ptr() as usize)
            .collect();
        std::thread::scope(|s| {
            for &chunk in &chunks {
                let head = &head;
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        let node = (chunk as *mut Node).wrapping_add(i);
                        // SAFETY: each node is pushed once and outlives the stack.
                        unsafe { push(head, node, &raw mut (*node).next_on_stack) };
                    }
                });
            }
        });
        let mut n = 0;
        let mut x = take_all(&head);
        while !x.is_null() {
            n += 1;
            // SAFETY: every node on the stack is an element of `all`.
            x = unsafe { (*x).next_on_stack };
        }
        assert_eq!(n, 4 * PER_THREAD);
        assert!(take_all(&head).is_null());
        drop(all);
    }
}
