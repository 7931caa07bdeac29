//! Writing and reading results files: one record a line.
//!
//! The writer flushes every record with a single `write` as it is emitted, so an interrupted
//! run keeps what it measured and the file stays valid JSON lines. The reader names the file and
//! line of anything malformed.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::record::{Record, SCHEMA};

/// An error reading or writing a results file.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A record could not be serialised (a non-finite number, for instance).
    #[error("cannot serialise a {kind} record: {message}")]
    Serialise {
        /// The record's kind.
        kind: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// A results file being written. Shareable between threads.
#[derive(Debug)]
pub struct RecordSink {
    path: PathBuf,
    file: Mutex<File>,
}

/// Serialises a record as one line (with its newline), refusing non-finite numbers, which JSON
/// cannot carry.
pub fn to_line(record: &Record) -> Result<String, JsonlError> {
    let value = serde_json::to_value(record).map_err(|e| JsonlError::Serialise {
        kind: record.kind(),
        message: e.to_string(),
    })?;
    if let Some(path) = find_null_number(&value, String::new()) {
        return Err(JsonlError::Serialise {
            kind: record.kind(),
            message: format!("field {path} is not a finite number"),
        });
    }
    let mut line = value.to_string();
    line.push('\n');
    Ok(line)
}

/// serde_json writes NaN and infinities as `null`; find where a float became null. Fields that
/// are legitimately absent are skipped on serialisation, so any null is a lost number.
fn find_null_number(v: &serde_json::Value, at: String) -> Option<String> {
    match v {
        serde_json::Value::Null => Some(if at.is_empty() { "(root)".into() } else { at }),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| find_null_number(x, format!("{at}[{i}]"))),
        serde_json::Value::Object(o) => o
            .iter()
            .find_map(|(k, x)| find_null_number(x, format!("{at}.{k}"))),
        _ => None,
    }
}

impl RecordSink {
    /// Creates (or truncates) a results file.
    pub fn create(path: &Path) -> Result<RecordSink, JsonlError> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(|source| JsonlError::Io {
                path: path.to_owned(),
                source,
            })?;
        Ok(RecordSink {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record and flushes it to the file.
    pub fn write(&self, record: &Record) -> Result<(), JsonlError> {
        let line = to_line(record)?;
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|source| JsonlError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Parses one line of a results file.
pub fn parse_line(text: &str) -> Result<Record, String> {
    let record: Record = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if record.schema != SCHEMA {
        return Err(format!(
            "unsupported schema {:?} (this ccbench reads {SCHEMA:?})",
            record.schema
        ));
    }
    Ok(record)
}

/// Reads a whole results file. Blank lines are skipped; anything else that is not a valid
/// record is an error naming the file and line.
pub fn read_records(path: &Path) -> Result<Vec<Record>, JsonlError> {
    let file = File::open(path).map_err(|source| JsonlError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_records(BufReader::new(file), path)
}

/// Parses results-file text from any reader, as [`read_records`] does for a file (which it
/// calls): blank lines are skipped, and anything else that is not a valid record is an error
/// naming `path` (what the text is called in messages) and the line. Memory is bounded by the
/// input: the longest line and the records parsed.
pub fn parse_records<R: BufRead>(reader: R, path: &Path) -> Result<Vec<Record>, JsonlError> {
    let io = |source| JsonlError::Io {
        path: path.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| match source.kind() {
            std::io::ErrorKind::InvalidData => JsonlError::Malformed {
                path: path.to_owned(),
                line: i + 1,
                message: "not valid UTF-8".into(),
            },
            _ => io(source),
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = parse_line(&line).map_err(|message| JsonlError::Malformed {
            path: path.to_owned(),
            line: i + 1,
            message,
        })?;
        out.push(record);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params;
    use crate::record::{Body, Check, Verdict};

    fn check_record(msg: &str) -> Record {
        Record::new(
            "crypto",
            "native",
            params! {"size_bytes" => 256, "alg" => "aes"},
            Body::Check(Check {
                subject: crate::record::CheckSubject::Run,
                name: "c".into(),
                verdict: Verdict::Pass,
                message: msg.into(),
            }),
        )
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let sink = RecordSink::create(&path).unwrap();
        let a = check_record("one");
        let b = check_record("two \"quoted\"\nline");
        sink.write(&a).unwrap();
        sink.write(&b).unwrap();
        assert_eq!(read_records(&path).unwrap(), vec![a, b]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(
            text.lines()
                .all(|l| l.contains("\"schema\":\"ccbench.v1\""))
        );
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        let good = to_line(&check_record("ok")).unwrap();
        std::fs::write(&path, format!("{good}\n{}", &good[..good.len() / 2])).unwrap();
        let err = read_records(&path).unwrap_err();
        match &err {
            JsonlError::Malformed { line, .. } => assert_eq!(*line, 3),
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with(&format!("{}:3:", path.display()))
        );

        std::fs::write(&path, good.replace("ccbench.v1", "ccbench.v9")).unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(
            err.contains(":1:") && err.contains("unsupported schema"),
            "{err}"
        );

        std::fs::write(&path, b"\xff\xfe\n").unwrap();
        assert!(matches!(
            read_records(&path),
            Err(JsonlError::Malformed { line: 1, .. })
        ));
        assert!(matches!(
            read_records(&dir.path().join("missing")),
            Err(JsonlError::Io { .. })
        ));
    }

    #[test]
    fn parse_records_reads_any_reader_as_read_records_reads_a_file() {
        let a = check_record("one");
        let text = format!("\n{}   \n{}", to_line(&a).unwrap(), to_line(&a).unwrap());
        let name = Path::new("<memory>");
        let got = parse_records(text.as_bytes(), name).unwrap();
        assert_eq!(got, vec![a.clone(), a]);
        let err = parse_records(&b"{}\n"[..], name).unwrap_err().to_string();
        assert!(err.starts_with("<memory>:1:"), "{err}");
        assert!(parse_records(&b""[..], name).unwrap().is_empty());
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let r = Record::new(
            "s",
            "b",
            params! {"x" => f64::NAN},
            Body::Check(Check {
                subject: crate::record::CheckSubject::Run,
                name: "c".into(),
                verdict: Verdict::Warn,
                message: String::new(),
            }),
        );
        let err = to_line(&r).unwrap_err().to_string();
        assert!(err.contains(".params.x"), "{err}");
    }
}
