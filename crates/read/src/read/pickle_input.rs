//! A pickle's bytes as the bounds pass and the decoder read them: an opcode
//! and its argument at a time, from a slice (borrowed as it is) or a stream
//! (read a buffer at a time, so that a large file is never held whole).

use std::borrow::Cow;
use std::io::Read;

/// Read at a time: small enough that a stream is never held, large enough
/// that a read is rare.
const CHUNK: usize = 64 << 10;

pub(crate) struct Input<'s, R> {
    r: R,
    /// Bytes read in, `buf[pos..len]` not yet handed out; a slice's bytes
    /// are borrowed as they are, all of them read in.
    buf: Cow<'s, [u8]>,
    pos: usize,
    len: usize,
    /// Bytes handed out before `buf[0]`.
    base: u64,
}

fn ends() -> String {
    "it ends inside an opcode".to_owned()
}

fn io(e: std::io::Error) -> String {
    format!("reading it failed: {e}")
}

impl<'s> Input<'s, std::io::Empty> {
    pub(crate) fn slice(bytes: &'s [u8]) -> Self {
        Input {
            r: std::io::empty(),
            buf: Cow::Borrowed(bytes),
            pos: 0,
            len: bytes.len(),
            base: 0,
        }
    }
}

impl<R: Read> Input<'_, R> {
    pub(crate) fn new(r: R) -> Self {
        Input {
            r,
            buf: Cow::Owned(vec![0; CHUNK]),
            pos: 0,
            len: 0,
            base: 0,
        }
    }

    /// Bytes read so far: the offset of the next one.
    #[inline]
    pub(crate) fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes `n` bytes (or all that are left, if fewer) ready at `pos`;
    /// whether there are `n`. The buffer grows only as bytes arrive, so a
    /// length that claims more than the stream holds costs what it holds.
    #[cold]
    fn fill(&mut self, n: usize) -> Result<bool, String> {
        let Cow::Owned(buf) = &mut self.buf else {
            return Ok(self.len - self.pos >= n);
        };
        buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        while self.len < n {
            if self.len == buf.len() {
                let more = buf.len().min(n - self.len).max(CHUNK);
                buf.resize(buf.len() + more, 0);
            }
            let k = loop {
                match self.r.read(&mut buf[self.len..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r.map_err(io)?,
                }
            };
            if k == 0 {
                return Ok(false);
            }
            self.len += k;
        }
        Ok(true)
    }

    /// The next byte; none at the end.
    #[inline]
    pub(crate) fn byte(&mut self) -> Result<Option<u8>, String> {
        if self.pos == self.len && !self.fill(1)? {
            return Ok(None);
        }
        self.pos += 1;
        Ok(Some(self.buf[self.pos - 1]))
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.len - self.pos < n && !self.fill(n)? {
            return Err(ends());
        }
        self.pos += n;
        Ok(&self.buf[self.pos - n..self.pos])
    }

    /// Steps over the next `n` bytes.
    pub(crate) fn skip(&mut self, mut n: u64) -> Result<(), String> {
        loop {
            let here = (self.len - self.pos) as u64;
            if n <= here {
                self.pos += n as usize;
                return Ok(());
            }
            n -= here;
            self.pos = self.len;
            if !self.fill(1)? {
                return Err(ends());
            }
        }
    }

    /// The bytes up to the next newline, which is stepped over.
    pub(crate) fn line(&mut self) -> Result<&[u8], String> {
        let mut from = self.pos;
        let i = loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[from..self.len]) {
                break from + i;
            }
            let seen = self.len - self.pos;
            if !self.fill(seen + 1)? {
                return Err(ends());
            }
            from = self.pos + seen;
        };
        let start = self.pos;
        self.pos = i + 1;
        Ok(&self.buf[start..i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments across the ends of a small buffer read as from a slice.
    #[test]
    fn arguments_across_buffers_read_as_from_a_slice() {
        let bytes = b"abcdefgh\nijklmnop\nqrstuvwxyz";
        let read = |mut i: Input<&mut dyn Read>| {
            let mut got = Vec::new();
            got.push(vec![i.byte().unwrap().unwrap()]);
            got.push(i.take(5).unwrap().to_vec());
            got.push(i.line().unwrap().to_vec());
            i.skip(3).unwrap();
            got.push(i.line().unwrap().to_vec());
            got.push(i.take(4).unwrap().to_vec());
            assert_eq!(i.at(), 22);
            assert_eq!(i.take(7).unwrap_err(), ends());
            got
        };
        let whole = read(Input::new(&mut &bytes[..]));
        let mut borrowed = Input::slice(bytes);
        assert_eq!(borrowed.take(9).unwrap(), b"abcdefgh\n");
        assert_eq!(borrowed.line().unwrap(), b"ijklmnop");
        assert_eq!(borrowed.take(11).unwrap_err(), ends());
        assert_eq!(borrowed.take(10).unwrap(), b"qrstuvwxyz");
        assert_eq!(borrowed.byte(), Ok(None));
        // A reader that hands out 3 bytes at a time, and a buffer smaller
        // than an argument.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(3).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut trickle = Trickle(bytes);
        let mut small = Input::new(&mut trickle as &mut dyn Read);
        small.buf = Cow::Owned(vec![0; 4]);
        assert_eq!(read(small), whole);
        assert_eq!(
            whole,
            [&b"a"[..], b"bcdef", b"gh", b"lmnop", b"qrst"].map(<[u8]>::to_vec)
        );
    }
}
