//! A summary opened in pages (`--pages always`) against the same summary
//! read whole, on real traces: lanes within the bins' stated bound at every
//! zoom and exact once the window's ops are read, the same screens, search
//! hits, range totals and longest kernels; a table changed under an open
//! view is reported, never drawn.

use std::path::Path;
use std::sync::Arc;

use ccl_bench::load::{LoadOptions, Pages, Progress};
use ccl_bench::metrics::Options;
use ccl_bench::model::{Interval, Ns};
use ccl_bench::tui::action::Action;
use ccl_bench::tui::app::App;
use ccl_bench::tui::data::Data;
use ccl_bench::tui::tab::Tab;
use ccl_bench::tui::tabs::timeline::{Hits, RangeTotals};
use ccl_bench::tui::theme::Theme;
use ccl_bench::tui::widgets::lanes::{col_time, shades};

use crate::support::corpus;
use crate::tui::{draw, text};

const RUNS: [&str; 3] = [
    "kineto/dlrm_8rank_v100",
    "nsys/h100_tiny_transformer",
    "xla/tf_profiler_gpu_multi_worker",
];

fn open(path: &Path, pages: Pages) -> Data {
    let opts = LoadOptions {
        pages,
        ..LoadOptions::default()
    };
    ccl_bench::tui::load_data(path, &opts, Options::default(), &Progress::default())
        .unwrap_or_else(|e| panic!("{} opens: {e:#}", path.display()))
}

/// The run summarized into a temporary folder, opened both ways.
fn both(rel: &str) -> Option<(tempfile::TempDir, Data, Data)> {
    let traces = corpus(rel)?;
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("run.sum");
    crate::corpus::summarize_into(&traces, &sum);
    let paged = open(&sum, Pages::Always);
    let whole = open(&sum, Pages::Never);
    assert!(paged.paged.is_some() && whole.paged.is_none(), "{rel}");
    Some((out, paged, whole))
}

/// Every lane's cells over `view` at `width` columns, paged against whole:
/// busy shares within 2/16 of a column (the two edge bins, see
/// `tui::paged`), the same cells once the ops are read. Returns how many
/// cells were compared and the largest difference in busy share.
fn lanes_agree(paged: &Data, whole: &Data, view: Interval, width: u16, what: &str) -> (usize, f64) {
    let slices: Vec<(Ns, Ns)> = (0..width)
        .map(|c| (col_time(view, width, c), col_time(view, width, c + 1)))
        .collect();
    let pairs = paged
        .lanes
        .iter()
        .zip(&whole.lanes)
        .chain(paged.stream_lanes.iter().zip(&whole.stream_lanes));
    let (mut cells, mut most) = (0, 0.0f64);
    for (p, w) in pairs {
        assert_eq!((p.rank, p.stream), (w.rank, w.stream), "{what}");
        let a = shades(&paged.shown(p, view, width), &slices);
        let b = shades(&whole.shown(w, view, width), &slices);
        for (k, (x, y)) in a.iter().zip(&b).enumerate() {
            most = most.max((x.busy - y.busy).abs());
            assert!(
                (x.busy - y.busy).abs() <= 2.0 / 16.0 + 1e-9,
                "{what}: {} column {k}: busy {} paged, {} whole",
                p.label(),
                x.busy,
                y.busy
            );
        }
        let exact = paged
            .ops_in(p.rank_index, p.stream, view, usize::MAX)
            .is_some();
        if exact && view.len() / i64::from(width) < Ns(1_000) {
            assert_eq!(a, b, "{what}: {} drawn from its ops", p.label());
        }
        cells += a.len();
    }
    assert_eq!(paged.page_error(), None, "{what}");
    (cells, most)
}

/// A synthetic run of two ranks with about 100,000 ops each: enough for
/// two levels of bins, so that wide views draw from bins (the corpus
/// traces' ranks hold few enough ops to be drawn from them at any zoom).
fn large_run() -> (tempfile::TempDir, Data, Data) {
    let traces = crate::support::write_ranks(&ccl_bench::synth::training_run(
        &ccl_bench::synth::RunShape {
            ranks: 2,
            steps: 4,
            layers: 3000,
            ..Default::default()
        },
    ));
    let sum = traces.path().join("run.sum");
    crate::corpus::summarize_into(traces.path(), &sum);
    let paged = open(&sum, Pages::Always);
    let whole = open(&sum, Pages::Never);
    (traces, paged, whole)
}

#[test]
fn paged_lanes_agree_with_whole_ones_at_every_zoom() {
    let large = large_run();
    let ops: usize = large.2.trace.ranks.iter().map(|t| t.ops.len()).sum();
    assert!(ops > 150_000, "{ops} ops");
    let runs = RUNS.into_iter().map(|rel| (rel, both(rel)));
    for (rel, run) in std::iter::once(("synthetic", Some(large))).chain(runs) {
        let Some((_dir, paged, whole)) = run else {
            return;
        };
        assert_eq!(paged.span, whole.span, "{rel}");
        assert_eq!(paged.steps, whole.steps, "{rel}");
        assert_eq!(paged.cpu_lanes.len(), 0, "{rel}: no CPU ranges read");
        let mut view = whole.span;
        let (mut cells, mut most) = (0, 0.0f64);
        // Halving the view down to a few µs: top bins, finer bins, then ops.
        while view.len() > Ns(20_000) {
            let (n, m) = lanes_agree(&paged, &whole, view, 130, rel);
            cells += n;
            most = most.max(m);
            let quarter = view.len() / 4;
            view = Interval::new(view.start + quarter, view.end - quarter);
        }
        assert!(cells > 1000, "{rel}: {cells} cells");
        // Its regular steps are drawn from bins within 1/64 of a column
        // (bins as wide as a column would be off by 0.08 on its first view).
        if rel == "synthetic" {
            assert!(most > 0.0 && most < 1.0 / 64.0, "{rel}: off by {most}");
        }
    }
}

/// Under class rules the summary's stored lanes, binned from the map
/// step's classes, are binned afresh: the Timeline in pages draws the
/// rules' classes as the run read whole does, at a view wide enough to be
/// drawn from bins.
#[test]
fn class_rules_bin_the_paged_lanes_afresh() {
    let (traces, before, _) = large_run();
    let rules = traces.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nclass = \"communication\"\npattern = \"gemm\"\n",
    )
    .unwrap();
    let open_ruled = |pages| {
        let opts = LoadOptions {
            pages,
            classes: Some(rules.clone()),
            ..LoadOptions::default()
        };
        let sum = traces.path().join("run.sum");
        ccl_bench::tui::load_data(&sum, &opts, Options::default(), &Progress::default()).unwrap()
    };
    let (paged, whole) = (open_ruled(Pages::Always), open_ruled(Pages::Never));
    assert!(paged.paged.is_some(), "opened in pages under rules");
    assert!(
        paged
            .warnings
            .iter()
            .all(|w| !w.text.contains("not binned")),
        "{:?}",
        paged.warnings
    );
    let (view, width) = (whole.span, 130);
    lanes_agree(&paged, &whole, view, width, "under rules");
    let slices: Vec<(Ns, Ns)> = (0..width)
        .map(|c| (col_time(view, width, c), col_time(view, width, c + 1)))
        .collect();
    let drawn = |d: &Data| -> Vec<_> {
        d.lanes
            .iter()
            .chain(&d.stream_lanes)
            .flat_map(|l| shades(&d.shown(l, view, width), &slices))
            .map(|c| c.shade)
            .collect()
    };
    let (a, b, old) = (drawn(&paged), drawn(&whole), drawn(&before));
    let differ = |x: &[_], y: &[_]| x.iter().zip(y).filter(|(p, q)| p != q).count();
    assert!(a.len() > 500, "{} cells", a.len());
    assert!(
        differ(&a, &old) > a.len() / 4,
        "the rules change what is drawn: {} of {} cells",
        differ(&a, &old),
        a.len()
    );
    // Cells drawn from bins may tip at the bins' edges; nowhere else.
    assert!(
        differ(&a, &b) <= a.len() / 50,
        "{} of {} cells drawn otherwise than whole",
        differ(&a, &b),
        a.len()
    );
    // With nowhere to bin them, the stored lanes are not drawn: pages are
    // refused, saying why.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ccl-bench"))
        .env("TMPDIR", traces.path().join("missing"))
        .args(["--pages", "always", "--screenshot"])
        .arg(traces.path().join("shot.svg"))
        .arg("--classes")
        .arg(&rules)
        .arg(traces.path().join("run.sum"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("cannot open in pages") && err.contains("lanes not binned afresh"),
        "{err}"
    );
}

/// The screen after `keys` on tab `tab`, both ways. The CPU call stack of
/// a launch is read with the CPU ranges, which pages leave out.
fn screens(paged: Data, whole: Data, tab: Tab, keys: &[Action]) -> (String, String) {
    let shot = |d: Data| {
        let mut app = App::new(Arc::new(d), Theme::mono(), (140, 40));
        app.update(Action::SelectTab(tab));
        for &k in keys {
            app.update(k);
        }
        let t = text(draw(&app).buffer());
        t.lines()
            .filter(|l| !l.starts_with("launched from thread"))
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
    };
    (shot(paged), shot(whole))
}

#[test]
fn a_zoomed_timeline_reads_the_same_in_pages() {
    let Some((_dir, paged, whole)) = both("kineto/dlrm_8rank_v100") else {
        return;
    };
    let mut keys = vec![Action::ToggleStreams, Action::ToggleDetails];
    keys.extend([Action::ZoomIn; 9]);
    keys.extend([Action::CursorRight; 40]);
    keys.extend([Action::Down; 3]);
    let (a, b) = screens(paged, whole, Tab::Timeline, &keys);
    assert_eq!(a, b);
    assert!(
        a.contains("collective"),
        "the details name a collective:\n{a}"
    );
}

#[test]
fn the_kernels_tabs_longest_op_is_found_in_pages() {
    for rel in RUNS {
        for row in 0..6 {
            let Some((_dir, paged, whole)) = both(rel) else {
                return;
            };
            let mut keys = vec![Action::Down; row];
            keys.push(Action::Open);
            let (a, b) = screens(paged, whole, Tab::Kernels, &keys);
            assert_eq!(a, b, "{rel}: row {row}");
            assert!(a.contains("longest "), "{rel}: row {row}:\n{a}");
        }
    }
}

#[test]
fn search_ranges_and_longest_kernels_agree_in_pages() {
    for rel in RUNS {
        let Some((_dir, paged, whole)) = both(rel) else {
            return;
        };
        for pattern in ["nccl|all", "gemm", "^memcpy", "no such kernel"] {
            let (a, b) = (Hits::find(&paged, pattern), Hits::find(&whole, pattern));
            assert_eq!(
                a.as_ref().map(|h| (&h.list, &h.per_rank)),
                b.as_ref().map(|h| (&h.list, &h.per_rank)),
                "{rel}: {pattern}"
            );
        }
        // A range over the middle half: per-rank totals within 1/1,024 of
        // the range (bins a 16th of its 1,024 columns), the same top kernels.
        let s = whole.span;
        let range = Interval::new(s.start + s.len() / 4, s.end - s.len() / 4);
        let (a, b) = (
            RangeTotals::of(&paged, range),
            RangeTotals::of(&whole, range),
        );
        let tolerance = range.len() / 1024 + Ns(1);
        for ((ra, va), (rb, vb)) in a.ranks.iter().zip(&b.ranks) {
            assert_eq!(ra, rb);
            for (x, y) in va.iter().zip(vb) {
                assert!(
                    (*x - *y).abs() <= tolerance,
                    "{rel}: rank {ra}: {va:?} vs {vb:?}"
                );
            }
        }
        assert_eq!(a.top, b.top, "{rel}");
    }
}

#[test]
fn a_table_changed_under_a_paged_view_is_reported() {
    let Some(traces) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("run.sum");
    crate::corpus::summarize_into(&traces, &sum);
    let paged = open(&sum, Pages::Always);
    // Every ops table cut short after the view opened.
    for f in walk(&sum.join("ops")) {
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    }
    let s = paged.span;
    let narrow = Interval::new(s.start, s.start + Ns(50_000));
    let lane = &paged.lanes[0];
    let _ = paged.shown(lane, narrow, 100);
    let e = paged.page_error().expect("the damage is reported");
    assert!(e.contains("size changed"), "{e}");
    assert_eq!(paged.ops_in(0, None, narrow, usize::MAX), None);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Under `--pages always` every rank's collectives are kept in a temporary
/// file, not in memory (`model::slab`): the Summary says so, and the
/// Collectives and Stragglers tabs, which read every member of every
/// collective, show what they show with the collectives held.
#[test]
fn spilled_collectives_read_as_held_ones() {
    let Some((_dir, paged, whole)) = both("kineto/dlrm_8rank_v100") else {
        return;
    };
    let ranks = &paged.trace.ranks;
    assert!(
        ranks.iter().all(|t| t.ops.is_spilled()),
        "every rank spilled"
    );
    assert!(whole.trace.ranks.iter().all(|t| !t.ops.is_spilled()));
    assert!(
        paged
            .notes
            .iter()
            .any(|l| l.contains("the collectives of 8 of 8 ranks are kept in a temporary file")),
        "{:?}",
        paged.notes
    );
    let both_again = || both("kineto/dlrm_8rank_v100").unwrap();
    for (tab, keys) in [
        (Tab::Collectives, vec![Action::Down; 5]),
        (Tab::Stragglers, vec![]),
    ] {
        let (_dir, paged, whole) = both_again();
        let (a, b) = screens(paged, whole, tab, &keys);
        assert_eq!(a, b, "{tab:?}");
    }
}
