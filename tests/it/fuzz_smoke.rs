//! A short, deterministic run of the fuzz targets (`fuzz/`, run long with
//! `cargo fuzz`): every seed and every input that once crashed a reader
//! (`fuzz/regressions/<target>/`), then mutations of them. A panic names the
//! target and the input, to be saved under `fuzz/regressions/`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use ccl_bench::fuzz;

/// Mutations per input: enough to walk every reader's error paths in seconds.
const ROUNDS: usize = 2000;

/// xorshift64*: a fixed sequence, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that change a JSON or pickle document's structure or numbers.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"-",
    b"0",
    b"9",
    b"e999",
    b"-1",
    b"NaN",
    b"18446744073709551616",
    b"-9223372036854775808",
    b"1e308",
    b"null",
    b"true",
    b"\\u0000",
    b"\xff",
    b"\x00",
    b".",
    b"(",
    b"t",
    b"s",
    b"J\xff\xff\xff\x7f",
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 => v.truncate(at),
            1 if at < v.len() => v[at] ^= 1 << rng.below(8),
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 => {
                let end = (at + rng.below(16)).min(v.len());
                v.drain(at..end);
            }
            4 => {
                let end = (at + rng.below(64)).min(v.len());
                let copy = v[at..end].to_vec();
                let to = rng.below(v.len() + 1);
                v.splice(to..to, copy);
            }
            _ if at < v.len() => v[at] = rng.next() as u8,
            _ => {}
        }
    }
    v
}

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // Only the committed seeds, not what a local fuzzing run added.
            if dir == "corpus" && !name.starts_with("seed_") {
                continue;
            }
            out.push((format!("{dir}/{target}/{name}"), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no seeds for {target} under fuzz/corpus");
    out
}

fn smoke(target: &str, entry: fn(&[u8])) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    for (name, seed) in inputs(target) {
        let cases = std::iter::once(seed.clone())
            .chain((0..ROUNDS).map(|_| mutate(&mut rng, &seed)))
            .collect::<Vec<_>>();
        for (i, case) in cases.iter().enumerate() {
            if catch_unwind(AssertUnwindSafe(|| entry(case))).is_err() {
                panic!(
                    "fuzz target {target} panicked on mutation {i} of {name}; input: {:?}",
                    String::from_utf8_lossy(case)
                );
            }
        }
    }
}

#[test]
fn summary_ops_reader() {
    smoke("summary_ops", fuzz::summary_ops);
}

#[test]
fn summary_stats_reader() {
    smoke("summary_stats", fuzz::summary_stats);
}

#[test]
fn kineto_reader() {
    smoke("kineto", fuzz::kineto);
}

#[test]
fn nsys_json_reader() {
    smoke("nsys_json", fuzz::nsys_json);
}

#[test]
fn memory_snapshot_reader() {
    smoke("memory_snapshot", fuzz::memory_snapshot);
}

#[test]
fn xla_json_reader() {
    smoke("xla_json", fuzz::xla_json);
}

#[test]
fn xplane_reader() {
    smoke("xplane", fuzz::xplane);
}

#[test]
fn nsys_sqlite_reader() {
    smoke("nsys_sqlite", fuzz::nsys_sqlite);
}

#[test]
fn nsys_jax_reader() {
    smoke("nsys_jax", fuzz::nsys_jax);
}

#[test]
fn exec_trace_reader() {
    smoke("exec_trace", fuzz::exec_trace);
}

#[test]
fn workload_card_reader() {
    smoke("workload_card", fuzz::workload_card);
}

#[test]
fn class_rules_reader() {
    smoke("class_rules", fuzz::class_rules);
}

/// Each seed is an input its reader accepts, so fuzzing starts from the
/// shapes that reach the model and the metrics, not from a refusal.
#[test]
fn seeds_are_accepted() {
    use ccl_bench::read;
    let seed = |target: &str| inputs(target).remove(0).1;
    let p = Path::new("seed");
    let ops = |files: Vec<(Option<u32>, read::RankFile)>| {
        files
            .iter()
            .map(|f| f.1.timeline.ops.len())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ops(read::xla_json::read(&seed("xla_json")[..], p).unwrap()),
        [2, 1]
    );
    assert_eq!(ops(read::xplane::read(&seed("xplane"), p).unwrap()), [2]);
    let db = tempfile::tempdir().unwrap();
    let f = db.path().join("seed.sqlite");
    std::fs::write(&f, seed("nsys_sqlite")).unwrap();
    let files = read::nsys::read(&f, None, true).unwrap();
    assert_eq!(ops(files), [3]);
    let archive = std::io::Cursor::new(seed("nsys_jax"));
    assert_eq!(
        ops(read::nsys_jax::read_from(archive, p, None, true).unwrap()),
        [3, 3]
    );
    assert_eq!(
        read::exec_trace::read(&seed("exec_trace")[..], p)
            .unwrap()
            .0
            .colls
            .len(),
        2
    );
    let card = String::from_utf8(seed("workload_card")).unwrap();
    assert!(read::card::parse(&card, p).is_ok());
    let rules = String::from_utf8(seed("class_rules")).unwrap();
    let rules = ccl_bench::model::classify::UserRules::parse(&rules, p).unwrap();
    assert_eq!(rules.rules.len(), 2);
    let ops = seed("summary_ops");
    let batches = ccl_bench::summary::columns::decode(
        bytes::Bytes::from(ops.clone()),
        ops.len() as u64,
        "ops",
    )
    .unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 6);
}

/// The cargo-fuzz harness in `fuzz/` still compiles against the library (a
/// check, not a libFuzzer link: that needs a nightly toolchain and cargo-fuzz).
#[test]
fn fuzz_targets_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(["check", "--bins", "--quiet", "--manifest-path"])
        .arg(root.join("fuzz/Cargo.toml"))
        .arg("--target-dir")
        .arg(root.join("target/fuzz-check"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "fuzz targets do not build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
