//! Protobuf's wire format read a field at a time from a stream, for messages
//! too large to hold: an XSpace plane's lines are a quarter of its file.
//! prost decodes what is held; this walks what is not, and copies the fields
//! a reader wants into a buffer for prost to decode.

use std::io::{BufRead, Read};

/// One base-128 varint of the stream; `None` at the end of the stream
/// before its first byte.
pub(crate) fn varint(r: &mut impl BufRead) -> std::io::Result<Option<u64>> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = match r.fill_buf()?.first() {
            Some(&b) => b,
            None if shift == 0 => return Ok(None),
            None => return Err(std::io::ErrorKind::UnexpectedEof.into()),
        };
        r.consume(1);
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(Some(v));
        }
    }
    Err(std::io::Error::other("a varint longer than 10 bytes"))
}

/// What a field holds, as its wire type says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    Varint(u64),
    /// 8 or 4 bytes, already read: no field read here has them.
    Fixed,
    /// So many bytes, next in the stream: to be read, kept or skipped
    /// before the next field.
    Bytes(u64),
}

/// The fields of one message of `len` bytes, read from `r` one at a time.
pub(crate) struct Fields<R> {
    r: R,
    left: u64,
    len: u64,
}

impl<R: BufRead> Fields<R> {
    pub(crate) fn new(r: R, len: u64) -> Self {
        Self { r, left: len, len }
    }

    /// Where the next byte lies, from the message's start.
    pub(crate) fn at(&self) -> u64 {
        self.len - self.left
    }

    fn short() -> String {
        "a message ends inside a field".into()
    }

    fn varint(&mut self) -> Result<u64, String> {
        // Most varints lie whole in the buffer: decoded there, without a
        // call per byte.
        let buf = self.r.fill_buf().map_err(|e| e.to_string())?;
        let near = &buf[..buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX))];
        if let Some(end) = near.iter().take(10).position(|&b| b < 0x80) {
            let mut rest = &near[..=end];
            if let Ok(v) = prost::encoding::decode_varint(&mut rest) {
                self.r.consume(end + 1);
                self.left -= end as u64 + 1;
                return Ok(v);
            }
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            if self.left == 0 {
                return Err(Self::short());
            }
            let byte = match self.r.fill_buf().map_err(|e| e.to_string())?.first() {
                Some(&b) => b,
                None => return Err("the file ends inside a field".into()),
            };
            self.r.consume(1);
            self.left -= 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    /// The next field's number and value; `None` at the message's end. A
    /// [`Value::Bytes`] field's bytes are then to be read, kept or skipped.
    pub(crate) fn next(&mut self) -> Result<Option<(u64, Value)>, String> {
        if self.left == 0 {
            return Ok(None);
        }
        let key = self.varint()?;
        let (tag, wire) = (key >> 3, key & 7);
        // As prost refuses them: field numbers are 1 to 2^29 - 1.
        if key > u64::from(u32::MAX) || tag == 0 {
            return Err(format!("a field numbered {tag}, which no message has"));
        }
        let value = match wire {
            0 => Value::Varint(self.varint()?),
            1 | 5 => {
                self.skip(if wire == 1 { 8 } else { 4 })?;
                Value::Fixed
            }
            2 => {
                let n = self.varint()?;
                if n > self.left {
                    return Err(Self::short());
                }
                Value::Bytes(n)
            }
            w => return Err(format!("field {tag} of wire type {w}")),
        };
        Ok(Some((tag, value)))
    }

    /// The next `n` bytes as a message of their own, to be walked to its end
    /// before this one's next field.
    pub(crate) fn inner(&mut self, n: u64) -> Result<Fields<&mut R>, String> {
        if n > self.left {
            return Err(Self::short());
        }
        self.left -= n;
        Ok(Fields::new(&mut self.r, n))
    }

    /// Steps over `n` bytes.
    pub(crate) fn skip(&mut self, n: u64) -> Result<(), String> {
        if n > self.left {
            return Err(Self::short());
        }
        // Consumed where it lies in the buffer: copied out, an event's few
        // bytes cost more to move than to step over.
        let mut left = n;
        while left > 0 {
            let buf = self.r.fill_buf().map_err(|e| e.to_string())?;
            if buf.is_empty() {
                return Err("the file ends inside a field".into());
            }
            let k = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            self.r.consume(k);
            left -= k as u64;
        }
        self.left -= n;
        Ok(())
    }

    /// Reads `n` bytes into `buf`, after what it holds.
    pub(crate) fn read(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), String> {
        if n > self.left {
            return Err(Self::short());
        }
        let before = buf.len();
        (&mut self.r)
            .take(n)
            .read_to_end(buf)
            .map_err(|e| e.to_string())?;
        if ((buf.len() - before) as u64) < n {
            return Err("the file ends inside a field".into());
        }
        self.left -= n;
        Ok(())
    }

    /// Walks the message to its end, giving `f` each field's number and
    /// value, and a bytes field's bytes (empty for the others). Fields that
    /// lie whole in the stream's buffer are read there, a run at a time: a
    /// line's millions of events are a few bytes each.
    pub(crate) fn each(
        &mut self,
        mut f: impl FnMut(u64, Value, &[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut scratch = Vec::new();
        while self.left > 0 {
            let buf = self.r.fill_buf().map_err(|e| e.to_string())?;
            let held = &buf[..buf
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX))];
            let mut rest = held;
            while let Some((tag, value, bytes)) = whole_field(&mut rest) {
                f(tag, value, bytes)?;
            }
            let used = held.len() - rest.len();
            if used > 0 {
                self.r.consume(used);
                self.left -= used as u64;
                continue;
            }
            // A field across the buffer's end, or a damaged one (said so).
            let Some((tag, value)) = self.next()? else {
                break;
            };
            scratch.clear();
            if let Value::Bytes(n) = value {
                self.read(n, &mut scratch)?;
            }
            f(tag, value, &scratch)?;
        }
        Ok(())
    }

    /// Writes the field just read (`tag`, `value`) into `buf` as it was
    /// written, its bytes read from the stream: what prost then decodes
    /// of the fields kept.
    pub(crate) fn keep(&mut self, tag: u64, value: Value, buf: &mut Vec<u8>) -> Result<(), String> {
        written(tag, value, buf)?;
        if let Value::Bytes(n) = value {
            self.read(n, buf)?;
        }
        Ok(())
    }
}

/// [`Fields::keep`] of a field whose `bytes` were read (see [`Fields::each`]).
pub(crate) fn keep(tag: u64, value: Value, bytes: &[u8], buf: &mut Vec<u8>) -> Result<(), String> {
    written(tag, value, buf)?;
    buf.extend_from_slice(bytes);
    Ok(())
}

/// Writes a field's key, and its value or a bytes field's length, into
/// `buf`. Fixed fields are not read here, and not kept.
fn written(tag: u64, value: Value, buf: &mut Vec<u8>) -> Result<(), String> {
    use prost::encoding::{encode_key, encode_varint, WireType};
    let tag = u32::try_from(tag).map_err(|_| format!("field number {tag}"))?;
    match value {
        Value::Varint(v) => {
            encode_key(tag, WireType::Varint, buf);
            encode_varint(v, buf);
        }
        Value::Fixed => {}
        Value::Bytes(n) => {
            encode_key(tag, WireType::LengthDelimited, buf);
            encode_varint(n, buf);
        }
    }
    Ok(())
}

/// The field at the start of `rest` when it lies whole there (its number,
/// value and a bytes field's bytes), `rest` then moved past it; `None`,
/// `rest` unmoved, where it does not, or is not one a message can hold.
fn whole_field<'a>(rest: &mut &'a [u8]) -> Option<(u64, Value, &'a [u8])> {
    use prost::encoding::decode_varint;
    let mut r = *rest;
    let key = decode_varint(&mut r).ok()?;
    if key > u64::from(u32::MAX) || key >> 3 == 0 {
        return None;
    }
    let (tag, value, bytes) = match key & 7 {
        0 => (
            key >> 3,
            Value::Varint(decode_varint(&mut r).ok()?),
            &[][..],
        ),
        w @ (1 | 5) => {
            r = r.get(if w == 1 { 8 } else { 4 }..)?;
            (key >> 3, Value::Fixed, &[][..])
        }
        2 => {
            let n = decode_varint(&mut r).ok()?;
            let bytes = r.get(..usize::try_from(n).ok()?)?;
            r = &r[bytes.len()..];
            (key >> 3, Value::Bytes(n), bytes)
        }
        _ => return None,
    };
    *rest = r;
    Some((tag, value, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields of every wire type are stepped over or given; a field cut
    /// short, or one longer than its message, is an error.
    #[test]
    fn fields_of_every_wire_type() {
        // 1: varint 300; 2: fixed64; 3: bytes "ab"; 4: fixed32; 3: bytes "c".
        let msg = [
            0x08, 0xac, 0x02, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 2, b'a', b'b', 0x25, 1, 2, 3, 4,
            0x1a, 1, b'c',
        ];
        let walk = |msg: &[u8], len: u64| -> Result<Vec<(u64, Value, Vec<u8>)>, String> {
            let mut f = Fields::new(msg, len);
            let mut out = Vec::new();
            while let Some((tag, v)) = f.next()? {
                let mut bytes = Vec::new();
                if let Value::Bytes(n) = v {
                    f.read(n, &mut bytes)?;
                }
                out.push((tag, v, bytes));
            }
            Ok(out)
        };
        let got = walk(&msg, msg.len() as u64).unwrap();
        assert_eq!(
            got,
            [
                (1, Value::Varint(300), vec![]),
                (2, Value::Fixed, vec![]),
                (3, Value::Bytes(2), b"ab".to_vec()),
                (4, Value::Fixed, vec![]),
                (3, Value::Bytes(1), b"c".to_vec()),
            ]
        );
        for cut in [2, 5, 14, 19] {
            assert!(walk(&msg[..cut], msg.len() as u64).is_err(), "cut at {cut}");
            // A message shorter than its fields.
            assert!(walk(&msg, cut as u64).is_err(), "ends at {cut}");
        }
        // Wire type 3 (a group): in no XSpace.
        assert!(walk(&[0x0b], 1).unwrap_err().contains("wire type 3"));
        // Field 0, and a key past 32 bits, as prost refuses them (writing
        // them back would fail).
        assert!(walk(&[0x02, 0x00], 2).unwrap_err().contains("numbered 0"));
        let far = [0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
        assert!(walk(&far, 6).unwrap_err().contains("no message has"));
        // Kept fields are written back as they were; `at` counts from the
        // message's start.
        let mut f = Fields::new(&msg[..], msg.len() as u64);
        let mut kept = Vec::new();
        while let Some((tag, v)) = f.next().unwrap() {
            match (tag, v) {
                (3, Value::Bytes(n)) if n == 2 => {
                    assert_eq!(f.at(), 14);
                    f.skip(n).unwrap();
                }
                (1 | 3, v) => f.keep(tag, v, &mut kept).unwrap(),
                _ => {}
            }
        }
        assert_eq!(kept, [0x08, 0xac, 0x02, 0x1a, 1, b'c']);
    }
}
