// Raw DEFLATE streams (RFC 1951) walked on the device as zlib inflates
// them, without writing their output: every block type, stored length,
// code length code, literal/length and distance code and repeat must be
// one zlib accepts, and every match must reach no further back than the
// output so far. nvCOMP's decoder checks none of this, and the host's
// check (`format::deflate::check_stream`, zlib-rs) inflated every untrusted
// stream whole, at a host core's pace: this walk is the same decision,
// one thread per stream. A verdict is the number of input bytes the
// stream takes (what zlib's `total_in` says at its end), or REFUSED; the
// host inflates a refused stream again for its error.
//
// Where zlib's rules are not plain RFC 1951 they are zlib's:
// - a code length code must be complete;
// - a literal/length or distance code may be incomplete only where it is
//   a single code of one bit, and a distance code may be empty (a block of
//   literals); decoding a code it lacks is an error;
// - symbols 286 and 287 and distance codes 30 and 31, which only the fixed
//   codes hold, are errors where they are decoded;
// - a dynamic block declares at most 286 literal/length and 30 distance
//   codes, and must give the end-of-block symbol a code;
// - a repeat of the previous length needs one, and no repeat may run past
//   the lengths declared (it may cross from the literal/length lengths
//   into the distance ones).
//
// Compiled to PTX by scripts/regenerate-ptx.sh (clang, no CUDA toolkit);
// the PTX is committed next to this file and loaded by the driver at run
// time. The host build (plain C) is what the Rust tests compare with
// zlib-rs's verdicts.
//
// A stream is STREAM_WORDS 64-bit words: its device address, its bytes.
// Its verdict is a 64-bit word. A stream is read 8 bytes at a time, as
// `bits.h` reads them, so it must lie 16 bytes or more inside its
// allocation, as the engine's staged inputs do.
//
// Codes are decoded by a table of their first FAST_BITS bits where they
// are that short (most literal/length and distance codes), else bit by bit
// over the code's counts; the table and the counts are a walker's own, in
// local memory. On a host core the table took a walk of zlib level 1 field
// data from 104 to about 290 MB/s of output.

#include "prelude.h"
#include "bits.h"

enum { STREAM_WORDS = 2, WALKERS_PER_BLOCK = 32 };
enum { MAX_BITS = 15, LITLEN_CODES = 288, DIST_CODES = 32, CODE_LENGTH_CODES = 19 };
enum { END_OF_BLOCK = 256 };
enum { FAST_BITS = 10, FAST = 1 << FAST_BITS, SYMBOL_BITS = 9 };

#define REFUSED (~0ULL)

// The stream's bits, least significant first, read a byte at a time.
typedef struct {
    const u8 *in;
    u64 len;
    u64 pos;
    u64 hold;
    u32 bits;
} Bits;

// Tops up `b->hold` to at least 56 bits, or to the stream's end. Bits of
// `hold` above `bits` may hold the stream's next bits: loading them again
// ORs the same values in.
DEVICE void refill(Bits *b) {
    if (b->pos + 8 <= b->len) {
        b->hold |= load_word(b->in + b->pos, 0) << b->bits;
        u32 bytes = (63 - b->bits) >> 3;
        b->pos += bytes;
        b->bits += 8 * bytes;
        return;
    }
    while (b->bits <= 56 && b->pos < b->len) {
        b->hold |= (u64)b->in[b->pos++] << b->bits;
        b->bits += 8;
    }
}

// Whether `b->hold` has `n` bits (n <= 32), topped up where it has fewer.
DEVICE int need(Bits *b, u32 n) {
    if (b->bits < n) refill(b);
    return b->bits >= n;
}

DEVICE u32 take(Bits *b, u32 n) {
    u32 v = (u32)(b->hold & ((1ULL << n) - 1));
    b->hold >>= n;
    b->bits -= n;
    return v;
}

// A canonical Huffman code: the number of codes of each length, the
// symbols in code order, and the table of its codes of FAST_BITS bits or
// fewer: by the next FAST_BITS bits of the stream, the symbol (bits 0-8)
// and its code's length (9-12), 0 where no code that short starts so.
typedef struct {
    u16 count[MAX_BITS + 1];
    u16 symbol[LITLEN_CODES];
    u16 fast[FAST];
} Code;

// The `len` low bits of `code` in reverse order: Huffman codes are
// packed from their most significant bit.
DEVICE u32 reversed(u32 code, u32 len) {
    u32 r = 0;
    for (u32 i = 0; i < len; i++) r |= ((code >> i) & 1) << (len - 1 - i);
    return r;
}

// Fills `c->fast` from `c->count` and `c->symbol`.
DEVICE void build_fast(Code *c) {
    for (u32 i = 0; i < FAST; i++) c->fast[i] = 0;
    u32 code = 0, k = 0;
    for (u32 len = 1; len <= FAST_BITS; len++) {
        for (u32 i = 0; i < c->count[len]; i++, k++, code++) {
            u16 entry = (u16)(c->symbol[k] | len << SYMBOL_BITS);
            for (u32 at = reversed(code, len); at < FAST; at += 1u << len) c->fast[at] = entry;
        }
        code <<= 1;
    }
}

// Builds `c` from the `n` code lengths `lengths`; returns the codes left
// unused (0: complete), or -1 where the lengths oversubscribe the code. The
// longest length is left in `*longest` (0: no codes).
DEVICE int build(Code *c, const u8 *lengths, u32 n, u32 *longest) {
    u16 offsets[MAX_BITS + 1];
    for (u32 len = 0; len <= MAX_BITS; len++) c->count[len] = 0;
    for (u32 s = 0; s < n; s++) c->count[lengths[s]]++;
    *longest = 0;
    for (u32 len = 1; len <= MAX_BITS; len++)
        if (c->count[len]) *longest = len;
    int left = 1;
    for (u32 len = 1; len <= MAX_BITS; len++) {
        left <<= 1;
        left -= c->count[len];
        if (left < 0) return -1;
    }
    offsets[1] = 0;
    for (u32 len = 1; len < MAX_BITS; len++) offsets[len + 1] = offsets[len] + c->count[len];
    for (u32 s = 0; s < n; s++)
        if (lengths[s]) c->symbol[offsets[lengths[s]]++] = (u16)s;
    build_fast(c);
    return left;
}

// The next symbol of code `c`: -1 where the bits read are no code of it,
// -2 where the stream ends first.
DEVICE int decode(Bits *b, const Code *c) {
    need(b, MAX_BITS);
    u32 entry = c->fast[b->hold & (FAST - 1)], len = entry >> SYMBOL_BITS;
    if (len && len <= b->bits) {
        take(b, len);
        return (int)(entry & ((1u << SYMBOL_BITS) - 1));
    }
    int code = 0, first = 0, index = 0;
    for (u32 len = 1; len <= MAX_BITS; len++) {
        if (b->bits == 0) return -2;
        code |= (int)take(b, 1);
        int count = c->count[len];
        if (code - count < first) return c->symbol[index + (code - first)];
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    return -1;
}

// Length and distance bases and extra bits (RFC 1951 3.2.5), by their
// rule rather than a table: the number of extra bits rises by one every
// four length codes and every two distance codes.
DEVICE u32 length_extra(u32 i) { return i < 8 || i == 28 ? 0 : (i - 4) / 4; }
DEVICE u32 length_base(u32 i) {
    if (i < 8) return 3 + i;
    if (i == 28) return 258;
    return ((4 + i % 4) << length_extra(i)) + 3;
}
DEVICE u32 distance_extra(u32 i) { return i < 4 ? 0 : (i - 2) / 2; }
DEVICE u32 distance_base(u32 i) { return i < 4 ? 1 + i : ((2 + i % 2) << distance_extra(i)) + 1; }

// The symbols of one block with codes `lit` and `dist` (`dist` empty
// where `has_dist` is 0), counting the output in `*out`; 0 where zlib
// rejects them.
DEVICE int walk_codes(Bits *b, const Code *lit, const Code *dist, int has_dist, u64 *out) {
    for (;;) {
        int sym = decode(b, lit);
        if (sym < 0) return 0;
        if (sym < END_OF_BLOCK) {
            *out += 1;
            continue;
        }
        if (sym == END_OF_BLOCK) return 1;
        sym -= 257;
        if (sym >= 29) return 0;
        u32 extra = length_extra((u32)sym);
        if (!need(b, extra)) return 0;
        u64 length = length_base((u32)sym) + take(b, extra);
        if (!has_dist) return 0;
        int d = decode(b, dist);
        if (d < 0 || d >= 30) return 0;
        extra = distance_extra((u32)d);
        if (!need(b, extra)) return 0;
        u64 distance = distance_base((u32)d) + take(b, extra);
        if (distance > *out) return 0;
        *out += length;
    }
}

// A walker's codes: the literal/length and distance codes of the block,
// and the code length code of a dynamic block's header.
typedef struct {
    Code lit;
    Code dist;
    u8 lengths[LITLEN_CODES + DIST_CODES];
} Codes;

// Whether a literal/length or distance code built with `left` codes unused
// and longest length `longest` is one zlib takes: complete, or a single
// code of one bit (or, for distances, empty).
DEVICE int usable(int left, u32 longest, int may_be_empty) {
    if (left < 0) return 0;
    if (longest == 0) return may_be_empty;
    return left == 0 || longest == 1;
}

DEVICE int fixed_block(Bits *b, Codes *c, u64 *out) {
    u32 longest;
    for (u32 s = 0; s < LITLEN_CODES; s++) c->lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    build(&c->lit, c->lengths, LITLEN_CODES, &longest);
    for (u32 s = 0; s < DIST_CODES; s++) c->lengths[s] = 5;
    build(&c->dist, c->lengths, DIST_CODES, &longest);
    return walk_codes(b, &c->lit, &c->dist, 1, out);
}

DEVICE int dynamic_block(Bits *b, Codes *c, u64 *out) {
    const u8 order[CODE_LENGTH_CODES] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    if (!need(b, 14)) return 0;
    u32 nlen = take(b, 5) + 257, ndist = take(b, 5) + 1, ncode = take(b, 4) + 4;
    if (nlen > 286 || ndist > 30) return 0;
    for (u32 i = 0; i < CODE_LENGTH_CODES; i++) {
        u32 len = 0;
        if (i < ncode) {
            if (!need(b, 3)) return 0;
            len = take(b, 3);
        }
        c->lengths[order[i]] = (u8)len;
    }
    u32 longest;
    // The code length code goes in `dist`, free until the block's own.
    if (build(&c->dist, c->lengths, CODE_LENGTH_CODES, &longest) != 0 || longest == 0) return 0;
    u32 have = 0;
    while (have < nlen + ndist) {
        int sym = decode(b, &c->dist);
        if (sym < 0) return 0;
        if (sym < 16) {
            c->lengths[have++] = (u8)sym;
            continue;
        }
        u32 len = 0, copy;
        if (sym == 16) {
            if (have == 0) return 0;
            len = c->lengths[have - 1];
            if (!need(b, 2)) return 0;
            copy = 3 + take(b, 2);
        } else if (sym == 17) {
            if (!need(b, 3)) return 0;
            copy = 3 + take(b, 3);
        } else {
            if (!need(b, 7)) return 0;
            copy = 11 + take(b, 7);
        }
        if (have + copy > nlen + ndist) return 0;
        while (copy--) c->lengths[have++] = (u8)len;
    }
    if (c->lengths[END_OF_BLOCK] == 0) return 0;
    if (!usable(build(&c->lit, c->lengths, nlen, &longest), longest, 0)) return 0;
    int left = build(&c->dist, c->lengths + nlen, ndist, &longest);
    if (!usable(left, longest, 1)) return 0;
    return walk_codes(b, &c->lit, &c->dist, longest != 0, out);
}

DEVICE int stored_block(Bits *b, u64 *out) {
    take(b, b->bits % 8);
    if (!need(b, 32)) return 0;
    u32 len = take(b, 16), nlen = take(b, 16);
    if (len != (~nlen & 0xffff)) return 0;
    // Whole bytes still held come first.
    while (len && b->bits) {
        take(b, 8);
        len--;
        *out += 1;
    }
    if (b->len - b->pos < len) return 0;
    // The next bits held, if any, are those of the bytes skipped.
    if (b->bits == 0) b->hold = 0;
    b->pos += len;
    *out += len;
    return 1;
}

// The input bytes the stream of `len` bytes at `in` takes, or REFUSED.
DEVICE u64 walk_stream(const u8 *in, u64 len, Codes *c) {
    Bits b = {in, len, 0, 0, 0};
    u64 out = 0;
    u32 last;
    do {
        if (!need(&b, 3)) return REFUSED;
        last = take(&b, 1);
        u32 type = take(&b, 2);
        int ok = type == 0 ? stored_block(&b, &out) : type == 1 ? fixed_block(&b, c, &out)
                 : type == 2                                     ? dynamic_block(&b, c, &out)
                                                                 : 0;
        if (!ok) return REFUSED;
    } while (!last);
    return b.pos - b.bits / 8;
}

// The verdicts of `count` streams of `streams` (STREAM_WORDS words each),
// one walker a stream.
KERNEL void deflate_streams(const u64 *streams, u64 count, u64 *verdicts) {
#ifdef __CUDA__
    u64 first = (u64)__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
    u64 step = (u64)__nvvm_read_ptx_sreg_nctaid_x() * __nvvm_read_ptx_sreg_ntid_x();
#else
    u64 first = 0, step = 1;
#endif
    Codes c;
    for (u64 i = first; i < count; i += step) {
        const u8 *in = (const u8 *)streams[STREAM_WORDS * i];
        verdicts[i] = walk_stream(in, streams[STREAM_WORDS * i + 1], &c);
    }
}
