// Checksums of many device buffers in one launch: the low 32 bits of XXH64
// (seed 0; Zstandard's content checksum) and Adler-32 (zlib's trailer).
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time, so building the crate needs neither nvcc nor NVRTC.
//
// XXH64: one thread per buffer (a batch has thousands of buffers, so
// threads are plenty, and XXH64 reads a buffer's bytes in order). Adler-32:
// one block of ADLER_THREADS threads per buffer, each summing every
// ADLER_THREADS-th byte, the block's sums combined at the end, so that a
// megabyte buffer is not summed byte by byte by a single thread.

#include "prelude.h"

enum { KIND_XXH64_LOW32 = 0, KIND_ADLER32 = 1 };

static const u64 P1 = 0x9E3779B185EBCA87ULL;
static const u64 P2 = 0xC2B2AE3D27D4EB4FULL;
static const u64 P3 = 0x165667B19E3779F9ULL;
static const u64 P4 = 0x85EBCA77C2B2AE63ULL;
static const u64 P5 = 0x27D4EB2F165667C5ULL;

DEVICE u64 rotl64(u64 x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads, aligned or not: outputs may start at any byte.
DEVICE u64 load64(const u8 *p, int aligned) {
    if (aligned) return *(const u64 *)p;
    u64 v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

DEVICE u32 load32(const u8 *p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

DEVICE u64 round64(u64 acc, u64 input) {
    acc += input * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

DEVICE u64 merge64(u64 acc, u64 val) {
    acc ^= round64(0, val);
    return acc * P1 + P4;
}

DEVICE u32 xxh64_low32(const u8 *p, u64 len) {
    const u8 *end = p + len;
    int aligned = ((u64)p & 7) == 0;
    u64 h;
    if (len >= 32) {
        u64 v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;
        const u8 *limit = end - 32;
        do {
            v1 = round64(v1, load64(p, aligned));
            v2 = round64(v2, load64(p + 8, aligned));
            v3 = round64(v3, load64(p + 16, aligned));
            v4 = round64(v4, load64(p + 24, aligned));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = merge64(h, v1);
        h = merge64(h, v2);
        h = merge64(h, v3);
        h = merge64(h, v4);
    } else {
        h = P5;
    }
    h += len;
    while (p + 8 <= end) {
        h ^= round64(0, load64(p, aligned));
        h = rotl64(h, 27) * P1 + P4;
        p += 8;
    }
    if (p + 4 <= end) {
        h ^= (u64)load32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (u64)(*p) * P5;
        h = rotl64(h, 11) * P1;
        p++;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return (u32)h;
}

enum { ADLER_MOD = 65521, ADLER_THREADS = 128 };

// Adler-32 of n bytes x_i is a = 1 + S1 and b = n + n * S1 - SP (mod 65521),
// where S1 = sum x_i and SP = sum i * x_i: both are sums over the bytes, so
// any thread may add any bytes. Thread t adds bytes t, t + step, ...; its
// sums, reduced, go to s1[t] and sp[t].
DEVICE void adler32_part(const u8 *p, u64 len, u32 t, u32 step, u32 *s1, u32 *sp) {
    u64 a = 0, w = 0;
    u32 i_mod = t % ADLER_MOD; // i mod 65521, kept without dividing
    u32 step_mod = step % ADLER_MOD;
    // Each term of w is below 2^24: 2^39 of them fit 64 bits.
    for (u64 i = t; i < len; i += step) {
        a += p[i];
        w += (u64)i_mod * p[i];
        i_mod += step_mod;
        if (i_mod >= ADLER_MOD) i_mod -= ADLER_MOD;
    }
    s1[t] = (u32)(a % ADLER_MOD);
    sp[t] = (u32)(w % ADLER_MOD);
}

// The checksum from the `parts` threads' sums.
DEVICE u32 adler32_combine(u64 len, const u32 *s1, const u32 *sp, u32 parts) {
    u64 a = 0, w = 0;
    for (u32 t = 0; t < parts; t++) {
        a += s1[t];
        w += sp[t];
    }
    a %= ADLER_MOD;
    w %= ADLER_MOD;
    u64 n = len % ADLER_MOD;
    u64 A = (1 + a) % ADLER_MOD;
    u64 B = (n * A % ADLER_MOD + ADLER_MOD - w) % ADLER_MOD;
    return (u32)((B << 16) | A);
}

// `ptrs` and `lens` hold `count` buffer addresses and lengths (device
// arrays: nvCOMP's own output table can serve); `sums` receives one word
// per buffer, the checksum `kind` of its bytes. Launched with one thread per
// buffer for XXH64, one block of ADLER_THREADS threads per buffer for
// Adler-32.
KERNEL void checksums(const u64 *ptrs, const u64 *lens, u64 count, u64 kind, u32 *sums) {
#ifdef __CUDA__
    if (kind == KIND_ADLER32) {
        static __attribute__((shared)) u32 s1[ADLER_THREADS], sp[ADLER_THREADS];
        u64 k = __nvvm_read_ptx_sreg_ctaid_x();
        u32 t = __nvvm_read_ptx_sreg_tid_x();
        if (k >= count) return; // the whole block: no thread waits below
        adler32_part((const u8 *)ptrs[k], lens[k], t, ADLER_THREADS, s1, sp);
        __syncthreads();
        if (t == 0) sums[k] = adler32_combine(lens[k], s1, sp, ADLER_THREADS);
        return;
    }
    u64 k = (u64)__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    if (k >= count) return;
    sums[k] = xxh64_low32((const u8 *)ptrs[k], lens[k]);
#else
    // The host build runs each block's threads one after the other.
    for (u64 k = 0; k < count; k++) {
        const u8 *p = (const u8 *)ptrs[k];
        if (kind == KIND_ADLER32) {
            u32 s1[ADLER_THREADS], sp[ADLER_THREADS];
            for (u32 t = 0; t < ADLER_THREADS; t++) adler32_part(p, lens[k], t, ADLER_THREADS, s1, sp);
            sums[k] = adler32_combine(lens[k], s1, sp, ADLER_THREADS);
        } else {
            sums[k] = xxh64_low32(p, lens[k]);
        }
    }
#endif
}
