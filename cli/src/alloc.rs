//! The `rowshard` binary's allocator: the system allocator by default, mimalloc when
//! `ROWSHARD_ALLOCATOR=mimalloc` is set (so the benchmarks can show both side by side), counting
//! large allocations either way — the benchmark reports them per steady-state step.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Allocations at least this large are counted.
pub const LARGE: usize = 64 << 10;

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);
static LARGE_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The allocator `main` installs.
pub struct Allocator;

/// Which allocator this process uses: decided at the first allocation (before `main`, on the
/// main thread), from the environment, without allocating.
fn choice() -> u8 {
    let c = CHOICE.load(Ordering::Relaxed);
    if c != UNDECIDED {
        return c;
    }
    // SAFETY: getenv with a NUL-terminated name; nothing else touches the environment this early.
    let value = unsafe { libc::getenv(c"ROWSHARD_ALLOCATOR".as_ptr()) };
    // SAFETY: a non-null getenv result is a NUL-terminated string.
    let mimalloc = !value.is_null() && unsafe { std::ffi::CStr::from_ptr(value) } == c"mimalloc";
    let c = if mimalloc { MIMALLOC } else { SYSTEM };
    CHOICE.store(c, Ordering::Relaxed);
    c
}

/// The allocator in use, by name.
pub fn name() -> &'static str {
    if choice() == MIMALLOC {
        "mimalloc"
    } else {
        "system"
    }
}

/// Allocations of at least [`LARGE`] bytes so far.
pub fn large_allocations() -> u64 {
    LARGE_ALLOCATIONS.load(Ordering::Relaxed)
}

fn count(size: usize) {
    if size >= LARGE {
        LARGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call forwards to one allocator, fixed before the first allocation, so memory is
// always freed by the allocator that gave it out.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as received.
        unsafe {
            match choice() {
                MIMALLOC => mimalloc::MiMalloc.alloc(layout),
                _ => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as received.
        unsafe {
            match choice() {
                MIMALLOC => mimalloc::MiMalloc.alloc_zeroed(layout),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the same allocator (see above).
        unsafe {
            match choice() {
                MIMALLOC => mimalloc::MiMalloc.dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from the same allocator (see above).
        unsafe {
            match choice() {
                MIMALLOC => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
            }
        }
    }
}
