//! PyTorch profiler (Kineto) Chrome-trace JSON, streamed event by event into a
//! [`RankTimeline`]. Old (2021) and new category names both load.

use crate::model::Warning;
use foldhash::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::chrome::{non_map_arms, KeyOf, Scalar, TimeText};
use super::events::{again_warning, document, serde_message, Sink, Stop};
use super::split::{Pos, Splitter};
use super::RankFile;
use crate::error::Error;
use crate::model::build::{TimeError, TimelineBuilder};
use crate::model::classify::{classify, coll_kind, dtype_size};
use crate::model::time::Micros;
use crate::model::timeline::SourceFormat;
use crate::model::Slot;
use crate::model::{
    Activity, CollKind, CollMeta, CpuKind, DeviceInfo, DeviceOp, Interner, KernelClass, Ns,
    RankTimeline, Step, StrId, Work,
};

/// Reads one Kineto trace from `reader` (already decompressed), with the CPU
/// ranges of its launching threads. `path` is only used in messages.
pub fn read(reader: impl Read, path: &Path) -> Result<RankFile, Error> {
    read_with(reader, path, true)
}

/// [`read`], keeping the CPU ranges only with `cpu_ranges` (the UI's CPU
/// lanes need them, the metrics do not: a fifth more memory on big traces).
pub fn read_with(reader: impl Read, path: &Path, cpu_ranges: bool) -> Result<RankFile, Error> {
    let mut b = Builder::new(path);
    b.cpu_ranges = cpu_ranges;
    let mut sp = Splitter::new(reader);
    let outcome = document(&mut sp, &mut b);
    let mut warnings = Vec::new();
    if let Err(stop) = outcome {
        let (at, msg) = match stop {
            Stop::Io(source)
                if b.events == 0 && source.kind() != std::io::ErrorKind::InvalidData =>
            {
                return Err(Error::Io {
                    path: path.to_owned(),
                    source,
                })
            }
            stop => stop.describe(&sp),
        };
        let at = at.to_string();
        if b.events == 0 {
            return Err(Error::Parse {
                path: path.to_owned(),
                at,
                msg,
            });
        }
        warnings.push(Warning::damaged(format!(
            "{}: trace is cut off or damaged at {at} ({msg}); loaded the {} complete events before it",
            path.display(),
            b.events
        )));
    } else if !b.saw_events {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "JSON without a \"traceEvents\" array, so not a PyTorch profiler trace".into(),
        });
    }
    if b.events == 0 {
        if let Some(e) = b.skipped.first_invalid(path) {
            return Err(e);
        }
    }
    if let Some((at, dropped)) = b.again {
        warnings.push(again_warning(path, at, dropped));
    }
    warnings.extend(b.skipped.warnings(path));
    warnings.extend((b.notes.iter()).map(|n| Warning::ignored(format!("{}: {n}", path.display()))));
    warnings.extend(b.unread_device_categories(path));
    if b.implausible_sizes > 0 {
        warnings.push(Warning::ignored(format!(
            "{}: {} with a message size that is no real size (an element count beyond \
             2^64 or negative, or over 1 TiB in all): the sizes are ignored, so byte and \
             bandwidth metrics leave those collectives out",
            path.display(),
            crate::human::plural(
                b.implausible_sizes as usize,
                "collective record",
                "collective records"
            ),
        )));
    }
    let events = b.events;
    let dist_rank = b.dist_rank;
    let begins = b.begin_events;
    let (timeline, built) = b.finish();
    warnings.extend(built);
    if timeline.ops.is_empty() && begins > 0 {
        warnings.push(Warning::ignored(format!(
            "{}: no complete events (ph \"X\") on a device, but {} begin/end event(s) \
             (ph \"B\"/\"E\"): this reader reads complete events, as the PyTorch profiler writes them",
            path.display(),
            crate::human::count(begins)
        )));
    }
    if let Some(w) = repeated_steps(&timeline.steps) {
        warnings.push(Warning::reading(format!("{}: {w}", path.display())));
    }
    Ok(RankFile {
        timeline,
        dist_rank,
        events,
        warnings,
        tables: None,
    })
}

/// A warning when step numbers repeat (the profiler was restarted in one
/// process): each instance stays a step of its own.
pub(crate) fn repeated_steps(steps: &[Step]) -> Option<String> {
    let mut numbers: Vec<i64> = steps.iter().map(|s| s.number).collect();
    numbers.sort_unstable();
    let total = numbers.len();
    numbers.dedup();
    let repeats = total - numbers.len();
    (repeats > 0).then(|| {
        format!(
            "{total} steps but only {} distinct step numbers (the profiler was restarted?); \
             each is kept as a step of its own",
            numbers.len()
        )
    })
}

/// One event from its complete slice: the event (`None`: not an object) or
/// serde_json's error.
fn parse_event(raw: &[u8], b: &mut Builder) -> Result<Option<Event>, serde_json::Error> {
    b.cut_short = false;
    if let Some(ph) = other_phase(raw) {
        b.cut_short = true;
        b.begin_events += u64::from(ph == b'B');
        return Ok(Some(Event::default()));
    }
    // One UTF-8 check of the whole event is cheaper than serde_json's check of
    // each string in it; invalid UTF-8 goes the checked way, which says where.
    let parsed = match std::str::from_utf8(raw) {
        Ok(text) => {
            let mut de = serde_json::Deserializer::from_str(text);
            EventSeed { b: &mut *b }
                .deserialize(&mut de)
                .and_then(|e| de.end().map(|()| e))
        }
        Err(_) => {
            let mut de = serde_json::Deserializer::from_slice(raw);
            EventSeed { b: &mut *b }
                .deserialize(&mut de)
                .and_then(|e| de.end().map(|()| e))
        }
    };
    match parsed {
        // Left early on purpose: an event that is counted and not used.
        Err(_) if b.cut_short => Ok(Some(Event::default())),
        parsed => parsed,
    }
}

/// Whether the event opens with a `ph` other than `"X"`. The profiler writes
/// `ph` first, and flow, instant and metadata events (a third of a real trace:
/// a flow pair per kernel launch) are only counted, so they are recognized by
/// their first bytes, as [`EventSeed`] would after reading `ph`, without
/// parsing the rest.
fn other_phase(raw: &[u8]) -> Option<u8> {
    let value = raw
        .strip_prefix(b"{")
        .map(<[u8]>::trim_ascii_start)
        .and_then(|r| r.strip_prefix(b"\"ph\":"))
        .map(<[u8]>::trim_ascii_start);
    match value {
        Some([b'"', c, ..]) if *c != b'X' && *c != b'\\' => Some(*c),
        _ => None,
    }
}

/// Why an event was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    Invalid,
    NotAnObject,
    NoTime,
    NegativeDur,
}

impl Skip {
    const ALL: [Skip; 4] = [
        Skip::Invalid,
        Skip::NotAnObject,
        Skip::NoTime,
        Skip::NegativeDur,
    ];

    fn describe(self) -> &'static str {
        match self {
            Skip::Invalid => "not valid JSON",
            Skip::NotAnObject => "not a JSON object",
            Skip::NoTime => "ph \"X\" without a usable ts or dur: missing or not a number",
            Skip::NegativeDur => "ph \"X\" with a negative dur",
        }
    }
}

/// Events left out, by reason, with where the first of each was.
#[derive(Default)]
struct Skipped {
    count: [u64; 4],
    first: [Option<(Pos, String)>; 4],
}

impl Skipped {
    fn add(&mut self, why: Skip, at: Pos, detail: String) {
        let i = why as usize;
        self.count[i] += 1;
        self.first[i].get_or_insert((at, detail));
    }

    /// Why a file with no usable event is not a trace: its first non-event.
    fn first_invalid(&self, path: &Path) -> Option<Error> {
        if let Some((at, msg)) = &self.first[Skip::Invalid as usize] {
            return Some(Error::Parse {
                path: path.to_owned(),
                at: at.to_string(),
                msg: msg.clone(),
            });
        }
        let (at, _) = self.first[Skip::NotAnObject as usize].as_ref()?;
        Some(Error::NotATrace {
            path: path.to_owned(),
            why: format!("at {at}: expected a trace event object, so not a profiler trace"),
        })
    }

    fn warnings(&self, path: &Path) -> Vec<Warning> {
        Skip::ALL
            .iter()
            .filter_map(|&w| {
                let i = w as usize;
                let (at, detail) = self.first[i].as_ref()?;
                let detail = if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                };
                Some(Warning::damaged(format!(
                    "{}: skipped {} event{} ({}); the first at {at}{detail}",
                    path.display(),
                    self.count[i],
                    if self.count[i] == 1 { "" } else { "s" },
                    w.describe(),
                )))
            })
            .collect()
    }
}

/// Event categories we treat differently; everything else is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Cat {
    Kernel,
    Memcpy,
    Memset,
    /// MTIA device ops (`mtia_ccp_events`): kernels, and `dma_request` copies.
    MtiaDevice,
    Runtime,
    CpuOp,
    UserAnnotation,
    GpuUserAnnotation,
    #[default]
    Other,
}

/// A category this reader does not use whose name says device work
/// (`hpu_op`, `mtia_insight`, a future `npu_kernel`); known host-side ones
/// (`python_function`, `cuda_profiler_range`, `Trace`, ...) do not match.
fn looks_like_device(cat: &str) -> bool {
    let cat = cat.to_ascii_lowercase();
    [
        "kernel", "gpu", "device", "ccp", "hpu", "npu", "mtia", "memcpy", "memset", "dma",
    ]
    .iter()
    .any(|w| cat.contains(w))
        && !cat.contains("annotation")
        && !cat.contains("runtime")
        && !cat.contains("driver")
}

fn cat_of(s: &str) -> Cat {
    match s {
        "kernel" | "Kernel" => Cat::Kernel,
        "gpu_memcpy" | "Memcpy" => Cat::Memcpy,
        "gpu_memset" | "Memset" => Cat::Memset,
        "mtia_ccp_events" => Cat::MtiaDevice,
        "cuda_runtime" | "cuda_driver" | "Runtime" | "Driver" | "mtia_runtime" => Cat::Runtime,
        "cpu_op" | "Operator" => Cat::CpuOp,
        "user_annotation" => Cat::UserAnnotation,
        "gpu_user_annotation" => Cat::GpuUserAnnotation,
        _ => Cat::Other,
    }
}

#[derive(Default)]
struct Args {
    stream: Option<u64>,
    device: Option<u64>,
    correlation: Option<u64>,
    external_id: Option<u64>,
    blocks: Option<f64>,
    blocks_per_sm: Option<f64>,
    bytes: Option<u64>,
    /// `size`: the bytes of an MTIA `dma_request`.
    size: Option<u64>,
    coll_name: Option<StrId>,
    in_nelems: Option<u64>,
    out_nelems: Option<u64>,
    /// An element count that is a number but no plausible count (negative,
    /// fractional beyond rounding, 1e20).
    bad_nelems: bool,
    group_size: Option<u64>,
    dtype: Option<StrId>,
    pg_name: Option<StrId>,
    pg_ranks: Option<StrId>,
    seq: Option<u64>,
    src_rank: Option<u64>,
    dst_rank: Option<u64>,
    flops: Option<f64>,
}

#[derive(Default)]
struct Event {
    ph: u8,
    cat: Cat,
    has_name: bool,
    ts: Option<Micros>,
    dur: Option<Micros>,
    tid: Option<u64>,
    args: Args,
}

/// What an op needs from other events, kept until the whole file is read
/// (links are resolved at the end, because profilers write launches and
/// kernels in any order). Apart from the ops so that they are built in place,
/// only for ops that have something to link, and 32 bytes, not 48: a trace
/// of millions of kernels holds one per kernel while it is read.
struct Link {
    /// Index of the op in the builder (ops are sorted only at the end).
    op: u32,
    /// `u64::MAX`: none (an id that large is taken for none).
    correlation: u64,
    external_id: u64,
    /// NaN: none.
    blocks_per_sm: f64,
}

impl Link {
    fn id(v: u64) -> Option<u64> {
        (v != u64::MAX).then_some(v)
    }
}

struct Builder {
    t: TimelineBuilder,
    /// Class per (name, activity): the rule table runs once per distinct name, not per event.
    classes: HashMap<(StrId, Activity), KernelClass>,
    /// Collective kind per name and element size per dtype, likewise once per string.
    coll_kinds: HashMap<StrId, CollKind>,
    dtype_sizes: HashMap<StrId, Option<u64>>,
    name_buf: String,
    /// For the ops with a correlation, an external id or blocks per SM, in op order.
    links: Vec<Link>,
    /// Runtime launch time by correlation id.
    launches: HashMap<u64, Ns>,
    /// Every launch time of a correlation id seen more than once (a file that
    /// restarts its ids), sorted at the end.
    relaunched: HashMap<u64, Vec<Ns>>,
    /// `record_param_comms` metadata by External id.
    comm_args: HashMap<u64, CollMeta>,
    dist_rank: Option<u32>,
    world_size: Option<u32>,
    /// `baseTimeNanoseconds`: the Unix time of the file's zero.
    base_ns: Option<Ns>,
    groups: Vec<crate::model::ProcessGroup>,
    /// Keep CPU ranges for the CPU lanes.
    cpu_ranges: bool,
    saw_events: bool,
    events: u64,
    /// The event being parsed was left early on purpose (see `EventSeed`).
    cut_short: bool,
    skipped: Skipped,
    /// Problems outside the events, for warnings.
    notes: Vec<String>,
    /// Complete events in categories this reader does not use but whose name
    /// says device activity (a newer accelerator's ops): their time would be
    /// missing from every metric without a word.
    unread_device: HashMap<String, u64>,
    /// Collective records whose message size is no real size (see
    /// `MAX_MESSAGE_BYTES`); their sizes are ignored.
    implausible_sizes: u64,
    /// Begin events (`ph: "B"`): ranges this reader does not pair.
    begin_events: u64,
    /// A second `traceEvents` array: where, and the events of the first.
    again: Option<(Pos, u64)>,
}

/// 2001-09-09 in Unix ns: a timestamp past it is taken for Unix time.
const EPOCH_LIKE: Ns = Ns(1_000_000_000_000_000_000);

impl Builder {
    fn new(path: &Path) -> Self {
        Self {
            t: TimelineBuilder::new(path, SourceFormat::PyTorch),
            classes: HashMap::default(),
            coll_kinds: HashMap::default(),
            dtype_sizes: HashMap::default(),
            name_buf: String::new(),
            links: Vec::new(),
            launches: HashMap::default(),
            relaunched: HashMap::default(),
            comm_args: HashMap::default(),
            dist_rank: None,
            world_size: None,
            base_ns: None,
            groups: Vec::new(),
            cpu_ranges: true,
            saw_events: false,
            events: 0,
            cut_short: false,
            skipped: Skipped::default(),
            notes: Vec::new(),
            unread_device: HashMap::default(),
            implausible_sizes: 0,
            begin_events: 0,
            again: None,
        }
    }

    fn coll_meta(&mut self, a: &Args) -> Option<CollMeta> {
        let name = a.coll_name?;
        let strings = self.t.strings();
        let dtype_size = a.dtype.and_then(|d| {
            *self
                .dtype_sizes
                .entry(d)
                .or_insert_with(|| dtype_size(strings.get(d)))
        });
        // A send names its destination, a recv its source; a rank number
        // past u32 is no rank.
        let peer = match strings.get(name) {
            "send" => a.dst_rank,
            "recv" => a.src_rank,
            _ => None,
        }
        .and_then(|r| u32::try_from(r).ok());
        let meta = CollMeta {
            kind: self.coll_kind(name),
            name,
            in_nelems: a.in_nelems,
            out_nelems: a.out_nelems,
            dtype_size,
            group_size: a.group_size.and_then(|g| u32::try_from(g).ok()),
            pg_name: a.pg_name,
            pg_ranks: a.pg_ranks,
            seq: a.seq,
            peer,
        };
        if a.bad_nelems || meta.implausible_size() {
            self.implausible_sizes += 1;
        }
        Some(meta)
    }

    fn coll_kind(&mut self, name: StrId) -> CollKind {
        let strings = self.t.strings();
        *self
            .coll_kinds
            .entry(name)
            .or_insert_with(|| coll_kind(strings.get(name)))
    }

    /// Adds one parsed event; says why when it cannot be used.
    fn push(&mut self, e: Event) -> Option<Skip> {
        self.events += 1;
        if e.ph != b'X' {
            self.begin_events += u64::from(e.ph == b'B');
            return None;
        }
        let (Some(ts), Some(dur)) = (e.ts, e.dur) else {
            return Some(Skip::NoTime);
        };
        let (ts, dur) = match self.t.span_us(ts, dur) {
            Ok(span) => span,
            Err(TimeError::Negative) => return Some(Skip::NegativeDur),
            // Counted, and warned about, by the builder.
            Err(TimeError::OutOfRange) => return None,
        };
        let end = ts + dur;
        let activity = match e.cat {
            Cat::Kernel => Some(Activity::Kernel),
            Cat::Memcpy => Some(Activity::Memcpy),
            Cat::Memset => Some(Activity::Memset),
            Cat::MtiaDevice if self.name_buf == "dma_request" => Some(Activity::Memcpy),
            Cat::MtiaDevice => Some(Activity::Kernel),
            _ => None,
        };
        if let Some(activity) = activity {
            let name = self.t.intern(&self.name_buf);
            let class = *self
                .classes
                .entry((name, activity))
                .or_insert_with(|| classify(&self.name_buf, activity));
            let meta = self.coll_meta(&e.args).map(|m| self.t.push_coll(m));
            // The span was checked above; an op over the rank's time budget is
            // counted and left out by the builder, and so has no link.
            let kept = self.t.push_op(DeviceOp {
                start: ts,
                dur,
                name,
                activity,
                class,
                coll: None,
                stream: e.args.stream.or(e.tid).unwrap_or(0) as u32,
                device: e.args.device.unwrap_or(0) as u32,
                work: Work::of(activity, e.args.blocks, e.args.bytes.or(e.args.size)).into(),
                meta: meta.into(),
                step: Slot::NONE,
                launch: ts,
            });
            let a = &e.args;
            let linked =
                a.correlation.is_some() || a.external_id.is_some() || a.blocks_per_sm.is_some();
            let op = u32::try_from(self.t.op_count().wrapping_sub(1));
            if let (Ok(()), true, Ok(op)) = (kept, linked, op) {
                self.links.push(Link {
                    op,
                    correlation: a.correlation.unwrap_or(u64::MAX),
                    external_id: a.external_id.unwrap_or(u64::MAX),
                    blocks_per_sm: a.blocks_per_sm.unwrap_or(f64::NAN),
                });
            }
            return None;
        }
        match e.cat {
            Cat::Runtime => {
                if let Some(c) = e.args.correlation {
                    if let Some(first) = self.launches.insert(c, ts) {
                        self.relaunched
                            .entry(c)
                            .or_insert_with(|| vec![first])
                            .push(ts);
                    }
                }
                // cudaLaunchKernel, cuLaunchKernelEx, hipExtModuleLaunchKernel,
                // MTIA's `runFunction - job_prep_and_submit_for_execution`, ...
                let name = self.name_buf.as_bytes();
                let launch = memchr::memmem::find(name, b"Launch").is_some()
                    || name.starts_with(b"runFunction");
                if launch {
                    self.t.launch_call(ts, dur);
                }
                self.cpu(&e, CpuKind::Runtime, ts, dur, launch);
            }
            Cat::GpuUserAnnotation => {
                let name = self.t.intern(&self.name_buf);
                self.t.push_annotation(name, ts, end, true);
            }
            _ => {
                match e.cat {
                    Cat::CpuOp => self.cpu(&e, CpuKind::Op, ts, dur, false),
                    Cat::UserAnnotation => self.cpu(&e, CpuKind::Annotation, ts, dur, false),
                    _ => {}
                }
                if let Some(n) = self.name_buf.strip_prefix("ProfilerStep#") {
                    if let Ok(number) = n.trim().parse() {
                        self.t.push_step(number, ts, end);
                    }
                } else if self.name_buf == "record_param_comms" {
                    if let (Some(id), Some(meta)) = (e.args.external_id, self.coll_meta(&e.args)) {
                        self.comm_args.insert(id, meta);
                    }
                } else if let (Cat::CpuOp, Some(f)) = (e.cat, e.args.flops) {
                    // `with_flops=True`: leaf ops (aten::mm, addmm, conv) carry it.
                    self.t.add_flops(f);
                } else if e.cat == Cat::UserAnnotation {
                    let name = self.t.intern(&self.name_buf);
                    self.t.push_annotation(name, ts, end, false);
                }
            }
        }
        None
    }

    /// Keeps a CPU range for the CPU lanes (the builder keeps the threads
    /// that launched device work).
    fn cpu(&mut self, e: &Event, kind: CpuKind, ts: Ns, dur: Ns, launch: bool) {
        if !self.cpu_ranges {
            return;
        }
        let name = self.t.intern(&self.name_buf);
        self.t
            .push_cpu(e.tid.unwrap_or(0), name, kind, ts, dur, launch);
    }

    fn finish(mut self) -> (RankTimeline, Vec<Warning>) {
        for times in self.relaunched.values_mut() {
            times.sort_unstable();
        }
        let mut links = std::mem::take(&mut self.links).into_iter().peekable();
        let (strings, ops, colls) = self.t.parts();
        for (i, op) in ops.iter_mut().enumerate() {
            let p = links.next_if(|l| l.op as usize == i);
            let p = p.as_ref();
            if op.is_comm() {
                if op.meta.is_none() {
                    let id = p.and_then(|p| Link::id(p.external_id));
                    if let Some(m) = id.and_then(|id| self.comm_args.get(&id)) {
                        colls.push(m.clone());
                        op.meta = Some((colls.len() - 1) as u32).into();
                    }
                }
                let from_args = op.meta.get().map(|i| colls[i as usize].kind);
                let from_name = *self
                    .coll_kinds
                    .entry(op.name)
                    .or_insert_with(|| coll_kind(strings.get(op.name)));
                op.coll = Some(match (from_args, from_name) {
                    // An all-to-all issued as NCCL SendRecv: trust what PyTorch recorded.
                    (Some(k), _) if k != CollKind::Unknown => k,
                    (_, k) => k,
                });
            }
            // The profiler's own blocks-per-SM figure decides SM coverage
            // (as CCL-Bench does), with or without device properties.
            let bps = p.map_or(f64::NAN, |p| p.blocks_per_sm);
            if !bps.is_nan() && op.is_kernel() {
                op.work = Some(Work::BlocksPerSm(bps)).into();
            }
            // A kernel belongs to the step during which it was launched.
            op.launch = p
                .and_then(|p| Link::id(p.correlation))
                .and_then(|c| match self.relaunched.get(&c) {
                    // Ids repeat: the launch just before the kernel started.
                    Some(times) => {
                        let i = times.partition_point(|&t| t <= op.start);
                        times.get(i.checked_sub(1)?).copied()
                    }
                    None => self.launches.get(&c).copied(),
                })
                .unwrap_or(op.start);
        }
        self.t.set_rank(self.dist_rank.unwrap_or(0));
        self.t.set_world_size(self.world_size);
        self.t.set_epoch(self.base_ns);
        self.t.set_groups(std::mem::take(&mut self.groups));
        let (mut t, warnings) = self.t.finish();
        // Without a stated base, timestamps past 2001 are Unix time already
        // (older profilers wrote them so); smaller ones have no known zero.
        if t.epoch.is_none() && t.window.is_some_and(|w| w.start >= EPOCH_LIKE) {
            t.epoch = Some(Ns::ZERO);
        }
        (t, warnings)
    }

    /// A warning per unused category that looks like device activity.
    fn unread_device_categories(&self, path: &Path) -> Vec<Warning> {
        let mut cats: Vec<(&String, &u64)> = self.unread_device.iter().collect();
        cats.sort();
        cats.into_iter()
            .map(|(cat, n)| {
                Warning::ignored(format!(
                    "{}: {} event{} in category \"{cat}\" look like device activity but this \
                     reader does not know the category, so their time is in no metric",
                    path.display(),
                    crate::human::count(*n),
                    if *n == 1 { "" } else { "s" },
                ))
            })
            .collect()
    }

    fn read_device_properties(&mut self, v: serde_json::Value) {
        let Some(list) = v.as_array() else { return };
        for d in list {
            let id = d
                .get("id")
                .and_then(serde_json::Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0);
            self.t.push_device(DeviceInfo {
                id,
                name: d
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                num_sms: d
                    .get("numSms")
                    .and_then(serde_json::Value::as_u64)
                    // 2^32 would truncate to 0 SMs: no count is better.
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|&n| n > 0),
            });
        }
    }

    fn read_distributed_info(&mut self, v: serde_json::Value) {
        let num = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
                .and_then(|x| u32::try_from(x).ok())
        };
        self.dist_rank = num("rank");
        self.world_size = num("world_size");
        self.groups = v
            .get("pg_config")
            .and_then(serde_json::Value::as_array)
            .map(|pgs| pgs.iter().filter_map(process_group).collect())
            .unwrap_or_default();
    }
}

/// The most members a recorded process group is taken to have: more than any
/// cluster runs, few enough that a damaged list cannot exhaust memory.
const MAX_GROUP_RANKS: usize = 1 << 20;

/// One `pg_config` entry; `None` without a name or with a damaged rank list
/// (a rank that is no u32, more than [`MAX_GROUP_RANKS`]).
fn process_group(v: &serde_json::Value) -> Option<crate::model::ProcessGroup> {
    let name = match v.get("pg_name")? {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let list = v.get("ranks").and_then(serde_json::Value::as_array);
    let mut ranks = match list {
        Some(l) if l.len() <= MAX_GROUP_RANKS => l
            .iter()
            .map(|r| r.as_u64().and_then(|r| u32::try_from(r).ok()))
            .collect::<Option<Vec<u32>>>()?,
        Some(_) => return None,
        None => Vec::new(),
    };
    ranks.sort_unstable();
    ranks.dedup();
    Some(crate::model::ProcessGroup {
        name,
        desc: v
            .get("pg_desc")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        ranks,
    })
}

impl Sink for Builder {
    type Event = Event;

    fn parse(&mut self, raw: &[u8]) -> Result<Option<Event>, serde_json::Error> {
        parse_event(raw, self)
    }

    fn partial(&self) -> bool {
        self.cut_short
    }

    fn take(
        &mut self,
        parsed: Result<Option<Event>, serde_json::Error>,
        start: impl FnOnce() -> Pos,
    ) {
        // The splitter found the event's end, so a bad event is skipped (and
        // counted) rather than ending the file there.
        let skip = match parsed {
            Ok(Some(event)) => self.push(event).map(|why| (why, String::new(), None)),
            Ok(None) => Some((Skip::NotAnObject, String::new(), None)),
            Err(e) => Some((Skip::Invalid, serde_message(&e), Some(e))),
        };
        if let Some((why, detail, err)) = skip {
            let start = start();
            let at = err.map_or(start, |e| start.advanced_to(&e));
            self.skipped.add(why, at, detail);
        }
    }

    fn wants(&self, key: &str) -> bool {
        key == "deviceProperties" || key == "distributedInfo" || key == "baseTimeNanoseconds"
    }

    fn member(&mut self, key: &str, raw: &[u8], at: Pos) {
        // Metadata only: a damaged block is left out, not the trace.
        match serde_json::from_slice::<serde_json::Value>(raw) {
            Ok(v) if key == "deviceProperties" => self.read_device_properties(v),
            Ok(v) if key == "baseTimeNanoseconds" => match v.as_i64().filter(|&b| b >= 0) {
                Some(b) => self.base_ns = Some(Ns(b)),
                None => self.notes.push(format!(
                    "\"baseTimeNanoseconds\" ignored, not a non-negative integer: {}",
                    crate::safe::text(&v.to_string())
                )),
            },
            Ok(v) => self.read_distributed_info(v),
            Err(e) => {
                let at = at.advanced_to(&e);
                self.notes.push(format!(
                    "\"{key}\" ignored, not valid JSON at {at}: {}",
                    serde_message(&e)
                ));
            }
        }
    }

    fn saw_events(&mut self) {
        self.saw_events = true;
    }

    fn events_again(&mut self, at: Pos) {
        self.again = Some((at, self.events));
        self.t.drop_events();
        self.links.clear();
        self.launches.clear();
        self.relaunched.clear();
        self.comm_args.clear();
        self.events = 0;
        self.skipped = Skipped::default();
        self.unread_device.clear();
        self.implausible_sizes = 0;
        self.begin_events = 0;
    }
}

// ---- serde plumbing -------------------------------------------------------

struct EventSeed<'b> {
    b: &'b mut Builder,
}

enum EventKey {
    Ph,
    Cat,
    Name,
    Ts,
    Dur,
    Tid,
    Args,
    Other,
}

fn event_key(k: &str) -> EventKey {
    match k {
        "ph" => EventKey::Ph,
        "cat" => EventKey::Cat,
        "name" => EventKey::Name,
        "ts" => EventKey::Ts,
        "dur" => EventKey::Dur,
        "tid" => EventKey::Tid,
        "args" => EventKey::Args,
        _ => EventKey::Other,
    }
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = Option<Event>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = Option<Event>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let b = self.b;
        let mut e = Event::default();
        b.name_buf.clear();
        let mut first = true;
        let mut seen_cat = false;
        while let Some(key) = map.next_key_seed(KeyOf(event_key))? {
            match key {
                EventKey::Ph => {
                    if let Scalar::Str(ph) = map.next_value()? {
                        e.ph = ph.bytes().next().unwrap_or(0);
                    }
                    // Only complete events are used, and the profiler writes
                    // `ph` first: the rest of a flow, instant or metadata event
                    // (its end is known) need not be parsed.
                    if first && e.ph != b'X' {
                        b.cut_short = true;
                        return Err(serde::de::Error::custom("not a complete event"));
                    }
                }
                EventKey::Cat => {
                    if let Scalar::Str(cat) = map.next_value()? {
                        e.cat = cat_of(&cat);
                        if e.cat == Cat::Other && e.ph == b'X' && looks_like_device(&cat) {
                            *b.unread_device.entry(cat.into_owned()).or_default() += 1;
                        }
                    }
                    seen_cat = true;
                }
                EventKey::Name => {
                    if let Some(name) = map.next_value::<Scalar>()?.text() {
                        b.name_buf.clear();
                        b.name_buf.push_str(&name);
                        e.has_name = true;
                    }
                }
                // From the text: a double holds epoch µs only to 0.25 µs.
                EventKey::Ts => e.ts = map.next_value::<TimeText>()?.0,
                EventKey::Dur => e.dur = map.next_value::<TimeText>()?.0,
                EventKey::Tid => e.tid = map.next_value::<Scalar>()?.u64(),
                EventKey::Args => {
                    // The profiler writes `cat` and `name` before `args`; when
                    // they are known, only the arguments that event uses are read.
                    let wanted = if seen_cat && e.has_name {
                        args_used(e.cat, &b.name_buf)
                    } else {
                        ALL_ARGS
                    };
                    if wanted == 0 {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        e.args = map.next_value_seed(ArgsSeed {
                            strings: b.t.strings_mut(),
                            wanted,
                        })?;
                    }
                }
                EventKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            first = false;
        }
        if !e.has_name {
            b.name_buf.clear();
        }
        Ok(Some(e))
    }

    // Anything that is not an object is not an event: count nothing, skip it.
    non_map_arms!(None);
}

struct ArgsSeed<'s> {
    strings: &'s mut Interner,
    /// Bit set of the `ArgKey`s to read; the others are skipped unparsed.
    wanted: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgKey {
    Stream,
    Device,
    Correlation,
    ExternalId,
    Grid,
    BlocksPerSm,
    Bytes,
    Size,
    CollName,
    InNelems,
    OutNelems,
    GroupSize,
    Dtype,
    PgName,
    PgRanks,
    Seq,
    SrcRank,
    DstRank,
    Flops,
    Other,
}

const fn bit(k: ArgKey) -> u32 {
    1 << k as u32
}

const ALL_ARGS: u32 = bit(ArgKey::Other) - 1;
/// What `record_param_comms` (a CPU op of any category) contributes.
const COMM_ARGS: u32 = bit(ArgKey::ExternalId)
    | bit(ArgKey::CollName)
    | bit(ArgKey::InNelems)
    | bit(ArgKey::OutNelems)
    | bit(ArgKey::GroupSize)
    | bit(ArgKey::Dtype)
    | bit(ArgKey::PgName)
    | bit(ArgKey::PgRanks)
    | bit(ArgKey::Seq)
    | bit(ArgKey::SrcRank)
    | bit(ArgKey::DstRank);

/// The arguments `Builder::push` uses for an event of this category and name.
fn args_used(cat: Cat, name: &str) -> u32 {
    match cat {
        Cat::Kernel | Cat::Memcpy | Cat::Memset | Cat::MtiaDevice => ALL_ARGS,
        Cat::Runtime => bit(ArgKey::Correlation),
        _ if name == "record_param_comms" => COMM_ARGS,
        Cat::CpuOp => bit(ArgKey::Flops),
        Cat::UserAnnotation | Cat::GpuUserAnnotation | Cat::Other => 0,
    }
}

fn arg_key(k: &str) -> ArgKey {
    match k {
        "stream" => ArgKey::Stream,
        "device" => ArgKey::Device,
        "correlation" => ArgKey::Correlation,
        "External id" => ArgKey::ExternalId,
        "grid" => ArgKey::Grid,
        "blocks per SM" => ArgKey::BlocksPerSm,
        "bytes" => ArgKey::Bytes,
        "size" => ArgKey::Size,
        "Collective name" => ArgKey::CollName,
        "In msg nelems" => ArgKey::InNelems,
        "Out msg nelems" => ArgKey::OutNelems,
        "Group size" => ArgKey::GroupSize,
        "dtype" => ArgKey::Dtype,
        "Process Group Name" => ArgKey::PgName,
        "Process Group Ranks" => ArgKey::PgRanks,
        "Seq" => ArgKey::Seq,
        "Src Rank" => ArgKey::SrcRank,
        "Dst Rank" => ArgKey::DstRank,
        "flops" => ArgKey::Flops,
        _ => ArgKey::Other,
    }
}

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = Args;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Args, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = Args;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an args object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args, A::Error> {
        let mut a = Args::default();
        while let Some(key) = map.next_key_seed(KeyOf(arg_key))? {
            if self.wanted & bit(key) == 0 {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let v: Scalar = map.next_value()?;
            let mut text = || v.text().map(|t| self.strings.intern(&t));
            match key {
                ArgKey::Stream => a.stream = v.u64(),
                ArgKey::Device => a.device = v.u64(),
                ArgKey::Correlation => a.correlation = v.u64(),
                ArgKey::ExternalId => a.external_id = v.u64(),
                ArgKey::Grid => a.blocks = v.product(),
                ArgKey::BlocksPerSm => a.blocks_per_sm = v.f64(),
                ArgKey::Bytes => a.bytes = v.u64(),
                ArgKey::Size => a.size = v.u64(),
                ArgKey::CollName => a.coll_name = text(),
                ArgKey::InNelems => {
                    a.in_nelems = v.u64();
                    a.bad_nelems |= a.in_nelems.is_none() && v.f64().is_some();
                }
                ArgKey::OutNelems => {
                    a.out_nelems = v.u64();
                    a.bad_nelems |= a.out_nelems.is_none() && v.f64().is_some();
                }
                ArgKey::GroupSize => a.group_size = v.u64(),
                ArgKey::Dtype => a.dtype = text(),
                ArgKey::PgName => a.pg_name = text(),
                ArgKey::PgRanks => a.pg_ranks = text(),
                ArgKey::Seq => a.seq = v.u64(),
                ArgKey::SrcRank => a.src_rank = v.u64(),
                ArgKey::DstRank => a.dst_rank = v.u64(),
                ArgKey::Flops => a.flops = v.f64(),
                ArgKey::Other => {}
            }
        }
        Ok(a)
    }

    non_map_arms!(Args::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> RankFile {
        read(text.as_bytes(), Path::new("t.json")).expect("loads")
    }

    /// The Unix time of the file's zero: Kineto's `baseTimeNanoseconds`;
    /// without it, timestamps past 2001 are Unix time (zero at 0); smaller
    /// ones have none. A base that is no count of ns is left out, named.
    #[test]
    fn epoch_from_the_base_or_the_timestamps() {
        let ev = |ts: &str| {
            format!(r#"[{{"ph": "X", "cat": "kernel", "name": "k", "ts": {ts}, "dur": 1}}]"#)
        };
        let with_base = load(&format!(
            r#"{{"baseTimeNanoseconds": 1790857026000000000, "traceEvents": {}}}"#,
            ev("4507707087104.778")
        ));
        assert_eq!(
            with_base.timeline.epoch,
            Some(Ns(1_790_857_026_000_000_000))
        );
        let unix = load(&format!(
            r#"{{"traceEvents": {}}}"#,
            ev("1795364733087104.5")
        ));
        assert_eq!(unix.timeline.epoch, Some(Ns::ZERO));
        let none = load(&format!(r#"{{"traceEvents": {}}}"#, ev("10")));
        assert_eq!(none.timeline.epoch, None);
        let bad = load(&format!(
            r#"{{"baseTimeNanoseconds": "soon", "traceEvents": {}}}"#,
            ev("10")
        ));
        assert_eq!(bad.timeline.epoch, None);
        assert!(
            bad.warnings
                .iter()
                .any(|w| w.text.contains("\"baseTimeNanoseconds\" ignored")),
            "{:?}",
            bad.warnings
        );
    }

    const TWO_STEPS: &str = r#"{"distributedInfo": {"rank": 3, "world_size": 4},
      "deviceProperties": [{"id": 0, "name": "A100", "numSms": 108}],
      "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "ts": 100, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 90, "dur": 2, "args": {"correlation": 11}},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "ts": 150, "dur": 20,
         "args": {"correlation": 11, "External id": 5, "stream": 20, "device": 0, "blocks per SM": 0.5}},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 89, "dur": 3,
         "args": {"External id": 5, "Collective name": "allreduce", "In msg nelems": 1000,
                  "Out msg nelems": 1000, "dtype": "BFloat16", "Group size": 4}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "x", "ts": 1},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 150.5, "dur": 1.25, "args": {"stream": "7"}}
      ]}"#;

    #[test]
    fn cpu_ranges_of_launching_threads() {
        let f = load(
            r#"{"traceEvents": [
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 10, "dur": 20},
              {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "tid": 1, "ts": 12, "dur": 15},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 14, "dur": 5, "args": {"correlation": 3}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "tid": 2, "ts": 10, "dur": 50},
              {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 40, "dur": 10, "args": {"correlation": 3, "stream": 7}}
            ]}"#,
        );
        let t = &f.timeline;
        // Thread 2 launched nothing: a data loader's ranges stay out.
        assert_eq!(t.cpu.len(), 1);
        let th = &t.cpu[0];
        assert_eq!((th.tid, th.launches, th.ops.len()), (1, 1, 4));
        let depths: Vec<u8> = th.ops.iter().map(|o| o.depth).collect();
        assert_eq!(depths, vec![0, 1, 2, 3]);
        // The stack where the kernel was launched.
        let launch = t.ops[0].launch;
        assert_eq!(launch, Ns(14_000));
        let names: Vec<&str> = th.stack_at(launch).iter().map(|o| t.name(o.name)).collect();
        assert_eq!(
            names,
            [
                "ProfilerStep#1",
                "aten::linear",
                "aten::addmm",
                "cudaLaunchKernel"
            ]
        );
        assert_eq!(
            th.stack_at(Ns(28_000)).len(),
            2,
            "after addmm, inside linear"
        );
        assert_eq!(th.stack_at(Ns(50_000)).len(), 1);
        assert!(th.stack_at(Ns(100_000)).is_empty());
        // Names at depth 1 over [11, 40) µs: linear, which started before it.
        let d1 = th.at_depth(1, Ns(11_000), Ns(40_000), 10).unwrap();
        assert_eq!(d1.len(), 1);
        assert_eq!(t.name(d1[0].name), "aten::linear");
    }

    #[test]
    fn process_groups_from_pg_config() {
        let f = load(
            r#"{"distributedInfo": {"rank": 1, "world_size": 4, "pg_config": [
              {"pg_name": "0", "pg_desc": "default_pg", "pg_size": 4, "ranks": [3, 2, 1, 0]},
              {"pg_name": 5, "pg_desc": "mesh_tp", "ranks": [0, 1]},
              {"pg_name": "6", "ranks": [0, -1]},
              {"pg_desc": "nameless", "ranks": [0]}]},
              "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1}]}"#,
        );
        let g = &f.timeline.groups;
        // A negative rank is damage: that group is left out, as is one without a name.
        assert_eq!(g.len(), 2, "{g:?}");
        assert_eq!(
            (g[0].name.as_str(), g[0].desc.as_deref()),
            ("0", Some("default_pg"))
        );
        assert_eq!(g[0].ranks, vec![0, 1, 2, 3]);
        assert_eq!(
            (g[1].name.as_str(), g[1].desc.as_deref()),
            ("5", Some("mesh_tp"))
        );
    }

    #[test]
    fn kernels_belong_to_the_step_that_launched_them() {
        let f = load(TWO_STEPS);
        let t = &f.timeline;
        assert_eq!(f.dist_rank, Some(3));
        assert_eq!(t.world_size, Some(4));
        assert_eq!(
            t.steps.iter().map(|s| s.number).collect::<Vec<_>>(),
            vec![7, 8]
        );
        let nccl = t.ops.iter().find(|o| o.is_comm()).unwrap();
        // Runs during step 8 on the GPU, but was launched at t=90, in step 7.
        assert_eq!(nccl.step.get(), Some(0));
        // No launch record: the kernel's own start decides (step 8).
        let gemm = t.ops.iter().find(|o| !o.is_comm()).unwrap();
        assert_eq!(gemm.step.get(), Some(1));
        assert_eq!(
            (gemm.start, gemm.dur, gemm.stream),
            (Ns(150_500), Ns(1_250), 7)
        );
    }

    #[test]
    fn collective_metadata_from_record_param_comms() {
        let f = load(TWO_STEPS);
        let t = &f.timeline;
        let nccl = t.ops.iter().find(|o| o.is_comm()).unwrap();
        assert_eq!(nccl.coll, Some(CollKind::AllReduce));
        let m = t.coll_meta(nccl).expect("linked by External id");
        assert_eq!(m.in_bytes(), Some(2000));
        assert_eq!(m.group_size, Some(4));
        // The profiler's blocks per SM decide coverage, with or without SMs known.
        assert_eq!(nccl.sm_coverage(None), Some(0.5));
        assert_eq!(nccl.sm_coverage(Some(7)), Some(0.5));
    }

    #[test]
    fn an_event_after_a_flow_on_the_same_line_is_kept() {
        // The flow is read only up to its `ph`; the kernel after it on the
        // line must still load (hand count: 2 kernels, 10 us).
        for flow in [
            r#"{"ph": "f", "id": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"}"#,
            r#"{ "ph" : "f", "id": 1, "ts": 1}"#,
        ] {
            let text = format!(
                "{{\"traceEvents\": [\n{flow}, {{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 10, \"dur\": 5}},\n{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k2\", \"ts\": 20, \"dur\": 5}}\n]}}"
            );
            let f = load(&text);
            assert_eq!(f.events, 3, "{flow}");
            let total: Ns = f.timeline.ops.iter().map(|o| o.dur).sum();
            assert_eq!((f.timeline.ops.len(), total), (2, Ns(10_000)), "{flow}");
        }
    }

    #[test]
    fn a_flow_whose_line_ends_in_a_nested_close_is_not_taken_for_the_whole_event() {
        // The instant's only `}` on its first line closes its args; the event
        // goes on to the next line. Hand count: 1 kernel of 5 us after it.
        let f = load(
            "{\"traceEvents\": [\n{\"ph\": \"i\", \"name\": \"x\", \"ts\": 1, \"args\": {\"a\": 1}\n},\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 10, \"dur\": 5}\n]}",
        );
        assert_eq!(f.events, 2);
        assert_eq!(
            (f.timeline.ops.len(), f.timeline.ops[0].dur),
            (1, Ns(5_000))
        );
    }

    /// Events as the profiler lays them out, over several lines each.
    fn blocks(events: &[&str]) -> String {
        let body: Vec<String> = events
            .iter()
            .map(|e| format!("  {{\n    {e}\n  }}"))
            .collect();
        format!("{{\n  \"traceEvents\": [\n{}\n  ]\n}}\n", body.join(",\n"))
    }

    #[test]
    fn events_over_several_lines_are_read_whatever_their_closing_line_holds() {
        let kernel = |ts: u32| {
            format!("\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7,\n    \"ts\": {ts}, \"dur\": 5,\n    \"args\": {{\n      \"stream\": 7, \"grid\": [2, 1, 1]\n    }}")
        };
        let (k1, k2, k3, k4) = (kernel(10), kernel(20), kernel(30), kernel(40));
        let text = blocks(&[
            &k1,
            // A flow: read only up to its `ph`.
            "\"ph\": \"f\", \"id\": 1, \"pid\": 0, \"tid\": 7, \"ts\": 10,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"",
            &k2,
            // A flow whose name holds a brace, and an instant whose args close
            // on a line indented like an event's end: the guess is wrong, and
            // brackets find the end.
            "\"ph\": \"s\", \"id\": 2, \"ts\": 11, \"name\": \"a}b\"",
            "\"ph\": \"i\", \"ts\": 12, \"args\": {\n  },\n    \"name\": \"x\"",
            &k3,
            // A kernel whose args close like an event: parsed from brackets.
            "\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"m\", \"ts\": 35, \"dur\": 2, \"args\": {\"grid\": [3, 1, 1]\n  }, \"pid\": 0",
            &k4,
        ]);
        let f = load(&text);
        assert_eq!(f.events, 8);
        let t = &f.timeline;
        let starts: Vec<Ns> = t.ops.iter().map(|o| o.start).collect();
        assert_eq!(starts, [10_000, 20_000, 30_000, 35_000, 40_000].map(Ns));
        let blocks: Vec<Option<f64>> = t.ops.iter().map(DeviceOp::blocks).collect();
        assert_eq!(
            blocks,
            [Some(2.0), Some(2.0), Some(2.0), Some(3.0), Some(2.0)]
        );
    }

    #[test]
    fn events_all_on_one_line_are_read_whatever_their_strings_hold() {
        // Split at `}, {` after the first event; every guess that lands inside
        // a string or a nested array of objects falls back to brackets.
        // Hand count: kernels at 10, 20, 30, 40 us, 5 us each.
        let k = |ts: u32| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k", "ts": {ts}, "dur": 5, "args": {{"stream": 7}}}}"#
            )
        };
        let events = [
            k(10),
            r#"{"ph": "f", "id": 1, "ts": 10, "name": "a}, {b"}"#.to_string(),
            k(20),
            r#"{"ph": "i", "ts": 11, "name": "q\"}, {"}"#.to_string(),
            r#"{"ph": "X", "cat": "kernel", "name": "x}, {y", "ts": 30, "dur": 5, "args": {"l": [{"a": 1}, {"b": 2}]}}"#.to_string(),
            r#"{"ph": "s", "id": 2, "ts": 12, "args": {"a": [{"b": 1}, {"c": 2}]}}"#.to_string(),
            k(40),
        ];
        let f = load(&format!(r#"{{"traceEvents": [{}]}}"#, events.join(", ")));
        assert_eq!(f.events, 7);
        let t = &f.timeline;
        let starts: Vec<Ns> = t.ops.iter().map(|o| o.start).collect();
        assert_eq!(starts, [10_000, 20_000, 30_000, 40_000].map(Ns));
        assert_eq!(t.strings.get(t.ops[2].name), "x}, {y");
    }

    #[test]
    fn a_flow_is_recognized_whatever_the_space_before_its_phase() {
        assert_eq!(other_phase(b"{\"ph\": \"f\", \"id\": 1}"), Some(b'f'));
        assert_eq!(other_phase(b"{\n    \"ph\": \"s\", \"id\": 1}"), Some(b's'));
        assert_eq!(other_phase(b"{\n    \"ph\": \"X\", \"id\": 1}"), None);
        assert_eq!(
            other_phase(b"{\n    \"cat\": \"kernel\", \"ph\": \"f\"}"),
            None
        );
    }

    /// Hands out at most 7 bytes per read, so events straddle every refill.
    struct Dribble<'a>(&'a [u8]);

    impl Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0.len()).min(7);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_profilers_layout_and_one_event_per_line_read_the_same() {
        use crate::synth::stream::{write_rank, Layout, Mix};
        // One step (the generator stops at the first step past 1 kB): 32
        // layers of 5 kernels and 1 collective each.
        let rank = |layout| {
            let mut out = Vec::new();
            write_rank(&mut out, layout, 0, 2, 1000, Mix::Training).unwrap();
            out
        };
        let (kineto, lines) = (rank(Layout::Kineto), rank(Layout::Lines));
        let a = read(Dribble(&kineto), Path::new("k.json")).unwrap();
        let b = read(&lines[..], Path::new("l.json")).unwrap();
        assert_eq!(a.events, b.events);
        let (a, b) = (&a.timeline, &b.timeline);
        assert_eq!((a.ops.len(), a.steps.len()), (192, 1));
        assert_eq!(a.ops.iter().filter(|o| o.is_comm()).count(), 32);
        assert_eq!(a.ops.len(), b.ops.len());
        for (x, y) in a.ops.iter().zip(&b.ops) {
            assert_eq!(a.strings.get(x.name), b.strings.get(y.name));
            assert_eq!(
                (x.start, x.dur, x.class, x.coll, x.stream, x.work, x.launch, x.step),
                (y.start, y.dur, y.class, y.coll, y.stream, y.work, y.launch, y.step)
            );
        }
    }

    #[test]
    fn args_are_read_whatever_the_key_order() {
        // `args` before `cat` and `name`: nothing is known yet, so all of it is
        // read. After them, only what the category uses; the rest is skipped
        // (here an annotation whose args are not even numbers).
        let f = load(
            r#"{"traceEvents": [
            {"ph": "X", "args": {"correlation": 3, "stream": 9, "grid": [4, 2, "1"]}, "cat": "kernel", "name": "k", "ts": 10, "dur": 5},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1, "args": {"correlation": 3, "stream": "x"}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 4, "args": {"flops": 1e9, "External id": [1]}},
            {"ph": "X", "name": "aten::addmm", "ts": 1, "dur": 4, "args": {"flops": 5e8}, "cat": "cpu_op"},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 20, "args": {"a": {"b": [1, {}]}}}
        ]}"#,
        );
        let t = &f.timeline;
        assert_eq!(f.events, 5);
        let k = &t.ops[0];
        assert_eq!((k.stream, k.blocks(), k.launch), (9, Some(8.0), Ns(2_000)));
        // Both ops carry flops: the second's args came before its category.
        assert_eq!(t.flops, Some(1.5e9));
        assert_eq!(t.steps.len(), 1);
    }

    #[test]
    fn mtia_device_ops_and_unread_device_categories() {
        // Event shapes from HTA's MTIA trace: ops in `mtia_ccp_events`, their
        // launches in `mtia_runtime`, DMA copies with a `size`.
        let f = load(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100},
            {"ph": "X", "cat": "mtia_runtime", "name": "runFunction - job_prep_and_submit_for_execution", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 7}},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "fc-dtype_Float", "pid": 9, "tid": 4, "ts": 20, "dur": 30, "args": {"correlation": 7, "stream": 1, "column": "0", "row": "0", "packet_ptr": 330}},
            {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "pid": 9, "tid": 801, "ts": 60, "dur": 8, "args": {"direction": "DEVICE_TO_HOST", "size": 16, "k_work_ptr": 1, "packet_ptr": 225, "sqid": 1}},
            {"ph": "X", "cat": "hpu_op", "name": "x", "ts": 70, "dur": 1},
            {"ph": "X", "cat": "hpu_op", "name": "y", "ts": 72, "dur": 1},
            {"ph": "X", "cat": "python_function", "name": "z", "ts": 72, "dur": 1}
        ]}"#,
        );
        let t = &f.timeline;
        assert_eq!(t.ops.len(), 2);
        let (fc, dma) = (&t.ops[0], &t.ops[1]);
        assert_eq!(
            (fc.activity, fc.class, fc.stream, fc.launch, fc.dur),
            (
                Activity::Kernel,
                KernelClass::Gemm,
                1,
                Ns(10_000),
                Ns(30_000)
            )
        );
        assert_eq!(
            (dma.activity, dma.bytes(), dma.stream),
            (Activity::Memcpy, Some(16), 801)
        );
        assert_eq!((t.launch_calls, t.launch_time), (1, Ns(5_000)));
        // Device-looking categories nobody reads are named, host ones are not.
        assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
        assert!(
            f.warnings[0]
                .text
                .contains("2 events in category \"hpu_op\""),
            "{}",
            f.warnings[0]
        );
        assert!(!looks_like_device("python_function") && !looks_like_device("cuda_profiler_range"));
        assert!(!looks_like_device("gpu_user_annotation") && looks_like_device("mtia_insight"));
    }

    #[test]
    fn legacy_2021_categories() {
        let f = load(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "ts": 0, "dur": 50},
            {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "args": {"correlation": 1}},
            {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "ts": 5, "dur": 10, "args": {"correlation": 1, "stream": 7}},
            {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 20, "dur": 4, "args": {"bytes": 4096}},
            {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "ts": 30, "dur": 1}
        ]}"#,
        );
        let t = &f.timeline;
        assert_eq!(t.steps.len(), 1);
        assert_eq!(t.ops.len(), 3);
        assert_eq!(t.ops[0].class, KernelClass::Gemm);
        assert_eq!(t.ops[0].step.get(), Some(0));
        assert_eq!(t.ops[1].activity, Activity::Memcpy);
        assert_eq!(t.ops[1].bytes(), Some(4096));
        assert_eq!(t.ops[2].activity, Activity::Memset);
    }

    #[test]
    fn truncated_file_keeps_complete_events() {
        let full = TWO_STEPS;
        let cut = &full[..full.find("\"gemm\"").unwrap()];
        let f = load(cut);
        assert_eq!(f.warnings.len(), 1, "{:?}", f.warnings);
        assert!(f.warnings[0].text.contains("t.json"));
        assert_eq!(f.warnings[0].kind, crate::model::warning::Kind::Damaged);
        // Everything before the cut event is there; the cut one is not.
        assert_eq!(f.timeline.ops.len(), 1);
        assert_eq!(f.timeline.steps.len(), 2);
    }

    #[test]
    fn events_other_than_complete_ones_are_counted_not_parsed() {
        // The flow event's body is damaged after `ph`: it is not used, so not
        // read; a complete event whose `ph` comes last still loads.
        let f = load(
            r#"[{"ph": "f", "id": [oops, "bp": "e"},
                {"name": "k", "cat": "kernel", "ts": 1, "dur": 2, "ph": "X"}]"#,
        );
        assert_eq!(f.events, 2);
        assert_eq!(f.timeline.ops.len(), 1);
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    #[test]
    fn bare_event_array() {
        let f = load(r#"[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]"#);
        assert_eq!(f.timeline.ops.len(), 1);
    }

    #[test]
    fn rejects_json_that_is_not_a_trace() {
        let e = read(&b"{\"nodes\": []}"[..], Path::new("et.json")).unwrap_err();
        assert!(e.to_string().contains("et.json"), "{e}");
        assert!(e.to_string().contains("traceEvents"), "{e}");
        let e = read(&b"not json"[..], Path::new("x.json")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.json: not valid JSON at line 1"),
            "{e}"
        );
    }

    #[test]
    fn odd_types_do_not_fail_the_file() {
        let f = load(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": "Spans", "tid": "stream 7", "ts": "10", "dur": 2,
             "args": {"grid": "big", "stream": null, "External id": [1], "bytes": -3}},
            {"ph": "X", "cat": "kernel", "name": "neg", "ts": 1, "dur": -5},
            3, "x", null
        ]}"#,
        );
        assert_eq!(f.timeline.ops.len(), 1);
        let k = &f.timeline.ops[0];
        assert_eq!((k.start, k.work.get()), (Ns(10_000), None));
    }
}
