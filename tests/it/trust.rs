//! Folders the tool did not write are inputs like any other: a summary
//! prepared by someone else on a shared file system, files planted where an
//! export writes. Each case checks that files outside what the command
//! names are untouched byte for byte, and that nothing hangs (a run past
//! its deadline is killed and fails the test; no timing is asserted).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ccl_bench::synth::{training_run, RunShape};

use crate::support::{snapshot, stderr, stdout, write_ranks};

/// Runs ccl-bench, killing it past `DEADLINE` (a hang fails the test).
fn run(args: &[&str]) -> Output {
    const DEADLINE: Duration = Duration::from_secs(120);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccl-bench"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ccl-bench runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("ccl-bench {args:?} still running after {DEADLINE:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    o
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn shape() -> RunShape {
    RunShape {
        ranks: 2,
        ..RunShape::default()
    }
}

/// Traces and their summary in a fresh folder: `(folder, traces, summary)`.
fn summarized() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("run");
    std::fs::create_dir(&traces).unwrap();
    for (i, r) in training_run(&shape()).iter().enumerate() {
        std::fs::write(traces.join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
    }
    let sum = dir.path().join("run.sum");
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, traces, sum)
}

/// A folder of someone else's JSON files, made a while ago.
fn strangers_folder(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        let p = dir.path().join(format!("{i:016x}.json"));
        std::fs::write(&p, format!("{{\"mine\": {i}}}")).unwrap();
        let f = std::fs::File::options().append(true).open(&p).unwrap();
        f.set_modified(
            std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + i as u64),
        )
        .unwrap();
    }
    dir
}

#[cfg(unix)]
#[test]
fn a_summary_whose_folders_are_links_is_refused_and_nothing_outside_is_removed() {
    use std::os::unix::fs::symlink;
    let (_dir, traces, sum) = summarized();
    let outside = strangers_folder(30);
    let before = snapshot(outside.path());
    // Results kept there once, then the folder swapped for a link.
    let o = run(&["--trace", s(&sum), "--metric", "communication_fraction"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_dir_all(sum.join("results")).unwrap();
    symlink(outside.path(), sum.join("results")).unwrap();
    for args in [
        vec!["--trace", s(&sum), "--metric", "communication_fraction"],
        vec!["--trace", s(&sum), "--metrics"],
        vec!["--trace", s(&traces), "--metric", "communication_fraction"],
    ] {
        let o = run(&args);
        let err = stderr(&o);
        assert!(err.contains("results is a link"), "{args:?}: {err}");
        assert_eq!(snapshot(outside.path()), before, "{args:?}");
    }
    // summarize into it is refused too, and `inputs` as a link likewise.
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::fs::remove_file(sum.join("results")).unwrap();
    std::fs::rename(sum.join("inputs"), sum.with_extension("inputs")).unwrap();
    symlink(outside.path(), sum.join("inputs")).unwrap();
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("inputs is a link"), "{}", stderr(&o));
    assert_eq!(snapshot(outside.path()), before);
}

/// The kept clock check's name planted as a link to a file outside: an
/// open does not read through it (the traces' answers, measured afresh),
/// and `summarize` replaces the link, never writing the file it names.
#[test]
fn a_link_at_the_clock_checks_name_is_neither_read_nor_written_through() {
    let (_dir, traces, sum) = summarized();
    let kept = sum.join("results/clock-check.json");
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("mine.json");
    std::fs::copy(&kept, &victim).unwrap();
    let before = snapshot(outside.path());
    std::fs::remove_file(&kept).unwrap();
    std::os::unix::fs::symlink(&victim, &kept).unwrap();
    let fresh = stdout(&run(&["--trace", s(&traces), "--no-summary", "--metrics"]));
    for f in std::fs::read_dir(sum.join("results")).unwrap().flatten() {
        if f.path() != kept {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    let o = run(&["--trace", s(&sum), "--metrics"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).replace(s(&sum), s(&traces)), fresh);
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(snapshot(outside.path()), before);
    let meta = std::fs::symlink_metadata(&kept).unwrap();
    assert!(meta.is_file(), "the link was kept: {meta:?}");
}

#[test]
fn kept_results_prune_only_the_tools_own_files() {
    let (_dir, traces, sum) = summarized();
    let results = sum.join("results");
    std::fs::create_dir_all(&results).unwrap();
    // Someone's files in the results folder, named like results and older
    // than any: the tool keeps 17 results, but these are not results.
    let theirs = strangers_folder(30);
    for (p, bytes) in snapshot(theirs.path()) {
        let to = results.join(p.file_name().unwrap());
        std::fs::write(&to, bytes).unwrap();
        let f = std::fs::File::options().append(true).open(&to).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
            .unwrap();
    }
    // Kept, and pruned, by the next `summarize` (reading writes nothing).
    let ours: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !theirs.path().join(p.file_name().unwrap()).exists())
        .collect();
    assert_eq!(
        ours.len(),
        3,
        "summarize kept the summary's and the traces' results, and the clock check"
    );
    for f in &ours {
        std::fs::remove_file(f).unwrap();
    }
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let left = std::fs::read_dir(&results).unwrap().count();
    assert_eq!(
        left, 33,
        "30 strangers, the two kept results and the clock check"
    );
}

#[test]
fn edited_kept_results_are_computed_again() {
    let (_dir, traces, sum) = summarized();
    let fresh = stdout(&run(&[
        "--trace",
        s(&traces),
        "--no-summary",
        "--metric",
        "communication_fraction",
    ]));
    let o = run(&["--trace", s(&sum), "--metric", "communication_fraction"]);
    assert_eq!(stdout(&o), fresh);
    let kept: Vec<PathBuf> = std::fs::read_dir(sum.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("clock-check.json"))
        .collect();
    // One for the summary's path, one for the traces' folder beside it.
    assert_eq!(kept.len(), 2);
    // Every stored number replaced by the bits of 512.5, NaN and -3.
    let value = regex::Regex::new(r#""value":\d+"#).unwrap();
    for bad in [512.5f64, f64::NAN, -3.0] {
        for file in &kept {
            let text = std::fs::read_to_string(file).unwrap();
            let edited = value
                .replace_all(&text, format!("\"value\":{}", bad.to_bits()).as_str())
                .into_owned();
            assert_ne!(edited, text);
            std::fs::write(file, edited).unwrap();
        }
        for p in [&sum, &traces] {
            let o = run(&["--trace", s(p), "--metric", "communication_fraction"]);
            assert!(o.status.success(), "{}", stderr(&o));
            assert_eq!(stdout(&o), fresh, "an edited result ({bad}) is served");
        }
    }
}

/// The bundled sample (it has a workload card) summarized in a fresh folder.
fn sample_summarized() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("run");
    std::fs::create_dir(&traces).unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu");
    for e in std::fs::read_dir(sample).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, traces.join(p.file_name().unwrap())).unwrap();
    }
    let sum = dir.path().join("run.sum");
    let o = run(&["summarize", s(&traces), "--out", s(&sum)]);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, traces, sum)
}

/// The card entry of a summary, its path, and its JSON.
fn card_entry(sum: &Path) -> (PathBuf, serde_json::Value) {
    for e in std::fs::read_dir(sum.join("inputs")).unwrap() {
        let p = e.unwrap().path();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        if v["format"] == "workload card" {
            return (p, v);
        }
    }
    panic!("no card entry");
}

#[test]
fn a_card_entry_is_read_only_inside_its_summary_and_as_copied() {
    let (dir, _traces, sum) = sample_summarized();
    let mfu = |sum: &Path| run(&["--trace", s(sum), "--metric", "mfu"]);
    let good = mfu(&sum);
    assert!(good.status.success(), "{}", stderr(&good));
    let (entry, v) = card_entry(&sum);
    let copy = sum.join(v["files"][0][0].as_str().unwrap());
    // Another card outside, with another model size.
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let card = std::fs::read_to_string(&copy).unwrap();
    std::fs::write(
        outside.join("workload_card.yaml"),
        card.replace("1300000000", "13000000000"),
    )
    .unwrap();
    // The index of entries the reduce reads is checked alike: its card
    // entry pointed outside is refused (the entry files left as written).
    // Its path replaced in place by one of the same length (every length
    // in the index stays as written; slashes pad it).
    let index = sum.join("reduce/index.bin");
    let text = std::fs::read(&index).unwrap();
    let copied = v["files"][0][0].as_str().unwrap();
    let outside = "../outside/workload_card.yaml";
    assert!(copied.len() >= outside.len(), "{copied}");
    let pad = "/".repeat(copied.len() - outside.len());
    let outside = format!("../outside/{pad}workload_card.yaml");
    let at = (text.windows(copied.len()))
        .position(|w| w == copied.as_bytes())
        .expect("the index holds the card entry");
    let crafted = [&text[..at], outside.as_bytes(), &text[at + copied.len()..]].concat();
    std::fs::write(&index, crafted).unwrap();
    let o = mfu(&sum);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not a path inside"), "{}", stderr(&o));
    std::fs::write(&index, text).unwrap();
    let mut escaped = v.clone();
    escaped["files"][0][0] = "../outside/workload_card.yaml".into();
    std::fs::write(&entry, escaped.to_string()).unwrap();
    let o = mfu(&sum);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not a path inside"), "{}", stderr(&o));
    // The copy edited in place: refused, not served.
    std::fs::write(&entry, v.to_string()).unwrap();
    std::fs::write(&copy, card.replace("1300000000", "1300000001")).unwrap();
    let o = mfu(&sum);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("changed since"), "{}", stderr(&o));
    // A FIFO in its place: refused at once, never waited on.
    std::fs::remove_file(&copy).unwrap();
    let made = Command::new("mkfifo").arg(&copy).status();
    if made.is_ok_and(|st| st.success()) {
        let o = mfu(&sum);
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
        assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    }
}

#[test]
fn a_summary_answers_for_the_traces_named_by_their_content() {
    let (dir, traces, sum) = summarized();
    let metric = |p: &Path| run(&["--trace", s(p), "--metric", "avg_step_time"]);
    let before = stdout(&metric(&traces));
    // Copied together, then a trace changed in the copy.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let copy_sum = dir.path().join("copy.sum");
    Command::new("cp")
        .args(["-a", s(&sum), s(&copy_sum)])
        .status()
        .unwrap();
    for e in std::fs::read_dir(&traces).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let slow = training_run(&RunShape {
        straggler: Some(1),
        straggler_factor: 2.0,
        ..shape()
    });
    std::fs::write(copy.join("rank1_trace.json"), slow[1].to_json()).unwrap();
    let o = metric(&copy);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the summary beside the traces was not used: "),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("stale summary"), "{}", stderr(&o));
    let fresh = stdout(&run(&[
        "--trace",
        s(&copy),
        "--no-summary",
        "--metric",
        "avg_step_time",
    ]));
    assert_eq!(stdout(&o), fresh);
    assert_ne!(fresh, before);
    // Touched, content unchanged: the summary still answers.
    let f = std::fs::File::options()
        .append(true)
        .open(traces.join("rank0_trace.json"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    let o = metric(&sum);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = metric(&traces);
    assert!(stderr(&o).contains("read the summary"), "{}", stderr(&o));
    assert_eq!(stdout(&o), before);
    // --no-summary reads the traces, and says nothing of a summary.
    let o = run(&[
        "--trace",
        s(&traces),
        "--no-summary",
        "--metric",
        "avg_step_time",
    ]);
    assert!(!stderr(&o).contains("summary"), "{}", stderr(&o));
}

#[cfg(unix)]
#[test]
fn exports_never_write_through_links_nor_over_their_inputs() {
    use std::os::unix::fs::symlink;
    let traces = write_ranks(&training_run(&shape()));
    let out = tempfile::tempdir().unwrap();
    let victim = out.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let target = out.path().join("run.json");
    // The fixed temporary name an earlier version wrote through.
    symlink(&victim, out.path().join(".run.json.partial")).unwrap();
    let export = |to: &str, path: &Path| run(&["export", s(traces.path()), "--to", to, s(path)]);
    let o = export("perfetto", &target);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        std::fs::read(&victim).unwrap() == b"precious",
        "written through the link"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    assert!(v["traceEvents"].is_array());
    // An existing folder: refused, nothing left beside it.
    let folder = out.path().join("folder.json");
    std::fs::create_dir(&folder).unwrap();
    let before = snapshot(out.path());
    let o = export("perfetto", &folder);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a folder"), "{}", stderr(&o));
    assert_eq!(snapshot(out.path()), before);
    // One of the traces it reads: refused, the trace as it was.
    let input = traces.path().join("rank0_trace.json");
    let traces_before = snapshot(traces.path());
    for (to, path) in [
        ("perfetto", input.clone()),
        ("parquet", traces.path().to_owned()),
    ] {
        let o = export(to, &path);
        if to == "perfetto" {
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert!(stderr(&o).contains("is an input"), "{}", stderr(&o));
        }
        assert_eq!(
            snapshot(traces.path())
                .into_iter()
                .filter(|(p, _)| !p.to_string_lossy().ends_with(".parquet"))
                .collect::<Vec<_>>(),
            traces_before
        );
    }
}

#[test]
fn two_exports_to_one_path_leave_one_whole_file() {
    let a = write_ranks(&training_run(&shape()));
    let b = write_ranks(&training_run(&RunShape {
        ranks: 4,
        ..RunShape::default()
    }));
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("run.json");
    std::thread::scope(|sc| {
        for dir in [a.path(), b.path()] {
            let target = &target;
            sc.spawn(move || {
                for _ in 0..3 {
                    let o = run(&["export", s(dir), "--to", "perfetto", s(target)]);
                    assert!(o.status.success(), "{}", stderr(&o));
                }
            });
        }
    });
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&target).unwrap()).expect("whole JSON");
    assert!(v["traceEvents"].is_array());
    let names: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporaries left");
}

#[test]
fn one_rank_in_two_folders_is_refused_not_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu");
    for (folder, rank) in [("rank_0", 0), ("worker_0", 0), ("rank_1", 1)] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
        let name = format!("rank{rank}_trace.json");
        std::fs::copy(sample.join(&name), dir.path().join(folder).join(&name)).unwrap();
    }
    let o = run(&["--trace", s(dir.path()), "--metric", "total_kernel_time"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("rank 0 appears in both")
            && err.contains("rank_0")
            && err.contains("worker_0"),
        "{err}"
    );
}

#[test]
fn many_overlapping_windows_are_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("rank_0");
    std::fs::create_dir(&rank).unwrap();
    let event = r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}}]}"#;
    for i in 0..500u64 {
        let name = format!("host_1.{}.pt.trace.json", 1_700_000_000_000 + i);
        std::fs::write(rank.join(name), event).unwrap();
    }
    let o = run(&[
        "--trace",
        s(dir.path()),
        "--windows",
        "all",
        "--metric",
        "total_kernel_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.lines().count() < 10, "{err}");
    assert!(
        err.contains("499 windows (") && err.contains("and 496 more) overlap"),
        "{err}"
    );
}

/// Two ranks in process group 5, each listing its members and issuing its
/// collectives (`ar` all-reduce, `ag` all-gather) a microsecond apart;
/// stderr of `--metric total_kernel_time` on them.
fn group_run(ranks: [(&[u32], Vec<&str>); 2]) -> String {
    use ccl_bench::synth::{Coll, RankTrace};
    let ar = Coll::all_reduce_f32(1 << 20, 2);
    let ag = Coll {
        name: "allgather",
        ..Coll::all_reduce_f32(1 << 20, 2)
    };
    let mut traces = Vec::new();
    for (rank, (members, kinds)) in (0u32..).zip(ranks) {
        let mut t = RankTrace::new(Some(rank), 2, 132);
        t.process_group("5", "mesh_dp", members);
        for (i, k) in kinds.iter().enumerate() {
            let ts = 100.0 + 1000.0 * i as f64;
            t.kernel("gemm", ts - 90.0, 80.0, 7, 132);
            let (name, c) = match *k {
                "ar" => ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", &ar),
                _ => ("ncclDevKernel_AllGather_RING_LL", &ag),
            };
            t.collective_in(name, ts, 50.0, 20, c, ("5", members));
        }
        traces.push(t);
    }
    let dir = write_ranks(&traces);
    let o = run(&["--trace", s(dir.path()), "--metric", "total_kernel_time"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
}

#[test]
fn ranks_that_disagree_on_a_group_are_named() {
    let err = group_run([
        (&[0, 1], vec!["ar", "ag", "ar"]),
        (&[1, 2], vec!["ar", "ar", "ar"]),
    ]);
    assert!(
        err.contains(
            "process group 5: ranks disagree on its members (0 list {0, 1}; 1 list {1, 2})"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "process group 5: the ranks' calls differ in kind at call 2 (of 3 on the longest \
             rank), so matching stops there: the call before it is matched by position"
        ),
        "{err}"
    );
}

#[test]
fn a_rank_past_the_world_size_is_not_counted_in_it() {
    let dir = tempfile::tempdir().unwrap();
    for (i, rank) in [0u64, 4_294_967_295].into_iter().enumerate() {
        let mut v: serde_json::Value =
            serde_json::from_str(&ccl_bench::synth::two_rank_example()[i].to_json()).unwrap();
        v["distributedInfo"] = serde_json::json!({"rank": rank, "world_size": 2});
        std::fs::write(
            dir.path().join(format!("rank{i}_trace.json")),
            v.to_string(),
        )
        .unwrap();
    }
    let o = run(&["--trace", s(dir.path()), "--metric", "total_kernel_time"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("1 of 2 ranks in the trace (world size 2); missing: 1;"),
        "{err}"
    );
    assert!(
        err.contains("rank 4294967295 is not below the world size 2"),
        "{err}"
    );
}

#[test]
fn calls_one_rank_issued_and_another_did_not_are_counted() {
    let err = group_run([(&[0, 1], vec!["ar"; 100]), (&[0, 1], vec!["ar"; 40])]);
    assert!(
        err.contains(
            "process group 5: its ranks issued 40 to 100 calls; the last 60 of the longer"
        ),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_link_planted_in_the_cache_is_not_written_through() {
    let traces = write_ranks(&training_run(&shape()));
    let cache = tempfile::tempdir().unwrap();
    let victim = tempfile::tempdir().unwrap();
    std::fs::write(victim.path().join("notes.txt"), b"mine").unwrap();
    let before = snapshot(victim.path());
    let args = ["--trace", s(traces.path()), "--metric", "avg_step_time"];
    let cached = |extra: &[&str]| run(&[&args[..], &["--cache", s(cache.path())], extra].concat());
    // The cache's folder for this run, found by a first use, then swapped
    // for a link to someone else's folder.
    let o = cached(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let made = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_dir_all(&made).unwrap();
    std::os::unix::fs::symlink(victim.path(), &made).unwrap();
    let o = cached(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("is a link"), "{}", stderr(&o));
    assert_eq!(snapshot(victim.path()), before);
}
