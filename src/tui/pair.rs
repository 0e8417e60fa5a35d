//! Two runs opened together (`ccl-bench DIR_A DIR_B`): both loaded, and their
//! comparison computed once for the Compare tab.

use std::sync::Arc;

use crate::compare::{compare, Comparison};
use crate::metrics::{Ctx, Options};
use crate::model::Interval;

use super::data::Data;

pub struct Pair {
    pub a: Arc<Data>,
    pub b: Arc<Data>,
    pub diff: Comparison,
    /// Relative change that counts as a change (0.05 = 5 %).
    pub threshold: f64,
}

impl Pair {
    pub fn new(a: Data, b: Data, opts: Options, threshold: f64) -> Self {
        fn ctx(d: &Data, opts: Options) -> Ctx<'_> {
            Ctx::new(&d.trace, None)
                .expect("no rank filter")
                .with_options(opts)
        }
        let diff = compare(&ctx(&a, opts), &ctx(&b, opts), threshold);
        Self {
            a: Arc::new(a),
            b: Arc::new(b),
            diff,
            threshold,
        }
    }

    /// Steps shown side by side: the longer of the two runs' step lists (a run
    /// without step markers counts as one step, its whole span).
    pub(crate) fn steps(&self) -> usize {
        steps(&self.a).max(steps(&self.b))
    }
}

fn steps(d: &Data) -> usize {
    d.steps.len().max(1)
}

/// The time window of step `i` (by position, not number: the runs may number
/// their steps differently) in run `d`, with its number when it has one.
pub(crate) fn step_window(d: &Data, i: usize) -> Option<(Option<i64>, Interval)> {
    if d.steps.is_empty() {
        return (i == 0).then_some((None, d.span));
    }
    d.steps.get(i).map(|s| (Some(s.number), s.span))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Interval, Ns};
    use crate::session::load::LoadReport;
    use crate::synth::{training_run, RankTrace, RunShape};

    fn data(t: crate::model::Trace) -> Data {
        Data::new(t, LoadReport::default(), None, Options::default())
    }

    #[test]
    fn steps_by_position() {
        let run = crate::metrics::testing::trace(&training_run(&RunShape {
            ranks: 2,
            ..RunShape::default()
        }));
        let mut r = RankTrace::new(Some(0), 1, 10);
        let k = r.kernel("sm90_xmma_gemm_bf16", 5.0, 20.0, 7, 10);
        r.launch(k, 1.0);
        let plain = crate::metrics::testing::trace(&[r]);
        let p = Pair::new(data(run), data(plain), Options::default(), 0.05);
        assert_eq!(p.steps(), 3);
        let (n, w) = step_window(&p.a, 0).expect("step 0");
        assert_eq!(Some(w), p.a.steps.first().map(|s| s.span));
        assert!(n.is_some());
        // No step markers: the whole run is step 0, and there is no step 1.
        assert_eq!(step_window(&p.b, 0), Some((None, p.b.span)));
        assert_eq!(step_window(&p.b, 1), None);
        assert_eq!(p.b.span, Interval::new(Ns(5_000), Ns(25_000)));
    }
}
