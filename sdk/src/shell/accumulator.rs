//! pi's `OutputAccumulator`: counts lines and bytes of a command's output, keeps a bounded decoded tail for the
//! model, and spills the raw bytes to a temp file once the output outgrows the limits. Memory stays bounded
//! however much the command prints.

use std::io::{self, Write};

use crate::truncate::{Truncation, truncate_tail};

/// Bytes kept for `structuredContent.output` (pi's `STRUCTURED_OUTPUT_MAX_BYTES`).
pub const STRUCTURED_MAX: usize = 1024 * 1024;

/// Streaming UTF-8 decoding with U+FFFD for invalid sequences (the WHATWG decoder's rules).
#[derive(Default)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    fn decode(&mut self, chunk: &[u8], out: &mut String) {
        self.pending.extend_from_slice(chunk);
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
    }

    fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push('\u{FFFD}');
            self.pending.clear();
        }
    }
}

/// Where the full output goes once it needs a file.
pub trait Spill {
    /// Create the file: its path and a writer.
    fn create(&mut self) -> io::Result<(String, Box<dyn Write + Send>)>;
}

/// The accumulator.
pub struct OutputAccumulator<S: Spill> {
    max_lines: usize,
    max_bytes: usize,
    max_rolling: usize,
    decoder: Utf8Stream,
    /// Raw bytes not yet in the file (only before the file exists).
    raw_chunks: Vec<u8>,
    /// The first raw bytes, up to half of [`STRUCTURED_MAX`], and the last ones, for `structuredContent`.
    raw_head: Vec<u8>,
    raw_tail: Vec<u8>,
    tail_text: String,
    tail_starts_at_line: bool,
    total_raw: usize,
    total_decoded: usize,
    completed_lines: usize,
    total_lines: usize,
    current_line_bytes: usize,
    finished: bool,
    spill: S,
    file: Option<(String, Box<dyn Write + Send>)>,
    spill_error: Option<io::Error>,
}

/// A snapshot for the model.
pub struct Snapshot {
    /// The kept tail.
    pub content: String,
    /// What was cut.
    pub truncation: Truncation,
    /// The temp file, once there is one.
    pub full_output_path: Option<String>,
}

impl<S: Spill> OutputAccumulator<S> {
    /// An accumulator with pi's limits.
    pub fn new(max_lines: usize, max_bytes: usize, spill: S) -> Self {
        OutputAccumulator {
            max_lines,
            max_bytes,
            max_rolling: (max_bytes * 2).max(1),
            decoder: Utf8Stream::default(),
            raw_chunks: Vec::new(),
            raw_head: Vec::new(),
            raw_tail: Vec::new(),
            tail_text: String::new(),
            tail_starts_at_line: true,
            total_raw: 0,
            total_decoded: 0,
            completed_lines: 0,
            total_lines: 0,
            current_line_bytes: 0,
            finished: false,
            spill,
            file: None,
            spill_error: None,
        }
    }

    /// Add raw output.
    pub fn append(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.total_raw += data.len();
        self.keep_raw(data);
        let mut text = String::new();
        self.decoder.decode(data, &mut text);
        self.append_text(&text);
        if self.file.is_some() || self.should_spill() {
            self.ensure_file();
            self.write_file(data);
        } else {
            self.raw_chunks.extend_from_slice(data);
        }
    }

    /// No more output.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let mut text = String::new();
        self.decoder.finish(&mut text);
        self.append_text(&text);
        if self.should_spill() {
            self.ensure_file();
        }
        if let Some((_, w)) = &mut self.file {
            let _ = w.flush();
        }
    }

    /// The model's view (pi's `snapshot`).
    pub fn snapshot(&mut self, persist_if_truncated: bool) -> Snapshot {
        let text = self.snapshot_text();
        let text = if text.is_empty() {
            self.tail_text.clone()
        } else {
            text
        };
        let tail = truncate_tail(&text, self.max_lines, self.max_bytes);
        let truncated = self.total_lines > self.max_lines || self.total_decoded > self.max_bytes;
        let truncated_by = if truncated {
            tail.truncated_by.or(Some(if self.total_decoded > self.max_bytes {
                "bytes"
            } else {
                "lines"
            }))
        } else {
            None
        };
        let truncation = Truncation {
            truncated,
            truncated_by,
            total_lines: self.total_lines,
            total_bytes: self.total_decoded,
            max_lines: self.max_lines,
            max_bytes: self.max_bytes,
            ..tail
        };
        if persist_if_truncated && truncated {
            self.ensure_file();
        }
        Snapshot {
            content: truncation.content.clone(),
            truncation,
            full_output_path: self.file.as_ref().map(|(p, _)| p.clone()),
        }
    }

    /// UTF-8 bytes of the open last line.
    pub fn last_line_bytes(&self) -> usize {
        self.current_line_bytes
    }

    /// pi's `readFullOutput(1 MiB)`: the whole output when it fits, else its head and tail around a marker.
    pub fn full_output(&self) -> (String, bool) {
        if self.total_raw <= STRUCTURED_MAX {
            let mut all = self.raw_head.clone();
            all.extend_from_slice(&self.raw_tail);
            return (String::from_utf8_lossy(&all).into_owned(), false);
        }
        let head_len = STRUCTURED_MAX / 2;
        let tail_len = STRUCTURED_MAX - head_len;
        let mut head_text = String::new();
        // A head cut inside a character drops it, as a streaming decoder does.
        Utf8Stream::default().decode(&self.raw_head[..head_len], &mut head_text);
        let tail = &self.raw_tail[self.raw_tail.len() - tail_len..];
        let skip = tail.iter().take_while(|b| (**b & 0xc0) == 0x80).count();
        let tail_text = String::from_utf8_lossy(&tail[skip..]);
        let omitted = self.total_raw - head_len - tail_len;
        (
            format!("{head_text}\n\n[... {omitted} bytes omitted ...]\n\n{tail_text}"),
            true,
        )
    }

    /// The first error writing the temp file, if any.
    pub fn spill_error(&mut self) -> Option<io::Error> {
        self.spill_error.take()
    }

    fn keep_raw(&mut self, data: &[u8]) {
        let head_room = (STRUCTURED_MAX / 2).saturating_sub(self.raw_head.len());
        let (head, rest) = data.split_at(head_room.min(data.len()));
        self.raw_head.extend_from_slice(head);
        self.raw_tail.extend_from_slice(rest);
        let keep = STRUCTURED_MAX - STRUCTURED_MAX / 2;
        if self.raw_tail.len() > 2 * keep {
            self.raw_tail.drain(..self.raw_tail.len() - keep);
        }
    }

    fn append_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_decoded += text.len();
        self.tail_text.push_str(text);
        if self.tail_text.len() > self.max_rolling * 2 {
            self.trim_tail();
        }
        match text.rfind('\n') {
            None => self.current_line_bytes += text.len(),
            Some(last) => {
                self.completed_lines += text.bytes().filter(|b| *b == b'\n').count();
                self.current_line_bytes = text.len() - last - 1;
            }
        }
        self.total_lines = self.completed_lines + usize::from(self.current_line_bytes > 0);
    }

    fn trim_tail(&mut self) {
        let bytes = self.tail_text.as_bytes();
        let mut start = bytes.len() - self.max_rolling;
        while start < bytes.len() && (bytes[start] & 0xc0) == 0x80 {
            start += 1;
        }
        if start > 0 {
            self.tail_starts_at_line = bytes[start - 1] == b'\n';
        }
        self.tail_text = self.tail_text[start..].to_owned();
    }

    fn snapshot_text(&self) -> String {
        if self.tail_starts_at_line {
            return self.tail_text.clone();
        }
        match self.tail_text.find('\n') {
            Some(i) => self.tail_text[i + 1..].to_owned(),
            None => self.tail_text.clone(),
        }
    }

    fn should_spill(&self) -> bool {
        self.total_raw > self.max_bytes
            || self.total_decoded > self.max_bytes
            || self.total_lines > self.max_lines
    }

    fn ensure_file(&mut self) {
        if self.file.is_some() || self.spill_error.is_some() {
            return;
        }
        match self.spill.create() {
            Ok(file) => {
                self.file = Some(file);
                let chunks = std::mem::take(&mut self.raw_chunks);
                self.write_file(&chunks);
            }
            Err(e) => self.spill_error = Some(e),
        }
    }

    fn write_file(&mut self, data: &[u8]) {
        if let Some((_, w)) = &mut self.file
            && let Err(e) = w.write_all(data)
        {
            self.spill_error.get_or_insert(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct MemorySpill(Arc<Mutex<Vec<u8>>>);

    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Spill for MemorySpill {
        fn create(&mut self) -> io::Result<(String, Box<dyn Write + Send>)> {
            Ok(("/tmp/spill.log".into(), Box::new(Sink(self.0.clone()))))
        }
    }

    #[test]
    fn small_output_stays_in_memory() {
        let mut acc = OutputAccumulator::new(2000, 51200, MemorySpill::default());
        acc.append(b"hello\nwor");
        acc.append(b"ld\n");
        acc.finish();
        let snap = acc.snapshot(true);
        assert_eq!(snap.content, "hello\nworld\n");
        assert!(!snap.truncation.truncated);
        assert_eq!(snap.truncation.total_lines, 2);
        assert_eq!(snap.full_output_path, None);
        assert_eq!(acc.full_output(), ("hello\nworld\n".into(), false));
    }

    #[test]
    fn large_output_spills_everything_to_the_file_and_keeps_a_tail() {
        let spill = MemorySpill::default();
        let mut acc = OutputAccumulator::new(2000, 51200, spill.clone());
        let mut expected = Vec::new();
        for i in 0..5000 {
            let line = format!("line {i}\n");
            expected.extend_from_slice(line.as_bytes());
            acc.append(line.as_bytes());
        }
        acc.finish();
        let snap = acc.snapshot(true);
        assert!(snap.truncation.truncated);
        assert_eq!(snap.truncation.truncated_by, Some("lines"));
        assert_eq!(snap.truncation.output_lines, 2000);
        assert!(snap.content.ends_with("line 4999\n") || snap.content.ends_with("line 4999"));
        assert_eq!(snap.full_output_path.as_deref(), Some("/tmp/spill.log"));
        assert_eq!(*spill.0.lock().unwrap(), expected, "no output lost");
    }

    #[test]
    fn split_utf8_sequences_decode_across_chunks() {
        let mut acc = OutputAccumulator::new(2000, 51200, MemorySpill::default());
        let bytes = "é€".as_bytes();
        acc.append(&bytes[..1]);
        acc.append(&bytes[1..4]);
        acc.append(&bytes[4..]);
        acc.append(&[0xff]);
        acc.finish();
        assert_eq!(acc.snapshot(false).content, "é€\u{FFFD}");
    }
}
