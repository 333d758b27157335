//! The engine's side of isolation: which program the worker is, starting
//! it, calling it with a time limit, and replacing it once it failed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

use super::protocol::{read_message, write_message, Request};
use crate::error::{Result, WorkerError};

/// The name of the worker binary this crate builds.
pub const WORKER_BINARY: &str = "zarrs-nvcomp-gpu-worker";

/// The command [`set_worker_command`] set, if any.
static COMMAND: Mutex<Option<Vec<OsString>>> = Mutex::new(None);

/// Sets the command (program and arguments) that starts a decoding worker:
/// a program that calls [`serve_worker`](super::serve_worker) on its standard input and output.
pub fn set_worker_command(command: Vec<OsString>) {
    *COMMAND.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(command).filter(|c| !c.is_empty());
}

/// The worker's command: see the [module documentation](super).
fn worker_command() -> Result<Vec<OsString>> {
    if let Some(command) = COMMAND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
    {
        return Ok(command);
    }
    if let Some(path) = std::env::var_os("ZARRS_NVCOMP_GPU_WORKER") {
        return Ok(vec![path]);
    }
    let exe = std::env::current_exe().ok();
    // Test and example executables live one folder below the binaries.
    let beside = exe
        .iter()
        .flat_map(|e| e.ancestors().skip(1).take(2))
        .map(|d| d.join(WORKER_BINARY));
    beside
        .map(PathBuf::into_os_string)
        .find(|p| std::path::Path::new(p).is_file())
        .map(|p| vec![p])
        .ok_or_else(|| WorkerError::NoProgram { binary: WORKER_BINARY }.into())
}

/// How long a worker may take for a batch decoding to `total_out` bytes:
/// `ZARRS_NVCOMP_GPU_TIMEOUT` seconds if set, else 20 s plus 4 s per GiB,
/// far beyond the milliseconds a valid batch takes.
pub fn decode_timeout(total_out: u64) -> Duration {
    if let Some(secs) = std::env::var("ZARRS_NVCOMP_GPU_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
    {
        return Duration::from_secs_f64(secs);
    }
    Duration::from_secs(20) + Duration::from_secs_f64(4.0 * total_out as f64 / (1u64 << 30) as f64)
}

/// A running worker: its process, its standard input, and the replies its
/// standard output delivers through a reader thread.
#[derive(Debug)]
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<std::io::Result<Vec<u8>>>,
}

/// How long a starting worker may take to load CUDA and nvCOMP.
const START_TIMEOUT: Duration = Duration::from_secs(120);

impl Worker {
    fn spawn() -> Result<Self> {
        let command = worker_command()?;
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| WorkerError::Spawn {
                command: command.clone(),
                source: e.into(),
            })?;
        let (stdin, mut stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("zarrs-nvcomp-worker-replies".into())
            .spawn(move || loop {
                let reply = read_message(&mut stdout);
                let done = reply.is_err();
                if tx.send(reply).is_err() || done {
                    break;
                }
            })
            .map_err(|e| WorkerError::Thread(e.into()))?;
        let mut worker = Self { child, stdin, replies };
        worker.reply(START_TIMEOUT)?;
        Ok(worker)
    }

    /// Waits for the next reply; a worker that fails to give one is killed.
    fn reply(&mut self, timeout: Duration) -> Result<()> {
        let reply = match self.replies.recv_timeout(timeout) {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                return Err(WorkerError::Died { status }.into());
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(WorkerError::TimedOut { after: timeout }.into());
            }
        };
        match reply.split_first() {
            Some((0, _)) => Ok(()),
            Some((_, message)) => Err(WorkerError::Reply {
                message: String::from_utf8_lossy(message).into_owned(),
            }
            .into()),
            None => Err(WorkerError::EmptyReply.into()),
        }
    }

    fn call(&mut self, request: &Request) -> Result<()> {
        write_message(&mut self.stdin, &request.encode()).map_err(|e| WorkerError::Gone(e.into()))?;
        self.reply(decode_timeout(request.total_out))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `request` on `slot`'s worker, started if there is none; a worker that
/// failed is dropped (killed) so that the next call starts a fresh one.
pub(crate) fn call(slot: &mut Option<Worker>, request: &Request) -> Result<()> {
    if slot.is_none() {
        *slot = Some(Worker::spawn()?);
    }
    let outcome = slot.as_mut().unwrap().call(request);
    if outcome.is_err() {
        *slot = None;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_grows_with_the_output() {
        assert!(decode_timeout(1 << 34) > decode_timeout(0));
    }
}
