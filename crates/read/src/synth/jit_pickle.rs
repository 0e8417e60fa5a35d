//! Pickles laid out byte for byte as PyTorch's C++ pickler
//! (`torch::jit::Pickler`, protocol 2, aggregates untagged) writes a Flight
//! Recorder dump: each distinct string written once and named again by a
//! memo `BINGET`, a container held in more than one place (a stack frame
//! shared by many entries) written once and then reused, integers in the
//! smallest of `BININT1`/`BININT2`/`BININT`/`LONG1`.
//!
//! Why not serde-pickle: it writes every string and shared value out in
//! full, so its dumps are 2-4x larger than PyTorch's and cost a reader a
//! different amount of work (strings to validate, frames to build).

use std::collections::HashMap;
use std::rc::Rc;

/// A value to pickle; `Shared` is one object held in several places
/// (PyTorch memoizes such a value by pointer).
#[derive(Debug, Clone)]
pub enum P {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<P>),
    Tuple(Vec<P>),
    Dict(Vec<(P, P)>),
    Shared(Rc<P>),
}

impl P {
    pub fn str(s: impl Into<String>) -> Self {
        Self::Str(s.into())
    }

    pub fn opt(v: Option<i64>) -> Self {
        v.map_or(Self::None, Self::Int)
    }

    /// A dict with string keys, in the given order.
    pub fn dict<'k>(pairs: impl IntoIterator<Item = (&'k str, P)>) -> Self {
        Self::Dict(pairs.into_iter().map(|(k, v)| (P::str(k), v)).collect())
    }
}

/// `v` as a protocol-2 pickle.
pub fn to_vec(v: &P) -> Vec<u8> {
    let mut w = Writer::default();
    w.out.extend_from_slice(&[0x80, 2]);
    w.push(v);
    w.out.push(b'.');
    w.out
}

/// `v` laid out as Python's own pickler writes it (`pickle.dump`, as
/// `torch.cuda.memory._dump_snapshot` does): every list and dict memoized as
/// soon as it is made, before its items, and its items added in batches of
/// 1,000 (`APPENDS`/`SETITEMS` after a mark; a batch of one without).
pub fn to_vec_as_python(v: &P) -> Vec<u8> {
    let mut w = Writer {
        python: true,
        ..Writer::default()
    };
    w.out.extend_from_slice(&[0x80, 2]);
    w.push(v);
    w.out.push(b'.');
    w.out
}

#[derive(Default)]
struct Writer {
    /// Python's layout ([`to_vec_as_python`]).
    python: bool,
    out: Vec<u8>,
    strings: HashMap<String, u32>,
    shared: HashMap<*const P, u32>,
    next: u32,
}

impl Writer {
    fn put(&mut self) -> u32 {
        match u8::try_from(self.next) {
            Ok(k) => self.out.extend_from_slice(&[b'q', k]),
            Err(_) => {
                self.out.push(b'r');
                self.out.extend_from_slice(&self.next.to_le_bytes());
            }
        }
        self.next += 1;
        self.next - 1
    }

    fn get(&mut self, k: u32) {
        match u8::try_from(k) {
            Ok(k) => self.out.extend_from_slice(&[b'h', k]),
            Err(_) => {
                self.out.push(b'j');
                self.out.extend_from_slice(&k.to_le_bytes());
            }
        }
    }

    fn push(&mut self, v: &P) {
        match v {
            P::None => self.out.push(b'N'),
            P::Bool(b) => self.out.push(if *b { 0x88 } else { 0x89 }),
            P::Int(n) => self.int(*n),
            P::Float(f) => {
                self.out.push(b'G');
                self.out.extend_from_slice(&f.to_be_bytes());
            }
            P::Str(s) => match self.strings.get(s) {
                Some(&k) => self.get(k),
                None => {
                    self.out.push(b'X');
                    let len = u32::try_from(s.len()).expect("a string under 4 GiB");
                    self.out.extend_from_slice(&len.to_le_bytes());
                    self.out.extend_from_slice(s.as_bytes());
                    let k = self.put();
                    self.strings.insert(s.clone(), k);
                }
            },
            P::List(items) if self.python => {
                self.out.push(b']');
                self.put();
                for batch in items.chunks(1000) {
                    if let [one] = batch {
                        self.push(one);
                        self.out.push(b'a');
                    } else {
                        self.out.push(b'(');
                        batch.iter().for_each(|x| self.push(x));
                        self.out.push(b'e');
                    }
                }
            }
            P::Dict(pairs) if self.python => {
                self.out.push(b'}');
                self.put();
                for batch in pairs.chunks(1000) {
                    if batch.len() > 1 {
                        self.out.push(b'(');
                    }
                    for (k, x) in batch {
                        self.push(k);
                        self.push(x);
                    }
                    self.out.push(if batch.len() > 1 { b'u' } else { b's' });
                }
            }
            // An empty container still gets its MARK and APPENDS/SETITEMS.
            P::List(items) => {
                self.out.extend_from_slice(b"](");
                items.iter().for_each(|x| self.push(x));
                self.out.push(b'e');
            }
            P::Tuple(items) => match items.len() {
                0 => self.out.push(b')'),
                n @ 1..=3 => {
                    items.iter().for_each(|x| self.push(x));
                    self.out.push(0x84 + n as u8);
                }
                _ => {
                    self.out.push(b'(');
                    items.iter().for_each(|x| self.push(x));
                    self.out.push(b't');
                }
            },
            P::Dict(pairs) => {
                self.out.extend_from_slice(b"}(");
                for (k, x) in pairs {
                    self.push(k);
                    self.push(x);
                }
                self.out.push(b'u');
            }
            P::Shared(rc) if Rc::strong_count(rc) > 1 => {
                let ptr = Rc::as_ptr(rc);
                match self.shared.get(&ptr) {
                    Some(&k) => self.get(k),
                    // Python memoizes a list or dict before its items.
                    None if self.python && matches!(**rc, P::List(_) | P::Dict(_)) => {
                        self.shared.insert(ptr, self.next);
                        self.push(rc);
                    }
                    None => {
                        self.push(rc);
                        let k = self.put();
                        self.shared.insert(ptr, k);
                    }
                }
            }
            P::Shared(rc) => self.push(rc),
        }
    }

    fn int(&mut self, n: i64) {
        if let Ok(b) = u8::try_from(n) {
            self.out.extend_from_slice(&[b'K', b]);
        } else if let Ok(h) = u16::try_from(n) {
            self.out.push(b'M');
            self.out.extend_from_slice(&h.to_le_bytes());
        } else if let Ok(i) = i32::try_from(n) {
            self.out.push(b'J');
            self.out.extend_from_slice(&i.to_le_bytes());
        } else {
            self.out.extend_from_slice(&[0x8a, 8]);
            self.out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_shared_values_are_written_once() {
        let frame = Rc::new(P::dict([("line", P::Int(7))]));
        let v = P::List(vec![
            P::str("a"),
            P::str("a"),
            P::Shared(frame.clone()),
            P::Shared(frame),
        ]);
        let got = to_vec(&v);
        let mut expect = b"\x80\x02](".to_vec();
        expect.extend_from_slice(b"X\x01\x00\x00\x00aq\x00"); // "a", memo 0
        expect.extend_from_slice(b"h\x00"); // "a" again
        expect.extend_from_slice(b"}(X\x04\x00\x00\x00lineq\x01K\x07u"); // the frame
        expect.extend_from_slice(b"q\x02"); // memoized as 2
        expect.extend_from_slice(b"h\x02"); // reused
        expect.extend_from_slice(b"e.");
        assert_eq!(got, expect);
    }

    #[test]
    fn integers_take_the_smallest_opcode() {
        let enc = |n| to_vec(&P::Int(n))[2..].to_vec();
        assert_eq!(enc(255), b"K\xff.");
        assert_eq!(enc(256), b"M\x00\x01.");
        assert_eq!(enc(-1), b"J\xff\xff\xff\xff.");
        assert_eq!(enc(1 << 40), b"\x8a\x08\x00\x00\x00\x00\x00\x01\x00\x00.");
    }

    #[test]
    fn memo_past_255_uses_the_long_forms() {
        let strings: Vec<P> = (0..257).map(|i| P::str(i.to_string())).collect();
        let mut items = strings.clone();
        items.push(P::str("256"));
        let got = to_vec(&P::List(items));
        assert!(got.windows(5).any(|w| w == b"r\x00\x01\x00\x00"));
        assert!(got.ends_with(b"j\x00\x01\x00\x00e."));
    }
}
