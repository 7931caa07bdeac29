//! The NSS key log format, as TLS libraries export session secrets (`SSLKEYLOGFILE`,
//! `openssl s_client -keylogfile`), and a follower of such a file as it grows.
//!
//! A line is `LABEL <client random, 64 hex> <secret, hex>`. Only `CLIENT_RANDOM` lines (a
//! TLS 1.2 master secret, 96 hex digits) are shares for the middlebox; other labels (TLS 1.3
//! traffic secrets, `RSA` pre-master secrets) and `#` comments are counted and skipped. A
//! malformed line is an error naming its line number and what is wrong with it, never its
//! bytes: the line may hold a secret.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::keys::{MASTER_SECRET_LEN, MasterSecret, wipe};

/// The label of a TLS 1.2 master secret line.
pub const CLIENT_RANDOM: &str = "CLIENT_RANDOM";
/// The longest line kept: longer ones are malformed (a real line is under 200 bytes).
pub const MAX_LINE: usize = 1024;

/// One `CLIENT_RANDOM` line: the session's client random and its master secret.
#[derive(Debug)]
pub struct KeylogEntry {
    /// The session's client random.
    pub client_random: [u8; 32],
    /// The TLS 1.2 master secret (prints no bytes, cleared when dropped).
    pub master: MasterSecret,
}

/// What one line of a key log is.
#[derive(Debug)]
pub enum Line {
    /// A `CLIENT_RANDOM` line.
    Share(KeylogEntry),
    /// A line of another label (TLS 1.3 secrets and the like).
    OtherLabel,
    /// A comment or a blank line.
    Comment,
}

/// A line that is not a key log line. Says where and what, never the line's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key log line {line}: {what}")]
pub struct KeylogError {
    /// The line number in the file (1-based, counted since the file was last opened).
    pub line: u64,
    /// What is wrong with it.
    pub what: &'static str,
}

/// Decodes exactly `N` bytes of hex.
fn hex_exact<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// Parses one line (without its newline; a trailing `\r` is allowed). `number` names it in
/// an error.
pub fn parse_line(line: &[u8], number: u64) -> Result<Line, KeylogError> {
    let err = |what| KeylogError { line: number, what };
    let line = line.trim_ascii();
    if line.is_empty() || line.starts_with(b"#") {
        return Ok(Line::Comment);
    }
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let label = fields.next().unwrap_or_default();
    if !label
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
    {
        return Err(err("not a key log line (the label is not NSS's)"));
    }
    if label != CLIENT_RANDOM.as_bytes() {
        return Ok(Line::OtherLabel);
    }
    let (Some(cr), Some(secret), None) = (fields.next(), fields.next(), fields.next()) else {
        return Err(err("a CLIENT_RANDOM line has two fields after its label"));
    };
    let client_random =
        hex_exact::<32>(cr).ok_or_else(|| err("the client random is not 64 hex digits"))?;
    let master = MasterSecret(
        hex_exact::<MASTER_SECRET_LEN>(secret)
            .ok_or_else(|| err("the master secret is not 96 hex digits"))?,
    );
    Ok(Line::Share(KeylogEntry {
        client_random,
        master,
    }))
}

/// Lines of each kind a follower has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeylogCounts {
    /// `CLIENT_RANDOM` lines.
    pub shares: u64,
    /// Lines of other labels (skipped).
    pub other_labels: u64,
    /// Comments and blank lines.
    pub comments: u64,
    /// Malformed lines.
    pub malformed: u64,
    /// Times the file was truncated or replaced and read again from its start.
    pub reopened: u64,
}

/// Where a follower starts in the file it opens first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Every line already in the file.
    Beginning,
    /// Only lines written after the follower opened it.
    End,
}

/// Follows a key log as it grows: each [`poll`](Self::poll) returns the whole lines written
/// since the last one. A file that does not exist yet is waited for; a file truncated or
/// replaced (another inode: rotation) is read again from its start.
#[derive(Debug)]
pub struct KeylogFollower {
    path: PathBuf,
    start: Start,
    file: Option<(File, (u64, u64))>,
    offset: u64,
    /// The current line so far (may hold a secret: wiped when used and when dropped).
    partial: Vec<u8>,
    /// Skipping the rest of a line too long to keep (or one begun before we started).
    skipping: bool,
    line: u64,
    counts: KeylogCounts,
}

impl Drop for KeylogFollower {
    fn drop(&mut self) {
        wipe(&mut self.partial);
    }
}

impl KeylogFollower {
    /// A follower of `path`, starting at `start` when it first opens the file.
    pub fn new(path: impl Into<PathBuf>, start: Start) -> Self {
        KeylogFollower {
            path: path.into(),
            start,
            file: None,
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            line: 0,
            counts: KeylogCounts::default(),
        }
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lines seen so far, by kind.
    pub fn counts(&self) -> KeylogCounts {
        self.counts
    }

    /// Opens the file if it exists and is not open, or reopens it if it was replaced or
    /// truncated. `Ok(false)`: there is no file (yet).
    fn sync(&mut self) -> io::Result<bool> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let id = (meta.dev(), meta.ino());
        let replaced = matches!(&self.file, Some((_, old)) if *old != id);
        let truncated = self.file.is_some() && meta.len() < self.offset;
        if self.file.is_some() && !replaced && !truncated {
            return Ok(true);
        }
        let first = self.file.is_none() && self.counts.reopened == 0 && self.line == 0;
        let mut file = File::open(&self.path)?;
        wipe(&mut self.partial);
        self.skipping = false;
        self.line = 0;
        self.offset = 0;
        if replaced || truncated {
            self.counts.reopened += 1;
        } else if first && self.start == Start::End {
            self.offset = meta.len();
            if self.offset > 0 {
                // Begun mid-line: that line is not ours to read.
                let mut last = [0u8; 1];
                file.seek(SeekFrom::Start(self.offset - 1))?;
                file.read_exact(&mut last)?;
                self.skipping = last[0] != b'\n';
            }
        }
        self.file = Some((file, id));
        Ok(true)
    }

    /// The lines completed since the last poll, in order: entries, and errors for malformed
    /// lines. An I/O error reading the file is returned as such.
    pub fn poll(&mut self) -> io::Result<Vec<Result<KeylogEntry, KeylogError>>> {
        if !self.sync()? {
            return Ok(Vec::new());
        }
        let Some((file, _)) = self.file.as_mut() else {
            return Ok(Vec::new());
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut fresh = Vec::new();
        file.read_to_end(&mut fresh)?;
        self.offset += fresh.len() as u64;
        let mut out = Vec::new();
        for &b in &fresh {
            if b != b'\n' {
                if !self.skipping {
                    if self.partial.len() >= MAX_LINE {
                        self.skipping = true;
                        wipe(&mut self.partial);
                        self.line += 1;
                        self.counts.malformed += 1;
                        out.push(Err(KeylogError {
                            line: self.line,
                            what: "the line is longer than any key log line",
                        }));
                    } else {
                        self.partial.push(b);
                    }
                }
                continue;
            }
            if self.skipping {
                // The end of a line already reported (or begun before we started).
                self.skipping = false;
                continue;
            }
            self.line += 1;
            match parse_line(&self.partial, self.line) {
                Ok(Line::Share(e)) => {
                    self.counts.shares += 1;
                    out.push(Ok(e));
                }
                Ok(Line::OtherLabel) => self.counts.other_labels += 1,
                Ok(Line::Comment) => self.counts.comments += 1,
                Err(e) => {
                    self.counts.malformed += 1;
                    out.push(Err(e));
                }
            }
            wipe(&mut self.partial);
        }
        wipe(&mut fresh);
        Ok(out)
    }
}
