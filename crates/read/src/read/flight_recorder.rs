//! NCCL Flight Recorder dumps (`TORCH_NCCL_TRACE_BUFFER_SIZE`,
//! `TORCH_NCCL_DUMP_ON_TIMEOUT`): one file per rank, a dict pickled by
//! PyTorch's own pickler or written as JSON, schema `version` 2.x with
//! `entries`, `pg_config`, `pg_status` and `nccl_comm_state`. Fields a
//! version lacks are absent, not errors; no pickle code runs (data opcodes
//! only, decoded by `pickle_tree`, whose reading is bounded). A dump cut off by
//! the process's death is read up to its last whole entry.

use crate::model::Warning;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroI64;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::pickle_tree::{Tree, V};
use crate::error::Error;
use crate::model::flight::{
    CallIo, CallState, FrCall, FrDump, FrEntry, FrGroup, FrStatus, Frame, Name,
};

/// A number or a string holding one: the JSON dump writes `pg_status` and
/// `pg_config` values as strings, the pickle as numbers.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum Scalar {
    Int(i64),
    Float(f64),
    Text(String),
    Bool(bool),
}

impl Scalar {
    fn int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            Self::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(*f as i64),
            Self::Text(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Text(s) => s.clone(),
            Self::Bool(b) => b.to_string(),
        }
    }
}

/// Text borrowed from the file where it can be (no escapes), owned where
/// not: entries repeat the same few names thousands of times, so they are
/// looked up, not allocated.
#[derive(Debug, Default, Clone)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("text")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(Visit)
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawDump<'a> {
    version: Option<Scalar>,
    comm_lib_version: Option<String>,
    nccl_version: Option<String>,
    rank: Option<i64>,
    pg_config: BTreeMap<String, RawGroup>,
    pg_status: BTreeMap<String, BTreeMap<String, Option<Scalar>>>,
    #[serde(borrow)]
    entries: Vec<RawEntry<'a>>,
    /// A pickle's distinct stack frames, which its entries name by index
    /// (`RawEntry::frame_ids`).
    #[serde(skip)]
    frame_table: Vec<RawFrame<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawGroup {
    name: Option<String>,
    desc: Option<String>,
    ranks: Option<RawRanks>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRanks {
    List(Vec<i64>),
    Text(String),
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawEntry<'a> {
    pg_id: Option<i64>,
    #[serde(borrow)]
    process_group: Option<Vec<Text<'a>>>,
    collective_seq_id: Option<i64>,
    /// Before 2.3: one sequence for every call.
    seq_id: Option<i64>,
    p2p_seq_id: Option<i64>,
    #[serde(borrow)]
    profiling_name: Option<Text<'a>>,
    time_created_ns: Option<i64>,
    /// A pickled entry's tensor fields, decoded.
    #[serde(skip)]
    input_sizes: Vec<Vec<i64>>,
    #[serde(skip)]
    output_sizes: Vec<Vec<i64>>,
    #[serde(skip)]
    input_dtypes: Vec<Text<'a>>,
    #[serde(skip)]
    output_dtypes: Vec<Text<'a>>,
    /// A JSON entry's, as written: a dump repeats a few shapes, so each
    /// distinct text is parsed once (`Ios`).
    #[serde(borrow, rename = "input_sizes")]
    json_input_sizes: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "output_sizes")]
    json_output_sizes: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "input_dtypes")]
    json_input_dtypes: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "output_dtypes")]
    json_output_dtypes: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    state: Option<Text<'a>>,
    time_discovered_started_ns: Option<i64>,
    time_discovered_completed_ns: Option<i64>,
    timeout_ms: Option<i64>,
    is_p2p: Option<bool>,
    #[serde(borrow)]
    frames: Vec<RawFrame<'a>>,
    /// A pickled entry's frames, as indices into `RawDump::frame_table`.
    #[serde(skip)]
    frame_ids: Vec<u32>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawFrame<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    filename: Text<'a>,
    line: i64,
}

/// Whether a file's first bytes look like a dump: a pickle or JSON object
/// naming the dump's own keys.
pub(crate) fn sniff(bytes: &[u8], has: impl Fn(&str) -> bool) -> u8 {
    let entries = has("profiling_name") && has("collective_seq_id");
    // A profiler trace's `distributedInfo` has a `pg_config` too, but no
    // `pg_status`.
    let groups = has("pg_status");
    let profiler = has("traceEvents") || has("distributedInfo") || has("schemaVersion");
    let pickle = bytes.first() == Some(&0x80) && (entries || groups || has("pg_config"));
    let json = bytes.trim_ascii_start().starts_with(b"{") && (entries || groups);
    3 * u8::from((pickle || json) && !profiler)
}

/// The rank in a dump's file name: `nccl_trace_rank_12`, or the digits
/// ending any prefix (`TORCH_FR_DUMP_TEMP_FILE=/tmp/trace_` gives `trace_12`).
pub(crate) fn rank_of(path: &Path) -> Option<u32> {
    crate::naming::rank_from_name(path).or_else(|| split_name(path).1?.parse().ok())
}

/// A dump's file name as its prefix and the digits ending it
/// (`nccl_trace_rank_`, `12`); a `.json` ending is left out.
pub fn split_name(path: &Path) -> (&str, Option<&str>) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let prefix = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = &stem[prefix.len()..];
    (prefix, (!digits.is_empty()).then_some(digits))
}

/// Reads one dump (pickle or JSON, by its first byte).
pub fn read(bytes: &[u8], path: &Path) -> Result<(FrDump, Vec<Warning>), Error> {
    let not = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    let mut warnings = Vec::new();
    let mut truncated = false;
    // What the entries borrow their text from.
    let (mended, tree);
    let raw: RawDump = if bytes.first() == Some(&0x80) {
        let undecodable = |e: String| not(format!("not a Flight Recorder dump: {e}"));
        tree = match super::pickle_tree::decode(bytes) {
            Ok(t) => t,
            // Cut off (the process died while writing): mended at its last
            // whole entry, if it has one.
            Err(e) if e.starts_with("it ends") => {
                mended = super::pickle_budget::check_and_mend(bytes).map_err(|why| {
                    not(format!(
                        "a pickle that cannot be decoded within bounds: {why}"
                    ))
                })?;
                truncated = mended.is_some();
                super::pickle_tree::decode(mended.as_deref().unwrap_or(bytes))
                    .map_err(undecodable)?
            }
            Err(e) => return Err(undecodable(e)),
        };
        let raw = from_tree(&tree);
        // Checked first: a spent budget reads as empty containers.
        tree.within_budget(bytes.len()).map_err(|why| {
            not(format!(
                "a pickle that cannot be decoded within bounds: {why}"
            ))
        })?;
        raw.map_err(|e| {
            not(format!(
                "not a Flight Recorder dump (pickled dict with `entries`): {e}"
            ))
        })?
    } else {
        match serde_json::from_slice(bytes) {
            Ok(raw) => raw,
            Err(e) if e.is_eof() => {
                truncated = true;
                json_entries_before_cut(bytes).ok_or_else(|| {
                    not(format!(
                        "a JSON Flight Recorder dump cut off before its first entry: {e}"
                    ))
                })?
            }
            Err(e) => {
                return Err(not(format!(
                    "not a Flight Recorder dump (JSON object with `entries`): {e}"
                )))
            }
        }
    };
    if raw.entries.is_empty() && raw.pg_config.is_empty() && raw.pg_status.is_empty() {
        return Err(not(
            "no `entries`, `pg_config` or `pg_status`: not a Flight Recorder dump".into(),
        ));
    }
    let rank = rank_of(path);
    let stated = raw.rank.and_then(|r| u32::try_from(r).ok());
    let rank = match (rank, stated) {
        // The name decides, as for PyTorch's own analyzer.
        (Some(n), Some(s)) if n != s => {
            warnings.push(Warning::new(
                crate::model::warning::Kind::Ranks,
                format!(
                    "{}: the dump says rank {s}, its name rank {n}; using {n}",
                    path.display()
                ),
            ));
            n
        }
        (n, s) => n.or(s).unwrap_or(0),
    };
    let mut dump = convert(raw, rank, path, &mut warnings).map_err(|e| {
        not(format!(
            "not a Flight Recorder dump (JSON object with `entries`): {e}"
        ))
    })?;
    if truncated {
        dump.truncated = true;
        warnings.push(Warning::damaged(format!(
            "{}: cut off (the process died while writing it?); read its first {} entries",
            path.display(),
            dump.entries.len()
        )));
    }
    Ok((dump, warnings))
}

/// The entries of a JSON dump that ends early, each parsed on its own up to
/// the cut. The JSON writer sorts keys, so `entries` comes second and the
/// groups after it are lost.
fn json_entries_before_cut(bytes: &[u8]) -> Option<RawDump<'_>> {
    let key = memchr::memmem::find(bytes, b"\"entries\"")?;
    let mut at = key + "\"entries\"".len();
    let skip = |at: &mut usize, c: u8| {
        while bytes.get(*at).is_some_and(u8::is_ascii_whitespace) {
            *at += 1;
        }
        if bytes.get(*at) == Some(&c) {
            *at += 1;
            true
        } else {
            false
        }
    };
    if !(skip(&mut at, b':') && skip(&mut at, b'[')) {
        return None;
    }
    let mut entries = Vec::new();
    loop {
        let mut stream = serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<RawEntry>();
        match stream.next() {
            Some(Ok(e)) => {
                entries.push(e);
                at += stream.byte_offset();
            }
            _ => break,
        }
        if !skip(&mut at, b',') {
            break;
        }
    }
    Some(RawDump {
        entries,
        ..Default::default()
    })
}

/// A decoded pickle as the dump's fields; a field of the wrong type is an
/// error, as for the JSON reader.
fn from_tree<'a>(t: &'a Tree) -> Result<RawDump<'a>, String> {
    let root = t
        .root
        .filter(|r| matches!(r, V::Dict(_)))
        .ok_or("not a dict")?;
    let mut raw = RawDump::default();
    for (k, v) in t.pairs(root) {
        let Some(k) = t.str(k) else { continue };
        match k {
            "version" => raw.version = scalar(t, v),
            "comm_lib_version" => raw.comm_lib_version = t.str(v).map(str::to_owned),
            "nccl_version" => raw.nccl_version = t.str(v).map(str::to_owned),
            "rank" => raw.rank = v.int(),
            "pg_config" => {
                for (name, g) in t.pairs(v) {
                    let name = t.str(name).ok_or("a `pg_config` key that is not text")?;
                    let text = |k: &str| t.get(g, k).and_then(|v| t.str(v)).map(str::to_owned);
                    let ranks = match t.get(g, "ranks") {
                        Some(r @ V::List(_)) => Some(RawRanks::List(
                            t.list(r).iter().filter_map(|x| x.int()).collect(),
                        )),
                        Some(r) => t.str(r).map(|s| RawRanks::Text(s.to_owned())),
                        None => None,
                    };
                    raw.pg_config.insert(
                        name.to_owned(),
                        RawGroup {
                            name: text("name"),
                            desc: text("desc"),
                            ranks,
                        },
                    );
                }
            }
            "pg_status" => {
                for (id, s) in t.pairs(v) {
                    let id = (t.str(id))
                        .map_or_else(|| id.int().unwrap_or(-1).to_string(), str::to_owned);
                    let fields = t
                        .pairs(s)
                        .filter_map(|(k, x)| Some((t.str(k)?.to_owned(), scalar(t, x))))
                        .collect();
                    raw.pg_status.insert(id, fields);
                }
            }
            "entries" => {
                let mut frames = EntryCache::new(t);
                let list = t.list(v);
                raw.entries = Vec::with_capacity(list.len());
                for (i, &e) in list.iter().enumerate() {
                    raw.entries.push(
                        entry_from_tree(t, e, &mut frames)
                            .map_err(|why| format!("entry {i}: {why}"))?,
                    );
                }
                raw.frame_table = frames.table;
            }
            _ => {}
        }
    }
    Ok(raw)
}

fn scalar(t: &Tree, v: V) -> Option<Scalar> {
    Some(match v {
        V::Int(i) => Scalar::Int(i),
        V::Float(f) => Scalar::Float(f),
        V::Bool(b) => Scalar::Bool(b),
        V::Str(_) | V::Bytes(_) => Scalar::Text(t.str(v)?.to_owned()),
        _ => return None,
    })
}

/// What reading a pickle's entries remembers from one entry to the next:
/// each distinct stack frame, read once (PyTorch's pickler writes a frame
/// once and names it again wherever it recurs, so a frame is looked up by
/// the container it was decoded to, then by its text), and the previous
/// entry's keys.
struct EntryCache<'a> {
    /// The last entry's keys: each as decoded (the same memo string is the
    /// same value), and its field.
    keys: Vec<(V, Field)>,
    table: Vec<RawFrame<'a>>,
    /// Per container of the tree, its frame's id (`u32::MAX`: not seen).
    by_container: Vec<u32>,
    by_text: foldhash::HashMap<(&'a str, &'a str, i64), u32>,
}

impl<'a> EntryCache<'a> {
    fn new(t: &Tree) -> Self {
        Self {
            keys: Vec::new(),
            table: Vec::new(),
            by_container: vec![u32::MAX; t.containers()],
            by_text: Default::default(),
        }
    }

    fn id(&mut self, t: &'a Tree, f: V) -> u32 {
        let container = match f {
            V::Dict(c) => Some(c as usize),
            _ => None,
        };
        if let Some(&i) = container.and_then(|c| self.by_container.get(c)) {
            if i != u32::MAX {
                return i;
            }
        }
        let text = |k| t.get(f, k).and_then(|v| t.str(v)).unwrap_or("");
        let key = (
            text("name"),
            text("filename"),
            t.get(f, "line").and_then(V::int).unwrap_or(0),
        );
        let next = self.table.len() as u32;
        let i = *self.by_text.entry(key).or_insert(next);
        if i == next {
            self.table.push(RawFrame {
                name: Text(Cow::Borrowed(key.0)),
                filename: Text(Cow::Borrowed(key.1)),
                line: key.2,
            });
        }
        if let Some(slot) = container.and_then(|c| self.by_container.get_mut(c)) {
            *slot = i;
        }
        i
    }
}

fn entry_from_tree<'a>(
    t: &'a Tree,
    e: V,
    frames: &mut EntryCache<'a>,
) -> Result<RawEntry<'a>, String> {
    if !matches!(e, V::Dict(_)) {
        return Err("not a dict".into());
    }
    let mut r = RawEntry::default();
    let int = |k: &str, v: V| match v {
        V::None => Ok(None),
        _ => v
            .int()
            .map(Some)
            .ok_or_else(|| format!("`{k}` is not an integer")),
    };
    let texts = |k: &str, v: V| -> Result<Vec<Text<'a>>, String> {
        t.list(v)
            .iter()
            .map(|x| {
                t.str(*x)
                    .map(|s| Text(Cow::Borrowed(s)))
                    .ok_or_else(|| format!("`{k}` is not a list of text"))
            })
            .collect()
    };
    let sizes = |k: &str, v: V| -> Result<Vec<Vec<i64>>, String> {
        t.list(v)
            .iter()
            .map(|d| {
                t.list(*d)
                    .iter()
                    .map(|x| {
                        x.int()
                            .ok_or_else(|| format!("`{k}` is not a list of lists of integers"))
                    })
                    .collect()
            })
            .collect()
    };
    for (n, (key, v)) in t.pairs(e).enumerate() {
        // Every entry names its keys in the same order, by the same memo
        // strings: the key at the same place, the same string as the
        // previous entry's, is the same field, found without its text.
        let field = match frames.keys.get(n) {
            Some(&(same, f)) if same == key => f,
            _ => {
                let Some(k) = t.str(key) else { continue };
                let f = Field::of(k);
                if frames.keys.len() <= n {
                    frames.keys.resize(n + 1, (V::None, Field::Other));
                }
                frames.keys[n] = (key, f);
                f
            }
        };
        if field == Field::Other {
            continue;
        }
        let k = t.str(key).unwrap_or_default();
        match field {
            Field::PgId => r.pg_id = int(k, v)?,
            Field::CollectiveSeqId => r.collective_seq_id = int(k, v)?,
            Field::SeqId => r.seq_id = int(k, v)?,
            Field::P2pSeqId => r.p2p_seq_id = int(k, v)?,
            Field::TimeCreated => r.time_created_ns = int(k, v)?,
            Field::TimeStarted => r.time_discovered_started_ns = int(k, v)?,
            Field::TimeCompleted => r.time_discovered_completed_ns = int(k, v)?,
            Field::TimeoutMs => r.timeout_ms = int(k, v)?,
            Field::ProcessGroup => r.process_group = Some(texts(k, v)?),
            Field::ProfilingName => r.profiling_name = t.str(v).map(|s| Text(Cow::Borrowed(s))),
            Field::State => r.state = t.str(v).map(|s| Text(Cow::Borrowed(s))),
            Field::IsP2p => r.is_p2p = v.bool(),
            Field::InputSizes => r.input_sizes = sizes(k, v)?,
            Field::OutputSizes => r.output_sizes = sizes(k, v)?,
            Field::InputDtypes => r.input_dtypes = texts(k, v)?,
            Field::OutputDtypes => r.output_dtypes = texts(k, v)?,
            Field::Frames => {
                r.frame_ids = t.list(v).iter().map(|&f| frames.id(t, f)).collect();
            }
            Field::Other => {}
        }
    }
    Ok(r)
}

/// An entry's keys that are read.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    PgId,
    CollectiveSeqId,
    SeqId,
    P2pSeqId,
    TimeCreated,
    TimeStarted,
    TimeCompleted,
    TimeoutMs,
    ProcessGroup,
    ProfilingName,
    State,
    IsP2p,
    InputSizes,
    OutputSizes,
    InputDtypes,
    OutputDtypes,
    Frames,
    Other,
}

impl Field {
    fn of(k: &str) -> Self {
        match k {
            "pg_id" => Self::PgId,
            "collective_seq_id" => Self::CollectiveSeqId,
            "seq_id" => Self::SeqId,
            "p2p_seq_id" => Self::P2pSeqId,
            "time_created_ns" => Self::TimeCreated,
            "time_discovered_started_ns" => Self::TimeStarted,
            "time_discovered_completed_ns" => Self::TimeCompleted,
            "timeout_ms" => Self::TimeoutMs,
            "process_group" => Self::ProcessGroup,
            "profiling_name" => Self::ProfilingName,
            "state" => Self::State,
            "is_p2p" => Self::IsP2p,
            "input_sizes" => Self::InputSizes,
            "output_sizes" => Self::OutputSizes,
            "input_dtypes" => Self::InputDtypes,
            "output_dtypes" => Self::OutputDtypes,
            "frames" => Self::Frames,
            _ => Self::Other,
        }
    }
}

fn convert(
    raw: RawDump,
    rank: u32,
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<FrDump, String> {
    let groups: Vec<FrGroup> = raw
        .pg_config
        .into_iter()
        .map(|(key, g)| FrGroup {
            name: g.name.unwrap_or(key),
            desc: g.desc.unwrap_or_default(),
            ranks: g.ranks.and_then(|r| parse_ranks(&r)),
        })
        .collect();
    // `pg_status` is keyed by the rank's local group id; entries carry both.
    let mut id_to_name: HashMap<i64, String> = HashMap::new();
    let mut stacks: Vec<Vec<Frame>> = Vec::new();
    // Stacks by their frames' ids: the file's text is copied only for a
    // stack not seen before. A JSON dump's frames get ids here.
    let mut table = raw.frame_table;
    let mut json_frames: HashMap<(String, String, i64), u32> = HashMap::new();
    let mut stack_ids: foldhash::HashMap<Vec<u32>, u32> = Default::default();
    // One shared string per distinct name, op and dtype of the dump.
    let mut names: foldhash::HashMap<Box<str>, Name> = Default::default();
    let mut intern = |s: &str| -> Name {
        if let Some(a) = names.get(s) {
            return a.clone();
        }
        let a = Name::new(s);
        names.insert(s.into(), a.clone());
        a
    };
    let mut ios = Ios::default();
    let mut calls = CallKinds::default();
    let mut entries = Vec::with_capacity(raw.entries.len());
    let mut nameless = 0usize;
    // Whether each group's last entry was point-to-point: before 2.6 a
    // batch's closing `coalesced` entry does not say.
    let mut last_p2p: HashMap<String, bool> = HashMap::new();
    let mut unknown_state = 0usize;
    for (i, mut e) in raw.entries.into_iter().enumerate() {
        let io = ios.get(&e).map_err(|why| format!("entry {i}: {why}"))?;
        let Some(name) = e.profiling_name else {
            nameless += 1;
            continue;
        };
        let op_text = name.split_once(':').map_or(&*name, |(_, op)| op);
        let mut parts = op_text.split_whitespace();
        let op = intern(parts.next().unwrap_or(""));
        let peer = parts.next().and_then(|p| {
            let (a, b) = p.split_once("->").or_else(|| {
                // `recv 3<-0`: destination first.
                p.split_once("<-").map(|(d, s)| (s, d))
            })?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        let (group, desc) = match e.process_group.as_deref() {
            Some([g, d, ..]) => (intern(g), intern(d)),
            Some([g]) => (intern(g), intern("")),
            _ => (
                intern(&e.pg_id.map_or_else(String::new, |i| i.to_string())),
                intern(""),
            ),
        };
        if let Some(id) = e.pg_id {
            id_to_name.entry(id).or_insert_with(|| group.to_string());
        }
        let state = match e.state.as_deref() {
            Some("completed") => CallState::Completed,
            Some("started") => CallState::Started,
            Some("scheduled") => CallState::Scheduled,
            _ => {
                unknown_state += 1;
                CallState::Scheduled
            }
        };
        // The JSON writer puts 0 where the pickle has None.
        let time = |t: Option<i64>| t.filter(|&t| t > 0);
        let positive = |t: Option<i64>| time(t).and_then(NonZeroI64::new);
        let mut ids = std::mem::take(&mut e.frame_ids);
        for f in std::mem::take(&mut e.frames) {
            let key = (f.name.to_string(), f.filename.to_string(), f.line);
            let next = table.len() as u32;
            let i = *json_frames.entry(key).or_insert(next);
            if i == next {
                table.push(f);
            }
            ids.push(i);
        }
        let stack = (!ids.is_empty()).then(|| match stack_ids.get(ids.as_slice()) {
            Some(&i) => i,
            None => {
                stacks.push(
                    ids.iter()
                        .map(|&i| {
                            let f = &table[i as usize];
                            Frame {
                                name: f.name.to_string(),
                                file: f.filename.to_string(),
                                line: f.line,
                            }
                        })
                        .collect(),
                );
                let i = stacks.len() as u32 - 1;
                stack_ids.insert(ids, i);
                i
            }
        });
        let is_p2p = match e.is_p2p {
            Some(p) => p,
            None if &*op == "coalesced" => last_p2p.get(&*group).copied().unwrap_or(false),
            None => &*op == "send" || &*op == "recv",
        } || &*op == "send"
            || &*op == "recv";
        last_p2p.insert(group.to_string(), is_p2p);
        let call = calls.get(FrCall {
            group,
            desc,
            op,
            peer,
            is_p2p,
            io,
            timeout_ms: positive(e.timeout_ms),
        });
        entries.push(FrEntry {
            collective_seq: e
                .collective_seq_id
                .or(e.seq_id)
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(0),
            p2p_seq: e
                .p2p_seq_id
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(0),
            created_ns: time(e.time_created_ns).unwrap_or(0),
            seen_ns: positive(e.time_discovered_completed_ns)
                .or(positive(e.time_discovered_started_ns)),
            call,
            stack: stack.into(),
            state,
        });
    }
    if nameless > 0 {
        warnings.push(Warning::ignored(format!(
            "{}: {nameless} entries without a `profiling_name` left out",
            path.display()
        )));
    }
    if unknown_state > 0 {
        warnings.push(Warning::reading(format!(
            "{}: {unknown_state} entries without a known `state` read as scheduled",
            path.display()
        )));
    }
    let status = raw
        .pg_status
        .into_iter()
        .map(|(id, s)| {
            let name = id
                .parse::<i64>()
                .ok()
                .and_then(|i| id_to_name.get(&i).cloned())
                .unwrap_or(id);
            let get = |k: &str| s.get(k).and_then(|v| v.as_ref()?.int());
            (
                name,
                FrStatus {
                    last_enqueued: get("last_enqueued_collective"),
                    last_started: get("last_started_collective"),
                    last_completed: get("last_completed_collective"),
                },
            )
        })
        .collect();
    Ok(FrDump {
        rank,
        source: path.to_owned(),
        // `2.4`, `2.10`: anything else is not a version.
        version: raw
            .version
            .map(|v| v.text())
            .filter(|v| {
                v.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
            .unwrap_or_default(),
        nccl_version: raw.comm_lib_version.or(raw.nccl_version),
        groups,
        status,
        entries,
        stacks,
        truncated: false,
    })
}

/// Each distinct kind of call in a dump, made once. Its names and tensors
/// are already shared within the dump, so they are told apart by address.
#[derive(Default)]
struct CallKinds(foldhash::HashMap<CallKey, Arc<FrCall>>);

type CallKey = (
    [*const str; 3],
    *const CallIo,
    Option<(u32, u32)>,
    bool,
    Option<NonZeroI64>,
);

impl CallKinds {
    fn get(&mut self, c: FrCall) -> Arc<FrCall> {
        let key = (
            [&*c.group, &*c.desc, &*c.op].map(|n| n as *const str),
            Arc::as_ptr(&c.io),
            c.peer,
            c.is_p2p,
            c.timeout_ms,
        );
        self.0.entry(key).or_insert_with(|| Arc::new(c)).clone()
    }
}

/// Each distinct combination of an entry's tensor sizes and dtypes, made
/// once: found by a hash of the entry's own fields, then compared (a JSON
/// entry's first by their text).
#[derive(Default)]
struct Ios<'a> {
    by_hash: foldhash::HashMap<u64, Vec<Arc<CallIo>>>,
    by_json: foldhash::HashMap<[&'a str; 4], Arc<CallIo>>,
}

fn io_hash(
    input_sizes: &[Vec<i64>],
    output_sizes: &[Vec<i64>],
    dtypes: [&mut dyn ExactSizeIterator<Item = &str>; 2],
) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0).build_hasher();
    input_sizes.hash(&mut h);
    output_sizes.hash(&mut h);
    for d in dtypes {
        d.len().hash(&mut h);
        d.for_each(|t| t.hash(&mut h));
    }
    h.finish()
}

impl<'a> Ios<'a> {
    fn get(&mut self, e: &RawEntry<'a>) -> Result<Arc<CallIo>, String> {
        let json = [
            e.json_input_sizes,
            e.json_output_sizes,
            e.json_input_dtypes,
            e.json_output_dtypes,
        ];
        if json.iter().any(Option::is_some) {
            return self.get_json(json);
        }
        fn texts<'t>(d: &'t [Text]) -> impl ExactSizeIterator<Item = &'t str> {
            d.iter().map(|t| &**t)
        }
        let h = io_hash(
            &e.input_sizes,
            &e.output_sizes,
            [&mut texts(&e.input_dtypes), &mut texts(&e.output_dtypes)],
        );
        let same_texts =
            |a: &[String], b: &[Text]| a.iter().map(String::as_str).eq(b.iter().map(|t| &**t));
        let same = |c: &CallIo| {
            c.input_sizes == e.input_sizes
                && c.output_sizes == e.output_sizes
                && same_texts(&c.input_dtypes, &e.input_dtypes)
                && same_texts(&c.output_dtypes, &e.output_dtypes)
        };
        let bucket = self.by_hash.entry(h).or_default();
        if let Some(c) = bucket.iter().find(|c| same(c)) {
            return Ok(c.clone());
        }
        let owned = |d: &[Text]| d.iter().map(|t| t.to_string()).collect();
        let c = Arc::new(CallIo {
            input_sizes: e.input_sizes.clone(),
            output_sizes: e.output_sizes.clone(),
            input_dtypes: owned(&e.input_dtypes),
            output_dtypes: owned(&e.output_dtypes),
        });
        bucket.push(c.clone());
        Ok(c)
    }

    fn get_json(
        &mut self,
        json: [Option<&'a serde_json::value::RawValue>; 4],
    ) -> Result<Arc<CallIo>, String> {
        let key = json.map(|r| r.map_or("", |r| r.get()));
        if let Some(c) = self.by_json.get(&key) {
            return Ok(c.clone());
        }
        fn parse<T: serde::de::DeserializeOwned + Default>(
            text: &str,
            name: &str,
        ) -> Result<T, String> {
            if text.is_empty() {
                return Ok(T::default());
            }
            // Without the position, which is within the field's own text.
            serde_json::from_str(text).map_err(|e| {
                let why = e.to_string();
                let why = why.split(" at line ").next().unwrap_or_default();
                format!("`{name}`: {why}")
            })
        }
        let io = CallIo {
            input_sizes: parse(key[0], "input_sizes")?,
            output_sizes: parse(key[1], "output_sizes")?,
            input_dtypes: parse(key[2], "input_dtypes")?,
            output_dtypes: parse(key[3], "output_dtypes")?,
        };
        // Shared with an equal one written differently.
        let h = io_hash(
            &io.input_sizes,
            &io.output_sizes,
            [
                &mut io.input_dtypes.iter().map(String::as_str),
                &mut io.output_dtypes.iter().map(String::as_str),
            ],
        );
        let bucket = self.by_hash.entry(h).or_default();
        let c = match bucket.iter().find(|c| ***c == io) {
            Some(c) => c.clone(),
            None => {
                let c = Arc::new(io);
                bucket.push(c.clone());
                c
            }
        };
        self.by_json.insert(key, c.clone());
        Ok(c)
    }
}

/// `"[0, 1, 2]"` (how PyTorch writes a group's ranks), or a list.
fn parse_ranks(r: &RawRanks) -> Option<Vec<u32>> {
    let mut v: Vec<u32> = match r {
        RawRanks::List(l) => l
            .iter()
            .map(|&x| u32::try_from(x).ok())
            .collect::<Option<_>>()?,
        RawRanks::Text(t) => {
            let inner = t.trim().strip_prefix('[')?.strip_suffix(']')?;
            if inner.trim().is_empty() {
                Vec::new()
            } else {
                inner
                    .split(',')
                    .map(|x| x.trim().parse().ok())
                    .collect::<Option<_>>()?
            }
        }
    };
    v.sort_unstable();
    v.dedup();
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An early 2.x dump (PyTorch 2.3-2.4): one `seq_id`, no dtypes, no
    /// `is_p2p`, no `pg_status`; a send read as p2p by its name, and the
    /// batch's closing `coalesced` entry after it as p2p too.
    #[test]
    fn an_early_schema_reads_with_its_fields_absent() {
        let dump = br#"{"version": "2.0", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "entries": [
              {"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "seq_id": 1,
               "profiling_name": "nccl:all_reduce", "time_created_ns": 10, "input_sizes": [[4]],
               "output_sizes": [[4]], "state": "completed", "time_discovered_started_ns": null,
               "time_discovered_completed_ns": 20, "retired": true},
              {"record_id": 1, "pg_id": 0, "process_group": ["0", "default_pg"], "seq_id": 1,
               "profiling_name": "nccl:send 0->1", "time_created_ns": 30, "input_sizes": [[4]],
               "output_sizes": [[4]], "state": "scheduled"},
              {"record_id": 2, "pg_id": 0, "process_group": ["0", "default_pg"], "seq_id": 1,
               "profiling_name": "nccl:coalesced", "time_created_ns": 31, "state": "scheduled"}
            ]}"#;
        let (d, w) = read(dump, Path::new("nccl_trace_rank_0")).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((d.version.as_str(), d.rank), ("2.0", 0));
        assert_eq!(d.groups[0].ranks, Some(vec![0, 1]));
        let e = &d.entries;
        assert_eq!(
            (e[0].collective_seq, e[0].seen_ns),
            (1, NonZeroI64::new(20))
        );
        assert!(e[0].call.io.input_dtypes.is_empty() && !e[0].call.is_p2p);
        assert_eq!(
            (&*e[1].call.op, e[1].call.peer, e[1].call.is_p2p),
            ("send", Some((0, 1)), true)
        );
        assert!(e[2].call.is_p2p);
        assert!(d.status.is_empty());
    }

    /// Frames read once whether the pickle shares them (PyTorch's pickler)
    /// or writes each out in full; entries whose keys come in another
    /// order, or are other strings, read the same.
    #[test]
    fn stacks_and_keys_whatever_the_layout() {
        use crate::synth::jit_pickle::{to_vec, P};
        use std::rc::Rc;
        let frame = |line| {
            P::dict([
                ("name", P::str("step")),
                ("filename", P::str("train.py")),
                ("line", P::Int(line)),
            ])
        };
        let shared = Rc::new(frame(7));
        let entry = |seq: i64, frames: Vec<P>, reversed: bool| {
            let mut pairs = vec![
                ("frames", P::List(frames)),
                ("collective_seq_id", P::Int(seq)),
                ("profiling_name", P::str("nccl:all_reduce")),
                (
                    "process_group",
                    P::Tuple(vec![P::str("0"), P::str("default_pg")]),
                ),
                ("state", P::str("completed")),
                ("input_sizes", P::List(vec![P::List(vec![P::Int(4)])])),
            ];
            if reversed {
                pairs.reverse();
            }
            P::dict(pairs)
        };
        let dump = P::dict([(
            "entries",
            P::List(vec![
                entry(1, vec![P::Shared(shared.clone()), frame(9)], false),
                entry(2, vec![P::Shared(shared.clone()), frame(9)], false),
                entry(3, vec![frame(7), frame(9)], true),
                entry(4, vec![frame(9)], false),
            ]),
        )]);
        let (d, w) = read(&to_vec(&dump), Path::new("nccl_trace_rank_0")).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let seqs: Vec<u64> = d.entries.iter().map(|e| e.collective_seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert!(d.entries.iter().all(|e| e.call.io.input_sizes == [vec![4]]));
        let stacks: Vec<Option<u32>> = d.entries.iter().map(|e| e.stack.get()).collect();
        assert_eq!(stacks, [Some(0), Some(0), Some(0), Some(1)]);
        let lines: Vec<i64> = d.stacks[0].iter().map(|f| f.line).collect();
        assert_eq!(lines, [7, 9]);
        assert_eq!(d.stacks.len(), 2);
    }

    /// Entries of one kind share one `FrCall`; a different timeout or
    /// peer makes another kind, and what each entry keeps stays its own.
    #[test]
    fn entries_of_one_kind_share_their_call() {
        let entry = |seq: u64, name: &str, timeout: u64, t: u64| {
            format!(
                r#"{{"record_id": {seq}, "pg_id": 0, "process_group": ["0", "default_pg"],
                "collective_seq_id": {seq}, "profiling_name": "nccl:{name}", "time_created_ns": {t},
                "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"],
                "output_dtypes": ["Float"], "state": "completed", "timeout_ms": {timeout}}}"#
            )
        };
        let entries = [
            entry(1, "all_reduce", 600000, 10),
            entry(2, "all_reduce", 600000, 20),
            entry(3, "all_reduce", 1000, 30),
            entry(4, "send 0->1", 600000, 40),
            entry(5, "send 0->2", 600000, 50),
        ];
        let dump = format!(
            r#"{{"version": "2.4", "entries": [{}]}}"#,
            entries.join(",")
        );
        let (d, w) = read(dump.as_bytes(), Path::new("nccl_trace_rank_0")).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let e = &d.entries;
        let same = |a: usize, b: usize| Arc::ptr_eq(&e[a].call, &e[b].call);
        assert!(same(0, 1));
        assert!(!same(0, 2) && !same(3, 4) && !same(0, 3));
        assert_eq!(e[2].call.timeout_ms, NonZeroI64::new(1000));
        assert_eq!(
            (e[3].call.peer, e[4].call.peer),
            (Some((0, 1)), Some((0, 2)))
        );
        assert!(e.iter().all(|x| Arc::ptr_eq(&x.call.io, &e[0].call.io)));
        let own: Vec<(u64, i64)> = e.iter().map(|x| (x.collective_seq, x.created_ns)).collect();
        assert_eq!(own[..2], [(1, 10), (2, 20)]);
    }

    #[test]
    fn not_a_dump() {
        let e = read(b"{\"traceEvents\": []}", Path::new("x_0")).unwrap_err();
        assert!(e.to_string().contains("not a Flight Recorder dump"), "{e}");
        let e = read(b"\x80\x02}q\x00.", Path::new("x_0")).unwrap_err();
        assert!(e.to_string().contains("x_0"), "{e}");
        // A tensor field of the wrong type, named with its entry.
        let bad = br#"{"entries": [{"profiling_name": "nccl:all_reduce", "input_sizes": [[1]]},
            {"profiling_name": "nccl:all_reduce", "input_sizes": "x"}]}"#;
        let e = read(bad, Path::new("x_0")).unwrap_err().to_string();
        assert!(
            e.contains("entry 1: `input_sizes`: invalid type") && !e.contains("column"),
            "{e}"
        );
        assert!(
            sniff(b"{\"traceEvents\": [], \"pg_status\": 1}", |k| k
                == "traceEvents"
                || k == "pg_status")
                == 0
        );
        assert!(sniff(b"{\"pg_status\": {}}", |k| k == "pg_status") > 0);
    }

    #[test]
    fn ranks_from_names_and_group_members() {
        let r = |n: &str| rank_of(Path::new(n));
        assert_eq!(r("nccl_trace_rank_12"), Some(12));
        assert_eq!(r("trace_3"), Some(3));
        assert_eq!(r("fr_dump_rank7.json"), Some(7));
        assert_eq!(r("dump"), None);
        let t = |s: &str| parse_ranks(&RawRanks::Text(s.into()));
        assert_eq!(t("[3, 1, 2]"), Some(vec![1, 2, 3]));
        assert_eq!(t("[]"), Some(vec![]));
        assert_eq!(t("[0, x]"), None);
    }
}
