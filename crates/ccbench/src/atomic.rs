//! Files written whole or not at all.

use std::path::Path;

use anyhow::{Context, Result};

/// Writes `output` through a temporary file beside it, renamed into place only when `write`
/// succeeds: a reader sees the old file or the new one, never half of one, and a failure
/// leaves no temporary file behind.
pub(crate) fn write_atomically(
    output: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    write(tmp.as_file_mut()).with_context(|| format!("writing {}", output.display()))?;
    tmp.persist(output)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}
