//! Hot functions of loading and metrics: parsing one rank's Kineto JSON from
//! memory (laid out as the profiler writes it, one event per line, and
//! pretty-printed by serde_json), one rank's NCCL Flight Recorder dump
//! (pickled as PyTorch does, and as JSON), interval unions, the whole metric
//! registry on a loaded trace.
//!
//!     cargo bench --bench load

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use ccl_bench::metrics::{eval_all, Ctx};
use ccl_bench::model::{clock, Interval, IntervalSet, Ns, Trace};
use ccl_bench::read::{flight_recorder, kineto};
use ccl_bench::synth::flight::{Call, FrRun};
use ccl_bench::synth::stream::{self, Layout};
use ccl_bench::synth::{training_run, RunShape};
use ccl_bench::{entry, load, report, session};

fn bench(c: &mut Criterion) {
    let shape = RunShape {
        steps: 10,
        layers: 32,
        ..RunShape::default()
    };
    let ranks = training_run(&shape);
    let text = ranks[0].to_json();
    let mut g = c.benchmark_group("kineto");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function(format!("read_pretty_rank_{}kB", text.len() / 1000), |b| {
        b.iter(|| kineto::read(black_box(text.as_bytes()), "rank0.json".as_ref()).unwrap())
    });
    let mut kineto = Vec::new();
    stream::write_rank(
        &mut kineto,
        Layout::Kineto,
        0,
        8,
        8_000_000,
        stream::Mix::Training,
    )
    .unwrap();
    g.throughput(Throughput::Bytes(kineto.len() as u64));
    g.bench_function(format!("read_kineto_rank_{}kB", kineto.len() / 1000), |b| {
        b.iter(|| kineto::read(black_box(&kineto[..]), "rank0.json".as_ref()).unwrap())
    });
    let mut lines = Vec::new();
    stream::write_rank(
        &mut lines,
        Layout::Lines,
        0,
        8,
        8_000_000,
        stream::Mix::Training,
    )
    .unwrap();
    g.throughput(Throughput::Bytes(lines.len() as u64));
    g.bench_function(format!("read_lines_rank_{}kB", lines.len() / 1000), |b| {
        b.iter(|| kineto::read(black_box(&lines[..]), "rank0.json".as_ref()).unwrap())
    });
    // The floor of any serde_json reader: check the same bytes and build nothing.
    g.throughput(Throughput::Bytes(kineto.len() as u64));
    g.bench_function("serde_json_validate_only_kineto", |b| {
        b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&kineto)).unwrap())
    });
    g.finish();

    // A Flight Recorder dump of 2,000 entries, stacks 28 frames deep, as
    // `scripts/bench_hang.sh` generates them; the JSON's floor beside it.
    let mut fr = FrRun::new(8);
    fr.module_depth(8);
    for _ in 0..2000 {
        fr.call(&(0..8).collect::<Vec<u32>>(), &Call::all_reduce("0", 4096));
    }
    let mut g = c.benchmark_group("flight_recorder");
    for (name, bytes) in [("pickle", fr.pickle(0)), ("json", fr.json(0))] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("read_{name}_rank_{}kB", bytes.len() / 1000), |b| {
            b.iter(|| {
                flight_recorder::read(black_box(&bytes), "nccl_trace_rank_0".as_ref()).unwrap()
            })
        });
        if name == "json" {
            g.bench_function("serde_json_validate_only_dump", |b| {
                b.iter(|| {
                    serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&bytes)).unwrap()
                })
            });
        }
    }
    g.finish();

    let mut trace = Trace::default();
    for (i, r) in ranks.iter().enumerate() {
        let mut t = kineto::read(r.to_json().as_bytes(), "r.json".as_ref())
            .unwrap()
            .timeline;
        t.rank = i as u32;
        trace.ranks.push(t);
    }
    let ops: usize = trace.ranks.iter().map(|r| r.ops.len()).sum();
    c.bench_function(&format!("all_metrics_8_ranks_{ops}_ops"), |b| {
        b.iter(|| {
            let ctx = Ctx::new(&trace, None).unwrap();
            black_box(eval_all(&ctx))
        })
    });

    // A rank's clock samples against the first rank's (as `clock::samples_of`
    // makes them): 4,704 collectives over 20 s, ends scattered by a few µs
    // as real ranks' are, a drift of 2 ppm and a late burst; then the same
    // ends identical on both ranks (generated trace sets).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut jitter = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        ((seed >> 33) % 6_000) as i64 - 3_000
    };
    let t0 = 1_700_000_000_000_000_000i64;
    let jittered: Vec<(Ns, Ns)> = (0..4704i64)
        .map(|i| {
            let t = i * 4_251_700;
            let late = if (2000..2100).contains(&i) {
                400_000
            } else {
                0
            };
            (Ns(t0 + t), Ns(12_345 + t / 500_000 + jitter() - late))
        })
        .collect();
    let flat: Vec<(Ns, Ns)> = jittered.iter().map(|&(t, _)| (t, Ns::ZERO)).collect();
    for (name, s) in [("jittered", &jittered), ("identical", &flat)] {
        c.bench_function(&format!("clock_measure_{name}_4704"), |b| {
            b.iter(|| clock::measure(black_box(s)))
        });
    }

    // A summary's first open, as `--metrics` makes it (kept results aside):
    // 16 ranks of 16 MB each, summarized once; then the tables read back,
    // the collectives matched, the clocks checked, every metric.
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    for r in 0..16 {
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(traces.join(format!("rank{r}_trace.json"))).unwrap(),
        );
        stream::write_rank(
            &mut out,
            Layout::Kineto,
            r,
            16,
            16_000_000,
            stream::Mix::Training,
        )
        .unwrap();
    }
    let sum = dir.path().join("run.summary");
    let args = ["ccl-bench", "summarize", traces.to_str().unwrap(), "--out"];
    assert_eq!(
        entry::main(args.into_iter().chain([sum.to_str().unwrap()])),
        0
    );
    std::fs::remove_dir_all(sum.join("results")).ok();
    let opts = load::LoadOptions::default();
    c.bench_function("summary_first_open_16_ranks", |b| {
        b.iter(|| {
            let run = session::open(&sum, &opts, session::Need::Figures, &Default::default());
            let run = run.unwrap();
            black_box(report::rows(&run.ctx(None).unwrap()))
        })
    });

    // One million overlapping intervals, in shuffled order.
    let v: Vec<Interval> = (0..1_000_000i64)
        .map(|i| {
            let s = Ns((i * 7919) % 1_000_000 * 10);
            Interval::new(s, s + Ns(15))
        })
        .collect();
    c.bench_function("interval_union_1M", |b| {
        b.iter(|| IntervalSet::from_unsorted(black_box(v.clone())))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
