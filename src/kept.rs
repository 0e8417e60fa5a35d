//! Metric results kept in a summary: what `--metrics` and `--metric` print
//! for it, under one set of options, so that a script asking for one metric
//! after another reads a small file instead of the tables. What a result
//! depends on (the key) and how it is written (the body) are decided here;
//! the store keeps the files (`summary::kept`).
//!
//! Served only while everything they depend on is what it was: the key
//! hashes the manifest and every input's entry (so every table's hash and,
//! through them, every trace's fingerprint), the rules file and card
//! applied, the load and metric options, the path as given, and this
//! binary. Opening the summary checks it against its traces first, as
//! always; a stale summary is not read, so neither are its results.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::metrics::{Measured, Outcome, METRICS};
use crate::model::trace::Offset;
use crate::model::warning::{Kind, Warning};
use crate::model::Ns;
use crate::report::{About, Row};
use crate::session::load::{Found, LoadOptions, LoadReport};

use crate::summary::{kept, manifest};

/// What a metrics run computed and printed, apart from the discovery notes
/// (which the open that serves them says afresh).
pub(crate) struct Results {
    pub warnings: Vec<Warning>,
    pub about: About,
    pub rows: Vec<Row>,
}

/// Everything a metrics run on `found` depends on besides the summary's own
/// files, as the command line gave it.
#[derive(Debug)]
pub(crate) struct Query<'a> {
    pub path: &'a Path,
    pub opts: &'a LoadOptions,
    pub rank: Option<u32>,
    pub metric_opts: &'a crate::metrics::Options,
}

/// The key of `q`'s results in the summary `found` reads; `None` when one
/// of the files it depends on cannot be read (then nothing is served).
pub(crate) fn key(found: &Found, q: &Query) -> Option<String> {
    let sum = found.summary.as_ref()?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut part = |label: &str, bytes: &[u8]| {
        h.update(label.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part("tool", env!("CARGO_PKG_VERSION").as_bytes());
    // A rebuilt binary may compute differently under the same version.
    let exe = std::env::current_exe().ok()?;
    let f = manifest::stat(&exe).ok()?;
    part("exe", format!("{} {}", f.size, f.mtime_ns).as_bytes());
    part("path", q.path.as_os_str().as_encoded_bytes());
    let o = q.opts;
    let formats: Vec<&str> = o.formats.iter().map(|f| f.name).collect();
    part(
        "options",
        format!(
            "{:?} {} {:?} {} {:?} {:?} {:?} {:?} {:?}",
            o.pick,
            o.align,
            o.classes,
            o.all_steps,
            o.card,
            o.cache,
            formats,
            q.rank,
            q.metric_opts
        )
        .as_bytes(),
    );
    let rules = crate::session::load::rules_path(q.path, &found.traces, o);
    for (label, file) in [("rules", rules), ("card", o.card.clone())] {
        if let Some(file) = file {
            part(label, &read_small(&file)?);
        }
    }
    // The manifest and every entry, as the open that checked them read them.
    part("summary", &sum.digest.to_le_bytes());
    Some(format!("{:016x}", h.digest()))
}

/// The results stored under `key` in `sum`, when there are any, they are
/// whole, their content is what was written for this key, and every value
/// passes the checks a fresh computation passes; anything else is a miss
/// (computed afresh), never an error and never served.
pub(crate) fn get(sum: &Path, key: &str) -> Option<Results> {
    let body = kept::get(sum, key)?;
    let s: Stored = serde_json::from_str(&body).ok()?;
    if s.key != key || s.rows.len() != METRICS.len() {
        return None;
    }
    let rows = METRICS
        .iter()
        .zip(s.rows)
        .map(|(metric, (name, o))| {
            let outcome: Outcome = o.into();
            (name == metric.name && plausible(metric, &outcome)).then_some(Row { metric, outcome })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Results {
        warnings: s.warnings,
        about: s.about.into(),
        rows,
    })
}

/// Whether a kept outcome is one a fresh computation could have printed:
/// its value passes the metric's bounds, and every figure is finite.
fn plausible(metric: &crate::metrics::Metric, o: &Outcome) -> bool {
    match o {
        Outcome::NotApplicable(_) => true,
        Outcome::Value(m) => {
            matches!(
                crate::metrics::plausible::check(metric, o.clone()),
                Outcome::Value(_)
            ) && m.per_rank.iter().all(|(_, v)| v.is_finite())
                && m.parts.iter().all(|(_, v)| v.is_finite())
        }
    }
}

impl Results {
    /// What to keep of a metrics run on `found` whose load reported
    /// `report`: its warnings past the discovery's notes (the next open says
    /// its own), without those saying that this process could not spill
    /// (its memory, not its results).
    pub(crate) fn of(found: &Found, report: &LoadReport, about: About, rows: Vec<Row>) -> Self {
        let w = &report.warnings;
        Self {
            warnings: w[found.discovery.notes.len().min(w.len())..]
                .iter()
                .filter(|w| w.kind != Kind::NotSpilled)
                .cloned()
                .collect(),
            about,
            rows,
        }
    }
}

/// Whether a command may keep results in the summary `sum`: only one in
/// the cache folder it named (`--cache`), the one place besides
/// `summarize`, `export` and `w` where reading a run writes.
pub(crate) fn in_cache(sum: &Path, opts: &LoadOptions) -> bool {
    opts.cache.as_deref().is_some_and(|c| sum.starts_with(c))
}

/// Stores `r` under `key`; whether it was (see `summary::kept::put`: a
/// summary that cannot be written to keeps none).
pub(crate) fn put(sum: &Path, key: &str, r: &Results) -> bool {
    let s = Stored {
        key: key.to_owned(),
        warnings: r.warnings.clone(),
        about: (&r.about).into(),
        rows: r
            .rows
            .iter()
            .map(|row| (row.metric.name.to_owned(), (&row.outcome).into()))
            .collect(),
    };
    serde_json::to_string(&s).is_ok_and(|body| kept::put(sum, key, &body))
}

/// The most of a rules file or card hashed into a key (a load reads less).
const MAX_FILE: u64 = 64 << 20;

fn read_small(path: &Path) -> Option<Vec<u8>> {
    // The user's own file (a rules file or card named on the command line,
    // or beside the traces): a link is followed, a FIFO is not waited on.
    let path = std::fs::canonicalize(path).ok()?;
    crate::confined::read_file(&path, MAX_FILE).ok()
}

// The stored form. Numbers are kept as their bits: a JSON decimal read back
// may differ in the last place, and a result served must be the one computed.

#[derive(Serialize, Deserialize)]
struct Stored {
    key: String,
    warnings: Vec<Warning>,
    about: AboutRec,
    rows: Vec<(String, OutcomeRec)>,
}

#[derive(Serialize, Deserialize)]
struct AboutRec {
    source: String,
    ranks: Vec<u32>,
    ops: usize,
    memory: Vec<u32>,
    et: Vec<u32>,
    /// (rank, offset, spread, samples).
    offsets: Vec<(u32, Ns, Ns, usize)>,
    steps: String,
    accelerator: String,
}

#[derive(Serialize, Deserialize)]
enum OutcomeRec {
    Value {
        value: u64,
        per_rank: Vec<(u32, u64)>,
        parts: Vec<(String, u64)>,
        note: Option<String>,
        fraction: Option<String>,
    },
    NotApplicable(String),
}

impl From<&About> for AboutRec {
    fn from(a: &About) -> Self {
        Self {
            source: a.source.clone(),
            ranks: a.ranks.clone(),
            ops: a.ops,
            memory: a.memory.clone(),
            et: a.et.clone(),
            offsets: a
                .offsets
                .iter()
                .map(|o| (o.rank, o.offset, o.spread, o.samples))
                .collect(),
            steps: a.steps.clone(),
            accelerator: a.accelerator.to_owned(),
        }
    }
}

impl From<AboutRec> for About {
    fn from(a: AboutRec) -> Self {
        Self {
            source: a.source,
            ranks: a.ranks,
            ops: a.ops,
            memory: a.memory,
            et: a.et,
            offsets: a
                .offsets
                .into_iter()
                .map(|(rank, offset, spread, samples)| Offset {
                    rank,
                    offset,
                    spread,
                    samples,
                })
                .collect(),
            steps: a.steps,
            accelerator: if a.accelerator == "TPU" { "TPU" } else { "GPU" },
        }
    }
}

impl From<&Outcome> for OutcomeRec {
    fn from(o: &Outcome) -> Self {
        match o {
            Outcome::Value(m) => Self::Value {
                value: m.value.to_bits(),
                per_rank: m.per_rank.iter().map(|&(r, v)| (r, v.to_bits())).collect(),
                parts: m
                    .parts
                    .iter()
                    .map(|(l, v)| (l.clone(), v.to_bits()))
                    .collect(),
                note: m.note.clone(),
                fraction: m.fraction.clone(),
            },
            Outcome::NotApplicable(why) => Self::NotApplicable(why.to_string()),
        }
    }
}

impl From<OutcomeRec> for Outcome {
    fn from(o: OutcomeRec) -> Self {
        match o {
            OutcomeRec::Value {
                value,
                per_rank,
                parts,
                note,
                fraction,
            } => Outcome::Value(Measured {
                value: f64::from_bits(value),
                per_rank: per_rank
                    .into_iter()
                    .map(|(r, v)| (r, f64::from_bits(v)))
                    .collect(),
                parts: parts
                    .into_iter()
                    .map(|(l, v)| (l, f64::from_bits(v)))
                    .collect(),
                note,
                fraction,
            }),
            OutcomeRec::NotApplicable(why) => Outcome::na(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_come_back_bit_for_bit() {
        let m = Outcome::Value(Measured {
            value: 0.1 + 0.2,
            per_rank: vec![(0, f64::NAN), (3, -0.0), (7, f64::INFINITY)],
            parts: vec![("all reduce".into(), 1e-300), ("p2p".into(), 5e-324)],
            note: Some("rank 3: 4 µs".into()),
            fraction: None,
        });
        let na = Outcome::NotApplicable("needs at least 2 ranks".into());
        for o in [m, na] {
            let text = serde_json::to_string(&OutcomeRec::from(&o)).unwrap();
            let back: Outcome = serde_json::from_str::<OutcomeRec>(&text).unwrap().into();
            // NaN != NaN: compare the bits through the stored form.
            assert_eq!(
                serde_json::to_string(&OutcomeRec::from(&back)).unwrap(),
                text
            );
            if let (Outcome::Value(a), Outcome::Value(b)) = (&o, &back) {
                assert_eq!(a.value.to_bits(), b.value.to_bits());
                assert!(b.per_rank[0].1.is_nan() && b.per_rank[1].1.is_sign_negative());
                assert_eq!(b.parts[1].1, 5e-324);
            } else {
                assert_eq!(o, back);
            }
        }
    }

    #[test]
    fn a_file_of_another_key_or_layout_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let about = About {
            source: "runs/x".into(),
            ranks: vec![0, 1],
            ops: 10,
            memory: vec![],
            et: vec![],
            offsets: vec![Offset {
                rank: 1,
                offset: Ns(-250),
                spread: Ns(3),
                samples: 8,
            }],
            steps: "steps 2-3".into(),
            accelerator: "TPU",
        };
        let rows = METRICS
            .iter()
            .map(|metric| Row {
                metric,
                outcome: Outcome::value(1.5),
            })
            .collect();
        let r = Results {
            warnings: vec![Warning::damaged("rank 1: late")],
            about,
            rows,
        };
        put(dir.path(), "00000000000000aa", &r);
        let got = get(dir.path(), "00000000000000aa").expect("kept");
        assert_eq!(got.warnings, r.warnings);
        assert_eq!(got.about.offsets[0].offset, Ns(-250));
        assert_eq!(got.rows.len(), METRICS.len());
        assert!(get(dir.path(), "00000000000000bb").is_none());
        // Stored under another key with its own key inside: a miss.
        kept::put(
            dir.path(),
            "00000000000000bb",
            &kept::get(dir.path(), "00000000000000aa").unwrap(),
        );
        assert!(get(dir.path(), "00000000000000bb").is_none());
    }

    /// The warning that this process could not spill is not kept: it says
    /// something of its memory, not of the run. The discovery's notes are
    /// not kept either (the next open says its own).
    #[test]
    fn what_is_kept_of_the_warnings() {
        let dir = tempfile::tempdir().unwrap();
        for (i, r) in crate::synth::two_rank_example().iter().enumerate() {
            std::fs::write(dir.path().join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
        }
        let opts = LoadOptions::default();
        let mut found = crate::session::find(dir.path(), &opts).unwrap();
        found.discovery.notes = vec![Warning::reading("a note")];
        let mut report = LoadReport {
            warnings: vec![
                Warning::reading("a note"),
                Warning::damaged("rank 1: cut off"),
            ],
            ..Default::default()
        };
        report.warn(Kind::NotSpilled, "collectives held in memory: no TMPDIR");
        report.warn(Kind::Rules, "rules applied");
        let r = Results::of(&found, &report, one_rank(), Vec::new());
        assert_eq!(
            r.warnings,
            [
                Warning::damaged("rank 1: cut off"),
                Warning::new(Kind::Rules, "rules applied")
            ]
        );
        assert_eq!(
            report.first(Kind::NotSpilled),
            Some("collectives held in memory: no TMPDIR")
        );
        assert_eq!(report.first(Kind::NotRebinned), None);
    }

    /// What a run of one rank covers.
    fn one_rank() -> About {
        About {
            source: "runs/x".into(),
            ranks: vec![0],
            ops: 1,
            memory: vec![],
            et: vec![],
            offsets: vec![],
            steps: String::new(),
            accelerator: "GPU",
        }
    }

    #[test]
    fn edited_or_implausible_results_are_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let key = "00000000000000cc";
        let r = |v: f64| Results {
            warnings: vec![],
            about: one_rank(),
            rows: METRICS
                .iter()
                .map(|metric| Row {
                    metric,
                    outcome: if metric.name == "communication_fraction" {
                        Outcome::value(v)
                    } else {
                        Outcome::na("n/a")
                    },
                })
                .collect(),
        };
        put(dir.path(), key, &r(0.25));
        assert!(get(dir.path(), key).is_some());
        let path = dir.path().join(format!("{}/{key}.json", kept::RESULTS));
        let text = std::fs::read_to_string(&path).unwrap();
        // The value's bits, edited by hand (0.25 -> 0.5): the seal breaks.
        let edited = text.replace(
            &0.25f64.to_bits().to_string(),
            &0.5f64.to_bits().to_string(),
        );
        assert_ne!(edited, text);
        std::fs::write(&path, edited).unwrap();
        assert!(get(dir.path(), key).is_none(), "an edited file is served");
        // Sealed as the tool seals, but a share of 512.5 %: not served either.
        put(dir.path(), key, &r(512.5));
        assert!(
            get(dir.path(), key).is_none(),
            "an implausible value is served"
        );
        put(dir.path(), key, &r(f64::NAN));
        assert!(get(dir.path(), key).is_none(), "NaN is served");
    }
}
