//! A rank's launch queue: how long its device ops waited between their
//! launch on the CPU and their start on the device. That wait is how far
//! the CPU ran ahead when it launched them: a deep queue means the device
//! sets the pace; one near zero, the CPU does and the device waits on its
//! launches.

use crate::model::{DeviceOp, Interval, Ns};

/// Bins a rank's queue is kept in, over its device window (about 6 µs each
/// on a 100 ms trace); a view finer than a bin is drawn from its ops.
const BINS: usize = 16_384;

#[derive(Debug, Clone)]
pub struct Queue {
    span: Interval,
    /// Per bin of `span`: the longest wait (ns, saturated at `u32::MAX`) of
    /// the ops starting in it; 0 for none.
    bins: Vec<u32>,
}

/// How long `op` waited after its launch; `None` where its launch is not
/// known (a reader without launches sets it to the start).
pub(crate) fn wait(op: &DeviceOp) -> Option<Ns> {
    (op.launch < op.start).then(|| op.start - op.launch)
}

impl Queue {
    /// `None` when no op has a known launch.
    pub(crate) fn of<'a>(ops: impl Iterator<Item = &'a DeviceOp> + Clone) -> Option<Self> {
        let known = ops.filter(|o| wait(o).is_some());
        let start = known.clone().map(|o| o.start).min()?;
        let end = known.clone().map(|o| o.start).max()?;
        let span = Interval::new(start, end + Ns(1));
        let mut bins = vec![0u32; BINS];
        for o in known {
            let i = bin(span, o.start);
            let w = wait(o).map_or(0, |w| u32::try_from(w.get()).unwrap_or(u32::MAX));
            bins[i] = bins[i].max(w);
        }
        Some(Self { span, bins })
    }

    /// The width of a bin.
    pub(crate) fn resolution(&self) -> Ns {
        (self.span.len() / BINS as i64).max(Ns(1))
    }

    /// The longest wait among the ops starting in `[lo, hi)`, to a bin's
    /// precision (a bin partly inside counts whole).
    pub(crate) fn longest(&self, lo: Ns, hi: Ns) -> Option<Ns> {
        if hi <= self.span.start || lo >= self.span.end {
            return None;
        }
        let (a, b) = (
            bin(self.span, lo.max(self.span.start)),
            bin(self.span, (hi - Ns(1)).min(self.span.end - Ns(1))),
        );
        let m = self.bins[a..=b].iter().copied().max()?;
        (m > 0).then(|| Ns(i64::from(m)))
    }
}

fn bin(span: Interval, t: Ns) -> usize {
    let off = i128::from((t - span.start).get().max(0));
    let len = i128::from(span.len().get().max(1));
    ((off * BINS as i128 / len) as usize).min(BINS - 1)
}

/// The longest wait among `ops` starting in `[lo, hi)`, exactly.
pub(crate) fn longest_of(ops: &[DeviceOp], lo: Ns, hi: Ns) -> Option<Ns> {
    ops.iter()
        .filter(|o| o.start >= lo && o.start < hi)
        .filter_map(wait)
        .max()
}

/// Eighths of a row a wait fills, on a log scale: 1 µs or less one eighth,
/// 10 µs about three, 100 µs five, 1 ms six, 10 ms and more all eight.
pub(crate) fn eighths(w: Ns) -> usize {
    let us = (w.as_f64() / 1e3).max(1.0);
    (1.0 + us.log10() * 1.75).round().clamp(1.0, 8.0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Activity, KernelClass, StrId};

    fn op(launch: i64, start: i64) -> DeviceOp {
        DeviceOp {
            launch: Ns(launch),
            ..DeviceOp::new(
                StrId(0),
                Activity::Kernel,
                KernelClass::Gemm,
                Ns(start),
                Ns(10),
            )
        }
    }

    /// Waits 5, 2,000 and 30 ns at starts 0, 1,000 and 1,999; an op with no
    /// launch (at its start) is left out.
    #[test]
    fn longest_wait_in_a_range() {
        let ops = [op(-5, 0), op(-1000, 1000), op(1969, 1999), op(500, 500)];
        let q = Queue::of(ops.iter()).unwrap();
        assert_eq!(q.longest(Ns(0), Ns(2000)), Some(Ns(2000)));
        assert_eq!(q.longest(Ns(0), Ns(1)), Some(Ns(5)));
        assert_eq!(q.longest(Ns(1500), Ns(2000)), Some(Ns(30)));
        assert_eq!(q.longest(Ns(3000), Ns(4000)), None);
        assert_eq!(q.longest(Ns(100), Ns(900)), None);
        assert_eq!(longest_of(&ops, Ns(0), Ns(1000)), Some(Ns(5)));
        assert_eq!(longest_of(&ops, Ns(400), Ns(600)), None);
        assert!(Queue::of([op(7, 7)].iter()).is_none());
        assert_eq!(
            [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 900].map(|w| eighths(Ns(w))),
            [1, 3, 5, 6, 8, 1]
        );
    }
}
