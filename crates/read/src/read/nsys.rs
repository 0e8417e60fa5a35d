//! Nsight Systems SQLite exports (`nsys export --type sqlite`): CUPTI kernel,
//! memcpy, memset and runtime tables, NVTX ranges and GPU info, old (2022) and
//! new (2025) schemas. Each GPU in the file becomes one rank. The file is opened
//! immutable: nothing is ever written next to it.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row};

use super::nsys_cpu::{damaged, Call, Calls, Cpu, Issued, Kept};
use super::RankFile;
use crate::error::Error;
use crate::model::build::{SharedCpu, TimelineBuilder};
use crate::model::classify::{classify, coll_kind};
use crate::model::timeline::SourceFormat;
use crate::model::Slot;
use crate::model::{Activity, CpuKind, DeviceInfo, DeviceOp, KernelClass, Ns, PackedWork, Work};

/// The names the reader gives ops itself, made once an export: each op
/// holds a pointer to one rather than a copy of its own (an export has a
/// copy or a set for every few kernels).
pub(super) struct OwnNames([Arc<str>; 8]);

impl Default for OwnNames {
    fn default() -> Self {
        OwnNames(
            [
                "Memcpy HtoD",
                "Memcpy DtoH",
                "Memcpy DtoD",
                "Memcpy HtoH",
                "Memcpy PtoP",
                "Memcpy",
                "Memset (Device)",
                "unknown kernel",
            ]
            .map(Arc::from),
        )
    }
}

impl OwnNames {
    /// A copy's name from CUPTI's copy kind (`ENUM_CUDA_MEMCPY_OPER`), as
    /// Kineto names it.
    pub(super) fn copy(&self, kind: i64) -> Arc<str> {
        let i = match kind {
            1 => 0,
            2 => 1,
            8 => 2,
            9 => 3,
            10 => 4,
            _ => 5,
        };
        self.0[i].clone()
    }

    pub(super) fn memset(&self) -> Arc<str> {
        self.0[6].clone()
    }

    pub(super) fn unknown_kernel(&self) -> Arc<str> {
        self.0[7].clone()
    }
}

/// Step ranges as people mark them with NVTX: `ProfilerStep#3`, `step_3`,
/// `step 3`, `iteration_3`.
fn step_number(name: &str) -> Option<i64> {
    static STEP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)^(?:ProfilerStep#|step[ _#]?|iteration[ _#]?)(\d+)$")
            .expect("valid")
    });
    STEP.captures(name.trim())?[1].parse().ok()
}

/// The process id inside an nsys `globalTid`/`globalPid` (bits 24..48).
pub(super) fn pid(global: i64) -> i64 {
    (global >> 24) & 0xFF_FFFF
}

/// The thread id in a `globalTid` (its low 24 bits).
pub(super) fn tid(global: i64) -> u64 {
    (global & 0xFF_FFFF) as u64
}

struct Reader<'c> {
    conn: &'c Connection,
    path: &'c Path,
    /// Shared, not copied, into every row that names them (1.5M kernel
    /// rows name a few thousand strings).
    strings: HashMap<i64, Arc<str>>,
    tables: HashSet<String>,
}

impl Reader<'_> {
    fn err(&self, e: rusqlite::Error) -> Error {
        Error::NotATrace {
            path: self.path.to_owned(),
            why: format!("cannot read the Nsight Systems tables: {e}"),
        }
    }

    /// A name column: a `StringIds` id in current exports, text in some.
    fn text(&self, v: ValueRef) -> Option<Arc<str>> {
        match v {
            ValueRef::Integer(id) => self.strings.get(&id).cloned(),
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into()),
            _ => None,
        }
    }

    fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// Refuses a table with generated columns (hidden from `table_info`,
    /// computed on every read): an export writes plain values only.
    fn plain(&self, table: &str) -> Result<(), Error> {
        let computed = self.rows(&format!("PRAGMA table_xinfo({table})"), |r| {
            Ok((r.get::<_, String>(1)?, r.get::<_, i64>(6)?))
        })?;
        match computed.into_iter().find(|(_, hidden)| *hidden != 0) {
            Some((col, _)) => Err(Error::NotATrace {
                path: self.path.to_owned(),
                why: format!(
                    "column {col} of {table} is computed (GENERATED or hidden), which an \
                     `nsys export` never writes: not read"
                ),
            }),
            None => Ok(()),
        }
    }

    fn columns(&self, table: &str) -> Result<HashSet<String>, Error> {
        let mut st = self
            .conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .map_err(|e| self.err(e))?;
        let cols = st
            .query_map([], |r| r.get::<_, String>(1))
            .map_err(|e| self.err(e))?
            .collect::<Result<HashSet<_>, _>>()
            .map_err(|e| self.err(e))?;
        Ok(cols)
    }

    /// Each row of `sql` to `f`, none kept here.
    fn each(
        &self,
        sql: &str,
        mut f: impl FnMut(&Row) -> rusqlite::Result<()>,
    ) -> Result<(), Error> {
        let mut st = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let mut rows = st.query([]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            f(row).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn rows<T>(
        &self,
        sql: &str,
        mut f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, Error> {
        let mut v = Vec::new();
        self.each(sql, |row| {
            v.push(f(row)?);
            Ok(())
        })?;
        Ok(v)
    }
}

/// A device op before it is placed on its GPU's timeline.
pub(super) struct Raw {
    pub device: i64,
    pub pid: i64,
    pub correlation: i64,
    pub start: Ns,
    pub end: Ns,
    pub name: Arc<str>,
    pub activity: Activity,
    pub stream: i64,
    /// Blocks launched or bytes moved (see [`Work::of`]).
    pub work: PackedWork,
}

// Held for every device op of the export at once.
const _: () = assert!(std::mem::size_of::<Raw>() == 80);

impl Raw {
    /// The columns every activity query selects first: deviceId, globalPid,
    /// correlationId, start, end; the rest left empty for the caller to fill.
    fn placed(row: &Row, name: Arc<str>) -> rusqlite::Result<Self> {
        Ok(Self {
            device: row.get(0)?,
            pid: pid(row.get::<_, Option<i64>>(1)?.unwrap_or(0)),
            correlation: row.get::<_, Option<i64>>(2)?.unwrap_or(-1),
            start: Ns(row.get(3)?),
            end: Ns(row.get(4)?),
            name,
            activity: Activity::Kernel,
            stream: 0,
            work: PackedWork::NONE,
        })
    }
}

fn open(path: &Path) -> Result<Connection, Error> {
    // `immutable=1`: no locks, no journal, no -shm/-wal files beside the export.
    let p = path
        .to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    Connection::open_with_flags(
        format!("file:{p}?immutable=1"),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::NotATrace {
        path: path.to_owned(),
        why: format!("not a readable SQLite file: {e}"),
    })
    .inspect(|conn| {
        // Budgets: no string or blob over 64 MiB is built, and queries stop
        // after a time proportional to the file (a crafted file can make
        // every row cost seconds).
        let _ = conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, 64 << 20);
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        let budget = Duration::from_secs(30 + size / (10 << 20));
        let start = Instant::now();
        conn.progress_handler(100_000, Some(move || start.elapsed() > budget));
    })
}

/// The tables of device ops.
const ACTIVITY: [&str; 3] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
];

/// The tables the reader queries: none may have computed columns.
const QUERIED: [&str; 7] = [
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
];

/// Reads one export; one `RankFile` per GPU with activity. `name_rank` is the
/// rank in the file name, if any.
pub fn read(
    path: &Path,
    name_rank: Option<u32>,
    cpu_ranges: bool,
) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
    let conn = open(path)?;
    let mut r = Reader {
        conn: &conn,
        path,
        strings: HashMap::new(),
        tables: HashSet::new(),
    };
    r.tables = r
        .rows(
            "SELECT name FROM sqlite_master WHERE type = 'table'",
            |row| row.get::<_, String>(0),
        )
        .map_err(|_| Error::NotATrace {
            path: path.to_owned(),
            why: "not a SQLite database".into(),
        })?
        .into_iter()
        .collect();
    if !r.has("StringIds") || !(r.has("CUPTI_ACTIVITY_KIND_KERNEL") || r.has("NVTX_EVENTS")) {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "SQLite without Nsight Systems tables (StringIds, CUPTI_ACTIVITY_KIND_KERNEL): \
                  not an `nsys export --type sqlite` file"
                .into(),
        });
    }
    for table in QUERIED.iter().filter(|t| r.has(t)) {
        r.plain(table)?;
    }
    r.strings = r
        .rows("SELECT id, value FROM StringIds", |row| {
            Ok((row.get::<_, i64>(0)?, Arc::from(row.get::<_, String>(1)?)))
        })?
        .into_iter()
        .collect();
    // The ops are read twice: first each one's device, process and
    // correlation id (how many ops each device has, which processes drove
    // it, which calls issued one), then, once the calls are read and let go,
    // whole, straight onto their device's timeline. Held at once, the ops
    // as read (80 bytes), the calls and the model's ops were the peak.
    // Each device's op count and processes.
    let mut counted: std::collections::BTreeMap<i64, (usize, HashSet<i64>)> = Default::default();
    let mut issued = Issued::default();
    // Made once at its size: grown by doubling, the sets it outgrew stayed
    // with the process (the allocator keeps what it frees).
    let mut ops = 0usize;
    for table in ACTIVITY.iter().filter(|t| r.has(t)) {
        let n = r.rows(&format!("SELECT count(*) FROM {table}"), |row| {
            row.get::<_, i64>(0)
        })?;
        ops = ops.saturating_add(n.first().map_or(0, |&n| usize::try_from(n).unwrap_or(0)));
    }
    issued.reserve(ops);
    for table in ACTIVITY.iter().filter(|t| r.has(t)) {
        let sql = format!("SELECT deviceId, globalPid, correlationId FROM {table}");
        r.each(&sql, |row| {
            let device: i64 = row.get(0)?;
            let pid = pid(row.get::<_, Option<i64>>(1)?.unwrap_or(0));
            let (ops, pids) = counted.entry(device).or_default();
            *ops += 1;
            pids.insert(pid);
            issued.insert(pid, row.get::<_, Option<i64>>(2)?.unwrap_or(-1));
            Ok(())
        })?;
    }
    let devices: Vec<Device> = (counted.into_iter())
        .map(|(id, (ops, pids))| Device {
            id,
            ops,
            pids: pids.into_iter().collect(),
        })
        .collect();
    // With CPU lanes, the CPU sides take each call as it is read; without,
    // they are made once the calls are (their NVTX ranges not held beside
    // the calls and the set of issuing ops, the peak).
    let mut sides = match cpu_ranges {
        true => Some(CpuSides::new(path, &devices, &nvtx_ranges(&r)?, true)),
        false => None,
    };
    // Runtime calls: only those a metric reads are kept whole (see
    // `Calls`); which calls issued a device op is known here before the
    // calls are read. With CPU lanes, each call goes straight onto its
    // thread's lane as it is read (the model keeps those of threads that
    // launched a kernel).
    let mut calls = Calls::after(&issued);
    if r.has("CUPTI_ACTIVITY_KIND_RUNTIME") {
        r.each(
            "SELECT globalTid, correlationId, start, end, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
            |row| {
                let global = row.get::<_, Option<i64>>(0)?.unwrap_or(0);
                let correlation = row.get::<_, Option<i64>>(1)?.unwrap_or(-1);
                let call = Cpu {
                    pid: pid(global),
                    tid: tid(global),
                    start: Ns(row.get(2)?),
                    end: Ns(row.get(3)?),
                    name: r.text(row.get_ref(4)?).unwrap_or_default(),
                };
                if let Some(sides) = sides.as_mut() {
                    sides.call(&call);
                }
                calls.push(call, correlation);
                Ok(())
            },
        )?;
    }
    let calls = calls.finish(std::iter::empty()).calls;
    drop(issued);
    let launches = Launches::new(calls);
    let sides = match sides {
        Some(sides) => sides,
        None => CpuSides::new(path, &devices, &nvtx_ranges(&r)?, false),
    };
    let gpus: Vec<(i64, String, Option<u32>)> = if r.has("TARGET_INFO_GPU") {
        r.rows("SELECT id, name, smCount FROM TARGET_INFO_GPU", |row| {
            Ok((
                row.get(0)?,
                r.text(row.get_ref(1)?)
                    .map_or_else(String::new, |s| s.to_string()),
                row.get::<_, Option<i64>>(2)?
                    .and_then(|s| u32::try_from(s).ok()),
            ))
        })?
    } else {
        Vec::new()
    };
    // What the session's times count from, in Unix time: so a memory
    // snapshot's allocator clock and other runs' files can be placed.
    let epoch = if r.has("TARGET_INFO_SESSION_START_TIME") {
        r.rows(
            "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
            |row| row.get::<_, Option<i64>>(0),
        )?
        .into_iter()
        .flatten()
        .find(|&e| e > 0)
        .map(Ns)
    } else {
        None
    };
    // Each op's launch time, in the order the ops are read below: held
    // while they are placed instead of the calls (8 bytes an op, where the
    // calls kept take 32 and their index 24).
    let mut launch_of: Vec<Ns> = Vec::new();
    let _ = launch_of.try_reserve_exact(devices.iter().map(|d| d.ops).sum());
    for table in ACTIVITY.iter().filter(|t| r.has(t)) {
        // `NOT INDEXED`: every pass reads a table in its own order.
        let sql = format!("SELECT globalPid, correlationId, start FROM {table} NOT INDEXED");
        r.each(&sql, |row| {
            let pid = pid(row.get::<_, Option<i64>>(0)?.unwrap_or(0));
            let correlation = row.get::<_, Option<i64>>(1)?.unwrap_or(-1);
            let start = Ns(row.get(2)?);
            launch_of.push(launches.get(pid, correlation).unwrap_or(start));
            Ok(())
        })?;
    }
    let shared = sides.finish(&launches);
    let mut placing = Placing::new(path, &devices, shared);
    drop(launches);
    // The calls (32 bytes each) go back before the ops (56) take their room.
    crate::memory::let_go();
    placing.make_room(&devices);
    let mut launch_of = launch_of.into_iter();
    let mut place = |o: &Raw| placing.place(o, launch_of.next().unwrap_or(o.start));
    let own = OwnNames::default();
    if r.has("CUPTI_ACTIVITY_KIND_KERNEL") {
        let cols = r.columns("CUPTI_ACTIVITY_KIND_KERNEL")?;
        let name_col = if cols.contains("demangledName") {
            "demangledName"
        } else {
            "shortName"
        };
        let sql = format!(
            "SELECT deviceId, globalPid, correlationId, start, end, {name_col}, shortName, streamId, \
             gridX * gridY * gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL NOT INDEXED"
        );
        r.each(&sql, |row| {
            let name = r
                .text(row.get_ref(5)?)
                .or_else(|| r.text(row.get_ref(6).ok()?))
                .unwrap_or_else(|| own.unknown_kernel());
            let blocks = row.get::<_, Option<f64>>(8)?;
            place(&Raw {
                activity: Activity::Kernel,
                stream: row.get::<_, Option<i64>>(7)?.unwrap_or(0),
                work: Work::of(Activity::Kernel, blocks, None).into(),
                ..Raw::placed(row, name)?
            });
            Ok(())
        })?;
    }
    for (table, activity) in [
        ("CUPTI_ACTIVITY_KIND_MEMCPY", Activity::Memcpy),
        ("CUPTI_ACTIVITY_KIND_MEMSET", Activity::Memset),
    ] {
        if !r.has(table) {
            continue;
        }
        let kind = if activity == Activity::Memcpy {
            "copyKind"
        } else {
            "0"
        };
        let sql = format!(
            "SELECT deviceId, globalPid, correlationId, start, end, {kind}, streamId, bytes FROM {table} NOT INDEXED"
        );
        r.each(&sql, |row| {
            let bytes = (row.get::<_, Option<i64>>(7)?).and_then(|b| u64::try_from(b).ok());
            let name = match activity {
                Activity::Memcpy => own.copy(row.get::<_, Option<i64>>(5)?.unwrap_or(0)),
                _ => own.memset(),
            };
            place(&Raw {
                activity,
                stream: row.get::<_, Option<i64>>(6)?.unwrap_or(0),
                work: Work::of(activity, None, bytes).into(),
                ..Raw::placed(row, name)?
            });
            Ok(())
        })?;
    }
    drop(launch_of);
    // And the launch times, before the rank's figures are made.
    crate::memory::let_go();
    let mut files = placing.finish(name_rank, &gpus);
    for (_, f) in &mut files {
        f.timeline.epoch = epoch;
    }
    Ok(files)
}

/// An export's NVTX ranges: push/pop (59) and start/end (60); marks have
/// no end.
fn nvtx_ranges(r: &Reader) -> Result<Vec<Cpu>, Error> {
    if !r.has("NVTX_EVENTS") {
        return Ok(Vec::new());
    }
    r.rows(
        "SELECT globalTid, start, end, text, textId FROM NVTX_EVENTS \
         WHERE eventType IN (59, 60) AND end IS NOT NULL AND end >= start",
        |row| {
            let name = r
                .text(row.get_ref(3)?)
                .or_else(|| r.text(row.get_ref(4).ok()?))
                .unwrap_or_default();
            let global = row.get::<_, Option<i64>>(0)?.unwrap_or(0);
            Ok(Cpu {
                pid: pid(global),
                tid: tid(global),
                start: Ns(row.get(1)?),
                end: Ns(row.get(2)?),
                name,
            })
        },
    )
}

/// The NVTX ranges of `pids` (every process's: `None`), in the export's
/// order (by start) whatever the process.
fn ranges_of<'a>(of: &HashMap<i64, Vec<&'a Cpu>>, pids: Option<&[i64]>) -> Vec<&'a Cpu> {
    let mut all: Vec<i64>;
    let pids = match pids {
        Some(p) => p,
        None => {
            all = of.keys().copied().collect();
            all.sort_unstable();
            &all
        }
    };
    let mut v: Vec<&Cpu> = pids
        .iter()
        .filter_map(|p| of.get(p))
        .flatten()
        .copied()
        .collect();
    v.sort_by_key(|c| c.start);
    v
}

/// The CPU side of each set of processes that drove a device: NVTX ranges
/// (`ProfilerStep#N` ranges are steps) and kernel-launch calls, made once
/// per set and shared by every device it drove (a process driving 2,000
/// GPUs does not copy its 20,000 ranges 2,000 times); with one device,
/// every process's. With CPU lanes (the UI's; a metric alone does not need
/// them), also each launching thread's NVTX ranges and CUDA API calls as
/// its lane (as the PyTorch profiler's threads are), on a set only one
/// device has (a process driving several GPUs would otherwise copy its
/// threads to each).
struct CpuSides {
    /// Each device's set, by its place in `sides`.
    of_device: Vec<usize>,
    /// Each set's processes (`None`: every process, one device), its
    /// builder, and whether it takes lanes.
    sides: Vec<(Option<Vec<i64>>, TimelineBuilder, bool)>,
    /// The sets a process is in.
    of_pid: HashMap<i64, Vec<usize>>,
}

impl CpuSides {
    /// Each set's builder, with its NVTX ranges. `devices` in device order.
    fn new(path: &Path, devices: &[Device], nvtx: &[Cpu], lanes: bool) -> Self {
        let several = devices.len() > 1;
        let mut nvtx_of: HashMap<i64, Vec<&Cpu>> = HashMap::new();
        for c in nvtx {
            nvtx_of.entry(c.pid).or_default().push(c);
        }
        let mut sets: Vec<Option<Vec<i64>>> = Vec::new();
        let mut devices_of: Vec<usize> = Vec::new();
        let of_device: Vec<usize> = (devices.iter())
            .map(|d| {
                let pids = several.then(|| {
                    let mut p = d.pids.clone();
                    p.sort_unstable();
                    p.dedup();
                    p
                });
                let i = sets.iter().position(|s| *s == pids).unwrap_or_else(|| {
                    sets.push(pids);
                    devices_of.push(0);
                    sets.len() - 1
                });
                devices_of[i] += 1;
                i
            })
            .collect();
        let mut of_pid: HashMap<i64, Vec<usize>> = HashMap::new();
        let mut sides = Vec::with_capacity(sets.len());
        for (i, (pids, n)) in sets.into_iter().zip(devices_of).enumerate() {
            for &p in pids.iter().flatten() {
                of_pid.entry(p).or_default().push(i);
            }
            let lanes = lanes && n == 1;
            let mut t = TimelineBuilder::new(path, SourceFormat::Nsys);
            for c in ranges_of(&nvtx_of, pids.as_deref()) {
                let Ok(dur) = t.between(c.start, c.end) else {
                    continue;
                };
                let name = t.intern(&c.name);
                match step_number(&c.name) {
                    Some(number) => t.push_step(number, c.start, c.start + dur),
                    None => t.push_annotation(name, c.start, c.start + dur, false),
                }
                if lanes {
                    t.push_cpu(c.tid, name, CpuKind::Annotation, c.start, dur, false);
                }
            }
            sides.push((pids, t, lanes));
        }
        CpuSides {
            of_device,
            sides,
            of_pid,
        }
    }

    /// A call onto its thread's lane, on each set with lanes it is in. Its
    /// span and damage are counted by [`Self::finish`] (damaged calls are
    /// among those kept).
    fn call(&mut self, c: &Cpu) {
        if damaged(c.start, c.end) {
            return;
        }
        let dur = (c.end - c.start).max(Ns::ZERO);
        let launch = c.name.contains("Launch");
        // One device: its set is every process.
        let every = matches!(self.sides.first(), Some((None, ..)));
        let sets = match every {
            true => &[0][..],
            false => self.of_pid.get(&c.pid).map_or(&[][..], Vec::as_slice),
        };
        for &i in sets {
            let (_, t, lanes) = &mut self.sides[i];
            if *lanes {
                let name = t.intern(&c.name);
                t.push_cpu(c.tid, name, CpuKind::Runtime, c.start, dur, launch);
            }
        }
    }

    /// Each set's CPU side, with the calls kept (launches, issuers, each
    /// process's earliest and latest other call: the trace's span), and
    /// each device's set.
    fn finish(self, launches: &Launches) -> (Vec<usize>, Vec<SharedCpu>) {
        let shared = (self.sides.into_iter())
            .map(|(pids, mut t, _)| {
                let calls: Vec<&[Call]> = match &pids {
                    None => vec![&launches.0],
                    Some(pids) => pids.iter().map(|&p| launches.of(p)).collect(),
                };
                let each = || calls.iter().flat_map(|c| c.iter());
                t.reserve_launch_calls(each().filter(|c| c.launch()).count());
                for c in each() {
                    let Ok(dur) = t.between(c.start, c.end) else {
                        continue;
                    };
                    if c.launch() {
                        t.launch_call(c.start, dur);
                    }
                }
                t.into_shared()
            })
            .collect();
        (self.of_device, shared)
    }
}

/// The runtime calls kept, sorted by process, correlation id, start and
/// order: an op's launch time is found by its process and correlation id,
/// and a process's calls lie together. Of two calls with the same ids (none
/// in a real export), the one that started later.
struct Launches(Vec<Call>);

impl Launches {
    fn new(mut calls: Vec<Call>) -> Self {
        calls.sort_unstable_by_key(|c| (c.pid(), c.correlation, c.start, c.order));
        Launches(calls)
    }

    fn get(&self, pid: i64, correlation: i64) -> Option<Ns> {
        let after = (self.0).partition_point(|c| (c.pid(), c.correlation) <= (pid, correlation));
        let c = self.0.get(after.checked_sub(1)?)?;
        (c.pid() == pid && c.correlation == correlation).then_some(c.start)
    }

    /// The calls of process `pid`.
    fn of(&self, pid: i64) -> &[Call] {
        let from = self.0.partition_point(|c| c.pid() < pid);
        let to = self.0.partition_point(|c| c.pid() <= pid);
        &self.0[from..to]
    }
}

/// A device of an export as its ops are counted before they are placed:
/// how many, and which processes issued them (in no particular order).
pub(super) struct Device {
    pub id: i64,
    pub ops: usize,
    pub pids: Vec<i64>,
}

/// One rank per GPU from the ops of a whole export (JSON), the ops held as
/// read. `cpu`: the runtime calls kept, the NVTX ranges, and whether the
/// launching threads become CPU lanes (the UI's; a metric alone does not
/// need them).
pub(super) fn assemble(
    path: &Path,
    name_rank: Option<u32>,
    mut raw: Vec<Raw>,
    (kept, nvtx, cpu_ranges): (Kept, Vec<Cpu>, bool),
    gpus: &[(i64, String, Option<u32>)],
) -> Vec<(Option<u32>, RankFile)> {
    // Each device's ops together, in the order read (a stable sort, where
    // not so already): grouped in place rather than copied.
    if !raw.is_sorted_by_key(|o| o.device) {
        raw.sort_by_key(|o| o.device);
    }
    let devices: Vec<Device> = (raw.chunk_by(|a, b| a.device == b.device))
        .map(|ops| {
            let mut pids: Vec<i64> = ops.iter().map(|o| o.pid).collect();
            pids.sort_unstable();
            pids.dedup();
            Device {
                id: ops[0].device,
                ops: ops.len(),
                pids,
            }
        })
        .collect();
    // With lanes, every call was kept with its thread and name for them.
    let Kept { calls, lanes } = kept;
    let mut sides = CpuSides::new(path, &devices, &nvtx, cpu_ranges);
    drop(nvtx);
    if cpu_ranges {
        let with_lanes = (calls.iter()).filter_map(|c| Some((c, lanes.get(c.order as usize)?)));
        for (c, (tid, name)) in with_lanes {
            sides.call(&Cpu {
                pid: c.pid(),
                tid: *tid,
                start: c.start,
                end: c.end,
                name: name.clone(),
            });
        }
    }
    drop(lanes);
    let launches = Launches::new(calls);
    let mut placing = Placing::new(path, &devices, sides.finish(&launches));
    placing.make_room(&devices);
    for o in &raw {
        placing.place(o, launches.get(o.pid, o.correlation).unwrap_or(o.start));
    }
    drop(raw);
    placing.finish(name_rank, gpus)
}

/// The ranks of an export while its ops are placed: one timeline per
/// device, in device order, each with the CPU side of the processes that
/// drove it.
struct Placing {
    ids: Vec<i64>,
    timelines: Vec<TimelineBuilder>,
    classes: HashMap<(Arc<str>, Activity), KernelClass>,
}

impl Placing {
    /// `devices` in device order; `cpu`: each device's CPU side, by its
    /// place among the sides (see [`CpuSides::finish`]).
    fn new(
        path: &Path,
        devices: &[Device],
        (of_device, mut sides): (Vec<usize>, Vec<SharedCpu>),
    ) -> Self {
        let timelines = (of_device.iter())
            .map(|&i| {
                let mut t = TimelineBuilder::new(path, SourceFormat::Nsys);
                if let Some(cpu) = sides.get_mut(i) {
                    t.share(cpu);
                }
                t
            })
            .collect();
        Placing {
            ids: devices.iter().map(|d| d.id).collect(),
            timelines,
            classes: HashMap::new(),
        }
    }

    /// Room for each device's ops, `devices` as given to [`Self::new`]:
    /// made once the calls are let go, whose memory the ops can then take.
    fn make_room(&mut self, devices: &[Device]) {
        for (t, d) in self.timelines.iter_mut().zip(devices) {
            t.reserve_ops(d.ops);
        }
    }

    /// Puts an op, launched at `launch`, on its device's timeline; an op of
    /// a device not counted is not placed.
    fn place(&mut self, o: &Raw, launch: Ns) {
        let Ok(i) = self.ids.binary_search(&o.device) else {
            return;
        };
        let t = &mut self.timelines[i];
        let class = *(self.classes)
            .entry((o.name.clone(), o.activity))
            .or_insert_with(|| classify(&o.name, o.activity));
        let name = t.intern(&o.name);
        // Damaged times are skipped and counted by the builder.
        let _ = t.push_op(DeviceOp {
            start: o.start,
            dur: o.end.saturating_sub(o.start).max(Ns::ZERO),
            name,
            activity: o.activity,
            class,
            coll: (class == KernelClass::Communication).then(|| coll_kind(&o.name)),
            stream: u32::try_from(o.stream).unwrap_or(0),
            device: u32::try_from(o.device).unwrap_or(0),
            work: o.work,
            meta: Slot::NONE,
            step: Slot::NONE,
            launch,
        });
    }

    fn finish(
        self,
        name_rank: Option<u32>,
        gpus: &[(i64, String, Option<u32>)],
    ) -> Vec<(Option<u32>, RankFile)> {
        let devices = self.ids.len() as u32;
        let several = devices > 1;
        let mut out = Vec::with_capacity(self.ids.len());
        for (index, (device, mut t)) in self.ids.into_iter().zip(self.timelines).enumerate() {
            if let Some((id, name, sms)) = gpus.iter().find(|g| g.0 == device) {
                t.push_device(DeviceInfo {
                    id: u32::try_from(*id).unwrap_or(0),
                    name: name.clone(),
                    num_sms: *sms,
                });
            }
            let rank = match (several, name_rank) {
                (false, r) => r,
                // A node's export with k GPUs, named rank r: ranks r·k .. r·k + k − 1.
                (true, Some(r)) => Some(r * devices + index as u32),
                (true, None) => Some(index as u32),
            };
            out.push((rank, RankFile::built(t)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runtime calls as [`Calls`] keeps them, read before their ops.
    fn kept(runtime: Vec<(Cpu, i64)>, lanes: bool) -> Kept {
        let mut calls = Calls::new(lanes);
        runtime
            .into_iter()
            .for_each(|(c, corr)| calls.push(c, corr));
        calls.finish(std::iter::empty())
    }

    /// An op's launch is the call with its process and correlation id; of
    /// two such calls, the one that started later.
    #[test]
    fn launches_by_process_and_correlation() {
        let call = |pid, start| Cpu {
            pid,
            tid: 0,
            start: Ns(start),
            end: Ns(start + 1),
            name: "cudaLaunchKernel".into(),
        };
        let runtime = vec![
            (call(2, 50), 7),
            (call(1, 10), 7),
            (call(1, 20), 3),
            (call(1, 30), 7),
            (call(1, 40), i64::MIN),
            (call(2, 45), 7),
        ];
        let l = Launches::new(kept(runtime, false).calls);
        assert_eq!(l.of(2).len(), 2);
        assert!(l.of(3).is_empty());
        let got = [
            (1, 7),
            (2, 7),
            (1, 3),
            (1, i64::MIN),
            (1, 5),
            (3, 7),
            (0, 0),
        ]
        .map(|(p, c)| l.get(p, c).map(Ns::get));
        assert_eq!(
            got,
            [Some(30), Some(50), Some(20), Some(40), None, None, None]
        );
    }

    /// Without CPU lanes, only the runtime calls a metric reads are kept:
    /// the launch, and the earliest and latest call, which the trace's time
    /// span counts (the polling between them is dropped); the span and each
    /// op's launch are what keeping every call gives. With lanes, only the
    /// launching thread's calls and ranges are on one; another thread's
    /// still span the trace.
    #[test]
    fn unused_runtime_calls_are_dropped_but_still_span_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sqlite");
        let db = Connection::open(&path).unwrap();
        let (gpid, gtid, idle) = (7i64 << 24, (7i64 << 24) | 12, (7i64 << 24) | 13);
        db.execute_batch(&format!(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'cudaLaunchKernel'),
                 (3, 'cudaStreamSynchronize'), (4, 'cudaEventQuery');
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER,
                 deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
                 demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER);
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 1100, 0, 7, 5, {gpid}, 1, 1, 1, 1, 1);
             CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER,
                 globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
             INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
                 (100, 120, {gtid}, 6, 3), (900, 910, {gtid}, 5, 2),
                 (1500, 1510, {gtid}, 8, 4), (2000, 2500, {gtid}, 7, 4),
                 (50, 60, {idle}, 9, 4), (3000, 3100, {idle}, 10, 4);
             CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER,
                 globalTid INTEGER, text TEXT, textId INTEGER);
             INSERT INTO NVTX_EVENTS VALUES (200, 800, 59, {gtid}, 'forward', NULL),
                 (70, 80, 59, {idle}, 'wait', NULL);"
        ))
        .unwrap();
        drop(db);
        for lanes in [false, true] {
            let files = read(&path, None, lanes).unwrap();
            let t = &files[0].1.timeline;
            let w = t.window.unwrap();
            assert_eq!((w.start.get(), w.end.get()), (50, 3100), "lanes {lanes}");
            assert_eq!((t.ops[0].launch.get(), t.launch_calls), (900, 1));
            assert_eq!(t.annotations.len(), 2);
            let threads: Vec<(u64, usize)> =
                t.cpu.iter().map(|th| (th.tid, th.ops.len())).collect();
            assert_eq!(threads, if lanes { vec![(12, 5)] } else { vec![] });
        }
    }

    /// An export of two GPUs driven by two processes, kernels interleaved
    /// and a copy on each: read in two passes, each GPU is a rank in device
    /// order (the file's rank times two and up), with its own ops, each
    /// launched by the call with its process and correlation id (a copy
    /// by its `cudaMemcpyAsync`), and with the CPU side of its process.
    #[test]
    fn a_two_gpu_export_places_each_op_on_its_device() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node3.sqlite");
        let db = Connection::open(&path).unwrap();
        let (p1, p2) = (1i64 << 24, 2i64 << 24);
        let (t1, t2) = (p1 | 5, p2 | 6);
        db.execute_batch(&format!(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'ncclKernel_AllReduce'),
                 (3, 'cudaLaunchKernel'), (4, 'cudaMemcpyAsync'), (5, 'cudaEventQuery');
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER,
                 deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
                 demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER);
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
                 (1000, 1100, 1, 7, 11, {p2}, 1, 1, 2, 1, 1),
                 (1050, 1150, 0, 7, 21, {p1}, 1, 1, 4, 1, 1),
                 (1200, 1300, 1, 8, 12, {p2}, 2, 2, 1, 1, 1),
                 (1250, 1350, 0, 8, 22, {p1}, 2, 2, 1, 1, 1);
             CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER,
                 deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
                 copyKind INTEGER, bytes INTEGER);
             INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES
                 (900, 950, 0, 9, 23, {p1}, 1, 4096), (905, 955, 1, 9, 13, {p2}, 2, 64);
             CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER,
                 globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
             INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
                 (800, 810, {t1}, 23, 4), (801, 811, {t2}, 13, 4),
                 (850, 860, {t2}, 11, 3), (851, 861, {t1}, 21, 3),
                 (852, 862, {t2}, 12, 3), (853, 863, {t1}, 22, 3),
                 (870, 871, {t1}, 30, 5), (1400, 1401, {t2}, 31, 5);"
        ))
        .unwrap();
        drop(db);
        for lanes in [false, true] {
            let files = read(&path, Some(3), lanes).unwrap();
            // Each rank's ops: name, launch time, device.
            type Ops = Vec<(String, i64, u32)>;
            let got: Vec<(Option<u32>, Ops)> = (files.iter())
                .map(|(rank, f)| {
                    let t = &f.timeline;
                    let ops = (t.ops.iter())
                        .map(|o| (t.name(o.name).to_string(), o.launch.get(), o.device))
                        .collect();
                    (*rank, ops)
                })
                .collect();
            let op = |n: &str, launch, device| (n.to_string(), launch, device);
            assert_eq!(
                got,
                [
                    (
                        Some(6),
                        vec![
                            op("Memcpy HtoD", 800, 0),
                            op("gemm", 851, 0),
                            op("ncclKernel_AllReduce", 853, 0)
                        ]
                    ),
                    (
                        Some(7),
                        vec![
                            op("Memcpy DtoH", 801, 1),
                            op("gemm", 850, 1),
                            op("ncclKernel_AllReduce", 852, 1)
                        ]
                    ),
                ],
                "lanes {lanes}"
            );
            let t = &files[0].1.timeline;
            assert_eq!(t.ops[0].bytes(), Some(4096));
            assert_eq!(t.launch_calls, 2, "lanes {lanes}");
            // Each process's calls span its GPU's trace, polling included.
            let w = files[1].1.timeline.window.unwrap();
            assert_eq!((w.start.get(), w.end.get()), (801, 1401), "lanes {lanes}");
        }
    }

    /// One process driving 200 GPUs with 2,000 NVTX ranges (a `ProfilerStep`
    /// among them) and launch calls: each device is a rank, all with the
    /// process's CPU side, held once. A second process's GPU has its own.
    /// Ops of two GPUs interleaved as the export lists them (by start):
    /// each GPU is a rank, in device order, holding its own ops.
    #[test]
    fn interleaved_devices_are_grouped_in_read_order() {
        let op = |device, start, name: &str| Raw {
            device,
            pid: 1,
            correlation: start,
            start: Ns(start),
            end: Ns(start + 5),
            name: name.into(),
            activity: Activity::Kernel,
            stream: 7,
            work: PackedWork::NONE,
        };
        let raw = vec![
            op(1, 10, "b1"),
            op(0, 20, "a1"),
            op(1, 30, "b2"),
            op(0, 40, "a2"),
        ];
        let files = assemble(
            Path::new("x.sqlite"),
            None,
            raw,
            (kept(vec![], false), vec![], false),
            &[],
        );
        let names: Vec<(Option<u32>, Vec<&str>)> = (files.iter())
            .map(|(rank, f)| {
                let t = &f.timeline;
                (*rank, t.ops.iter().map(|o| t.name(o.name)).collect())
            })
            .collect();
        assert_eq!(
            names,
            [(Some(0), vec!["a1", "a2"]), (Some(1), vec!["b1", "b2"])]
        );
        assert_eq!(files[1].1.timeline.ops[0].device, 1);
    }

    #[test]
    fn a_process_cpu_side_is_shared_by_its_devices() {
        let cpu = |pid, start, name: &str| Cpu {
            pid,
            tid: 10 + pid as u64,
            start,
            end: start + Ns(5),
            name: name.into(),
        };
        let raw: Vec<Raw> = (0..201)
            .map(|d| Raw {
                device: d,
                pid: if d < 200 { 1 } else { 2 },
                correlation: d,
                start: Ns(1_000 + d),
                end: Ns(1_100 + d),
                name: "gemm_kernel".into(),
                activity: Activity::Kernel,
                stream: 7,
                work: PackedWork::NONE,
            })
            .collect();
        let mut nvtx: Vec<Cpu> = (0..2_000).map(|i| cpu(1, Ns(i * 10), "forward")).collect();
        nvtx.push(Cpu {
            pid: 1,
            tid: 11,
            start: Ns::ZERO,
            end: Ns(50_000),
            name: "ProfilerStep#4".into(),
        });
        nvtx.push(cpu(2, Ns(7), "backward"));
        let mut runtime: Vec<(Cpu, i64)> = (0..200)
            .map(|d| (cpu(1, Ns(900), "cudaLaunchKernel"), d))
            .collect();
        runtime.push((cpu(2, Ns(950), "cudaLaunchKernel"), 200));
        let files = assemble(
            Path::new("x.sqlite"),
            None,
            raw,
            (kept(runtime, true), nvtx, true),
            &[],
        );
        assert_eq!(files.len(), 201);
        let first = &files[0].1.timeline;
        for (_, f) in &files[..200] {
            let t = &f.timeline;
            assert!(Arc::ptr_eq(&t.annotations, &first.annotations));
            assert_eq!(t.annotations.len(), 2_000);
            assert_eq!(t.name(t.annotations[0].name), "forward");
            assert_eq!(t.steps.len(), 1);
            assert_eq!(
                (t.launch_calls, t.launch_by_step.as_slice()),
                (200, &[(200, Ns(1_000))][..])
            );
            assert_eq!(t.ops[0].step.get(), Some(0));
        }
        let other = &files[200].1.timeline;
        assert_eq!(other.annotations.len(), 1);
        assert_eq!(other.name(other.annotations[0].name), "backward");
        assert!(other.steps.is_empty());
        // CPU lanes: the process driving 200 GPUs keeps none (each rank
        // would copy them); the one-GPU process has its launching thread
        // 12, its NVTX range and its launch call on it, the launch found
        // where its kernel names it.
        assert!(files[..200].iter().all(|(_, f)| f.timeline.cpu.is_empty()));
        let th = &other.cpu;
        assert_eq!(th.len(), 1);
        assert_eq!((th[0].tid, th[0].launches, th[0].ops.len()), (12, 1, 2));
        let kinds: Vec<(CpuKind, &str)> = th[0]
            .ops
            .iter()
            .map(|o| (o.kind, other.name(o.name)))
            .collect();
        assert_eq!(
            kinds,
            [
                (CpuKind::Annotation, "backward"),
                (CpuKind::Runtime, "cudaLaunchKernel")
            ]
        );
        assert_eq!(other.ops[0].launch, Ns(950));
    }

    #[test]
    fn step_names() {
        assert_eq!(step_number("ProfilerStep#12"), Some(12));
        assert_eq!(step_number("step_0"), Some(0));
        assert_eq!(step_number("Step 7"), Some(7));
        assert_eq!(step_number("iteration_3"), Some(3));
        assert_eq!(step_number("stepper_3"), None);
        assert_eq!(step_number("NCCL:ncclCommInitRankConfig"), None);
    }

    #[test]
    fn process_ids_from_global_ids() {
        // globalTid = (vm << 56) | (pid << 24) | tid.
        assert_eq!(pid((1 << 56) | (4242 << 24) | 17), 4242);
        assert_eq!(tid((1 << 56) | (4242 << 24) | 17), 17);
    }
}
