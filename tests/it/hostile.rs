//! Hostile inputs, generated here: small files that claim huge numbers, files
//! beside the traces that only annotate the run, names built to fool the
//! sniffing. Each case runs the binary under an address-space and CPU-time
//! limit (where `prlimit` exists) and checks the exit code, that the message
//! names the file, and that the input folder is left as it was.

use std::path::Path;
use std::process::{Command, Output};

use ccl_bench::synth::two_rank_example;

use crate::support::{assert_close, stderr, stdout};

/// 2 GiB of address space and 20 s of CPU: generous for these inputs, small
/// enough that a claimed size turned into an allocation, or a quadratic
/// loop, fails the test instead of the machine.
const LIMITS: [&str; 2] = ["--as=2147483648", "--cpu=20"];

fn bounded(args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_ccl-bench");
    let limited = Path::new("/usr/bin/prlimit").exists();
    let mut cmd = if limited {
        let mut c = Command::new("/usr/bin/prlimit");
        c.args(LIMITS).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let o = cmd.args(args).output().expect("ccl-bench runs");
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        o.status.code().is_some(),
        "killed by a signal (over the limits?): {err}"
    );
    o
}

/// [`bounded`], checking the exit code; returns stdout and stderr.
fn exits(args: &[&str], code: i32) -> (String, String) {
    let o = bounded(args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    (out, err)
}

/// `--metric total_kernel_time` on `path`, which must succeed: stdout and stderr.
fn kernel_time(path: &Path) -> (String, String) {
    exits(
        &[
            "--trace",
            path.to_str().unwrap(),
            "--metric",
            "total_kernel_time",
        ],
        0,
    )
}

/// A fresh folder holding rank 0 of the two-rank example.
fn rank0_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rank0_trace.json"),
        two_rank_example()[0].to_json(),
    )
    .unwrap();
    dir
}

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.display().to_string(),
                std::fs::read(&p).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The two-rank example with `distributedInfo` rewritten.
fn ranks_claiming(dir: &Path, claims: &[(u64, u64)]) {
    for (i, (rank, world)) in claims.iter().enumerate() {
        let mut v: serde_json::Value =
            serde_json::from_str(&two_rank_example()[i].to_json()).unwrap();
        v["distributedInfo"] = serde_json::json!({"rank": rank, "world_size": world});
        std::fs::write(dir.join(format!("rank{i}_trace.json")), v.to_string()).unwrap();
    }
}

#[test]
fn a_claimed_world_of_four_billion_is_counted_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    ranks_claiming(dir.path(), &[(0, 4_294_967_295), (1, 4_294_967_295)]);
    let (_, err) = kernel_time(dir.path());
    // Two present of a sample: only holes below the highest rank count, none here.
    assert!(!err.contains("missing"), "{err}");
    // Half or more present would list holes up to the world size: counted.
    ranks_claiming(dir.path(), &[(0, 3), (4_000_000_000, 3)]);
    let (_, err) = exits(&["--trace", dir.path().to_str().unwrap(), "--metrics"], 0);
    assert!(err.contains("missing: 1, 2;"), "{err}");
    assert!(
        err.contains("rank1_trace.json: rank 4000000000 is not below the world size 3"),
        "{err}"
    );
    ranks_claiming(
        dir.path(),
        &[(0, 4_294_967_295), (4_294_967_294, 4_294_967_295)],
    );
    let o = bounded(&["--trace", dir.path().to_str().unwrap(), "--metrics"]);
    let err = stderr(&o);
    assert!(
        err.contains(
            "missing: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 4294967277 more"
        ),
        "{err}"
    );
}

#[test]
fn files_that_only_annotate_the_run_never_stop_it() {
    let dir = tempfile::tempdir().unwrap();
    for (i, r) in two_rank_example().iter().enumerate() {
        std::fs::write(dir.path().join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
    }
    // An unrelated pickle, a JSON graph that looks like an execution trace,
    // and a snapshot that is not one.
    std::fs::write(dir.path().join("model.pkl"), b"\x80\x04K\x01.").unwrap();
    std::fs::write(
        dir.path().join("graph.json"),
        r#"{"schema": "dot", "nodes": [{"id": 1}, {"label": "x"}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("rank0_memory_snapshot.pickle"),
        b"not a pickle",
    )
    .unwrap();
    let before = contents(dir.path());
    let (out, err) = kernel_time(dir.path());
    assert_close(out.trim().parse().unwrap(), 345e-6, &err);
    for name in ["model.pkl", "graph.json", "rank0_memory_snapshot.pickle"] {
        assert!(
            err.lines()
                .any(|l| l.contains(name) && l.contains("left out")),
            "{name}: {err}"
        );
    }
    assert_eq!(contents(dir.path()), before);
}

#[test]
fn a_large_jobs_long_header_and_device_names_still_read_as_pytorch() {
    // A 2,048-GPU job lists every process group before its events: here
    // ~120 KB of them, so "traceEvents" starts past the 64 KiB sniffed.
    let mut v: serde_json::Value = serde_json::from_str(&two_rank_example()[0].to_json()).unwrap();
    let groups: Vec<serde_json::Value> = (0..3000)
        .map(|g| serde_json::json!({"pg_name": format!("{g}"), "ranks": [g, g + 1, g + 2]}))
        .collect();
    v["distributedInfo"]["pg_config"] = serde_json::Value::Array(groups);
    // A process named like an XLA device must not send it to the XLA reader.
    v["traceEvents"].as_array_mut().unwrap().insert(
        0,
        serde_json::json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "/device:GPU:0"}}),
    );
    let text = v.to_string();
    assert!(text.find("\"traceEvents\"").unwrap() > 70 * 1024);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank0_trace.json");
    std::fs::write(&f, &text).unwrap();
    for path in [dir.path(), f.as_path()] {
        let (out, err) = kernel_time(path);
        assert_close(out.trim().parse().unwrap(), 145e-6, &err);
    }
    let o = bounded(&["--trace", dir.path().to_str().unwrap(), "--inputs"]);
    assert!(
        stdout(&o).contains("PyTorch profiler trace rank 0"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn control_characters_never_reach_the_terminal_raw() {
    // A kernel name that retitles the window and clears the screen, in a
    // folder beside an empty rank file whose name carries ESC itself.
    let dir = tempfile::tempdir().unwrap();
    let evil = "evil\u{1b}]0;pwned\u{7}\u{9b}2J\u{1b}[31m";
    let trace = serde_json::json!({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": evil, "pid": 0, "tid": 7, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 8, "ts": 0, "dur": 1}
    ]});
    std::fs::write(dir.path().join("rank0_trace.json"), trace.to_string()).unwrap();
    std::fs::write(dir.path().join("rank1\u{1b}[2J_trace.json"), "").unwrap();
    let path = dir.path().to_str().unwrap();
    for args in [
        &["--metrics"][..],
        &["--metrics", "--format", "csv"],
        &["--metrics", "--format", "json"],
        &["--inputs"],
        &["--metric", "dominant_kernel_concentration"],
    ] {
        let mut all = vec!["--trace", path];
        all.extend_from_slice(args);
        let o = bounded(&all);
        for (what, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{args:?}: raw control characters on {what}: {text:?}"
            );
        }
        assert!(o.status.code().is_some());
    }
    // The name is still there to read, escaped; JSON stays valid and keeps it.
    let o = bounded(&["--trace", path, "--metrics"]);
    assert!(
        stdout(&o).contains("evil\\u001b]0;pwned\\u0007\\u009b2J"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("rank1\\u001b[2J_trace.json"),
        "{}",
        stderr(&o)
    );
    let o = bounded(&["--trace", path, "--metrics", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.to_string().contains("pwned"), "{v}");
    let notes: Vec<String> = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["note"].as_str().map(str::to_owned))
        .collect();
    assert!(notes.iter().any(|n| n.contains(evil)), "{notes:?}");
}

#[test]
fn class_rules_and_options_are_bounded() {
    let dir = rank0_dir();
    let path = dir.path().to_str().unwrap();
    let rules = dir.path().join("rules.toml");
    let rules_arg = rules.to_str().unwrap();
    let run_with_rules = |text: &str| {
        std::fs::write(&rules, text).unwrap();
        bounded(&[
            "--trace",
            path,
            "--classes",
            rules_arg,
            "--metric",
            "total_kernel_time",
        ])
    };
    // 2,000 heavy rules: refused before any is compiled.
    let many: String = (0..2000)
        .map(|i| format!("[[rule]]\nclass = \"gemm\"\npattern = \"(x{i}{{50}}){{50}}\"\n"))
        .collect();
    let o = run_with_rules(&many);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("2000 rules; at most 256"),
        "{}",
        stderr(&o)
    );
    // One pattern whose compiled form would be huge: refused by its size.
    let o = run_with_rules("[[rule]]\nclass = \"gemm\"\npattern = \"((a{100}){100}){100}\"\n");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("rule 1: bad pattern"), "{}", stderr(&o));
    // A pipe named as the rules file would block reading it: refused.
    let fifo = dir.path().join("fifo.toml");
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let (_, err) = exits(
            &[
                "--trace",
                path,
                "--classes",
                fifo.to_str().unwrap(),
                "--metrics",
            ],
            1,
        );
        assert!(err.contains("not a regular file"), "{err}");
    }
    // An image of 65535 × 65535 cells would be 206 GB drawn in memory.
    let svg = dir.path().join("out.svg");
    let o = bounded(&[
        "--trace",
        path,
        "--screenshot",
        svg.to_str().unwrap(),
        "--size",
        "65535x65535",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!svg.exists());
}

#[test]
fn tens_of_thousands_of_unmatched_async_collectives_load_in_linear_time() {
    // 40,000 `-start`s that never end and 40,000 `-done`s naming no start:
    // each done looked its start up among all pending ones (minutes).
    let mut events = vec![
        serde_json::json!({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}}),
        serde_json::json!({"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}}),
    ];
    for i in 0..40_000 {
        events.push(serde_json::json!({"ph": "X", "pid": 1, "tid": 3, "name": "ag-start", "ts": i, "dur": 0.5,
            "args": {"long_name": format!("%ag-start.{i} = (f32[2], f32[8]) all-gather-start(f32[2] %p)")}}));
        events.push(serde_json::json!({"ph": "X", "pid": 1, "tid": 3, "name": "ag-done", "ts": i, "dur": 0.5,
            "args": {"long_name": format!("%ag-done.{i} = f32[8] all-gather-done((f32[2], f32[8]) %other.{i})")}}));
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.trace.json");
    std::fs::write(&f, serde_json::json!({"traceEvents": events}).to_string()).unwrap();
    let o = bounded(&["--trace", f.to_str().unwrap(), "--metric", "coll_call_num"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "40000");
}

#[test]
fn odd_encodings_names_and_layouts_get_messages_that_name_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let json = two_rank_example()[0].to_json();
    // A UTF-8 byte order mark is skipped.
    std::fs::write(
        dir.path().join("rank0_trace.json"),
        format!("\u{feff}{json}"),
    )
    .unwrap();
    // UTF-16 is named as such.
    let utf16: Vec<u8> = std::iter::once(0xFEFFu16)
        .chain(json.encode_utf16())
        .flat_map(u16::to_le_bytes)
        .collect();
    std::fs::write(dir.path().join("rank1_trace.json"), utf16).unwrap();
    let (out, err) = exits(&["--trace", path, "--metric", "total_kernel_time"], 0);
    assert_close(out.trim().parse().unwrap(), 145e-6, &err);
    assert!(err.contains("rank1_trace.json: UTF-16 text"), "{err}");

    // Kernels written as begin/end pairs.
    let be = tempfile::tempdir().unwrap();
    std::fs::write(
        be.path().join("rank0_trace.json"),
        r#"{"traceEvents": [
            {"ph": "B", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0},
            {"ph": "E", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10}]}"#,
    )
    .unwrap();
    let o = bounded(&["--trace", be.path().to_str().unwrap(), "--metrics"]);
    assert!(
        stderr(&o).contains("1 begin/end event(s)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn many_unreadable_files_are_summarised_and_odd_folders_named() {
    let dir = rank0_dir();
    for r in 1..500 {
        std::fs::write(dir.path().join(format!("rank{r}_trace.json")), "").unwrap();
    }
    let (_, err) = kernel_time(dir.path());
    assert!(
        err.lines().count() < 20,
        "{} lines: {err}",
        err.lines().count()
    );
    assert!(
        err.contains("skipped 491 more file(s): empty file (0 bytes)"),
        "{err}"
    );

    // A name that is not UTF-8 is named, not passed over.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let odd = dir
            .path()
            .join(std::ffi::OsStr::from_bytes(b"rank\xff_trace.json"));
        std::fs::write(&odd, "{}").unwrap();
        let o = bounded(&["--trace", dir.path().to_str().unwrap(), "--metrics"]);
        assert!(
            stderr(&o).contains("its name is not UTF-8"),
            "{}",
            stderr(&o)
        );
    }

    // iteration_5 and iteration_05 are the same number: which one was meant?
    let run = tempfile::tempdir().unwrap();
    for k in ["iteration_5", "iteration_05"] {
        let d = run.path().join("profile_traces").join(k);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("rank0_trace.json"), two_rank_example()[0].to_json()).unwrap();
    }
    let (_, err) = exits(&["--trace", run.path().to_str().unwrap(), "--metrics"], 1);
    assert!(err.contains("are both iteration 5"), "{err}");
}

#[test]
fn a_small_gzip_expanding_into_one_huge_value_is_refused_with_its_place() {
    use std::io::Write;
    // 300 MB of one kernel name, compressed to under 1 MB.
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("rank0_trace.json.gz")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    gz.write_all(br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": ""#)
        .unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..300 {
        gz.write_all(&chunk).unwrap();
    }
    gz.write_all(br#"", "ts": 0, "dur": 1}]}"#).unwrap();
    gz.finish().unwrap();
    let (_, err) = exits(&["--trace", dir.path().to_str().unwrap(), "--metrics"], 1);
    assert!(err.contains("rank0_trace.json.gz"), "{err}");
    assert!(err.contains("one JSON value is over 256 MiB"), "{err}");
}

#[test]
fn an_nsys_export_that_computes_is_refused() {
    // A generated column is hidden from `table_info` and computed on every
    // read: here a 100 MB string per row.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("report.sqlite");
    let c = rusqlite::Connection::open(&f).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
         INSERT INTO StringIds VALUES (1, 'gemm');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (deviceId INTEGER, globalPid INTEGER,
             correlationId INTEGER, start INTEGER, end INTEGER, shortName INTEGER,
             streamId INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER,
             demangledName TEXT GENERATED ALWAYS AS (printf('%.*c', 100000000, 'x')) VIRTUAL);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (deviceId, globalPid, correlationId, start, end,
             shortName, streamId, gridX, gridY, gridZ) VALUES (0, 1, 1, 0, 10, 1, 7, 1, 1, 1);",
    )
    .unwrap();
    drop(c);
    let (_, err) = exits(&["--trace", f.to_str().unwrap(), "--metrics"], 1);
    assert!(
        err.contains("column demangledName of CUPTI_ACTIVITY_KIND_KERNEL is computed"),
        "{err}"
    );
}

#[test]
fn pickle_bombs_are_refused_before_decoding() {
    let dir = rank0_dir();
    let snap = dir.path().join("rank0_memory_snapshot.pickle");
    // A value paired with itself 64 times (2^64 values once copied), then
    // lists nested a million deep (a stack overflow, so an abort, before).
    let mut pairs = b"\x80\x02K\x01".to_vec();
    for _ in 0..64 {
        pairs.extend_from_slice(b"2\x86");
    }
    pairs.push(b'.');
    let mut deep = b"\x80\x02".to_vec();
    deep.extend(std::iter::repeat_n(b']', 1_000_000));
    deep.extend(std::iter::repeat_n(b'a', 999_999));
    deep.push(b'.');
    // A memo key of 2^28 in 9 bytes: a memo up to it took 4 GB.
    let key = b"\x80\x02Nr\xff\xff\xff\x0f.".to_vec();
    for (bytes, why) in [
        (pairs, "would decode to over"),
        (deep, "nested over 256 deep"),
        (key, "memo index out of range"),
    ] {
        std::fs::write(&snap, bytes).unwrap();
        let (_, err) = kernel_time(dir.path());
        assert!(
            err.contains("rank0_memory_snapshot.pickle") && err.contains(why),
            "{err}"
        );
    }
}

#[test]
fn a_second_event_array_replaces_the_first_as_json_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rank0_trace.json"),
        r#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "first", "pid": 0, "tid": 7, "ts": 0, "dur": 10}],
          "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "second", "pid": 0, "tid": 7, "ts": 0, "dur": 20}]}"#,
    )
    .unwrap();
    let (out, err) = kernel_time(dir.path());
    assert_close(out.trim().parse().unwrap(), 20e-6, &err);
    assert!(
        err.contains("a second event array at line 3, column 26")
            && err.contains("the 1 events of the first are left out"),
        "{err}"
    );
}

/// 64 MB of empty planes (2 bytes each on the wire) before one device
/// plane: read a plane at a time, under the 2 GiB limit (decoded at once,
/// the planes took 3.4 GB).
#[test]
fn an_xspace_of_millions_of_empty_planes_is_read_a_plane_at_a_time() {
    use ccl_bench::read::xplane::{XEvent, XEventMetadata, XLine, XPlane, XSpace};
    use prost::Message;
    let device = XSpace {
        planes: vec![XPlane {
            id: 1,
            name: "/device:GPU:0".into(),
            lines: vec![XLine {
                id: 1,
                name: "Stream #7(Kernel)".into(),
                timestamp_ns: 1_000,
                events: vec![XEvent {
                    metadata_id: 1,
                    offset_ps: 0,
                    duration_ps: 2_000_000,
                }],
            }],
            event_metadata: [(
                1,
                XEventMetadata {
                    id: 1,
                    name: "%fusion.1 = f32[8] fusion(f32[8] %a), kind=kLoop".into(),
                    display_name: String::new(),
                },
            )]
            .into_iter()
            .collect(),
        }],
        hostnames: vec![],
    }
    .encode_to_vec();
    // Field 1, length 0: an empty plane.
    let mut bytes = [0x0a, 0x00].repeat(32 << 20);
    bytes.extend_from_slice(&device);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.xplane.pb");
    std::fs::write(&path, bytes).unwrap();
    let (out, _) = kernel_time(&path);
    assert_close(out.trim().parse().unwrap(), 2e-6, "the one fusion");
}

/// An nsys JSON export of one process driving 512 GPUs, with 50,000
/// distinct NVTX range names: the names are held once for all the GPUs'
/// ranks (copied into each, they took 25.6 million strings).
#[test]
fn many_devices_of_one_process_share_its_nvtx_names() {
    use std::fmt::Write as _;
    let pid = 5i64 << 24;
    let mut text = String::from("{\"data\":[\"gemm_kernel\"]}\n");
    for d in 0..512 {
        let start = 1_000_000 + d * 10;
        writeln!(
            text,
            r#"{{"Type":79,"CudaEvent":{{"startNs":"{start}","endNs":"{}","correlationId":{d},"deviceId":{d},"streamId":"7","globalPid":"{pid}","kernel":{{"shortName":0,"demangledName":0,"gridX":1,"gridY":1,"gridZ":1}}}}}}"#,
            start + 2_000
        )
        .unwrap();
    }
    for i in 0..50_000 {
        let start = 1_000_000 + i * 3;
        writeln!(
            text,
            r#"{{"Type":59,"NvtxEvent":{{"Type":59,"Timestamp":"{start}","EndTimestamp":"{}","Text":"range {i}","GlobalTid":"{}"}}}}"#,
            start + 2,
            pid + 9
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report_nsys.json");
    std::fs::write(&path, text).unwrap();
    let (out, _) = kernel_time(&path);
    assert_close(
        out.trim().parse().unwrap(),
        512.0 * 2e-6,
        "512 kernels of 2 µs",
    );
}
