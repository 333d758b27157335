//! Parallel work whose error is deterministic.

use rayon::prelude::*;

/// The items of `results`, in order, or the error of the first failing
/// one in that order, whichever thread failed first: rayon's own collect
/// into a `Result` (and `try_for_each`) returns whichever error a thread
/// met first, so a read of two corrupt chunks would name either.
pub(crate) fn collect_in_order<T, E, I>(results: I) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send,
    I: IndexedParallelIterator<Item = Result<T, E>>,
{
    let all: Vec<Result<T, E>> = results.collect();
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failing_item_in_order_is_reported() {
        // Later items fail fast, the first failing one slowly: rayon's own
        // collect would most often report a later one.
        for _ in 0..20 {
            let got = collect_in_order((0..64u32).into_par_iter().map(|i| match i {
                3 => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    Err(i)
                }
                i if i > 3 && i % 2 == 0 => Err(i),
                i => Ok(i),
            }));
            assert_eq!(got, Err(3));
        }
        assert_eq!(
            collect_in_order((0..4u32).into_par_iter().map(Ok::<_, ()>)),
            Ok(vec![0, 1, 2, 3])
        );
    }
}
