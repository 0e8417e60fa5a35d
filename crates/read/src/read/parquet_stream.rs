//! A Parquet file read from a stream that only goes forward (an archive's
//! member, inflated as it is read), without holding the file: its footer
//! from a first pass that keeps only the last bytes, then a row group at a
//! time from a second. Writers put a row group's column chunks together,
//! row groups in order (pyarrow: 1 Mi rows each), so the second pass never
//! goes back. A file laid out otherwise is held whole.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};

/// The file's bytes from its start, as often as asked.
pub(crate) trait Reopen {
    fn open(&mut self) -> std::io::Result<Box<dyn Read + '_>>;
}

impl Reopen for &[u8] {
    fn open(&mut self) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(*self))
    }
}

/// Bytes `at..` of a file of `len` bytes: what a reader of the row groups
/// that lie there asks for. Anything else is an error, never a read.
#[derive(Clone)]
pub(crate) struct Window {
    len: u64,
    at: u64,
    bytes: Bytes,
}

impl Window {
    fn slice(&self, start: u64, n: u64) -> parquet::errors::Result<Bytes> {
        let outside = || ParquetError::General(format!("bytes {start}+{n} outside the part read"));
        let from = start.checked_sub(self.at).ok_or_else(outside)?;
        let to = from.checked_add(n).ok_or_else(outside)?;
        if to > self.bytes.len() as u64 {
            return Err(outside());
        }
        Ok(self.bytes.slice(from as usize..to as usize))
    }
}

impl Length for Window {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Window {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let left = (self.at + self.bytes.len() as u64).saturating_sub(start);
        Ok(bytes::Buf::reader(self.slice(start, left)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length as u64)
    }
}

/// The most of a file's end kept to find its footer in: a footer states
/// every column chunk of every row group, a few hundred bytes each.
const TAIL: usize = 8 << 20;

/// How a file of at most `limit` bytes is read.
pub(crate) enum Table {
    /// Whole, held.
    Held(Window),
    /// A row group at a time: its footer, and where each row group lies,
    /// in file order.
    Groups {
        meta: Arc<ParquetMetaData>,
        groups: Vec<(usize, u64, u64)>,
        len: u64,
    },
}

/// Reads `file` once to its end, keeping its footer; a file whose footer
/// is larger than [`TAIL`], or whose row groups are not laid out one after
/// another, is read again and held (so is one of at most `hold` bytes).
pub(crate) fn open(file: &mut dyn Reopen, limit: u64, hold: u64) -> Result<Table, String> {
    let too_big = |n: u64| format!("unpacks to {n} bytes or more, over the {limit} read");
    let mut r = file
        .open()
        .map_err(|e| e.to_string())?
        .take(limit.saturating_add(1));
    let (mut tail, mut len) = (Vec::new(), 0u64);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = r.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        len += n as u64;
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > 2 * TAIL {
            tail.drain(..tail.len() - TAIL);
        }
    }
    drop(r);
    if len > limit {
        return Err(too_big(len));
    }
    if len <= hold {
        // Up to twice `TAIL`, what was kept is the whole file.
        if tail.len() as u64 == len {
            return Ok(Table::Held(Window {
                len,
                at: 0,
                bytes: Bytes::from(tail),
            }));
        }
        return held(file, len);
    }
    let groups = footer(&tail).and_then(|meta| {
        let groups = laid_out(&meta, len)?;
        Some((meta, groups))
    });
    drop(tail);
    match groups {
        Some((meta, groups)) => Ok(Table::Groups {
            meta: Arc::new(meta),
            groups,
            len,
        }),
        None => held(file, len),
    }
}

/// The file read again, whole.
fn held(file: &mut dyn Reopen, len: u64) -> Result<Table, String> {
    let mut bytes = Vec::new();
    let _ = bytes.try_reserve_exact(usize::try_from(len).unwrap_or(0));
    let mut r = file.open().map_err(|e| e.to_string())?.take(len);
    r.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 != len {
        return Err("it changed while it was read".into());
    }
    Ok(Table::Held(Window {
        len,
        at: 0,
        bytes: Bytes::from(bytes),
    }))
}

/// The footer that ends `tail`, when all of it is there.
fn footer(tail: &[u8]) -> Option<ParquetMetaData> {
    let end: &[u8; 8] = tail.get(tail.len().checked_sub(8)?..)?.try_into().ok()?;
    let footer = FooterTail::try_new(end).ok()?;
    if footer.is_encrypted_footer() {
        return None;
    }
    let from = tail
        .len()
        .checked_sub(8)?
        .checked_sub(footer.metadata_length())?;
    ParquetMetaDataReader::decode_metadata(&tail[from..tail.len() - 8]).ok()
}

/// Where each row group lies, `(index, from, to)`, in file order, when
/// each one's column chunks lie together within `len` bytes and after the
/// one before.
fn laid_out(meta: &ParquetMetaData, len: u64) -> Option<Vec<(usize, u64, u64)>> {
    let mut groups = Vec::new();
    for (i, rg) in meta.row_groups().iter().enumerate() {
        let (mut from, mut to) = (u64::MAX, 0u64);
        for c in rg.columns() {
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let start = u64::try_from(start).ok()?;
            let end = start.checked_add(u64::try_from(c.compressed_size()).ok()?)?;
            (from, to) = (from.min(start), to.max(end));
        }
        if from < to {
            groups.push((i, from, to));
        }
    }
    groups.sort_by_key(|g| g.1);
    let apart = groups.windows(2).all(|w| w[0].2 <= w[1].1);
    (apart && groups.last().is_none_or(|g| g.2 <= len)).then_some(groups)
}

/// Gives `f` each row group of a [`Table::Groups`] file, in file order,
/// as the bytes it lies in (read from a second pass over `file`), until
/// `f` says to stop.
pub(crate) fn each_group<E>(
    file: &mut dyn Reopen,
    (groups, len): (&[(usize, u64, u64)], u64),
    mut f: impl FnMut(usize, Window) -> Result<bool, E>,
    said: impl Fn(String) -> E,
) -> Result<(), E> {
    let mut r = file.open().map_err(|e| said(e.to_string()))?;
    let mut at = 0u64;
    for &(i, from, to) in groups {
        let skip = from - at;
        let skipped = std::io::copy(&mut (&mut r).take(skip), &mut std::io::sink())
            .map_err(|e| said(e.to_string()))?;
        let mut bytes = Vec::new();
        let _ = bytes.try_reserve_exact(usize::try_from(to - from).unwrap_or(0));
        (&mut r)
            .take(to - from)
            .read_to_end(&mut bytes)
            .map_err(|e| said(e.to_string()))?;
        if skipped < skip || (bytes.len() as u64) < to - from {
            return Err(said("it changed while it was read".into()));
        }
        at = to;
        let window = Window {
            len,
            at: from,
            bytes: Bytes::from(bytes),
        };
        if !f(i, window)? {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::nsys_jax::{trace_table_in, Layout, ProjRange};

    fn table(rows: i64, group: usize) -> Vec<u8> {
        let rows: Vec<ProjRange> = (0..rows)
            .map(|i| ProjRange {
                pid: 1,
                tid: 1,
                id: i + 1,
                parent: None,
                name: format!("Thunk:#hlo_op=fusion.{i}#"),
                start: 10 * i,
                end: 10 * i + 5,
                orig: None,
            })
            .collect();
        trace_table_in(&rows, Layout::Projected, group)
    }

    /// Row groups are found in file order, each within the file; a file
    /// held when small enough, or past its limit refused.
    #[test]
    fn row_groups_where_they_lie() {
        let bytes = table(10, 3);
        let len = bytes.len() as u64;
        let Table::Groups { meta, groups, .. } = open(&mut &bytes[..], len, 0).unwrap() else {
            panic!("read whole");
        };
        assert_eq!(meta.num_row_groups(), 4);
        assert_eq!(groups.iter().map(|g| g.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(groups.windows(2).all(|w| w[0].2 <= w[1].1));
        assert!(groups.iter().all(|g| g.1 < g.2 && g.2 <= len));
        // Each group's bytes are where its footer says.
        let mut seen = Vec::new();
        each_group(
            &mut &bytes[..],
            (&groups, len),
            |i, w| {
                seen.push((i, w.at, w.at + w.bytes.len() as u64));
                assert_eq!(&w.bytes[..], &bytes[w.at as usize..][..w.bytes.len()]);
                Ok::<_, String>(true)
            },
            |e| e,
        )
        .unwrap();
        assert_eq!(seen, groups);
        assert!(matches!(
            open(&mut &bytes[..], len, len),
            Ok(Table::Held(_))
        ));
        assert!(matches!(open(&mut &bytes[..], len - 1, 0), Err(e) if e.contains("over the")));
        // A file cut short has no footer to find: held (and then refused by
        // the Parquet reader, which says why).
        let cut = &bytes[..bytes.len() - 3];
        assert!(matches!(open(&mut &cut[..], len, 0), Ok(Table::Held(_))));
        // Outside the bytes read, a window reads nothing.
        let w = Window {
            len,
            at: 100,
            bytes: Bytes::from(vec![0u8; 10]),
        };
        assert!(w.get_bytes(99, 2).is_err());
        assert!(w.get_bytes(105, 6).is_err());
        assert_eq!(w.get_bytes(100, 10).unwrap().len(), 10);
    }
}
