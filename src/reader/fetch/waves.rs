//! Fetched chunks grouped into waves of bounded compressed size, the unit
//! the decoder takes: every backend of [`super`] sends what it fetches in
//! [`Wave`]s, each sent on when full (the local files' backend fills its
//! waves round by round, as its arenas are).

use bytes::Bytes;
use futures::TryStreamExt;
use tokio::sync::mpsc;

use crate::array::error::ReadError;

/// Fetched chunks, ready to decode together.
#[derive(Debug, Default)]
pub(crate) struct Wave {
    /// `(index into the plan's chunks, encoded bytes or None when missing)`.
    pub items: Vec<(usize, Option<Bytes>)>,
    /// Total encoded bytes.
    pub compressed_bytes: usize,
    /// Bytes fetched from the store for the wave: the encoded bytes, and for
    /// sharded arrays also shard indexes and the gaps of coalesced reads.
    pub fetched_bytes: usize,
}

impl Wave {
    /// Adds a fetched chunk; returns the wave when it has reached `wave_bytes`.
    pub(super) fn push(&mut self, i: usize, bytes: Option<Bytes>, wave_bytes: usize) -> Option<Wave> {
        self.compressed_bytes += bytes.as_ref().map_or(0, Bytes::len);
        self.fetched_bytes += bytes.as_ref().map_or(0, Bytes::len);
        self.items.push((i, bytes));
        (self.compressed_bytes >= wave_bytes).then(|| std::mem::take(self))
    }
}

/// Sends what `fetched` yields on `tx` in waves of at least `wave_bytes`
/// encoded bytes (the last may be smaller). Each item is fetched chunks
/// (`(index into the plan's chunks, encoded bytes or None)`) and the bytes
/// fetched besides them (a shard's index, the gaps of a coalesced read).
/// Stops at the first error, or when the receiver is gone.
pub(super) async fn send_waves<St>(mut fetched: St, wave_bytes: usize, tx: &mpsc::Sender<Wave>) -> Result<(), ReadError>
where
    St: futures::Stream<Item = Result<(Vec<(usize, Option<Bytes>)>, usize), ReadError>> + Unpin,
{
    let mut wave = Wave::default();
    while let Some((items, other_bytes)) = fetched.try_next().await? {
        wave.fetched_bytes += other_bytes;
        for (i, bytes) in items {
            if let Some(full) = wave.push(i, bytes, wave_bytes) {
                if tx.send(full).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
    if !wave.items.is_empty() {
        let _ = tx.send(wave).await;
    }
    Ok(())
}
