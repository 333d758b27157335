//! Chunk files of a local directory written by the writer itself
//! ([`StoreIo::Files`](crate::array::store::StoreIo::Files)), instead of one
//! store put per chunk on tokio's blocking pool.
//!
//! - The directories of a wave's chunk files are made while the wave
//!   encodes ([`make_dirs`]): on the H200's ext4, 16 Python threads wrote
//!   1,024 files of 400 KB (staged and renamed) at 2.18 GB/s into new
//!   directories and at 3.50 GB/s into existing ones.
//! - Each chunk is written to a staging file beside its own, then renamed
//!   over it, as object_store's local file system does: a reader sees the
//!   old chunk or the new one, never part of one. The wave's files are
//!   written in parallel, on a pool of threads of their own ([`write_pool`]).
//! - A chunk equal to the fill value has its file removed, and a directory
//!   that [`make_dirs`] made for such chunks only is removed again.
//! - Staging files are never read (reads go by chunk key). One that a
//!   writer killed mid-write left is removed by the next write of its chunk,
//!   once that writer's process has ended ([`remove_stale_staging`]).
//!
//! Keys are joined to the directory as the reader's file fetch joins them
//! (ASCII letters, digits, `.`, `_`, `-` and `/`, no empty, `.` or `..`
//! segment): a write with other keys goes through the store.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;
use zarrs::storage::StorageError;

use super::encode::Stored;
use super::store::{summarize, WriteSummary};
use super::WriteError;
use crate::fork::PerProcess;

/// The error of a file operation on the chunk at `key`.
fn failed(key: &str) -> impl Fn(std::io::Error) -> WriteError + '_ {
    move |e| WriteError::Store {
        key: key.to_string(),
        source: StorageError::IOError(Arc::new(e)).into(),
    }
}

/// Makes `path` and the directories above it that are missing; returns
/// those it made, deepest last (one made by another thread meanwhile is
/// not counted).
pub(super) fn make_dir(path: &Path, made: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        make_dir(parent, made)?;
    }
    match std::fs::create_dir(path) {
        Ok(()) => {
            made.push(path.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The threads chunk files are made and written on: a pool of their own,
/// so that a wave's writes do not hold up the next wave's encoding, whose
/// framing and shard assembly run on rayon's pool meanwhile.
fn write_pool() -> &'static rayon::ThreadPool {
    static POOL: PerProcess<rayon::ThreadPool> = PerProcess::new();
    POOL.get(|| crate::pool::new_pool("zarrs-nvcomp-write"))
}

/// Makes the directories the files of `keys` go in under `dir`, in
/// parallel; returns those it made.
pub(super) fn make_dirs(dir: &Path, keys: &[String]) -> Result<Vec<PathBuf>, WriteError> {
    let mut parents: Vec<(&str, PathBuf)> = keys
        .iter()
        .filter_map(|key| Some((key.as_str(), dir.join(key).parent()?.to_path_buf())))
        .collect();
    parents.sort_by(|a, b| a.1.cmp(&b.1));
    parents.dedup_by(|a, b| a.1 == b.1);
    let made: Vec<Vec<PathBuf>> = crate::pool::collect_in_order_on(
        write_pool(),
        parents.par_iter().map(|(key, parent)| {
            let mut made = Vec::new();
            make_dir(parent, &mut made).map_err(failed(key))?;
            Ok::<_, WriteError>(made)
        }),
    )?;
    Ok(made.into_iter().flatten().collect())
}

/// Distinguishes the staging files of one process's writes.
static STAGED: AtomicU64 = AtomicU64::new(0);

/// Attempts at a staging file before a write gives up: another name is
/// tried when one is taken, and a missing directory is made again when
/// something removes it meanwhile; a directory that keeps vanishing, or
/// names that keep being taken, are an error, not an endless loop.
const STAGING_ATTEMPTS: usize = 4;

/// Writes `bytes` as the file at `path`: to a new staging file beside it,
/// then renamed over it. A missing directory is made.
fn write_staged(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut last = None;
    for _ in 0..STAGING_ATTEMPTS {
        let n = STAGED.fetch_add(1, Ordering::Relaxed);
        let staged = path.with_file_name(format!("{name}#{}.{n}", std::process::id()));
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&staged) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(path.parent().unwrap_or(path))?;
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let written = file.write_all(bytes).and_then(|()| {
            drop(file);
            std::fs::rename(&staged, path)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&staged);
        }
        return written;
    }
    Err(last.expect("at least one attempt"))
}

/// Stores every chunk of `wave` (keys and what to store) under `dir`, in
/// parallel; then removes the directories of `made` (those [`make_dirs`]
/// made for the wave) that hold nothing, as for chunks equal to the fill
/// value.
pub(super) fn store_files(
    dir: &Path,
    wave: Vec<(String, Stored)>,
    made: Vec<PathBuf>,
) -> Result<WriteSummary, WriteError> {
    let summary = summarize(&wave);
    crate::pool::collect_in_order_on(
        write_pool(),
        wave.par_iter().map(|(key, stored)| {
            let path = dir.join(key);
            match stored {
                Stored::Put(bytes) => write_staged(&path, bytes),
                Stored::Fill => match std::fs::remove_file(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    done => done,
                },
            }
            .map_err(failed(key))
        }),
    )?;
    remove_stale_staging(dir, &wave, &made);
    if summary.fill_chunks > 0 {
        // Deepest first: a directory is empty once those below it are gone.
        let mut made = made;
        made.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in &made {
            // Fails, as it should, for a directory that holds anything.
            let _ = std::fs::remove_dir(dir);
        }
    }
    Ok(summary)
}

/// Whether the process `pid` that named a staging file has ended: its write
/// can never finish. Only on this machine's process table; a process of
/// another machine writing the same chunk races this write anyway.
fn writer_is_gone(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(id) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if id <= 0 || pid == std::process::id() {
            return false;
        }
        // SAFETY: signal 0 only asks whether the process exists.
        let rc = unsafe { libc::kill(id, 0) };
        rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// Removes the staging files (`name#pid.n`, see [`write_staged`]) that
/// writers since ended (killed mid-write) left beside the chunk files of
/// `wave` under `dir`: one listing per directory, except those of `made`,
/// new for this wave. Failures to list or remove are left for a later write.
fn remove_stale_staging(dir: &Path, wave: &[(String, Stored)], made: &[PathBuf]) {
    let mut by_dir: std::collections::BTreeMap<PathBuf, std::collections::HashSet<&str>> = Default::default();
    for (key, _) in wave {
        let path = dir.join(key);
        let (Some(parent), Some(name)) = (path.parent(), key.rsplit('/').next()) else {
            continue;
        };
        if !made.iter().any(|m| m == parent) {
            by_dir.entry(parent.to_path_buf()).or_default().insert(name);
        }
    }
    write_pool().install(|| {
        by_dir.par_iter().for_each(|(parent, names)| {
            let Ok(entries) = std::fs::read_dir(parent) else { return };
            for entry in entries.flatten() {
                let file_name = entry.file_name();
                let Some((chunk, staging)) = file_name.to_str().and_then(|n| n.split_once('#')) else {
                    continue;
                };
                let pid = staging
                    .split_once('.')
                    .filter(|(_, n)| n.parse::<u64>().is_ok())
                    .and_then(|(pid, _)| pid.parse().ok());
                if names.contains(chunk) && pid.is_some_and(writer_is_gone) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        });
    });
}
