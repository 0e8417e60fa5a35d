//! The clock check's measurements (each rank's offset and drift against the
//! first rank), and keeping them in a summary. They depend on the
//! summary's collectives alone, not on the question asked, and on a large
//! run the drift fit is a fifth of opening a summary: `summarize` keeps
//! them beside its results, and an open of the same summary, binary and
//! load options reads them back instead of fitting again.

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::clock::{self, Drift, Measured};
use crate::model::collectives::{self, Instances};
use crate::model::time::in_range;
use crate::model::trace::Offset;
use crate::model::{Ns, Trace};

/// Each rank's clock against the first rank's, indexed like `trace.ranks`,
/// before the shift: its offset as measured (before `collectives::trusted`
/// judges it) and what its samples say of its rate (none for the first
/// rank, or without samples).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClockCheck {
    pub offsets: Vec<Offset>,
    pub measured: Vec<Option<Measured>>,
}

impl ClockCheck {
    /// Measured from the collectives `inst` matched in `trace`: each rank's
    /// samples made once for both, ranks in parallel (the drift fit is
    /// quadratic in them).
    pub(crate) fn of(trace: &Trace, inst: &Instances) -> Self {
        let ends = clock::ref_ends(trace, inst);
        let (offsets, measured) = (0..trace.ranks.len())
            .into_par_iter()
            .map(|i| {
                let s = clock::samples_of(&trace.ranks[i], &ends);
                let offset = collectives::offset_of(trace.ranks[i].rank, &s);
                (offset, (i > 0).then(|| clock::measure(&s)).flatten())
            })
            .unzip();
        Self { offsets, measured }
    }
}

/// The file of the results folder the check is kept in.
const FILE: &str = "clock-check";

/// The check kept in the summary `sum` under `key` (see
/// `load::clock_key`), for `trace` as loaded from it; `None` (measure
/// afresh) when there is none, it was made for another summary, binary or
/// load, or any value is not one a measurement of `trace` gives.
pub(crate) fn kept(sum: &Path, key: &str, trace: &Trace) -> Option<ClockCheck> {
    let body = crate::summary::kept::get_shared(sum, FILE, key)?;
    let stored: Stored = serde_json::from_str(&body).ok()?;
    stored.check(trace)
}

/// Keeps `check` in the summary `sum` under `key` (see [`kept`]); whether
/// it was kept.
pub(crate) fn keep(sum: &Path, key: &str, check: &ClockCheck) -> bool {
    use crate::summary::kept::{get_shared, put_shared};
    // An open that read it back keeps it as it is.
    serde_json::to_string(&Stored::of(check)).is_ok_and(|body| {
        get_shared(sum, FILE, key).as_deref() == Some(&body) || put_shared(sum, FILE, key, &body)
    })
}

/// What the check depends on besides the summary's own files (`digest`):
/// the binary (a rebuilt one may measure differently) and `options`, those
/// of the load that choose the ops read.
pub(crate) fn key(digest: u64, options: &str) -> Option<String> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let exe = crate::summary::manifest::stat(&std::env::current_exe().ok()?).ok()?;
    for part in [
        env!("CARGO_PKG_VERSION").to_owned(),
        format!("{} {}", exe.size, exe.mtime_ns),
        options.to_owned(),
        format!("{digest:016x}"),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Some(format!("{:016x}", h.digest()))
}

/// The check as kept: times in ns, a drift's rate as its float's bits (read
/// back exactly).
#[derive(Serialize, Deserialize)]
struct Stored {
    ranks: Vec<RankRec>,
}

#[derive(Serialize, Deserialize)]
struct RankRec {
    rank: u32,
    offset: i64,
    spread: i64,
    samples: usize,
    measured: Option<MeasuredRec>,
}

#[derive(Serialize, Deserialize)]
struct MeasuredRec {
    spread: i64,
    drift: Option<(u64, i64, i64)>,
}

impl Stored {
    fn of(c: &ClockCheck) -> Self {
        let ranks = (c.offsets.iter().zip(&c.measured))
            .map(|(o, m)| RankRec {
                rank: o.rank,
                offset: o.offset.get(),
                spread: o.spread.get(),
                samples: o.samples,
                measured: m.map(|m| MeasuredRec {
                    spread: m.spread.get(),
                    drift: m
                        .drift
                        .map(|d| (d.ppm.to_bits(), d.change.get(), d.span.get())),
                }),
            })
            .collect();
        Stored { ranks }
    }

    /// The check, when every value is one measuring `trace` can give: a
    /// rank each, in order; times in range, spreads not negative; samples
    /// no more than the rank's ops, the offset and the rate from the same
    /// ones; a rate for a rank past the first only, finite, and its change
    /// the one its rate makes over its span.
    fn check(self, trace: &Trace) -> Option<ClockCheck> {
        if self.ranks.len() != trace.ranks.len() {
            return None;
        }
        let time = |v: i64| Some(Ns(v)).filter(|&t| in_range(t));
        let length = |v: i64| time(v).filter(|t| *t >= Ns::ZERO);
        let mut c = ClockCheck {
            offsets: Vec::with_capacity(self.ranks.len()),
            measured: Vec::with_capacity(self.ranks.len()),
        };
        for (i, (r, t)) in self.ranks.into_iter().zip(&trace.ranks).enumerate() {
            if r.rank != t.rank || r.samples > t.ops.len() {
                return None;
            }
            c.offsets.push(Offset {
                rank: r.rank,
                offset: time(r.offset)?,
                spread: length(r.spread)?,
                samples: r.samples,
            });
            // The first rank has no rate against itself; any other has one
            // from any sample.
            let measured = match r.measured {
                None if i > 0 && r.samples > 0 => return None,
                None => None,
                Some(_) if i == 0 || r.samples == 0 => return None,
                Some(m) => Some(Measured {
                    samples: r.samples,
                    spread: length(m.spread)?,
                    drift: match m.drift {
                        None => None,
                        Some((bits, change, span)) => {
                            let ppm = f64::from_bits(bits);
                            let span = length(span)?;
                            let change = time(change)?;
                            let made = Ns::rounded(ppm * 1e-6 * span.as_f64());
                            if !ppm.is_finite() || made != change {
                                return None;
                            }
                            Some(Drift { ppm, change, span })
                        }
                    },
                }),
            };
            c.measured.push(measured);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::load::{clock_key, Found, LoadOptions};
    use crate::session::{find, open_found, Need};
    use crate::synth::{training_run, RunShape};

    /// A summary of 4 ranks, rank 2 on a clock 3 ms ahead.
    fn summarized() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ranks = training_run(&RunShape {
            ranks: 4,
            steps: 4,
            ..RunShape::default()
        });
        for (r, t) in ranks.iter().enumerate() {
            let mut v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
            for e in v["traceEvents"].as_array_mut().unwrap() {
                if let (2, Some(x)) = (r, e["ts"].as_f64()) {
                    e["ts"] = serde_json::json!(x + 3000.0);
                }
            }
            let path = dir.path().join(format!("rank{r}_trace.json"));
            std::fs::write(path, v.to_string()).unwrap();
        }
        let sum = dir.path().join("run.sum");
        let opts = crate::summary::Options {
            out: sum.clone(),
            shard: Default::default(),
            only: Vec::new(),
            pick: Default::default(),
            formats: crate::formats::FORMATS,
        };
        crate::summary::summarize(&dir.path().join("."), &opts).unwrap();
        (dir, sum)
    }

    fn opened(sum: &Path) -> (Found, crate::session::Run) {
        let opts = LoadOptions::default();
        let found = find(sum, &opts).unwrap();
        let run = open_found(sum, &found, &opts, Need::Figures, &Default::default()).unwrap();
        (found, run)
    }

    /// A kept check is what the open applies: planted with rank 2 at 2 ms
    /// rather than the 3 ms measured, the open moves rank 2 by 2 ms.
    #[test]
    fn an_open_applies_the_kept_check() {
        let (_dir, sum) = summarized();
        let opts = LoadOptions::default();
        let (found, run) = opened(&sum);
        let measured = run.clock.clone().unwrap();
        let shift = |run: &crate::session::Run| run.trace.offsets.as_ref().unwrap()[2].offset;
        assert_eq!(shift(&run), Ns(-3_000_000));
        let (at, key) = clock_key(&sum, &found, &opts).unwrap();
        assert_eq!(at, sum);
        assert!(kept(&sum, &key, &run.trace).is_none());
        assert!(keep(&sum, &key, &measured));
        assert_eq!(kept(&sum, &key, &run.trace), Some(measured.clone()));
        let mut planted = measured;
        planted.offsets[2].offset = Ns(-2_000_000);
        assert!(keep(&sum, &key, &planted));
        let (_, again) = opened(&sum);
        assert_eq!(shift(&again), Ns(-2_000_000));
        assert_eq!(again.clock, Some(planted));
        // Other load options: another key, measured afresh.
        let every = LoadOptions {
            all_steps: true,
            ..LoadOptions::default()
        };
        let (_, other) = clock_key(&sum, &found, &every).unwrap();
        assert_ne!(key, other);
    }

    /// Values no measurement of the trace gives make the kept check a miss.
    #[test]
    fn implausible_kept_values_are_a_miss() {
        let (_dir, sum) = summarized();
        let (_, run) = opened(&sum);
        let c = run.clock.clone().unwrap();
        assert_eq!(Stored::of(&c).check(&run.trace), Some(c.clone()));
        let drifting = Measured {
            samples: c.offsets[1].samples,
            spread: Ns(10),
            drift: Some(Drift {
                ppm: 200.0,
                change: Ns(20_000),
                span: Ns(100_000_000),
            }),
        };
        let mut with_drift = c.clone();
        with_drift.measured[1] = Some(drifting);
        assert_eq!(
            Stored::of(&with_drift).check(&run.trace),
            Some(with_drift.clone())
        );
        type Edit = Box<dyn Fn(&mut Stored)>;
        let edits: Vec<Edit> = vec![
            Box::new(|s| {
                s.ranks.pop();
            }),
            Box::new(|s| s.ranks.swap(1, 2)),
            Box::new(|s| s.ranks[1].offset = i64::MAX),
            Box::new(|s| s.ranks[1].spread = -1),
            Box::new(|s| s.ranks[1].samples = usize::MAX),
            Box::new(|s| s.ranks[0].measured = s.ranks[1].measured.take()),
            Box::new(|s| s.ranks[1].measured = None),
            Box::new(|s| s.ranks[1].measured.as_mut().unwrap().spread = -5),
            Box::new(|s| {
                s.ranks[1].measured.as_mut().unwrap().drift = Some((f64::NAN.to_bits(), 0, 1))
            }),
            Box::new(|s| {
                s.ranks[1].measured.as_mut().unwrap().drift =
                    Some((200f64.to_bits(), 20_001, 100_000_000))
            }),
            Box::new(|s| {
                s.ranks[1].measured.as_mut().unwrap().drift =
                    Some((200f64.to_bits(), 20_000, -100_000_000))
            }),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut s = Stored::of(&with_drift);
            edit(&mut s);
            assert!(s.check(&run.trace).is_none(), "edit {i} was taken");
        }
    }
}
