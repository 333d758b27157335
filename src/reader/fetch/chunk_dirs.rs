//! Missing chunk files found by listing their directories, once per read.
//!
//! A read of a sparse array meets mostly missing chunks. Asking the file
//! system for each (a `stat` that fails) walks the chunk's path every time:
//! 1.5-3 µs a chunk on a local disk, an order of magnitude more on slower
//! file systems. One listing of a directory (`getdents`) names hundreds of
//! entries per call instead. So where a batch of the read has at least
//! [`MIN_KEYS_TO_LIST`] chunks in one directory, that directory is listed,
//! and its chunks that the listing does not name are missing without a
//! `stat` of their own; the others are read as before.
//!
//! A listing is never longer than is worth it, nor held without bound: it
//! stops (and the directory's chunks are asked for one by one) past
//! [`ENTRIES_PER_KEY`] entries per chunk of the batch in the directory, or
//! when the read's listings would hold more than [`MAX_NAMES_HELD`] names.
//!
//! A listing is a snapshot taken once per read: a chunk written after it is
//! read as missing (the value before the write), as a read that ran a moment
//! earlier would have read it; a chunk removed after it is found missing
//! when it is opened. Names are compared in ASCII lower case, so that on a
//! file system that ignores case a file the read would open is never taken
//! for missing (chunk keys of this path are ASCII,
//! [`file_keys`](crate::array::store::file_keys)).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rayon::prelude::*;

/// Least chunks of a batch in one directory for it to be listed: fewer are
/// asked for one by one, which costs less than opening the directory.
pub(super) const MIN_KEYS_TO_LIST: usize = 64;

/// Most entries a listing reads per chunk of the batch in its directory. An
/// entry read costs far less than a failed `stat` (tens of nanoseconds
/// against microseconds), so a listing stopped here still costs about
/// what the `stat`s it was to spare would have.
pub(super) const ENTRIES_PER_KEY: usize = 16;

/// Most names the listings of one read hold (about 20 MiB of them).
pub(super) const MAX_NAMES_HELD: usize = 1 << 18;

/// What a read knows of one directory of chunk files.
#[derive(Debug)]
enum Listing {
    /// The directory does not exist: every chunk file under it is missing.
    Absent,
    /// The directory's entries, in ASCII lower case.
    Names(HashSet<String>),
    /// Not listed (too long, unreadable, or the names held are too many):
    /// its chunk files are asked for one by one.
    Unlisted,
}

/// The directories of chunk files one read has listed (see the module
/// documentation).
#[derive(Debug, Default)]
pub(crate) struct ChunkDirs {
    listings: HashMap<String, Listing>,
    names_held: usize,
}

/// The directory part of a key (`""` for a key at the root) and its name.
fn split(key: &str) -> (&str, &str) {
    key.rsplit_once('/').unwrap_or(("", key))
}

impl ChunkDirs {
    /// Lists, under `root`, each directory not yet listed that holds the
    /// files of at least [`MIN_KEYS_TO_LIST`] of `keys` (a batch's), in
    /// parallel.
    pub(super) fn list_for<'k>(&mut self, root: &Path, keys: impl IntoIterator<Item = &'k str>) {
        let mut keys_per_dir: HashMap<&str, usize> = HashMap::new();
        for key in keys {
            let (dir, _) = split(key);
            if !self.listings.contains_key(dir) {
                *keys_per_dir.entry(dir).or_default() += 1;
            }
        }
        let wanted: Vec<(&str, usize)> = keys_per_dir
            .into_iter()
            .filter(|&(_, n)| n >= MIN_KEYS_TO_LIST)
            .collect();
        let room = MAX_NAMES_HELD.saturating_sub(self.names_held);
        let listed: Vec<(&str, Listing)> = crate::pool::in_pool(|| {
            wanted
                .into_par_iter()
                .map(|(dir, keys)| {
                    (
                        dir,
                        list(&root.join(dir), keys.saturating_mul(ENTRIES_PER_KEY).min(room)),
                    )
                })
                .collect()
        });
        for (dir, listing) in listed {
            let listing = match listing {
                Listing::Names(names) if names.len() > MAX_NAMES_HELD.saturating_sub(self.names_held) => {
                    Listing::Unlisted
                }
                listing => listing,
            };
            if let Listing::Names(names) = &listing {
                self.names_held += names.len();
            }
            self.listings.insert(dir.to_string(), listing);
        }
    }

    /// Whether a listing shows the file of `key` missing. `false` where no
    /// listing says so: the file is then asked for.
    pub(super) fn is_missing(&self, key: &str) -> bool {
        let (dir, name) = split(key);
        match self.listings.get(dir) {
            Some(Listing::Absent) => true,
            Some(Listing::Names(names)) => !names.contains(&name.to_ascii_lowercase()),
            Some(Listing::Unlisted) | None => false,
        }
    }
}

/// The listing of `dir`, [`Listing::Unlisted`] past `max_entries` entries or
/// on any error but the directory's absence (its files' own errors then say
/// what is wrong, when they are read).
fn list(dir: &Path, max_entries: usize) -> Listing {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Listing::Absent,
        Err(_) => return Listing::Unlisted,
    };
    let mut names = HashSet::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return Listing::Unlisted;
        };
        if names.len() == max_entries {
            return Listing::Unlisted;
        }
        // A name that is not UTF-8 is no chunk key of this path (ASCII).
        if let Some(name) = entry.file_name().to_str() {
            names.insert(name.to_ascii_lowercase());
        }
    }
    Listing::Names(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(dirs: &mut ChunkDirs, root: &Path, keys: impl IntoIterator<Item = String>) {
        let keys: Vec<String> = keys.into_iter().collect();
        dirs.list_for(root, keys.iter().map(String::as_str));
    }

    #[test]
    fn a_listed_directory_tells_missing_files_from_present_ones() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("c/1")).unwrap();
        std::fs::write(root.path().join("c/1/5"), b"x").unwrap();
        std::fs::write(root.path().join("c/1/7"), b"x").unwrap();
        let keys = (0..100)
            .map(|i| format!("c/1/{i}"))
            .chain((0..100).map(|i| format!("c/2/{i}")));
        let mut dirs = ChunkDirs::default();
        list(&mut dirs, root.path(), keys);
        assert!(!dirs.is_missing("c/1/5") && !dirs.is_missing("c/1/7"));
        assert!(dirs.is_missing("c/1/6") && dirs.is_missing("c/1/99"));
        // c/2 does not exist: all its chunks are missing.
        assert!(dirs.is_missing("c/2/0") && dirs.is_missing("c/2/5"));
        // A directory not listed says nothing.
        assert!(!dirs.is_missing("c/3/0"));
    }

    #[test]
    fn few_chunks_in_a_directory_are_asked_for_one_by_one() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("c")).unwrap();
        let mut dirs = ChunkDirs::default();
        list(
            &mut dirs,
            root.path(),
            (0..MIN_KEYS_TO_LIST - 1).map(|i| format!("c/{i}")),
        );
        assert!(!dirs.is_missing("c/0"));
        list(&mut dirs, root.path(), (0..MIN_KEYS_TO_LIST).map(|i| format!("c/{i}")));
        assert!(dirs.is_missing("c/0"));
    }

    #[test]
    fn a_directory_of_many_more_entries_than_chunks_wanted_is_not_listed() {
        let root = tempfile::tempdir().unwrap();
        let c = root.path().join("c");
        std::fs::create_dir_all(&c).unwrap();
        for i in 0..MIN_KEYS_TO_LIST * ENTRIES_PER_KEY + 1 {
            std::fs::write(c.join(format!("x{i}")), b"").unwrap();
        }
        let mut dirs = ChunkDirs::default();
        list(&mut dirs, root.path(), (0..MIN_KEYS_TO_LIST).map(|i| format!("c/{i}")));
        assert!(!dirs.is_missing("c/0"), "{dirs:?}");
        assert_eq!(dirs.names_held, 0);
    }

    #[test]
    fn names_are_compared_ignoring_ascii_case() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("c")).unwrap();
        std::fs::write(root.path().join("c/A.b"), b"x").unwrap();
        let mut dirs = ChunkDirs::default();
        let keys = (0..MIN_KEYS_TO_LIST)
            .map(|i| format!("c/{i}"))
            .chain(["c/a.B".to_string()]);
        list(&mut dirs, root.path(), keys);
        assert!(!dirs.is_missing("c/a.B") && dirs.is_missing("c/1"));
    }

    #[test]
    fn keys_at_the_root_list_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("0.3"), b"x").unwrap();
        let mut dirs = ChunkDirs::default();
        list(&mut dirs, root.path(), (0..MIN_KEYS_TO_LIST).map(|i| format!("0.{i}")));
        assert!(!dirs.is_missing("0.3") && dirs.is_missing("0.4"));
    }
}
