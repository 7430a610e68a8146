use std::alloc::{GlobalAlloc, Layout};

use super::{naturally_aligned, Allocator};

/// Every block meets its layout's alignment, whichever road it took:
/// sizes on both sides of mimalloc's small-object limit (1 KiB) and of a
/// page, alignments from 1 to a cache line and beyond, zeroed or not, and
/// grown and shrunk by `realloc` across the plain/aligned boundary.
#[test]
fn every_block_meets_its_layout() {
    let a = Allocator;
    let sizes = [
        1, 7, 8, 9, 15, 16, 17, 24, 40, 100, 1024, 1025, 4096, 70_000,
    ];
    let aligns = [1, 2, 4, 8, 16, 32, 64, 128, 4096];
    for &size in &sizes {
        for &align in &aligns {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero size and a valid layout; every block is
            // freed with the layout it was allocated with.
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "alloc {size} aligned {align}");
                p.write_bytes(0xa5, size);
                a.dealloc(p, layout);

                let z = a.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert_eq!(z as usize % align, 0, "alloc_zeroed {size} aligned {align}");
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                a.dealloc(z, layout);

                for &new_size in &sizes {
                    let z = a.alloc_zeroed(layout);
                    let r = a.realloc(z, layout, new_size);
                    assert!(!r.is_null());
                    assert_eq!(
                        r as usize % align,
                        0,
                        "realloc {size} to {new_size} aligned {align}"
                    );
                    let kept = size.min(new_size);
                    assert!(std::slice::from_raw_parts(r, kept).iter().all(|&b| b == 0));
                    a.dealloc(r, Layout::from_size_align(new_size, align).unwrap());
                }
            }
        }
    }
}

/// The plain functions are used exactly where std's `System` allocator
/// uses the C library's plain `malloc` on x86-64 and aarch64 (alignment at
/// most 16 and at most the size).
#[test]
fn plain_only_where_mimalloc_guarantees_the_alignment() {
    assert!(naturally_aligned(16, 16));
    assert!(naturally_aligned(24, 8));
    assert!(naturally_aligned(1, 1));
    assert!(
        !naturally_aligned(8, 16),
        "an 8-byte block is only 8-aligned"
    );
    assert!(!naturally_aligned(256, 32));
    assert!(!naturally_aligned(128, 128));
}
