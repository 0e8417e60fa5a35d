//! The kernel table: device time per kernel name (or per kernel class), for the
//! Kernels tab. Shares are of all device-op time in scope (kernels, copies, sets).

use std::collections::HashMap;

use super::ctx::{class_index, Ctx};
use crate::model::{Activity, KernelClass, Ns};

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
        self.total / self.count.max(1) as Ns
    }
}

#[derive(Default)]
struct Acc {
    count: u64,
    total: Ns,
    max: Ns,
}

impl Acc {
    fn add(&mut self, count: u64, total: Ns, max: Ns) {
        self.count += count;
        self.total += total;
        self.max = self.max.max(max);
    }
}

/// Rows over the ranks in scope, largest total first (ties by name).
pub fn kernel_table(ctx: &Ctx, grouping: Grouping) -> Vec<KernelRow> {
    let mut rows: Vec<KernelRow> = match grouping {
        Grouping::Kernel => by_name(ctx),
        Grouping::Class => by_class(ctx),
    };
    let all: Ns = rows.iter().map(|r| r.total).sum();
    for r in &mut rows {
        r.share = if all > 0 {
            r.total as f64 / all as f64 * 100.0
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    rows
}

fn by_name(ctx: &Ctx) -> Vec<KernelRow> {
    // Names are interned per rank: sum per (id, activity) first, then merge the
    // ranks by the name text.
    let mut merged: HashMap<(String, Activity), (KernelClass, Acc)> = HashMap::new();
    for t in &ctx.ranks {
        let mut local: HashMap<(crate::model::StrId, Activity), (KernelClass, Acc)> =
            HashMap::new();
        for op in &t.ops {
            local
                .entry((op.name, op.activity))
                .or_insert_with(|| (op.class, Acc::default()))
                .1
                .add(1, op.dur, op.dur);
        }
        for ((id, activity), (class, acc)) in local {
            merged
                .entry((t.name(id).to_owned(), activity))
                .or_insert_with(|| (class, Acc::default()))
                .1
                .add(acc.count, acc.total, acc.max);
        }
    }
    merged
        .into_iter()
        .map(|((name, activity), (class, a))| KernelRow {
            name,
            class,
            activity,
            count: a.count,
            total: a.total,
            max: a.max,
            share: 0.0,
        })
        .collect()
}

fn by_class(ctx: &Ctx) -> Vec<KernelRow> {
    let mut acc: Vec<Acc> = KernelClass::ALL.iter().map(|_| Acc::default()).collect();
    for t in &ctx.ranks {
        for op in &t.ops {
            acc[class_index(op.class)].add(1, op.dur, op.dur);
        }
    }
    KernelClass::ALL
        .iter()
        .zip(acc)
        .filter(|(_, a)| a.count > 0)
        .map(|(&class, a)| KernelRow {
            name: class.name().to_owned(),
            class,
            activity: Activity::Kernel,
            count: a.count,
            total: a.total,
            max: a.max,
            share: 0.0,
        })
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
        assert_eq!((gemm.count, gemm.total, gemm.max), (2, 135_000, 100_000));
        assert_eq!(gemm.mean(), 67_500);
        assert!((gemm.share - 135.0 / 355.0 * 100.0).abs() < 1e-9);
        assert_eq!(rows[1].class, KernelClass::Communication);
        assert_eq!(rows[1].total, 130_000);
        let memcpy = rows
            .iter()
            .find(|r| r.activity == Activity::Memcpy)
            .unwrap();
        assert_eq!((memcpy.count, memcpy.total), (1, 10_000));
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
        assert_eq!(get(KernelClass::Communication), Some((2, 60_000)));
        assert_eq!(get(KernelClass::Attention), Some((1, 40_000)));
        assert_eq!(get(KernelClass::Gemm), Some((1, 35_000)));
        assert_eq!(get(KernelClass::Memory), Some((1, 10_000)));
        assert_eq!(get(KernelClass::Moe), Some((1, 10_000)));
        assert_eq!(rows[0].class, KernelClass::Communication);
        assert!((rows[0].share - 60.0 / 155.0 * 100.0).abs() < 1e-9);
    }
}
