//! Entry points for the fuzz targets in `fuzz/` (run with `cargo fuzz`) and for
//! the smoke test that replays them in `cargo test`. Each reads arbitrary bytes
//! as one input kind and, when they load, computes every metric on the result,
//! checking what must hold for any input. None may panic.

use std::path::Path;

use crate::metrics::{Ctx, Outcome, METRICS};
use crate::model::Trace;
use crate::read;
use crate::session::load::{self, LoadReport};

/// Bytes as one rank's PyTorch profiler trace, also read twice as a two-rank
/// run so the cross-rank metrics and clock alignment see it too.
pub fn kineto(data: &[u8]) {
    let path = Path::new("fuzz/rank0_trace.json");
    let Ok(file) = read::kineto::read(data, path) else {
        return;
    };
    let Ok(again) = read::kineto::read(data, path) else {
        panic!("the same bytes read once and failed the second time");
    };
    // Both claim one distributedInfo rank when they carry one: a refusal is right.
    check_files(vec![(Some(0), file), (Some(1), again)]);
}

/// Bytes as an `nsys export --type json` file.
pub fn nsys_json(data: &[u8]) {
    let path = Path::new("fuzz/report.json");
    if let Ok(files) = read::nsys_json::read(data, path, None, true) {
        check_files(files);
    }
}

/// Bytes as an XLA profiler trace JSON (JAX/TensorFlow).
pub fn xla_json(data: &[u8]) {
    if let Ok(files) = read::xla_json::read(data, Path::new("fuzz/t.trace.json")) {
        check_files(files);
    }
}

/// Bytes as an XSpace protobuf (`.xplane.pb`), read held and, as a load
/// reads a file, with each plane's lines read where they lie: the same
/// ranks, or the same error.
pub fn xplane(data: &[u8]) {
    let path = Path::new("fuzz/host.xplane.pb");
    let held = read::xplane::read(data, path);
    let mut placed = Vec::new();
    let file = Some(std::io::Cursor::new(data));
    let read = read::xplane::read_each(data, path, (data.len() as u64, file), &mut |f| {
        placed.push(f)
    });
    let ops = |files: &[(Option<u32>, read::RankFile)]| -> Vec<(Option<u32>, usize)> {
        files
            .iter()
            .map(|(r, f)| (*r, f.timeline.ops.len()))
            .collect()
    };
    match (held, read) {
        (Ok(files), Ok(())) => {
            assert_eq!(ops(&files), ops(&placed), "read held and in place differ");
            check_files(files);
            check_files(placed);
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("read held: {:?}; in place: {:?}", a.map(|f| ops(&f)), b),
    }
}

/// Bytes as an Nsight Systems SQLite export (SQLite reads files, so the
/// bytes go to a temporary file first).
pub fn nsys_sqlite(data: &[u8]) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("ccl-bench-fuzz-{}-{n}.sqlite", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let files = read::nsys::read(&path, None, true);
    let _ = std::fs::remove_file(&path);
    if let Ok(files) = files {
        check_files(files);
    }
}

/// Bytes as an nsys-jax archive (a zip of Parquet tables).
pub fn nsys_jax(data: &[u8]) {
    let archive = std::io::Cursor::new(data);
    if let Ok(files) = read::nsys_jax::read_from(archive, Path::new("fuzz/p0.zip"), None, true) {
        check_files(files);
    }
}

/// Bytes as a PyTorch execution trace.
pub fn exec_trace(data: &[u8]) {
    if let Ok((et, _)) = read::exec_trace::read(data, Path::new("fuzz/torch_et_0.json")) {
        check_metrics(Trace {
            et: vec![et],
            ..Default::default()
        });
    }
}

/// A two-rank run to annotate with a fuzzed card or rules file.
fn base() -> Trace {
    static BASE: std::sync::LazyLock<Trace> = std::sync::LazyLock::new(|| {
        let files = crate::synth::two_rank_example()
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let file = read::kineto::read(r.to_json().as_bytes(), Path::new("fuzz/r.json"))
                    .expect("the synthetic example reads");
                (Some(i as u32), file)
            })
            .collect();
        let ranks = load::assign_ranks(files, &mut LoadReport::default()).expect("two ranks");
        Trace {
            ranks,
            ..Default::default()
        }
    });
    BASE.clone()
}

/// Bytes as a workload card, beside a two-rank run.
pub fn workload_card(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(card) = read::card::parse(text, Path::new("fuzz/workload_card.yaml")) {
        check_metrics(Trace {
            card: Some(card),
            ..base()
        });
    }
}

/// Bytes as a kernel class rules file, applied to a two-rank run.
pub fn class_rules(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/ccl-bench-classes.toml");
    if let Ok(rules) = crate::model::classify::UserRules::parse(text, path) {
        let mut trace = base();
        rules.apply(&mut trace);
        check_metrics(trace);
    }
}

/// Bytes as a summary's ops table (Parquet), beside the other tables of
/// the synthetic two-rank run's rank 0: what opening a damaged or crafted
/// summary can reach. What decodes and passes the checks goes through
/// every metric.
pub fn summary_ops(data: &[u8]) {
    use crate::summary::columns;
    let t = &base().ranks[0];
    let Ok(tables) = columns::to_tables(t) else {
        return;
    };
    let mut by_name: std::collections::HashMap<&str, Vec<arrow_array::RecordBatch>> =
        columns::TABLES
            .iter()
            .copied()
            .zip(tables.into_iter().map(|b| vec![b]))
            .collect();
    let Ok(ops) = columns::decode(
        bytes::Bytes::copy_from_slice(data),
        data.len() as u64,
        "ops",
    ) else {
        return;
    };
    by_name.insert("ops", ops);
    let mut back = crate::model::RankTimeline {
        ops: Default::default(),
        colls: Vec::new(),
        steps: Vec::new(),
        cpu: Vec::new(),
        annotations: Default::default(),
        strings: Default::default(),
        ..t.clone()
    };
    if columns::fill(&mut back, &by_name, &[]).is_ok() {
        check_files(vec![(
            Some(0),
            read::RankFile {
                timeline: back,
                dist_rank: None,
                events: 0,
                warnings: Vec::new(),
                tables: None,
            },
        )]);
    }
}

/// Bytes as a summary's stats file of the synthetic two-rank run's rank 0,
/// read by a reduce that holds only its collectives: what decodes and
/// passes the checks goes through every metric.
pub fn summary_stats(data: &[u8]) {
    use crate::summary::stats;
    let Ok(stored) = serde_json::from_slice::<stats::Stored>(data) else {
        return;
    };
    let mut trace = base().clone();
    let names = trace.ranks[0].strings.len();
    let Ok(Some(s0)) = stats::from_stored(stored, trace.ranks[0].rank, names) else {
        return;
    };
    let s1 = crate::derive::RankStats::of(&trace.ranks[1]);
    for t in &mut trace.ranks {
        t.slim();
    }
    check_metrics_with(&trace, Some(vec![s0, s1]));
}

/// The seed of [`summary_stats`]: rank 0's stats as `summarize` stores them.
pub fn summary_stats_seed() -> Vec<u8> {
    let s = crate::derive::RankStats::of(&base().ranks[0]);
    serde_json::to_vec(&crate::summary::stats::to_stored(&s)).expect("the stats serialize")
}

/// The seed of [`summary_ops`]: the ops table a summary of that rank holds.
pub fn summary_ops_seed() -> Vec<u8> {
    use crate::summary::columns;
    let ops = columns::to_tables(&base().ranks[0])
        .expect("the example's tables")
        .swap_remove(1);
    let ops = columns::packed(&ops, Some(0), "0000000000000000-0").expect("the columns add");
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, ops.schema(), None)
        .expect("a Parquet writer");
    w.write(&ops).expect("the ops table writes");
    w.close().expect("the ops table closes");
    out
}

/// Ranks resolved as loading does, then every metric.
fn check_files(files: Vec<(Option<u32>, read::RankFile)>) {
    let mut report = LoadReport::default();
    if let Ok(ranks) = load::assign_ranks(files, &mut report) {
        check_metrics(Trace {
            ranks,
            ..Default::default()
        });
    }
}

/// Bytes as a CUDA memory snapshot pickle.
pub fn memory_snapshot(data: &[u8]) {
    let path = Path::new("fuzz/rank0_memory_snapshot.pickle");
    // A history that does not add up to the state is warned about, not refused.
    let Ok((memory, _warnings)) = read::snapshot::read(|_| Ok(data), path) else {
        return;
    };
    check_metrics(Trace {
        memory: vec![memory],
        ..Default::default()
    });
}

/// Every metric either applies with a finite value or says why not; shares
/// stay within their range.
fn check_metrics(mut trace: Trace) {
    for finding in load::check_and_align_clocks(&mut trace, true) {
        // Of a rank's clock, or of a group whose ranks disagree.
        assert!(
            [
                "rank ",
                "process group ",
                "collectives without a process group"
            ]
            .iter()
            .any(|p| finding.text.starts_with(p)),
            "{finding}"
        );
        assert!(
            matches!(
                finding.kind,
                crate::model::warning::Kind::Clock | crate::model::warning::Kind::Matching
            ),
            "{finding:?}"
        );
    }
    check_metrics_with(&trace, None);
}

/// [`check_metrics`] with the ranks' stats made beforehand (a lean load).
fn check_metrics_with(trace: &Trace, stats: Option<Vec<crate::derive::RankStats>>) {
    for rank in std::iter::once(None).chain(trace.ranks.iter().map(|r| Some(r.rank))) {
        let Ok(ctx) = Ctx::with_stats(trace, rank, stats.clone()) else {
            continue;
        };
        for m in METRICS {
            if let Outcome::Value(v) = m.eval(&ctx) {
                assert!(v.value.is_finite(), "{}: {}", m.name, v.value);
                if let Some(max) = bounded(m.name) {
                    assert!(
                        (0.0..=max * (1.0 + 1e-9)).contains(&v.value),
                        "{} = {} outside [0, {max}]",
                        m.name,
                        v.value
                    );
                }
            }
        }
    }
}

/// The upper bound of metrics that are shares of a whole.
fn bounded(name: &str) -> Option<f64> {
    match name {
        "communication_overlap_ratio" => Some(1.0),
        "communication_fraction"
        | "compute_comm_overlap"
        | "aggregate_gpu_utilization"
        | "comm_wait_fraction"
        | "dominant_kernel_concentration"
        | "moe_fraction"
        | "memory_fragmentation"
        | "memory_allocation_efficiency" => Some(100.0),
        _ => None,
    }
}
