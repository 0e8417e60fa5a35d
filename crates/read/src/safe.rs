//! Text from traces and file names on its way to a terminal. A kernel name
//! or file name can hold ESC, BEL or C1 controls (CSI, OSC) that would move
//! the cursor, retitle the window or worse; everything printed goes through
//! here and shows them escaped as `\u001b`, `\u009b` instead: readable, and
//! in JSON output the same escape JSON itself would use, so the document stays
//! valid and the name round-trips. The TUI does the same in its own way
//! (`human::fit`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Whether `c` must not reach a terminal raw: C0 and C1 controls and DEL,
/// but not line breaks and tabs.
fn unsafe_char(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `s` with control characters escaped; borrowed when there are none.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A writer that escapes control characters in what passes through it
/// (the CLI's stdout).
pub struct Safe<W>(pub W);

impl<W: Write> Write for Safe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Formatting writes whole `str` pieces, so a buffer is valid UTF-8;
        // anything else is shown as the lossy decoder would.
        match std::str::from_utf8(buf) {
            Ok(s) => self.0.write_all(text(s).as_bytes())?,
            Err(_) => self
                .0
                .write_all(text(&String::from_utf8_lossy(buf)).as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Prints a line to stderr with control characters escaped.
pub fn eprint_line(args: std::fmt::Arguments) {
    let line = args.to_string();
    let _ = writeln!(io::stderr().lock(), "{}", text(&line));
}

/// `eprintln!` for text that may hold names from traces or file names.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {
        $crate::safe::eprint_line(format_args!($($t)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_sent() {
        assert!(matches!(text("ncclKernel\tok\n"), Cow::Borrowed(_)));
        assert_eq!(
            text("k\x1b]0;pwned\x07\u{9b}2J"),
            "k\\u001b]0;pwned\\u0007\\u009b2J"
        );
        let mut out = Safe(Vec::new());
        let name = "a\x1b[31mred";
        write!(out, "name: {name}").unwrap();
        assert_eq!(String::from_utf8(out.0).unwrap(), "name: a\\u001b[31mred");
    }
}
