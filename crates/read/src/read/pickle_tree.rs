//! A pickle decoded into plain values without copying: strings borrowed
//! from the input, containers in one arena, a memo `GET` a reference to the
//! container it names (as Python's unpickler shares it). Only data opcodes
//! are accepted; class references and calls (`GLOBAL`, `REDUCE`, ...) are
//! refused, so no pickle code can run.
//!
//! A reader that needs a long list's items one by one (a memory
//! snapshot's history) takes them as they come ([`decode_taking`]), and the
//! tree lets go of what they were made of.
//!
//! Why not serde-pickle: it builds a tree of owned values first and copies
//! a value at each memo reuse, and on Flight Recorder dumps (2,000 entries
//! of ~25 values each per rank) it decoded 20-30 MB/s per core, 4x slower
//! than Python's `pickle.load`; a dump folder of 256 ranks took 13.7 s on 2
//! cores (docs/internals.md). Decoding is linear in the pickle's length (a
//! reused value is a reference, not a copy, and nothing recurses); reading
//! the tree is bounded by the tree itself (see [`Tree`]).

use super::pickle_budget::{memo_key_ok, Gets};
use super::pickle_input::Input;
use std::io::Read;

/// A decoded value, in 16 bytes (a Flight Recorder dump decodes to tens of
/// thousands):
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
pub(crate) struct Tree {
    items: Vec<V>,
    spans: Vec<Span>,
    /// Each text opcode's string, where it lies in `text` (a memo `GET`
    /// names the same one again): texts are copied, so that the input can
    /// be read a buffer at a time.
    strs: Vec<(usize, usize)>,
    text: String,
    /// Each bytes opcode's bytes, where they lie in `raw_bytes`.
    raw: Vec<(usize, usize)>,
    raw_bytes: Vec<u8>,
    pub root: Option<V>,
    /// Streaming ([`decode_taking`]): the containers extended, in order
    /// (a compaction looks at those extended since its mark), and how many
    /// compactions renumbered containers so far.
    touched: Option<Vec<u32>>,
    /// Streaming: the memo slots stored to, in order (only values stored
    /// since a mark can name what was made since).
    puts: Vec<u32>,
    generation: u32,
    /// Items that may still be handed out.
    budget: std::cell::Cell<u64>,
    /// Items allowed so far, for the bytes read so far.
    granted: std::cell::Cell<u64>,
    spent: std::cell::Cell<bool>,
}

/// Items handed out per byte of pickle (plus a floor for small files): a
/// Flight Recorder dump is read with fewer than one.
const ITEMS_PER_BYTE: u64 = 16;
const MIN_ITEMS: u64 = 1 << 20;

impl Tree {
    /// Allows the reading of items for `read` bytes of pickle.
    fn grant(&self, read: u64) {
        let allowed = read.saturating_mul(ITEMS_PER_BYTE).max(MIN_ITEMS);
        let more = allowed.saturating_sub(self.granted.get());
        self.granted.set(self.granted.get() + more);
        if !self.spent.get() {
            self.budget.set(self.budget.get().saturating_add(more));
        }
    }

    fn text_bytes(&self, i: u32) -> &[u8] {
        let (s, e) = self.strs[i as usize];
        &self.text.as_bytes()[s..e]
    }

    fn text_of(&self, i: u32) -> &str {
        let (s, e) = self.strs[i as usize];
        &self.text[s..e]
    }

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

    /// Changes each time containers were renumbered ([`decode_taking`]):
    /// an index seen before it changed may now name another container.
    pub(crate) fn generation(&self) -> u32 {
        self.generation
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
            .find(|(k, _)| matches!(k, V::Str(s) if self.text_bytes(*s) == key.as_bytes()))
            .map(|(_, v)| v)
    }

    /// A text value's string (bytes that are UTF-8 too).
    pub(crate) fn str(&self, v: V) -> Option<&str> {
        match v {
            V::Str(i) => Some(self.text_of(i)),
            V::Bytes(i) => std::str::from_utf8(self.bytes_of(i)).ok(),
            _ => None,
        }
    }

    /// A bytes value's bytes.
    #[cfg(test)]
    fn bytes(&self, v: V) -> Option<&[u8]> {
        match v {
            V::Bytes(i) => Some(self.bytes_of(i)),
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

    fn bytes_of(&self, i: u32) -> &[u8] {
        let (s, e) = self.raw[i as usize];
        &self.raw_bytes[s..e]
    }

    /// A new text value.
    fn text(&mut self, s: &str) -> Result<V, String> {
        let i = u32::try_from(self.strs.len()).map_err(|_| "over 2^32 texts".to_owned())?;
        self.strs.push((self.text.len(), self.text.len() + s.len()));
        self.text.push_str(s);
        Ok(V::Str(i))
    }

    /// A new bytes value.
    fn raw_value(&mut self, b: &[u8]) -> Result<V, String> {
        let i = u32::try_from(self.raw.len()).map_err(|_| "over 2^32 bytes values")?;
        let at = self.raw_bytes.len();
        self.raw.push((at, at + b.len()));
        self.raw_bytes.extend_from_slice(b);
        Ok(V::Bytes(i))
    }

    /// Adds `new` to container `i`: in its room, at the end if it is last,
    /// or else moved to the end with room to double (each item is copied a
    /// bounded number of times however the stream adds them).
    fn extend(&mut self, i: u32, new: &[V]) {
        if let Some(log) = self.touched.as_mut().filter(|_| !new.is_empty()) {
            log.push(i);
        }
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

/// Marks a value no root reaches, in [`Tree::compact`]'s tables.
const DEAD: u32 = u32::MAX;

impl Tree {
    fn water(&self) -> Water {
        Water {
            items: self.items.len(),
            spans: self.spans.len(),
            strs: self.strs.len(),
            raw: self.raw.len(),
            text: self.text.len(),
            raw_bytes: self.raw_bytes.len(),
            touched: self.touched.as_ref().map_or(0, Vec::len),
            puts: self.puts.len(),
        }
    }

    /// Lets go of what was added since `w` that nothing can name any more:
    /// the roots are `kept` (items about to be added), the memo values
    /// stored since `w`, and the containers extended since `w` (the only
    /// older ones that can hold newer values). What is kept is renumbered,
    /// in order, and its items packed down; the roots are rewritten to the
    /// new numbers.
    fn compact(&mut self, w: Water, kept: &mut [V], memo: &mut [Option<V>]) {
        let Some(mut log) = self.touched.take() else {
            return;
        };
        // The slots stored to since `w` that still hold a value, each once.
        let mut puts = self.puts.split_off(w.puts);
        puts.retain(|&s| memo[s as usize].is_some());
        puts.sort_unstable();
        puts.dedup();
        let mut older: Vec<u32> = log[w.touched..]
            .iter()
            .copied()
            .filter(|&i| (i as usize) < w.spans)
            .collect();
        older.sort_unstable();
        older.dedup();
        // Which of the new containers, texts and bytes a root reaches.
        let mut sp = vec![DEAD; self.spans.len() - w.spans];
        let mut st = vec![DEAD; self.strs.len() - w.strs];
        let mut rw = vec![DEAD; self.raw.len() - w.raw];
        let mut work: Vec<u32> = Vec::new();
        let mut see = |v: V, work: &mut Vec<u32>| match v {
            V::List(i) | V::Dict(i) => {
                if let Some(k) = (i as usize).checked_sub(w.spans) {
                    if sp[k] == DEAD {
                        sp[k] = 0;
                        work.push(i);
                    }
                }
            }
            V::Str(i) => {
                if let Some(k) = (i as usize).checked_sub(w.strs) {
                    st[k] = 0;
                }
            }
            V::Bytes(i) => {
                if let Some(k) = (i as usize).checked_sub(w.raw) {
                    rw[k] = 0;
                }
            }
            _ => {}
        };
        let items_of = |spans: &[Span], i: u32| {
            let s = spans[i as usize];
            s.start..s.start + s.len
        };
        for &v in kept.iter() {
            see(v, &mut work);
        }
        for &s in &puts {
            if let Some(v) = memo[s as usize] {
                see(v, &mut work);
            }
        }
        for &i in &older {
            for k in items_of(&self.spans, i) {
                see(self.items[k], &mut work);
            }
        }
        while let Some(i) = work.pop() {
            for k in items_of(&self.spans, i) {
                see(self.items[k], &mut work);
            }
        }
        let number = |table: &mut [u32], base: usize| {
            let mut n = base as u32;
            for x in table.iter_mut().filter(|x| **x != DEAD) {
                *x = n;
                n += 1;
            }
            n as usize
        };
        let spans_end = number(&mut sp, w.spans);
        let strs_end = number(&mut st, w.strs);
        let raw_end = number(&mut rw, w.raw);
        // Pack the items of what is kept down to the water, in the order
        // they lie (each moves down, never over one not yet moved). An
        // older container whose items cross the water stays where it is.
        let live: Vec<u32> = (w.spans..self.spans.len())
            .filter(|&i| sp[i - w.spans] != DEAD)
            .map(|i| i as u32)
            .collect();
        let mut moving: Vec<(usize, u32)> = live
            .iter()
            .chain(older.iter().filter(|&&i| {
                let s = self.spans[i as usize];
                s.start + s.len > w.items
            }))
            .map(|&i| (self.spans[i as usize].start, i))
            .collect();
        moving.sort_unstable();
        let mut dst = w.items;
        for &(start, i) in &moving {
            let s = &mut self.spans[i as usize];
            s.cap = s.len;
            if start < dst {
                dst = dst.max(start + s.len);
                continue;
            }
            self.items.copy_within(start..start + s.len, dst);
            s.start = dst;
            dst += s.len;
        }
        self.items.truncate(dst);
        let renumber = |v: V| match v {
            V::List(i) if i as usize >= w.spans => V::List(sp[i as usize - w.spans]),
            V::Dict(i) if i as usize >= w.spans => V::Dict(sp[i as usize - w.spans]),
            V::Str(i) if i as usize >= w.strs => V::Str(st[i as usize - w.strs]),
            V::Bytes(i) if i as usize >= w.raw => V::Bytes(rw[i as usize - w.raw]),
            v => v,
        };
        for &(_, i) in &moving {
            for k in items_of(&self.spans, i) {
                self.items[k] = renumber(self.items[k]);
            }
        }
        for &i in &older {
            for k in items_of(&self.spans, i) {
                self.items[k] = renumber(self.items[k]);
            }
        }
        for v in kept.iter_mut() {
            *v = renumber(*v);
        }
        for &s in &puts {
            if let Some(v) = memo[s as usize].as_mut() {
                *v = renumber(*v);
            }
        }
        // They may name what a compaction further out lets go of.
        self.puts.extend(puts);
        for &i in &live {
            let new = sp[i as usize - w.spans] as usize;
            self.spans[new] = self.spans[i as usize];
        }
        self.spans.truncate(spans_end);
        // Texts and bytes kept are packed down the same way.
        let tail = pack(&mut self.strs, w.strs, &st, self.text.as_bytes(), w.text);
        self.strs.truncate(strs_end);
        self.text.truncate(w.text);
        // Whole texts, so never lossy.
        self.text.push_str(&String::from_utf8_lossy(&tail));
        let tail = pack(&mut self.raw, w.raw, &rw, &self.raw_bytes, w.raw_bytes);
        self.raw.truncate(raw_end);
        self.raw_bytes.truncate(w.raw_bytes);
        self.raw_bytes.extend_from_slice(&tail);
        // The newer containers extended are kept or gone, and renumbered:
        // only older ones matter to a compaction further out.
        log.truncate(w.touched);
        log.extend(older);
        self.touched = Some(log);
        self.generation += 1;
    }
}

/// The bytes of the kept ones among `ranges[base..]` (`numbers`: each
/// one's new number, or [`DEAD`]) in one run that is to lie at `at`, their
/// ranges rewritten to their new numbers and places.
fn pack(
    ranges: &mut [(usize, usize)],
    base: usize,
    numbers: &[u32],
    bytes: &[u8],
    at: usize,
) -> Vec<u8> {
    let mut tail = Vec::new();
    for (old, &new) in numbers.iter().enumerate().filter(|(_, n)| **n != DEAD) {
        let (s, e) = ranges[base + old];
        let start = at + tail.len();
        tail.extend_from_slice(&bytes[s..e]);
        ranges[new as usize] = (start, start + e - s);
    }
    tail
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
    /// The tree's extent when each mark was set.
    waters: Vec<Water>,
}

/// How far the tree reached at a mark: what was added after it is what the
/// items above the mark were made of.
#[derive(Debug, Clone, Copy)]
struct Water {
    items: usize,
    spans: usize,
    strs: usize,
    raw: usize,
    text: usize,
    raw_bytes: usize,
    touched: usize,
    puts: usize,
}

impl Stack {
    fn push(&mut self, v: V) {
        self.vals.push(v);
    }

    fn push_mark(&mut self, w: Water) {
        self.marks.push(self.vals.len());
        self.waters.push(w);
    }

    /// The topmost mark's place and water, the mark removed.
    fn pop_mark_water(&mut self) -> Result<(usize, Water), String> {
        match (self.marks.pop(), self.waters.pop()) {
            (Some(m), Some(w)) => Ok((m, w)),
            _ => Err("no mark on the stack".into()),
        }
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
        self.pop_mark_water().map(|(m, _)| m)
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

pub(crate) fn decode(bytes: &[u8]) -> Result<Tree, String> {
    // Sized from the file (a dump holds about one item per 2-3 bytes):
    // growing by doubling copied and faulted in each item twice. Capped, so
    // that a large file does not reserve many times its size up front.
    decode_into(
        Input::slice(bytes),
        Vec::with_capacity((bytes.len() / 2).min(1 << 23)),
        (bytes.len() / 16).min(1 << 21),
        None,
        None,
    )
}

/// What a streaming reader takes: each item added to a list is offered to
/// `take` (with the list's index), and an item it takes is not added.
pub(crate) type Take<'f> = dyn FnMut(&Tree, u32, V) -> bool + 'f;

/// [`decode`] from a stream, for a reader that takes what it needs as the
/// stream goes (a memory snapshot's history entries), so that neither the
/// input nor the tree is ever held whole: once items added to a list in
/// one batch (`APPENDS`) were taken, what the stream built for them since
/// the batch's mark is let go, unless the memo can still name it (`gets`:
/// the keys read back later in the stream, from
/// [`super::pickle_budget::check_gets`]) or an item left in the list holds
/// it. Containers kept from that stretch are renumbered
/// ([`Tree::generation`] changes).
pub(crate) fn decode_taking(
    input: impl Read,
    gets: Gets,
    take: &mut Take<'_>,
) -> Result<Tree, String> {
    decode_into(
        Input::new(input),
        Vec::with_capacity(1 << 16),
        1 << 12,
        Some(gets),
        Some(take),
    )
}

fn decode_into<R: Read>(
    mut input: Input<'_, R>,
    items: Vec<V>,
    containers: usize,
    gets: Option<Gets>,
    mut take: Option<&mut Take<'_>>,
) -> Result<Tree, String> {
    let mut t = Tree {
        touched: take.as_ref().map(|_| Vec::new()),
        puts: Vec::new(),
        generation: 0,
        items,
        spans: Vec::with_capacity(containers),
        strs: Vec::new(),
        text: String::new(),
        raw: Vec::new(),
        raw_bytes: Vec::new(),
        root: None,
        budget: std::cell::Cell::new(0),
        granted: std::cell::Cell::new(0),
        spent: std::cell::Cell::new(false),
    };
    let mut st = Stack {
        vals: Vec::with_capacity(64),
        marks: Vec::new(),
        waters: Vec::new(),
    };
    // Streaming, only the keys read back are kept, each in its slot among
    // them; else a slot per key.
    let mut memo: Vec<Option<V>> = vec![None; gets.as_ref().map_or(0, Gets::len)];
    let slot = |key: usize| match &gets {
        Some(g) => g.slot(key),
        None => Some(key),
    };
    let streaming = take.is_some();
    let mut kept: Vec<V> = Vec::new();
    let ends = || "it ends inside an opcode".to_owned();
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
    fn text(b: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(b).map_err(|_| "a string that is not UTF-8".to_owned())
    }
    // MEMOIZE's key: one past the largest key stored (as the pass that
    // found `gets` numbers them).
    let mut memo_next = 0usize;
    let put = |memo: &mut Vec<Option<V>>,
               puts: &mut Vec<u32>,
               memo_next: &mut usize,
               key: usize,
               v: V,
               read: u64|
     -> Result<(), String> {
        if !memo_key_ok(key as u64, read) {
            return Err("a memo index out of range".into());
        }
        *memo_next = (*memo_next).max(key + 1);
        let Some(key) = slot(key) else {
            return Ok(());
        };
        if memo.len() <= key {
            memo.resize(key + 1, None);
        }
        memo[key] = Some(v);
        if streaming {
            puts.push(key as u32);
        }
        Ok(())
    };
    // The values from `from` up as a new container, in place of them.
    fn contain(t: &mut Tree, st: &mut Stack, from: usize) -> Result<u32, String> {
        let i = t.container(st.vals[from..].iter().copied())?;
        st.vals.truncate(from);
        Ok(i)
    }
    loop {
        let op = input.byte()?.ok_or("it ends before its STOP opcode")?;
        // Just past this opcode, as `gets` says where a key is read last.
        let here = input.at();
        match op {
            b'\x80' => input.skip(1)?,
            b'\x95' => input.skip(8)?,
            b'.' => {
                t.root = Some(st.pop()?);
                t.grant(input.at());
                return Ok(t);
            }
            b'(' => st.push_mark(t.water()),
            b'N' => st.push(V::None),
            b'\x88' => st.push(V::Bool(true)),
            b'\x89' => st.push(V::Bool(false)),
            b'K' => st.push(V::Int(i64::from(input.take(1)?[0]))),
            b'M' => st.push(V::Int(le(input.take(2)?) as i64)),
            b'J' => {
                let b = input.take(4)?;
                st.push(V::Int(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))));
            }
            b'\x8a' | b'\x8b' => {
                let n = if op == b'\x8a' {
                    usize::from(input.take(1)?[0])
                } else {
                    le(input.take(4)?) as usize
                };
                let b = input.take(n)?;
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
                let b = input.take(8)?;
                st.push(V::Float(f64::from_be_bytes(b.try_into().expect("8 bytes"))));
            }
            b'I' | b'L' => {
                let l = text(input.line()?)?.trim_end_matches('L');
                let v = match l {
                    "00" => V::Bool(false),
                    "01" => V::Bool(true),
                    _ => V::Int(l.parse().map_err(|_| format!("not an integer: {l:?}"))?),
                };
                st.push(v);
            }
            b'F' => {
                let l = text(input.line()?)?;
                st.push(V::Float(
                    l.parse().map_err(|_| format!("not a float: {l:?}"))?,
                ));
            }
            b'X' | b'\x8c' | b'\x8d' => {
                let n = match op {
                    b'\x8c' => usize::from(input.take(1)?[0]),
                    b'X' => le(input.take(4)?) as usize,
                    _ => usize::try_from(le(input.take(8)?)).map_err(|_| ends())?,
                };
                let s = text(input.take(n)?)?;
                st.push(t.text(s)?);
            }
            b'V' => {
                let l = input.line()?;
                st.push(t.text(text(l)?)?);
            }
            b'U' | b'T' | b'C' | b'B' | b'\x8e' => {
                let n = match op {
                    b'U' | b'C' => usize::from(input.take(1)?[0]),
                    b'\x8e' => usize::try_from(le(input.take(8)?)).map_err(|_| ends())?,
                    _ => le(input.take(4)?) as usize,
                };
                st.push(t.raw_value(input.take(n)?)?);
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
                let (from, water) = match op {
                    b'a' => (st.top_n(1)?, None),
                    b's' => (st.top_n(2)?, None),
                    _ => {
                        let (m, w) = st.pop_mark_water()?;
                        (m, Some(w))
                    }
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
                if let Some(take) = take.as_mut().filter(|_| !dict) {
                    t.grant(here);
                    kept.clear();
                    let mut took = false;
                    for &v in &st.vals[from..] {
                        if take(&t, target, v) {
                            took = true;
                        } else {
                            kept.push(v);
                        }
                    }
                    if took {
                        st.vals.truncate(from);
                        if let Some(w) = water {
                            t.compact(w, &mut kept, &mut memo);
                        }
                        t.extend(target, &kept);
                        continue;
                    }
                }
                t.extend(target, &st.vals[from..]);
                st.vals.truncate(from);
            }
            b'q' => {
                let k = usize::from(input.take(1)?[0]);
                put(&mut memo, &mut t.puts, &mut memo_next, k, st.top()?, here)?;
            }
            b'r' => {
                let k = le(input.take(4)?) as usize;
                put(&mut memo, &mut t.puts, &mut memo_next, k, st.top()?, here)?;
            }
            b'p' => {
                let k = text(input.line()?)?
                    .trim()
                    .parse()
                    .map_err(|_| "a bad memo key".to_owned())?;
                put(&mut memo, &mut t.puts, &mut memo_next, k, st.top()?, here)?;
            }
            b'\x94' => {
                let k = memo_next;
                put(&mut memo, &mut t.puts, &mut memo_next, k, st.top()?, here)?;
            }
            b'h' | b'j' | b'g' => {
                let k = match op {
                    b'h' => usize::from(input.take(1)?[0]),
                    b'j' => le(input.take(4)?) as usize,
                    _ => text(input.line()?)?
                        .trim()
                        .parse()
                        .map_err(|_| "a bad memo key".to_owned())?,
                };
                let slot = slot(k).ok_or("a memo reference to nothing")?;
                let v = memo
                    .get(slot)
                    .copied()
                    .flatten()
                    .ok_or("a memo reference to nothing")?;
                // Streaming, a value read for the last time is let go of.
                if gets.as_ref().is_some_and(|g| g.last_read(slot) <= here) {
                    memo[slot] = None;
                }
                st.push(v);
            }
            b'0' => {
                // The top is a mark, or a value.
                if st.marks.last() == Some(&st.vals.len()) {
                    st.pop_mark()?;
                } else {
                    st.vals.pop();
                }
            }
            b'1' => {
                let m = st.pop_mark()?;
                st.vals.truncate(m);
            }
            b'2' => match (st.marks.last(), st.waters.last()) {
                (Some(&m), Some(&w)) if m == st.vals.len() => st.push_mark(w),
                _ => {
                    let top = st.top().map_err(|_| "DUP of an empty stack")?;
                    st.push(top);
                }
            },
            b'c' | b'i' | b'\x93' | b'R' | b'b' | b'\x81' | b'\x92' | b'o' | b'Q' | b'P' => {
                return Err(format!(
                    "it refers to Python classes or calls them (opcode 0x{op:02x} at byte {}); only plain data is read",
                    here - 1
                ));
            }
            other => return Err(format!("unknown opcode 0x{other:02x} at byte {}", here - 1)),
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

#[cfg(test)]
mod taking_tests {
    use super::*;
    use crate::synth::jit_pickle::{to_vec, to_vec_as_python, P};
    use proptest::prelude::*;
    use std::rc::Rc;

    /// A value written out whole (shared values each time they are held);
    /// lists and tuples alike, as the tree holds them.
    fn show(t: &Tree, v: V) -> String {
        match v {
            V::None => "N".into(),
            V::Bool(b) => b.to_string(),
            V::Int(i) => i.to_string(),
            V::Float(f) => format!("{f:?}"),
            V::Str(_) | V::Bytes(_) => format!("{:?}", t.str(v).unwrap_or_default()),
            V::List(_) => {
                let items: Vec<String> = t.list(v).iter().map(|&x| show(t, x)).collect();
                format!("[{}]", items.join(","))
            }
            V::Dict(_) => {
                let pairs: Vec<String> = t
                    .pairs(v)
                    .map(|(k, x)| format!("{}:{}", show(t, k), show(t, x)))
                    .collect();
                format!("{{{}}}", pairs.join(","))
            }
        }
    }

    /// Whether a reader taking dicts with a `take` key takes `p` from a list.
    fn taken(p: &P) -> bool {
        match p {
            P::Shared(rc) => taken(rc),
            P::Dict(pairs) => pairs
                .iter()
                .any(|(k, _)| matches!(k, P::Str(s) if s == "take")),
            _ => false,
        }
    }

    /// `p` as [`show`] writes the tree left once such dicts are taken from
    /// every list (not from tuples or dict values, which are not offered),
    /// and what is taken, in `took` (`None`: nothing is taken). A shared
    /// value is built once: what is taken inside it is taken once.
    struct Expect {
        took: Option<Vec<String>>,
        built: std::collections::HashMap<*const P, String>,
    }

    fn expect(p: &P, took: &mut Option<Vec<String>>) -> String {
        let mut e = Expect {
            took: took.take(),
            built: Default::default(),
        };
        let s = e.show(p);
        *took = e.took;
        s
    }

    impl Expect {
        fn show(&mut self, p: &P) -> String {
            match p {
                P::None => "N".into(),
                P::Bool(b) => b.to_string(),
                P::Int(i) => i.to_string(),
                P::Float(f) => format!("{f:?}"),
                P::Str(s) => format!("{s:?}"),
                P::Shared(rc) => {
                    if let Some(s) = self.built.get(&Rc::as_ptr(rc)) {
                        return s.clone();
                    }
                    let s = self.show(rc);
                    self.built.insert(Rc::as_ptr(rc), s.clone());
                    s
                }
                P::List(items) => {
                    let mut kept = Vec::new();
                    for x in items {
                        let s = self.show(x);
                        if let Some(took) = self.took.as_mut().filter(|_| taken(x)) {
                            took.push(s);
                        } else {
                            kept.push(s);
                        }
                    }
                    format!("[{}]", kept.join(","))
                }
                P::Tuple(items) => {
                    let items: Vec<String> = items.iter().map(|x| self.show(x)).collect();
                    format!("[{}]", items.join(","))
                }
                P::Dict(pairs) => {
                    let pairs: Vec<String> = pairs
                        .iter()
                        .map(|(k, x)| format!("{}:{}", self.show(k), self.show(x)))
                        .collect();
                    format!("{{{}}}", pairs.join(","))
                }
            }
        }
    }

    /// A random value from `seed`: lists, tuples and dicts nested a few
    /// deep, some dicts to be taken, some values held in several places
    /// (named again before, inside and after what is taken).
    fn value(seed: u64) -> P {
        struct Gen {
            state: u64,
            pool: Vec<Rc<P>>,
        }
        impl Gen {
            fn next(&mut self, n: u64) -> u64 {
                // splitmix64
                self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) % n
            }
            fn value(&mut self, depth: u32) -> P {
                let pick = if depth == 0 {
                    self.next(3)
                } else {
                    self.next(10)
                };
                match pick {
                    0 => P::Int(self.next(1000) as i64),
                    1 => P::str(["a", "bb", "take", "frame"][self.next(4) as usize]),
                    2 if !self.pool.is_empty() => {
                        let i = self.next(self.pool.len() as u64) as usize;
                        P::Shared(self.pool[i].clone())
                    }
                    2 | 3 => P::None,
                    4 | 5 => {
                        let n = self.next(6);
                        P::List((0..n).map(|_| self.value(depth - 1)).collect())
                    }
                    6 => {
                        let n = self.next(4);
                        P::Tuple((0..n).map(|_| self.value(depth - 1)).collect())
                    }
                    7 | 8 => {
                        let n = self.next(4);
                        let mut pairs: Vec<(P, P)> = (0..n)
                            .map(|i| (P::str(format!("k{i}")), self.value(depth - 1)))
                            .collect();
                        if self.next(2) == 0 {
                            pairs.push((P::str("take"), P::Int(1)));
                        }
                        P::Dict(pairs)
                    }
                    _ => {
                        let v = Rc::new(self.value(depth - 1));
                        self.pool.push(v.clone());
                        P::Shared(v)
                    }
                }
            }
        }
        let mut g = Gen {
            state: seed,
            pool: Vec::new(),
        };
        let before = g.value(3);
        let history: Vec<P> = (0..g.next(40)).map(|_| g.value(3)).collect();
        let after = g.value(3);
        // Values of the pool named again once the history was taken.
        let again: Vec<P> = g.pool.iter().map(|v| P::Shared(v.clone())).collect();
        P::dict([
            ("before", before),
            ("history", P::List(history)),
            ("after", after),
            ("again", P::Tuple(again)),
        ])
    }

    fn takes(bytes: &[u8]) -> (String, Vec<String>) {
        let gets = super::super::pickle_budget::check_gets(bytes).unwrap();
        let mut took = Vec::new();
        let mut take = |t: &Tree, _list: u32, v: V| {
            let yes = matches!(v, V::Dict(_)) && t.get(v, "take").is_some();
            if yes {
                took.push(show(t, v));
            }
            yes
        };
        let t = decode_taking(bytes, gets, &mut take).unwrap();
        let root = show(&t, t.root.unwrap());
        (root, took)
    }

    proptest! {
        /// What is left, and each item taken as it was taken, are what
        /// the whole decoded value says, in both memo layouts.
        #[test]
        fn taking_leaves_the_rest_as_decoding_it_all(seed in any::<u64>()) {
            let p = value(seed);
            let mut want_took = Some(Vec::new());
            let want = expect(&p, &mut want_took);
            let mut want_took = want_took.unwrap_or_default();
            want_took.sort();
            for bytes in [to_vec(&p), to_vec_as_python(&p)] {
                let (root, mut took) = takes(&bytes);
                took.sort();
                prop_assert_eq!(&root, &want);
                prop_assert_eq!(&took, &want_took);
                // Decoding it all agrees with the expectation's writing.
                let t = decode(&bytes).unwrap();
                prop_assert_eq!(show(&t, t.root.unwrap()), expect(&p, &mut None));
            }
        }
    }

    /// A long history of entries, each with a list of its own and frames
    /// shared with later entries (as a memory snapshot): the tree holds
    /// what is still named, not the history.
    #[test]
    fn what_was_taken_is_let_go() {
        let frames: Vec<Rc<P>> = (0..50)
            .map(|i| Rc::new(P::dict([("name", P::str(format!("f{i}")))])))
            .collect();
        let entry = |i: usize| {
            let stack: Vec<P> = (0..20)
                .map(|j| P::Shared(frames[(i + j) % 50].clone()))
                .collect();
            P::dict([("action", P::str("alloc")), ("frames", P::List(stack))])
        };
        let history: Vec<P> = (0..20_000).map(entry).collect();
        let p = P::dict([("device_traces", P::List(vec![P::List(history)]))]);
        let bytes = to_vec_as_python(&p);
        let gets = super::super::pickle_budget::check_gets(&bytes[..]).unwrap();
        let mut n = 0;
        let mut take = |t: &Tree, _: u32, v: V| {
            let yes = t.get(v, "action").is_some();
            n += usize::from(yes);
            yes
        };
        let t = decode_taking(&bytes[..], gets, &mut take).unwrap();
        assert_eq!(n, 20_000);
        // 20,000 entries of 4 + 20 items were read; what is held is the
        // last batch's at most, and the frames.
        assert!(t.items.len() < 1000 * 24 + 50 * 2, "{}", t.items.len());
        assert!(t.spans.len() < 2000 + 60, "{}", t.spans.len());
        assert!(t.generation() >= 19);
        let root = t.root.unwrap();
        let traces = t.list(t.get(root, "device_traces").unwrap());
        assert_eq!(traces.len(), 1);
        assert!(t.list(traces[0]).is_empty());
    }

    #[test]
    fn a_memo_key_past_the_file_is_refused_without_reserving_it() {
        // BINPUT 2^28 - 1 in a 9-byte pickle: a dense memo up to it took 4 GB.
        let bomb = b"\x80\x02Nr\xff\xff\xff\x0f.";
        assert!(decode(bomb)
            .unwrap_err()
            .contains("memo index out of range"));
        let e = super::super::pickle_budget::check_gets(&bomb[..]).unwrap_err();
        assert!(e.contains("memo index out of range"), "{e}");
    }
}
