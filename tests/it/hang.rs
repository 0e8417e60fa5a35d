//! `ccl-bench hang`: Flight Recorder dumps read from a folder, the verdict
//! printed and its exit code, beside profiler traces and when dumps are
//! missing, cut off or from two jobs.

use std::path::Path;

use ccl_bench::model::flight::CallState;
use ccl_bench::synth::flight::{hang_sample, Call, FrRun, HANG_SAMPLE};

use crate::support::{run, stderr, stdout, write_ranks};

fn sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("trace_collection")
        .join(HANG_SAMPLE)
}

fn json(dir: &Path) -> (serde_json::Value, Option<i32>) {
    let o = run(&["hang", dir.to_str().unwrap(), "--format", "json"]);
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (doc, o.status.code())
}

/// The bundled dumps are the ones the generator writes.
#[test]
fn the_bundled_hang_sample_is_current() {
    let run = hang_sample();
    for r in run.ranks() {
        let on_disk = std::fs::read(sample().join(format!("nccl_trace_rank_{r}"))).unwrap();
        assert!(
            on_disk == run.pickle(r),
            "rank {r} differs: rerun `cargo run --example gen_sample`"
        );
    }
}

#[test]
fn the_bundled_hang_names_rank_5_and_exits_1() {
    let o = run(&["hang", sample().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(
            "HANG  rank(s) 5 never called _allgather_base #44 of group 0 (default_pg); 7 rank(s) wait in it\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("  waiting in it:         0-4,6-7 (started)"),
        "{out}"
    );
    assert!(out.contains("      backward  /work/train.py:298"), "{out}");
    assert!(out.contains("      forward  /work/train.py:212"), "{out}");
    let (doc, code) = json(&sample());
    assert_eq!(code, Some(1));
    let f = &doc["findings"][0];
    assert_eq!(f["seq"], 44);
    assert_eq!(f["missing"], serde_json::json!([5]));
    assert_eq!(doc["ranks"][0]["rank"], 5);
}

/// A folder of dumps alone, opened without a terminal, prints what the UI
/// would open on (the Hang tab), not a table of metrics none of which apply.
#[test]
fn a_folder_of_dumps_alone_prints_the_verdict_when_piped() {
    let dir = sample();
    let o = run(&[dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let hang = run(&["hang", dir.to_str().unwrap()]);
    assert_eq!(stdout(&o), stdout(&hang));
    let o = run(&[dir.to_str().unwrap(), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["verdict"], "hang");
    assert_eq!(doc["findings"][0]["missing"], serde_json::json!([5]));
    // Asked for a metric, the folder is a trace like any other.
    let o = run(&[
        "--trace",
        dir.to_str().unwrap(),
        "--metric",
        "avg_step_time",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn a_finished_run_exits_0_and_no_dumps_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut fr = FrRun::new(2);
    fr.call(&[0, 1], &Call::all_reduce("0", 64));
    fr.write(dir.path(), true).unwrap();
    let (doc, code) = json(dir.path());
    assert_eq!((doc["verdict"].as_str(), code), (Some("none"), Some(0)));

    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu");
    let o = run(&["hang", traces.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no NCCL Flight Recorder dumps here"),
        "{}",
        stderr(&o)
    );
}

/// Dumps beside the profiler traces: the metrics are as without them, and
/// `hang` reads only the dumps.
#[test]
fn dumps_beside_profiler_traces_change_no_metric() {
    let ranks = ccl_bench::synth::training_run(&ccl_bench::synth::samples()[0].1);
    let dir = write_ranks(&ranks);
    let metrics = |d: &Path| {
        let o = run(&[
            "--trace",
            d.to_str().unwrap(),
            "--metrics",
            "--format",
            "json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).replace(d.to_str().unwrap(), "DIR")
    };
    let before = metrics(dir.path());
    hang_sample().write(dir.path(), false).unwrap();
    assert_eq!(metrics(dir.path()), before);
    let (doc, code) = json(dir.path());
    assert_eq!((doc["dumps"].as_u64(), code), (Some(8), Some(1)));
}

/// Rank 2 died without a dump, rank 1's was cut off mid-write, and a second
/// job's dumps (another prefix) sit beside them.
#[test]
fn missing_cut_off_and_foreign_dumps_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut fr = FrRun::new(4);
    for _ in 0..30 {
        fr.call(&[0, 1, 2, 3], &Call::all_reduce("0", 64));
    }
    fr.call(
        &[0, 1, 3],
        &Call::all_reduce("0", 64).state(CallState::Started),
    );
    fr.write(dir.path(), false).unwrap();
    std::fs::remove_file(dir.path().join("nccl_trace_rank_2")).unwrap();
    let one = dir.path().join("nccl_trace_rank_1");
    let bytes = std::fs::read(&one).unwrap();
    std::fs::write(&one, &bytes[..bytes.len() / 2]).unwrap();
    let other = FrRun::new(2);
    std::fs::write(dir.path().join("job2_trace_0"), other.pickle(0)).unwrap();
    let (doc, code) = json(dir.path());
    assert_eq!(code, Some(1));
    assert_eq!(doc["no_dump"], serde_json::json!([2]));
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings.contains("read the 3 named nccl_trace_rank_N; not read: job2_trace_ (1 file)"),
        "{warnings}"
    );
    assert!(
        warnings.contains("nccl_trace_rank_1: cut off"),
        "{warnings}"
    );
    let f = &doc["findings"][0];
    assert_eq!(f["no_dump"], serde_json::json!([2]));
    // Rank 1's cut-off dump lost #31: unknown, not missing.
    assert_eq!(f["seq"], 31);
    assert!(
        doc["headline"]
            .as_str()
            .unwrap()
            .contains("rank(s) 2 left no dump"),
        "{doc}"
    );
}

#[test]
fn a_file_that_is_not_a_dump_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nccl_trace_rank_0");
    // A pickle with the keys but not a dict: refused, named, no panic.
    std::fs::write(&f, b"\x80\x02]q\x00(X\x09\x00\x00\x00pg_statusq\x01e.").unwrap();
    let o = run(&["hang", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("nccl_trace_rank_0"), "{}", stderr(&o));
}

/// 1,024 ranks (200 entries each; `scripts/bench_hang.sh` times 2,000):
/// rank 700 never enters the last all-reduce of its tensor-parallel group of
/// 8, while every other group's last all-reduce is in flight.
#[test]
fn a_thousand_ranks() {
    let mut fr = FrRun::new(1024);
    for g in 0..128u32 {
        fr.group(&format!("{}", g + 1), "tp", (g * 8..g * 8 + 8).collect());
    }
    for _ in 0..199 {
        for g in 0..128u32 {
            let members: Vec<u32> = (g * 8..g * 8 + 8).collect();
            fr.call(&members, &Call::all_reduce(&format!("{}", g + 1), 64));
        }
    }
    for g in 0..128u32 {
        let members: Vec<u32> = (g * 8..g * 8 + 8).filter(|&r| r != 700).collect();
        fr.call(
            &members,
            &Call::all_reduce(&format!("{}", g + 1), 64).state(CallState::Started),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    fr.write(dir.path(), true).unwrap();
    let (doc, code) = json(dir.path());
    assert_eq!(code, Some(1));
    assert_eq!(doc["dumps"], 1024);
    // Every group but 700's (group 88, ranks 696-703) is still running.
    let findings = doc["findings"].as_array().unwrap();
    let stuck: Vec<_> = findings
        .iter()
        .filter(|f| !f["missing"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(findings.len(), 1, "{:?}", findings.len());
    assert_eq!(stuck[0]["group"], "88");
    assert_eq!(stuck[0]["seq"], 200);
    assert_eq!(stuck[0]["missing"], serde_json::json!([700]));
}

/// A dump that names one entry (with a stack of 2,000 frames) 50,000 times:
/// 20 bytes of pickle per 2,000 frames to walk. Refused as a bound, not
/// walked for minutes.
#[test]
fn a_dump_reusing_one_entry_over_and_over_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = b"\x80\x02}(X\x07\x00\x00\x00entries](}(X\x0e\x00\x00\x00profiling_nameX\x0f\x00\x00\x00nccl:all_reduceX\x11\x00\x00\x00collective_seq_idK\x01X\x06\x00\x00\x00frames](".to_vec();
    p.extend_from_slice(b"}(X\x04\x00\x00\x00nameX\x01\x00\x00\x00fuq\x00");
    p.extend(std::iter::repeat_n(*b"h\x00", 1999).flatten());
    p.extend_from_slice(b"euq\x01");
    p.extend(std::iter::repeat_n(*b"h\x01", 49_999).flatten());
    p.extend_from_slice(b"eu.");
    std::fs::write(dir.path().join("nccl_trace_rank_0"), &p).unwrap();
    let o = run(&["hang", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("nccl_trace_rank_0") && err.contains("within bounds"),
        "{err}"
    );
}
