//! What leaves ccl-bench besides text: the run as Arrow tables ([`tables`]),
//! written as Parquet ([`parquet`]) or handed to Python, and as one Chrome
//! trace file for Perfetto ([`perfetto`]).

pub mod parquet;
pub mod perfetto;
pub mod tables;

pub use tables::{Table, SCHEMA_VERSION, TABLES};

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::Ctx;
use crate::model::RankTimeline;
use crate::summary::pages::Pages;

/// Where an export finds each rank's every op.
#[derive(Clone, Copy)]
pub enum Ops<'a> {
    /// In the loaded timelines.
    Loaded,
    /// In a summary opened lean (its ranks hold their collectives only):
    /// read from each rank's ops table when its turn comes.
    Paged(&'a Pages),
}

impl<'a> Ops<'a> {
    /// Where `run`'s ops are, as the session held it.
    pub fn of(run: &'a crate::session::Run) -> Self {
        run.pages.as_ref().map_or(Self::Loaded, Self::Paged)
    }
}

impl Ops<'_> {
    /// Gives `f` each rank in scope as a whole timeline, in scope order.
    pub(crate) fn each_rank(
        self,
        ctx: &Ctx,
        f: &mut dyn FnMut(&RankTimeline) -> Result<(), String>,
    ) -> Result<(), String> {
        match self {
            Ops::Loaded => ctx.ranks.iter().try_for_each(|t| f(t)),
            // A paged rank is read once and handed over, not copied.
            Ops::Paged(_) => self.map_ranks(ctx, &|t| Ok(t), &mut |t| f(&t)),
        }
    }

    /// `make` of each rank in scope (given as a whole timeline: borrowed
    /// when loaded, read from its table when paged) to `take`, in scope
    /// order: as many ranks at once as there are threads, made in
    /// parallel, so that paged, memory holds their ops, not the run's.
    pub(crate) fn map_ranks<'t, T: Send>(
        self,
        ctx: &'t Ctx,
        make: &(dyn Fn(Cow<'t, RankTimeline>) -> Result<T, String> + Sync),
        take: &mut dyn FnMut(T) -> Result<(), String>,
    ) -> Result<(), String> {
        for chunk in ctx.ranks.chunks(rayon::current_num_threads().max(1)) {
            let made: Vec<Result<T, String>> = chunk
                .par_iter()
                .map(|&t| match self {
                    Ops::Loaded => make(Cow::Borrowed(t)),
                    Ops::Paged(pages) => make(Cow::Owned(pages.whole(ctx.trace, t)?)),
                })
                .collect();
            for m in made {
                take(m?)?;
            }
        }
        Ok(())
    }
}

/// Refuses an output that would replace a file of the run being read: one
/// of its inputs (a trace, or a summary's file), or the traces a summary
/// read stands for (`folder`: `out` is a folder of Parquet tables, each
/// checked). The export would change the run under later commands.
pub(crate) fn check_target(
    out: &Path,
    folder: bool,
    found: &crate::session::load::Found,
) -> Result<()> {
    let targets: Vec<PathBuf> = if folder {
        TABLES
            .iter()
            .map(|t| out.join(format!("{t}.parquet")))
            .collect()
    } else {
        vec![out.to_owned()]
    };
    let summary = found.summary.as_ref();
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    let sum_dir = summary.and_then(|s| canon(&s.path));
    let inputs = (found.discovery.inputs.iter().map(|i| i.path.as_path())).chain(
        summary
            .into_iter()
            .flat_map(|s| s.originals.iter().map(PathBuf::as_path)),
    );
    let inputs: Vec<PathBuf> = inputs.filter_map(canon).collect();
    for target in &targets {
        // A file about to be made is no input; a folder is refused later.
        let Some(t) = canon(target) else { continue };
        let inside_summary = sum_dir.as_ref().is_some_and(|d| t.starts_with(d));
        if inside_summary || inputs.contains(&t) {
            return Err(Error::Output {
                path: target.clone(),
                why: format!(
                    "is {} of the run being exported; write the export elsewhere",
                    if inside_summary {
                        "a file of the summary"
                    } else {
                        "an input"
                    }
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{
        self,
        load::{LoadOptions, Progress},
    };
    use crate::synth::{training_run, RunShape};

    /// A rank read from its summary's ops table holds what the rank loaded
    /// whole holds: every op, on the aligned clock, its collectives with
    /// their metadata.
    #[test]
    fn a_paged_rank_is_the_rank_loaded_whole() {
        let dir = tempfile::tempdir().unwrap();
        let traces = dir.path().join("run");
        std::fs::create_dir(&traces).unwrap();
        let shape = RunShape {
            ranks: 4,
            straggler: Some(2),
            ..RunShape::default()
        };
        for (i, mut r) in training_run(&shape).into_iter().enumerate() {
            // Rank 1 on a host whose clock reads 5 ms ahead: aligned back.
            if i == 1 {
                r.clock_ahead(5_000.0);
            }
            std::fs::write(traces.join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
        }
        let sum = dir.path().join("run.sum");
        crate::summary::summarize(
            &traces,
            &crate::summary::Options {
                out: sum.clone(),
                shard: Default::default(),
                only: Vec::new(),
                pick: Default::default(),
                formats: crate::formats::FORMATS,
            },
        )
        .unwrap();
        let opts = LoadOptions::default();
        let open = |need| session::open(&sum, &opts, need, &Progress::default()).unwrap();
        let lean = open(session::Need::Listing);
        let pages = lean.pages.as_ref().expect("a summary with pages");
        let whole = open(session::Need::EveryOp).trace;
        // Clocks aligned: the pages' ops are moved as the whole load's.
        assert!(whole.offsets.is_some());
        let ctx = lean.ctx(None).unwrap();
        let mut seen = Vec::new();
        Ops::Paged(pages)
            .each_rank(&ctx, &mut |t| {
                let w = whole.rank(t.rank).unwrap();
                assert_eq!(t.ops.len(), w.ops.len(), "rank {}", t.rank);
                assert!(!t.comm_only);
                for (a, b) in t.ops.iter().zip(&w.ops) {
                    assert_eq!((a.start, a.dur, a.launch), (b.start, b.dur, b.launch));
                    assert_eq!(t.name(a.name), w.name(b.name));
                    assert_eq!(t.coll_meta(a), w.coll_meta(b));
                }
                assert!(t.ops.iter().any(|o| t.coll_meta(o).is_some()));
                seen.push(t.rank);
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, [0, 1, 2, 3]);
    }
}
