// The Huffman streams of Zstandard literals sections, checked on the device:
// each stream must decode to exactly its literals, its last bit read by the
// last one (RFC 8878, 4.2.2). The host has checked everything else of the
// frames (`format::zstd::check_frames_with`), including each stream's end
// mark; decoding the streams is most of a check's work, and a batch has
// thousands of them, independent of each other.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time. The host build (plain C) is what the Rust tests compare with the
// host's own decoder.
//
// One thread per stream, SECTIONS_PER_BLOCK sections to a thread block: its
// threads fill each section's table of code lengths by 12-bit lookahead in
// shared memory (4 bits an entry), then each walks its stream from the end,
// as `format::fse::BackwardBits` does: a 64-bit container refilled every 4
// codes (4 codes of at most 12 bits fit the 57 bits a refill leaves), zeros
// read past the stream's start. Only lengths are looked up: no literal is
// written. A walk is a chain of dependent loads, so what makes the kernel
// fast is many walks in flight: full warps, and small tables.
//
// The container is read as the two 8-byte aligned words around it: a
// stream must lie 16 bytes or more inside its allocation (the engine's
// staged inputs are preceded by their table and followed by the results).
//
// A section is SECTION_WORDS 64-bit words:
//   0-3   the streams' device addresses
//   4-7   per stream: bytes (low 32 bits), literals (high 32 bits)
//   8-10  the code's ends: for weight w at w - 1, the end of the lookaheads
//         of weights up to w, 16 bits each, 4 to a word, lowest first
//   11    the table log (bits 0-7) and the number of streams (bits 8-15)
// The verdict of stream i of section k goes to byte 4k + i.

#include "prelude.h"

enum { LOOKAHEAD_BITS = 12, LOOKAHEADS = 1 << LOOKAHEAD_BITS, MAX_WEIGHT = 12 };
enum { SECTION_WORDS = 12, MAX_STREAMS = 4, SECTIONS_PER_BLOCK = 16 };
enum { THREADS = SECTIONS_PER_BLOCK * MAX_STREAMS, TABLE_WORDS = LOOKAHEADS / 8 };
enum { VERDICT_EXACT = 0, VERDICT_OVERRAN = 1, VERDICT_BITS_LEFT = 2 };

// A section's code: the ends of its weights' lookaheads (words 8-10) and
// its table log.
struct code {
    u64 ends[3];
    u32 log;
};

DEVICE struct code code_of(const u64 *s) {
    struct code c = {{s[8], s[9], s[10]}, (u32)(s[11] & 0xFF)};
    return c;
}

// The length of the code that `lookahead` starts with: lookaheads below the
// end of weight w's are of weight w or less, and weight w codes are
// log + 1 - w bits long.
DEVICE u32 code_length(const struct code *c, u32 lookahead) {
    u32 w = 1;
    for (u32 i = 0; i < MAX_WEIGHT - 1; i++) w += lookahead >= (u32)((c->ends[i / 4] >> (16 * (i % 4))) & 0xFFFF);
    return c->log + 1 - w;
}

// Word j of a table: the lengths of lookaheads 8j to 8j + 7, 4 bits each.
DEVICE u32 table_word(const struct code *c, u32 j) {
    u32 first = code_length(c, 8 * j), last = code_length(c, 8 * j + 7);
    if (first == last) return first * 0x11111111u;
    u32 word = 0;
    for (u32 e = 0; e < 8; e++) word |= code_length(c, 8 * j + e) << (4 * e);
    return word;
}

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

// The verdict on the `len`-byte stream at `p` (its last byte not 0) that
// must decode to `literals` codes, lengths looked up in `table`.
DEVICE u8 check_stream(const u8 *p, u32 len, u32 literals, const u32 *table) {
    if (len == 0) return VERDICT_OVERRAN;
    long long base = (long long)len - 8;
    u64 container = load_word(p, base);
    u32 last = p[len - 1];
    u32 consumed = 1;
    while (consumed < 9 && !(last & 0x80)) {
        last <<= 1;
        consumed++;
    }
    for (u32 k = 0; k < literals; k++) {
        if ((k & 3) == 0 && base > 0 && consumed >= 8) {
            long long step = consumed / 8 < base ? consumed / 8 : base;
            base -= step;
            consumed -= 8 * (u32)step;
            container = load_word(p, base);
        }
        // Past the start the shift wraps, as the host's does: only an
        // overrun reads there, and it is refused whatever it reads.
        u32 v = (u32)((container << (consumed & 63)) >> (64 - LOOKAHEAD_BITS));
        consumed += (table[v / 8] >> (4 * (v % 8))) & 15;
    }
    long long left = 8 * base + 64 - (long long)consumed;
    return left == 0 ? VERDICT_EXACT : left < 0 ? VERDICT_OVERRAN : VERDICT_BITS_LEFT;
}

DEVICE u32 streams_of(const u64 *s) { return (u32)((s[11] >> 8) & 0xFF); }

DEVICE u8 check_section_stream(const u64 *s, u32 i, const u32 *table) {
    return check_stream((const u8 *)s[i], (u32)s[4 + i], (u32)(s[4 + i] >> 32), table);
}

// `sections` holds `count` sections; `verdicts` receives 4 bytes per
// section. Launched with blocks of THREADS threads, one per
// SECTIONS_PER_BLOCK sections.
KERNEL void huffman_streams(const u64 *sections, u64 count, u8 *verdicts) {
#ifdef __CUDA__
    static __attribute__((shared)) u32 tables[SECTIONS_PER_BLOCK * TABLE_WORDS];
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_x() * SECTIONS_PER_BLOCK;
    u32 t = __nvvm_read_ptx_sreg_tid_x();
    if (first >= count) return; // the whole block: no thread waits below
    u32 here = count - first < SECTIONS_PER_BLOCK ? (u32)(count - first) : SECTIONS_PER_BLOCK;
    for (u32 q = 0; q < here; q++) {
        struct code c = code_of(sections + SECTION_WORDS * (first + q));
        for (u32 j = t; j < TABLE_WORDS; j += THREADS) tables[q * TABLE_WORDS + j] = table_word(&c, j);
    }
    __syncthreads();
    u32 q = t / MAX_STREAMS, i = t % MAX_STREAMS;
    const u64 *s = sections + SECTION_WORDS * (first + q);
    if (q < here && i < streams_of(s)) {
        verdicts[MAX_STREAMS * (first + q) + i] = check_section_stream(s, i, tables + q * TABLE_WORDS);
    }
#else
    // The host build runs each block's threads one after the other.
    u32 table[TABLE_WORDS];
    for (u64 k = 0; k < count; k++) {
        const u64 *s = sections + SECTION_WORDS * k;
        struct code c = code_of(s);
        for (u32 j = 0; j < TABLE_WORDS; j++) table[j] = table_word(&c, j);
        for (u32 i = 0; i < streams_of(s) && i < MAX_STREAMS; i++) verdicts[MAX_STREAMS * k + i] = check_section_stream(s, i, table);
    }
#endif
}
