// The Huffman streams of Zstandard literals sections, checked on the device:
// each stream must decode to exactly its literals, its last bit read by the
// last one (RFC 8878, 4.2.2). The host has checked everything else of the
// frames (`format::zstd::check_frames`), including each stream's end
// mark; decoding the streams is most of a check's work, and a batch has
// thousands of them, independent of each other.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time. The host build (plain C) is what the Rust tests compare with the
// host's own decoder.
//
// SEGMENTS threads per stream, SECTIONS_PER_BLOCK sections to a thread
// block (a warp to a section): its threads fill each section's table of code
// lengths by 12-bit lookahead in shared memory (4 bits an entry). A walk is a
// chain of dependent loads, and a batch has too few streams to keep the GPU
// busy one walk each, so each stream is walked by up to SEGMENTS threads at
// once, each over its own range of the stream's bits:
//
// - A code's start is a position: the bits read from the stream's end, its
//   end mark's included. The stream decodes to exactly its literals when the
//   walk from the mark reaches the stream's start, 8 * bytes, after exactly
//   that many codes; only the count matters, not the codes.
// - Thread j walks its range [b_j, b_j+1) from b_j as if a code started
//   there, and keeps where its walk leaves the range (its exit) and how many
//   codes started in it.
// - Thread j's range really starts at thread j-1's exit. Where that differs
//   from where thread j started, thread j walks from both and, as soon as
//   the two walks meet, the rest of its count holds (Huffman codes fall back
//   into step within a few codes, as a rule); where they do not meet before
//   the range ends, the new walk's exit and count replace the old, and
//   thread j+1 goes again in the next round. Thread j-1 is right after round
//   j-1, so at most SEGMENTS rounds run, and the answer is the serial walk's
//   on any input: adversarial streams cost time, never a wrong verdict.
//
// A walk reads as `format::fse::BackwardBits` does: a 64-bit container
// refilled every 4 codes, zeros read past the stream's start (reached only
// at the walk's end). Only lengths are looked
// up: no literal is written.
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
#include "bits.h"

enum { LOOKAHEAD_BITS = 12, LOOKAHEADS = 1 << LOOKAHEAD_BITS, MAX_WEIGHT = 12 };
enum { SECTION_WORDS = 12, MAX_STREAMS = 4, SECTIONS_PER_BLOCK = 16, SEGMENTS = 8 };
enum { THREADS = SECTIONS_PER_BLOCK * MAX_STREAMS * SEGMENTS, TABLE_WORDS = LOOKAHEADS / 8 };
// Streams shorter than SEGMENTS ranges of this many bits get fewer threads:
// a shorter range would end before the walks met.
enum { MIN_SEGMENT_BITS = 512 };
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

// The length of lookahead `v`'s code in a table: never 0, which no code the
// host accepted has, so that every walk moves.
DEVICE u32 table_length(const struct code *c, u32 v) {
    u32 len = code_length(c, v);
    return len ? len : 1;
}

// Word j of a table: the lengths of lookaheads 8j to 8j + 7, 4 bits each.
DEVICE u32 table_word(const struct code *c, u32 j) {
    u32 first = table_length(c, 8 * j), last = table_length(c, 8 * j + 7);
    if (first == last) return first * 0x11111111u;
    u32 word = 0;
    for (u32 e = 0; e < 8; e++) word |= table_length(c, 8 * j + e) << (4 * e);
    return word;
}

// One stream of a section: `len` bytes at `p` (its last byte not 0) that
// must decode to `literals` codes, lengths looked up in `table`; positions
// run from `first` (the end mark's bits) to `end` (8 * len).
struct stream {
    const u8 *p;
    const u32 *table;
    u32 len, literals, first, end, segments;
};

DEVICE struct stream stream_of(const u64 *s, u32 i, const u32 *table) {
    struct stream st = {(const u8 *)s[i], table, (u32)s[4 + i], (u32)(s[4 + i] >> 32), 0, 0, 0};
    if (st.len == 0) return st;
    u32 last = st.p[st.len - 1];
    st.first = 1;
    while (st.first < 9 && !(last & 0x80)) {
        last <<= 1;
        st.first++;
    }
    st.end = 8 * st.len;
    u32 segments = (st.end - st.first) / MIN_SEGMENT_BITS;
    st.segments = segments < 1 ? 1 : segments > SEGMENTS ? SEGMENTS : segments;
    return st;
}

// Where range j of `st` starts (range `segments` starts at the end).
DEVICE u32 range_start(const struct stream *st, u32 j) {
    return st->first + (u32)((u64)(st->end - st->first) * j / st->segments);
}

// A walk at position `pos`: `consumed` bits of the container of the 8 bytes
// from `base` read, `codes` codes read since it started.
struct walk {
    u64 container;
    long long base;
    u32 consumed, pos, codes;
};

DEVICE struct walk walk_from(const struct stream *st, u32 pos) {
    // The container's lowest byte: at least 0, or the stream's first byte
    // less 8 for streams under 8 bytes, which are read in one container.
    long long top = (long long)st->len - 8, lowest = top < 0 ? top : 0;
    long long base = top - (long long)(pos / 8);
    if (base < lowest) base = lowest;
    struct walk w = {load_word(st->p, base), base, (u32)((long long)pos - 8 * (top - base)), pos, 0};
    return w;
}

// Reads one code. The container is refilled every 4 codes (4 codes of at
// most 12 bits fit the 57 bits a refill leaves), not when it runs low: the
// threads of a warp then wait for their loads together, once every 4 codes,
// rather than for one thread's or another's at almost every code.
DEVICE void step(const struct stream *st, struct walk *w) {
    if ((w->codes++ & 3) == 0 && w->consumed >= 8 && w->base > 0) {
        long long bytes = w->consumed / 8 < w->base ? w->consumed / 8 : w->base;
        w->base -= bytes;
        w->consumed -= 8 * (u32)bytes;
        w->container = load_word(st->p, w->base);
    }
    // Past the stream's start the shift would wrap: no walk reads there.
    u32 v = (u32)((w->container << (w->consumed & 63)) >> (64 - LOOKAHEAD_BITS));
    u32 len = (st->table[v / 8] >> (4 * (v % 8))) & 15;
    w->consumed += len;
    w->pos += len;
}

// What a thread knows of its range: where its walk started, where it left
// the range and how many codes started in between.
struct range {
    u32 start, exit, codes;
};

// The walk of range j from its start.
DEVICE struct range walk_range(const struct stream *st, u32 j) {
    u32 start = range_start(st, j), stop = range_start(st, j + 1);
    struct walk w = walk_from(st, start);
    while (w.pos < stop) step(st, &w);
    struct range r = {start, w.pos, w.codes};
    return r;
}

// Range j's walk moved to start at `entry`, where the walk of the range
// before left it; returns whether its exit moved.
DEVICE u32 enter_range(const struct stream *st, u32 j, struct range *r, u32 entry) {
    u32 stop = range_start(st, j + 1);
    struct walk now = walk_from(st, entry), before = walk_from(st, r->start);
    // The walk behind moves; `before` retraces the old walk, so it stops at
    // the old exit, the first place at or past `stop`.
    while (now.pos != before.pos && (now.pos < stop || before.pos < stop)) {
        if (now.pos < before.pos) {
            step(st, &now);
        } else {
            step(st, &before);
        }
    }
    r->start = entry;
    if (now.pos == before.pos) {
        r->codes = r->codes - before.codes + now.codes;
        return 0;
    }
    r->exit = now.pos;
    r->codes = now.codes;
    return 1;
}

// The verdict of a stream whose walk from its mark left it at `exit`, the
// first position at or past its start, after `codes` codes.
DEVICE u8 verdict_of(const struct stream *st, u32 exit, u32 codes) {
    if (codes > st->literals) return VERDICT_BITS_LEFT;
    if (codes < st->literals) return VERDICT_OVERRAN;
    return exit == st->end ? VERDICT_EXACT : VERDICT_OVERRAN;
}

DEVICE u32 streams_of(const u64 *s) { return (u32)((s[11] >> 8) & 0xFF); }

// Three blocks to a multiprocessor, which caps the registers of a thread at
// 40 (56 uncapped: two blocks): the walks are latency-bound, so the more of
// them in flight, the faster; four blocks (32 registers) spill the walks.
#ifdef __CUDA__
#define BLOCKS_PER_SM __attribute__((launch_bounds(THREADS, 3)))
#else
#define BLOCKS_PER_SM
#endif

// `sections` holds `count` sections; `verdicts` receives 4 bytes per
// section. Launched with blocks of THREADS threads, one per
// SECTIONS_PER_BLOCK sections.
KERNEL BLOCKS_PER_SM void huffman_streams(const u64 *sections, u64 count, u8 *verdicts) {
#ifdef __CUDA__
    static __attribute__((shared)) u32 tables[SECTIONS_PER_BLOCK * TABLE_WORDS];
    static __attribute__((shared)) u32 exits[THREADS], codes[THREADS];
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_x() * SECTIONS_PER_BLOCK;
    u32 t = __nvvm_read_ptx_sreg_tid_x();
    if (first >= count) return; // the whole block: no thread waits below
    u32 here = count - first < SECTIONS_PER_BLOCK ? (u32)(count - first) : SECTIONS_PER_BLOCK;
    for (u32 q = 0; q < here; q++) {
        struct code c = code_of(sections + SECTION_WORDS * (first + q));
        for (u32 j = t; j < TABLE_WORDS; j += THREADS) tables[q * TABLE_WORDS + j] = table_word(&c, j);
    }
    __syncthreads();
    u32 q = t / (MAX_STREAMS * SEGMENTS), i = t / SEGMENTS % MAX_STREAMS, j = t % SEGMENTS;
    const u64 *s = sections + SECTION_WORDS * (first + (q < here ? q : 0));
    struct stream st = stream_of(s, i, tables + q * TABLE_WORDS);
    u32 walks = q < here && i < streams_of(s) && st.len > 0 && j < st.segments;
    struct range r = {0, 0, 0};
    if (walks) r = walk_range(&st, j);
    exits[t] = r.exit;
    __syncthreads();
    for (u32 round = 0; round < SEGMENTS; round++) {
        u32 entry = j > 0 ? exits[t - 1] : 0;
        __syncthreads();
        u32 moved = walks && j > 0 && entry != r.start && enter_range(&st, j, &r, entry);
        if (moved) exits[t] = r.exit;
        if (!__nvvm_bar0_or(moved)) break;
    }
    codes[t] = r.codes;
    __syncthreads();
    if (q < here && i < streams_of(s) && j == 0) {
        u32 total = 0;
        for (u32 k = 0; k < st.segments; k++) total += codes[t + k];
        u8 v = st.len == 0 ? VERDICT_OVERRAN : verdict_of(&st, exits[t + st.segments - 1], total);
        verdicts[MAX_STREAMS * (first + q) + i] = v;
    }
#else
    // The host build runs each stream's threads one after the other, round
    // by round.
    u32 table[TABLE_WORDS];
    for (u64 k = 0; k < count; k++) {
        const u64 *s = sections + SECTION_WORDS * k;
        struct code c = code_of(s);
        for (u32 j = 0; j < TABLE_WORDS; j++) table[j] = table_word(&c, j);
        for (u32 i = 0; i < streams_of(s) && i < MAX_STREAMS; i++) {
            struct stream st = stream_of(s, i, table);
            if (st.len == 0) {
                verdicts[MAX_STREAMS * k + i] = VERDICT_OVERRAN;
                continue;
            }
            struct range r[SEGMENTS];
            for (u32 j = 0; j < st.segments; j++) r[j] = walk_range(&st, j);
            for (u32 moved = 1, round = 0; moved && round < SEGMENTS; round++) {
                u32 entries[SEGMENTS];
                for (u32 j = 1; j < st.segments; j++) entries[j] = r[j - 1].exit;
                moved = 0;
                for (u32 j = 1; j < st.segments; j++) {
                    if (entries[j] != r[j].start) moved |= enter_range(&st, j, &r[j], entries[j]);
                }
            }
            u32 total = 0;
            for (u32 j = 0; j < st.segments; j++) total += r[j].codes;
            verdicts[MAX_STREAMS * k + i] = verdict_of(&st, r[st.segments - 1].exit, total);
        }
    }
#endif
}
