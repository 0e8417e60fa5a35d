//! Inputs for `scripts/bench_readers.sh`, one reader at a time, about MB
//! megabytes each:
//!
//!   gen_readers xla-json    OUT MB          # JAX/TPU trace JSON, from scratch
//!   gen_readers xspace      OUT MB          # XSpace protobuf, from scratch
//!   gen_readers nsys-jax    OUT MB          # nsys-jax archive, from scratch
//!   gen_readers nsys-sqlite OUT MB SQLITE   # a real export, its activity repeated
//!   gen_readers nsys-json   OUT MB JSON     # a real export, its events repeated
//!   gen_readers et          OUT MB ET_JSON  # a real execution trace, its nodes repeated
//!
//! The from-scratch ones follow the layout of the profilers' own files (names,
//! HLO text, metadata threads and host events the readers skip); the others
//! repeat a real file's activity K times, each copy shifted past the last in
//! time (and in correlation ids and node ids), so every column, string and
//! layout is the profiler's own.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use prost::Message;
use regex::{Captures, Regex};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, out, mb, rest @ ..] = args.as_slice() else {
        bail!("usage: gen_readers FORMAT OUT MB [REAL_FILE]");
    };
    let bytes = (mb.parse::<f64>().context("MB")? * 1e6) as u64;
    let out = PathBuf::from(out);
    fs::create_dir_all(&out)?;
    let real = || {
        rest.first()
            .map(PathBuf::from)
            .context("the real file to repeat")
    };
    let written = match kind.as_str() {
        "xla-json" => xla_json(&out.join("host0.trace.json"), bytes)?,
        "xspace" => xspace(&out.join("host0.xplane.pb"), bytes)?,
        "nsys-jax" => nsys_jax(&out.join("run.zip"), bytes)?,
        "nsys-sqlite" => nsys_sqlite(&real()?, &out.join("report.sqlite"), bytes)?,
        "nsys-json" => nsys_json(&real()?, &out.join("report.json"), bytes)?,
        "et" => exec_trace(&real()?, &out.join("torch_et_0.json"), bytes)?,
        other => bail!("unknown format {other}"),
    };
    eprintln!("{kind}: {written} bytes in {}", out.display());
    Ok(())
}

/// One step's HLO program: `OPS` instructions, as the XLA TPU compiler names
/// and prints them; every 40th an async collective (start and done).
const OPS: usize = 2_000;
const DEVICES: u32 = 4;

struct Hlo {
    name: String,
    text: String,
    /// Device time (ns).
    dur: i64,
}

fn program() -> Vec<Hlo> {
    let colls = [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "collective-permute",
    ];
    let mut ops = Vec::with_capacity(OPS);
    let mut i = 0;
    while ops.len() < OPS {
        let layer = i / 40;
        let meta = format!(
            "metadata={{op_name=\"jit(train_step)/jit(main)/transformer/layers_{layer}/mlp/dot_general\" source_file=\"/app/model.py\" source_line={}}}",
            100 + i % 300
        );
        if i % 40 == 39 {
            let c = colls[(i / 40) % colls.len()];
            ops.push(Hlo {
                name: format!("{c}-start.{i}"),
                text: format!(
                    "%{c}-start.{i} = (bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}}, bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}}) {c}-start(bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}} %fusion.{}), channel_id={i}, replica_groups={{{{0,1,2,3}}}}, use_global_device_ids=true, {meta}",
                    i - 1
                ),
                dur: 1_500,
            });
            ops.push(Hlo {
                name: format!("{c}-done.{i}"),
                text: format!(
                    "%{c}-done.{i} = bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}} {c}-done((bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}}, bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}}) %{c}-start.{i}), {meta}"
                ),
                dur: 800,
            });
        } else {
            let (kind, dur) = match i % 5 {
                0 => ("convolution", 9_000),
                1 => ("fusion", 3_000),
                2 => ("copy", 600),
                3 => ("fusion", 2_200),
                _ => ("dot", 7_500),
            };
            ops.push(Hlo {
                name: format!("{kind}.{i}"),
                text: format!(
                    "%{kind}.{i} = bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}} {kind}(bf16[8,1024,4096]{{2,1,0:T(8,128)(2,1)}} %param.{i}, bf16[4096,4096]{{1,0:T(8,128)(2,1)}} %fusion.{}), kind=kLoop, calls=%fused_computation.{i}, {meta}",
                    i.saturating_sub(1)
                ),
                dur,
            });
        }
        i += 1;
    }
    ops
}

/// Step length (ns): the ops back to back with a 100 ns gap, plus an idle tail.
fn step_ns(ops: &[Hlo]) -> i64 {
    ops.iter().map(|o| o.dur + 100).sum::<i64>() + 50_000
}

fn us(ns: i64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The TensorBoard/xprof trace viewer JSON: devices as processes with `XLA
/// Modules` and `XLA Ops` threads, one host event per op on the host's
/// launcher thread, all on one line as xprof writes it.
fn xla_json(path: &Path, bytes: u64) -> Result<u64> {
    let ops = program();
    let mut w = Counting::new(path)?;
    w.put("{\"displayTimeUnit\":\"ns\",\"metadata\":{\"highres-ticks\":true},\"traceEvents\":[")?;
    let host = DEVICES + 1;
    let mut meta = String::new();
    for d in 0..DEVICES {
        let pid = d + 1;
        write!(meta, "{{\"pid\":{pid},\"name\":\"process_name\",\"ph\":\"M\",\"args\":{{\"name\":\"/device:TPU:{d}\"}}}},")?;
        for (tid, name) in [(1, "XLA Modules"), (2, "XLA Ops"), (3, "Steps")] {
            write!(meta, "{{\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"ph\":\"M\",\"args\":{{\"name\":\"{name}\"}}}},")?;
        }
    }
    write!(meta, "{{\"pid\":{host},\"name\":\"process_name\",\"ph\":\"M\",\"args\":{{\"name\":\"/host:CPU\"}}}},")?;
    write!(meta, "{{\"pid\":{host},\"tid\":7,\"name\":\"thread_name\",\"ph\":\"M\",\"args\":{{\"name\":\"python3\"}}}}")?;
    w.put(&meta)?;
    let step = step_ns(&ops);
    let mut line = String::new();
    let mut s = 0;
    while w.n < bytes {
        let t0 = 1_000_000 + s * step;
        for d in 0..DEVICES {
            let pid = d + 1;
            let skew = i64::from(d) * 700;
            line.clear();
            write!(line, ",{{\"pid\":{pid},\"tid\":1,\"ts\":{},\"dur\":{},\"ph\":\"X\",\"name\":\"jit_train_step({s})\",\"args\":{{\"run_id\":\"{s}\"}}}}", us(t0 + skew), us(step - 50_000))?;
            write!(line, ",{{\"pid\":{pid},\"tid\":3,\"ts\":{},\"dur\":{},\"ph\":\"X\",\"name\":\"{s}\",\"args\":{{\"group_id\":\"{s}\"}}}}", us(t0 + skew), us(step - 50_000))?;
            let mut t = t0 + skew;
            for o in &ops {
                write!(line, ",{{\"pid\":{pid},\"tid\":2,\"ts\":{},\"dur\":{},\"ph\":\"X\",\"name\":\"{}\",\"args\":{{\"long_name\":{},\"hlo_module\":\"jit_train_step\",\"hlo_op\":\"{}\",\"program_id\":\"4242\",\"run_id\":\"{s}\"}}}}",
                    us(t), us(o.dur), o.name, serde_json::to_string(&o.text)?, o.name)?;
                t += o.dur + 100;
            }
            w.put(&line)?;
        }
        // The host thread that launched each op: skipped by the reader, but
        // in every real file.
        line.clear();
        let mut t = t0 - 20_000;
        for o in &ops {
            write!(line, ",{{\"pid\":{host},\"tid\":7,\"ts\":{},\"dur\":{},\"ph\":\"X\",\"name\":\"ThunkExecute\",\"args\":{{\"hlo_op\":\"{}\"}}}}", us(t), us(300), o.name)?;
            t += 350;
        }
        w.put(&line)?;
        s += 1;
    }
    w.put("]}")?;
    w.finish()
}

/// `xplane.proto` (tsl/profiler/protobuf) in full for what is written here,
/// stats included: the reader skips them, a real file has them.
mod xplane {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XSpace {
        #[prost(message, repeated, tag = "1")]
        pub planes: Vec<XPlane>,
        #[prost(string, repeated, tag = "4")]
        pub hostnames: Vec<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XPlane {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "3")]
        pub lines: Vec<XLine>,
        #[prost(map = "int64, message", tag = "4")]
        pub event_metadata: HashMap<i64, XEventMetadata>,
        #[prost(map = "int64, message", tag = "5")]
        pub stat_metadata: HashMap<i64, XStatMetadata>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XLine {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(int64, tag = "3")]
        pub timestamp_ns: i64,
        #[prost(message, repeated, tag = "4")]
        pub events: Vec<XEvent>,
        #[prost(int64, tag = "10")]
        pub display_id: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEvent {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(int64, tag = "2")]
        pub offset_ps: i64,
        #[prost(int64, tag = "3")]
        pub duration_ps: i64,
        #[prost(message, repeated, tag = "4")]
        pub stats: Vec<XStat>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XStat {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(int64, tag = "4")]
        pub int64_value: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XStrStat {
        #[prost(int64, tag = "1")]
        pub metadata_id: i64,
        #[prost(string, tag = "5")]
        pub str_value: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XEventMetadata {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub display_name: String,
        #[prost(message, repeated, tag = "5")]
        pub stats: Vec<XStrStat>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct XStatMetadata {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(string, tag = "2")]
        pub name: String,
    }
}

/// An XSpace with a plane per TPU (`XLA Modules`, `XLA Ops` and `Steps`
/// lines; the HLO text in the event metadata) and a host plane with one
/// event per op launched.
fn xspace(path: &Path, bytes: u64) -> Result<u64> {
    use xplane::*;
    let ops = program();
    let step = step_ns(&ops);
    // Each op event takes about 20 bytes on the wire, four devices and the
    // host thread write one per op.
    let per_step = (ops.len() as u64 + 2) * 20 * u64::from(DEVICES + 1);
    let steps = (bytes / per_step).max(1) as i64;
    let stat_metadata: HashMap<i64, XStatMetadata> = ["run_id", "hlo_category", "program_id"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                i as i64 + 1,
                XStatMetadata {
                    id: i as i64 + 1,
                    name: (*n).into(),
                },
            )
        })
        .collect();
    let mut event_metadata: HashMap<i64, XEventMetadata> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let id = i as i64 + 10;
            let category = if o.name.contains("-start") || o.name.contains("-done") {
                "collective"
            } else {
                "convolution fusion"
            };
            (
                id,
                XEventMetadata {
                    id,
                    name: o.text.clone(),
                    display_name: o.name.clone(),
                    stats: vec![XStrStat {
                        metadata_id: 2,
                        str_value: category.into(),
                    }],
                },
            )
        })
        .collect();
    event_metadata.insert(
        1,
        XEventMetadata {
            id: 1,
            name: "jit_train_step".into(),
            ..Default::default()
        },
    );
    let ev = |id: i64, offset: i64, dur: i64, run: i64| XEvent {
        metadata_id: id,
        offset_ps: offset * 1000,
        duration_ps: dur * 1000,
        stats: vec![XStat {
            metadata_id: 1,
            int64_value: run,
        }],
    };
    let mut planes = Vec::new();
    for d in 0..DEVICES {
        let skew = i64::from(d) * 700;
        let (mut modules, mut op_events, mut steps_line) = (Vec::new(), Vec::new(), Vec::new());
        for s in 0..steps {
            let t0 = s * step + skew;
            modules.push(ev(1, t0, step - 50_000, s));
            steps_line.push(ev(1, t0, step - 50_000, s));
            let mut t = t0;
            for (i, o) in ops.iter().enumerate() {
                op_events.push(ev(i as i64 + 10, t, o.dur, s));
                t += o.dur + 100;
            }
        }
        let line = |id, name: &str, events| XLine {
            id,
            display_id: id,
            name: name.into(),
            timestamp_ns: 1_000_000,
            events,
        };
        planes.push(XPlane {
            id: i64::from(d) + 1,
            name: format!("/device:TPU:{d}"),
            lines: vec![
                line(1, "XLA Modules", modules),
                line(2, "XLA Ops", op_events),
                line(3, "Steps", steps_line),
            ],
            event_metadata: event_metadata.clone(),
            stat_metadata: stat_metadata.clone(),
        });
    }
    let mut host = Vec::new();
    for s in 0..steps {
        let mut t = s * step;
        for i in 0..ops.len() {
            host.push(ev(i as i64 + 10, t, 300, s));
            t += 350;
        }
    }
    planes.push(XPlane {
        id: 100,
        name: "/host:CPU".into(),
        lines: vec![XLine {
            id: 7,
            display_id: 7,
            name: "python3".into(),
            timestamp_ns: 980_000,
            events: host,
        }],
        event_metadata,
        stat_metadata,
    });
    let space = XSpace {
        planes,
        hostnames: vec!["tpu-vm-0".into()],
    };
    let buf = space.encode_to_vec();
    fs::write(path, &buf)?;
    Ok(buf.len() as u64)
}

/// An nsys-jax archive of one process driving 8 GPUs: per device and step an
/// `XlaModule` range holding a `Thunk` range per HLO op, projected to the GPU.
fn nsys_jax(path: &Path, bytes: u64) -> Result<u64> {
    use ccl_read::synth::nsys_jax::{archive, thread_table, trace_table_as_written, ProjRange};
    let ops = program();
    let step = step_ns(&ops);
    // Parquet keeps a row in about 5 bytes here (names dictionary-encoded);
    // measured.
    let devices = 8;
    let rows_per_step = (ops.len() + 1) * devices;
    let steps = (bytes as usize / (5 * rows_per_step)).max(1);
    let mut ranges = Vec::with_capacity(steps * rows_per_step);
    let mut threads = Vec::new();
    let names: Vec<String> = ops
        .iter()
        .map(|o| format!("Thunk:#hlo_op={}#", o.name))
        .collect();
    let mut id = 0;
    for d in 0..devices as i64 {
        let tid = 1000 + d;
        threads.push((
            4242,
            tid,
            format!("XlaLauncher:#global={d},local={d},process=0,slice=0#"),
        ));
        for s in 0..steps as i64 {
            let t0 = s * step + d * 700;
            id += 1;
            let module = id;
            ranges.push(ProjRange {
                id: module,
                parent: None,
                name: "XlaModule:#hlo_module=jit_train_step,program_id=42#".into(),
                start: t0,
                end: t0 + step - 50_000,
                pid: 4242,
                tid,
                ..Default::default()
            });
            let mut t = t0;
            for (o, name) in ops.iter().zip(&names) {
                id += 1;
                ranges.push(ProjRange {
                    id,
                    parent: Some(module),
                    name: name.clone(),
                    start: t,
                    end: t + o.dur,
                    pid: 4242,
                    tid,
                    ..Default::default()
                });
                t += o.dur + 100;
            }
        }
    }
    let threads: Vec<(i64, i64, &str)> = threads
        .iter()
        .map(|(p, t, n)| (*p, *t, n.as_str()))
        .collect();
    let zip = archive(
        "run",
        &trace_table_as_written(&ranges),
        Some(&thread_table(&threads)),
    );
    fs::write(path, &zip)?;
    Ok(zip.len() as u64)
}

/// How many copies of `real` make `bytes`.
fn copies(real: u64, bytes: u64) -> u64 {
    bytes.div_ceil(real.max(1)).max(1)
}

/// A real Nsight Systems SQLite export with its activity tables' rows
/// repeated, each copy shifted in time past the session and in correlation
/// ids past the last.
fn nsys_sqlite(real: &Path, path: &Path, bytes: u64) -> Result<u64> {
    let _ = fs::remove_file(path);
    fs::copy(real, path).with_context(|| format!("copying {}", real.display()))?;
    // The copy keeps the real file's read-only mode.
    let mut perm = fs::metadata(path)?.permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    fs::set_permissions(path, perm)?;
    let mut db = rusqlite::Connection::open(path)?;
    let tables = [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "NVTX_EVENTS",
    ];
    let present: Vec<&str> = tables
        .into_iter()
        .filter(|t| {
            db.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = ?1",
                [t],
                |r| r.get::<_, i64>(0),
            )
            .unwrap_or(0)
                > 0
        })
        .collect();
    let (mut first, mut last, mut corr) = (i64::MAX, 0i64, 0i64);
    for t in &present {
        let (a, b): (Option<i64>, Option<i64>) = db.query_row(
            &format!("SELECT min(start), max(coalesce(end, start)) FROM {t}"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        first = first.min(a.unwrap_or(i64::MAX));
        last = last.max(b.unwrap_or(0));
        if *t != "NVTX_EVENTS" {
            let c: Option<i64> =
                db.query_row(&format!("SELECT max(correlationId) FROM {t}"), [], |r| {
                    r.get(0)
                })?;
            corr = corr.max(c.unwrap_or(0));
        }
    }
    let span = last - first + 1_000_000;
    let tx = db.transaction()?;
    let mut cols = Vec::new();
    for t in &present {
        let names: Vec<String> = tx
            .prepare(&format!("PRAGMA table_info({t})"))?
            .query_map([], |r| r.get::<_, String>(1))?
            .collect::<Result<_, _>>()?;
        let n: i64 = tx.query_row(&format!("SELECT max(rowid) FROM {t}"), [], |r| r.get(0))?;
        cols.push((t, names, n));
    }
    let size = |tx: &rusqlite::Transaction| -> Result<u64> {
        let pages: i64 = tx.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let page: i64 = tx.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        Ok((pages * page) as u64)
    };
    let base = size(&tx)?;
    // Copies until the file holds `bytes`: how much one copy adds is
    // measured on the first.
    let mut k = 2;
    let mut c = 1;
    while c < k {
        for (t, names, n) in &cols {
            let exprs: Vec<String> = names
                .iter()
                .map(|col| match col.as_str() {
                    "start" | "end" => format!("{col} + {}", c * span),
                    "correlationId" => format!("{col} + {}", c * (corr + 1)),
                    _ => col.clone(),
                })
                .collect();
            tx.execute(
                &format!(
                    "INSERT INTO {t} ({}) SELECT {} FROM {t} WHERE rowid <= {n}",
                    names.join(", "),
                    exprs.join(", ")
                ),
                [],
            )?;
        }
        if c == 1 {
            let one = (size(&tx)? - base).max(1);
            k = 1 + bytes.saturating_sub(base).div_ceil(one) as i64;
        }
        c += 1;
    }
    tx.commit()?;
    drop(db);
    Ok(fs::metadata(path)?.len())
}

/// Adds `by` to the number each capture of `re` holds (group 1), except 0
/// (nsys writes 0 for no time).
fn shift(re: &Regex, text: &str, by: i64) -> String {
    re.replace_all(text, |c: &Captures| {
        let whole = &c[0];
        let n: i64 = c[1].parse().unwrap_or(0);
        if n == 0 {
            whole.to_owned()
        } else {
            whole.replacen(&c[1], &(n + by).to_string(), 1)
        }
    })
    .into_owned()
}

/// A real `nsys export --type json`: the string and thread tables once, the
/// event lines between them repeated.
fn nsys_json(real: &Path, path: &Path, bytes: u64) -> Result<u64> {
    let text = fs::read_to_string(real)?;
    let lines: Vec<&str> = text.lines().collect();
    let (tables, events): (Vec<&str>, Vec<&str>) =
        lines.iter().partition(|l| l.starts_with("{\"data\":"));
    let times = Regex::new(r#""(?:startNs|endNs|Timestamp|EndTimestamp)":"(\d+)""#)?;
    let corrs = Regex::new(r#""correlationId":(\d+)"#)?;
    let num = |re: &Regex| -> Vec<i64> {
        events
            .iter()
            .flat_map(|l| re.captures_iter(l).filter_map(|c| c[1].parse().ok()))
            .collect()
    };
    let ts = num(&times);
    let span = ts.iter().max().copied().unwrap_or(0)
        - ts.iter().filter(|&&t| t > 0).min().copied().unwrap_or(0)
        + 1_000_000;
    let corr = num(&corrs).into_iter().max().unwrap_or(0) + 1;
    let mut w = Counting::new(path)?;
    if let Some(t) = tables.first() {
        w.put(t)?;
        w.put("\n")?;
    }
    let k = copies(text.len() as u64, bytes);
    for c in 0..k as i64 {
        for l in &events {
            let l = shift(&times, l, c * span);
            w.put(&shift(&corrs, &l, c * corr))?;
            w.put("\n")?;
        }
    }
    for t in tables.iter().skip(1) {
        w.put(t)?;
        w.put("\n")?;
    }
    w.finish()
}

/// A real execution trace with its nodes repeated, ids (and the ids nodes
/// name as parents) shifted past the last.
fn exec_trace(real: &Path, path: &Path, bytes: u64) -> Result<u64> {
    let text = fs::read_to_string(real)?;
    let open = text.find("\"nodes\": [").context("no \"nodes\" list")? + "\"nodes\": [".len();
    let close = text.rfind(']').context("no end of the nodes")?;
    let (head, nodes, tail) = (&text[..open], &text[open..close], &text[close..]);
    let ids = Regex::new(r#""(?:id|ctrl_deps|parent)": (\d+)"#)?;
    let max = ids
        .captures_iter(nodes)
        .filter_map(|c| c[1].parse::<i64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let nodes = nodes.trim_end();
    let mut w = Counting::new(path)?;
    w.put(head)?;
    let k = copies(text.len() as u64, bytes);
    for c in 0..k as i64 {
        if c > 0 {
            w.put(",")?;
        }
        w.put(&shift(&ids, nodes, c * max))?;
    }
    w.put("\n  ")?;
    w.put(tail)?;
    w.finish()
}

/// A buffered file that counts what it was given.
struct Counting {
    w: BufWriter<fs::File>,
    n: u64,
}

impl Counting {
    fn new(path: &Path) -> Result<Self> {
        Ok(Counting {
            w: BufWriter::with_capacity(1 << 20, fs::File::create(path)?),
            n: 0,
        })
    }
    fn put(&mut self, s: &str) -> Result<()> {
        self.w.write_all(s.as_bytes())?;
        self.n += s.len() as u64;
        Ok(())
    }
    fn finish(mut self) -> Result<u64> {
        self.w.flush()?;
        Ok(self.n)
    }
}
