//! A corpus of bad inputs generated here: each case asserts the exit code the
//! README documents (0 with a warning where a partial result is meaningful, 1 for
//! input that cannot be read), that the message names the file and what is
//! wrong, that nothing panics, and that nothing is written into the trace folder.

use std::io::Write;
use std::path::Path;

use ccl_bench::load::{LoadOptions, Progress};
use ccl_bench::synth::two_rank_example;

use crate::support::{assert_close, run, stderr, stdout, write_ranks};

/// Every file under `dir` with its bytes, to prove a run left the folder as it was.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            // Only regular files are read: a named pipe would block.
            let file = std::fs::metadata(&p).is_ok_and(|m| m.is_file());
            let bytes = if file {
                std::fs::read(&p).unwrap_or_default()
            } else {
                Vec::new()
            };
            (p.display().to_string(), bytes)
        })
        .collect();
    v.sort();
    v
}

/// Runs `ccl-bench --trace PATH ARGS` and checks the exit code, that stderr has
/// every needle, that nothing panicked and that `dir` is unchanged.
fn check(dir: &Path, path: &Path, args: &[&str], code: i32, needles: &[&str]) -> (String, String) {
    let before = contents(dir);
    let mut all = vec!["--trace", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = run(&all);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(code), "{path:?}: stderr: {err}");
    for n in needles {
        assert!(err.contains(n), "{path:?}: stderr lacks {n:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    if code != 0 {
        assert_eq!(out, "", "nothing on stdout when failing");
    }
    assert_eq!(contents(dir), before, "the run wrote into {dir:?}");
    (out, err)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// End offsets of the events in a pretty-printed trace (`synth` writes each
/// event object at an indent of four spaces).
fn event_ends(text: &str) -> Vec<usize> {
    let from = text.find("\"traceEvents\"").unwrap();
    text[from..]
        .match_indices("\n    }")
        .map(|(i, m)| from + i + m.len())
        .collect()
}

/// The same trace with one event per line, as the PyTorch profiler writes it
/// (read by a faster path than pretty-printed events), and its event ends.
fn one_event_per_line(text: &str) -> (String, Vec<usize>) {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut out = String::from("{\"schemaVersion\": 1, \"traceEvents\": [\n");
    let mut ends = Vec::new();
    for (i, e) in v["traceEvents"].as_array().unwrap().iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        out.push_str(&e.to_string());
        ends.push(out.len());
    }
    out.push_str("\n]}");
    (out, ends)
}

#[test]
fn truncated_json_at_many_offsets() {
    let pretty = two_rank_example()[0].to_json();
    let ends = event_ends(&pretty);
    assert!(ends.len() > 10, "{}", ends.len());
    truncated_at_many_offsets(&pretty, &ends);
    let (lines, ends) = one_event_per_line(&pretty);
    truncated_at_many_offsets(&lines, &ends);
}

fn truncated_at_many_offsets(text: &str, ends: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    // Every 97th byte plus just before and after each event's end.
    let mut cuts: Vec<usize> = (0..text.len()).step_by(97).collect();
    cuts.extend(ends.iter().flat_map(|&e| [e - 1, e, e + 1]));
    for cut in cuts {
        std::fs::write(&f, &text.as_bytes()[..cut]).unwrap();
        let complete = ends.iter().filter(|&&e| e <= cut).count() as u64;
        match ccl_bench::session::inputs(dir.path(), &LoadOptions::default(), &Progress::default())
        {
            Ok(report) => {
                assert_eq!(report.events, complete, "cut at {cut}");
                assert!(
                    report
                        .warnings
                        .iter()
                        .any(|w| w.text.contains("rank0_trace.json") && w.text.contains("cut off")),
                    "cut at {cut}: {:?}",
                    report.warnings
                );
            }
            Err(e) => {
                // Nothing usable before the cut: an error naming the file and place.
                assert_eq!(complete, 0, "cut at {cut}: {e:#}");
                let msg = format!("{e:#}");
                assert!(msg.contains("rank0_trace.json"), "cut at {cut}: {msg}");
                assert!(
                    msg.contains("line ")
                        || msg.contains("empty file")
                        || msg.contains("cut off before its events"),
                    "cut at {cut}: {msg}"
                );
            }
        }
    }
}

#[test]
fn truncated_and_corrupted_gzip() {
    let text = two_rank_example()[0].to_json();
    let gz = gzip(text.as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json.gz");
    // Cut after the header, in the middle, and just before the trailer.
    for cut in [2, 10, gz.len() / 2, gz.len() - 8, gz.len() - 1] {
        std::fs::write(&f, &gz[..cut]).unwrap();
        let o = run(&["--trace", dir.path().to_str().unwrap(), "--metrics"]);
        let err = stderr(&o);
        assert!(err.contains("rank0_trace.json.gz"), "cut {cut}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        match o.status.code() {
            Some(0) => assert!(
                err.contains("cut off") || err.contains("damaged"),
                "cut {cut}: {err}"
            ),
            Some(1) => assert_eq!(stdout(&o), ""),
            c => panic!("cut {cut}: exit {c:?}: {err}"),
        }
    }
    // Flipped bytes in the middle of the stream: damage reported, no panic.
    let mut bad = gz.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&f, &bad).unwrap();
    let o = run(&["--trace", dir.path().to_str().unwrap(), "--metrics"]);
    let err = stderr(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{err}");
    assert!(err.contains("rank0_trace.json.gz"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Gzip magic then garbage, asked for by name.
    std::fs::write(&f, b"\x1f\x8b\x08\x00garbage").unwrap();
    check(dir.path(), &f, &["--metrics"], 1, &["rank0_trace.json.gz"]);
}

#[test]
fn empty_inputs() {
    let dir = tempfile::tempdir().unwrap();
    check(
        dir.path(),
        dir.path(),
        &["--metrics"],
        1,
        &["no profiler traces found"],
    );
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, b"").unwrap();
    check(
        dir.path(),
        &f,
        &["--metrics"],
        1,
        &["rank0_trace.json: empty file (0 bytes)"],
    );
    check(
        dir.path(),
        dir.path(),
        &["--metrics"],
        1,
        &["skipped", "rank0_trace.json: empty file (0 bytes)"],
    );
    // Whitespace only.
    std::fs::write(&f, b"  \n").unwrap();
    check(
        dir.path(),
        &f,
        &["--metrics"],
        1,
        &["rank0_trace.json", "empty"],
    );
}

#[test]
fn a_directory_without_traces() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "loss went down").unwrap();
    std::fs::write(dir.path().join("config.json"), r#"{"lr": 0.1}"#).unwrap();
    check(
        dir.path(),
        dir.path(),
        &["--metrics"],
        1,
        &["no profiler traces found", "looked in"],
    );
}

#[test]
fn json_that_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, r#"{"model": "llama", "layers": 32}"#).unwrap();
    check(
        dir.path(),
        &f,
        &["--metrics"],
        1,
        &["rank0_trace.json", "traceEvents"],
    );
    check(
        dir.path(),
        dir.path(),
        &["--metrics"],
        1,
        &["skipped", "rank0_trace.json", "not a profiler trace"],
    );
    std::fs::write(&f, "[1, 2, 3]").unwrap();
    check(
        dir.path(),
        &f,
        &["--metrics"],
        1,
        &["rank0_trace.json: at line 1, column 2: expected a trace event object"],
    );
}

/// One rank, kernels with every kind of bad field. Hand count: the usable
/// kernels are [10, 40) and the numeric strings [50, 60): 40 µs of kernels.
const WRONG_TYPES: &str = r#"{"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 30},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": "abc", "dur": 5},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": "50", "dur": "10"},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 70, "dur": -5},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1e300, "dur": 1},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 18446744073709551615, "dur": 1},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 80, "dur": NaN},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 90},
{"ph": "X", "cat": "kernel", "name": "gemm", "ts": [1], "dur": {"a": 1}},
"a string",
{"ph": "i", "name": "instant", "ts": 5}
]}"#;

#[test]
fn wrong_field_types_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, WRONG_TYPES).unwrap();
    let (out, err) = check(
        dir.path(),
        dir.path(),
        &["--metric", "total_kernel_time"],
        0,
        &[
            // "abc", the missing dur and the arrays.
            "skipped 3 events (ph \"X\" without a usable ts or dur",
            // 1e300 µs and u64::MAX µs: numbers, out of the model's range.
            "rank0_trace.json: 2 event(s) with a time beyond ±2^61 ns (±73 years) skipped as damaged",
            "the first at line 3, column 1",
            "skipped 1 event (ph \"X\" with a negative dur); the first at line 5, column 1",
            "skipped 1 event (not valid JSON); the first at line 8, column 63: expected value",
            "skipped 1 event (not a JSON object); the first at line 11, column 1",
        ],
    );
    assert_close(out.trim().parse().unwrap(), 40e-6, &err);
    // A file holding only a NaN event has nothing to load: an error with its place.
    std::fs::write(&f, r#"{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}]}"#).unwrap();
    check(
        dir.path(),
        &f,
        &["--metrics"],
        1,
        &["rank0_trace.json: not valid JSON at line 1, column 36: expected value"],
    );
}

#[test]
fn events_out_of_order_give_the_same_metrics() {
    let text = two_rank_example()[0].to_json();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"].as_array_mut().unwrap().reverse();
    let a = write_ranks(&two_rank_example()[..1]);
    let b = tempfile::tempdir().unwrap();
    std::fs::write(b.path().join("rank0_trace.json"), v.to_string()).unwrap();
    let ordered = run(&[
        "--trace",
        a.path().to_str().unwrap(),
        "--metrics",
        "--format",
        "csv",
    ]);
    let reversed = run(&[
        "--trace",
        b.path().to_str().unwrap(),
        "--metrics",
        "--format",
        "csv",
    ]);
    assert!(ordered.status.success(), "{}", stderr(&ordered));
    // The first line names the folder; the table below must match.
    let table = |o: &std::process::Output| stdout(o).lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(table(&ordered), table(&reversed));
}

#[test]
fn duplicate_and_missing_ranks() {
    let ranks = two_rank_example();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank0_trace.json"), ranks[0].to_json()).unwrap();
    std::fs::write(dir.path().join("copy_of_rank0.json"), ranks[0].to_json()).unwrap();
    check(
        dir.path(),
        dir.path(),
        &["--metrics"],
        1,
        &[
            "rank 0 appears in both",
            "copy_of_rank0.json",
            "rank0_trace.json",
        ],
    );
    // Without distributedInfo the file names give the ranks; without either,
    // ranks are numbered in file order, with a warning.
    let strip = |name: &str, r: usize| {
        let mut v: serde_json::Value = serde_json::from_str(&ranks[r].to_json()).unwrap();
        v.as_object_mut().unwrap().remove("distributedInfo");
        std::fs::write(dir.path().join(name), v.to_string()).unwrap();
    };
    std::fs::remove_file(dir.path().join("copy_of_rank0.json")).unwrap();
    strip("rank0_trace.json", 0);
    strip("rank1_trace.json", 1);
    // Rank 1 (one 200 µs step) is the file named rank1.
    let (out, err) = check(
        dir.path(),
        dir.path(),
        &["--metric", "avg_step_time", "--rank", "1"],
        0,
        &[],
    );
    assert_eq!(out.trim(), "0.0002", "{err}");
    assert!(!err.contains("no rank"), "{err}");
    for r in 0..2 {
        std::fs::rename(
            dir.path().join(format!("rank{r}_trace.json")),
            dir.path().join(format!("part_{}.json", ["a", "b"][r])),
        )
        .unwrap();
    }
    check(
        dir.path(),
        dir.path(),
        &["--metric", "slowest_rank"],
        0,
        &[
            "part_a.json: no rank in distributedInfo or file name; using rank 0",
            "part_b.json: no rank in distributedInfo or file name; using rank 1",
        ],
    );
}

#[test]
fn an_empty_rank_among_good_ones() {
    let mut ranks = two_rank_example();
    ranks.push(ranks[1].clone());
    for (i, r) in ranks.iter_mut().enumerate() {
        r.rank = Some(i as u32);
        r.world_size = Some(3);
    }
    let dir = write_ranks(&ranks);
    std::fs::write(dir.path().join("rank1_trace.json"), b"").unwrap();
    check(
        dir.path(),
        dir.path(),
        &["--metric", "total_kernel_time"],
        0,
        &[
            "skipped",
            "rank1_trace.json: empty file (0 bytes)",
            "2 of 3 ranks in the trace (world size 3); missing: 1",
        ],
    );
}

#[test]
fn unreadable_files_and_symlink_loops() {
    let dir = write_ranks(&two_rank_example());
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
    };
    link("rank2_trace.json", "rank2_trace.json.tmp");
    link("rank2_trace.json.tmp", "rank2_trace.json");
    link("/nonexistent/rank3.json", "rank3_trace.json");
    std::fs::create_dir(dir.path().join("rank4_trace.json")).unwrap();
    let (_, err) = check(
        dir.path(),
        dir.path(),
        &["--metric", "total_kernel_time"],
        0,
        &[
            "rank2_trace.json",
            "symbolic links",
            "rank3_trace.json",
            "No such file",
        ],
    );
    // A folder named like a trace is not one, and not worth a warning.
    assert!(!err.contains("rank4_trace.json"), "{err}");
    // A named pipe is never opened (reading it could block forever).
    let fifo = dir.path().join("rank5_trace.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        check(
            dir.path(),
            dir.path(),
            &["--metric", "total_kernel_time"],
            0,
            &[],
        );
        check(
            dir.path(),
            &fifo,
            &["--metrics"],
            1,
            &["rank5_trace.json: neither a file nor a directory"],
        );
    }
    // A file the user may not read (only when not running as root, who may).
    let f = dir.path().join("rank1_trace.json");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&f).is_err() {
        check(
            dir.path(),
            &f,
            &["--metrics"],
            1,
            &["rank1_trace.json", "ermission denied"],
        );
    }
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn unicode_and_very_long_kernel_names() {
    let long = format!(
        "void cutlass::Kernel<{}>",
        "Gemm<float, 128, 256>, ".repeat(400)
    );
    let text = format!(
        r#"{{"traceEvents": [
{{"ph": "X", "cat": "kernel", "name": "{long}", "ts": 0, "dur": 10}},
{{"ph": "X", "cat": "kernel", "name": "注意力_kernel_ü_🚀\u0000\n", "ts": 10, "dur": 5}},
{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 12, "dur": 8}}
]}}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, text).unwrap();
    let (out, _) = check(dir.path(), &f, &["--metric", "total_kernel_time"], 0, &[]);
    assert_close(out.trim().parse().unwrap(), 23e-6, "kernel time");
    let (out, _) = check(
        dir.path(),
        &f,
        &["--metric", "total_communication_time"],
        0,
        &[],
    );
    assert_close(out.trim().parse().unwrap(), 8e-6, "communication time");
    // The table output holds the names, control characters escaped.
    let (out, _) = check(dir.path(), &f, &["--metrics", "--format", "json"], 0, &[]);
    serde_json::from_str::<serde_json::Value>(&out).expect("valid JSON out");
}

#[test]
fn times_beyond_the_models_range_are_skipped_and_counted() {
    // ±8.9e15 µs fits i64 nanoseconds, but the window between them does not;
    // a 4e15 µs duration is 127 years.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(
        &f,
        r#"{"traceEvents":[
{"ph":"X","cat":"kernel","name":"early","pid":0,"tid":7,"ts":-8.9e15,"dur":10},
{"ph":"X","cat":"kernel","name":"late","pid":0,"tid":7,"ts":8.9e15,"dur":10},
{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce","pid":0,"tid":7,"ts":100,"dur":4e15},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":200,"dur":30}
]}"#,
    )
    .unwrap();
    let (out, err) = check(
        dir.path(),
        dir.path(),
        &["--metric", "total_kernel_time"],
        0,
        &["rank0_trace.json: 3 event(s) with a time beyond ±2^61 ns (±73 years) skipped as damaged"],
    );
    assert_close(out.trim().parse().unwrap(), 30e-6, &err);
    // The 127-year collective is not measured as one.
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metric",
        "total_comm_time_s",
    ]);
    assert_eq!(stdout(&o).trim(), "0", "{}", stderr(&o));
}
