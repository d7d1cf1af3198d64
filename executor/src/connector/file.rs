//! `connector = 'file'`: JSON lines or CSV from a file, read once or followed (`follow`).
//!
//! The file is one split, named by its path; its position is the byte offset of the next
//! line, so a restart continues exactly after the last committed line.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use super::decode::{decode_in_parts, Decoder};
use super::{with_includes, MessageMeta, SplitReport};
use super::{
    Connector, ConnectorContext, DeadLetter, Encode, SourceBatch, SourceEvent, SourceSpec,
};
use crate::{ExecError, Result};

/// Lines per batch.
const BATCH_LINES: usize = 8192;
/// Bytes read at a time (room for a few batches of typical lines; it grows for longer ones).
const BLOCK_BYTES: usize = 4 << 20;

pub struct FileConnector {
    path: PathBuf,
    follow: bool,
    header: bool,
    /// One per core: a batch's lines are decoded in parts at once.
    decoders: Vec<Decoder>,
    spec: SourceSpec,
    block_size: usize,
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
            decoders: (0..std::thread::available_parallelism().map_or(1, |n| n.get()))
                .map(|_| Decoder::new(spec.payload_schema.clone(), spec.encode.clone()))
                .collect(),
            spec: spec.clone(),
            block_size: BLOCK_BYTES,
        })
    }

    fn split(&self) -> String {
        self.path.display().to_string()
    }

    fn read(&self, context: &ConnectorContext) -> std::io::Result<()> {
        let split = self.split();
        let mut file = File::open(&self.path)?;
        let position = context.positions.get(&split).copied().unwrap_or(0).max(0) as u64;
        file.seek(SeekFrom::Start(position))?;
        let mut block = Block::new(file, position, self.block_size);
        let mut skip_header = position == 0 && self.header;
        // Whether the last read found the end of the file.
        let mut at_eof = false;
        loop {
            // Up to BATCH_LINES lines (fewer while statements are made), as ranges of the block.
            let batch_lines = context.batch_rows(BATCH_LINES);
            let mut lines: Vec<(usize, usize)> = Vec::with_capacity(batch_lines);
            let mut scan = block.start;
            let mut exhausted;
            loop {
                exhausted = false;
                while lines.len() < batch_lines {
                    let Some(newline) = memchr::memchr(b'\n', &block.buf[scan..block.end]) else {
                        exhausted = true;
                        break;
                    };
                    let line = (scan, scan + newline + 1);
                    scan = line.1;
                    if std::mem::take(&mut skip_header) || is_blank(&block.buf[line.0..line.1]) {
                        continue;
                    }
                    lines.push(line);
                }
                if !exhausted || at_eof {
                    break;
                }
                // Too few whole lines: read on, which moves the unconsumed bytes to the front.
                // When those are many, send the lines found first (a smaller batch), so that
                // only the partial last line is moved.
                if scan > block.start && block.end - block.start > block.buf.len() / 8 {
                    break;
                }
                let moved = block.start;
                at_eof = block.fill()?;
                scan -= moved;
                for line in &mut lines {
                    line.0 -= moved;
                    line.1 -= moved;
                }
            }
            let at_end = exhausted && at_eof;
            if at_end && !self.follow && scan < block.end {
                // The file ends without a newline: its last line is complete all the same.
                // (When following, it is read once its newline is there.)
                let line = (scan, block.end);
                scan = line.1;
                if !std::mem::take(&mut skip_header) && !is_blank(&block.buf[line.0..line.1]) {
                    lines.push(line);
                }
            }
            if scan > block.start {
                let messages: Vec<&[u8]> = lines.iter().map(|&(a, b)| &block.buf[a..b]).collect();
                let start_of = |i: usize| block.position + (lines[i].0 - block.start) as u64;
                let next_position = block.position + (scan - block.start) as u64;
                let decoded = decode_in_parts(&self.decoders, &messages);
                let dead_letters = decoded
                    .bad
                    .into_iter()
                    .map(|(i, error)| DeadLetter {
                        split: split.clone(),
                        position: start_of(i) as i64,
                        error,
                        payload: messages[i].to_vec(),
                        reader: String::new(),
                    })
                    .collect();
                let meta = MessageMeta {
                    partition: None,
                    offsets: decoded.good.iter().map(|&i| start_of(i) as i64).collect(),
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
                    next_position: next_position as i64,
                    dead_letters,
                    deletes: None,
                };
                block.consume(scan);
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
                at_eof = false;
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

/// A file read in large blocks into one reused buffer: lines are handed out as ranges of it,
/// never allocated or copied one by one.
struct Block {
    file: File,
    buf: Vec<u8>,
    /// The bytes not yet consumed are `buf[start..end]`.
    start: usize,
    end: usize,
    /// The file offset of `buf[start]`.
    position: u64,
}

impl Block {
    fn new(file: File, position: u64, size: usize) -> Self {
        Self {
            file,
            buf: vec![0; size.max(1)],
            start: 0,
            end: 0,
            position,
        }
    }

    /// Moves the unconsumed bytes to the front (doubling the buffer when they fill it: a line
    /// longer than the buffer) and reads until the buffer is full or the file ends. Returns
    /// whether the file ended.
    fn fill(&mut self) -> std::io::Result<bool> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        while self.end < self.buf.len() {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(true),
                Ok(read) => self.end += read,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(false)
    }

    /// Marks the bytes before `until` (an index into the buffer) consumed.
    fn consume(&mut self, until: usize) {
        self.position += (until - self.start) as u64;
        self.start = until;
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    use crossbeam_channel::Receiver;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, TimeUnit};
    use eddy_planner::statement::IncludeKind;

    use super::*;
    use crate::connector::INTERACTIVE_BATCH_ROWS;

    fn spec(path: &std::path::Path, follow: bool, encode: Encode) -> SourceSpec {
        let payload = vec![
            Field::new("sensor", DataType::Int32, true),
            Field::new("reading", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ];
        let mut all = payload.clone();
        all.push(Field::new("line_offset", DataType::Int64, true));
        let mut options = BTreeMap::from([("path".to_string(), path.display().to_string())]);
        if follow {
            options.insert("follow".into(), "true".into());
        }
        SourceSpec {
            name: "s".into(),
            connector: "file".into(),
            options,
            encode,
            format: crate::connector::SourceFormat::Plain,
            key_encode: None,
            key_columns: Vec::new(),
            payload_schema: Arc::new(Schema::new(payload)),
            schema: Arc::new(Schema::new(all)),
            includes: vec![IncludeKind::Offset],
        }
    }

    fn context(
        position: Option<i64>,
        path: &std::path::Path,
    ) -> (ConnectorContext, Receiver<SourceEvent>) {
        let (events, receiver) = crossbeam_channel::unbounded();
        let positions = position
            .map(|p| BTreeMap::from([(path.display().to_string(), p)]))
            .unwrap_or_default();
        let context = ConnectorContext {
            events,
            stop: Arc::new(AtomicBool::new(false)),
            positions,
            refresh: Arc::new(AtomicU64::new(0)),
            interactive: Arc::new(AtomicBool::new(false)),
        };
        (context, receiver)
    }

    /// What a run produced: `(sensor, line_offset)` per row, `(offset, error, payload)` per
    /// dead letter, the position after the last batch, and whether it finished.
    #[derive(Debug, Default, PartialEq)]
    struct Read {
        rows: Vec<(Option<i32>, i64)>,
        dead: Vec<(i64, String, String)>,
        position: Option<i64>,
        finished: bool,
    }

    fn collect(receiver: &Receiver<SourceEvent>, read: &mut Read) {
        while let Ok(event) = receiver.try_recv() {
            match event {
                SourceEvent::Batch(batch) => {
                    let sensors = batch.rows.column(0).as_primitive::<Int32Type>();
                    let offsets = batch.rows.column(3).as_primitive::<Int64Type>();
                    for row in 0..batch.rows.num_rows() {
                        let sensor = sensors.is_valid(row).then(|| sensors.value(row));
                        read.rows.push((sensor, offsets.value(row)));
                    }
                    for letter in batch.dead_letters {
                        let payload = String::from_utf8(letter.payload).unwrap();
                        read.dead.push((letter.position, letter.error, payload));
                    }
                    assert!(read.position <= Some(batch.next_position));
                    read.position = Some(batch.next_position);
                }
                SourceEvent::Finished => read.finished = true,
                SourceEvent::Splits { .. } => {}
                SourceEvent::Error(error) => panic!("{error}"),
            }
        }
    }

    /// Reads a whole file (not following) with the given block size.
    fn read_once(path: &std::path::Path, encode: Encode, block: usize, from: Option<i64>) -> Read {
        let mut connector = FileConnector::new(&spec(path, false, encode)).unwrap();
        connector.block_size = block;
        let (context, receiver) = context(from, path);
        Box::new(connector).run(context);
        let mut read = Read::default();
        collect(&receiver, &mut read);
        assert!(read.finished);
        read
    }

    fn offset_of(text: &str, line: &str) -> i64 {
        text.find(line).unwrap() as i64
    }

    const JSON: &str = concat!(
        "{\"sensor\": 1, \"reading\": 10, \"ts\": \"2024-01-01T00:00:01Z\"}\n",
        "\n",
        "   \n",
        "{\"sensor\": 2, \"reading\": 20, \"ts\": \"2024-01-01 00:00:02\"}\n",
        "{\"sensor\": 3, \"reading\": \"thirty\"}\n",
        "not json\n",
        "{\"sensor\": 4, \"ts\": 1704067204000}\n",
        "{\"sensor\": 5, \"ts\": \"yesterday\"}\n",
        "\n",
        "{\"sensor\": 6, \"reading\": 60}\n",
    );

    #[test]
    fn lines_across_block_reads_and_bad_lines_with_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, JSON).unwrap();
        let expected_rows: Vec<(Option<i32>, i64)> = [1, 2, 4, 6]
            .iter()
            .map(|&s| (Some(s), offset_of(JSON, &format!("{{\"sensor\": {s},"))))
            .collect();
        // Block sizes that cut lines anywhere, down to a byte at a time (the buffer grows).
        for block in [1, 7, 16, 50, 64, 1000, BLOCK_BYTES] {
            let read = read_once(&path, Encode::Json, block, None);
            assert_eq!(read.rows, expected_rows, "block {block}");
            let dead: Vec<(i64, &str)> = read
                .dead
                .iter()
                .map(|(offset, _, payload)| (*offset, payload.as_str()))
                .collect();
            assert_eq!(
                dead,
                vec![
                    (
                        offset_of(JSON, "{\"sensor\": 3"),
                        "{\"sensor\": 3, \"reading\": \"thirty\"}\n"
                    ),
                    (offset_of(JSON, "not json"), "not json\n"),
                    (
                        offset_of(JSON, "{\"sensor\": 5"),
                        "{\"sensor\": 5, \"ts\": \"yesterday\"}\n"
                    ),
                ],
                "block {block}"
            );
            assert!(read.dead[1].1.contains("not a JSON object"));
            assert!(read.dead[2].1.contains("bad timestamp"));
            assert_eq!(read.position, Some(JSON.len() as i64), "block {block}");
        }
    }

    #[test]
    fn restarts_from_a_committed_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, JSON).unwrap();
        let from = offset_of(JSON, "not json");
        for block in [16, BLOCK_BYTES] {
            let read = read_once(&path, Encode::Json, block, Some(from));
            let sensors: Vec<i32> = read.rows.iter().map(|(s, _)| s.unwrap()).collect();
            assert_eq!(sensors, vec![4, 6]);
            assert_eq!(read.rows[0].1, offset_of(JSON, "{\"sensor\": 4"));
            assert_eq!(read.dead.len(), 2);
        }
    }

    #[test]
    fn a_file_ending_without_a_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        let text = "{\"sensor\": 1}\n{\"sensor\": 2}";
        std::fs::write(&path, text).unwrap();
        for block in [4, BLOCK_BYTES] {
            let read = read_once(&path, Encode::Json, block, None);
            assert_eq!(read.rows, vec![(Some(1), 0), (Some(2), 14)]);
            assert_eq!(read.position, Some(text.len() as i64));
        }
        // A last line of blanks is no row, and the bad last line keeps its payload as is.
        std::fs::write(&path, "{\"sensor\": 1}\n  ").unwrap();
        let read = read_once(&path, Encode::Json, 64, None);
        assert_eq!(read.rows, vec![(Some(1), 0)]);
        assert_eq!(read.position, Some(16));
        std::fs::write(&path, "{\"sensor\": 1}\n{\"sensor\"").unwrap();
        let read = read_once(&path, Encode::Json, 64, None);
        assert_eq!(read.dead.len(), 1);
        assert_eq!(
            (read.dead[0].0, read.dead[0].2.as_str()),
            (14, "{\"sensor\"")
        );
    }

    #[test]
    fn following_waits_for_a_partial_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, "{\"sensor\": 1}\n{\"sens").unwrap();
        let mut connector = FileConnector::new(&spec(&path, true, Encode::Json)).unwrap();
        connector.block_size = 8;
        let (context, receiver) = context(None, &path);
        let stop = context.stop.clone();
        let reader = std::thread::spawn(move || Box::new(connector).run(context));
        let mut read = Read::default();
        let wait_for = |read: &mut Read, rows: usize| {
            for _ in 0..200 {
                collect(&receiver, read);
                if read.rows.len() >= rows {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait_for(&mut read, 1);
        // Time for a few more polls: the partial line stays unread.
        std::thread::sleep(Duration::from_millis(300));
        collect(&receiver, &mut read);
        assert_eq!(read.rows, vec![(Some(1), 0)]);
        assert_eq!(read.position, Some(14));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"or\": 2}\n\n{\"sensor\": 3}\n").unwrap();
        wait_for(&mut read, 3);
        assert_eq!(read.rows, vec![(Some(1), 0), (Some(2), 14), (Some(3), 29)]);
        assert_eq!(read.position, Some(43));
        assert!(!read.finished);
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    }

    #[test]
    fn many_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        let lines = BATCH_LINES * 2 + 100;
        let text: String = (0..lines)
            .map(|i| format!("{{\"sensor\": {}}}\n", i % 1000))
            .collect();
        std::fs::write(&path, &text).unwrap();
        for block in [1000, 100_000, BLOCK_BYTES] {
            let read = read_once(&path, Encode::Json, block, None);
            assert_eq!(read.rows.len(), lines, "block {block}");
            assert!(read.dead.is_empty());
            let mut offset = 0;
            for (i, (sensor, at)) in read.rows.iter().enumerate() {
                assert_eq!((*sensor, *at), (Some((i % 1000) as i32), offset));
                offset += format!("{{\"sensor\": {}}}\n", i % 1000).len() as i64;
            }
            assert_eq!(read.position, Some(text.len() as i64));
        }
    }

    #[test]
    fn csv_with_a_header_across_block_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.csv");
        let text = "sensor;reading;ts\n7;1;2024-01-01 00:00:01\r\n\nx;2;2024-01-01 00:00:02\n8;3;1704067203000";
        std::fs::write(&path, text).unwrap();
        let encode = Encode::Csv {
            delimiter: b';',
            header: true,
        };
        for block in [3, 10, BLOCK_BYTES] {
            let read = read_once(&path, encode.clone(), block, None);
            assert_eq!(
                read.rows,
                vec![(Some(7), 18), (Some(8), offset_of(text, "8;3"))],
                "block {block}"
            );
            assert_eq!(read.dead.len(), 1);
            assert_eq!(read.dead[0].0, offset_of(text, "x;2"));
            assert_eq!(read.position, Some(text.len() as i64));
        }
    }

    /// While statements are made, batches are smaller; every line still arrives once, in order.
    #[test]
    fn batches_are_smaller_while_statements_are_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.jsonl");
        let lines = 5_000;
        let text: String = (0..lines)
            .map(|i| format!("{{\"sensor\": {i}}}\n"))
            .collect();
        std::fs::write(&path, &text).unwrap();
        for interactive in [false, true] {
            let connector = FileConnector::new(&spec(&path, false, Encode::Json)).unwrap();
            let (context, receiver) = context(None, &path);
            context.interactive.store(interactive, Ordering::Relaxed);
            Box::new(connector).run(context);
            let mut sizes = Vec::new();
            let mut sensors = Vec::new();
            while let Ok(event) = receiver.try_recv() {
                if let SourceEvent::Batch(batch) = event {
                    sizes.push(batch.rows.num_rows());
                    let column = batch.rows.column(0).as_primitive::<Int32Type>();
                    sensors.extend(column.values().iter().copied());
                }
            }
            assert_eq!(sensors, (0..lines).collect::<Vec<i32>>());
            let most = match interactive {
                true => INTERACTIVE_BATCH_ROWS,
                false => lines as usize,
            };
            assert_eq!(sizes.iter().max(), Some(&most), "{interactive}: {sizes:?}");
        }
    }
}
