//! Splits a JSON document into byte slices of complete values without parsing
//! them: the reader walks the top-level object and the `traceEvents` array with
//! this, and parses each event from its slice. serde_json parses a slice about
//! twice as fast as an `io::Read` (which it reads a byte at a time), while only
//! one event, not the whole file, has to be in memory.

use std::io::{self, Read};

/// Read size and starting buffer: small enough that the events parsed from it
/// are still in the L2 cache and that 1024 rank files cost little each (the
/// buffer doubles for a longer value).
const CHUNK: usize = 64 << 10;

/// The largest single JSON value held at once: 256 MiB.
pub(crate) const MAX_VALUE: usize = 256 << 20;

/// How far `line_value` and `block_value` look for the end of a value.
const GUESS_LIMIT: usize = 64 << 10;

/// A line and column (both from 1) in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: u64,
    pub column: u64,
}

impl Pos {
    /// Where an error that serde_json found inside a value starting here is in
    /// the document (serde counts from the start of the value's slice).
    pub(crate) fn advanced_to(self, e: &serde_json::Error) -> Pos {
        let (line, column) = (e.line() as u64, e.column() as u64);
        if line <= 1 {
            Pos {
                line: self.line,
                column: self.column + column.saturating_sub(1),
            }
        } else {
            Pos {
                line: self.line + line - 1,
                column,
            }
        }
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// How a layout that closes every value the same way ends them, learned from
/// one value: a newline, the indentation and `}` (each event over several
/// lines, as the PyTorch profiler writes them), or `}` and the separator before
/// the next `{` (all on one line). A raw newline cannot occur inside a JSON
/// string, so the first form is never inside one; the second can be, and the
/// caller checks what it takes.
pub(crate) struct Closer {
    finder: memchr::memmem::Finder<'static>,
    /// Bytes of a match that belong to the value.
    keep: usize,
}

impl Closer {
    /// From a value just split by brackets, `raw`, and the bytes after it.
    pub(crate) fn learn(raw: &[u8], after: &[u8]) -> Option<Closer> {
        if let Some(nl) = memchr::memrchr(b'\n', raw) {
            let (brace, indent) = raw[nl + 1..].split_last()?;
            let own_line = *brace == b'}' && indent.iter().all(|&c| c == b' ' || c == b'\t');
            return own_line.then(|| Closer {
                finder: memchr::memmem::Finder::new(&raw[nl..]).into_owned(),
                keep: raw.len() - nl,
            });
        }
        let next = memchr::memchr(b'{', after)?;
        let sep = &after[..next];
        let inline = raw.last() == Some(&b'}')
            && sep.first() == Some(&b',')
            && sep[1..].iter().all(|&c| c == b' ' || c == b'\t');
        inline.then(|| {
            let needle = [b"}", sep, b"{"].concat();
            Closer {
                finder: memchr::memmem::Finder::new(&needle).into_owned(),
                keep: 1,
            }
        })
    }
}

pub(crate) struct Splitter<R> {
    src: R,
    buf: Vec<u8>,
    /// First byte not yet consumed.
    start: usize,
    /// End of the bytes read into `buf`.
    end: usize,
    eof: bool,
    /// Newlines in the bytes already dropped from the front of `buf`, and the
    /// bytes after the last of them, for positions in messages.
    dropped_lines: u64,
    dropped_column: u64,
    /// Newlines counted in `buf` up to a byte, and the last of them: a
    /// reader asking each line's position (nsys JSON) counts from the last
    /// position asked, not from the buffer's start (which took a third of
    /// reading an nsys export, quadratic in the buffer's lines).
    counted: std::cell::Cell<(usize, u64, Option<usize>)>,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

impl<R: Read> Splitter<R> {
    pub(crate) fn new(src: R) -> Self {
        Self {
            src,
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            eof: false,
            dropped_lines: 0,
            dropped_column: 0,
            counted: std::cell::Cell::new((0, 0, None)),
        }
    }

    /// Reads more input, keeping `buf[start..end]` (moved to the front). Returns
    /// false at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            let dropped = &self.buf[..self.start];
            match memchr::memrchr(b'\n', dropped) {
                Some(last) => {
                    self.dropped_lines += memchr::memchr_iter(b'\n', dropped).count() as u64;
                    self.dropped_column = (dropped.len() - last - 1) as u64;
                }
                None => self.dropped_column += dropped.len() as u64,
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.counted.set((0, 0, None));
        }
        if self.end == self.buf.len() {
            // One value larger than the buffer: grow, up to a bound. A
            // 3 MB gzip can expand to one 3 GB string; no real event, string
            // table or metadata block is a quarter of a gigabyte.
            if self.buf.len() >= MAX_VALUE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "one JSON value is over {} MiB (at most that much of one value is read)",
                        MAX_VALUE >> 20
                    ),
                ));
            }
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next byte that is not whitespace, left unconsumed; `None` at the end.
    pub(crate) fn peek(&mut self) -> io::Result<Option<u8>> {
        loop {
            while self.start < self.end && is_ws(self.buf[self.start]) {
                self.start += 1;
            }
            if self.start < self.end {
                return Ok(Some(self.buf[self.start]));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Whether the unconsumed bytes start with `prefix`, reading more as
    /// needed (a read can return fewer bytes than asked).
    pub(crate) fn next_is(&mut self, prefix: &[u8]) -> io::Result<bool> {
        while self.end - self.start < prefix.len() {
            if !self.fill()? {
                break;
            }
        }
        Ok(self.buf[self.start..self.end].starts_with(prefix))
    }

    /// Consumes one byte (after `peek`).
    pub(crate) fn bump(&mut self) {
        self.start += 1;
    }

    /// The complete JSON value starting at the next non-whitespace byte,
    /// consumed; `None` when the input ends inside it. The value's syntax is not
    /// checked beyond brackets and strings: parsing the slice does that.
    pub(crate) fn value(&mut self) -> io::Result<Option<&[u8]>> {
        if self.peek()?.is_none() {
            return Ok(None);
        }
        let (mut depth, mut in_str, mut esc) = (0u32, false, false);
        let first = self.buf[self.start];
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        // An object ends at its matching brace whatever brackets it holds, so
        // only quotes and braces need looking at: jump between them.
        let object = first == b'{';
        // Offset from `start` of the next byte to look at; survives refills.
        let mut i = 0;
        loop {
            let bytes = &self.buf[self.start..self.end];
            while i < bytes.len() {
                let b = bytes[i];
                if in_str {
                    if esc {
                        esc = false;
                    } else if b == b'\\' {
                        esc = true;
                    } else if b == b'"' {
                        in_str = false;
                        if depth == 0 {
                            return Ok(Some(self.take(i + 1)));
                        }
                    } else {
                        // Kernel names are long: jump to the next quote or escape.
                        match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                            Some(k) => i += k,
                            None => i = bytes.len(),
                        }
                        continue;
                    }
                } else if scalar {
                    if matches!(b, b',' | b']' | b'}') || is_ws(b) {
                        return Ok(Some(self.take(i)));
                    }
                } else if object {
                    match b {
                        b'"' => in_str = true,
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(Some(self.take(i + 1)));
                            }
                        }
                        _ => {
                            match memchr::memchr3(b'"', b'{', b'}', &bytes[i..]) {
                                Some(k) => i += k,
                                None => i = bytes.len(),
                            }
                            continue;
                        }
                    }
                } else {
                    match b {
                        b'"' => in_str = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                return Ok(Some(self.take(i + 1)));
                            }
                        }
                        _ => {}
                    }
                }
                i += 1;
            }
            if !self.fill()? {
                // A number at the very end of the input is complete.
                return Ok((scalar && i > 0).then(|| self.take(i)));
            }
        }
    }

    /// For the one-value-per-line fast path: the length of the next value if it
    /// ends with its line (the line trimmed of trailing whitespace and one `,`
    /// ends with `}`); not consumed, and not checked: parse `ahead(len)`, then
    /// `consume(len)`. `None` when no newline comes within 64 KiB.
    pub(crate) fn line_value(&mut self) -> io::Result<Option<usize>> {
        loop {
            let bytes = &self.buf[self.start..self.end];
            if let Some(nl) = memchr::memchr(b'\n', bytes) {
                let mut n = nl;
                while n > 0 && is_ws(bytes[n - 1]) {
                    n -= 1;
                }
                if n > 0 && bytes[n - 1] == b',' {
                    n -= 1;
                }
                return Ok((n > 0 && bytes[n - 1] == b'}').then_some(n));
            }
            // Never grow the buffer for this: a file on one line is split instead.
            if bytes.len() > GUESS_LIMIT || !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// For layouts that close every value the same way (see [`Closer`]): the
    /// length of the next value if it ends at the first match of `closer`; not
    /// consumed, and not checked, as with `line_value`. `None` when no match
    /// comes within 64 KiB.
    pub(crate) fn closed_value(&mut self, closer: &Closer) -> io::Result<Option<usize>> {
        let n = closer.finder.needle().len();
        // Offset from `start` where the search resumes after a refill.
        let mut from = 0;
        loop {
            let bytes = &self.buf[self.start..self.end];
            if let Some(k) = closer.finder.find(&bytes[from..]) {
                return Ok(Some(from + k + closer.keep));
            }
            from = bytes.len().saturating_sub(n - 1);
            if bytes.len() > GUESS_LIMIT || !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The `len` bytes last consumed (the value `value` just returned).
    pub(crate) fn last(&self, len: usize) -> &[u8] {
        &self.buf[self.start - len..self.start]
    }

    /// The bytes read but not yet consumed (possibly none).
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The next `len` unconsumed bytes (after `line_value` or `closed_value`).
    pub(crate) fn ahead(&self, len: usize) -> &[u8] {
        &self.buf[self.start..self.start + len]
    }

    /// Consumes `len` bytes (after `line_value` or `closed_value`).
    pub(crate) fn consume(&mut self, len: usize) {
        self.start += len;
    }

    fn take(&mut self, len: usize) -> &[u8] {
        let s = self.start;
        self.start += len;
        &self.buf[s..s + len]
    }

    /// Position of the next unconsumed byte.
    pub(crate) fn pos(&self) -> Pos {
        self.pos_at(self.start)
    }

    /// Position of byte `at` of the buffer.
    fn pos_at(&self, at: usize) -> Pos {
        let (from, lines, last) = match self.counted.get() {
            c @ (to, _, _) if to <= at => c,
            _ => (0, 0, None),
        };
        let seen = &self.buf[from..at];
        let lines = lines + memchr::memchr_iter(b'\n', seen).count() as u64;
        let last = memchr::memrchr(b'\n', seen).map(|i| from + i).or(last);
        self.counted.set((at, lines, last));
        let column = match last {
            Some(last) => (at - last - 1) as u64,
            None => self.dropped_column + at as u64,
        };
        Pos {
            line: self.dropped_lines + lines + 1,
            column: column + 1,
        }
    }

    /// Position of the value last returned by `value`, `len` bytes long.
    pub(crate) fn pos_of_last(&self, len: usize) -> Pos {
        self.pos_at(self.start - len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads one byte at a time, to exercise every refill path.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.is_empty()) {
                (Some((b, rest)), false) => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn values(text: &str) -> Vec<String> {
        let mut sp = Splitter::new(Trickle(text.as_bytes()));
        sp.buf = vec![0; 4]; // tiny, so values span refills and force growth
        let mut out = Vec::new();
        assert_eq!(sp.peek().unwrap(), Some(b'['));
        sp.bump();
        loop {
            match sp.peek().unwrap() {
                Some(b']') | None => break,
                Some(b',') => sp.bump(),
                Some(_) => match sp.value().unwrap() {
                    Some(v) => out.push(String::from_utf8(v.to_vec()).unwrap()),
                    None => {
                        out.push("<cut>".into());
                        break;
                    }
                },
            }
        }
        out
    }

    #[test]
    fn splits_values_across_refills() {
        assert_eq!(
            values(r#"[ {"a": "}]\"", "b": [1, {"c": 2}]}, 12.5e3 ,"x,y", true, [[]], null]"#),
            vec![
                r#"{"a": "}]\"", "b": [1, {"c": 2}]}"#,
                "12.5e3",
                r#""x,y""#,
                "true",
                "[[]]",
                "null"
            ]
        );
        assert_eq!(values(r#"[{"a": 1}, {"b": "#), vec![r#"{"a": 1}"#, "<cut>"]);
        assert_eq!(values("[1, 2"), vec!["1", "2"]);
    }

    #[test]
    fn closed_value_finds_the_closing_line_across_refills() {
        let events = [
            "{\n    \"a\": 1\n  }",
            "{\n    \"b\": {\n      \"c\": 2\n    }\n  }",
        ];
        let text = format!("[\n  {},\n  {}\n]", events[0], events[1]);
        let mut sp = Splitter::new(Trickle(text.as_bytes()));
        sp.buf = vec![0; 4]; // tiny, so the search resumes after each refill
        let closer = Closer::learn(events[0].as_bytes(), b"").expect("a closing line");
        sp.peek().unwrap();
        sp.bump();
        for (i, want) in events.iter().enumerate() {
            if i > 0 {
                assert_eq!(sp.peek().unwrap(), Some(b','));
                sp.bump();
            }
            assert_eq!(sp.peek().unwrap(), Some(b'{'));
            let len = sp.closed_value(&closer).unwrap().expect("a closing line");
            assert_eq!(std::str::from_utf8(sp.ahead(len)).unwrap(), *want);
            sp.consume(len);
        }
        // No closing line before the end.
        assert_eq!(sp.closed_value(&closer).unwrap(), None);
    }

    #[test]
    fn closers_are_learned_from_a_value_and_what_follows() {
        fn ends<'a>(raw: &str, after: &str, next: &'a str) -> Option<&'a str> {
            let c = Closer::learn(raw.as_bytes(), after.as_bytes())?;
            let at = c.finder.find(next.as_bytes())?;
            Some(&next[..at + c.keep])
        }
        // A line of its own, whatever follows.
        assert_eq!(
            ends("{\n    \"a\": 1\n  }", "]", "{\n  \"b\": {\n    }\n  },\n"),
            Some("{\n  \"b\": {\n    }\n  }")
        );
        // All on one line: `}`, the separator and `{`.
        assert_eq!(
            ends(r#"{"a": 1}"#, r#",  {"b": 2}"#, r#"{"c": 3},  {"d": 4}"#),
            Some(r#"{"c": 3}"#)
        );
        // A newline in between is the one-per-line layout's, not this one.
        assert!(Closer::learn(br#"{"a": 1}"#, b",\n{").is_none());
        assert!(Closer::learn(br#"{"a": 1}"#, b"]}").is_none());
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let text = "[\n  {\"a\": 1},\n    {\"b\": 2}]";
        let mut sp = Splitter::new(Trickle(text.as_bytes()));
        sp.buf = vec![0; 4];
        sp.peek().unwrap();
        sp.bump();
        let first = sp.value().unwrap().unwrap().len();
        assert_eq!(sp.pos_of_last(first), Pos { line: 2, column: 3 });
        sp.peek().unwrap();
        sp.bump();
        sp.peek().unwrap();
        assert_eq!(sp.pos(), Pos { line: 3, column: 5 });
    }

    #[test]
    fn positions_asked_in_any_order_agree_with_counting_afresh() {
        let text = "ab\ncd\n\nef";
        let mut sp = Splitter::new(text.as_bytes());
        sp.peek().unwrap();
        let at = |sp: &Splitter<&[u8]>, i| {
            let p = sp.pos_at(i);
            (p.line, p.column)
        };
        // Forward from the last asked, then back before it, then on again.
        assert_eq!(at(&sp, 1), (1, 2));
        assert_eq!(at(&sp, 4), (2, 2));
        assert_eq!(at(&sp, 7), (4, 1));
        assert_eq!(at(&sp, 2), (1, 3));
        assert_eq!(at(&sp, 8), (4, 2));
        assert_eq!(at(&sp, 8), (4, 2));
    }
}
