//! The allocator of the `racksim` binary and of its test binaries:
//! mimalloc (its v2 line), called the way Rust's own `System` allocator
//! calls the C library.
//!
//! A run allocates and frees small buffers at every simulated event (HTTP
//! bodies and headers, segments, futures, trace lines), some 390,000
//! allocations in one seed of the full rack. glibc's `malloc` and `free`
//! were about a tenth of a fuzz seed's time (issue 40), so the binary uses
//! mimalloc. Allocation never decides what a run does, so replays are the
//! same bytes whichever allocator serves them.
//!
//! **Why not the `mimalloc` crate's `MiMalloc`.** It passes every request to
//! `mi_malloc_aligned`, whatever its alignment. For the alignments that
//! plain `mi_malloc` already gives, that is the same block by a longer
//! road: an alignment check and a look for a suitably aligned free block,
//! and above 1 KiB a second, generic function that then calls the plain
//! allocation anyway (mimalloc v2's `alloc-aligned.c`,
//! `mi_heap_malloc_zero_aligned_at` and `..._generic`). [`Allocator`]
//! calls `mi_malloc`, `mi_zalloc` and `mi_realloc` when the request's
//! alignment is one that mimalloc guarantees for its size, and the aligned
//! functions otherwise (a tokio task's cell, aligned to a cache line).
//!
//! **The rule** is mimalloc's own (`mi_malloc_is_naturally_aligned`): a
//! block is aligned to `MI_MAX_ALIGN_SIZE` (16 bytes) or to its size,
//! whichever is smaller, because every size class above 8 bytes is a
//! multiple of 16. It is also the rule of std's `System` allocator
//! (`align <= MIN_ALIGN && align <= size`). Freeing is `mi_free` in every
//! case, as mimalloc frees aligned and plain blocks alike.

use std::{
    alloc::{GlobalAlloc, Layout},
    ffi::c_void,
};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// mimalloc's `MI_MAX_ALIGN_SIZE`: the alignment of every block of at
/// least this size.
const MI_MAX_ALIGN_SIZE: usize = 16;

/// mimalloc, by its plain functions where they give the alignment asked for.
/// Install it with `#[global_allocator] static A: Allocator = Allocator;`.
pub struct Allocator;

/// Whether mimalloc's plain allocation of `size` bytes is aligned to
/// `align` (a power of two, as every [`Layout`]'s is).
#[inline]
pub fn naturally_aligned(size: usize, align: usize) -> bool {
    align <= MI_MAX_ALIGN_SIZE && align <= size
}

/// `plain(size)` where mimalloc's plain block meets `layout`,
/// `aligned(size, align)` otherwise: [`GlobalAlloc::alloc`] and
/// [`GlobalAlloc::alloc_zeroed`] differ only in the pair.
///
/// # Safety
///
/// `plain` and `aligned` are mimalloc's allocation functions of one kind
/// (`mi_malloc` and `mi_malloc_aligned`, or `mi_zalloc` and
/// `mi_zalloc_aligned`), which accept any size and a power-of-two
/// alignment.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller's, above.
    unsafe {
        if naturally_aligned(layout.size(), layout.align()) {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: each method forwards to mimalloc, whose blocks meet the layout
// asked for: the plain functions only when `naturally_aligned` says their
// block is aligned enough (mimalloc's own rule, above), the aligned ones
// otherwise; `mi_free` frees a block from either.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: a pair of mimalloc's allocating functions.
        unsafe { allocate(layout, mi_malloc, mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: a pair of mimalloc's zeroing functions.
        unsafe { allocate(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator; the new block must be
        // aligned to `layout.align()` at its new size, which the plain
        // `mi_realloc` gives by the same rule.
        unsafe {
            if naturally_aligned(new_size, layout.align()) {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests;
