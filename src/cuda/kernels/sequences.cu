// The sequences of Zstandard frames, walked on the device as libzstd
// decodes them, without writing their output: each sequence must stay
// within its block's literals, the frame's output so far and its window,
// each block within the block maximum, the last sequence must read its bit
// stream's last bit, and the frame must decode to the content size it
// declares. The host has read every header and table description
// (`format::zstd_sequences::read_section`) and walks the same way
// (`walk_frame`): this is that walk, one thread per frame, since repeated
// offsets and tables carry from block to block. A verdict is only "passed"
// or "refused": the host walks a refused frame again for its error.
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time. The host build (plain C) is what the Rust tests compare with the
// host's own walk.
//
// A frame is FRAME_WORDS 64-bit words:
//   0  its first block (low 32 bits) and its number of blocks (high 32)
//   1  its window
//   2  the block maximum (low 32 bits); bit 63: it declares a content size
//   3  the content size it declares
//   4  bytes it decodes to after its last block
// A block (of those with sequences) is BLOCK_WORDS words:
//   0  the device address of its bit stream (its last byte not 0)
//   1  the stream's bytes (low 32 bits) and the number of sequences (high 32)
//   2  its literals (low 32 bits) and where its counts start (high 32)
//   3  bytes the frame decodes to before its literals since the last block
//   4  its tables: literal lengths (bits 0-15), offsets (16-31), match
//      lengths (32-47), each: bits 0-1 the mode, 2-5 the accuracy log, 6-11
//      the number of counts or the RLE symbol
// Counts are 16-bit, the block's kinds with MODE_COUNTS one after another.
//
// Each walker (a thread) builds its tables in its own TABLE_ENTRIES
// entries of shared memory, 2 bytes each: in global memory, the tables of
// thousands of walkers overflow the caches, and each sequence waited on
// three loads from device memory (2.9 us a sequence on the H200, against
// 17 ns on a host core). Shared memory bounds the walkers an SM holds at
// once: 4-byte entries fit 40 on an H200's SM, 2-byte ones 80, which took
// the walk of 16,384 frames of 64 KiB from 23.6 to 17.0 ms and sharded
// reads from 11.1 to 12.6 GB/s (blocks of 4, 8 and 16 walkers: 12.0, 12.6
// and 12.4). WALKERS_PER_BLOCK walkers take 21 KiB; the codes of the
// length symbols, shared by a block's walkers, follow. A stream is read as
// `format::fse::BackwardBits` reads it.

#include "prelude.h"
#include "bits.h"

enum { FRAME_WORDS = 5, BLOCK_WORDS = 5, WALKERS_PER_BLOCK = 8 };
enum { MODE_COUNTS = 0, MODE_RLE = 1, MODE_REPEAT = 2 };
enum { LITERAL_LENGTH = 0, OFFSET = 1, MATCH_LENGTH = 2 };
enum { MAX_SYMBOLS = 53 };
// A walker's tables: literal lengths (log <= 9), offsets (<= 8), match
// lengths (<= 9).
enum { OFFSETS_AT = 512, MATCH_LENGTHS_AT = 768, TABLE_ENTRIES = 1280 };

// One decoding state: its symbol (bits 0-5) and its count in the spread
// (6-15, under twice the table's size): the next state is read with
// `log - highest_bit(count)` bits onto `(count << bits) - size` (RFC 8878
// 4.1.1). A length symbol's baseline and extra bits are looked up in the
// block's `codes`, by kind; an offset symbol is its own number of extra
// bits.
typedef u16 entry;
enum { SYMBOL_SLOTS = 64 };

DEVICE u32 entry_symbol(entry e) { return e & 63; }
DEVICE u32 entry_count(entry e) { return e >> 6; }
DEVICE entry entry_of(u32 symbol, u32 count) { return (entry)(symbol | count << 6); }

DEVICE u32 highest_bit(u32 v) { return 31 - (u32)__builtin_clz(v); }

// The next state's bits of `e` in a table of log `log`, and its base in
// `*base`.
DEVICE u32 next_bits(entry e, u32 log, u32 *base) {
    u32 count = entry_count(e), bits = log - highest_bit(count);
    *base = (count << bits) - (1u << log);
    return bits;
}

// A length code as the block's `codes` keep it: the baseline (bits 0-23)
// and the extra bits (24-31).
DEVICE u32 code_baseline(u32 code) { return code & 0xFFFFFF; }
DEVICE u32 code_extra(u32 code) { return code >> 24; }

// Extra bits of long length code k (codes from 16 for literal lengths, from
// 32 for match lengths, RFC 8878 3.1.1.3.2.1.1): pairs of growing widths,
// then one more bit a code.
DEVICE u32 long_code_extra(u32 kind, u32 k) {
    if (k < 4) return 1;
    if (kind == LITERAL_LENGTH) return k < 9 ? k / 2 : k - 3;
    return k < 10 ? k / 2 : k == 10 ? 5 : k - 4;
}

// The baseline and extra bits length symbol `symbol` of `kind` (literal
// or match lengths) stands for: each long code starts where the one before
// it ends.
DEVICE void code_of(u32 kind, u32 symbol, u32 *baseline, u32 *extra) {
    u32 short_codes = kind == LITERAL_LENGTH ? 16 : 32, base = kind == LITERAL_LENGTH ? 0 : 3;
    if (symbol < short_codes) {
        *baseline = symbol + base;
        *extra = 0;
        return;
    }
    u32 b = short_codes + base;
    for (u32 k = 0; k < symbol - short_codes; k++) b += 1u << long_code_extra(kind, k);
    *baseline = b;
    *extra = long_code_extra(kind, symbol - short_codes);
}

// The FSE decoding table of `n` counts (RFC 8878 4.1.1): "less than one"
// symbols at the top, the others spread by the standard step, each
// symbol's next state counted in `next` (MAX_SYMBOLS); returns 0
// where the spread does not fill the states (never for counts the host
// read, which add up to the table's size).
DEVICE u32 build_table(entry *t, u16 *next, u32 log, const i16 *counts, u32 n) {
    u32 size = 1u << log, mask = size - 1, high = size;
    // The spread writes each state's symbol first.
    for (u32 s = 0; s < n; s++) {
        if (counts[s] == -1) {
            t[--high] = s;
            next[s] = 1;
        } else {
            next[s] = (u16)counts[s];
        }
    }
    u32 step = (size >> 1) + (size >> 3) + 3, at = 0;
    for (u32 s = 0; s < n; s++) {
        for (i16 c = 0; c < counts[s]; c++) {
            t[at] = s;
            at = (at + step) & mask;
            while (at >= high) at = (at + step) & mask;
        }
    }
    if (at != 0) return 0;
    for (u32 state = 0; state < size; state++) {
        u32 s = t[state];
        t[state] = entry_of(s, next[s]++);
    }
    return 1;
}

// A block's table of `kind` from its spec, and its log in `*log`; counts
// at `*counts`, moved past them. Repeated tables stay as the last block
// left them.
DEVICE u32 block_table(entry *t, u16 *next, u32 spec, const i16 **counts, u32 *log) {
    u32 mode = spec & 3, n = (spec >> 6) & 63;
    if (mode == MODE_REPEAT) return 1;
    if (mode == MODE_RLE) {
        // One state, whose count 1 reads no bits onto base 0.
        t[0] = entry_of(n, 1);
        *log = 0;
        return 1;
    }
    *log = (spec >> 2) & 15;
    if (n > MAX_SYMBOLS || *log > 9) return 0;
    u32 built = build_table(t, next, *log, *counts, n);
    *counts += n;
    return built;
}

// `format::fse::BackwardBits`: the 8 bytes from `base` in `container`, of
// which the top `consumed` bits are read. A refill moves `base` back by at
// most 4 bytes, so the aligned words the container is cut from are kept:
// `lo` at `lo_at` and `hi` after it, and `ahead`, the word before `lo`,
// loaded when `lo` comes into use, one refill across an 8-byte boundary
// before it is needed. Read from device memory, each refill waited on its
// own loads otherwise, about 1 us a sequence on the H200. Words are read at
// most 15 bytes before the stream and 8 after it.
struct bits {
    const u8 *p;
    long long base;
    u64 container;
    u32 consumed;
    u64 lo_at, lo, hi, ahead;
};

DEVICE void load_around(struct bits *b) {
    u64 at = (u64)(b->p + b->base), first = (u64)b->p & ~7ULL;
    b->lo_at = at & ~7ULL;
    b->lo = load_aligned((const u8 *)b->lo_at);
    b->hi = load_aligned((const u8 *)b->lo_at + 8);
    b->ahead = b->lo_at >= first + 8 ? load_aligned((const u8 *)b->lo_at - 8) : 0;
}

DEVICE void cut_container(struct bits *b) {
    u32 shift = (u32)((u64)(b->p + b->base) & 7) * 8;
    b->container = shift ? b->lo >> shift | b->hi << (64 - shift) : b->lo;
}

DEVICE struct bits bits_of(const u8 *p, u32 len) {
    u32 last = p[len - 1], marks = 1;
    while (!(last & 0x80)) {
        last <<= 1;
        marks++;
    }
    struct bits b = {p, (long long)len - 8, 0, marks, 0, 0, 0, 0};
    if (b.base < 0) {
        // A stream under 8 bytes: one container, never refilled.
        b.container = load_word(p, b.base);
    } else {
        load_around(&b);
        cut_container(&b);
    }
    return b;
}

DEVICE void refill(struct bits *b) {
    if (b->base > 0 && b->consumed >= 8) {
        long long step = b->consumed / 8 < b->base ? b->consumed / 8 : b->base;
        b->base -= step;
        b->consumed -= 8 * (u32)step;
        u64 at = ((u64)(b->p + b->base)) & ~7ULL, first = (u64)b->p & ~7ULL;
        if (at + 8 == b->lo_at) {
            b->hi = b->lo;
            b->lo = b->ahead;
            b->lo_at = at;
            b->ahead = at >= first + 8 ? load_aligned((const u8 *)at - 8) : 0;
        } else if (at != b->lo_at) {
            load_around(b);
        }
        cut_container(b);
    }
}

DEVICE u64 read_bits(struct bits *b, u32 n) {
    if (n == 0) return 0;
    u64 v = (b->container << (b->consumed & 63)) >> (64 - n);
    b->consumed += n;
    return v;
}

DEVICE long long bits_left(const struct bits *b) { return 8 * b->base + 64 - (long long)b->consumed; }

// The sequences of one block; returns 0 where the walk refuses them, else
// adds what the block decodes to to `*output`.
// The repeated offsets, in registers: an array indexed by the sequence
// would live in local memory, which the shared tables leave little cache.
struct repeats {
    u64 r0, r1, r2;
};

DEVICE u32 walk_block(const u64 *block, const entry *tables, const u32 *codes, const u32 *logs, u64 window,
                      u64 block_max, struct repeats *rep, u64 *output) {
    const entry *ll_table = tables, *of_table = tables + OFFSETS_AT, *ml_table = tables + MATCH_LENGTHS_AT;
    const u32 *ll_codes = codes, *ml_codes = codes + SYMBOL_SLOTS;
    struct bits b = bits_of((const u8 *)block[0], (u32)block[1]);
    u32 count = (u32)(block[1] >> 32);
    u64 literals_left = (u32)block[2], frame_output = *output, out = frame_output;
    refill(&b);
    u32 ll_state = (u32)read_bits(&b, logs[LITERAL_LENGTH]);
    u32 of_state = (u32)read_bits(&b, logs[OFFSET]);
    u32 ml_state = (u32)read_bits(&b, logs[MATCH_LENGTH]);
    for (u32 left = count; left-- > 0;) {
        entry ll = ll_table[ll_state], of = of_table[of_state], ml = ml_table[ml_state];
        u32 ll_code = ll_codes[entry_symbol(ll)], ml_code = ml_codes[entry_symbol(ml)];
        u32 ll_baseline = code_baseline(ll_code), of_extra = entry_symbol(of);
        refill(&b);
        u64 offset;
        u64 r0 = rep->r0, r1 = rep->r1, r2 = rep->r2;
        if (of_extra > 1) {
            offset = (1ull << entry_symbol(of)) - 3 + read_bits(&b, of_extra);
            r2 = r1;
            r1 = r0;
        } else {
            u32 no_literals = ll_baseline == 0;
            if (of_extra == 0) {
                // Repeat 1, or repeat 2 after a sequence without literals.
                offset = no_literals ? r1 : r0;
                r1 = no_literals ? r0 : r1;
            } else {
                u32 index = 1 + no_literals + (u32)read_bits(&b, 1);
                offset = index == 3 ? r0 - 1 : index == 1 ? r1 : r2;
                r2 = index != 1 ? r1 : r2;
                r1 = r0;
            }
        }
        rep->r0 = offset;
        rep->r1 = r1;
        rep->r2 = r2;
        refill(&b);
        u64 match_len = code_baseline(ml_code) + read_bits(&b, code_extra(ml_code));
        u64 literal_len = ll_baseline + read_bits(&b, code_extra(ll_code));
        if (left > 0) {
            refill(&b);
            u32 base, bits = next_bits(ll, logs[LITERAL_LENGTH], &base);
            ll_state = base + (u32)read_bits(&b, bits);
            bits = next_bits(ml, logs[MATCH_LENGTH], &base);
            ml_state = base + (u32)read_bits(&b, bits);
            bits = next_bits(of, logs[OFFSET], &base);
            of_state = base + (u32)read_bits(&b, bits);
        }
        if (literal_len > literals_left) return 0;
        literals_left -= literal_len;
        out += literal_len;
        if (offset == 0 || offset > out || offset > window) return 0;
        out += match_len;
        if (out - frame_output > block_max) return 0;
    }
    if (bits_left(&b) != 0) return 0;
    u64 decoded = out - frame_output + literals_left;
    if (decoded > block_max) return 0;
    *output = frame_output + decoded;
    return 1;
}

// Walks frame `frame`'s blocks with the tables at `t`; 1 where it passes.
DEVICE u32 walk_frame(const u64 *frame, const u64 *blocks, const i16 *counts, entry *t, u16 *next,
                      const u32 *codes) {
    u32 first = (u32)frame[0], n = (u32)(frame[0] >> 32);
    u64 window = frame[1], block_max = frame[2] & 0xFFFFFFFFu, output = 0;
    struct repeats rep = {1, 4, 8};
    u32 logs[3] = {0, 0, 0};
    for (u32 k = 0; k < n; k++) {
        const u64 *block = blocks + BLOCK_WORDS * (u64)(first + k);
        const i16 *c = counts + (u32)(block[2] >> 32);
        u32 built = block_table(t, next, (u32)block[4] & 0xFFFF, &c, &logs[LITERAL_LENGTH]) &&
                    block_table(t + OFFSETS_AT, next, (u32)(block[4] >> 16) & 0xFFFF, &c, &logs[OFFSET]) &&
                    block_table(t + MATCH_LENGTHS_AT, next, (u32)(block[4] >> 32) & 0xFFFF, &c, &logs[MATCH_LENGTH]);
        if (!built) return 0;
        output += block[3];
        if (!walk_block(block, t, codes, logs, window, block_max, &rep, &output)) return 0;
    }
    output += frame[4];
    return !(frame[2] >> 63) || output == frame[3];
}

// The codes of the literal length symbols, then of the match length
// symbols, SYMBOL_SLOTS each; 0 past the last symbol.
DEVICE void fill_codes(u32 *codes, u32 first, u32 step) {
    for (u32 i = first; i < 2 * SYMBOL_SLOTS; i += step) {
        u32 kind = i < SYMBOL_SLOTS ? LITERAL_LENGTH : MATCH_LENGTH, symbol = i % SYMBOL_SLOTS;
        u32 max = kind == LITERAL_LENGTH ? 35 : 52, baseline = 0, extra = 0;
        if (symbol <= max) code_of(kind, symbol, &baseline, &extra);
        codes[i] = baseline | extra << 24;
    }
}

// `frames` holds `count` frames, `blocks` and `counts` their blocks and
// counts; `verdicts` receives a byte per frame, 1 where it passes.
// Launched with blocks of WALKERS_PER_BLOCK threads, a thread a frame.
KERNEL void sequence_frames(const u64 *frames, u64 count, const u64 *blocks, const i16 *counts, u8 *verdicts) {
#ifdef __CUDA__
    static __attribute__((shared)) entry tables[WALKERS_PER_BLOCK * TABLE_ENTRIES];
    static __attribute__((shared)) u16 next[WALKERS_PER_BLOCK * MAX_SYMBOLS];
    static __attribute__((shared)) u32 codes[2 * SYMBOL_SLOTS];
    u32 t = __nvvm_read_ptx_sreg_tid_x();
    u64 f = (u64)__nvvm_read_ptx_sreg_ctaid_x() * WALKERS_PER_BLOCK + t;
    fill_codes(codes, t, WALKERS_PER_BLOCK);
    __syncthreads();
    if (f < count) {
        const u64 *frame = frames + FRAME_WORDS * f;
        verdicts[f] = (u8)walk_frame(frame, blocks, counts, tables + TABLE_ENTRIES * t, next + MAX_SYMBOLS * t, codes);
    }
#else
    entry tables[TABLE_ENTRIES];
    u16 next[MAX_SYMBOLS];
    u32 codes[2 * SYMBOL_SLOTS];
    fill_codes(codes, 0, 1);
    for (u64 f = 0; f < count; f++) {
        verdicts[f] = (u8)walk_frame(frames + FRAME_WORDS * f, blocks, counts, tables, next, codes);
    }
#endif
}
