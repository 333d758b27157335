//! The wave loop of a batched read, the same for every [`WaveDecoder`]: for
//! each batch of the read's plan ([`Batches`]), the read's [`Fetcher`]
//! fetches the chunks in waves ([`super::fetch`]); each
//! wave is turned into [`WaveItem`]s (framing removed and checksums verified,
//! in parallel) and decoded on the blocking pool while the next wave is
//! fetched; progress is reported after each.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use tokio::sync::mpsc;
use zarrs::array::Array;
use zarrs::storage::AsyncReadableStorageTraits;

use super::fetch::{BatchFetch, Fetcher, Wave};
use super::parts::Parts;
use super::progress::Tracker;
use super::wave::WaveDecoder;
use super::ReadOptions;
use crate::array::chain::framing::Framing;
use crate::array::chain::shard::Sharded;
use crate::array::error::ReadError;
use crate::array::geometry::plan::Plan;
use crate::array::wave_item::WaveItem;

/// The chunks of a batched read, planned in batches ([`Parts::batches`]).
pub(crate) struct Batches<'a, S: ?Sized> {
    pub array: &'a Array<S>,
    pub sharded: Option<&'a Sharded<S>>,
    pub parts: &'a Parts<'a, S>,
    /// Bytes of an element of the array and of the compressor's output
    /// (other where a `fixedscaleoffset` widens them).
    pub sizes: (usize, usize),
    pub framing: Framing,
}

impl<S: ?Sized + AsyncReadableStorageTraits + 'static> Batches<'_, S> {
    /// Reads every batch into `decoder`, one after the other; progress is
    /// the whole read's.
    pub(crate) async fn read<D: WaveDecoder>(&self, options: &ReadOptions, mut decoder: D) -> Result<D, ReadError> {
        let mut tracker = Tracker::start(options.progress.clone(), self.parts.out_len() as u64);
        let (elem, stored_size) = self.sizes;
        let mut fetcher = None;
        for plan in self.parts.batches() {
            let mut plan = plan?;
            plan.chunks
                .iter_mut()
                .for_each(|chunk| chunk.decoded_len = chunk.decoded_len / elem * stored_size);
            // Made with the first batch's fetch and kept for the others:
            // it holds the read's listings of chunk directories.
            let fetcher =
                fetcher.get_or_insert_with(|| Fetcher::new(self.array, self.sharded.map(|s| &s.grid), options));
            let fetch = fetcher.batch(&mut plan);
            decoder = read_waves(Arc::new(plan), self.framing, options, (decoder, &mut tracker), fetch).await?;
        }
        Ok(decoder)
    }
}

/// Reads every chunk of `plan`, stored with `framing` around its compressed
/// stream, into `decoder`'s output, the waves fetched by `fetch` (into the
/// decoder's arenas where it gives them) while the wave before is decoded;
/// returns the decoder once every wave is in its output.
async fn read_waves<D, S>(
    plan: Arc<Plan>,
    framing: Framing,
    options: &ReadOptions,
    (decoder, tracker): (D, &mut Tracker),
    fetch: BatchFetch<'_, '_, S>,
) -> Result<D, ReadError>
where
    D: WaveDecoder,
    S: ?Sized + AsyncReadableStorageTraits + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Wave>(1);
    let wave_bytes = decoder.wave_bytes(options.wave_bytes).max(1);
    let producer = fetch.send_waves(plan.clone(), wave_bytes, decoder.arenas(), tx);
    let decoder = Arc::new(decoder);
    let consumer = consume_waves(&mut rx, &plan, framing, tracker, &decoder);
    futures::future::try_join(producer, consumer).await?;
    Arc::try_unwrap(decoder).map_err(|_| ReadError::Pipeline {
        reason: "output still shared".into(),
    })
}

/// Decodes the waves arriving on `rx` one after the other on the blocking
/// pool, while the producer fetches the next, and reports each to `tracker`.
async fn consume_waves<D: WaveDecoder>(
    rx: &mut mpsc::Receiver<Wave>,
    plan: &Arc<Plan>,
    framing: Framing,
    tracker: &mut Tracker,
    decoder: &Arc<D>,
) -> Result<(), ReadError> {
    let start = Instant::now();
    while let Some(wave) = rx.recv().await {
        let (chunks, bytes) = (wave.items.len(), wave.compressed_bytes);
        let fetched_bytes = wave.fetched_bytes;
        let placed: usize = wave.items.iter().map(|(i, _)| plan.chunks[*i].copy.bytes()).sum();
        tracker.fetched(fetched_bytes as u64);
        let fetched = start.elapsed();
        let (decoder, plan) = (decoder.clone(), plan.clone());
        tokio::task::spawn_blocking(move || {
            let items = wave_items(&plan, framing, &wave)?;
            crate::pool::in_pool(|| decoder.decode_wave(&items))?;
            log::debug!("zarrs-nvcomp reader: decoded a wave of {chunks} chunks, {bytes} compressed bytes");
            Ok::<_, ReadError>(())
        })
        .await
        .map_err(|source| ReadError::Task {
            task: "decoding",
            source,
        })??;
        tracker.decoded(placed as u64);
        if crate::profile::enabled() {
            eprintln!(
                "zarrs_nvcomp reader profile: wave of {chunks} chunks, {bytes} bytes: fetched at {:.2} ms, decoded at {:.2} ms",
                fetched.as_secs_f64() * 1e3,
                start.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    Ok(())
}

/// The items of a wave of fetched chunks: each chunk's compressed stream
/// inside `framing` (checked in parallel: CRC-32C sums read every byte), its
/// decoded size and its box in the output. A framing that does not fit is
/// [`ReadError::Corrupt`] naming the chunk.
fn wave_items<'a>(plan: &'a Plan, framing: Framing, wave: &'a Wave) -> Result<Vec<WaveItem<'a>>, ReadError> {
    crate::pool::collect_in_order(wave.items.par_iter().map(|(i, bytes)| {
        let chunk = &plan.chunks[*i];
        framing.item(&chunk.key, bytes.as_deref(), chunk.decoded_len, &chunk.copy)
    }))
}
