//! XSpace protobuf (`*.xplane.pb`), what the TensorFlow/JAX/XLA profiler leaves
//! on disk (TPU and GPU). The messages below are the public `xplane.proto`
//! schema (tsl/profiler/protobuf), declared with prost's derive; only the fields
//! read here. Each `/device:TPU:N` or `/device:GPU:N` plane with ops becomes a
//! rank; its `XLA Ops` line (TPU) or `Stream #N(...)` lines (GPU) hold the ops.
//! Communication is recognised from HLO op names (all-reduce, all-gather,
//! reduce-scatter, all-to-all, collective-permute, send/recv); an async pair
//! (`all-reduce-start` … `all-reduce-done`) becomes one op from the start's
//! begin to the done's end, the time the transfer was in flight.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::LazyLock;

use prost::Message;
use regex::Regex;

use super::protowire::{keep, varint, Fields, Value};
use super::RankFile;
use crate::error::Error;
use crate::model::build::TimelineBuilder;
use crate::model::classify::{classify, coll_kind};
use crate::model::timeline::SourceFormat;
use crate::model::Slot;
use crate::model::{Activity, CollKind, DeviceOp, KernelClass, Ns, PackedWork, StrId};

#[derive(Clone, PartialEq, Message)]
pub struct XSpace {
    #[prost(message, repeated, tag = "1")]
    pub planes: Vec<XPlane>,
    #[prost(string, repeated, tag = "4")]
    pub hostnames: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct XPlane {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<XLine>,
    #[prost(map = "int64, message", tag = "4")]
    pub event_metadata: HashMap<i64, XEventMetadata>,
}

#[derive(Clone, PartialEq, Message)]
pub struct XLine {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int64, tag = "3")]
    pub timestamp_ns: i64,
    #[prost(message, repeated, tag = "4")]
    pub events: Vec<XEvent>,
}

#[derive(Clone, PartialEq, Message)]
pub struct XEvent {
    #[prost(int64, tag = "1")]
    pub metadata_id: i64,
    /// Offset from the line's timestamp (a oneof with `num_occurrences` in the
    /// schema; the wire format is the same).
    #[prost(int64, tag = "2")]
    pub offset_ps: i64,
    #[prost(int64, tag = "3")]
    pub duration_ps: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct XEventMetadata {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub display_name: String,
}

static DEVICE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^/device:(?:TPU|GPU):(\d+)$").expect("valid regex"));
/// `%all-reduce.1 = f32[...] all-reduce-start(...)`: the instruction name and opcode.
static HLO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^%?([\w.\-]+) = .*?\b([a-z][a-z\-]*)\(").expect("valid regex"));
static COLLECTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast|send|recv)(-start|-done)?$",
    )
    .expect("valid regex")
});
/// `Stream #16(Kernel)`: the stream id.
static STREAM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Stream #(\d+)").expect("valid regex"));

/// What an op name says: (display name, collective opcode, async part).
fn hlo(name: &str) -> (String, Option<String>, Option<&'static str>) {
    let Some(c) = HLO.captures(name) else {
        return (name.to_owned(), None, None);
    };
    let (inst, opcode) = (c[1].to_owned(), &c[2]);
    match COLLECTIVE.captures(opcode) {
        Some(k) => {
            let part = match k.get(2).map(|m| m.as_str()) {
                Some("-start") => Some("start"),
                Some("-done") => Some("done"),
                _ => None,
            };
            (inst, Some(k[1].to_owned()), part)
        }
        None => (inst, None, None),
    }
}

/// The `%name` operands of an HLO instruction's text (after its opening
/// parenthesis).
fn operands(full: &str) -> impl Iterator<Item = &str> {
    let args = full.find('(').map_or("", |i| &full[i..]);
    args.split('%').skip(1).map(|t| {
        let end = t
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '-' | '_')))
            .unwrap_or(t.len());
        &t[..end]
    })
}

/// A collective library's kernel (on GPU XSpaces), as opposed to an HLO op name.
fn vendor_ccl(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("nccl") || n.contains("rccl")
}

fn ps_to_ns(ps: i64) -> Ns {
    Ns(ps.div_euclid(1000))
}

/// Turns one device's XLA ops into a rank timeline: HLO names parsed,
/// collectives classified, async start/done pairs joined. Shared by the XSpace
/// and the Chrome-trace JSON readers.
pub(super) struct DeviceOps {
    t: TimelineBuilder,
    /// Async collectives waiting for their `-done`, by the start's name.
    pending: HashMap<String, (Ns, String)>,
    /// What each distinct HLO text says: a program's few thousand
    /// instructions run every step, and parsing the text (regexes,
    /// classification) took nine tenths of reading an XSpace when done per
    /// event.
    parsed: Vec<Parsed>,
    /// Where in `parsed`, by text, for ops on a compute line and on a copy
    /// line.
    by_text: [foldhash::HashMap<Box<str>, usize>; 2],
}

/// An HLO text's op name, class and collective, parsed once.
struct Parsed {
    activity: Activity,
    name: String,
    /// The name in the timeline's strings, once an op of it is kept.
    id: Option<StrId>,
    class: KernelClass,
    coll: Option<CollKind>,
    part: Option<&'static str>,
}

impl Parsed {
    fn new(full: &str, activity: Activity) -> Self {
        let (name, coll, part) = hlo(full);
        let (class, coll) = match &coll {
            Some(op) => (KernelClass::Communication, Some(coll_kind(op))),
            None => match classify(&name, activity) {
                // HLO names such as `broadcast.2` (replicating data on one
                // device) are not collectives; NCCL/RCCL kernels are.
                KernelClass::Communication if !vendor_ccl(&name) => (KernelClass::Other, None),
                KernelClass::Communication => (KernelClass::Communication, Some(coll_kind(&name))),
                class => (class, None),
            },
        };
        Parsed {
            activity,
            name,
            id: None,
            class,
            coll,
            part,
        }
    }
}

impl DeviceOps {
    /// Device `device`, named `name` (`/device:TPU:0`), of file `path`.
    pub(crate) fn new(device: u32, name: &str, path: &Path) -> Self {
        let mut t = TimelineBuilder::new(path, SourceFormat::Xla);
        t.set_rank(device);
        t.push_device(crate::model::DeviceInfo {
            id: device,
            name: name.to_owned(),
            num_sms: None,
        });
        Self {
            t,
            pending: HashMap::new(),
            parsed: Vec::new(),
            by_text: Default::default(),
        }
    }

    /// Room for `n` ops.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.t.reserve_ops(n);
    }

    /// One program execution (an `XLA Modules` event): `full` is the
    /// module's name, with its fingerprint (`jit_f(1219…)`) left out so the
    /// runs of one program share a name.
    pub(crate) fn module(&mut self, full: &str, start: Ns, end: Ns) {
        let name = full.split('(').next().unwrap_or(full).trim();
        if name.is_empty() {
            return;
        }
        if let Ok(span) = self.t.between(start, end) {
            let name = self.t.intern(name);
            self.t.push_annotation(name, start, start + span, true);
        }
    }

    /// One op: `full` is its HLO text (or kernel name), `[start, end)` in ns.
    pub(crate) fn push(&mut self, full: &str, start: Ns, end: Ns, stream: u32, memcpy: bool) {
        let op = self.parse(full, memcpy);
        self.push_parsed(op, full, start, end, stream);
    }

    /// Which parsed text `full` is, on a copy line (`memcpy`) or not; parsed
    /// on first sight.
    pub(crate) fn parse(&mut self, full: &str, memcpy: bool) -> usize {
        let by_text = &mut self.by_text[usize::from(memcpy)];
        if let Some(&i) = by_text.get(full) {
            return i;
        }
        let activity = if memcpy {
            Activity::Memcpy
        } else {
            Activity::Kernel
        };
        self.parsed.push(Parsed::new(full, activity));
        by_text.insert(full.into(), self.parsed.len() - 1);
        self.parsed.len() - 1
    }

    /// One op of the text `parse` gave `op` for.
    pub(crate) fn push_parsed(&mut self, op: usize, full: &str, start: Ns, end: Ns, stream: u32) {
        let device = self.t.rank();
        let Some(p) = self.parsed.get_mut(op) else {
            return;
        };
        let start = match p.part {
            Some("start") => {
                self.pending.insert(p.name.clone(), (start, p.name.clone()));
                return;
            }
            // The done names its start as its operand: looked up, not
            // searched for (tens of thousands may be in flight).
            Some("done") => match operands(full).find_map(|k| self.pending.remove(k)) {
                Some((start, name)) if name != p.name => {
                    // Kept under the start's name, as the pair is one op.
                    let (activity, class, coll) = (p.activity, p.class, p.coll);
                    let Ok(dur) = self.t.between(start, end) else {
                        return;
                    };
                    let name = self.t.intern(&name);
                    self.op(name, start, dur, activity, class, coll, stream, device);
                    return;
                }
                Some((start, _)) => start,
                None => start,
            },
            _ => start,
        };
        let Ok(dur) = self.t.between(start, end) else {
            return;
        };
        let name = match p.id {
            Some(id) => id,
            None => *p.id.insert(self.t.intern(&p.name)),
        };
        let (activity, class, coll) = (p.activity, p.class, p.coll);
        self.op(name, start, dur, activity, class, coll, stream, device);
    }

    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        name: StrId,
        start: Ns,
        dur: Ns,
        activity: Activity,
        class: KernelClass,
        coll: Option<CollKind>,
        stream: u32,
        device: u32,
    ) {
        // The span was checked by the caller.
        let _ = self.t.push_op(DeviceOp {
            start,
            dur,
            name,
            activity,
            class,
            coll,
            stream,
            device,
            work: PackedWork::NONE,
            meta: Slot::NONE,
            step: Slot::NONE,
            launch: start,
        });
    }

    /// The rank's file, if the device had any op.
    pub(crate) fn finish(self) -> Option<(Option<u32>, RankFile)> {
        if self.t.op_count() == 0 && self.t.out_of_range() == 0 {
            return None;
        }
        let file = RankFile::built(self.t);
        Some((Some(file.timeline.rank), file))
    }
}

/// The device number of a `/device:TPU:N` or `/device:GPU:N` process or plane.
pub(super) fn device_number(name: &str) -> Option<u32> {
    DEVICE.captures(name)?[1].parse().ok()
}

/// The line (thread) of a device's program executions.
pub(super) const MODULES: &str = "XLA Modules";

/// Which lines (threads) hold device ops: `XLA Ops` (TPU, stream 0) and
/// `Stream #N(...)` (GPU); `None` for the others.
pub(super) fn op_stream(line: &str) -> Option<u32> {
    if line == "XLA Ops" {
        return Some(0);
    }
    STREAM.captures(line).map(|c| c[1].parse().unwrap_or(0))
}

/// A plane without its lines: its name and event texts. Decoding it skips
/// the lines unread, so that their events are then read one at a time
/// rather than all decoded at once (24 bytes an event, a device's millions).
#[derive(Clone, PartialEq, Message)]
struct PlaneHead {
    #[prost(string, tag = "2")]
    name: String,
    #[prost(map = "int64, message", tag = "4")]
    event_metadata: HashMap<i64, XEventMetadata>,
}

/// A line without its events.
#[derive(Clone, PartialEq, Message)]
struct LineHead {
    #[prost(string, tag = "2")]
    name: String,
    #[prost(int64, tag = "3")]
    timestamp_ns: i64,
}

/// A plane's name and event texts, and where its lines lie with their
/// names and starts: what one pass over its fields finds, the events
/// stepped over. Their events are then read one at a time where they lie
/// (see [`Lines`]), not held: a device's lines are a quarter of a file.
struct PlaneScan {
    head: PlaneHead,
    lines: Vec<LineScan>,
}

/// A line's name and start, how many events it holds, and its place (from
/// the plane's first byte) and length.
struct LineScan {
    head: LineHead,
    events: usize,
    at: u64,
    len: u64,
}

/// Reads the plane of `len` bytes that `r` holds: its lines' heads and
/// places, and every other field, as prost decodes them.
fn scan_plane(r: impl BufRead, len: u64) -> Result<PlaneScan, String> {
    const LINES: u64 = 3;
    let mut fields = Fields::new(r, len);
    let (mut kept, mut lines) = (Vec::new(), Vec::new());
    while let Some((tag, value)) = fields.next()? {
        match (tag, value) {
            (LINES, Value::Bytes(n)) => {
                let at = fields.at();
                let (head, events) = scan_line(fields.inner(n)?)?;
                lines.push(LineScan {
                    head,
                    events,
                    at,
                    len: n,
                });
            }
            _ => fields.keep(tag, value, &mut kept)?,
        }
    }
    let head = PlaneHead::decode(&kept[..]).map_err(|e| e.to_string())?;
    Ok(PlaneScan { head, lines })
}

/// A line's name and start, read as prost reads them (its fields may come
/// in any order), and how many events it holds.
fn scan_line(mut fields: Fields<impl BufRead>) -> Result<(LineHead, usize), String> {
    const EVENTS: u64 = 4;
    let (mut kept, mut events) = (Vec::new(), 0);
    fields.each(|tag, value, bytes| {
        match (tag, value) {
            (EVENTS, Value::Bytes(_)) => events += 1,
            _ => keep(tag, value, bytes, &mut kept)?,
        }
        Ok(())
    })?;
    let head = LineHead::decode(&kept[..]).map_err(|e| e.to_string())?;
    Ok((head, events))
}

/// Where a plane's lines are read from: the plane's bytes held (a gzip's,
/// or a slice), or the file, at the plane's place in it.
trait Lines: BufRead + Seek {}

impl<T: BufRead + Seek> Lines for T {}

/// Gives `f` each event of the line at `at` of `len` bytes, decoded one at
/// a time.
fn line_events(
    src: &mut dyn Lines,
    (at, len): (u64, u64),
    mut f: impl FnMut(XEvent),
) -> Result<(), String> {
    const EVENTS: u64 = 4;
    src.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
    Fields::new(src, len).each(|tag, value, bytes| {
        if let (EVENTS, Value::Bytes(_)) = (tag, value) {
            f(XEvent::decode(bytes).map_err(|e| e.to_string())?);
        }
        Ok(())
    })
}

/// Gives `f` each plane of the XSpace `r` whose name `wanted` takes, one at
/// a time, and `emit` what it makes of them, and skips the space's other
/// fields: neither the file nor a space of millions of planes is held at
/// once (as `XSpace::decode` would, some 100 bytes a plane for 2 on disk).
/// A plane's name is read from its first bytes (writers put it before its
/// lines), so a plane not wanted (the host's, often the largest) is skipped
/// unread. A plane may take at most `limit` bytes.
///
/// `file` is the file `r` reads, when `r` gives its bytes as they lie (no
/// gzip): a plane is then scanned as it streams, and `f` reads its lines
/// from the file where they lie. Otherwise the plane's bytes are held while
/// `f` reads them.
fn each_plane<T>(
    r: impl Read,
    limit: u64,
    file: Option<impl Read + Seek>,
    wanted: impl Fn(&str) -> bool,
    mut f: impl FnMut(PlaneScan, &mut dyn Lines) -> Result<Option<T>, String>,
    mut emit: impl FnMut(T),
) -> Result<(), String> {
    const PLANES: u64 = 1;
    let mut r = Placed {
        r: BufReader::with_capacity(64 << 10, r),
        at: 0,
    };
    let mut file = file.map(|f| BufReader::with_capacity(64 << 10, f));
    let mut plane = Vec::new();
    let short = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "the file ends inside a field".to_owned(),
        _ => e.to_string(),
    };
    let skip = |r: &mut Placed<_>, n: u64| -> Result<(), String> {
        let skipped =
            std::io::copy(&mut r.by_ref().take(n), &mut std::io::sink()).map_err(short)?;
        if skipped < n {
            return Err("the file ends inside a field".into());
        }
        Ok(())
    };
    while let Some(key) = varint(&mut r).map_err(short)? {
        let (tag, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(&mut r)
                    .map_err(short)?
                    .ok_or("the file ends inside a field")?;
            }
            1 => skip(&mut r, 8)?,
            5 => skip(&mut r, 4)?,
            2 => {
                let len = varint(&mut r)
                    .map_err(short)?
                    .ok_or("the file ends inside a field")?;
                if tag != PLANES {
                    skip(&mut r, len)?;
                    continue;
                }
                if len > limit {
                    return Err(format!(
                        "a plane of {len} bytes, more than the {limit} read"
                    ));
                }
                let from = r.at;
                plane.clear();
                let head = len.min(HEAD);
                (&mut r).take(head).read_to_end(&mut plane).map_err(short)?;
                if (plane.len() as u64) < head {
                    return Err("a plane longer than the file".into());
                }
                if plane_name(&plane).is_some_and(|name| !wanted(&name)) {
                    skip(&mut r, len - head).map_err(|_| "a plane longer than the file")?;
                    continue;
                }
                let made = match &mut file {
                    Some(file) => {
                        let rest = (&mut r).take(len - head);
                        let mut scan = scan_plane(Cursor::new(&plane[..]).chain(rest), len)
                            .map_err(|e| too_short(e, r.at - from < len))?;
                        for line in &mut scan.lines {
                            line.at += from;
                        }
                        f(scan, file)?
                    }
                    None => {
                        // Room for the whole plane at once (its length is
                        // within the limit): grown by doubling, a quarter of
                        // the file was held twice while the last copy was made.
                        let rest = usize::try_from(len - head).map_err(|_| "a plane too large")?;
                        plane
                            .try_reserve_exact(rest)
                            .map_err(|_| format!("no memory for a plane of {len} bytes"))?;
                        (&mut r)
                            .take(len - head)
                            .read_to_end(&mut plane)
                            .map_err(short)?;
                        if (plane.len() as u64) < len {
                            return Err("a plane longer than the file".into());
                        }
                        let scan = scan_plane(&plane[..], len)?;
                        f(scan, &mut Cursor::new(&plane[..]))?
                    }
                };
                // The plane's bytes are let go before what was made of them
                // is used (a device's figures are made then): a plane can be
                // a quarter of the file.
                plane = Vec::new();
                if let Some(made) = made {
                    emit(made);
                }
            }
            w => return Err(format!("field {tag} of wire type {w}, which no XSpace has")),
        }
    }
    Ok(())
}

/// A plane that the file ends inside is said as such, as when it is held.
fn too_short(e: String, cut: bool) -> String {
    if cut {
        "a plane longer than the file".into()
    } else {
        e
    }
}

/// A stream that counts the bytes taken from it: where in the file the
/// next one lies.
struct Placed<R> {
    r: BufReader<R>,
    at: u64,
}

impl<R: Read> Read for Placed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl<R: Read> BufRead for Placed<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.r.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.r.consume(n);
        self.at += n as u64;
    }
}

/// Bytes of a plane read before its name decides whether the rest is.
const HEAD: u64 = 4096;

/// The name of the plane whose first bytes are `head`, if they hold it
/// whole before any line (`None`: the plane is read to learn it).
fn plane_name(head: &[u8]) -> Option<String> {
    let mut r = head;
    loop {
        let key = varint(&mut r).ok()??;
        let (tag, wire) = (key >> 3, key & 7);
        match (tag, wire) {
            (2, 2) => {
                let len = usize::try_from(varint(&mut r).ok()??).ok()?;
                let name = r.get(..len)?;
                return Some(String::from_utf8_lossy(name).into_owned());
            }
            // The plane's id, before its name.
            (1, 0) => {
                varint(&mut r).ok()??;
            }
            _ => return None,
        }
    }
}

/// Reads one XSpace; one `RankFile` per device plane with ops, ranked by the
/// device number. Planes are decoded one at a time, and only device planes
/// whole.
pub fn read(bytes: &[u8], path: &Path) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
    read_from(bytes, path, bytes.len() as u64)
}

/// [`read`] from a stream, a plane at a time; a plane may take at most
/// `limit` bytes (of a gzip that expands without end, say).
pub fn read_from(
    r: impl Read,
    path: &Path,
    limit: u64,
) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
    let mut out = Vec::new();
    read_each(r, path, (limit, None::<File>), &mut |f| out.push(f))?;
    Ok(out)
}

/// [`read_from`], giving each device's rank to `each` as soon as its plane
/// is read: one device's ops at a time, not the host's. With `file`, the
/// file `r` streams as it lies (see [`each_plane`]), no plane's bytes are
/// held.
pub fn read_each(
    r: impl Read,
    path: &Path,
    (limit, file): (u64, Option<impl Read + Seek>),
    each: &mut dyn FnMut((Option<u32>, RankFile)),
) -> Result<(), Error> {
    let mut ranks = 0;
    let device = |name: &str| device_number(name).is_some();
    let ops = |p: PlaneScan, lines: &mut dyn Lines| match device_number(&p.head.name) {
        Some(device) => device_ops(&p, lines, device, path),
        None => Ok(None),
    };
    each_plane(r, limit, file, device, ops, |f| {
        ranks += 1;
        each(f);
    })
    .map_err(|e| Error::NotATrace {
        path: path.to_owned(),
        why: format!("not an XSpace protobuf (.xplane.pb): {e}"),
    })?;
    if ranks == 0 {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "an XSpace without device ops (no /device:TPU:N or /device:GPU:N plane with an `XLA Ops` or `Stream #N` line); a host-only profile?".into(),
        });
    }
    Ok(())
}

/// The ops of one device plane, its lines read from `lines`, as that
/// device's rank. Events are decoded one at a time.
fn device_ops(
    plane: &PlaneScan,
    lines: &mut dyn Lines,
    device: u32,
    path: &Path,
) -> Result<Option<(Option<u32>, RankFile)>, String> {
    let head = &plane.head;
    let mut kept = Vec::new();
    // Each event of an op line is at most one op.
    let mut events = 0;
    for line in &plane.lines {
        let stream = op_stream(&line.head.name);
        if stream.is_some() || line.head.name == MODULES {
            events += if stream.is_some() { line.events } else { 0 };
            kept.push((line, stream));
        }
    }
    let mut ops = DeviceOps::new(device, &head.name, path);
    ops.reserve(events);
    // Parsed texts (and the texts) by metadata id and copy line or not: one
    // lookup of an id per event, where its text would be hashed.
    let mut by_id: foldhash::HashMap<(i64, bool), (usize, &str)> = Default::default();
    let text = |id: i64| (head.event_metadata.get(&id)).map_or("", |m| m.name.as_str());
    for (line, stream) in &kept {
        let memcpy = line.head.name.contains("Memcpy");
        line_events(lines, (line.at, line.len), |e| {
            // Out of i64 is out of range too: the builder skips and counts it.
            let start = Ns(line.head.timestamp_ns)
                .checked_add(ps_to_ns(e.offset_ps))
                .unwrap_or(Ns::MAX);
            let end = start.saturating_add(ps_to_ns(e.duration_ps).max(Ns::ZERO));
            match *stream {
                Some(stream) => {
                    let (op, full) = *by_id.entry((e.metadata_id, memcpy)).or_insert_with(|| {
                        let full = text(e.metadata_id);
                        (ops.parse(full, memcpy), full)
                    });
                    ops.push_parsed(op, full, start, end, stream);
                }
                None => ops.module(text(e.metadata_id), start, end),
            }
        })?;
    }
    Ok(ops.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: i64, name: &str) -> (i64, XEventMetadata) {
        let m = XEventMetadata {
            id,
            name: name.into(),
            display_name: String::new(),
        };
        (id, m)
    }

    fn ev(m: i64, off_ns: i64, dur_ns: i64) -> XEvent {
        XEvent {
            metadata_id: m,
            offset_ps: off_ns * 1000,
            duration_ps: dur_ns * 1000,
        }
    }

    /// A fusion, then an async all-reduce (start, done) of its output.
    fn fusion_and_all_reduce() -> HashMap<i64, XEventMetadata> {
        [
            meta(1, "%fusion.1 = f32[8] fusion(f32[8] %a), kind=kLoop"),
            meta(2, "%ar-start = f32[8] all-reduce-start(f32[8] %fusion.1)"),
            meta(3, "%ar-done = f32[8] all-reduce-done(f32[8] %ar-start)"),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn hlo_names_and_async_parts() {
        let (n, c, p) = hlo("%all-reduce.3 = f32[8]{0} all-reduce(f32[8]{0} %x), channel_id=1");
        assert_eq!(
            (n.as_str(), c.as_deref(), p),
            ("all-reduce.3", Some("all-reduce"), None)
        );
        let (n, c, p) = hlo("%ag-start = (f32[2], f32[8]) all-gather-start(f32[2] %p)");
        assert_eq!(
            (n.as_str(), c.as_deref(), p),
            ("ag-start", Some("all-gather"), Some("start"))
        );
        let (_, c, p) = hlo("%cp-done = f32[8] collective-permute-done(%cp-start)");
        assert_eq!(
            (c.as_deref(), p),
            (Some("collective-permute"), Some("done"))
        );
        let (n, c, _) = hlo("%fusion.2 = f32[8] fusion(f32[8] %a), kind=kLoop");
        assert_eq!((n.as_str(), c), ("fusion.2", None));
        let done = "%ag-done = f32[8] all-gather-done((f32[2], f32[8]) %ag-start.1, %x)";
        assert_eq!(operands(done).collect::<Vec<_>>(), ["ag-start.1", "x"]);
        // GPU kernel names are not HLO text.
        assert_eq!(hlo("wrapped_broadcast.kd").0, "wrapped_broadcast.kd");
    }

    /// TPU 2's ops line at 1,000 ns: a fusion 0-2 µs, all-reduce-start at
    /// 2 µs (0.1 µs), its done at 5 µs (0.1 µs).
    fn tpu2_async_pair() -> XSpace {
        XSpace {
            planes: vec![XPlane {
                id: 1,
                name: "/device:TPU:2".into(),
                lines: vec![XLine {
                    id: 1,
                    name: "XLA Ops".into(),
                    timestamp_ns: 1000,
                    events: vec![ev(1, 0, 2000), ev(2, 2000, 100), ev(3, 5000, 100)],
                }],
                event_metadata: fusion_and_all_reduce(),
            }],
            hostnames: vec![],
        }
    }

    #[test]
    fn a_plane_round_trips_with_an_async_pair() {
        // One all-reduce from 2 µs to 5.1 µs.
        let space = tpu2_async_pair();
        let files = read(&space.encode_to_vec(), Path::new("h.xplane.pb")).unwrap();
        assert_eq!(files.len(), 1);
        let (rank, f) = &files[0];
        assert_eq!(*rank, Some(2));
        let ops: Vec<_> = f
            .timeline
            .ops
            .iter()
            .map(|o| {
                (
                    f.timeline.strings.get(o.name).to_owned(),
                    o.start.get(),
                    o.dur.get(),
                    o.coll,
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                ("fusion.1".to_owned(), 1000, 2000, None),
                (
                    "ar-start".to_owned(),
                    3000,
                    3100,
                    Some(crate::model::CollKind::AllReduce)
                ),
            ]
        );
        assert!(read(b"\xff\xff", Path::new("x.xplane.pb")).is_err());
    }

    #[test]
    fn texts_parsed_once_still_give_each_event_its_line_and_pair() {
        // Two steps of the same program, 10 µs apart: a fusion on the ops
        // line, the same text on a copy stream, an async all-reduce pair.
        let steps = |f: &dyn Fn(i64) -> Vec<XEvent>| (0..2).flat_map(|s| f(s * 10_000)).collect();
        let line = |id, name: &str, events| XLine {
            id,
            name: name.into(),
            timestamp_ns: 0,
            events,
        };
        let space = XSpace {
            planes: vec![XPlane {
                id: 1,
                name: "/device:GPU:0".into(),
                lines: vec![
                    line(
                        1,
                        "Stream #7(Compute)",
                        steps(&|t| vec![ev(1, t, 100), ev(2, t + 200, 10), ev(3, t + 900, 10)]),
                    ),
                    line(
                        2,
                        "Stream #9(MemcpyD2D)",
                        steps(&|t| vec![ev(1, t + 300, 50)]),
                    ),
                ],
                event_metadata: fusion_and_all_reduce(),
            }],
            hostnames: vec!["h".into()],
        };
        let files = read(&space.encode_to_vec(), Path::new("h.xplane.pb")).unwrap();
        let t = &files[0].1.timeline;
        let mut ops: Vec<_> = (t.ops.iter())
            .map(|o| {
                (
                    o.start.get(),
                    t.strings.get(o.name),
                    o.activity,
                    o.stream,
                    o.coll.is_some(),
                )
            })
            .collect();
        ops.sort_by_key(|o| o.0);
        let (k, m) = (Activity::Kernel, Activity::Memcpy);
        assert_eq!(
            ops,
            [
                (0, "fusion.1", k, 7, false),
                (200, "ar-start", k, 7, true),
                (300, "fusion.1", m, 9, false),
                (10_000, "fusion.1", k, 7, false),
                (10_200, "ar-start", k, 7, true),
                (10_300, "fusion.1", m, 9, false),
            ]
        );
        // The pair spans start to done.
        assert_eq!(
            t.ops.iter().find(|o| o.coll.is_some()).unwrap().dur.get(),
            710
        );
    }

    #[test]
    fn a_stream_is_read_a_plane_at_a_time_and_damage_is_named() {
        let plane = XPlane {
            id: 1,
            name: "/device:TPU:0".into(),
            lines: vec![XLine {
                id: 1,
                name: "XLA Ops".into(),
                timestamp_ns: 0,
                events: vec![XEvent {
                    metadata_id: 1,
                    offset_ps: 0,
                    duration_ps: 1000,
                }],
            }],
            event_metadata: [(
                1,
                XEventMetadata {
                    id: 1,
                    name: "%f = f32[] fusion()".into(),
                    display_name: String::new(),
                },
            )]
            .into_iter()
            .collect(),
        };
        // Host names written before the plane are skipped.
        let mut bytes = XSpace {
            planes: vec![],
            hostnames: vec!["h".into()],
        }
        .encode_to_vec();
        bytes.extend(
            XSpace {
                planes: vec![plane],
                hostnames: vec![],
            }
            .encode_to_vec(),
        );
        let p = Path::new("h.xplane.pb");
        assert_eq!(
            read_from(&bytes[..], p, 1 << 20).unwrap()[0]
                .1
                .timeline
                .ops
                .len(),
            1
        );
        let err = |bytes: &[u8], limit| match read_from(bytes, p, limit) {
            Err(Error::NotATrace { why, .. }) => why,
            other => panic!("{:?}", other.map(|f| f.len())),
        };
        assert!(err(&bytes[..bytes.len() - 3], 1 << 20).contains("a plane longer than the file"));
        assert!(err(&bytes, 10).contains("more than the 10 read"));
        // Field 2 with wire type 3 (a group): in no XSpace.
        assert!(err(&[0x13], 1 << 20).contains("wire type 3"));
        assert!(err(&[0x0a, 0x80], 1 << 20).contains("ends inside a field"));
        // A plane that is not a device's is skipped once its name is read:
        // a host plane whose lines would not even decode is never read.
        let mut host = vec![0x12, 9];
        host.extend(b"/host:CPU");
        host.extend([0x1b, 0xff, 0xff]);
        let mut with_host = vec![0x0a, host.len() as u8];
        with_host.extend(host);
        with_host.extend(&bytes);
        assert_eq!(read_from(&with_host[..], p, 1 << 20).unwrap().len(), 1);
        assert_eq!(
            plane_name(&[0x08, 0x01, 0x12, 0x02, b'a', b'b']).as_deref(),
            Some("ab")
        );
        // A name cut off, or lines first: read whole to learn it.
        assert_eq!(plane_name(&[0x12, 0x05, b'a']), None);
        assert_eq!(plane_name(&[0x1a, 0x00, 0x12, 0x01, b'a']), None);
        // Each device is given as soon as its plane is read, before the
        // next plane's bytes: the first of two here, the second cut short.
        let mut two = bytes.clone();
        two.extend(&bytes);
        two.truncate(two.len() - 3);
        let mut given = Vec::new();
        let read = read_each(&two[..], p, (1 << 20, None::<File>), &mut |f| {
            given.push(f.1.timeline.ops.len())
        });
        assert!(read.is_err());
        assert_eq!(given, [1]);
    }

    /// `bytes` read from a file of their own, each plane's lines where they
    /// lie (`read_each` with the file, as a load reads an XSpace).
    fn from_file(bytes: &[u8], limit: u64) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        let open = || File::open(f.path()).unwrap();
        let mut out = Vec::new();
        read_each(
            open(),
            Path::new("h.xplane.pb"),
            (limit, Some(open())),
            &mut |r| out.push(r),
        )?;
        Ok(out)
    }

    /// A plane's lines read where they lie in the file give what reading
    /// the plane held gives, and fail where it fails, with its message.
    #[test]
    fn lines_read_where_they_lie_are_those_read_held() {
        let ops = |files: Result<Vec<(Option<u32>, RankFile)>, Error>| match files {
            Ok(files) => Ok((files.iter())
                .map(|(r, f)| {
                    let t = &f.timeline;
                    let ops: Vec<_> = (t.ops.iter())
                        .map(|o| (t.strings.get(o.name).to_owned(), o.start, o.dur, o.stream))
                        .collect();
                    (*r, ops, t.annotations.len())
                })
                .collect::<Vec<_>>()),
            Err(Error::NotATrace { why, .. }) => Err(why),
            Err(e) => panic!("{e}"),
        };
        let mut tpu3 = tpu2_async_pair().planes.remove(0);
        tpu3.name = "/device:TPU:3".into();
        let two = XSpace {
            planes: vec![tpu2_async_pair().planes.remove(0), tpu3],
            hostnames: vec!["h".into()],
        }
        .encode_to_vec();
        let held = ops(read(&two, Path::new("h.xplane.pb")));
        assert_eq!(held.as_ref().map(Vec::len), Ok(2));
        assert_eq!(ops(from_file(&two, two.len() as u64)), held);
        for cut in [5, 40, two.len() / 2] {
            let bytes = &two[..two.len() - cut];
            let held = ops(read(bytes, Path::new("h.xplane.pb")));
            assert!(held.is_err(), "cut by {cut}");
            assert_eq!(
                ops(from_file(bytes, bytes.len() as u64)),
                held,
                "cut by {cut}"
            );
        }
    }

    /// Protobuf fields may come in any order, and a message written in two
    /// parts is their merge: texts before the lines, a line's events before
    /// its name, read as the usual order is. A damaged event is named.
    #[test]
    fn a_plane_is_read_whatever_its_field_order() {
        let wrap = |tag: u8, body: &[u8]| {
            let mut out = vec![(tag << 3) | 2];
            let mut n = body.len();
            while n >= 0x80 {
                out.push((n as u8) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend(body);
            out
        };
        let usual = tpu2_async_pair();
        let events = usual.planes[0].lines[0].events.clone();
        let ops = |bytes: &[u8]| {
            let files = read(bytes, Path::new("h.xplane.pb")).unwrap();
            let t = &files[0].1.timeline;
            (t.ops.iter())
                .map(|o| (t.strings.get(o.name).to_owned(), o.start.get(), o.dur.get()))
                .collect::<Vec<_>>()
        };
        let expected = ops(&usual.encode_to_vec());
        assert_eq!(expected.len(), 2);
        // Read with its lines where they lie in the file, the same.
        let in_file = |bytes: &[u8]| {
            let files = from_file(bytes, bytes.len() as u64).unwrap();
            let t = &files[0].1.timeline;
            (t.ops.iter())
                .map(|o| (t.strings.get(o.name).to_owned(), o.start.get(), o.dur.get()))
                .collect::<Vec<_>>()
        };
        let part = |lines, event_metadata| XPlane {
            id: 1,
            name: "/device:TPU:2".into(),
            lines,
            event_metadata,
        };
        let line_events = XLine {
            id: 1,
            name: String::new(),
            timestamp_ns: 0,
            events,
        };
        let line_name = XLine {
            id: 1,
            name: "XLA Ops".into(),
            timestamp_ns: 1000,
            events: vec![],
        };
        // Texts first, then a line whose events come before its name.
        let mut plane = part(vec![], fusion_and_all_reduce()).encode_to_vec();
        let mut line = line_events.encode_to_vec();
        line.extend(line_name.encode_to_vec());
        plane.extend(wrap(3, &line));
        assert_eq!(ops(&wrap(1, &plane)), expected);
        assert_eq!(in_file(&wrap(1, &plane)), expected);
        // An event cut short inside its line.
        let mut line = line_name.encode_to_vec();
        line.extend(wrap(4, &[0x08]));
        let mut plane = part(vec![], fusion_and_all_reduce()).encode_to_vec();
        plane.extend(wrap(3, &line));
        match read(&wrap(1, &plane), Path::new("h.xplane.pb")) {
            Err(Error::NotATrace { why, .. }) => assert!(why.contains("not an XSpace"), "{why}"),
            other => panic!("{:?}", other.map(|f| f.len())),
        }
    }
}
