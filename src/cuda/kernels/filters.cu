// The element-wise filters of a zarr codec chain, undone on many decoded
// chunks in one launch: in place (`filter_elements`), the byte swap of
// big-endian elements, then the running sum of numcodecs `delta` (float
// sums with x86's NaNs), whose host twin is `ElementFilters::apply`
// (src/format/filters.rs); and from the stored integers into floats of
// another buffer (`scale_offset`), numcodecs `fixedscaleoffset`.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time, so building the crate needs neither nvcc nor NVRTC.
//
// Words are read and written byte by byte, so chunks need no alignment.
// A chunk without `delta` is split between threads word by word (blocks of
// the grid's x dimension take one chunk each, the y dimension splits a
// large chunk between blocks). A running sum is sequential: one thread adds
// a whole chunk in order, as `numpy.cumsum` does (float sums depend on the
// order), while the other chunks of the launch run on other blocks.

#include "prelude.h"

// The running sum's element type (`delta`), and how two elements add.
enum { DELTA_NONE = 0, DELTA_INT = 1, DELTA_F32 = 2, DELTA_F64 = 3 };

// Floats add as floats of their width; neither is contracted with anything.
#ifdef __clang__
#pragma clang fp contract(off)
#endif

// The `width`-byte word at `p`, its bytes reversed first when `swap`.
DEVICE u64 load(const u8 *p, u64 width, u32 swap) {
    u64 word = 0;
    for (u64 k = 0; k < width; k++) word |= (u64)p[swap ? width - 1 - k : k] << (8 * k);
    return word;
}

// The low `width` bytes of `word` to `p`, little endian.
DEVICE void store(u8 *p, u64 width, u64 word) {
    for (u64 k = 0; k < width; k++) p[k] = (u8)(word >> (8 * k));
}

// `sum`, the float sum of `a` and `b` (bits of a format of sign bit `sign`,
// infinity `inf` and quiet bit `quiet`), with the NaN x86 gives where it is
// one: the NaN operand, quieted (the first where both are), else the
// default NaN, negative and quiet. The GPU's additions return one canonical
// NaN instead; the host's twin (`Float::nan_of`) spells out the same rule.
DEVICE u64 x86_nan(u64 sum, u64 a, u64 b, u64 sign, u64 inf, u64 quiet) {
    u64 magnitude = sign - 1;
    if ((sum & magnitude) <= inf) return sum;
    if ((a & magnitude) > inf) return a | quiet;
    if ((b & magnitude) > inf) return b | quiet;
    return sign | inf | quiet;
}

// `a + b`, elements in the low bytes of words; integer carries past the
// element are dropped by `store`.
DEVICE u64 add(u32 delta, u64 a, u64 b) {
    if (delta == DELTA_F32) {
        u32 x = (u32)a, y = (u32)b;
        float fx, fy;
        __builtin_memcpy(&fx, &x, 4);
        __builtin_memcpy(&fy, &y, 4);
        float sum = fx + fy;
        __builtin_memcpy(&x, &sum, 4);
        return x86_nan(x, a, b, 1ull << 31, 0x7f800000ull, 1ull << 22);
    }
    if (delta == DELTA_F64) {
        double fx, fy;
        __builtin_memcpy(&fx, &a, 8);
        __builtin_memcpy(&fy, &b, 8);
        double sum = fx + fy;
        u64 bits;
        __builtin_memcpy(&bits, &sum, 8);
        return x86_nan(bits, a, b, 1ull << 63, 0x7ff0000000000000ull, 1ull << 51);
    }
    return a + b;
}

// The running sum of the `len / width` elements at `p`, each swapped first
// when `swap`.
DEVICE void running_sum(u8 *p, u64 len, u64 width, u32 swap, u32 delta) {
    u64 n = len / width, sum = 0;
    for (u64 i = 0; i < n; i++) {
        u64 value = load(p + i * width, width, swap);
        sum = i == 0 ? value : add(delta, sum, value);
        store(p + i * width, width, sum);
    }
}

// `table` holds two arrays of `count` words: chunk addresses and lengths in
// bytes. `swap` is the bytes of a swapped word (1: none); `delta` the
// running sum's type, of elements of `width` bytes (`swap` is 1 or `width`
// then). Words `first`, `first + step`, ... of chunk `e`.
DEVICE void chunk_words(const u64 *table, u64 count, u64 e, u64 first, u64 step, u64 swap, u32 delta, u64 width) {
    u8 *p = (u8 *)table[e];
    u64 len = table[count + e];
    if (delta != DELTA_NONE) {
        if (first == 0) running_sum(p, len, width, swap > 1, delta);
        return;
    }
    if (swap < 2) return;
    u64 n = len / swap;
    for (u64 w = first; w < n; w += step) store(p + w * swap, swap, load(p + w * swap, swap, 1));
}

KERNEL void filter_elements(const u64 *table, u64 count, u64 swap, u64 delta, u64 width) {
#ifdef __CUDA__
    u64 e = __nvvm_read_ptx_sreg_ctaid_x();
    if (e >= count) return;
    u64 step = (u64)__nvvm_read_ptx_sreg_nctaid_y() * __nvvm_read_ptx_sreg_ntid_x();
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_y() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    chunk_words(table, count, e, first, step, swap, (u32)delta, width);
#else
    for (u64 e = 0; e < count; e++) chunk_words(table, count, e, 0, 1, swap, (u32)delta, width);
#endif
}

// numcodecs `fixedscaleoffset`: the stored integer `bits` (`stored` bytes,
// sign-extended when `is_signed`) as float64, divided by `scale` and
// `offset` added, as NumPy computes `enc / scale + offset`; the bits of that
// float64, or of it rounded to float32 unless `wide`. The host's twin is
// `ScaleOffset::apply` (src/format/scale_offset.rs).
DEVICE u64 scale_offset_element(u64 bits, u64 stored, u32 is_signed, u32 wide, double scale, double offset) {
    u32 shift = (u32)(64 - 8 * stored);
    double value = is_signed ? (double)((long long)(bits << shift) >> shift) : (double)bits;
    double decoded = value / scale + offset;
    if (wide) {
        u64 out;
        __builtin_memcpy(&out, &decoded, 8);
        return out;
    }
    float narrow = (float)decoded;
    u32 out;
    __builtin_memcpy(&out, &narrow, 4);
    return out;
}

// `table` holds three arrays of `count` words: source addresses (stored
// integers, little endian), destination addresses (the floats) and element
// counts. Elements `first`, `first + step`, ... of entry `e`.
DEVICE void entry_scale_offset(const u64 *table, u64 count, u64 e, u64 first, u64 step, u64 stored, u32 is_signed,
                               u32 wide, double scale, double offset) {
    const u8 *src = (const u8 *)table[e];
    u8 *dst = (u8 *)table[count + e];
    u64 n = table[2 * count + e], width = wide ? 8 : 4;
    for (u64 i = first; i < n; i += step) {
        u64 bits = load(src + i * stored, stored, 0);
        store(dst + i * width, width, scale_offset_element(bits, stored, is_signed, wide, scale, offset));
    }
}

// Widens every entry of `table` (see `entry_scale_offset`); `scale_bits` and
// `offset_bits` are the bits of the float64 scale and offset.
KERNEL void scale_offset(const u64 *table, u64 count, u64 stored, u64 is_signed, u64 wide, u64 scale_bits,
                         u64 offset_bits) {
    double scale, offset;
    __builtin_memcpy(&scale, &scale_bits, 8);
    __builtin_memcpy(&offset, &offset_bits, 8);
#ifdef __CUDA__
    u64 e = __nvvm_read_ptx_sreg_ctaid_x();
    if (e >= count) return;
    u64 step = (u64)__nvvm_read_ptx_sreg_nctaid_y() * __nvvm_read_ptx_sreg_ntid_x();
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_y() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    entry_scale_offset(table, count, e, first, step, stored, (u32)is_signed, (u32)wide, scale, offset);
#else
    for (u64 e = 0; e < count; e++)
        entry_scale_offset(table, count, e, 0, 1, stored, (u32)is_signed, (u32)wide, scale, offset);
#endif
}
