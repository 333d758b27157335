//! Many copies of device-accessible memory in one kernel launch.
//!
//! Batches have thousands of buffers; one driver copy each costs microseconds
//! of host time apiece (`cuMemcpyBatchAsync` included), so the framing of
//! device inputs, the staging of misaligned inputs, the placement of outputs
//! and the reader's scatter of decoded chunks into an array (strided rows) go
//! through this kernel instead. Addresses may be device memory or
//! pinned host memory (unified addressing maps it into the device's space).
//!
//! The kernel is PTX text, compiled by the driver at first use, so the crate
//! needs neither nvcc nor NVRTC.

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;

use super::kernel_cache::{KernelFamily, Kernels, LoadedKernel, Table};
use super::memory::upload_table;
use super::ptx::grid_dim;
use super::CudaEngine;
use crate::error::Result;

/// One copy: `len` bytes from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Copy {
    pub dst: u64,
    pub src: u64,
    pub len: usize,
}

/// Rows of a strided copy: row `r` (of `rows`) is `width` bytes from
/// `src + r * src_pitch` to `dst + r * dst_pitch`. A box of a C-order array
/// with more dimensions is several of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rows {
    /// Source address of the first row.
    pub src: u64,
    /// Destination address of the first row.
    pub dst: u64,
    /// Bytes per row.
    pub width: usize,
    /// Number of rows.
    pub rows: usize,
    /// Bytes from one source row to the next.
    pub src_pitch: usize,
    /// Bytes from one destination row to the next.
    pub dst_pitch: usize,
}

impl From<Copy> for Rows {
    fn from(c: Copy) -> Self {
        Self {
            src: c.src,
            dst: c.dst,
            width: c.len,
            rows: 1,
            src_pitch: 0,
            dst_pitch: 0,
        }
    }
}

impl Rows {
    /// log2 of the widest unit (16, 4 or 1 bytes) that every address and
    /// length of the copy is a multiple of: aligned copies move 16 bytes per
    /// thread and load, misaligned ones (staged inputs) go byte by byte.
    fn unit_shift(&self) -> u64 {
        let mut bits = self.src | self.dst | self.width as u64;
        if self.rows > 1 {
            bits |= (self.src_pitch | self.dst_pitch) as u64;
        }
        [4, 2].into_iter().find(|&s| bits.is_multiple_of(1 << s)).unwrap_or(0)
    }
}

/// Block `(x, y)` copies part `y` of entry `x`: units (of 2^shift bytes)
/// `k = y * ntid + tid`, then every `nctaid.y * ntid` units on, tracking the
/// row and column of `k` without a division per unit. The table holds, per
/// entry, src, dst, width, rows, src pitch, dst pitch and the unit's shift, as
/// seven arrays of `count` words.
fn ptx() -> String {
    let head = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry copy_rows(.param .u64 table, .param .u64 count)
{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<32>;
    .reg .b16 %rs<2>;

    ld.param.u64 %rd1, [table];
    ld.param.u64 %rd2, [count];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd3, %r1, 8;
    shl.b64 %rd4, %rd2, 3;
    add.u64 %rd5, %rd1, %rd3;
{FIELDS}
    cvt.u32.u64 %r6, %rd12;
    shr.u64 %rd13, %rd8, %r6;
    mul.lo.u64 %rd14, %rd13, %rd9;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    cvt.u64.u32 %rd15, %r4;
    mad.wide.u32 %rd16, %r2, %r3, %rd15;
    setp.ge.u64 %p1, %rd16, %rd14;
    @%p1 bra DONE;
    mov.u32 %r5, %nctaid.y;
    mul.wide.u32 %rd17, %r5, %r3;
    div.u64 %rd18, %rd16, %rd13;
    mul.lo.u64 %rd19, %rd18, %rd13;
    sub.u64 %rd20, %rd16, %rd19;
    div.u64 %rd21, %rd17, %rd13;
    mul.lo.u64 %rd22, %rd21, %rd13;
    sub.u64 %rd23, %rd17, %rd22;
    setp.eq.u32 %p2, %r6, 4;
    @%p2 bra LOOP16;
    setp.eq.u32 %p3, %r6, 2;
    @%p3 bra LOOP4;
"#;
    // One loop per unit: %rd18 row, %rd20 column, %rd21/%rd23 the row and
    // column steps, %rd16 the unit index and %rd14 the total.
    let body = |label: &str, load: &str, store: &str| {
        format!(
            r#"
{label}:
    shl.b64 %rd24, %rd20, %r6;
    mad.lo.u64 %rd25, %rd18, %rd10, %rd6;
    add.u64 %rd25, %rd25, %rd24;
    mad.lo.u64 %rd26, %rd18, %rd11, %rd7;
    add.u64 %rd26, %rd26, %rd24;
    {load};
    {store};
    add.u64 %rd16, %rd16, %rd17;
    setp.ge.u64 %p4, %rd16, %rd14;
    @%p4 bra DONE;
    add.u64 %rd20, %rd20, %rd23;
    add.u64 %rd18, %rd18, %rd21;
    setp.lt.u64 %p5, %rd20, %rd13;
    @%p5 bra {label};
    sub.u64 %rd20, %rd20, %rd13;
    add.u64 %rd18, %rd18, 1;
    bra {label};
"#
        )
    };
    // The entry's fields into %rd6..%rd12, stepping %rd5 from array to array.
    let fields: Vec<String> = (6..6 + TABLE_ARRAYS)
        .map(|reg| format!("    ld.global.u64 %rd{reg}, [%rd5];\n    add.u64 %rd5, %rd5, %rd4;"))
        .collect();
    let mut text = head.replace("{FIELDS}", &fields.join("\n"));
    text += &body("LOOP1", "ld.u8 %rs1, [%rd25]", "st.u8 [%rd26], %rs1");
    text += &body("LOOP4", "ld.u32 %r7, [%rd25]", "st.u32 [%rd26], %r7");
    text += &body(
        "LOOP16",
        "ld.v4.u32 {%r8, %r9, %r10, %r11}, [%rd25]",
        "st.v4.u32 [%rd26], {%r8, %r9, %r10, %r11}",
    );
    text += "DONE:\n    ret;\n}\n";
    text
}

const THREADS: u32 = 256;
/// Bytes one block is given of an entry of average size, before the grid
/// stops growing: enough work per block to pay for its launch.
const BYTES_PER_BLOCK: usize = 16 << 10;
const MAX_PARTS: usize = 65_535;
const TABLE_ARRAYS: usize = 7;

/// The row-copy kernel; its table holds the copies of a launch.
#[derive(Debug)]
pub(super) enum CopyKernel {}

impl KernelFamily for CopyKernel {
    const ENTRY: &'static str = "copy_rows";
    type Memory = Table;
    fn ptx() -> Cow<'static, str> {
        Cow::Owned(ptx())
    }
}

impl LoadedKernel<CopyKernel> {
    /// Enqueues every strided copy on `stream` as one launch.
    ///
    /// # Safety
    /// Every row must be valid device-accessible memory until the stream
    /// reaches the copies, and no destination may overlap another row.
    pub(super) unsafe fn copy_rows(&mut self, ctx: &Arc<CudaContext>, copies: &[Rows], stream: CUstream) -> Result<()> {
        let copies: Vec<&Rows> = copies.iter().filter(|c| c.width > 0 && c.rows > 0).collect();
        if copies.is_empty() {
            return Ok(());
        }
        let n = copies.len();
        let mut words = vec![0u64; TABLE_ARRAYS * n];
        for (k, c) in copies.iter().enumerate() {
            let fields = [
                c.src,
                c.dst,
                c.width as u64,
                c.rows as u64,
                c.src_pitch as u64,
                c.dst_pitch as u64,
                c.unit_shift(),
            ];
            for (a, value) in fields.into_iter().enumerate() {
                words[a * n + k] = value;
            }
        }
        // SAFETY: the table is only used on the engine's stream.
        let table = unsafe { upload_table(ctx, &mut self.memory, &words, stream)? };
        let average = copies.iter().map(|c| c.width * c.rows).sum::<usize>() / n;
        let parts = average.div_ceil(BYTES_PER_BLOCK).clamp(1, MAX_PARTS) as u32;
        let blocks = grid_dim(n)?;
        let count = n as u64;
        let launch = self.kernel.launch_on(stream).arg(&table).arg(&count);
        // SAFETY: two u64 parameters, as the kernel declares; the caller vouches for the memory.
        unsafe { launch.launch((blocks, parts, 1), (THREADS, 1, 1)) }
    }
}

/// Enqueues `copies` on `engine`'s stream with the copy kernel of `kernels`
/// (the engine's, which its caller has locked), loaded at first use.
///
/// # Safety
/// As [`LoadedKernel::<CopyKernel>::copy_rows`].
pub(super) unsafe fn copy_all<R: Into<Rows>>(
    engine: &CudaEngine,
    kernels: &mut Kernels,
    copies: impl IntoIterator<Item = R>,
) -> Result<()> {
    let copier = kernels.get::<CopyKernel>(&engine.ctx)?;
    let rows: Vec<Rows> = copies.into_iter().map(Into::into).collect();
    // SAFETY: the caller vouches for the ranges.
    unsafe { copier.copy_rows(&engine.ctx, &rows, engine.cu_stream()) }
}

impl CudaEngine {
    /// Enqueues strided device copies on `engine`'s stream, in one kernel
    /// launch; the caller synchronises the stream.
    ///
    /// # Safety
    /// Every row must be device memory of the engine's context, alive until
    /// the stream has run the copies; destinations must not overlap.
    pub(crate) unsafe fn enqueue_rows(&self, rows: &[Rows]) -> Result<()> {
        let engine = self;
        let mut s = engine.lock()?;
        // SAFETY: the caller's.
        unsafe { copy_all(engine, &mut s.kernels, rows.iter().copied()) }
    }
}
