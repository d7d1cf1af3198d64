//! Files the tests feed to followed file sources.

use std::io::Write as _;
use std::path::Path;

/// Appends `text` (whole lines) to the file at `path`, creating it if needed, in one write.
pub fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    file.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("appending to {}: {e}", path.display()));
}
