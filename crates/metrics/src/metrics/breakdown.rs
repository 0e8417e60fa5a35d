//! The kernel table: device time per kernel name (or per kernel class), for the
//! Kernels tab. Shares are of all device-op time in scope (kernels, copies, sets).

use std::collections::HashMap;

use super::ctx::Ctx;
use crate::derive::kernels::Acc;
pub use crate::derive::kernels::RankKernels;
use crate::model::{Activity, KernelClass, Ns, RankTimeline};

/// How rows are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grouping {
    #[default]
    Kernel,
    Class,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KernelRow {
    /// The kernel name, or the class name when grouped by class.
    pub name: String,
    pub class: KernelClass,
    pub activity: Activity,
    pub count: u64,
    pub total: Ns,
    pub max: Ns,
    /// `total` / all device-op time in scope × 100.
    pub share: f64,
}

impl KernelRow {
    pub fn mean(&self) -> Ns {
        self.total / self.count.max(1) as i64
    }
}

/// Rows over the ranks in scope, largest total first (ties by name).
pub fn kernel_table(ctx: &Ctx, grouping: Grouping) -> Vec<KernelRow> {
    merged_table(ctx.each().map(|(t, s)| (t, &s.kernel_table)), grouping)
}

/// [`kernel_table`] from sums computed beforehand, one per rank in scope.
pub fn merged_table<'a>(
    ranks: impl Iterator<Item = (&'a RankTimeline, &'a RankKernels)>,
    grouping: Grouping,
) -> Vec<KernelRow> {
    let mut rows: Vec<KernelRow> = match grouping {
        Grouping::Kernel => by_name(ranks),
        Grouping::Class => by_class(ranks),
    };
    let all: Ns = rows.iter().map(|r| r.total).sum();
    for r in &mut rows {
        r.share = if all > Ns::ZERO {
            r.total.as_f64() / all.as_f64() * 100.0
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| (a.activity as usize).cmp(&(b.activity as usize)))
    });
    rows
}

fn row(name: String, class: KernelClass, activity: Activity, a: Acc) -> KernelRow {
    KernelRow {
        name,
        class,
        activity,
        count: a.count,
        total: a.total,
        max: a.max,
        share: 0.0,
    }
}

fn by_name<'a>(ranks: impl Iterator<Item = (&'a RankTimeline, &'a RankKernels)>) -> Vec<KernelRow> {
    // Ids differ between ranks: merge by the name text.
    let mut merged: HashMap<(&str, Activity), (KernelClass, Acc)> = HashMap::new();
    for (t, k) in ranks {
        for &(id, activity, class, acc) in &k.names {
            merged
                .entry((t.name(id), activity))
                .or_insert((class, Acc::default()))
                .1
                .add(acc);
        }
    }
    merged
        .into_iter()
        .map(|((name, activity), (class, a))| row(name.to_owned(), class, activity, a))
        .collect()
}

fn by_class<'a>(
    ranks: impl Iterator<Item = (&'a RankTimeline, &'a RankKernels)>,
) -> Vec<KernelRow> {
    let mut acc = [Acc::default(); KernelClass::ALL.len()];
    for (_, k) in ranks {
        for (a, b) in acc.iter_mut().zip(&k.classes) {
            a.add(*b);
        }
    }
    KernelClass::ALL
        .iter()
        .zip(acc)
        .filter(|(_, a)| a.count > 0)
        .map(|(&class, a)| row(class.name().to_owned(), class, Activity::Kernel, a))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::two_rank_example;

    #[test]
    fn by_kernel_all_ranks() {
        // Device time (ns): gemm 35 µs + 100 µs, all-reduce 30 + 100, flash 40,
        // all-gather 30, moe 10, memcpy 10; all = 355 µs.
        let t = trace(&two_rank_example());
        let ctx = Ctx::new(&t, None).unwrap();
        let rows = kernel_table(&ctx, Grouping::Kernel);
        assert_eq!(rows.len(), 6);
        let gemm = &rows[0];
        assert_eq!(gemm.name, "sm90_xmma_gemm_bf16");
        assert_eq!(
            (gemm.count, gemm.total, gemm.max),
            (2, Ns(135_000), Ns(100_000))
        );
        assert_eq!(gemm.mean(), Ns(67_500));
        assert!((gemm.share - 135.0 / 355.0 * 100.0).abs() < 1e-9);
        assert_eq!(rows[1].class, KernelClass::Communication);
        assert_eq!(rows[1].total, Ns(130_000));
        let memcpy = rows
            .iter()
            .find(|r| r.activity == Activity::Memcpy)
            .unwrap();
        assert_eq!((memcpy.count, memcpy.total), (1, Ns(10_000)));
        let shares: f64 = rows.iter().map(|r| r.share).sum();
        assert!((shares - 100.0).abs() < 1e-9);
    }

    #[test]
    fn by_class_one_rank() {
        // Rank 0: gemm 35 + attention 40 + moe 10 compute, comm 30 + 30, memory 10:
        // 155 µs of device time in all.
        let t = trace(&two_rank_example());
        let ctx = Ctx::new(&t, Some(0)).unwrap();
        let rows = kernel_table(&ctx, Grouping::Class);
        let get = |c: KernelClass| {
            rows.iter()
                .find(|r| r.class == c)
                .map(|r| (r.count, r.total))
        };
        assert_eq!(get(KernelClass::Communication), Some((2, Ns(60_000))));
        assert_eq!(get(KernelClass::Attention), Some((1, Ns(40_000))));
        assert_eq!(get(KernelClass::Gemm), Some((1, Ns(35_000))));
        assert_eq!(get(KernelClass::Memory), Some((1, Ns(10_000))));
        assert_eq!(get(KernelClass::Moe), Some((1, Ns(10_000))));
        assert_eq!(rows[0].class, KernelClass::Communication);
        assert!((rows[0].share - 60.0 / 155.0 * 100.0).abs() < 1e-9);
    }
}
