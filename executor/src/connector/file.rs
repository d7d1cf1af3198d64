//! `connector = 'file'`: JSON lines or CSV from a file, read once or followed (`follow`).
//!
//! The file is one split, named by its path; its position is the byte offset of the next
//! line, so a restart continues exactly after the last committed line.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use super::decode::Decoder;
use super::{with_includes, MessageMeta, SplitReport};
use super::{
    Connector, ConnectorContext, DeadLetter, Encode, SourceBatch, SourceEvent, SourceSpec,
};
use crate::{ExecError, Result};

/// Lines per batch.
const BATCH_LINES: usize = 8192;

pub struct FileConnector {
    path: PathBuf,
    follow: bool,
    header: bool,
    decoder: Decoder,
    spec: SourceSpec,
}

impl FileConnector {
    pub fn new(spec: &SourceSpec) -> Result<Self> {
        let path = PathBuf::from(spec.required("path")?);
        if !path.is_file() {
            return Err(ExecError::NotSupported(format!(
                "source \"{}\": no readable file at {}",
                spec.name,
                path.display()
            )));
        }
        let follow = spec
            .option("follow")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let header = matches!(spec.encode, Encode::Csv { header: true, .. });
        Ok(Self {
            path,
            follow,
            header,
            decoder: Decoder::new(spec.payload_schema.clone(), spec.encode.clone()),
            spec: spec.clone(),
        })
    }

    fn split(&self) -> String {
        self.path.display().to_string()
    }

    fn read(&self, context: &ConnectorContext) -> std::io::Result<()> {
        let split = self.split();
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&self.path)?);
        let mut position = context.positions.get(&split).copied().unwrap_or(0).max(0) as u64;
        reader.seek(SeekFrom::Start(position))?;
        if position == 0 && self.header {
            let mut header = Vec::new();
            position += reader.read_until(b'\n', &mut header)? as u64;
        }
        let mut lines: Vec<Vec<u8>> = Vec::with_capacity(BATCH_LINES);
        let mut starts: Vec<u64> = Vec::with_capacity(BATCH_LINES);
        loop {
            lines.clear();
            starts.clear();
            let mut at_end = false;
            while lines.len() < BATCH_LINES {
                let mut line = Vec::new();
                let read = reader.read_until(b'\n', &mut line)?;
                if read == 0 || !line.ends_with(b"\n") {
                    // A partial last line is read again once it is complete.
                    reader.seek(SeekFrom::Start(position))?;
                    at_end = true;
                    break;
                }
                starts.push(position);
                position += read as u64;
                if line.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                lines.push(line);
            }
            if !lines.is_empty() || !starts.is_empty() {
                let messages: Vec<&[u8]> = lines.iter().map(|l| l.as_slice()).collect();
                let decoded = self.decoder.decode(&messages);
                let dead_letters = decoded
                    .bad
                    .into_iter()
                    .map(|(i, error)| DeadLetter {
                        split: split.clone(),
                        position: starts.get(i).copied().unwrap_or(0) as i64,
                        error,
                        payload: lines[i].clone(),
                    })
                    .collect();
                let meta = MessageMeta {
                    partition: None,
                    offsets: decoded.good.iter().map(|&i| starts[i] as i64).collect(),
                    keys: Vec::new(),
                    timestamps: Vec::new(),
                };
                let rows = match with_includes(&self.spec, decoded.rows, &meta) {
                    Ok(rows) => rows,
                    Err(error) => {
                        context.send(SourceEvent::Error(error.to_string()));
                        return Ok(());
                    }
                };
                let batch = SourceBatch {
                    split: split.clone(),
                    rows,
                    next_position: position as i64,
                    dead_letters,
                    deletes: None,
                };
                if !context.send(SourceEvent::Batch(batch)) {
                    return Ok(());
                }
            }
            if at_end {
                if !self.follow {
                    context.send(SourceEvent::Finished);
                    return Ok(());
                }
                if !context.sleep(Duration::from_millis(100)) {
                    return Ok(());
                }
            }
        }
    }
}

impl Connector for FileConnector {
    fn run(self: Box<Self>, context: ConnectorContext) {
        context.send(SourceEvent::Splits {
            splits: vec![SplitReport::new(self.split(), None)],
            generation: 0,
        });
        if let Err(error) = self.read(&context) {
            context.send(SourceEvent::Error(format!(
                "reading {}: {error}",
                self.path.display()
            )));
        }
    }
}
