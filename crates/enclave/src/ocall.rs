//! The host's ocall table.
//!
//! Every enclave has one. Built-ins occupy ids below [`builtin::FIRST_USER`]: the empty
//! ocall, whole-file read, atomic whole-file write, the wall clock, and a log that collects
//! messages in memory for the host to take ([`crate::Enclave::take_logs`]) — the library
//! never prints. Services register their own handlers with
//! [`crate::EnclaveBuilder::ocall`]. Handlers run on the host, outside the boundary, and
//! receive only the bytes the enclave copied out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::wire::{self, Status};

/// Ids of the built-in ocalls.
pub mod builtin {
    /// Does nothing (the empty-ocall benchmark).
    pub const NOOP: u32 = 0;
    /// Input: a UTF-8 path. Output: the file's bytes.
    pub const READ_FILE: u32 = 1;
    /// Input: [`crate::wire::encode_write_file`]. Writes atomically (temp + rename).
    pub const WRITE_FILE: u32 = 2;
    /// Output: wall-clock ns since the Unix epoch, u64 LE.
    pub const CLOCK: u32 = 3;
    /// Input: [`crate::wire::encode_log`]. Appends to the host's log buffer.
    pub const LOG: u32 = 4;
    /// The first id available to services.
    pub const FIRST_USER: u32 = 64;
}

/// Log levels for the log ocall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Errors.
    Error = 1,
    /// Warnings.
    Warn = 2,
    /// Information.
    Info = 3,
    /// Debugging detail.
    Debug = 4,
}

impl Level {
    fn from_u8(v: u8) -> Option<Level> {
        Some(match v {
            1 => Level::Error,
            2 => Level::Warn,
            3 => Level::Info,
            4 => Level::Debug,
            _ => return None,
        })
    }
}

/// A message logged by the enclave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Level.
    pub level: Level,
    /// The text.
    pub message: String,
}

/// At most this many log entries are kept; later ones are counted as dropped.
pub const LOG_CAPACITY: usize = 10_000;

#[derive(Default)]
pub(crate) struct LogBuffer {
    pub entries: Vec<LogEntry>,
    pub dropped: u64,
}

/// A host-side ocall handler: input bytes to output bytes, or an error message.
pub type OcallHandler = Arc<dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync>;

/// The host's ocall handlers.
pub(crate) struct OcallTable {
    handlers: HashMap<u32, OcallHandler>,
    pub logs: Arc<Mutex<LogBuffer>>,
}

impl OcallTable {
    pub fn new(user: Vec<(u32, OcallHandler)>) -> Self {
        let logs: Arc<Mutex<LogBuffer>> = Arc::default();
        let mut handlers: HashMap<u32, OcallHandler> = HashMap::new();
        handlers.insert(builtin::NOOP, Arc::new(|_| Ok(Vec::new())));
        handlers.insert(
            builtin::READ_FILE,
            Arc::new(|input| {
                let path = wire::decode_path(input).map_err(|e| e.to_string())?;
                std::fs::read(path).map_err(|e| format!("read {path}: {e}"))
            }),
        );
        handlers.insert(
            builtin::WRITE_FILE,
            Arc::new(|input| {
                let (path, data) = wire::decode_write_file(input).map_err(|e| e.to_string())?;
                crate::seal::write_atomic(std::path::Path::new(path), data)
                    .map_err(|e| format!("write {path}: {e}"))?;
                Ok(Vec::new())
            }),
        );
        handlers.insert(
            builtin::CLOCK,
            Arc::new(|_| {
                let ns = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_err(|e| e.to_string())?
                    .as_nanos();
                Ok(u64::try_from(ns).unwrap_or(u64::MAX).to_le_bytes().to_vec())
            }),
        );
        let sink = logs.clone();
        handlers.insert(
            builtin::LOG,
            Arc::new(move |input| {
                let (level, msg) = wire::decode_log(input).map_err(|e| e.to_string())?;
                let level =
                    Level::from_u8(level).ok_or_else(|| format!("bad log level {level}"))?;
                let mut buf = sink.lock().map_err(|_| "log buffer poisoned".to_owned())?;
                if buf.entries.len() < LOG_CAPACITY {
                    buf.entries.push(LogEntry {
                        level,
                        message: msg.to_owned(),
                    });
                } else {
                    buf.dropped += 1;
                }
                Ok(Vec::new())
            }),
        );
        for (id, h) in user {
            handlers.insert(id, h);
        }
        OcallTable { handlers, logs }
    }

    /// Runs the handler for `id`. A panicking handler is an error for that ocall.
    pub fn dispatch(&self, id: u32, input: &[u8]) -> (Status, Vec<u8>) {
        let Some(h) = self.handlers.get(&id) else {
            return (Status::UnknownId, Vec::new());
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h(input))) {
            Ok(Ok(out)) => (Status::Ok, out),
            Ok(Err(msg)) => (Status::Error, msg.into_bytes()),
            Err(p) => (Status::Panic, crate::panic_message(&*p).into_bytes()),
        }
    }
}

/// Turns a [`dispatch`](OcallTable::dispatch) result into what the enclave sees.
pub(crate) fn to_result(
    id: u32,
    status: Status,
    out: Vec<u8>,
) -> Result<Vec<u8>, crate::OcallError> {
    match status {
        Status::Ok => Ok(out),
        Status::Error | Status::Panic => Err(crate::OcallError::Host(
            String::from_utf8_lossy(&out).into_owned(),
        )),
        Status::UnknownId => Err(crate::OcallError::Unknown(id)),
    }
}
