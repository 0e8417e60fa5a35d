//! `ccl-bench summarize`: a summary opens with the traces' results, shards
//! (from Slurm's variables) make up the whole, and a summary that is
//! incomplete, damaged or stale is rebuilt or refused, never trusted.

use std::path::Path;
use std::process::{Command, Output};

use ccl_bench::synth::{training_run, RunShape};

use crate::support::{
    corpus, metrics_doc, metrics_said, run, snapshot, stderr, stdout, write_ranks,
};

/// The metrics document without what names the files: the run's path,
/// and the absolute paths a summary records where the traces were named
/// relative to the working directory.
fn comparable(mut doc: serde_json::Value, traces: &Path) -> String {
    doc.as_object_mut().unwrap().remove("trace");
    let abs = std::fs::canonicalize(traces).unwrap();
    doc.to_string()
        .replace(&abs.display().to_string(), "TRACES")
        .replace(&traces.display().to_string(), "TRACES")
}

/// The summary's metrics are the traces'.
fn same_as_traces(traces: &Path, sum: &Path) {
    assert_eq!(
        comparable(metrics_doc(traces, "raw"), traces),
        comparable(metrics_doc(sum, "summary"), traces)
    );
}

fn summarize(dir: &Path, out: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ccl-bench"));
    c.args([
        "summarize",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    for k in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_PROCID",
        "SLURM_NTASKS",
    ] {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    c.output().unwrap()
}

fn metric(path: &Path, name: &str) -> Output {
    run(&["--trace", path.to_str().unwrap(), "--metric", name])
}

/// Rank 1's trace written again, now the straggler.
fn reprofile_rank1_slow(dir: &Path) {
    let mut slow = training_run(&RunShape {
        straggler: Some(1),
        straggler_factor: 2.0,
        ..shape()
    });
    std::fs::write(dir.join("rank1_trace.json"), slow.remove(1).to_json()).unwrap();
}

fn shape() -> RunShape {
    RunShape {
        ranks: 6,
        steps: 4,
        ..RunShape::default()
    }
}

#[test]
fn a_summary_gives_the_traces_results_on_corpus_traces() {
    for rel in [
        "kineto/dlrm_8rank_v100",
        "kineto/h100_tiny_transformer",
        "nsys/h100_tiny_transformer",
        "xla/xprof_tpu",
        "memory/h100_tiny_transformer",
        "et/dlrm_8rank_v100",
    ] {
        let Some(dir) = corpus(rel) else { return };
        let out = tempfile::tempdir().unwrap();
        let sum = out.path().join("run.sum");
        let o = summarize(&dir, &sum, &[]);
        assert!(o.status.success(), "{rel}: {}", stderr(&o));
        let raw = comparable(metrics_doc(&dir, rel), &dir);
        let summary = comparable(metrics_doc(&sum, rel), &dir);
        assert_eq!(raw, summary, "{rel}: the summary's metrics differ");
        // What a summary weighs against its traces (the issue's 10 % goal
        // is measured on large traces by scripts/bench.sh).
        assert!(stderr(&o).contains("% of the inputs"), "{}", stderr(&o));
    }
}

#[test]
fn slurm_tasks_summarize_shares_that_make_up_the_whole() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    let mut written = 0;
    for task in 0..3 {
        let id = task.to_string();
        let o = summarize(
            dir.path(),
            &sum,
            &[("SLURM_PROCID", &id), ("SLURM_NTASKS", "3")],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let said = stderr(&o);
        assert!(
            said.contains(&format!(
                "shard {task}/3 (from SLURM_PROCID/SLURM_NTASKS): 2 of 6 inputs"
            )),
            "{said}"
        );
        written += 2;
        if task == 0 {
            // One task of three done: the set is incomplete and says so.
            let o = metric(&sum, "avg_step_time");
            assert_eq!(o.status.code(), Some(1));
            assert!(
                stderr(&o).contains("incomplete summary: 4 of 6 inputs"),
                "{}",
                stderr(&o)
            );
        }
    }
    assert_eq!(written, 6);
    // No shard keeps results: none knows the whole is written. Summarizing
    // once more without one (the reduce of a fan-out) keeps them.
    assert!(!sum.join("results").exists());
    let o = summarize(dir.path(), &sum, &[]);
    assert!(
        stderr(&o).contains("0 written, 6 unchanged"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("kept every metric's result"),
        "{}",
        stderr(&o)
    );
    // One question's results, and the clock check every question shares.
    assert_eq!(std::fs::read_dir(sum.join("results")).unwrap().count(), 2);
    assert!(sum.join("results/clock-check.json").is_file());
    // An array job of one task per input gives the same set again (all current).
    for id in 1..=6 {
        let o = summarize(
            dir.path(),
            &sum,
            &[
                ("SLURM_ARRAY_TASK_ID", &id.to_string()),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "6"),
            ],
        );
        assert!(
            stderr(&o).contains("0 written, 1 unchanged"),
            "{}",
            stderr(&o)
        );
    }
    same_as_traces(dir.path(), &sum);
}

#[test]
fn a_killed_writer_leaves_a_set_that_is_refused_then_completed() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    // A task killed while writing rank 2: its entry (written last) is
    // missing and a half-written table lies under a temporary name.
    let entries: Vec<_> = std::fs::read_dir(sum.join("inputs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let victim = entries
        .iter()
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("rank2_trace.json")
        })
        .unwrap();
    std::fs::remove_file(victim).unwrap();
    std::fs::write(sum.join("ops/.half.parquet.123.partial"), b"PAR1\0\0").unwrap();
    let o = metric(&sum, "avg_step_time");
    assert_eq!(o.status.code(), Some(1), "refused, not trusted");
    assert!(
        stderr(&o).contains("incomplete summary: 1 of 6"),
        "{}",
        stderr(&o)
    );
    // Every file a query's `*.parquet` glob sees is whole.
    for f in std::fs::read_dir(sum.join("ops")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "parquet") {
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&f).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }
    let o = summarize(dir.path(), &sum, &[]);
    assert!(
        stderr(&o).contains("1 written, 5 unchanged"),
        "{}",
        stderr(&o)
    );
    same_as_traces(dir.path(), &sum);
    // --inputs lists each entry with the trace it stands for, as read.
    let listed = stdout(&run(&["--trace", sum.to_str().unwrap(), "--inputs"]));
    assert_eq!(listed.matches("— read").count(), 6, "{listed}");
    assert!(listed.contains("rank2_trace.json) — read"), "{listed}");
}

#[test]
fn a_changed_input_makes_its_summary_stale_until_rebuilt() {
    let dir = write_ranks(&training_run(&shape()));
    let sum = ccl_bench::summary::beside(dir.path()).unwrap();
    let _cleanup = Removes(sum.clone());
    // Without --out the summary goes beside the traces, and is used there.
    let o = run(&["summarize", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = metric(dir.path(), "avg_step_time");
    assert!(stderr(&o).contains("read the summary"), "{}", stderr(&o));
    let before = stdout(&o);

    // Rank 1 re-profiled, now the straggler.
    reprofile_rank1_slow(dir.path());
    let o = metric(&sum, "avg_step_time");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("stale summary: 1 input(s)"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("rank1_trace.json"), "{}", stderr(&o));
    // The traces themselves are read instead, with a word why.
    let o = metric(dir.path(), "avg_step_time");
    assert!(o.status.success());
    assert!(stderr(&o).contains("was not used: "), "{}", stderr(&o));
    let raw = stdout(&o);
    assert_ne!(raw, before);
    let o = run(&["summarize", dir.path().to_str().unwrap()]);
    assert!(
        stderr(&o).contains("1 written, 5 unchanged"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&metric(&sum, "avg_step_time")), raw);
    // Touched but not changed: no re-read.
    let f = std::fs::File::options()
        .append(true)
        .open(dir.path().join("rank3_trace.json"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    // Opened as it is (its bytes are those summarized), and summarized
    // again without reading it.
    let o = metric(&sum, "avg_step_time");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), raw);
    let o = run(&["summarize", dir.path().to_str().unwrap()]);
    assert!(
        stderr(&o).contains("0 written, 6 unchanged"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_damaged_table_is_refused_with_its_name() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    let first = |table: &str| {
        std::fs::read_dir(sum.join(table))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let spoil = |table: &Path| {
        let size = std::fs::metadata(table).unwrap().len() as usize;
        std::fs::write(table, vec![0x5a; size]).unwrap();
    };
    let refused = |o: Output| {
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("damaged summary") && e.contains("/pack-"), "{e}");
        assert!(!e.contains("panicked"), "{e}");
    };
    // The reduce reads each rank's collectives and figures, not its ops:
    // a damaged ops table is refused by what reads every op. (Without the
    // results `summarize` kept, which answer the plain question unread.)
    std::fs::remove_dir_all(sum.join("results")).unwrap();
    let table = first("ops");
    spoil(&table);
    let all_steps = |sum: &Path| {
        run(&[
            "--trace",
            sum.to_str().unwrap(),
            "--metric",
            "avg_step_time",
            "--all-steps",
        ])
    };
    refused(all_steps(&sum));
    // The reduce reads small ranks' collectives and figures where
    // `summarize` gathered them: a damaged copy is refused by name...
    let gathered = sum.join("reduce/comm.parquet");
    let kept = std::fs::read(&gathered).unwrap();
    spoil(&gathered);
    let o = metric(&sum, "avg_step_time");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("damaged summary") && e.contains("reduce/comm.parquet"),
        "{e}"
    );
    std::fs::write(&gathered, kept).unwrap();
    assert!(metric(&sum, "avg_step_time").status.success());
    // ...and, without the index, each rank's own.
    std::fs::remove_file(sum.join("reduce/index.bin")).unwrap();
    spoil(&first("comm"));
    refused(metric(&sum, "avg_step_time"));
    spoil(&first("stats"));
    refused(metric(&sum, "avg_step_time"));
    // Another size is named as such, before the file is hashed; a table
    // gone likewise.
    std::fs::write(&table, b"x").unwrap();
    let e = stderr(&all_steps(&sum));
    assert!(e.contains("missing or changed: 1 bytes where"), "{e}");
    std::fs::remove_file(&table).unwrap();
    let e = stderr(&all_steps(&sum));
    assert!(e.contains("missing or changed: the file is gone"), "{e}");
    // And a re-run rebuilds it: these small ranks shared the file, so
    // every one of them is read again.
    let o = summarize(dir.path(), &sum, &[]);
    assert!(
        stderr(&o).contains("6 written, 0 unchanged"),
        "{}",
        stderr(&o)
    );
    assert!(metric(&sum, "avg_step_time").status.success());
}

/// `summarize` keeps the results of the plain question in the summary: it
/// is answered from them, warnings and all, as the traces answer it;
/// another question (options, rules, a rebuilt summary) is computed afresh
/// and kept nowhere, since reading writes nothing; a damaged results file
/// is ignored, and the next `summarize` keeps it again.
#[test]
fn a_summary_keeps_its_results_for_the_same_question_only() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    let made = summarize(dir.path(), &sum, &[]);
    assert!(made.status.success());
    assert!(
        stderr(&made).contains(&format!(
            "kept every metric's result for `ccl-bench {}`",
            sum.display()
        )),
        "{}",
        stderr(&made)
    );
    let s = sum.to_str().unwrap();
    let kept = || -> Vec<std::path::PathBuf> {
        // The clock check is kept once for every question.
        let mut v: Vec<_> = std::fs::read_dir(sum.join("results"))
            .map(|l| l.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| !p.ends_with("clock-check.json"));
        v.sort();
        v
    };
    let all = ["--trace", s, "--metrics", "--format", "json"];
    // Kept for the summary's path: its traces' folder does not open it.
    assert_eq!(kept().len(), 1);
    let first = run(&all);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(kept().len(), 1);
    let raw = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metrics",
        "--format",
        "json",
    ]);
    assert_eq!(
        stdout(&first).replace(s, "DIR"),
        stdout(&raw).replace(dir.path().to_str().unwrap(), "DIR")
    );
    let again = run(&all);
    assert_eq!(
        (stdout(&again), stderr(&again)),
        (stdout(&first), stderr(&first))
    );
    // It is the kept file that answers: with rank 0's collectives table
    // and the gathered one moved away the summary cannot compute, yet the
    // answer is printed.
    let comm = std::fs::read_dir(sum.join("comm"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let gathered = sum.join("reduce/comm.parquet");
    let answered_kept = || {
        let away = |p: &Path| p.with_extension("away");
        for p in [&comm, &gathered] {
            std::fs::rename(p, away(p)).unwrap();
        }
        let o = run(&all);
        for p in [&comm, &gathered] {
            std::fs::rename(away(p), p).unwrap();
        }
        o.status.success() && stdout(&o) == stdout(&first)
    };
    assert!(answered_kept());
    // A kept file edited by hand is not served: computed afresh, and kept
    // again by the next `summarize` only.
    let file = kept()[0].clone();
    let text = std::fs::read_to_string(&file).unwrap();
    let na = regex::Regex::new(r#""NotApplicable":"([^"]+)""#)
        .unwrap()
        .captures(&text)
        .expect("some metric does not apply to a synthetic run")[1]
        .to_owned();
    std::fs::write(&file, text.replace(&na, "KEPT")).unwrap();
    assert!(!stdout(&run(&all)).contains("KEPT"));
    assert!(!answered_kept());
    assert!(std::fs::read_to_string(&file).unwrap().contains("KEPT"));
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    assert!(answered_kept());
    // A single metric is served from it too, as the traces give it.
    let raw_step = stdout(&metric(dir.path(), "avg_step_time"));
    assert_eq!(stdout(&metric(&sum, "avg_step_time")), raw_step);
    assert_eq!(kept().len(), 1);
    // Other options are another question: computed, and not kept.
    let steps = ["--all-steps", "--metric", "avg_step_time"];
    let o = run(&[&["--trace", s][..], &steps].concat());
    let raw = run(&[&["--trace", dir.path().to_str().unwrap()][..], &steps].concat());
    assert_eq!(stdout(&o), stdout(&raw));
    assert_ne!(stdout(&o), raw_step);
    assert_eq!(kept().len(), 1);
    // A rules file beside the traces changes the answer, so the question.
    std::fs::write(
        dir.path().join("ccl-bench-classes.toml"),
        "[[rule]]\nclass = \"gemm\"\npattern = \"nccl\"\n",
    )
    .unwrap();
    let share = |p: &Path| stdout(&metric(p, "communication_fraction"));
    assert_eq!(share(&sum), share(dir.path()));
    assert!(!answered_kept());
    std::fs::remove_file(dir.path().join("ccl-bench-classes.toml")).unwrap();
    assert!(answered_kept());
    // A damaged results file is a miss, computed again, and left as it is
    // until `summarize` keeps it again.
    std::fs::write(&file, b"{not json").unwrap();
    let o = run(&all);
    assert_eq!(stdout(&o), stdout(&first));
    assert_eq!(std::fs::read(&file).unwrap(), b"{not json");
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    assert!(answered_kept());
    // A rebuilt summary asks afresh (its entries changed, so its key).
    reprofile_rank1_slow(dir.path());
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    assert_eq!(
        stdout(&metric(&sum, "avg_step_time")),
        stdout(&metric(dir.path(), "avg_step_time"))
    );
    assert_ne!(stdout(&metric(&sum, "avg_step_time")), raw_step);
}

/// Reading a run writes nothing: metrics of a summary whose results were
/// never kept (or of other options), by its path or its traces' folder,
/// compute and print, and leave both folders as they were.
#[test]
fn reading_a_summary_writes_nothing() {
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    for (i, r) in training_run(&shape()).iter().enumerate() {
        std::fs::write(dir.join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
    }
    let sum = ccl_bench::summary::beside(&dir).unwrap();
    assert!(summarize(&dir, &sum, &[]).status.success());
    std::fs::remove_dir_all(sum.join("results")).unwrap();
    let (traces, summary) = (snapshot(&dir), snapshot(&sum));
    for p in [&sum, &dir] {
        let p = p.to_str().unwrap();
        for args in [
            &["--trace", p, "--metrics", "--format", "json"][..],
            &["--trace", p, "--metric", "avg_step_time"],
            &["--trace", p, "--metric", "avg_step_time", "--all-steps"],
            &["collectives", p],
            &["--trace", p, "--inputs"],
        ] {
            let o = run(args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        }
    }
    assert!(snapshot(&dir) == traces, "the traces' folder changed");
    assert!(snapshot(&sum) == summary, "the summary changed");
}

#[test]
fn the_cache_builds_a_summary_once_then_uses_it() {
    let dir = write_ranks(&training_run(&shape()));
    let cache = tempfile::tempdir().unwrap();
    let args = |m| {
        run(&[
            "--trace",
            dir.path().to_str().unwrap(),
            "--metric",
            m,
            "--cache",
            cache.path().to_str().unwrap(),
        ])
    };
    let o = args("avg_step_time");
    assert!(
        stderr(&o).contains("summarized 6 input(s) into the cache"),
        "{}",
        stderr(&o)
    );
    let first = stdout(&o);
    let o = args("avg_step_time");
    assert!(!stderr(&o).contains("summarized"), "{}", stderr(&o));
    assert_eq!(stdout(&o), first);
    assert_eq!(stdout(&metric(dir.path(), "avg_step_time")), first);
}

#[test]
fn summarize_refuses_a_folder_that_is_not_a_summary_and_bad_shards() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("notes.txt"), "mine").unwrap();
    let o = summarize(dir.path(), out.path(), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a summary"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.path().join("notes.txt")).unwrap(),
        "mine"
    );
    // A summary another task is starting (srun starts them all at once):
    // its folders made, its manifest still a hidden temporary. Joined.
    let starting = out.path().join("starting");
    std::fs::create_dir_all(starting.join("inputs")).unwrap();
    std::fs::create_dir_all(starting.join("ops/rank=0")).unwrap();
    std::fs::write(starting.join(".ccl-bench-summary.json.77.partial"), "{").unwrap();
    let o = summarize(dir.path(), &starting, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_traces(dir.path(), &starting);
    let o = summarize(
        dir.path(),
        &out.path().join("s"),
        &[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "2")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("task 3 of 2"), "{}", stderr(&o));
    let o = run(&["summarize", dir.path().to_str().unwrap(), "--shard", "2/2"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
}

#[test]
fn only_named_files_are_summarized_and_another_runs_summary_is_kept() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    let file = |i: u32| dir.path().join(format!("rank{i}_trace.json"));
    let d = dir.path().to_str().unwrap();
    let s = sum.to_str().unwrap();
    for i in 0..6 {
        let o = run(&[
            "summarize",
            d,
            "--out",
            s,
            "--only",
            file(i).to_str().unwrap(),
        ]);
        assert!(
            stderr(&o).contains("1 of 6 inputs (--only)"),
            "{}",
            stderr(&o)
        );
    }
    same_as_traces(dir.path(), &sum);
    // One file as a run of its own would replace the manifest: refused.
    let o = run(&["summarize", file(0).to_str().unwrap(), "--out", s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("holds the summary of"),
        "{}",
        stderr(&o)
    );
    assert!(
        metric(&sum, "avg_step_time").status.success(),
        "still whole"
    );
}

/// Removes a folder when dropped (a summary written beside a temporary one).
struct Removes(std::path::PathBuf);

impl Drop for Removes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `--pages always` keeps every rank's collectives in a temporary file
/// (`model::slab`): the metrics are those of the traces. With no temporary
/// folder they stay in memory, with a warning that is not kept with the
/// results (the next run, elsewhere, may spill).
#[test]
fn spilled_collectives_give_the_traces_metrics() {
    let dir = write_ranks(&training_run(&shape()));
    let sum = dir.path().join("run.sum");
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    let json = |tmp: Option<&Path>| {
        std::fs::remove_dir_all(sum.join("results")).ok();
        let mut c = Command::new(env!("CARGO_BIN_EXE_ccl-bench"));
        c.args([
            "--pages",
            "always",
            "--metrics",
            "--format",
            "json",
            "--trace",
        ])
        .arg(&sum);
        if let Some(t) = tmp {
            c.env("TMPDIR", t);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (comparable(doc, dir.path()), stderr(&o))
    };
    let raw = comparable(metrics_doc(dir.path(), "raw"), dir.path());
    let (spilled, said) = json(None);
    assert_eq!(raw, spilled);
    assert!(!said.contains("not spilled"), "{said}");
    let (held, said) = json(Some(&dir.path().join("missing")));
    assert_eq!(raw, held);
    assert!(
        said.contains("collectives held in memory, not spilled to a temporary file"),
        "{said}"
    );
    // Nothing of it kept (reading keeps nothing; `summarize` would keep
    // the results without that warning, see `kept::tests`): the next run
    // computes afresh and, with a temporary folder, does not say it.
    assert!(!sum.join("results").exists());
    let o = run(&["--trace", sum.to_str().unwrap(), "--metrics"]);
    assert!(o.status.success());
    assert!(!stderr(&o).contains("not spilled"), "{}", stderr(&o));
}

/// The table files (not entries, results, the reduce's index and
/// gathered tables or the manifest) of a summary.
fn table_files(sum: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir(sum).unwrap().flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        if !dir.path().is_dir() || ["inputs", "results", "reduce"].contains(&name.as_str()) {
            continue;
        }
        for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
            out.push(format!("{name}/{}", f.file_name().to_string_lossy()));
        }
    }
    out.sort();
    out
}

/// Small ranks share table files: 130 ranks of a few kB make three packs
/// (64, 64 and 2 ranks) of 9 files each, not 9 files a rank, with the
/// traces' results. A changed rank is written alone, the pack others still
/// name is kept; once no entry names a pack, a whole `summarize` removes
/// it, and nothing it did not write.
#[test]
fn small_ranks_share_table_files() {
    let shape = RunShape {
        ranks: 130,
        steps: 1,
        ..RunShape::default()
    };
    let dir = write_ranks(&training_run(&shape));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    let o = summarize(dir.path(), &sum, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files = table_files(&sum);
    assert_eq!(files.len(), 3 * 9, "{files:?}");
    assert!(files.iter().all(|f| f.contains("/pack-")), "{files:?}");
    same_as_traces(dir.path(), &sum);

    // Rank 1 re-profiled: it alone is read, into a pack of its own.
    let mut slow = training_run(&RunShape {
        straggler: Some(1),
        straggler_factor: 2.0,
        ..shape
    });
    std::fs::write(dir.path().join("rank1_trace.json"), slow[1].to_json()).unwrap();
    let o = summarize(dir.path(), &sum, &[]);
    assert!(
        stderr(&o).contains("1 written, 129 unchanged"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        table_files(&sum).len(),
        4 * 9,
        "the old pack is still named"
    );
    same_as_traces(dir.path(), &sum);

    // Every rank re-profiled: the old packs are named by no entry and go;
    // a file named like a pack that the tool did not write stays.
    let planted = sum.join("ops/pack-0123456789abcdef.parquet");
    std::fs::write(&planted, b"not a table of ours").unwrap();
    for (i, r) in slow.iter_mut().enumerate() {
        std::fs::write(dir.path().join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
    }
    let o = summarize(dir.path(), &sum, &[]);
    assert!(
        stderr(&o).contains("129 written, 1 unchanged"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(&planted).expect("the planted file is left");
    // The three new packs and rank 1's.
    assert_eq!(table_files(&sum).len(), 4 * 9);
    same_as_traces(dir.path(), &sum);
}

/// An entry whose rows or figures lie past its pack's files is a damaged
/// summary, named, not a panic nor another rank's rows.
#[test]
fn rows_past_a_packs_files_are_refused() {
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("s");
    assert!(summarize(dir.path(), &sum, &[]).status.success());
    std::fs::remove_dir_all(sum.join("results")).unwrap();
    let entry = std::fs::read_dir(sum.join("inputs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("rank2_trace.json")
        })
        .unwrap();
    let original = std::fs::read_to_string(&entry).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        f(&mut v["parts"][0]);
        std::fs::write(&entry, v.to_string()).unwrap();
        let o = metric(&sum, "avg_step_time");
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("damaged summary"), "{e}");
        assert!(!e.contains("panicked"), "{e}");
        e
    };
    let e = edit(&|p| {
        let rows = p["rows"].as_array_mut().unwrap();
        let comm = rows.iter_mut().find(|r| r[0] == "comm").unwrap();
        comm[2] = serde_json::json!(1u64 << 40);
    });
    assert!(e.contains("of a table of"), "{e}");
    let e = edit(&|p| p["stats"] = serde_json::json!([1u64 << 40, (1u64 << 40) + 5]));
    assert!(e.contains("no figures at"), "{e}");
    let e = edit(&|p| p["rows"] = serde_json::json!([]));
    assert!(e.contains("no rows of"), "{e}");
}

/// The tables every first open reads are stored uncompressed, the others
/// with Snappy; times, ids and sequence numbers are stored plain (no
/// dictionary), names and classes with one.
#[test]
fn tables_read_on_every_open_are_stored_uncompressed() {
    use parquet::basic::{Compression, Encoding};
    use parquet::file::reader::FileReader;
    let dir = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let sum = out.path().join("run.summary");
    let o = summarize(dir.path(), &sum, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut seen = std::collections::BTreeSet::new();
    let gathered = std::fs::read_dir(sum.join("reduce"))
        .unwrap()
        .flatten()
        .map(|f| format!("reduce/{}", f.file_name().to_string_lossy()));
    for rel in table_files(&sum).into_iter().chain(gathered) {
        let Some((table, file)) = rel.split_once('/') else {
            continue;
        };
        if !file.ends_with(".parquet") {
            continue;
        }
        let f = std::fs::File::open(sum.join(&rel)).unwrap();
        let r = parquet::file::reader::SerializedFileReader::new(f).unwrap();
        let on_open = ["names", "colls", "steps", "annotations", "comm"].contains(&table)
            || table == "reduce";
        for g in r.metadata().row_groups() {
            for c in g.columns() {
                let want = if on_open {
                    Compression::UNCOMPRESSED
                } else {
                    Compression::SNAPPY
                };
                assert_eq!(c.compression(), want, "{rel}");
                let column = c.column_path().string();
                let dictionary = c.encodings().any(|e| e == Encoding::RLE_DICTIONARY);
                let distinct =
                    column.ends_with("_ns") || ["id", "index", "seq"].contains(&&*column);
                if distinct {
                    assert!(!dictionary, "{rel}: {column} has a dictionary");
                }
                if column == "name" && c.num_values() > 0 && !["names", "reduce"].contains(&table) {
                    assert!(dictionary, "{rel}: {column} has no dictionary");
                }
            }
        }
        seen.insert(table.to_owned());
    }
    for t in ["names", "ops", "colls", "steps", "comm", "cpu"] {
        assert!(seen.contains(t), "no {t} table in {seen:?}");
    }
}

/// Rank 2 of a synthetic run on a clock 3 ms ahead, rank 3 on one that
/// runs 200 ppm fast: offsets to apply and a drift to report.
fn skewed_clocks(dir: &Path) {
    let ranks = training_run(&RunShape {
        ranks: 4,
        steps: 6,
        ..RunShape::default()
    });
    for (r, t) in ranks.iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        let (add, scale) = match r {
            2 => (3000.0, 1.0),
            3 => (0.0, 1.0002),
            _ => (0.0, 1.0),
        };
        for e in v["traceEvents"].as_array_mut().unwrap() {
            if let Some(x) = e["ts"].as_f64() {
                e["ts"] = serde_json::json!(x * scale + add);
            }
        }
        std::fs::write(dir.join(format!("rank{r}_trace.json")), v.to_string()).unwrap();
    }
}

/// `summarize` keeps the clock check (each rank's offset and drift) beside
/// its results. An open that asks a question not yet answered reads it
/// back instead of fitting again, with the traces' answers, warnings
/// included, and writes nothing; a check edited by hand is a miss,
/// measured afresh.
#[test]
fn the_kept_clock_check_gives_the_traces_answers() {
    let synthetic = tempfile::tempdir().unwrap();
    skewed_clocks(synthetic.path());
    let mut dirs = vec![("skewed clocks".to_owned(), synthetic.path().to_owned())];
    for rel in ["kineto/dlrm_8rank_v100", "xla/xprof_tpu"] {
        if let Some(d) = corpus(rel) {
            dirs.push((rel.to_owned(), d));
        }
    }
    let open = |p: &Path| metrics_said(p, "open");
    for (what, dir) in dirs {
        let out = tempfile::tempdir().unwrap();
        let sum = out.path().join("run.sum");
        let o = summarize(&dir, &sum, &[]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let kept = sum.join("results/clock-check.json");
        assert!(kept.is_file(), "{what}: no clock check kept");
        let (raw, raw_err) = open(&dir);
        let clear_answers = || {
            for f in std::fs::read_dir(sum.join("results")).unwrap().flatten() {
                if f.path() != kept {
                    std::fs::remove_file(f.path()).unwrap();
                }
            }
        };
        clear_answers();
        let before = snapshot(&sum);
        let (doc, err) = open(&sum);
        assert_eq!(
            comparable(raw.clone(), &dir),
            comparable(doc, &dir),
            "{what}"
        );
        assert_eq!(raw_err, err, "{what}");
        assert_eq!(before, snapshot(&sum), "{what}: an open wrote");
        // An edited check (its seal no longer matches) is measured afresh.
        let text = std::fs::read_to_string(&kept).unwrap();
        let edited = text.replacen("\"samples\":", "\"samples\":1", 1);
        assert_ne!(text, edited);
        std::fs::write(&kept, edited).unwrap();
        let (doc, err) = open(&sum);
        assert_eq!(
            comparable(raw, &dir),
            comparable(doc, &dir),
            "{what}: edited"
        );
        assert_eq!(raw_err, err, "{what}: edited");
    }
    // The skewed run's check found what was done to it.
    let (doc, err) = open(synthetic.path());
    let offsets = doc["clock_offsets"].to_string();
    assert!(
        offsets.contains(r#""offset_ns":-3000000,"rank":2"#),
        "{offsets}"
    );
    assert!(
        err.contains("rank 3: its clock runs 200.0 ppm fast"),
        "{err}"
    );
}
