//! A pickle decoded into plain values without copying: strings borrowed
//! from the input, containers in one arena, a memo `GET` a reference to the
//! container it names (as Python's unpickler shares it). Only data opcodes
//! are accepted; class references and calls (`GLOBAL`, `REDUCE`, ...) are
//! refused, so no pickle code can run.
//!
//! Why not serde-pickle, which the memory snapshot reader uses: it builds a
//! tree of owned values first and copies a value at each memo reuse, and on
//! Flight Recorder dumps (2,000 entries of ~25 values each per rank) it
//! decoded 20-30 MB/s per core, 4x slower than Python's `pickle.load`; a
//! dump folder of 256 ranks took 13.7 s on 2 cores (docs/internals.md).
//! Decoding is linear in the pickle's length (a reused value is a reference,
//! not a copy, and nothing recurses); reading the tree is bounded by the
//! tree itself (see [`Tree`]).

/// A decoded value, in 16 bytes (a snapshot decodes to tens of millions):
/// texts are indices into [`Tree::strs`] and [`Tree::raw`] (read them
/// with [`Tree::str`]), containers into [`Tree::spans`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum V {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(u32),
    Bytes(u32),
    /// A list, tuple or set.
    List(u32),
    Dict(u32),
}

const _: () = assert!(std::mem::size_of::<V>() == 16);

/// Where a container's items lie in [`Tree::items`]: `len` of them from
/// `start`, with room for `cap` before the next container's.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: usize,
    len: usize,
    cap: usize,
}

/// Every container's items in one vector (a dict's as key, value, key,
/// value), not one allocation per container: a Flight Recorder dump has
/// about ten containers per entry.
///
/// Reading it is bounded: a container the stream reuses (a memo `GET`)
/// costs its full size each time it is walked, so a small pickle can name
/// one large dict a million times. Each item handed out counts against
/// [`Tree::budget`]; once spent, containers read as empty and
/// [`Tree::within_budget`] says so.
#[derive(Debug)]
pub(crate) struct Tree<'a> {
    items: Vec<V>,
    spans: Vec<Span>,
    /// Each text opcode's string, borrowed from the input (a memo `GET`
    /// names the same one again).
    strs: Vec<&'a str>,
    /// Each bytes opcode's bytes.
    raw: Vec<&'a [u8]>,
    pub root: Option<V>,
    /// Items that may still be handed out.
    budget: std::cell::Cell<u64>,
    spent: std::cell::Cell<bool>,
}

/// Items handed out per byte of pickle (plus a floor for small files): a
/// Flight Recorder dump is read with fewer than one.
const ITEMS_PER_BYTE: u64 = 16;
const MIN_ITEMS: u64 = 1 << 20;

impl<'a> Tree<'a> {
    fn items(&self, i: u32) -> &[V] {
        let s = self.spans[i as usize];
        let left = self.budget.get();
        if s.len as u64 > left {
            self.spent.set(true);
            self.budget.set(0);
            return &[];
        }
        self.budget.set(left - s.len as u64);
        &self.items[s.start..s.start + s.len]
    }

    /// How many containers were decoded (their indices run below it).
    pub(crate) fn containers(&self) -> usize {
        self.spans.len()
    }

    /// Fails when reading the tree handed out more items than the pickle's
    /// size allows (a value reused over and over).
    pub(crate) fn within_budget(&self, bytes: usize) -> Result<(), String> {
        if self.spent.get() {
            return Err(format!(
                "it would decode to over {} values (a value reused over and over)",
                (bytes as u64).saturating_mul(ITEMS_PER_BYTE).max(MIN_ITEMS)
            ));
        }
        Ok(())
    }

    /// The items of a list (or tuple), empty for anything else.
    pub(crate) fn list(&self, v: V) -> &[V] {
        match v {
            V::List(i) => self.items(i),
            _ => &[],
        }
    }

    /// A dict's (key, value) pairs, none for anything else.
    pub(crate) fn pairs(&self, v: V) -> impl Iterator<Item = (V, V)> + '_ {
        let items: &[V] = match v {
            V::Dict(i) => self.items(i),
            _ => &[],
        };
        items.chunks_exact(2).map(|kv| (kv[0], kv[1]))
    }

    /// The value under a string key.
    pub(crate) fn get(&self, v: V, key: &str) -> Option<V> {
        self.pairs(v)
            .find(|(k, _)| matches!(k, V::Str(s) if self.strs[*s as usize] == key))
            .map(|(_, v)| v)
    }

    /// A text value's string (bytes that are UTF-8 too).
    pub(crate) fn str(&self, v: V) -> Option<&'a str> {
        match v {
            V::Str(i) => Some(self.strs[i as usize]),
            V::Bytes(i) => std::str::from_utf8(self.raw[i as usize]).ok(),
            _ => None,
        }
    }

    /// A bytes value's bytes.
    #[cfg(test)]
    fn bytes(&self, v: V) -> Option<&'a [u8]> {
        match v {
            V::Bytes(i) => Some(self.raw[i as usize]),
            _ => None,
        }
    }

    /// A new container holding `items`; its index.
    fn container(&mut self, items: impl Iterator<Item = V>) -> Result<u32, String> {
        let start = self.items.len();
        self.items.extend(items);
        let len = self.items.len() - start;
        self.spans.push(Span {
            start,
            len,
            cap: len,
        });
        u32::try_from(self.spans.len() - 1).map_err(|_| "over 2^32 containers".to_owned())
    }

    /// A new text value.
    fn text(&mut self, s: &'a str) -> Result<V, String> {
        let i = u32::try_from(self.strs.len()).map_err(|_| "over 2^32 texts".to_owned())?;
        self.strs.push(s);
        Ok(V::Str(i))
    }

    /// Adds `new` to container `i`: in its room, at the end if it is last,
    /// or else moved to the end with room to double (each item is copied a
    /// bounded number of times however the stream adds them).
    fn extend(&mut self, i: u32, new: &[V]) {
        let s = &mut self.spans[i as usize];
        if s.len + new.len() <= s.cap {
            let at = s.start + s.len;
            self.items[at..at + new.len()].copy_from_slice(new);
            s.len += new.len();
        } else if s.start + s.cap == self.items.len() {
            self.items.truncate(s.start + s.len);
            self.items.extend_from_slice(new);
            s.len += new.len();
            s.cap = s.len;
        } else {
            let start = self.items.len();
            let (old, len) = (s.start, s.len);
            let cap = (len + new.len()).max(2 * len);
            self.items.extend_from_within(old..old + len);
            self.items.extend_from_slice(new);
            self.items.resize(start + cap, V::None);
            *s = Span {
                start,
                len: len + new.len(),
                cap,
            };
        }
    }
}

impl V {
    pub(crate) fn int(self) -> Option<i64> {
        match self {
            V::Int(i) => Some(i),
            V::Bool(b) => Some(i64::from(b)),
            V::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(f as i64),
            _ => None,
        }
    }

    pub(crate) fn bool(self) -> Option<bool> {
        match self {
            V::Bool(b) => Some(b),
            V::Int(i) => Some(i != 0),
            _ => None,
        }
    }
}

/// The unpickler's stack: values, and marks as the positions they sit at
/// (a mark at `m` lies below `vals[m]`), so that values are stored and
/// copied without a wrapper.
struct Stack {
    vals: Vec<V>,
    marks: Vec<usize>,
}

impl Stack {
    fn push(&mut self, v: V) {
        self.vals.push(v);
    }

    /// Whether a mark sits above every value from `from` on.
    fn marked_above(&self, from: usize) -> bool {
        self.marks.last().is_some_and(|&m| m > from)
    }

    fn top(&self) -> Result<V, String> {
        match self.vals.last() {
            Some(v) if !self.marked_above(self.vals.len() - 1) => Ok(*v),
            _ => Err("a value was expected on the stack".into()),
        }
    }

    fn pop(&mut self) -> Result<V, String> {
        let v = self.top()?;
        self.vals.pop();
        Ok(v)
    }

    /// Where the values above the topmost mark start; the mark removed.
    fn pop_mark(&mut self) -> Result<usize, String> {
        self.marks
            .pop()
            .ok_or_else(|| "no mark on the stack".into())
    }

    /// Where the top `n` values start, if no mark lies among them.
    fn top_n(&self, n: usize) -> Result<usize, String> {
        let from = self
            .vals
            .len()
            .checked_sub(n)
            .ok_or("items the stack does not hold")?;
        if self.marked_above(from) {
            return Err("a mark among a container's items".into());
        }
        Ok(from)
    }
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Tree<'_>, String> {
    // Sized from the file (a dump holds about one item per 2-3 bytes):
    // growing by doubling copied and faulted in each item twice. Capped, so
    // that a large file does not reserve many times its size up front.
    decode_into(bytes, Vec::with_capacity((bytes.len() / 2).min(1 << 23)))
}

/// [`decode`] into an arena sized for `items` (what
/// [`super::pickle_budget::check`] counted), with room for the containers
/// moved as they grow: no copy of the whole arena as it doubles, which held
/// the old and the new at once (a 71 MB memory snapshot peaked at 1.1 GB,
/// 0.6 GB sized). Falls back to [`decode`]'s guess if that much cannot be
/// reserved.
pub(crate) fn decode_sized(bytes: &[u8], items: u64) -> Result<Tree<'_>, String> {
    let want = usize::try_from(items.saturating_add(items / 4)).unwrap_or(usize::MAX);
    let mut arena = Vec::new();
    if arena.try_reserve_exact(want).is_err() {
        return decode(bytes);
    }
    decode_into(bytes, arena)
}

fn decode_into(bytes: &[u8], items: Vec<V>) -> Result<Tree<'_>, String> {
    let mut t = Tree {
        items,
        spans: Vec::with_capacity((bytes.len() / 16).min(1 << 21)),
        strs: Vec::new(),
        raw: Vec::new(),
        root: None,
        budget: std::cell::Cell::new(
            (bytes.len() as u64)
                .saturating_mul(ITEMS_PER_BYTE)
                .max(MIN_ITEMS),
        ),
        spent: std::cell::Cell::new(false),
    };
    let mut st = Stack {
        vals: Vec::with_capacity(64),
        marks: Vec::new(),
    };
    let mut memo: Vec<Option<V>> = Vec::new();
    let mut at = 0usize;
    let ends = || "it ends inside an opcode".to_owned();
    macro_rules! take {
        ($n:expr) => {{
            let n: usize = $n;
            let s = bytes
                .get(at..at.checked_add(n).ok_or_else(ends)?)
                .ok_or_else(ends)?;
            at += n;
            s
        }};
    }
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
    fn text(b: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(b).map_err(|_| "a string that is not UTF-8".to_owned())
    }
    fn put(memo: &mut Vec<Option<V>>, key: usize, v: V) -> Result<(), String> {
        if key > 1 << 28 {
            return Err("a memo index out of range".into());
        }
        if memo.len() <= key {
            memo.resize(key + 1, None);
        }
        memo[key] = Some(v);
        Ok(())
    }
    // The values from `from` up as a new container, in place of them.
    fn contain(t: &mut Tree, st: &mut Stack, from: usize) -> Result<u32, String> {
        let i = t.container(st.vals[from..].iter().copied())?;
        st.vals.truncate(from);
        Ok(i)
    }
    let line = |at: &mut usize| -> Result<&[u8], String> {
        let rest = &bytes[*at..];
        let n = memchr::memchr(b'\n', rest).ok_or_else(ends)?;
        *at += n + 1;
        Ok(&rest[..n])
    };
    loop {
        let op = *bytes.get(at).ok_or("it ends before its STOP opcode")?;
        at += 1;
        match op {
            b'\x80' => at += 1,
            b'\x95' => at += 8,
            b'.' => {
                t.root = Some(st.pop()?);
                return Ok(t);
            }
            b'(' => st.marks.push(st.vals.len()),
            b'N' => st.push(V::None),
            b'\x88' => st.push(V::Bool(true)),
            b'\x89' => st.push(V::Bool(false)),
            b'K' => st.push(V::Int(i64::from(take!(1)[0]))),
            b'M' => st.push(V::Int(le(take!(2)) as i64)),
            b'J' => {
                let b = take!(4);
                st.push(V::Int(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))));
            }
            b'\x8a' | b'\x8b' => {
                let n = if op == b'\x8a' {
                    usize::from(take!(1)[0])
                } else {
                    le(take!(4)) as usize
                };
                let b = take!(n);
                if n > 8 {
                    return Err("an integer wider than 64 bits".into());
                }
                // Little-endian two's complement, sign-extended.
                let mut v = le(b) as i64;
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                st.push(V::Int(v));
            }
            b'G' => {
                let b = take!(8);
                st.push(V::Float(f64::from_be_bytes(b.try_into().expect("8 bytes"))));
            }
            b'I' | b'L' => {
                let l = text(line(&mut at)?)?.trim_end_matches('L');
                let v = match l {
                    "00" => V::Bool(false),
                    "01" => V::Bool(true),
                    _ => V::Int(l.parse().map_err(|_| format!("not an integer: {l:?}"))?),
                };
                st.push(v);
            }
            b'F' => {
                let l = text(line(&mut at)?)?;
                st.push(V::Float(
                    l.parse().map_err(|_| format!("not a float: {l:?}"))?,
                ));
            }
            b'X' | b'\x8c' | b'\x8d' => {
                let n = match op {
                    b'\x8c' => usize::from(take!(1)[0]),
                    b'X' => le(take!(4)) as usize,
                    _ => usize::try_from(le(take!(8))).map_err(|_| ends())?,
                };
                let s = text(take!(n))?;
                st.push(t.text(s)?);
            }
            b'V' => {
                let l = line(&mut at)?;
                st.push(t.text(text(l)?)?);
            }
            b'U' | b'T' | b'C' | b'B' | b'\x8e' => {
                let n = match op {
                    b'U' | b'C' => usize::from(take!(1)[0]),
                    b'\x8e' => usize::try_from(le(take!(8))).map_err(|_| ends())?,
                    _ => le(take!(4)) as usize,
                };
                let b = take!(n);
                let i = u32::try_from(t.raw.len()).map_err(|_| "over 2^32 bytes values")?;
                t.raw.push(b);
                st.push(V::Bytes(i));
            }
            b']' | b')' | b'\x8f' => {
                let i = t.container(std::iter::empty())?;
                st.push(V::List(i));
            }
            b'}' => {
                let i = t.container(std::iter::empty())?;
                st.push(V::Dict(i));
            }
            b'l' | b't' | b'\x91' => {
                let from = st.pop_mark()?;
                let i = contain(&mut t, &mut st, from)?;
                st.push(V::List(i));
            }
            b'd' => {
                let from = st.pop_mark()?;
                if !(st.vals.len() - from).is_multiple_of(2) {
                    return Err("a dict with a key but no value".into());
                }
                let i = contain(&mut t, &mut st, from)?;
                st.push(V::Dict(i));
            }
            b'\x85' | b'\x86' | b'\x87' => {
                let n = usize::from(op - b'\x84');
                let from = st
                    .top_n(n)
                    .map_err(|_| "a tuple of values the stack does not hold")?;
                let i = contain(&mut t, &mut st, from)?;
                st.push(V::List(i));
            }
            b'a' | b's' | b'e' | b'u' | b'\x90' => {
                // The items: the top one or two, or all above the mark.
                let from = match op {
                    b'a' => st.top_n(1)?,
                    b's' => st.top_n(2)?,
                    _ => st.pop_mark()?,
                };
                let dict = matches!(op, b's' | b'u');
                // The container is the value below the items, and no mark
                // may lie between them.
                let below = from.checked_sub(1);
                if below.is_some_and(|i| st.marked_above(i)) {
                    return Err("a mark between a container and its items".into());
                }
                let target = below.map(|i| st.vals[i]);
                let target = match target {
                    Some(V::List(i)) if !dict => i,
                    Some(V::Dict(i)) if dict => i,
                    _ => {
                        return Err("items added to something not a container of their kind".into())
                    }
                };
                if dict && !(st.vals.len() - from).is_multiple_of(2) {
                    return Err("a dict with a key but no value".into());
                }
                t.extend(target, &st.vals[from..]);
                st.vals.truncate(from);
            }
            b'q' => {
                let k = usize::from(take!(1)[0]);
                put(&mut memo, k, st.top()?)?;
            }
            b'r' => {
                let k = le(take!(4)) as usize;
                put(&mut memo, k, st.top()?)?;
            }
            b'p' => {
                let k = text(line(&mut at)?)?
                    .trim()
                    .parse()
                    .map_err(|_| "a bad memo key".to_owned())?;
                put(&mut memo, k, st.top()?)?;
            }
            b'\x94' => {
                let k = memo.len();
                put(&mut memo, k, st.top()?)?;
            }
            b'h' | b'j' | b'g' => {
                let k = match op {
                    b'h' => usize::from(take!(1)[0]),
                    b'j' => le(take!(4)) as usize,
                    _ => text(line(&mut at)?)?
                        .trim()
                        .parse()
                        .map_err(|_| "a bad memo key".to_owned())?,
                };
                let v = memo
                    .get(k)
                    .copied()
                    .flatten()
                    .ok_or("a memo reference to nothing")?;
                st.push(v);
            }
            b'0' => {
                // The top is a mark, or a value.
                if st.marks.last() == Some(&st.vals.len()) {
                    st.marks.pop();
                } else {
                    st.vals.pop();
                }
            }
            b'1' => {
                let m = st.pop_mark()?;
                st.vals.truncate(m);
            }
            b'2' => {
                if st.marks.last() == Some(&st.vals.len()) {
                    st.marks.push(st.vals.len());
                } else {
                    let top = st.top().map_err(|_| "DUP of an empty stack")?;
                    st.push(top);
                }
            }
            b'c' | b'i' | b'\x93' | b'R' | b'b' | b'\x81' | b'\x92' | b'o' | b'Q' | b'P' => {
                return Err(format!(
                    "it refers to Python classes or calls them (opcode 0x{op:02x} at byte {}); only plain data is read",
                    at - 1
                ));
            }
            other => return Err(format!("unknown opcode 0x{other:02x} at byte {}", at - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_data_with_shared_containers() {
        // pickle.dumps({"a": [1, -2, 3.5, None, True], "b": ("x", b"y"), "c": <the same list>}, 2)
        // with the list memoized (BINPUT 1) and reused (BINGET 1).
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01](K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00N\x88eq\x02X\x01\x00\x00\x00bX\x01\x00\x00\x00xC\x01y\x86X\x01\x00\x00\x00ch\x02u.";
        let t = decode(p).unwrap();
        let root = t.root.unwrap();
        let a = t.get(root, "a").unwrap();
        assert_eq!(
            t.list(a),
            &[V::Int(1), V::Int(-2), V::Float(3.5), V::None, V::Bool(true)]
        );
        assert_eq!(t.get(root, "c"), Some(a));
        let b = t.list(t.get(root, "b").unwrap());
        assert_eq!((t.str(b[0]), t.bytes(b[1])), (Some("x"), Some(&b"y"[..])));
        // LONG1: -1 in one byte, 2**40 in six.
        let t = decode(b"\x80\x02\x8a\x01\xff.").unwrap();
        assert_eq!(t.root, Some(V::Int(-1)));
        let t = decode(b"\x80\x02\x8a\x06\x00\x00\x00\x00\x00\x01.").unwrap();
        assert_eq!(t.root, Some(V::Int(1 << 40)));
    }

    #[test]
    fn items_added_in_batches_stay_in_order() {
        // A list filled in three batches, another container made between
        // the first two (so the list is moved), as Python's pickler batches
        // a long list: [1, 2, [], 3, 4, 5] with the inner list memo 1.
        let p = b"\x80\x02]q\x00(K\x01K\x02e]q\x01h\x00(h\x01K\x03eh\x00(K\x04eh\x00K\x05a0.";
        let t = decode(p).unwrap();
        let outer = t.root.unwrap();
        assert_eq!(
            t.list(outer),
            &[
                V::Int(1),
                V::Int(2),
                V::List(1),
                V::Int(3),
                V::Int(4),
                V::Int(5)
            ]
        );
        assert!(t.list(V::List(1)).is_empty());
        // A dict with its items set one pair at a time.
        let p = b"\x80\x02}q\x00X\x01\x00\x00\x00aK\x01sh\x00X\x01\x00\x00\x00bK\x02s0.";
        let t = decode(p).unwrap();
        let d = t.root.unwrap();
        assert_eq!(t.get(d, "a"), Some(V::Int(1)));
        assert_eq!(t.get(d, "b"), Some(V::Int(2)));
    }

    #[test]
    fn marks_are_kept_apart_from_values() {
        // POP of a mark, DUP of a value, POP_MARK dropping what is above.
        let t = decode(b"\x80\x02K\x07(02(K\x01K\x021\x86.").unwrap();
        assert_eq!(t.list(t.root.unwrap()), &[V::Int(7), V::Int(7)]);
        // A mark between a list and its item, a mark on top at the end.
        assert!(decode(b"\x80\x02](K\x01a.").unwrap_err().contains("mark"));
        assert!(decode(b"\x80\x02K\x01(.").unwrap_err().contains("value"));
    }

    #[test]
    fn reading_a_value_reused_over_and_over_is_bounded() {
        // One list of 1,000 items named 100,000 times: 10^8 items to walk
        // from a pickle of 0.2 MB, over 16 per byte.
        let mut p = b"\x80\x02](".to_vec();
        p.extend(std::iter::repeat_n(b'N', 1000));
        p.extend_from_slice(b"eq\x00](");
        p.extend(std::iter::repeat_n(*b"h\x00", 100_000).flatten());
        p.extend_from_slice(b"e.");
        let t = decode(&p).unwrap();
        let walked: usize = t
            .list(t.root.unwrap())
            .iter()
            .map(|&v| t.list(v).len())
            .sum();
        assert!(walked < 16 * p.len() + (1 << 20), "{walked}");
        assert!(t.within_budget(p.len()).unwrap_err().contains("reused"));
        // A plain pickle stays within it.
        let t = decode(b"\x80\x02](K\x01e.").unwrap();
        assert_eq!(t.list(t.root.unwrap()).len(), 1);
        assert_eq!(t.within_budget(8), Ok(()));
    }

    #[test]
    fn code_and_damage_are_refused() {
        let e = decode(b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00lsR.").unwrap_err();
        assert!(e.contains("Python classes"), "{e}");
        assert!(decode(b"\x80\x02]q\x00(K\x01")
            .unwrap_err()
            .contains("STOP"));
        assert!(decode(b"\x80\x02X\xff\xff\xff\x00ab.")
            .unwrap_err()
            .contains("ends inside"));
        assert!(decode(b"\x80\x02K\x01K\x02s.")
            .unwrap_err()
            .contains("not a container"));
        assert!(decode(b"\x80\x02h\x05.").unwrap_err().contains("memo"));
    }
}
