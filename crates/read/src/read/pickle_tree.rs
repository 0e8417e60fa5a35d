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
//! Callers bound the work first with `pickle_budget::check`: walking a
//! value reused many times costs as much as copying it.

/// A decoded value; containers are indices into [`Tree::items`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum V<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    Bytes(&'a [u8]),
    /// A list, tuple or set.
    List(u32),
    Dict(u32),
}

#[derive(Debug, Default)]
pub(crate) struct Tree<'a> {
    /// Each container's items; a dict's as key, value, key, value.
    pub items: Vec<Vec<V<'a>>>,
    pub root: Option<V<'a>>,
}

impl<'a> Tree<'a> {
    /// The items of a list (or tuple), empty for anything else.
    pub(crate) fn list(&self, v: V<'a>) -> &[V<'a>] {
        match v {
            V::List(i) => &self.items[i as usize],
            _ => &[],
        }
    }

    /// A dict's (key, value) pairs, none for anything else.
    pub(crate) fn pairs(&self, v: V<'a>) -> impl Iterator<Item = (V<'a>, V<'a>)> + '_ {
        let items: &[V<'a>] = match v {
            V::Dict(i) => &self.items[i as usize],
            _ => &[],
        };
        items.chunks_exact(2).map(|kv| (kv[0], kv[1]))
    }

    /// The value under a string key.
    pub(crate) fn get(&self, v: V<'a>, key: &str) -> Option<V<'a>> {
        self.pairs(v)
            .find(|(k, _)| matches!(k, V::Str(s) if *s == key))
            .map(|(_, v)| v)
    }
}

impl<'a> V<'a> {
    pub(crate) fn str(self) -> Option<&'a str> {
        match self {
            V::Str(s) => Some(s),
            V::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

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

/// What the stack holds: a value, or a mark.
#[derive(Clone, Copy)]
enum Slot<'a> {
    Val(V<'a>),
    Mark,
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Tree<'_>, String> {
    let mut t = Tree::default();
    let mut stack: Vec<Slot> = Vec::with_capacity(64);
    let mut memo: Vec<Option<V>> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
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
    fn pop<'a>(stack: &mut Vec<Slot<'a>>) -> Result<V<'a>, String> {
        match stack.pop() {
            Some(Slot::Val(v)) => Ok(v),
            _ => Err("a value was expected on the stack".into()),
        }
    }
    fn top<'a>(stack: &[Slot<'a>]) -> Result<V<'a>, String> {
        match stack.last() {
            Some(Slot::Val(v)) => Ok(*v),
            _ => Err("a memo of no value".into()),
        }
    }
    // Where the topmost mark is (`marks` holds their positions, so a
    // container of 2,000 entries is not searched for it).
    fn last_mark(stack: &[Slot], marks: &mut Vec<usize>) -> Result<usize, String> {
        let m = marks.pop().ok_or("no mark on the stack")?;
        match stack.get(m) {
            Some(Slot::Mark) => Ok(m),
            _ => Err("no mark on the stack".into()),
        }
    }
    // The values above the topmost mark, the mark removed.
    fn above_mark<'a>(
        stack: &mut Vec<Slot<'a>>,
        marks: &mut Vec<usize>,
    ) -> Result<Vec<V<'a>>, String> {
        let m = last_mark(stack, marks)?;
        let items = stack[m + 1..]
            .iter()
            .map(|s| match s {
                Slot::Val(v) => Ok(*v),
                Slot::Mark => Err("a mark among a container's items".to_owned()),
            })
            .collect::<Result<_, _>>()?;
        stack.truncate(m);
        Ok(items)
    }
    fn text(b: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(b).map_err(|_| "a string that is not UTF-8".to_owned())
    }
    fn put<'a>(memo: &mut Vec<Option<V<'a>>>, key: usize, v: V<'a>) -> Result<(), String> {
        if key > 1 << 28 {
            return Err("a memo index out of range".into());
        }
        if memo.len() <= key {
            memo.resize(key + 1, None);
        }
        memo[key] = Some(v);
        Ok(())
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
                t.root = Some(pop(&mut stack)?);
                return Ok(t);
            }
            b'(' => {
                marks.push(stack.len());
                stack.push(Slot::Mark);
            }
            b'N' => stack.push(Slot::Val(V::None)),
            b'\x88' => stack.push(Slot::Val(V::Bool(true))),
            b'\x89' => stack.push(Slot::Val(V::Bool(false))),
            b'K' => stack.push(Slot::Val(V::Int(i64::from(take!(1)[0])))),
            b'M' => stack.push(Slot::Val(V::Int(le(take!(2)) as i64))),
            b'J' => {
                let b = take!(4);
                stack.push(Slot::Val(V::Int(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ])))));
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
                stack.push(Slot::Val(V::Int(v)));
            }
            b'G' => {
                let b = take!(8);
                stack.push(Slot::Val(V::Float(f64::from_be_bytes(
                    b.try_into().expect("8 bytes"),
                ))));
            }
            b'I' | b'L' => {
                let l = text(line(&mut at)?)?.trim_end_matches('L');
                let v = match l {
                    "00" => V::Bool(false),
                    "01" => V::Bool(true),
                    _ => V::Int(l.parse().map_err(|_| format!("not an integer: {l:?}"))?),
                };
                stack.push(Slot::Val(v));
            }
            b'F' => {
                let l = text(line(&mut at)?)?;
                stack.push(Slot::Val(V::Float(
                    l.parse().map_err(|_| format!("not a float: {l:?}"))?,
                )));
            }
            b'X' | b'\x8c' | b'\x8d' => {
                let n = match op {
                    b'\x8c' => usize::from(take!(1)[0]),
                    b'X' => le(take!(4)) as usize,
                    _ => usize::try_from(le(take!(8))).map_err(|_| ends())?,
                };
                stack.push(Slot::Val(V::Str(text(take!(n))?)));
            }
            b'V' => {
                let l = line(&mut at)?;
                stack.push(Slot::Val(V::Str(text(l)?)));
            }
            b'U' | b'T' | b'C' | b'B' | b'\x8e' => {
                let n = match op {
                    b'U' | b'C' => usize::from(take!(1)[0]),
                    b'\x8e' => usize::try_from(le(take!(8))).map_err(|_| ends())?,
                    _ => le(take!(4)) as usize,
                };
                stack.push(Slot::Val(V::Bytes(take!(n))));
            }
            b']' | b')' | b'\x8f' => {
                t.items.push(Vec::new());
                stack.push(Slot::Val(V::List(t.items.len() as u32 - 1)));
            }
            b'}' => {
                t.items.push(Vec::new());
                stack.push(Slot::Val(V::Dict(t.items.len() as u32 - 1)));
            }
            b'l' | b't' | b'\x91' => {
                let items = above_mark(&mut stack, &mut marks)?;
                t.items.push(items);
                stack.push(Slot::Val(V::List(t.items.len() as u32 - 1)));
            }
            b'd' => {
                let items = above_mark(&mut stack, &mut marks)?;
                if !items.len().is_multiple_of(2) {
                    return Err("a dict with a key but no value".into());
                }
                t.items.push(items);
                stack.push(Slot::Val(V::Dict(t.items.len() as u32 - 1)));
            }
            b'\x85' | b'\x86' | b'\x87' => {
                let n = usize::from(op - b'\x84');
                if stack.len() < n {
                    return Err("a tuple of values the stack does not hold".into());
                }
                let mut items = Vec::with_capacity(n);
                for s in stack.split_off(stack.len() - n) {
                    match s {
                        Slot::Val(v) => items.push(v),
                        Slot::Mark => return Err("a tuple of a mark".into()),
                    }
                }
                t.items.push(items);
                stack.push(Slot::Val(V::List(t.items.len() as u32 - 1)));
            }
            b'a' | b's' | b'e' | b'u' | b'\x90' => {
                // The items: the top one or two, or all above the mark.
                let from = match op {
                    b'a' => stack.len().checked_sub(1),
                    b's' => stack.len().checked_sub(2),
                    _ => Some(last_mark(&stack, &mut marks)? + 1),
                }
                .ok_or("items the stack does not hold")?;
                let dict = matches!(op, b's' | b'u');
                let target = match from.checked_sub(1).and_then(|i| stack.get(i).copied()) {
                    Some(Slot::Mark) => from.checked_sub(2).and_then(|i| stack.get(i).copied()),
                    other => other,
                };
                let target = match target {
                    Some(Slot::Val(V::List(i))) if !dict => i,
                    Some(Slot::Val(V::Dict(i))) if dict => i,
                    _ => {
                        return Err("items added to something not a container of their kind".into())
                    }
                };
                if dict && !(stack.len() - from).is_multiple_of(2) {
                    return Err("a dict with a key but no value".into());
                }
                let dst = &mut t.items[target as usize];
                dst.reserve(stack.len() - from);
                for s in &stack[from..] {
                    match s {
                        Slot::Val(v) => dst.push(*v),
                        Slot::Mark => return Err("a mark among a container's items".into()),
                    }
                }
                // The mark goes with its items.
                let keep = if matches!(op, b'e' | b'u' | b'\x90') {
                    from - 1
                } else {
                    from
                };
                stack.truncate(keep);
            }
            b'q' => {
                let k = usize::from(take!(1)[0]);
                put(&mut memo, k, top(&stack)?)?;
            }
            b'r' => {
                let k = le(take!(4)) as usize;
                put(&mut memo, k, top(&stack)?)?;
            }
            b'p' => {
                let k = text(line(&mut at)?)?
                    .trim()
                    .parse()
                    .map_err(|_| "a bad memo key".to_owned())?;
                put(&mut memo, k, top(&stack)?)?;
            }
            b'\x94' => {
                let k = memo.len();
                put(&mut memo, k, top(&stack)?)?;
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
                stack.push(Slot::Val(v));
            }
            b'0' => {
                if let Some(Slot::Mark) = stack.pop() {
                    marks.pop();
                }
            }
            b'1' => {
                above_mark(&mut stack, &mut marks)?;
            }
            b'2' => {
                let top = *stack.last().ok_or("DUP of an empty stack")?;
                if let Slot::Mark = top {
                    marks.push(stack.len());
                }
                stack.push(top);
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
        assert_eq!((b[0].str(), b[1]), (Some("x"), V::Bytes(b"y")));
        // LONG1: -1 in one byte, 2**40 in six.
        let t = decode(b"\x80\x02\x8a\x01\xff.").unwrap();
        assert_eq!(t.root, Some(V::Int(-1)));
        let t = decode(b"\x80\x02\x8a\x06\x00\x00\x00\x00\x00\x01.").unwrap();
        assert_eq!(t.root, Some(V::Int(1 << 40)));
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
