//! Errors that name the file and say what is wrong with it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not valid JSON at {at}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        at: String,
        msg: String,
    },
    #[error("{}: {why}", path.display())]
    NotATrace { path: PathBuf, why: String },
    #[error("{}: {why}", path.display())]
    Unsupported { path: PathBuf, why: String },
    /// Raised for the directory the caller asked to load, which its context names.
    #[error("no profiler traces found ({detail})")]
    NoTraces { dir: PathBuf, detail: String },
    #[error("{}: iteration {wanted} not found; available: {available}", dir.display())]
    IterationNotFound {
        dir: PathBuf,
        wanted: u32,
        available: String,
    },
    #[error(
        "rank {rank} appears in both {} and {}: these files come from different runs or iterations; \
         point --trace at one run's files",
        first.display(),
        second.display()
    )]
    MixedRuns {
        rank: u32,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(
        "{} and {} are both iteration {k}; point --trace at the one to read",
        first.display(),
        second.display()
    )]
    TwoIterations {
        k: u32,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{}: run {wanted} not found; the runs there: {available}", dir.display())]
    RunNotFound {
        dir: PathBuf,
        wanted: u32,
        available: String,
    },
    #[error("{}: {why}", path.display())]
    BadConfig { path: PathBuf, why: String },
    /// An output (an export, a saved view) could not be written.
    #[error("{}: {why}", path.display())]
    Output { path: PathBuf, why: String },
    /// An input's error as a summary recorded it (`ccl-bench summarize`),
    /// replayed word for word.
    #[error("{text}")]
    Recorded { text: String },
    #[error("the traces disagree on the world size ({detail}): they come from different runs")]
    MixedWorldSize { detail: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, each cause once: our errors already
/// quote their source (`path: No such file or directory`), which `{:#}` would
/// repeat after them.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(Error::Io {
            path: "/x/rank0.json".into(),
            source: io,
        })
        .context("cannot load /x");
        assert_eq!(one_line(&e), "cannot load /x: /x/rank0.json: No such file");
    }
}
