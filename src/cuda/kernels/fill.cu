// Which of many device buffers hold only the fill value, in one launch:
// the writer stores no chunk that equals it.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time.
//
// The fill element, repeated to 16 bytes, is `lo` then `hi` (element sizes
// that divide 16): byte i of a buffer must equal byte i % 16 of them. The
// blocks of grid row x read buffer x, their threads consecutive bytes (the
// loads of a warp coalesce); a thread that finds a differing byte marks its
// buffer, and the others stop soon after they see the mark.

#include "prelude.h"

// Marks `*differs` if a byte at first, first + step, ... (below len) of p
// differs from the pattern.
DEVICE void scan(const u8 *p, u64 len, u64 first, u64 step, u64 lo, u64 hi, volatile u32 *differs) {
    u64 seen = 0;
    for (u64 i = first; i < len; i += step, seen++) {
        if ((seen & 255) == 0 && *differs) return;
        u64 word = (i & 8) ? hi : lo;
        if (p[i] != (u8)(word >> (8 * (i & 7)))) {
            *differs = 1;
            return;
        }
    }
}

// `ptrs` and `lens` hold `count` buffer addresses and lengths; `differs`
// holds one word per buffer, zeroed by the caller, set to 1 where the buffer
// holds a byte other than the fill value's.
KERNEL void fill_differs(const u64 *ptrs, const u64 *lens, u64 count, u64 lo, u64 hi, u32 *differs) {
#ifdef __CUDA__
    u64 k = __nvvm_read_ptx_sreg_ctaid_x();
    u64 step = (u64)__nvvm_read_ptx_sreg_nctaid_y() * __nvvm_read_ptx_sreg_ntid_x();
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_y() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    if (k >= count) return;
#else
    for (u64 k = 0, first = 0, step = 1; k < count; k++)
#endif
    {
        scan((const u8 *)ptrs[k], lens[k], first, step, lo, hi, differs + k);
    }
}
