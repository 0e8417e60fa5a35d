//! A new input format is a reader plus one table entry: a toy format added
//! here through `LoadOptions::formats` is discovered, read, ranked and
//! measured like the built-in ones.

use std::io::Read;
use std::sync::LazyLock;

use ccl_bench::error::{Error, Result};
use ccl_bench::formats::{Format, Ranked, Role, FORMATS};
use ccl_bench::load::{LoadOptions, Progress};
use ccl_bench::metrics::{self, Ctx, Outcome};
use ccl_bench::model::build::TimelineBuilder;
use ccl_bench::model::timeline::SourceFormat;
use ccl_bench::model::{Activity, DeviceOp, Ns};
use ccl_bench::read::RankFile;
use ccl_bench::session::{self, Need};
use ccl_bench::source::FileIn;

/// `kernel NAME START_NS DUR_NS` per line; the rank comes from the file name.
fn read_toy(f: &FileIn, each: &mut dyn FnMut(Ranked)) -> Result<()> {
    let mut text = String::new();
    f.stream()?
        .read_to_string(&mut text)
        .map_err(|source| Error::Io {
            path: f.path.to_owned(),
            source,
        })?;
    let mut b = TimelineBuilder::new(f.path, SourceFormat::PyTorch);
    let mut events = 0;
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [_, name, start, dur] = parts[..] else {
            continue;
        };
        // The format writes nanoseconds; `Ns(..)` is where they enter the model.
        let (Ok(start), Ok(dur)) = (start.parse().map(Ns), dur.parse().map(Ns)) else {
            continue;
        };
        events += 1;
        let name_id = b.intern(name);
        let class = ccl_bench::model::classify::classify(name, Activity::Kernel);
        let _ = b.push_op(DeviceOp::new(name_id, Activity::Kernel, class, start, dur));
    }
    let (timeline, warnings) = b.finish();
    each((
        f.rank,
        RankFile {
            timeline,
            dist_rank: None,
            events,
            warnings,
            tables: None,
        },
    ));
    Ok(())
}

static WITH_TOY: LazyLock<Vec<Format>> = LazyLock::new(|| {
    let mut table = FORMATS.to_vec();
    table.push(Format {
        name: "toy trace",
        exts: &[".toy"],
        files: "rank{N}.toy",
        sniff: None,
        role: Role::Timeline {
            precedence: 0,
            read: read_toy,
            devices_per_host: false,
        },
    });
    table
});

#[test]
fn a_format_is_one_table_entry() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rank0.toy"),
        "kernel sm90_gemm 0 300\nkernel ncclDevKernel_AllReduce_Sum 300 100\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("rank1.toy"), "kernel sm90_gemm 0 500\n").unwrap();
    // Without the entry, the directory holds no trace.
    let plain = session::inputs(dir.path(), &LoadOptions::default(), &Progress::default());
    let err = plain.expect_err("no trace");
    assert!(
        matches!(err.downcast_ref(), Some(Error::NoTraces { .. })),
        "{err:#}"
    );

    let opts = LoadOptions {
        formats: &WITH_TOY,
        ..Default::default()
    };
    let run = session::open(dir.path(), &opts, Need::EveryOp, &Progress::default()).unwrap();
    let (trace, report) = (run.trace, run.report);
    assert_eq!(trace.ranks.len(), 2);
    assert_eq!((trace.ranks[0].rank, trace.ranks[1].rank), (0, 1));
    assert_eq!(report.events, 3);
    let lines = report.input_lines();
    assert!(lines[0].starts_with("toy trace rank 0: "), "{lines:?}");
    let ctx = Ctx::new(&trace, None).unwrap();
    let value = |name: &str| match metrics::find(name).unwrap().eval(&ctx) {
        Outcome::Value(m) => m.value,
        other => panic!("{name}: {other:?}"),
    };
    // (300 + 100 + 500) ns of kernels over two ranks; 100 ns of it communication.
    assert!((value("total_kernel_time") - 900e-9).abs() < 1e-15);
    assert!((value("communication_ratio") - 12.5).abs() < 1e-9);
}
