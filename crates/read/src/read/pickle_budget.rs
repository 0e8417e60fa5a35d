//! A pass over a pickle's opcodes that simulates the unpickler's stack with
//! only each value's size and depth: what fully expanding it would build. A
//! 200-byte pickle that pairs a value with itself sixty times expands to
//! 2^60 values, and values nested a million deep overflow a recursive
//! reader's stack. The memory snapshot reader checks a file this way before
//! decoding; the Flight Recorder reader, whose reading the decoded tree
//! bounds itself, uses it only to mend a dump cut off mid-write. It never
//! runs anything: like the decoder, it only reads.

/// The deepest nesting decoded.
pub(crate) const MAX_DEPTH: u32 = 256;

use super::blocks::Blocks;
use super::pickle_input::Input;
use std::io::Read;

/// Values decoded per byte of pickle (plus a floor for small files): real
/// snapshots build fewer than one per byte.
const NODES_PER_BYTE: u64 = 16;
const MIN_NODES: u64 = 1 << 20;

/// What a value expands to: the values in it, itself included (saturating
/// past any file's bound), how deep it nests (to 511), and whether it is an
/// empty list to be filled (what a truncated stream's cut closes). In 8
/// bytes: the pass keeps one per memo key, a million for a 70 MB snapshot.
#[derive(Clone, Copy)]
struct Item(u64);

impl Item {
    const SIZE: u64 = (1 << 54) - 1;

    fn new(size: u64, depth: u32, list: bool) -> Item {
        Item(size.min(Self::SIZE) | u64::from(depth.min(511)) << 54 | u64::from(list) << 63)
    }

    fn size(self) -> u64 {
        self.0 & Self::SIZE
    }

    fn depth(self) -> u32 {
        (self.0 >> 54 & 511) as u32
    }

    fn list(self) -> bool {
        self.0 >> 63 == 1
    }
}

const LEAF: Item = Item(1 | 1 << 54);

/// Checks that decoding a pickle stays within the bounds (says why not), and
/// finds the memo keys that are read back (`GET`), each with where it is
/// read for the last time: a value stored under any other key, or past its
/// last reading, is never named again, so a streaming reader need not keep
/// it. Reads `input` once, a buffer at a time.
pub(crate) fn check_gets(input: impl Read) -> Result<Gets, String> {
    let mut last = Blocks::default();
    walk_with(&mut Input::new(input), &mut |_| {}, Some(&mut last))?;
    Ok(Gets::new(&last))
}

/// A set of memo keys, each numbered among them (its slot) in key order (a
/// bit per key up to the largest, and the count before each word), with
/// the offset of the opcode that reads it for the last time.
#[derive(Debug, Default)]
pub(crate) struct Gets {
    words: Vec<u64>,
    before: Vec<u32>,
    last: Vec<u64>,
}

impl Gets {
    /// From each key's last reading (0: never read).
    fn new(last_by_key: &Blocks<u64>) -> Gets {
        let mut words = vec![0u64; last_by_key.len().div_ceil(64)];
        let mut last = Vec::new();
        for (k, &at) in last_by_key.iter().enumerate().filter(|(_, &at)| at > 0) {
            words[k / 64] |= 1 << (k % 64);
            last.push(at);
        }
        let mut n = 0u32;
        let before = words
            .iter()
            .map(|w| {
                let b = n;
                n += w.count_ones();
                b
            })
            .collect();
        Gets {
            words,
            before,
            last,
        }
    }

    /// Where the key in `slot` is read for the last time.
    pub(crate) fn last_read(&self, slot: usize) -> u64 {
        self.last[slot]
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.last.len()
    }

    /// The slot of `key`, if it is in the set.
    pub(crate) fn slot(&self, key: usize) -> Option<usize> {
        let (w, b) = (key / 64, key % 64);
        let word = *self.words.get(w)?;
        if word >> b & 1 == 0 {
            return None;
        }
        Some(self.before[w] as usize + (word & ((1u64 << b) - 1)).count_ones() as usize)
    }
}

/// Whether a memo key can be a writer's after `read` bytes: writers number
/// their memo by count, and each store takes at least a byte, so a larger
/// key is no writer's (a dense memo up to it takes 16 bytes a key: a
/// 9-byte file naming key 2^28 took 4 GB).
pub(crate) fn memo_key_ok(key: u64, read: u64) -> bool {
    key <= read
}

/// The bounds' check in the same pass as mending a pickle cut off before
/// its end (a process killed while writing): such a stream is made whole
/// at the last item completed in a list one level inside the top dict,
/// `{..., "entries": [e1, e2, <cut>` becoming `{..., "entries": [e1, e2]}`.
/// Returns the mended bytes (`None`: whole, or no such point to mend at),
/// or why decoding would exceed the bounds.
pub(crate) fn check_and_mend(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut cut = None;
    let walked = walk_with(&mut Input::slice(bytes), &mut |c| cut = Some(c), None);
    match walked {
        Ok(true) => return Ok(None),
        // Bounds exceeded before the end: not a cut, a refusal.
        Err(e) if !e.contains("ends inside") => return Err(e),
        Ok(false) | Err(_) => {}
    }
    Ok(cut.map(|cut| {
        let mut whole = bytes[..cut].to_vec();
        // APPENDS closes the list, SETITEMS the top dict, STOP ends.
        whole.extend_from_slice(b"eu.");
        whole
    }))
}

/// Walks the opcodes; calls `safe` at each point a truncated stream can be
/// closed; returns whether it reached STOP. With `gets`, notes for each
/// memo key read back the offset just past the opcode that reads it last
/// (never 0).
fn walk_with<R: Read>(
    input: &mut Input<'_, R>,
    safe: &mut dyn FnMut(usize),
    mut gets: Option<&mut Blocks<u64>>,
) -> Result<bool, String> {
    let mut stack: Vec<Item> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    // Memo keys are the writer's running count (0, 1, 2...), so a vector;
    // an unset key reads as a scalar, as before any PUT.
    let mut memo: Blocks<Item> = Blocks::default();
    let put = |memo: &mut Blocks<Item>, key: u64, it: Item, read: u64| -> Result<(), String> {
        let k = usize::try_from(key)
            .ok()
            .filter(|_| memo_key_ok(key, read))
            .ok_or("a memo index out of range")?;
        memo.resize(k + 1, LEAF);
        if let Some(m) = memo.get_mut(k) {
            *m = it;
        }
        Ok(())
    };
    let mut get = |memo: &Blocks<Item>, key: u64, at: u64| {
        if let Some(last) = gets.as_deref_mut().filter(|_| memo_key_ok(key, at)) {
            let k = key as usize;
            last.resize(k + 1, 0);
            if let Some(l) = last.get_mut(k) {
                *l = at;
            }
        }
        usize::try_from(key)
            .ok()
            .and_then(|k| memo.get(k))
            .unwrap_or(LEAF)
    };
    // Values per byte read so far: a value is made of what came before it.
    let too_big = |it: &Item, read: u64| {
        let max_nodes = read.saturating_mul(NODES_PER_BYTE).max(MIN_NODES);
        if it.size() > max_nodes {
            Err(format!(
                "it would decode to over {max_nodes} values (a value reused over and over)"
            ))
        } else if it.depth() > MAX_DEPTH {
            Err(format!("values nested over {MAX_DEPTH} deep"))
        } else {
            Ok(())
        }
    };
    // Where the items above the last mark start (the mark popped).
    let mark = |stack: &[Item], marks: &mut Vec<usize>| marks.pop().unwrap_or(0).min(stack.len());
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
    let key_of = |l: &[u8]| {
        std::str::from_utf8(l)
            .ok()
            .and_then(|k| k.trim().parse().ok())
            .unwrap_or(u64::MAX)
    };
    while let Some(op) = input.byte()? {
        // Just past the opcode, as the decoder tells where it reads a key.
        let at = input.at();
        match op {
            // Values with a newline-terminated argument.
            b'I' | b'L' | b'S' | b'V' | b'F' | b'P' => {
                input.line()?;
                stack.push(LEAF);
            }
            b'g' => {
                let key = key_of(input.line()?);
                stack.push(get(&memo, key, at));
            }
            b'p' => {
                let key = key_of(input.line()?);
                put(&mut memo, key, *stack.last().unwrap_or(&LEAF), at)?;
            }
            // GLOBAL and INST: two lines (module, name); refused by the
            // decoder later, only stepped over here.
            b'c' | b'i' => {
                input.line()?;
                input.line()?;
                stack.push(LEAF);
            }
            // Fixed-size scalars.
            b'J' | b'K' | b'M' | b'G' | b'\x82' | b'\x83' | b'\x84' => {
                input.skip(match op {
                    b'K' | b'\x82' => 1,
                    b'M' | b'\x83' => 2,
                    b'J' | b'\x84' => 4,
                    _ => 8,
                })?;
                stack.push(LEAF);
            }
            b'N' | b'\x88' | b'\x89' => stack.push(LEAF),
            // Memo by index.
            b'h' | b'j' => {
                let key = le(input.take(if op == b'h' { 1 } else { 4 })?);
                stack.push(get(&memo, key, at));
            }
            b'q' | b'r' => {
                let key = le(input.take(if op == b'q' { 1 } else { 4 })?);
                put(&mut memo, key, *stack.last().unwrap_or(&LEAF), at)?;
            }
            b'\x94' => {
                let key = memo.len() as u64;
                put(&mut memo, key, *stack.last().unwrap_or(&LEAF), at)?;
            }
            // Length-prefixed strings, bytes and long integers.
            b'T' | b'X' | b'B' | b'\x8b' | b'U' | b'\x8c' | b'C' | b'\x8a' | b'\x8d' | b'\x8e'
            | b'\x96' => {
                let n = match op {
                    b'T' | b'X' | b'B' | b'\x8b' => 4,
                    b'U' | b'\x8c' | b'C' | b'\x8a' => 1,
                    _ => 8,
                };
                let len = le(input.take(n)?);
                input.skip(len)?;
                stack.push(LEAF);
            }
            b'\x80' => input.skip(1)?,
            b'\x95' => input.skip(8)?,
            b'(' => marks.push(stack.len()),
            b'.' => return Ok(true),
            b'0' => {
                stack.pop();
            }
            b'1' => {
                let m = mark(&stack, &mut marks);
                stack.truncate(m);
            }
            b'2' => {
                let top = *stack.last().unwrap_or(&LEAF);
                stack.push(top);
            }
            b']' => stack.push(Item::new(1, 1, true)),
            b'}' | b')' | b'\x8f' => stack.push(LEAF),
            // Containers from the items above a mark.
            b'l' | b'd' | b't' | b'\x91' => {
                let m = mark(&stack, &mut marks);
                combine(&mut stack, m, &|i| too_big(i, at))?;
            }
            b'\x85' | b'\x86' | b'\x87' => {
                let n = usize::from(op - b'\x84');
                let from = stack.len().saturating_sub(n);
                combine(&mut stack, from, &|i| too_big(i, at))?;
            }
            // Adding items to the container below them.
            b'a' | b's' => {
                let n = if op == b'a' { 1 } else { 2 };
                let from = stack.len().saturating_sub(n);
                grow(&mut stack, from, &|i| too_big(i, at))?;
            }
            b'e' | b'u' | b'\x90' => {
                let m = mark(&stack, &mut marks);
                grow(&mut stack, m, &|i| too_big(i, at))?;
                // A dict just completed as an item of a list that is itself
                // a value of the top dict.
                let below = |m: usize| m.checked_sub(1).and_then(|i| stack.get(i));
                if op == b'u'
                    && marks.len() == 2
                    && below(marks[1]).is_some_and(|i| i.list())
                    && below(marks[0]).is_some_and(|i| !i.list())
                {
                    safe(at as usize);
                }
            }
            // REDUCE, BUILD, NEWOBJ and the like: the decoder refuses or
            // keeps them small; treat them as combining their arguments.
            b'R' | b'b' | b'\x81' | b'\x92' | b'\x93' | b'o' | b'Q' => {
                let n = match op {
                    b'\x92' => 3,
                    b'Q' => 1,
                    b'o' => 0,
                    _ => 2,
                };
                let from = if op == b'o' {
                    mark(&stack, &mut marks)
                } else {
                    stack.len().saturating_sub(n)
                };
                combine(&mut stack, from, &|i| too_big(i, at))?;
            }
            b'\x97' | b'\x98' => {}
            other => return Err(format!("unknown opcode 0x{other:02x} at byte {}", at - 1)),
        }
    }
    Ok(false)
}

/// Replaces the items from `from` up with one container of them (their
/// sizes summed, one level deeper).
fn combine(
    stack: &mut Vec<Item>,
    from: usize,
    too_big: &dyn Fn(&Item) -> Result<(), String>,
) -> Result<(), String> {
    let items = &stack[from..];
    let c = Item::new(
        items.iter().fold(1u64, |s, i| s.saturating_add(i.size())),
        items.iter().map(|i| i.depth()).max().unwrap_or(0) + 1,
        false,
    );
    too_big(&c)?;
    stack.truncate(from);
    stack.push(c);
    Ok(())
}

/// Adds the items from `from` up into the container below them.
fn grow(
    stack: &mut Vec<Item>,
    from: usize,
    too_big: &dyn Fn(&Item) -> Result<(), String>,
) -> Result<(), String> {
    let (below, items) = stack.split_at_mut(from);
    if let Some(top) = below.last_mut() {
        for i in items.iter() {
            *top = Item::new(
                top.size().saturating_add(i.size()),
                top.depth().max(i.depth() + 1),
                top.list(),
            );
        }
        too_big(top)?;
    }
    stack.truncate(from);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_are_found_with_their_last_reading() {
        // [1, 1, 1]: the list stored as key 0 and never read back, the int
        // stored as key 1 and read back twice, the last GET at offset 12.
        let p = b"\x80\x02]q\x00(K\x01q\x01h\x01h\x01e.";
        let gets = check_gets(&p[..]).unwrap();
        assert_eq!(gets.len(), 1);
        assert_eq!(
            (gets.slot(0), gets.slot(1), gets.slot(2)),
            (None, Some(0), None)
        );
        assert_eq!(gets.last_read(0), 13);
    }

    #[test]
    fn real_pickles_pass_and_bombs_do_not() {
        // pickle.dumps({"segments": [1, 2], "x": "y"}, protocol=2)
        let ok = b"\x80\x02}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02(K\x01K\x02eX\x01\x00\x00\x00xq\x03X\x01\x00\x00\x00yq\x04u.";
        let gets = check_gets(&ok[..]).unwrap();
        // Nothing is read back from the memo.
        assert_eq!(gets.len(), 0);
        // A value paired with itself 70 times: 2^70 values once copied.
        let mut bomb = b"\x80\x02K\x01".to_vec();
        for _ in 0..70 {
            bomb.extend_from_slice(b"2\x86");
        }
        bomb.push(b'.');
        let e = check_gets(&bomb[..]).unwrap_err();
        assert!(e.contains("would decode to over"), "{e}");
        // Lists nested a million deep.
        let mut deep = b"\x80\x02".to_vec();
        deep.extend(std::iter::repeat_n(b']', 1_000_000));
        deep.extend(std::iter::repeat_n(b'a', 999_999));
        deep.push(b'.');
        let e = check_gets(&deep[..]).unwrap_err();
        assert!(e.contains("nested over 256 deep"), "{e}");
        // DUP and APPEND on a list, the 200-byte way to gigabytes.
        let mut dup = b"\x80\x02]".to_vec();
        for _ in 0..100 {
            dup.extend_from_slice(b"2a");
        }
        let e = check_gets(&dup[..]).unwrap_err();
        assert!(e.contains("would decode to over"), "{e}");
    }
}
