//! The module's allocator: the one it is given (Redis's inside the server, so that
//! `used_memory` counts the module), counting the bytes the module's own code holds,
//! for `INFO rlock` (`rlock_allocated_bytes`). Strings the module keeps through the
//! module API (`RedisModuleString`s) are the server's allocations, not counted here.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

pub struct CountingAlloc<A>(pub A);

static HELD: AtomicIsize = AtomicIsize::new(0);

/// The bytes the module's code holds now.
pub fn allocated_bytes() -> i64 {
    HELD.load(Ordering::Relaxed) as i64
}

// SAFETY: every call is passed to the inner allocator unchanged; only the counter is
// added, and it never affects a pointer.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = self.0.alloc(layout);
        if !p.is_null() {
            HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = self.0.alloc_zeroed(layout);
        if !p.is_null() {
            HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.0.dealloc(ptr, layout);
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = self.0.realloc(ptr, layout, new_size);
        if !p.is_null() {
            HELD.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}
