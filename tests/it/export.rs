//! `ccl-bench export`: Parquet tables read back, the Perfetto file parsed,
//! and a place that cannot be written is an error naming it.

use std::io::Read;

use ccl_bench::synth::late_pair;
use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::support::{corpus, run, stderr, write_ranks};

fn parquet_rows(path: &std::path::Path) -> (i64, String) {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let meta = r.metadata().file_metadata();
    let version = meta
        .key_value_metadata()
        .unwrap()
        .iter()
        .find(|kv| kv.key == "ccl_bench.schema_version")
        .and_then(|kv| kv.value.clone())
        .unwrap();
    (meta.num_rows(), version)
}

#[test]
fn parquet_tables_read_back() {
    let dir = write_ranks(&late_pair());
    let out = tempfile::tempdir().unwrap();
    let o = run(&[
        "export",
        dir.path().to_str().unwrap(),
        "--to",
        "parquet",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Two ranks, one op and one step each, one all-reduce with two members.
    for (table, rows) in [
        ("ops", 2),
        ("kernels", 2),
        ("collectives", 2),
        ("steps", 2),
        ("ranks", 2),
    ] {
        let (n, version) = parquet_rows(&out.path().join(format!("{table}.parquet")));
        assert_eq!((n, version.as_str()), (rows, "1"), "{table}");
    }
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
}

#[test]
fn perfetto_file_has_a_process_per_rank() {
    let Some(d) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("run.json.gz");
    let o = run(&[
        "export",
        d.to_str().unwrap(),
        "--to",
        "perfetto",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let procs = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .count();
    assert_eq!(procs, 8);
    // The straggler named in the file is the one --metric slowest_rank prints.
    let o = run(&["--trace", d.to_str().unwrap(), "--metric", "slowest_rank"]);
    let slowest: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert_eq!(doc["otherData"]["straggler_rank"].as_u64(), Some(slowest));
    assert!(events.iter().any(|e| e["cat"] == "wait"));
}

#[test]
fn unwritable_output_is_an_error_naming_it() {
    let dir = write_ranks(&late_pair());
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("taken");
    std::fs::write(&file, "x").unwrap();
    let o = run(&[
        "export",
        dir.path().to_str().unwrap(),
        "--to",
        "parquet",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("taken"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}

/// A Parquet file's rows as text, in order (batch and page boundaries,
/// and how each dictionary is laid out, left out).
fn parquet_text(path: &std::path::Path) -> Vec<String> {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    r.get_row_iter(None)
        .unwrap()
        .map(|row| row.unwrap().to_string())
        .collect()
}

fn export(from: &std::path::Path, to: &str, out: &std::path::Path) {
    export_with(from, to, out, &[]);
}

fn perfetto_events(p: &std::path::Path) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    doc["traceEvents"].clone()
}

fn export_with(from: &std::path::Path, to: &str, out: &std::path::Path, extra: &[&str]) {
    let mut args = vec![
        "export",
        from.to_str().unwrap(),
        "--to",
        to,
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}: {}", from.display(), stderr(&o));
}

/// Class rules and every step change what the map step made of the ops: a
/// summary opened so is still held lean and exported a rank at a time, its
/// ops reclassified as they are read, with the tables its traces give.
#[test]
fn a_summary_under_class_rules_exports_what_its_traces_export() {
    let Some(traces) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sum = tmp.path().join("run.sum");
    crate::corpus::summarize_into(&traces, &sum);
    let rules = tmp.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nclass = \"communication\"\npattern = \"elementwise\"\n\
         [[rule]]\nclass = \"memory\"\npattern = \"SendRecv\"\n",
    )
    .unwrap();
    let held = ccl_bench::session::open(
        &sum,
        &ccl_bench::load::LoadOptions {
            classes: Some(rules.clone()),
            all_steps: true,
            ..Default::default()
        },
        ccl_bench::session::Need::Listing,
        &ccl_bench::load::Progress::default(),
    )
    .unwrap();
    assert!(held.pages.is_some(), "held lean, its ops in pages");
    let rules = rules.to_str().unwrap();
    let plain = tmp.path().join("plain");
    export_with(&sum, "parquet", &plain, &[]);
    for extra in [
        &["--classes", rules][..],
        &["--classes", rules, "--all-steps"],
    ] {
        let (raw, summed) = (tmp.path().join("raw"), tmp.path().join("sum"));
        export_with(&traces, "parquet", &raw, extra);
        export_with(&sum, "parquet", &summed, extra);
        for table in ccl_bench::export::TABLES {
            let file = format!("{table}.parquet");
            let a = parquet_text(&raw.join(&file));
            assert!(
                a == parquet_text(&summed.join(&file)),
                "{extra:?}: {table} differs"
            );
            if table == "ops" {
                assert!(
                    a != parquet_text(&plain.join(&file)),
                    "the rules change the ops"
                );
            }
        }
        let (a, b) = (tmp.path().join("raw.json"), tmp.path().join("sum.json"));
        export_with(&traces, "perfetto", &a, extra);
        export_with(&sum, "perfetto", &b, extra);
        assert!(
            perfetto_events(&a) == perfetto_events(&b),
            "{extra:?}: Perfetto events differ"
        );
        for d in [raw, summed] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}

/// A summary is exported a rank at a time (its ranks opened lean, each
/// one's ops read from its table in turn) with the traces' tables and
/// Perfetto file.
#[test]
fn a_summary_exports_what_its_traces_export() {
    for rel in [
        "kineto/dlrm_8rank_v100",
        "nsys/h100_tiny_transformer",
        "xla/tf_profiler_gpu_multi_worker",
    ] {
        let Some(traces) = corpus(rel) else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let sum = tmp.path().join("run.sum");
        crate::corpus::summarize_into(&traces, &sum);
        let (raw, summed) = (tmp.path().join("raw"), tmp.path().join("sum"));
        export(&traces, "parquet", &raw);
        export(&sum, "parquet", &summed);
        for table in ccl_bench::export::TABLES {
            let file = format!("{table}.parquet");
            let (a, b) = (
                parquet_text(&raw.join(&file)),
                parquet_text(&summed.join(&file)),
            );
            assert!(table != "ops" || !a.is_empty(), "{rel}: no ops");
            assert!(a == b, "{rel}: {table} differs");
        }
        let (a, b) = (tmp.path().join("raw.json"), tmp.path().join("sum.json"));
        export(&traces, "perfetto", &a);
        export(&sum, "perfetto", &b);
        assert_eq!(
            perfetto_events(&a),
            perfetto_events(&b),
            "{rel}: Perfetto events differ"
        );
    }
}
