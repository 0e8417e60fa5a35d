//! Two runs side by side: every metric with both values and the change, kernels
//! (by normalized name), kernel classes and collective kinds whose time changed
//! most, and per-rank step breakdowns when both runs have the same ranks.

use std::collections::HashMap;

use crate::metrics::breakdown::{kernel_table, Grouping};
use crate::metrics::{eval_all, Better, Ctx, Metric, Outcome, METRICS};
use crate::model::time::ns_to_s;
use crate::model::{CollKind, Ns, Trace};

/// How a metric moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// Changed beyond the threshold, for metrics that are neither better nor worse.
    Changed,
    Better,
    Worse,
    /// Applies to one run only.
    OneSided,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Self::Same => "",
            Self::Changed => "changed",
            Self::Better => "better",
            Self::Worse => "WORSE",
            Self::OneSided => "one run only",
        }
    }
}

pub struct MetricDiff {
    pub metric: &'static Metric,
    pub a: Outcome,
    pub b: Outcome,
    pub verdict: Verdict,
}

impl MetricDiff {
    /// B − A, when both apply.
    pub fn delta(&self) -> Option<f64> {
        Some(self.b.as_value()? - self.a.as_value()?)
    }

    /// (B − A) / |A|, when both apply and A ≠ 0.
    pub fn relative(&self) -> Option<f64> {
        let (a, b) = (self.a.as_value()?, self.b.as_value()?);
        (a != 0.0).then(|| (b - a) / a.abs())
    }
}

/// Total device time of one kernel (or class, or collective kind) in each run.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeDiff {
    pub name: String,
    pub a_count: u64,
    pub b_count: u64,
    /// Seconds over all ranks.
    pub a: f64,
    pub b: f64,
}

impl TimeDiff {
    pub fn delta(&self) -> f64 {
        self.b - self.a
    }
}

#[derive(Debug)]
pub struct RankDiff {
    pub rank: u32,
    /// Seconds per step: (A, B) of step time, work and exposed communication.
    pub step: (Option<f64>, Option<f64>),
    pub work: (f64, f64),
    pub exposed: (f64, f64),
}

pub struct Comparison {
    pub metrics: Vec<MetricDiff>,
    pub kernels: Vec<TimeDiff>,
    pub classes: Vec<TimeDiff>,
    pub collectives: Vec<TimeDiff>,
    /// Per rank, when both runs have the same ranks; otherwise why not.
    pub ranks: Result<Vec<RankDiff>, String>,
    /// Whether run A was a run (false: a baseline's values, so kernels,
    /// classes and collectives were not compared).
    pub detailed: bool,
}

/// Smallest change of a share (a `%` metric, or a 0-1 ratio) that counts, in
/// points: below it a change is noise whatever the threshold.
pub const SHARE_FLOOR_POINTS: f64 = 1.0;

/// Whether a metric is a share (0-100 % or a 0-1 ratio in both runs), judged
/// in absolute points rather than relative change: 0.172 % -> 0.222 % is
/// +29 % relative but 0.05 points, noise.
fn is_share(d: &MetricDiff) -> bool {
    match d.metric.unit {
        crate::metrics::Unit::Percent => true,
        // Ratios such as straggler (max / median, >= 1) stay relative.
        crate::metrics::Unit::Ratio => [&d.a, &d.b]
            .iter()
            .all(|o| o.as_value().is_some_and(|v| (0.0..=1.0).contains(&v))),
        _ => false,
    }
}

/// The change of a share in percentage points (0-1 ratios scaled by 100).
fn points(d: &MetricDiff) -> Option<f64> {
    let scale = if d.metric.unit == crate::metrics::Unit::Ratio {
        100.0
    } else {
        1.0
    };
    Some(d.delta()? * scale)
}

/// Whether a change counts. Shares: `|B - A|` in points above
/// max(threshold x 100, `SHARE_FLOOR_POINTS`) (5 % -> 5 points). Everything
/// else: `|relative change| > threshold` (a fraction, 0.05 = 5 %); a change from
/// zero counts as beyond any threshold.
fn beyond(d: &MetricDiff, threshold: f64) -> bool {
    if is_share(d) {
        return points(d).is_some_and(|p| p.abs() > (threshold * 100.0).max(SHARE_FLOOR_POINTS));
    }
    match (d.relative(), d.delta()) {
        (Some(r), _) => r.abs() > threshold,
        (None, Some(delta)) => delta != 0.0,
        _ => false,
    }
}

impl MetricDiff {
    /// The change as it is judged: `+0.05pt` (points) for shares, `+29.1%`
    /// otherwise; empty when it is not defined.
    pub fn change_text(&self) -> String {
        if is_share(self) {
            return points(self).map_or(String::new(), |p| format!("{p:+.2}pt"));
        }
        self.relative()
            .map_or(String::new(), |r| format!("{:+.1}%", r * 100.0))
    }
}

pub fn compare(a: &Ctx, b: &Ctx, threshold: f64) -> Comparison {
    Comparison {
        metrics: diffs(eval_all(a), eval_all(b), threshold),
        kernels: time_diffs(a, b, Grouping::Kernel, true),
        classes: time_diffs(a, b, Grouping::Class, false),
        collectives: coll_diffs(a.trace, b.trace),
        ranks: rank_diffs(a, b),
        detailed: true,
    }
}

/// Run B against the metric values kept of a run A (a baseline, by metric
/// name): the metrics alone, since a baseline keeps no kernels or ranks.
pub fn against(a: &std::collections::BTreeMap<String, f64>, b: &Ctx, threshold: f64) -> Comparison {
    let oa = (METRICS.iter()).map(|m| kept(a, m)).collect();
    Comparison {
        metrics: diffs(oa, eval_all(b), threshold),
        kernels: Vec::new(),
        classes: Vec::new(),
        collectives: Vec::new(),
        ranks: Err("a baseline keeps the metrics' values, not kernels or ranks: compare two runs for those".into()),
        detailed: false,
    }
}

/// Metric `m`'s value kept of a run (a baseline).
pub fn kept(a: &std::collections::BTreeMap<String, f64>, m: &Metric) -> Outcome {
    a.get(m.name).map_or_else(
        || Outcome::na("not in the baseline: it did not apply to the run saved"),
        |&v| Outcome::value(v),
    )
}

/// Each metric's outcomes in A and B (in registry order), judged.
fn diffs(a: Vec<Outcome>, b: Vec<Outcome>, threshold: f64) -> Vec<MetricDiff> {
    METRICS
        .iter()
        .zip(a.into_iter().zip(b))
        .map(|(m, (oa, ob))| {
            let mut d = MetricDiff {
                metric: m,
                a: oa,
                b: ob,
                verdict: Verdict::Same,
            };
            d.verdict = match (d.a.as_value(), d.b.as_value()) {
                (None, None) => Verdict::Same,
                (Some(_), None) | (None, Some(_)) => Verdict::OneSided,
                (Some(_), Some(_)) if !beyond(&d, threshold) => Verdict::Same,
                (Some(x), Some(y)) => match m.better {
                    Better::Neither => Verdict::Changed,
                    Better::Higher if y > x => Verdict::Better,
                    Better::Lower if y < x => Verdict::Better,
                    _ => Verdict::Worse,
                },
            };
            d
        })
        .collect()
}

/// A kernel name without template arguments, parameter list or launch-config
/// suffixes, so the same kernel matches across builds and vendors' spellings:
/// `void at::native::foo<float, 4>(int)` → `at::native::foo`.
pub(crate) fn normalize(name: &str) -> String {
    // Not a parameter list: part of the qualified name.
    let name = name.replace("(anonymous namespace)::", "");
    let mut out = String::with_capacity(name.len());
    let mut depth = 0u32;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let s = out.trim();
    let s = s.strip_prefix("void ").unwrap_or(s);
    s.trim().to_owned()
}

fn time_diffs(a: &Ctx, b: &Ctx, grouping: Grouping, normalized: bool) -> Vec<TimeDiff> {
    let mut by: HashMap<String, TimeDiff> = HashMap::new();
    for (side, ctx) in [(0, a), (1, b)] {
        for row in kernel_table(ctx, grouping) {
            let key = if normalized {
                normalize(&row.name)
            } else {
                row.name
            };
            let e = by.entry(key.clone()).or_insert_with(|| TimeDiff {
                name: key,
                a_count: 0,
                b_count: 0,
                a: 0.0,
                b: 0.0,
            });
            if side == 0 {
                e.a_count += row.count;
                e.a += ns_to_s(row.total);
            } else {
                e.b_count += row.count;
                e.b += ns_to_s(row.total);
            }
        }
    }
    sorted(by.into_values().collect())
}

fn coll_diffs(a: &Trace, b: &Trace) -> Vec<TimeDiff> {
    let mut by: HashMap<CollKind, TimeDiff> = HashMap::new();
    for (side, t) in [(0, a), (1, b)] {
        for r in &t.ranks {
            for o in r.ops.iter().filter(|o| o.is_comm()) {
                let k = o.coll.unwrap_or(CollKind::Unknown);
                let e = by.entry(k).or_insert_with(|| TimeDiff {
                    name: k.name().to_owned(),
                    a_count: 0,
                    b_count: 0,
                    a: 0.0,
                    b: 0.0,
                });
                if side == 0 {
                    e.a_count += 1;
                    e.a += ns_to_s(o.dur);
                } else {
                    e.b_count += 1;
                    e.b += ns_to_s(o.dur);
                }
            }
        }
    }
    sorted(by.into_values().collect())
}

/// Largest absolute change first (ties by name).
fn sorted(mut v: Vec<TimeDiff>) -> Vec<TimeDiff> {
    v.sort_by(|x, y| {
        y.delta()
            .abs()
            .total_cmp(&x.delta().abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    v
}

fn rank_diffs(a: &Ctx, b: &Ctx) -> Result<Vec<RankDiff>, String> {
    let ranks = |c: &Ctx| c.ranks.iter().map(|t| t.rank).collect::<Vec<_>>();
    if ranks(a) != ranks(b) {
        return Err(format!(
            "the runs have different ranks ({} vs {}): compare the metric distributions (min .. max in --metrics) instead",
            a.ranks.len(),
            b.ranks.len()
        ));
    }
    let s = |ns: Ns| ns_to_s(ns);
    Ok(a.rank_rows()
        .iter()
        .zip(b.rank_rows())
        .map(|(x, y)| RankDiff {
            rank: x.rank,
            step: (x.step_time.map(s), y.step_time.map(s)),
            work: (s(x.work()), s(y.work())),
            exposed: (s(x.exposed_comm), s(y.exposed_comm)),
        })
        .collect())
}

impl Comparison {
    /// Metrics that got worse beyond the threshold.
    pub fn regressions(&self) -> impl Iterator<Item = &MetricDiff> {
        self.metrics.iter().filter(|d| d.verdict == Verdict::Worse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::{two_rank_example, Coll, RankTrace};

    #[test]
    fn names_normalize() {
        assert_eq!(
            normalize(
                "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel>(int)"
            ),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(
            normalize("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
        assert_eq!(normalize("sm90_xmma_gemm_bf16"), "sm90_xmma_gemm_bf16");
        assert_eq!(
            normalize(
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<Adam>(int)"
            ),
            "at::native::multi_tensor_apply_kernel"
        );
    }

    #[test]
    fn a_run_against_itself_changes_nothing() {
        let t = trace(&two_rank_example());
        let c = Ctx::new(&t, None).unwrap();
        let cmp = compare(&c, &c, 0.05);
        for d in &cmp.metrics {
            assert_eq!(d.verdict, Verdict::Same, "{}", d.metric.name);
            if let Some(delta) = d.delta() {
                assert_eq!(delta, 0.0, "{}", d.metric.name);
            }
        }
        assert!(cmp.kernels.iter().all(|k| k.delta() == 0.0));
        assert_eq!(cmp.ranks.as_ref().map(Vec::len), Ok(2));
    }

    /// Rank 1 of the two-rank example with its all-reduce taking `ar_us`.
    fn one_rank(ar_us: f64) -> Vec<RankTrace> {
        let ar = Coll::all_reduce_f32(1 << 20, 2);
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.step(1, 0.0, 100.0 + ar_us);
        let k = r.kernel("sm90_xmma_gemm_bf16<128>", 0.0, 100.0, 7, 10);
        let c = r.collective(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
            100.0,
            ar_us,
            20,
            &ar,
        );
        r.launch(k, 1.0);
        r.launch(c, 2.0);
        vec![r]
    }

    #[test]
    fn a_collective_twice_as_slow() {
        // A: all-reduce 100 µs; B: 200 µs. Step 200 → 300 µs (+50 %, worse);
        // all-reduce bus bandwidth halves (worse); kernel diff: +100 µs on it.
        let (ta, tb) = (trace(&one_rank(100.0)), trace(&one_rank(200.0)));
        let (ca, cb) = (Ctx::new(&ta, None).unwrap(), Ctx::new(&tb, None).unwrap());
        let cmp = compare(&ca, &cb, 0.05);
        let get = |n: &str| cmp.metrics.iter().find(|d| d.metric.name == n).unwrap();
        let step = get("avg_step_time");
        assert!((step.delta().unwrap() - 100e-6).abs() < 1e-12);
        assert!((step.relative().unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(step.verdict, Verdict::Worse);
        let bw = get("bandwidth_utilization_allreduce_group_6");
        assert!((bw.relative().unwrap() + 0.5).abs() < 1e-12);
        assert_eq!(bw.verdict, Verdict::Worse);
        // Total kernel time includes the all-reduce: a description of the run,
        // so "changed", not better or worse.
        assert_eq!(get("total_kernel_time").verdict, Verdict::Changed);
        let top = &cmp.kernels[0];
        assert_eq!(top.name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        assert!((top.delta() - 100e-6).abs() < 1e-12);
        assert_eq!((top.a_count, top.b_count), (1, 1));
        let gemm = cmp
            .kernels
            .iter()
            .find(|k| k.name == "sm90_xmma_gemm_bf16")
            .unwrap();
        assert_eq!(gemm.delta(), 0.0);
        assert_eq!(cmp.collectives[0].name, "all_reduce");
        assert!(cmp.regressions().any(|d| d.metric.name == "avg_step_time"));
    }

    /// Two ranks: a GEMM of 100 µs on rank 0 and `gemm1_us` on rank 1, then an
    /// all-reduce that both leave when the later one has arrived plus 100 µs.
    fn pair(gemm1_us: f64) -> Vec<RankTrace> {
        let ar = Coll::all_reduce_f32(1 << 20, 2);
        let end = gemm1_us.max(100.0) + 100.0;
        [100.0, gemm1_us]
            .into_iter()
            .enumerate()
            .map(|(rank, gemm)| {
                let mut r = RankTrace::new(Some(rank as u32), 2, 10);
                r.step(1, 0.0, end);
                let k = r.kernel("sm90_xmma_gemm_bf16", 0.0, gemm, 7, 10);
                let c = r.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    gemm,
                    end - gemm,
                    20,
                    &ar,
                );
                r.launch(k, 0.0);
                r.launch(c, 0.0);
                r
            })
            .collect()
    }

    #[test]
    fn one_rank_slower() {
        // A: both GEMMs 100 µs. B: rank 1's takes 150 µs, so rank 0 waits 50 µs
        // longer in the all-reduce. Per rank (A → B): step 200 → 250 µs on both;
        // work (busy − exposed comm) 100 → 100 on rank 0, 100 → 150 on rank 1;
        // exposed comm 100 → 150 on rank 0, 100 → 100 on rank 1.
        let (ta, tb) = (trace(&pair(100.0)), trace(&pair(150.0)));
        let (ca, cb) = (Ctx::new(&ta, None).unwrap(), Ctx::new(&tb, None).unwrap());
        let cmp = compare(&ca, &cb, 0.05);
        let ranks = cmp.ranks.expect("same ranks");
        let us = |s: f64| (s * 1e6).round();
        let got: Vec<_> = ranks
            .iter()
            .map(|r| {
                (
                    r.rank,
                    (r.step.0.map(us), r.step.1.map(us)),
                    (us(r.work.0), us(r.work.1)),
                    (us(r.exposed.0), us(r.exposed.1)),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    0,
                    (Some(200.0), Some(250.0)),
                    (100.0, 100.0),
                    (100.0, 150.0)
                ),
                (
                    1,
                    (Some(200.0), Some(250.0)),
                    (100.0, 150.0),
                    (100.0, 100.0)
                ),
            ]
        );
        let step = cmp
            .metrics
            .iter()
            .find(|d| d.metric.name == "avg_step_time")
            .unwrap();
        assert!((step.relative().unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(step.verdict, Verdict::Worse);
        // Both kernels' totals grow 50 µs: rank 1's GEMM, and rank 0's wait
        // inside the all-reduce.
        let delta = |n: &str| cmp.kernels.iter().find(|k| k.name == n).unwrap().delta();
        assert!((delta("sm90_xmma_gemm_bf16") - 50e-6).abs() < 1e-12);
        assert!((delta("ncclDevKernel_AllReduce_Sum_f32_RING_LL") - 50e-6).abs() < 1e-12);
    }

    #[test]
    fn different_world_sizes_compare_distributions() {
        let (ta, tb) = (trace(&two_rank_example()), trace(&one_rank(100.0)));
        let (ca, cb) = (Ctx::new(&ta, None).unwrap(), Ctx::new(&tb, None).unwrap());
        let cmp = compare(&ca, &cb, 0.05);
        assert!(cmp.ranks.unwrap_err().contains("2 vs 1"));
    }
}
