//! Walks a JSON document of events (an object with an event array, such as a
//! Chrome trace's `traceEvents` or an execution trace's `nodes`, or a bare
//! array) with the [`Splitter`], handing each event's slice to a [`Sink`] to
//! parse and keep. The PyTorch profiler, XLA trace JSON and execution trace
//! readers share it, and with it the fast paths that guess where an event
//! ends from the file's layout; no reader holds more than one event's value.

use crate::model::Warning;
use std::io::Read;
use std::path::Path;

use super::split::{Closer, Pos, Splitter};
use crate::error::Error;

/// What a reader does with the events (and other top-level members) of a
/// Chrome-trace document.
pub(crate) trait Sink {
    type Event;

    /// The top-level member that holds the event array.
    const EVENTS: &'static str = "traceEvents";

    /// Parses one event from its complete slice: the event, `None` for a
    /// JSON value that is not an object, or serde_json's error.
    fn parse(&mut self, raw: &[u8]) -> Result<Option<Self::Event>, serde_json::Error>;

    /// Whether the last [`Sink::parse`] stopped early on purpose (an event
    /// only counted), so that it did not check the slice was one value.
    fn partial(&self) -> bool {
        false
    }

    /// Keeps a parsed event, or records why it was left out; `start` says
    /// where its slice began.
    fn take(
        &mut self,
        parsed: Result<Option<Self::Event>, serde_json::Error>,
        start: impl FnOnce() -> Pos,
    );

    /// Whether the top-level member `key` (other than `traceEvents`) is
    /// wanted; the others are skipped unparsed.
    fn wants(&self, _key: &str) -> bool {
        false
    }

    /// A wanted top-level member's raw value, and where it starts.
    fn member(&mut self, _key: &str, _raw: &[u8], _at: Pos) {}

    /// The document has an event array (possibly empty).
    fn saw_events(&mut self);

    /// A second event array under the same key: JSON says the last member
    /// of a name wins, so what the first gave is to be dropped. `at` is
    /// where the second starts.
    fn events_again(&mut self, at: Pos);
}

/// Walks the document in `reader` into `sink`. A document that stops early
/// (cut off or damaged) after `kept(sink)` events is a warning, before any an
/// error; `what` names the file's kind in both ("an XLA profiler trace").
pub(crate) fn walk<S: Sink>(
    reader: impl Read,
    sink: &mut S,
    path: &Path,
    what: &str,
    kept: fn(&S) -> u64,
) -> Result<Vec<Warning>, Error> {
    let mut sp = Splitter::new(reader);
    let Err(stop) = document(&mut sp, sink) else {
        return Ok(Vec::new());
    };
    let (at, msg) = stop.describe(&sp);
    match kept(sink) {
        0 => Err(Error::Parse {
            path: path.to_owned(),
            at: at.to_string(),
            msg: format!("{msg} (reading {what})"),
        }),
        n => Ok(vec![Warning::damaged(format!(
            "{}: {what} cut off or damaged at {at} ({msg}); read the {n} complete events before it",
            path.display()
        ))]),
    }
}

/// The warning for a document with two event arrays (see [`Sink::events_again`]).
pub(crate) fn again_warning(path: &Path, at: Pos, dropped: u64) -> Warning {
    Warning::damaged(format!(
        "{}: a second event array at {at}; JSON's last member of a name wins, so it is read and \
         the {dropped} events of the first are left out",
        path.display()
    ))
}

/// Why reading stopped early.
pub(crate) enum Stop {
    /// The input ended inside the document.
    Cut,
    Bad {
        at: Pos,
        msg: String,
    },
    Io(std::io::Error),
}

impl Stop {
    /// Where reading stopped and why, for messages.
    pub(crate) fn describe<R: Read>(self, sp: &Splitter<R>) -> (Pos, String) {
        match self {
            Stop::Io(e) => (sp.pos(), format!("read error: {e}")),
            Stop::Cut => (sp.pos(), "unexpected end of file".to_owned()),
            Stop::Bad { at, msg } => (at, msg),
        }
    }
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

pub(crate) fn bad<R: Read>(sp: &Splitter<R>, msg: impl Into<String>) -> Stop {
    Stop::Bad {
        at: sp.pos(),
        msg: msg.into(),
    }
}

/// A Chrome trace: an object with `traceEvents` (and metadata such as
/// `deviceProperties`), or a bare array of events.
pub(crate) fn document<R: Read, S: Sink>(sp: &mut Splitter<R>, b: &mut S) -> Result<(), Stop> {
    // A UTF-8 byte order mark (some editors write one) is not JSON: skip it.
    if sp.peek()? == Some(0xEF) && sp.next_is(b"\xEF\xBB\xBF")? {
        sp.consume(3);
    }
    match sp.peek()? {
        Some(b'{') => {
            sp.bump();
            members(sp, b)?;
        }
        Some(b'[') => {
            b.saw_events();
            events(sp, b)?;
        }
        Some(_) => return Err(bad(sp, "expected a JSON object or array")),
        None => return Err(bad(sp, "the file is empty")),
    }
    match sp.peek()? {
        None => Ok(()),
        Some(_) => Err(bad(sp, "trailing characters after the trace")),
    }
}

fn members<R: Read, S: Sink>(sp: &mut Splitter<R>, b: &mut S) -> Result<(), Stop> {
    if sp.peek()? == Some(b'}') {
        sp.bump();
        return Ok(());
    }
    let mut seen_events = false;
    loop {
        if sp.peek()?.ok_or(Stop::Cut)? != b'"' {
            return Err(bad(sp, "expected a key in double quotes"));
        }
        let raw = sp.value()?.ok_or(Stop::Cut)?;
        let key: String =
            serde_json::from_slice(raw).map_err(|e| bad(sp, format!("bad key: {e}")))?;
        match sp.peek()? {
            Some(b':') => sp.bump(),
            Some(_) => return Err(bad(sp, "expected ':' after a key")),
            None => return Err(Stop::Cut),
        }
        match key.as_str() {
            key if key == S::EVENTS => {
                match sp.peek()?.ok_or(Stop::Cut)? {
                    b'[' => {}
                    _ => return Err(bad(sp, format!("\"{key}\" is not an array"))),
                }
                if seen_events {
                    b.events_again(sp.pos());
                }
                seen_events = true;
                b.saw_events();
                events(sp, b)?;
            }
            key if b.wants(key) => {
                let raw = sp.value()?.ok_or(Stop::Cut)?;
                let len = raw.len();
                b.member(key, sp.last(len), sp.pos_of_last(len));
            }
            _ => {
                sp.value()?.ok_or(Stop::Cut)?;
            }
        }
        match sp.peek()? {
            Some(b',') => sp.bump(),
            Some(b'}') => {
                sp.bump();
                return Ok(());
            }
            Some(_) => return Err(bad(sp, "expected ',' or '}' after a value")),
            None => return Err(Stop::Cut),
        }
    }
}

/// How the file lays its events out, learned from the events read so far: it
/// picks the fast path that guesses where the next event ends.
enum Layout {
    /// One event per line.
    Lines,
    /// Every event closed the same way: by a line of its own, as the PyTorch
    /// profiler writes them, or by `}` and the separator, all on one line.
    Closed(Box<Closer>),
    /// Neither: every event is split by brackets.
    Other,
}

/// The event array; each event is parsed from its own slice.
fn events<R: Read, S: Sink>(sp: &mut Splitter<R>, b: &mut S) -> Result<(), Stop> {
    sp.bump();
    if sp.peek()? == Some(b']') {
        sp.bump();
        return Ok(());
    }
    let mut layout = Layout::Lines;
    // Consecutive events the fast path could not take; past a few, it is off.
    let mut misses = 0;
    loop {
        let took = match &layout {
            Layout::Lines => guessed_event(sp, b, Splitter::line_value)?,
            Layout::Closed(closer) => guessed_event(sp, b, |sp| sp.closed_value(closer))?,
            Layout::Other => false,
        };
        if took {
            misses = 0;
        } else {
            let raw = sp.value()?.ok_or(Stop::Cut)?;
            let len = raw.len();
            let parsed = b.parse(raw);
            b.take(parsed, || sp.pos_of_last(len));
            let closer = match layout {
                Layout::Lines => Closer::learn(sp.last(len), sp.buffered()),
                _ => None,
            };
            misses += 1;
            if let Some(closer) = closer {
                layout = Layout::Closed(Box::new(closer));
                misses = 0;
            } else if misses >= 8 {
                layout = Layout::Other;
            }
        }
        match sp.peek()? {
            Some(b',') => sp.bump(),
            Some(b']') => {
                sp.bump();
                return Ok(());
            }
            Some(_) => return Err(bad(sp, "expected ',' or ']' between events")),
            None => return Err(Stop::Cut),
        }
    }
}

/// The fast path: `guess` says where the next event ends from the layout (a
/// raw newline cannot occur inside a JSON string, so an event alone on its
/// line ends there, and one closed by a line of its own ends at that line) and
/// the bracket-matching splitter need not scan it; parsing the guess checks it.
/// True when it took the next event; false (nothing consumed) when the guess
/// fails, and the caller splits by brackets.
fn guessed_event<R: Read, S: Sink>(
    sp: &mut Splitter<R>,
    b: &mut S,
    guess: impl FnOnce(&mut Splitter<R>) -> std::io::Result<Option<usize>>,
) -> Result<bool, Stop> {
    if sp.peek()? != Some(b'{') {
        return Ok(false);
    }
    let Some(len) = guess(sp)? else {
        return Ok(false);
    };
    let parsed = b.parse(sp.ahead(len));
    if b.partial() {
        // Read only as far as its `ph`: that does not check the guess. A guess
        // with no `{` after its first byte and no `}` before its last is one
        // object (without nested ones); otherwise brackets find its end.
        if is_flat_object(sp.ahead(len)) {
            sp.consume(len);
            b.take(parsed, || sp.pos_of_last(len));
            return Ok(true);
        }
        let raw = sp.value()?.ok_or(Stop::Cut)?;
        let len = raw.len();
        b.take(parsed, || sp.pos_of_last(len));
        return Ok(true);
    }
    match parsed {
        // A guess that holds more (or less) than one event fails to parse as one.
        Err(_) => Ok(false),
        parsed => {
            sp.consume(len);
            b.take(parsed, || sp.pos_of_last(len));
            Ok(true)
        }
    }
}

/// An object with no object nested in it: `{` only first, `}` only last, and
/// that `}` outside any string (no escapes, and quotes that pair up).
fn is_flat_object(raw: &[u8]) -> bool {
    matches!(raw, [b'{', inner @ .., b'}']
        if memchr::memchr3(b'{', b'}', b'\\', inner).is_none()
            && memchr::memchr_iter(b'"', inner).count().is_multiple_of(2))
}

/// serde_json's message without its position, which is relative to the event's
/// slice (the caller reports the position in the file).
pub(crate) fn serde_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// Keeps every event as serde_json parses its slice.
    #[derive(Default)]
    struct Values {
        got: Vec<Value>,
        skipped: usize,
        saw: bool,
    }

    impl Sink for Values {
        type Event = Value;
        fn parse(&mut self, raw: &[u8]) -> Result<Option<Value>, serde_json::Error> {
            serde_json::from_slice(raw).map(Some)
        }
        fn take(
            &mut self,
            parsed: Result<Option<Value>, serde_json::Error>,
            _: impl FnOnce() -> Pos,
        ) {
            match parsed {
                Ok(Some(v)) => self.got.push(v),
                _ => self.skipped += 1,
            }
        }
        fn saw_events(&mut self) {
            self.saw = true;
        }
        fn events_again(&mut self, _: Pos) {
            self.got.clear();
        }
    }

    /// Hands out at most `step` bytes per read, so values straddle reads.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn walk(doc: &str, step: usize) -> Values {
        let mut sp = Splitter::new(Trickle {
            data: doc.as_bytes(),
            step,
        });
        let mut v = Values::default();
        if document(&mut sp, &mut v).is_err() {
            panic!("walk failed on {doc}");
        }
        v
    }

    fn text() -> impl Strategy<Value = String> {
        // Brackets, quotes, escapes and line breaks inside strings are where a
        // splitter that does not parse can go wrong.
        proptest::string::string_regex(r#"[a-z{}\[\]",:\\ \n\t#é]{0,12}"#).unwrap()
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            text().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    fn event() -> impl Strategy<Value = Value> {
        let args = proptest::collection::btree_map(text(), scalar(), 0..4);
        let nested = proptest::collection::vec(scalar(), 0..3);
        (
            prop_oneof![Just("X"), Just("i"), Just("f"), Just("M")],
            text(),
            scalar(),
            args,
            nested,
        )
            .prop_map(|(ph, name, ts, args, nested)| {
                json!({"ph": ph, "name": name, "ts": ts, "args": args, "grid": nested})
            })
    }

    /// The layouts the walker has fast paths for, and one it has none for.
    fn layout(events: &[Value], how: u8) -> String {
        let each: Vec<String> = events
            .iter()
            .enumerate()
            .map(|(i, e)| match how {
                0 | 2 => e.to_string(),
                1 => serde_json::to_string_pretty(e)
                    .unwrap()
                    .replace('\n', "\n  "),
                // No layout holds: compact and pretty mixed.
                _ if i % 2 == 0 => e.to_string(),
                _ => serde_json::to_string_pretty(e).unwrap(),
            })
            .collect();
        let body = match how {
            // One event per line.
            0 => format!("[\n{}\n]", each.join(",\n")),
            // Each event closed by a line of its own, as the PyTorch profiler writes.
            1 => format!("[\n  {}\n]", each.join(",\n  ")),
            // All on one line.
            2 => format!("[{}]", each.join(", ")),
            _ => format!("[ {} ]", each.join(" ,\n\t")),
        };
        format!("{{\"schemaVersion\": 1, \"traceEvents\": {body}, \"displayTimeUnit\": \"ns\"}}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn walks_every_layout_as_serde_json_parses_it(
            events in proptest::collection::vec(event(), 0..24),
            how in 0u8..4,
            step in prop_oneof![1usize..8, Just(1 << 20)],
        ) {
            let doc = layout(&events, how);
            let whole: Value = serde_json::from_str(&doc).unwrap();
            let walked = walk(&doc, step);
            prop_assert!(walked.saw);
            prop_assert_eq!(walked.skipped, 0);
            prop_assert_eq!(&Value::Array(walked.got), &whole["traceEvents"]);
            // A bare event array is a document too.
            let bare = &doc[doc.find('[').unwrap()..doc.rfind(']').unwrap() + 1];
            let walked = walk(bare, step);
            prop_assert_eq!(&Value::Array(walked.got), &whole["traceEvents"]);
        }
    }
}
