//! Bounded splitting of a container's log into lines.
//!
//! A log is split at `\n` and at `\r` (a progress bar redrawn with `\r` gives one line per
//! redraw; `\r\n` ends one line), so text without newlines cannot grow one line without bound.
//!
//! # Guarantees
//! - A [`LineSplitter`] holds at most [`MAX_LOG_LINE_BYTES`] bytes of the current line, whatever
//!   it is fed; bytes beyond are counted, not kept, and the line ends with a marker saying how
//!   many were cut.
//! - [`cap_log_line`] applies the same bound to a line that is already whole.
//! - Invalid UTF-8 becomes U+FFFD; nothing is lost silently except what the marker reports.
//!
//! [`parse_training_step`] reads the progress line InstantStart's training recipes print
//! (`step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s`), for the throughput and loss
//! series of `api::metrics`.

/// Longest log line kept, in bytes (before the marker).
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

fn marker(cut: usize) -> String {
    format!(" … [{cut} bytes cut]")
}

/// Cuts `line` to [`MAX_LOG_LINE_BYTES`] (at a character boundary) and marks the cut.
pub fn cap_log_line(line: String) -> String {
    if line.len() <= MAX_LOG_LINE_BYTES {
        return line;
    }
    let mut end = MAX_LOG_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let cut = line.len() - end;
    let mut out = line;
    out.truncate(end);
    out.push_str(&marker(cut));
    out
}

/// Turns chunks of a log into bounded lines.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    cut: usize,
    after_cr: bool,
}

impl LineSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    fn take(&mut self) -> String {
        let mut line = String::from_utf8_lossy(&self.buf).into_owned();
        if self.cut > 0 {
            line.push_str(&marker(self.cut));
        }
        self.buf.clear();
        self.cut = 0;
        line
    }

    /// Feeds a chunk; returns the lines it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &b in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => lines.push(self.take()),
                _ if self.buf.len() < MAX_LOG_LINE_BYTES => self.buf.push(b),
                _ => self.cut += 1,
            }
        }
        lines
    }

    /// The last line, when the log ends without a line break.
    pub fn finish(&mut self) -> Option<String> {
        (!self.buf.is_empty() || self.cut > 0).then(|| self.take())
    }
}

/// `(step, loss, throughput in tokens/s)` of a training progress line
/// `step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s`, found anywhere in the line (so
/// prefixes such as `[rank0]:` or a timestamp are fine); `None` for any other line.
pub fn parse_training_step(line: &str) -> Option<(u64, f64, f64)> {
    let rest = &line[line.find("step ")? + 5..];
    let mut parts = rest.split(" | ");
    let step = parts.next()?.trim().parse().ok()?;
    let loss = parts.next()?.strip_prefix("loss ")?.trim().parse().ok()?;
    let _lr = parts.next()?;
    let throughput = parts.next()?.strip_suffix(" tokens/s")?.trim().parse().ok()?;
    Some((step, loss, throughput))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::new();
        let mut out: Vec<String> = chunks.iter().flat_map(|c| s.push(c)).collect();
        out.extend(s.finish());
        out
    }

    #[test]
    fn splits_at_newlines_and_carriage_returns() {
        let cases: &[(&[&[u8]], &[&str])] = &[
            (&[b"a\nb\n"], &["a", "b"]),
            (&[b"a\r\nb"], &["a", "b"]),
            (&[b"a\r", b"\nb\n"], &["a", "b"]),
            (&[b" 10%\r 20%\r 30%\n"], &[" 10%", " 20%", " 30%"]),
            (&[b"\n\n"], &["", ""]),
            (&[b"par", b"tial"], &["partial"]),
            (&[b"\xffok\n"], &["\u{fffd}ok"]),
        ];
        for (chunks, want) in cases {
            assert_eq!(split(chunks), *want, "{chunks:?}");
        }
    }

    #[test]
    fn a_line_without_end_is_bounded_and_marked() {
        let mut s = LineSplitter::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..8 {
            assert!(s.push(&chunk).is_empty());
            assert!(s.buf.len() <= MAX_LOG_LINE_BYTES, "the buffer stays bounded");
        }
        let line = s.push(b"\n").remove(0);
        let cut = 8 * (1 << 20) - MAX_LOG_LINE_BYTES;
        assert!(line.ends_with(&format!("[{cut} bytes cut]")), "{}", &line[line.len() - 40..]);
        assert!(line.len() < MAX_LOG_LINE_BYTES + 40);
    }

    #[test]
    fn training_steps_are_read_from_progress_lines() {
        type Step = Option<(u64, f64, f64)>;
        let table: &[(&str, Step)] = &[
            ("step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s", Some((12, 1.2345, 9123.4))),
            ("[rank0]: step 3 | loss 2.5 | lr 1e-4 | 100.0 tokens/s", Some((3, 2.5, 100.0))),
            ("loading checkpoint", None),
            ("step x | loss 1 | lr 1 | 1 tokens/s", None),
            ("step 1 | loss 1 | lr 1 | 1 samples/s", None),
        ];
        for (line, want) in table {
            assert_eq!(parse_training_step(line), *want, "{line}");
        }
    }

    #[test]
    fn whole_lines_are_capped_at_a_char_boundary() {
        assert_eq!(cap_log_line("short".into()), "short");
        let long = "é".repeat(MAX_LOG_LINE_BYTES);
        let capped = cap_log_line(long.clone());
        assert!(capped.len() < MAX_LOG_LINE_BYTES + 40);
        assert!(capped.ends_with(&format!("[{} bytes cut]", long.len() - MAX_LOG_LINE_BYTES)));
    }
}
