//! The questions the one-answer commands (`overview`, `stragglers`, `ops`,
//! `collectives`, `--metrics`) and the MCP server answer, each as its JSON
//! document, of a run however the session holds it. Both ask here, so an
//! agent reads what a script reads.

use anyhow::{anyhow, Result};
use serde_json::Value;

use crate::metrics::ranks::verdict;
use crate::model::classify::CollKind;
use crate::report;
use crate::session::Run;

/// The overview document (`report::overview`) of every rank of `run`.
pub(crate) fn overview(run: &Run) -> Result<Value> {
    let ctx = run.ctx(None).map_err(|e| anyhow!(e))?;
    let rows = report::overview::headline_rows(&ctx);
    let mut doc = report::overview::to_json(&ctx, &rows, &verdict(&ctx), run.warnings());
    // Flight Recorder dumps beside the traces: the hang verdict in brief
    // (the `hang` command and tool give every finding).
    if !run.trace.flight.is_empty() {
        let r = crate::metrics::hang::analyze(&run.trace.flight);
        doc["hang"] = serde_json::json!({
            "verdict": r.verdict,
            "headline": r.headline,
            "dumps": r.dumps,
        });
    }
    Ok(doc)
}

/// The stragglers document (`report::stragglers`), `top` ranks and pairs.
pub(crate) fn stragglers(run: &Run, top: usize) -> Result<Value> {
    let ctx = run.ctx(None).map_err(|e| anyhow!(e))?;
    Ok(report::stragglers::to_json(&ctx, &verdict(&ctx), top))
}

/// The ops of `rank` in `window`, at most `limit` (`report::ops`): read
/// from the rank's table when the run is held in pages.
pub(crate) fn ops(
    run: &Run,
    rank: u32,
    window: report::ops::Window,
    limit: usize,
) -> Result<Value> {
    let ctx = run.ctx(Some(rank)).map_err(|e| anyhow!(e))?;
    let source = run.trace.source.display().to_string();
    let mut doc = None;
    crate::export::Ops::of(run)
        .each_rank(&ctx, &mut |t| {
            doc = Some(report::ops::to_json(t, &source, window, limit)?);
            Ok(())
        })
        .map_err(|e| anyhow!(e))?;
    doc.ok_or_else(|| anyhow!("rank {rank} is not in {source}"))
}

/// What `collectives` lists of the matched instances.
#[derive(Debug, Clone)]
pub(crate) struct CollectivesQuery {
    /// Only this kind (`all_reduce`, ...).
    pub(crate) kind: Option<String>,
    /// One of `report::collectives::SORT_KEYS`.
    pub sort: String,
    /// The first this many instances after sorting (all without).
    pub top: Option<usize>,
    pub grouped_only: bool,
    /// List each instance's members.
    pub members: bool,
}

/// Calls `f` with the collectives view of `run` that `q` asks for.
pub(crate) fn with_collectives<T>(
    run: &Run,
    q: &CollectivesQuery,
    f: impl FnOnce(&report::collectives::View) -> T,
) -> Result<T> {
    let kind = match q.kind.as_deref() {
        Some(k) => Some(CollKind::from_name(k).ok_or_else(|| {
            anyhow!(
                "no collective kind '{k}' (all_reduce, all_gather, reduce_scatter, all_to_all, \
                 send_recv, broadcast, reduce, unknown)"
            )
        })?),
        None => None,
    };
    if !report::collectives::SORT_KEYS.contains(&q.sort.as_str()) {
        return Err(anyhow!(
            "cannot sort by '{}' (one of {})",
            q.sort,
            report::collectives::SORT_KEYS.join(", ")
        ));
    }
    let ctx = run.ctx(None).map_err(|e| anyhow!(e))?;
    let mut rows: Vec<_> = ctx
        .collective_rows()
        .iter()
        .filter(|r| kind.is_none_or(|k| r.kind == Some(k)))
        .collect();
    let groups = crate::derive::instances::grouped(rows.iter().cloned());
    let fits = crate::derive::instances::fits(rows.iter().cloned());
    report::collectives::sort(&mut rows, &q.sort);
    let matched = rows.len();
    rows.truncate(q.top.unwrap_or(usize::MAX));
    // The Timeline's origin: the first device op of any rank, from the
    // ranks' figures (a lean load holds only the collectives).
    let origin = ctx
        .stats()
        .iter()
        .filter_map(|s| s.device_window)
        .map(|w| w.start)
        .min()
        .unwrap_or(crate::model::Ns::ZERO);
    let view = report::collectives::View {
        origin,
        trace: &run.trace,
        instances: ctx.instances(),
        rows: &rows,
        groups: &groups,
        fits: &fits,
        process_groups: ctx.groups(),
        grouped_only: q.grouped_only,
        matched,
        members: q.members,
    };
    Ok(f(&view))
}

/// The `--metrics --format json` document of `run` (of `rank` alone when
/// given), listing the metrics `names` (every one when empty; a metric's
/// breakdown is its `parts`).
pub(crate) fn metrics(run: &Run, names: &[String], rank: Option<u32>) -> Result<Value> {
    let picked = names
        .iter()
        .map(|n| crate::metrics::lookup(n).map_err(|e| anyhow!("{e} (list_metrics lists them)")))
        .collect::<Result<Vec<_>>>()?;
    let ctx = run.ctx(rank).map_err(|e| anyhow!(e))?;
    let rows = if picked.is_empty() {
        report::rows(&ctx)
    } else {
        picked
            .into_iter()
            .map(|metric| report::Row {
                metric,
                outcome: metric.eval(&ctx),
            })
            .collect()
    };
    Ok(report::json::document(&report::About::of(&ctx), &rows))
}
