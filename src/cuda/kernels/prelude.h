// What every CUDA C kernel of this directory starts with: its entry and
// helper qualifiers, which compile both as CUDA (clang, for the PTX the
// driver loads) and as plain C (the host tests of the arithmetic), and the
// fixed-width integer names.

#ifndef ZARRS_NVCOMP_KERNEL_PRELUDE_H
#define ZARRS_NVCOMP_KERNEL_PRELUDE_H

#ifdef __CUDA__
#define KERNEL extern "C" __attribute__((global))
#define DEVICE static __attribute__((device)) __attribute__((always_inline))
#else
#define KERNEL
#define DEVICE static inline
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef short i16;

#endif
