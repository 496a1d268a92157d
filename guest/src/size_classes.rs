//! Free lists of small blocks in front of the component's general allocator.
//!
//! A hook call makes about 75 allocations, nearly all small and short-lived: the event's
//! and the reply's JSON trees, the record's strings. In wasm even talc spent about 200
//! instructions on each allocation and its release, a tenth of the component's work.
//! Here a block of up to [`LARGEST`] bytes is rounded up to a multiple of [`GRAIN`]
//! and, once released, kept on the free list of its size: the next allocation of that
//! size takes it back in a few instructions. Blocks on the lists go back to the
//! allocator behind only when it runs out: then every list is emptied into it, which can
//! join them, and the allocation is tried again. Kept for good, each size's peak would
//! add up across the calls of a pooled instance (one call of one-member objects, the next
//! of short arrays) until a valid call ran out of memory, a trap and so a denial. Larger
//! or more strictly aligned layouts go straight to the allocator behind.
//!
//! Not thread-safe: the component is single-threaded (it has no `atomics`), and the
//! native tests use an instance from one thread.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

/// Block sizes are multiples of this, and blocks are aligned to it.
pub const GRAIN: usize = 16;
/// The largest block kept on a free list: a B-tree node of a parsed JSON object fits.
pub const LARGEST: usize = 512;
const CLASSES: usize = LARGEST / GRAIN;

/// Size-class free lists over the allocator `A`.
pub struct SizeClasses<A> {
    behind: A,
    /// Per class, the first free block; each free block holds the next one's address.
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: the component is single-threaded; nothing else can reach the lists.
#[cfg(target_family = "wasm")]
unsafe impl<A: Sync> Sync for SizeClasses<A> {}

impl<A> SizeClasses<A> {
    pub const fn new(behind: A) -> SizeClasses<A> {
        SizeClasses {
            behind,
            free: UnsafeCell::new([ptr::null_mut(); CLASSES]),
        }
    }
}

impl<A: GlobalAlloc> SizeClasses<A> {
    /// `allocate` behind, and once more with every kept block given back if it ran out.
    unsafe fn behind(&self, allocate: impl Fn(&A) -> *mut u8) -> *mut u8 {
        let got = allocate(&self.behind);
        if !got.is_null() {
            return got;
        }
        self.release_kept();
        allocate(&self.behind)
    }

    /// Empties every free list into the allocator behind.
    unsafe fn release_kept(&self) {
        for (class, head) in (*self.free.get()).iter_mut().enumerate() {
            while !head.is_null() {
                let kept = *head;
                *head = kept.cast::<*mut u8>().read();
                self.behind.dealloc(kept, block(class));
            }
        }
    }
}

/// The size class of `layout`, if its blocks are kept.
fn class(layout: Layout) -> Option<usize> {
    (layout.size() <= LARGEST && layout.align() <= GRAIN)
        .then(|| layout.size().saturating_sub(1) / GRAIN)
}

/// The layout every block of `class` is allocated with, behind.
fn block(class: usize) -> Layout {
    // SAFETY: a non-zero multiple of GRAIN, aligned to GRAIN (a power of two).
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRAIN, GRAIN) }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for SizeClasses<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class(layout) else {
            return self.behind(|behind| behind.alloc(layout));
        };
        let head = &mut (*self.free.get())[class];
        if head.is_null() {
            return self.behind(|behind| behind.alloc(block(class)));
        }
        let taken = *head;
        *head = taken.cast::<*mut u8>().read();
        taken
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(class) = class(layout) else {
            return self.behind.dealloc(ptr, layout);
        };
        // A block is at least GRAIN bytes and GRAIN-aligned: room for the link.
        let head = &mut (*self.free.get())[class];
        ptr.cast::<*mut u8>().write(*head);
        *head = ptr;
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, fits.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (class(layout), class(new_layout)) {
            (Some(old), Some(new)) if old == new => ptr,
            (None, None) => self.behind(|behind| behind.realloc(ptr, layout, new_size)),
            _ => {
                let moved = self.alloc(new_layout);
                if !moved.is_null() {
                    ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_released_small_block_is_the_next_one_of_its_class() {
        let classes = SizeClasses::new(System);
        unsafe {
            let a = classes.alloc(layout(20, 8));
            let b = classes.alloc(layout(32, 4));
            assert_eq!(a as usize % GRAIN, 0);
            assert_eq!(b as usize % GRAIN, 0);
            classes.dealloc(a, layout(20, 8));
            classes.dealloc(b, layout(32, 4));
            // 17..=32 bytes is one class: last released, first taken.
            assert_eq!(classes.alloc(layout(17, 1)), b);
            assert_eq!(classes.alloc(layout(31, 2)), a);
            let c = classes.alloc(layout(24, 8));
            assert!(c != a && c != b, "an empty list allocates behind");
            // Another class does not see this one's blocks.
            classes.dealloc(a, layout(31, 2));
            assert_ne!(classes.alloc(layout(48, 8)), a);
        }
    }

    /// An allocator of at most `cap` bytes in all, over the system's.
    struct Limited {
        cap: usize,
        used: std::cell::Cell<usize>,
    }

    unsafe impl GlobalAlloc for Limited {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if self.used.get() + layout.size() > self.cap {
                return ptr::null_mut();
            }
            self.used.set(self.used.get() + layout.size());
            System.alloc(layout)
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            self.used.set(self.used.get() - layout.size());
            System.dealloc(ptr, layout);
        }
    }

    /// Blocks kept for one size do not starve another once the allocator behind runs
    /// out: they go back to it, and the allocation that ran out is served.
    #[test]
    fn kept_blocks_go_back_when_the_allocator_behind_runs_out() {
        const N: usize = 100;
        let classes = SizeClasses::new(Limited {
            cap: N * 64,
            used: std::cell::Cell::new(0),
        });
        unsafe {
            let small: Vec<*mut u8> = (0..N).map(|_| classes.alloc(layout(64, 8))).collect();
            assert!(small.iter().all(|p| !p.is_null()), "the cap holds N blocks");
            for p in small {
                classes.dealloc(p, layout(64, 8));
            }
            // Another class, as much again: served from what the first one gave back.
            let other: Vec<*mut u8> = (0..N / 2).map(|_| classes.alloc(layout(128, 8))).collect();
            assert!(
                other.iter().all(|p| !p.is_null()),
                "ran out with blocks kept"
            );
            // And a large layout too, once those are released.
            for p in other {
                classes.dealloc(p, layout(128, 8));
            }
            let large = classes.alloc(layout(N * 64, 8));
            assert!(!large.is_null(), "a large block after the lists were full");
            classes.dealloc(large, layout(N * 64, 8));
        }
    }

    #[test]
    fn large_and_overaligned_layouts_go_behind() {
        assert_eq!(class(layout(LARGEST, 16)), Some(CLASSES - 1));
        assert_eq!(class(layout(LARGEST + 1, 1)), None);
        assert_eq!(class(layout(64, 32)), None);
        assert_eq!(class(layout(1, 1)), Some(0));
        let classes = SizeClasses::new(System);
        unsafe {
            let big = classes.alloc(layout(4096, 8));
            let aligned = classes.alloc(layout(64, 64));
            assert_eq!(aligned as usize % 64, 0);
            classes.dealloc(big, layout(4096, 8));
            classes.dealloc(aligned, layout(64, 64));
            assert!((*classes.free.get()).iter().all(|head| head.is_null()));
        }
    }

    #[test]
    fn random_allocations_never_overlap_or_lose_their_contents() {
        let classes = SizeClasses::new(System);
        // xorshift64: a fixed sequence, so a failure replays.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Each live block is filled with its own tag byte, checked before it goes.
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let check = |(ptr, layout, tag): &(*mut u8, Layout, u8)| {
            for i in 0..layout.size() {
                assert_eq!(unsafe { ptr.add(i).read() }, *tag, "block {ptr:?} byte {i}");
            }
        };
        for step in 0..20_000_u32 {
            let roll = next();
            let size = 1 + (roll >> 8) as usize % if roll % 5 == 0 { 2000 } else { 600 };
            let align = 1 << ((roll >> 40) % 6);
            let tag = step as u8;
            match roll % 3 {
                0 if !live.is_empty() => {
                    let block = live.swap_remove((roll >> 20) as usize % live.len());
                    check(&block);
                    unsafe { classes.dealloc(block.0, block.1) };
                }
                1 if !live.is_empty() => {
                    let at = (roll >> 20) as usize % live.len();
                    let (ptr, layout, old_tag) = live[at];
                    check(&live[at]);
                    let grown = unsafe { classes.realloc(ptr, layout, size) };
                    assert!(!grown.is_null());
                    let kept = layout.size().min(size);
                    for i in 0..kept {
                        assert_eq!(unsafe { grown.add(i).read() }, old_tag, "realloc byte {i}");
                    }
                    let layout = Layout::from_size_align(size, layout.align()).unwrap();
                    unsafe { grown.write_bytes(tag, size) };
                    live[at] = (grown, layout, tag);
                }
                _ => {
                    let layout = Layout::from_size_align(size, align).unwrap();
                    let ptr = unsafe { classes.alloc(layout) };
                    assert!(!ptr.is_null());
                    assert_eq!(ptr as usize % align, 0, "alignment {align}");
                    unsafe { ptr.write_bytes(tag, size) };
                    live.push((ptr, layout, tag));
                }
            }
        }
        for block in live {
            check(&block);
            unsafe { classes.dealloc(block.0, block.1) };
        }
    }

    #[test]
    fn realloc_keeps_the_contents_across_classes_and_out_of_them() {
        let classes = SizeClasses::new(System);
        unsafe {
            let mut size = 5;
            let mut p = classes.alloc(layout(size, 1));
            for i in 0..size {
                p.add(i).write(i as u8);
            }
            // Within a class, out to a larger one, beyond the lists, and back down.
            for new_size in [12, 100, 2000, 3000, 40, 5] {
                let grown = classes.realloc(p, layout(size, 1), new_size);
                assert!(!grown.is_null());
                for i in 0..size.min(new_size).min(5) {
                    assert_eq!(grown.add(i).read(), i as u8, "byte {i} at size {new_size}");
                }
                (p, size) = (grown, new_size);
            }
            let same_class = classes.realloc(p, layout(size, 1), 16);
            assert_eq!(same_class, p, "a block that still fits stays");
            classes.dealloc(same_class, layout(16, 1));
        }
    }
}
