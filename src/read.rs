//! Readers: each turns one input file into the model's per-rank data
//! (timelines, memory timelines, execution traces, the workload card). Which
//! reader a file gets is decided by `formats`; `load` runs them.

pub mod card;
pub mod chrome;
pub mod exec_trace;
pub mod kineto;
pub mod nsys;
pub mod nsys_json;
pub mod snapshot;
pub mod split;
pub mod xla_json;
pub mod xplane;

/// What a reader found in one file, before ranks are resolved across files.
#[derive(Debug)]
pub struct RankFile {
    pub timeline: crate::model::RankTimeline,
    /// The rank the file's content states (`distributedInfo.rank`), if any.
    pub dist_rank: Option<u32>,
    pub events: u64,
    pub warnings: Vec<String>,
}

/// Index of the step whose range contains `t` (steps are sorted and do not overlap).
pub(crate) fn step_at(steps: &[crate::model::Step], t: crate::model::Ns) -> Option<u32> {
    let i = steps.partition_point(|s| s.start <= t);
    let s = steps.get(i.checked_sub(1)?)?;
    (t < s.end).then_some((i - 1) as u32)
}

/// Kernel-launch calls (start, CPU duration) counted and summed per step,
/// by the step during which each call started.
pub(crate) fn launches_by_step(
    steps: &[crate::model::Step],
    calls: &[(crate::model::Ns, crate::model::Ns)],
) -> Vec<(u64, crate::model::Ns)> {
    let mut out = vec![(0, 0); steps.len()];
    for &(start, dur) in calls {
        if let Some(i) = step_at(steps, start) {
            out[i as usize].0 += 1;
            out[i as usize].1 += dur;
        }
    }
    out
}
