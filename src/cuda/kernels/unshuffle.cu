// Blosc's byte unshuffle and bitunshuffle of many decoded blocks in one
// launch, each from its decoded (shuffled) bytes to its destination.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time, so building the crate needs neither nvcc nor NVRTC.
//
// A block of `len` bytes holds `m = len / typesize` elements and
// `len % typesize` trailing bytes, which blosc stores as they are. The
// block's work is `m + len % typesize` units: unit `u < m` writes element
// `u` (its `typesize` bytes gathered from the shuffled rows: reads of
// neighbouring threads are neighbouring bytes), a later unit copies one
// trailing byte. Blocks of the grid's x dimension take one entry each,
// the y dimension splits a large entry's units between blocks.

#include "prelude.h"

// An entry's kind: a plain copy, byte unshuffle, or bitunshuffle.
enum { KIND_COPY = 0, KIND_BYTE = 1, KIND_BIT = 2 };

// Blosc (format version 2) bitshuffles only whole groups of 8 elements and
// stores a block of any other element count as it is; byte unshuffle of
// one-byte elements is a copy.
DEVICE u32 effective_kind(u64 len, u64 typesize, u64 kind) {
    if (typesize == 0 || len < typesize) return KIND_COPY;
    u64 m = len / typesize;
    if (kind == KIND_BYTE && typesize > 1) return KIND_BYTE;
    if (kind == KIND_BIT && m % 8 == 0) return KIND_BIT;
    return KIND_COPY;
}

// Units of work of one entry.
DEVICE u64 units(u64 len, u64 typesize, u32 kind) {
    if (kind == KIND_COPY) return len;
    return len / typesize + len % typesize;
}

// Byte `j` of element `i` was stored at `j * m + i`.
DEVICE void byte_element(const u8 *src, u8 *dst, u64 m, u64 t, u64 i) {
    for (u64 j = 0; j < t; j++) dst[i * t + j] = src[j * m + i];
}

// Bit `k` of byte `j` of element `i` was stored as bit `i % 8` of byte
// `(j * 8 + k) * m / 8 + i / 8`: row `j * 8 + k` of `m / 8` bytes.
DEVICE void bit_element(const u8 *src, u8 *dst, u64 m, u64 t, u64 i) {
    u64 row = m / 8, at = i / 8;
    u32 shift = (u32)(i % 8);
    for (u64 j = 0; j < t; j++) {
        const u8 *rows = src + j * 8 * row + at;
        u32 byte = 0;
        for (u32 k = 0; k < 8; k++) byte |= ((u32)(rows[k * row] >> shift) & 1u) << k;
        dst[i * t + j] = (u8)byte;
    }
}

DEVICE void unit(const u8 *src, u8 *dst, u64 len, u64 t, u32 kind, u64 u) {
    if (kind == KIND_COPY) {
        dst[u] = src[u];
        return;
    }
    u64 m = len / t;
    if (u >= m) {
        u64 at = m * t + (u - m);
        dst[at] = src[at];
    } else if (kind == KIND_BYTE) {
        byte_element(src, dst, m, t, u);
    } else {
        bit_element(src, dst, m, t, u);
    }
}

// `table` holds five arrays of `count` words: source addresses (decoded,
// shuffled blocks), destination addresses, lengths in bytes, typesizes and
// kinds. Units `first`, `first + step`, ... of entry `e`.
DEVICE void entry_units(const u64 *table, u64 count, u64 e, u64 first, u64 step) {
    const u8 *src = (const u8 *)table[e];
    u8 *dst = (u8 *)table[count + e];
    u64 len = table[2 * count + e];
    u64 t = table[3 * count + e];
    u32 kind = effective_kind(len, t, table[4 * count + e]);
    u64 n = units(len, t, kind);
    for (u64 u = first; u < n; u += step) unit(src, dst, len, t, kind, u);
}

// Sources and destinations must not overlap.
KERNEL void unshuffle(const u64 *table, u64 count) {
#ifdef __CUDA__
    u64 e = __nvvm_read_ptx_sreg_ctaid_x();
    if (e >= count) return;
    u64 step = (u64)__nvvm_read_ptx_sreg_nctaid_y() * __nvvm_read_ptx_sreg_ntid_x();
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_y() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    entry_units(table, count, e, first, step);
#else
    for (u64 e = 0; e < count; e++) entry_units(table, count, e, 0, 1);
#endif
}
