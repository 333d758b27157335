//! v3 `transpose` (and zarr v2's `order: "F"`) on the batched path: a chunk
//! stored with its dimensions permuted is decoded as it is and placed
//! through strides that follow the stored order, so the permutation costs
//! nothing but narrower rows of the placement (host and device alike).
//!
//! An order is a permutation of the chunk's dimensions: the stored chunk's
//! dimension `i` is the chunk's dimension `order[i]` (the `transpose`
//! codec's `order`, NumPy's `transpose` axes), stored in C order.

use serde_json::{Map, Value};

/// The `order` of a v3 `transpose` codec's configuration: a permutation of
/// `0..n`.
pub(super) fn parse_order(configuration: &Map<String, Value>) -> Result<Vec<usize>, String> {
    let order = configuration
        .get("order")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("transpose order {:?}", configuration.get("order")))?;
    let order: Vec<usize> = order
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("transpose order {order:?}"))?;
    let mut seen = vec![false; order.len()];
    for &d in &order {
        if d >= order.len() || std::mem::replace(&mut seen[d], true) {
            return Err(format!("transpose order {order:?} is not a permutation"));
        }
    }
    Ok(order)
}

/// The stored order of a chunk transposed by `first`, then by `then` (the
/// next `transpose` of the chain): `then` permutes the dimensions `first`
/// left.
pub(super) fn compose(first: Option<Vec<usize>>, then: Vec<usize>) -> Result<Vec<usize>, String> {
    match first {
        None => Ok(then),
        Some(first) if first.len() == then.len() => Ok(then.iter().map(|&i| first[i]).collect()),
        Some(first) => Err(format!("transposes of {} and {} dimensions", first.len(), then.len())),
    }
}

/// The byte strides of the dimensions of a chunk of `shape` whose elements
/// of `elem` bytes are stored in `order`.
///
/// # Panics
/// Unless `order` is a permutation of the chunk's dimensions (the chain is
/// checked against the array when it is opened).
pub(crate) fn stored_strides(shape: &[u64], order: &[usize], elem: usize) -> Vec<usize> {
    assert_eq!(shape.len(), order.len(), "a transpose of the chunk's dimensions");
    let mut strides = vec![0; shape.len()];
    let mut stride = elem;
    for &d in order.iter().rev() {
        strides[d] = stride;
        stride *= shape[d] as usize;
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(json: Value) -> Result<Vec<usize>, String> {
        parse_order(json.as_object().unwrap())
    }

    #[test]
    fn orders_are_permutations() {
        assert_eq!(order(serde_json::json!({"order": [2, 0, 1]})), Ok(vec![2, 0, 1]));
        for bad in [
            serde_json::json!({"order": [0, 0]}),
            serde_json::json!({"order": [0, 2]}),
            serde_json::json!({"order": "F"}),
            serde_json::json!({"order": [-1, 0]}),
            serde_json::json!({}),
        ] {
            assert!(order(bad.clone()).is_err(), "{bad}");
        }
    }

    /// The stored offset of chunk index `index`, as NumPy lays out
    /// `a.transpose(order)` in C order.
    fn numpy_offset(shape: &[u64], order: &[usize], index: &[u64]) -> u64 {
        let stored_shape: Vec<u64> = order.iter().map(|&d| shape[d]).collect();
        let stored_index: Vec<u64> = order.iter().map(|&d| index[d]).collect();
        stored_index
            .iter()
            .zip(&stored_shape)
            .fold(0, |offset, (i, n)| offset * n + i)
    }

    #[test]
    fn strides_follow_the_stored_order() {
        let shape = [2u64, 3, 5];
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let strides = stored_strides(&shape, &order, 4);
            for index in [[0u64, 0, 0], [1, 2, 4], [1, 0, 3], [0, 2, 1]] {
                let offset: usize = index.iter().zip(&strides).map(|(i, s)| *i as usize * s).sum();
                assert_eq!(
                    offset as u64,
                    4 * numpy_offset(&shape, &order, &index),
                    "{order:?} {index:?}"
                );
            }
        }
    }

    #[test]
    fn transposes_compose_in_chain_order() {
        // (a.transpose(p)).transpose(q) is a.transpose([p[q[0]], p[q[1]], p[q[2]]]).
        let (p, q) = (vec![1, 2, 0], vec![2, 0, 1]);
        let r = compose(Some(p.clone()), q.clone()).unwrap();
        assert_eq!(r, vec![0, 1, 2]);
        assert_eq!(compose(None, q.clone()).unwrap(), q);
        assert_eq!(compose(Some(vec![1, 0, 2]), vec![0, 2, 1]).unwrap(), vec![1, 2, 0]);
        assert!(compose(Some(p), vec![1, 0]).is_err());
    }
}
