//! How far a long job has got, readable from another thread while it runs
//! (loading a run, `summarize`), and the line that shows it on a terminal.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Files done of the total, and the bytes read so far.
#[derive(Debug, Default)]
pub struct Progress {
    pub files_total: AtomicUsize,
    pub files_done: AtomicUsize,
    /// Uncompressed bytes parsed so far.
    pub bytes: AtomicU64,
}

impl Progress {
    /// One line: `what [#####.....] 3/8 files, 1.2 GB`.
    pub(crate) fn line(&self, what: &str) -> String {
        let total = self.files_total.load(Ordering::Relaxed);
        let done = self.files_done.load(Ordering::Relaxed);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let width = 30;
        let filled = (done * width).checked_div(total).unwrap_or(0).min(width);
        format!(
            "{what} [{}{}] {done}/{total} files, {}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            crate::human::bytes(bytes)
        )
    }

    /// Redraws [`Progress::line`] on stderr every 100 ms until `finished`
    /// says so, then erases it. For a terminal only: the caller checks.
    pub fn show_until(&self, what: &str, finished: impl Fn() -> bool) {
        let mut err = std::io::stderr();
        while !finished() {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let _ = write!(err, "\r\x1b[K{}", self.line(what));
            let _ = err.flush();
        }
        let _ = write!(err, "\r\x1b[K");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_fills_with_the_files_done() {
        let p = Progress::default();
        assert_eq!(
            p.line("loading"),
            "loading [..............................] 0/0 files, 0 B"
        );
        p.files_total.store(4, Ordering::Relaxed);
        p.files_done.store(1, Ordering::Relaxed);
        p.bytes.store(1_500_000, Ordering::Relaxed);
        assert_eq!(
            p.line("summarizing"),
            "summarizing [#######.......................] 1/4 files, 1.50 MB"
        );
    }
}
