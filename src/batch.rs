//! A batch of byte buffers stored back to back in one allocation.

use std::ops::Range;

use crate::error::{Error, Result};

/// Buffers stored contiguously: buffer `i` is `data[offsets[i]..offsets[i + 1]]`.
///
/// Both backends return their results this way, so a batch costs one
/// allocation however many buffers it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    data: Vec<u8>,
    offsets: Vec<usize>,
}

impl Batch {
    /// A batch of buffers with the given sizes, zero-filled.
    pub fn zeroed(sizes: impl IntoIterator<Item = usize>) -> Self {
        let offsets = offsets_of(sizes);
        Self {
            data: vec![0; *offsets.last().unwrap()],
            offsets,
        }
    }

    /// A batch of buffers with the given sizes in `storage`'s allocation when
    /// it is large enough (its old bytes are kept, to be overwritten: only
    /// bytes past its old length are zeroed), else in a new zeroed one.
    /// Returns whether the storage was reused.
    pub(crate) fn in_storage(sizes: impl IntoIterator<Item = usize>, mut storage: Vec<u8>) -> (Self, bool) {
        let offsets = offsets_of(sizes);
        let total = *offsets.last().unwrap();
        if storage.capacity() < total {
            return (
                Self {
                    data: vec![0; total],
                    offsets,
                },
                false,
            );
        }
        if storage.len() >= total {
            storage.truncate(total);
        } else {
            storage.resize(total, 0);
        }
        (Self { data: storage, offsets }, true)
    }

    /// All bytes, writable: for backends that fill the batch in place.
    pub(crate) fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// A batch from its parts; `offsets` starts at 0, never decreases and ends at `data.len()`.
    ///
    /// # Panics
    /// If the offsets do not describe `data`.
    pub fn from_parts(data: Vec<u8>, offsets: Vec<usize>) -> Self {
        assert!(offsets.first() == Some(&0) && offsets.last() == Some(&data.len()));
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        Self { data, offsets }
    }

    /// A batch holding copies of `buffers`.
    pub fn from_buffers<B: AsRef<[u8]>>(buffers: &[B]) -> Self {
        let offsets = offsets_of(buffers.iter().map(|b| b.as_ref().len()));
        let mut data = Vec::with_capacity(*offsets.last().unwrap());
        buffers.iter().for_each(|b| data.extend_from_slice(b.as_ref()));
        Self { data, offsets }
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the batch holds no buffers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Byte range of buffer `i` within [`Self::data`].
    pub fn range(&self, i: usize) -> Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// Buffer `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[self.range(i)]
    }

    /// The buffers, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }

    /// Mutable views of every buffer.
    pub fn buffers_mut(&mut self) -> Vec<&mut [u8]> {
        let mut out = Vec::with_capacity(self.len());
        let mut rest = self.data.as_mut_slice();
        for w in self.offsets.windows(2) {
            let (head, tail) = rest.split_at_mut(w[1] - w[0]);
            out.push(head);
            rest = tail;
        }
        out
    }

    /// All bytes, buffer after buffer.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The `len() + 1` offsets into [`Self::data`].
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// The bytes and offsets.
    pub fn into_parts(self) -> (Vec<u8>, Vec<usize>) {
        (self.data, self.offsets)
    }

    /// Each buffer as its own vector.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

/// Checks that a batch of `inputs` buffers comes with as many outputs
/// (output buffers, or their sizes): [`Error::BatchLength`] otherwise. Every
/// API that takes both lists checks them here, before any work.
pub fn check_batch_length(inputs: usize, outputs: usize) -> Result<()> {
    if inputs != outputs {
        return Err(Error::BatchLength { inputs, outputs });
    }
    Ok(())
}

/// Prefix sums of `sizes`, starting at 0.
pub(crate) fn offsets_of(sizes: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut offsets = vec![0];
    let mut total = 0;
    for size in sizes {
        total += size;
        offsets.push(total);
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_kept_apart() {
        let mut batch = Batch::from_buffers(&[&b"ab"[..], b"", b"cde"]);
        assert_eq!(batch.len(), 3);
        assert_eq!(batch.to_vecs(), vec![b"ab".to_vec(), vec![], b"cde".to_vec()]);
        batch.buffers_mut()[2][0] = b'X';
        assert_eq!(batch.get(2), b"Xde");
        assert_eq!(batch.offsets(), &[0, 2, 2, 5]);
        assert!(Batch::from_buffers::<&[u8]>(&[]).is_empty());
    }

    #[test]
    fn batch_lengths_must_match() {
        assert!(check_batch_length(3, 3).is_ok());
        assert!(matches!(
            check_batch_length(2, 1),
            Err(Error::BatchLength { inputs: 2, outputs: 1 })
        ));
    }
}
