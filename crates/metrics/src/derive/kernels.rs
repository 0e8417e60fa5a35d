//! One rank's device time per (name, activity) and per class: the kernel
//! table (Kernels tab, `compare`) is merged from these, so that changing
//! the table's rank or grouping merges a few hundred sums per rank rather
//! than rescanning every op, and a rank slimmed to its collectives keeps it.

use crate::model::{Activity, KernelClass, Ns, RankTimeline, StrId};

/// Ops summed: how many, their total and longest duration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Acc {
    pub count: u64,
    pub total: Ns,
    pub max: Ns,
}

impl Acc {
    pub(crate) fn add(&mut self, other: Acc) {
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    fn one(dur: Ns) -> Self {
        Self {
            count: 1,
            total: dur,
            max: dur,
        }
    }
}

/// Slots per name id: one per `Activity`.
const ACTIVITIES: usize = 3;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankKernels {
    /// (name, activity, class of its first op, sums), in order of first op.
    pub names: Vec<(StrId, Activity, KernelClass, Acc)>,
    /// Sums per class, indexed like `KernelClass::ALL`.
    pub classes: [Acc; KernelClass::ALL.len()],
}

impl RankKernels {
    pub fn of(t: &RankTimeline) -> Self {
        // Names are interned per rank into dense ids: a slot per (id, activity)
        // instead of hashing every op.
        let mut slot = vec![u32::MAX; t.strings.len() * ACTIVITIES];
        let mut names = Vec::new();
        let mut classes = [Acc::default(); KernelClass::ALL.len()];
        for op in &t.ops {
            let k = op.name.0 as usize * ACTIVITIES + op.activity as usize;
            if slot[k] == u32::MAX {
                slot[k] = names.len() as u32;
                names.push((op.name, op.activity, op.class, Acc::default()));
            }
            names[slot[k] as usize].3.add(Acc::one(op.dur));
            classes[super::class_index(op.class)].add(Acc::one(op.dur));
        }
        Self { names, classes }
    }

    /// Summed duration per kernel name (kernels only, not copies or sets).
    pub(crate) fn kernel_times(&self) -> impl Iterator<Item = (StrId, Ns)> + '_ {
        self.names
            .iter()
            .filter(|n| n.1 == Activity::Kernel)
            .map(|n| (n.0, n.3.total))
    }
}
