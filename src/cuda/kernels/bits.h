// Backward bit streams as the kernels read them: 8 bytes at a time, as
// little-endian words, by the two 8-byte aligned words around them, so that
// a stream must lie 16 bytes or more inside its allocation (the engine's
// staged inputs are preceded by their table and followed by the results).

#ifndef ZARRS_NVCOMP_KERNEL_BITS_H
#define ZARRS_NVCOMP_KERNEL_BITS_H

#include "prelude.h"

DEVICE u64 load_aligned(const u8 *p) {
#ifdef __CUDA__
    return *(const u64 *)p;
#else
    u64 v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

// The 8 bytes of the stream at `p` from `base` (at least -7) as a
// little-endian word, zeros before the stream's start.
DEVICE u64 load_word(const u8 *p, long long base) {
    u64 at = (u64)(p + base);
    const u8 *aligned = (const u8 *)(at & ~7ULL);
    u32 shift = (u32)(at & 7) * 8;
    u64 v = load_aligned(aligned) >> shift;
    if (shift) v |= load_aligned(aligned + 8) << (64 - shift);
    if (base < 0) v &= ~0ULL << (8 * (u32)(-base));
    return v;
}

#endif
