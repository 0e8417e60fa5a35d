use ccl_bench::synth::two_rank_example;

use crate::support::{run, stderr, stdout, write_ranks};

fn fails_naming(args: &[&str], needle: &str) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn missing_path() {
    let err = fails_naming(&["--trace", "/no/such/dir", "--metrics"], "/no/such/dir");
    // The cause is said once.
    assert_eq!(
        err.trim(),
        "ccl-bench: error: cannot load /no/such/dir: /no/such/dir: No such file or directory (os error 2)"
    );
}

#[test]
fn empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    fails_naming(
        &["--trace", dir.path().to_str().unwrap(), "--metrics"],
        "no profiler traces found",
    );
}

#[test]
fn garbage_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, b"\x00\x01 definitely not json").unwrap();
    fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "rank0_trace.json",
    );
}

#[test]
fn json_that_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("kineto_trace_0.json");
    std::fs::write(&f, br#"{"traceEvents": 5}"#).unwrap();
    fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "kineto_trace_0.json",
    );
}

#[test]
fn truncated_trace_loads_with_a_warning() {
    let dir = write_ranks(&two_rank_example()[1..]);
    let f = dir.path().join("rank0_trace.json");
    let text = std::fs::read_to_string(&f).unwrap();
    // Cut inside the last event.
    std::fs::write(&f, &text[..text.len() - 40]).unwrap();
    let before = std::fs::read(&f).unwrap();
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metric",
        "avg_step_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning:") && stderr(&o).contains("rank0_trace.json"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o).trim(), "0.0002");
    // Nothing is written to the input.
    assert_eq!(std::fs::read(&f).unwrap(), before);
}

#[test]
fn mixed_runs_are_not_merged() {
    let ranks = two_rank_example();
    let dir = tempfile::tempdir().unwrap();
    // Two files that both claim rank 0 (e.g. steps 12 and 13 of one worker).
    std::fs::write(
        dir.path().join("worker0_step_12.pt.trace.json"),
        ranks[0].to_json(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("worker0_step_13.pt.trace.json"),
        ranks[0].to_json(),
    )
    .unwrap();
    let err = fails_naming(
        &["--trace", dir.path().to_str().unwrap(), "--metrics"],
        "rank 0 appears in both",
    );
    assert!(
        err.contains("worker0_step_12") && err.contains("worker0_step_13"),
        "{err}"
    );
}

#[test]
fn nsys_report_gets_the_export_command() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("nsys_0.nsys-rep");
    std::fs::write(&report, b"binary").unwrap();
    fails_naming(
        &["--trace", dir.path().to_str().unwrap(), "--metrics"],
        "nsys export --type sqlite",
    );
    // Given directly, the same advice (it said "no ranks loaded").
    fails_naming(
        &["--trace", report.to_str().unwrap(), "--metrics"],
        "nsys export --type sqlite --output",
    );
}

#[test]
fn unknown_rank() {
    let dir = write_ranks(&two_rank_example());
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metrics",
        "--rank",
        "9",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("rank 9 is not in the trace (ranks: 0, 1)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn truncated_gzip_loads_with_a_warning() {
    use std::io::Write;
    let text = two_rank_example()[1].to_json();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let bytes = gz.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Drop the gzip trailer and the end of the stream, as a killed job would.
    std::fs::write(
        dir.path().join("rank1_trace.json.gz"),
        &bytes[..bytes.len() - 30],
    )
    .unwrap();
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metric",
        "avg_step_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rank1_trace.json.gz") && stderr(&o).contains("cut off"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).trim().is_empty());
}

#[test]
fn sqlite_that_is_not_an_nsys_export() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("results.sqlite");
    let c = rusqlite::Connection::open(&f).unwrap();
    c.execute("CREATE TABLE runs (id INTEGER, loss REAL)", [])
        .unwrap();
    drop(c);
    let err = fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "results.sqlite",
    );
    assert!(
        err.contains("not an `nsys export --type sqlite` file"),
        "{err}"
    );
    // Not SQLite at all.
    std::fs::write(&f, b"SQLite? no").unwrap();
    fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "results.sqlite",
    );
}

#[test]
fn json_lines_that_are_not_an_nsys_export() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("export.json");
    // The string table line, then nothing nsys writes for GPU work.
    std::fs::write(
        &f,
        "{\"data\":[\"a\",\"b\"]}\n{\"Type\":27,\"CommEvent\":{}}\n",
    )
    .unwrap();
    let err = fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "export.json",
    );
    assert!(err.contains("without GPU activity"), "{err}");
    // A first line that is not JSON at all.
    std::fs::write(&f, "{\"data\":[oops\n").unwrap();
    let err = fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "export.json",
    );
    assert!(
        err.contains("not an `nsys export --type json` file"),
        "{err}"
    );
}

#[test]
fn pickle_that_is_not_a_memory_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_memory_snapshot.pickle");
    // pickle.dumps({"loss": 1.5}, protocol=2)
    std::fs::write(
        &f,
        b"\x80\x02}q\x00X\x04\x00\x00\x00lossq\x01G?\xf8\x00\x00\x00\x00\x00\x00s.",
    )
    .unwrap();
    let err = fails_naming(
        &["--trace", dir.path().to_str().unwrap(), "--metrics"],
        "rank0_memory_snapshot.pickle",
    );
    assert!(err.contains("not a CUDA memory snapshot"), "{err}");
    // Not a pickle at all, and a pickle that would call code (os.system):
    // refused, never run.
    for bytes in [&b"hello"[..], &b"cos\nsystem\n(S'touch pwned'\ntR."[..]] {
        std::fs::write(&f, bytes).unwrap();
        fails_naming(
            &["--trace", dir.path().to_str().unwrap(), "--metrics"],
            "rank0_memory_snapshot.pickle",
        );
    }
    assert!(!dir.path().join("pwned").exists());
}

#[test]
fn xplane_that_is_not_an_xspace() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host.xplane.pb");
    std::fs::write(&f, b"\xff\xff\xff not protobuf").unwrap();
    let err = fails_naming(
        &["--trace", f.to_str().unwrap(), "--metrics"],
        "host.xplane.pb",
    );
    assert!(err.contains("not an XSpace protobuf"), "{err}");
    // Valid protobuf (empty), no device planes: says what is missing.
    std::fs::write(&f, b"").unwrap();
    let err = fails_naming(
        &["--trace", dir.path().to_str().unwrap(), "--metrics"],
        "host.xplane.pb",
    );
    assert!(err.contains("without device ops"), "{err}");
}
