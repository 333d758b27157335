//! Criterion benchmark of the CPU backend: encode and decode 64 MiB of
//! float32-like data in 1 MiB and 64 KiB chunks with LZ4 and Zstandard.

// criterion_group! defines a public function it cannot document.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use zarrs_nvcomp::{Backend, BatchCodec};

#[path = "common/data.rs"]
mod data;

fn cpu_backend(c: &mut Criterion) {
    let field = data::field_f32(64 << 20);
    let mut group = c.benchmark_group("cpu_backend");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(field.len() as u64));
    for name in ["lz4", "zstd"] {
        let codec = BatchCodec::new(name.parse().unwrap(), Backend::Cpu).unwrap();
        for chunk in [1 << 20, 64 << 10] {
            let chunks: Vec<&[u8]> = field.chunks(chunk).collect();
            let encoded = codec.encode_batch(&chunks).unwrap();
            let encoded: Vec<&[u8]> = encoded.iter().collect();
            let label = format!("{}KiB", chunk >> 10);
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/encode"), &label),
                &chunks,
                |b, chunks| b.iter(|| codec.encode_batch(chunks).unwrap()),
            );
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/decode"), &label),
                &encoded,
                |b, encoded| b.iter(|| codec.decode_batch(encoded).unwrap()),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, cpu_backend);
criterion_main!(benches);
