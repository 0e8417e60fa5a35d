//! Opening input files: plain or gzip (by magic bytes, whatever the
//! extension), with a byte count for progress. A leaf: it knows no formats.

use std::fs::File;
use std::io::{BufReader, Chain, Cursor, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::MultiGzDecoder;

use crate::error::{Error, Result};

const BUF: usize = 256 * 1024;

/// A trace file's bytes, decompressed when needed. Readers take large reads
/// into buffers of their own, so a plain file is read straight into them (a
/// `BufReader` in between would copy every byte once more).
pub enum Source {
    Plain(Sniffed),
    // Boxed: the inflate state is large, and the enum is moved around.
    Gzip(Box<BufReader<MultiGzDecoder<BufReader<Sniffed>>>>),
}

/// The bytes read to sniff the format, then the rest of the file.
type Sniffed = Chain<Cursor<Vec<u8>>, File>;

impl Read for Source {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(r) => r.read(buf),
            Self::Gzip(r) => r.read(buf),
        }
    }
}

/// Opens a file for reading, transparently decompressing gzip (recognised by its
/// magic bytes `1f 8b`, whatever the extension says).
pub(crate) fn open(path: &Path) -> Result<Source> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut magic = Vec::with_capacity(2);
    (&mut file).take(2).read_to_end(&mut magic).map_err(io)?;
    let gz = magic == [0x1f, 0x8b];
    let r = Cursor::new(magic).chain(file);
    Ok(if gz {
        Source::Gzip(Box::new(BufReader::with_capacity(
            BUF,
            MultiGzDecoder::new(BufReader::with_capacity(BUF, r)),
        )))
    } else {
        Source::Plain(r)
    })
}

/// Counts read bytes so progress can be shown while files load. The shared
/// counter is updated once per MiB, not per read (reads can be small).
pub struct Counting<'a, R> {
    inner: R,
    bytes: &'a AtomicU64,
    pending: u64,
}

impl<'a, R> Counting<'a, R> {
    pub(crate) fn new(inner: R, bytes: &'a AtomicU64) -> Self {
        Self {
            inner,
            bytes,
            pending: 0,
        }
    }
}

impl<R: Read> Read for Counting<'_, R> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pending += n as u64;
        if self.pending >= 1 << 20 || n == 0 {
            self.bytes
                .fetch_add(std::mem::take(&mut self.pending), Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// A stream that fails once it yields more than a limit: a gzip that
/// expands without end, read a buffer at a time.
pub struct Capped<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::other(format!(
                "it decompresses to over {} MiB, more than 100 times its size",
                self.limit >> 20
            ))
        })?;
        Ok(n)
    }
}

impl<R> Drop for Counting<'_, R> {
    fn drop(&mut self) {
        self.bytes.fetch_add(self.pending, Ordering::Relaxed);
    }
}

/// One input file as a reader sees it: its path, the rank its name carries,
/// and its (decompressed, counted) bytes on demand.
pub struct FileIn<'a> {
    pub path: &'a Path,
    /// Rank parsed from the file name, if it carries one.
    pub rank: Option<u32>,
    /// Where decompressed bytes read are counted (load progress).
    pub counter: &'a AtomicU64,
    /// Keep the CPU ranges of launching threads (see `LoadOptions`).
    pub cpu_ranges: bool,
}

impl<'a> FileIn<'a> {
    /// Counts the whole file as read, for readers that open it themselves
    /// (SQLite).
    pub(crate) fn count_whole(&self) {
        let size = std::fs::metadata(self.path).map_or(0, |m| m.len());
        self.counter
            .fetch_add(size, std::sync::atomic::Ordering::Relaxed);
    }

    /// The file's bytes as a stream.
    pub fn stream(&self) -> Result<Counting<'a, Source>> {
        Ok(Counting::new(open(self.path)?, self.counter))
    }

    /// [`Self::stream`], and the file opened again beside it where the
    /// stream gives the bytes as they lie in it (no gzip): for readers that
    /// read parts of it again where they lie rather than hold them. Its
    /// offsets are the stream's.
    pub(crate) fn stream_and_file(&self) -> Result<(Counting<'a, Source>, Option<File>)> {
        let stream = self.stream()?;
        let file = match &stream.inner {
            Source::Plain(_) => Some(File::open(self.path).map_err(|source| Error::Io {
                path: self.path.to_owned(),
                source,
            })?),
            Source::Gzip(_) => None,
        };
        Ok((stream, file))
    }

    /// The file's bytes from the start, decompressed, failing past
    /// [`Self::limit`], for readers that read a file more than once rather
    /// than hold it: `counted` adds them to the load's progress (the reading
    /// that takes longest).
    pub(crate) fn reread(&self, counted: bool) -> Result<Capped<Box<dyn Read + 'a>>> {
        let inner: Box<dyn Read + 'a> = if counted {
            Box::new(self.stream()?)
        } else {
            Box::new(open(self.path)?)
        };
        let limit = self.limit()?;
        Ok(Capped {
            inner,
            left: limit,
            limit,
        })
    }

    /// The most a file is read to, decompressed: 100 times its size (and
    /// 64 MiB); real profiles compress 5-20 times, a crafted one a
    /// thousand.
    pub(crate) fn limit(&self) -> Result<u64> {
        let size = std::fs::metadata(self.path)
            .map_err(|source| Error::Io {
                path: self.path.to_owned(),
                source,
            })?
            .len();
        Ok(size.saturating_mul(100).max(64 << 20))
    }

    /// The whole file, decompressed, for readers that need it at once. A
    /// gzip that expands past [`Self::limit`] is refused.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>> {
        let io = |source| Error::Io {
            path: self.path.to_owned(),
            source,
        };
        let size = std::fs::metadata(self.path).map_err(io)?.len();
        let limit = self.limit()?;
        // Sized for the file at once (a compressed one grows from there):
        // growing from empty copied and faulted in each page about twice.
        let mut bytes = Vec::with_capacity(usize::try_from(size.min(limit)).unwrap_or(0));
        self.stream()?
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(Error::NotATrace {
                path: self.path.to_owned(),
                why: format!(
                    "decompresses to over {} MiB, more than 100 times its size: not read",
                    limit >> 20
                ),
            });
        }
        Ok(bytes)
    }
}
