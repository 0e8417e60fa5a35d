use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ccl_bench::synth::RankTrace;

/// `../shared/corpus/<rel>`, or `None` (with a message) when the shared corpus is
/// not beside the checkout, as in a fresh clone.
pub fn corpus(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: {} absent (../shared/corpus is not beside the checkout)",
            p.display()
        );
        None
    }
}

pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ccl-bench"))
        .args(args)
        .output()
        .expect("ccl-bench runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes each rank as `rank{N}_trace.json` into a fresh temporary directory.
pub fn write_ranks(ranks: &[RankTrace]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, r) in ranks.iter().enumerate() {
        std::fs::write(dir.path().join(format!("rank{i}_trace.json")), r.to_json()).expect("write");
    }
    dir
}

pub fn assert_close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

/// `ccl-bench --trace PATH --metrics --format json`, parsed; `what` names the
/// run in the failure message.
pub fn metrics_doc(path: &Path, what: &str) -> serde_json::Value {
    metrics_said(path, what).0
}

/// [`metrics_doc`], and what the run said on stderr.
pub fn metrics_said(path: &Path, what: &str) -> (serde_json::Value, String) {
    let o = run(&[
        "--trace",
        path.to_str().unwrap(),
        "--metrics",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    (serde_json::from_str(&stdout(&o)).unwrap(), stderr(&o))
}

/// Every file under `dir` (recursively, links not followed) with its bytes.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            } else {
                out.push((p, Vec::new()));
            }
        }
    }
    out.sort();
    out
}

/// The bundled sample run (rank 5 straggles).
pub fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu")
}
