//! What-if step times: what a measured step would take without the straggler,
//! with all communication hidden, or with collectives at the card's link
//! bandwidth. A barrier model per collective: it ends when its last member
//! has started plus its transfer, and everything after it on every member
//! moves by what the collective gains; nothing beyond that is re-simulated
//! (no dependency changes, no new overlap). Each saving is capped at the
//! rank's exposed communication, the most that speeding up communication
//! can take off a step, so every what-if lies between the measured step and
//! the step with all communication hidden.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Why};
use crate::derive::instances::{InstanceRow, Member};
use crate::derive::RankRow;
use crate::model::time::{human, ns_to_s};
use crate::model::Ns;

const NO_MATCHED: &str = "needs collectives matched across ≥ 2 ranks";

/// Per rank in scope: (row, saving per step) for ranks with a step time,
/// the saving summed by `per_member` over the rank's matched collectives in
/// measured steps. What `per_member` needs of the whole collective is made
/// once by `per_collective` (not once per member: 1,000 members each).
fn per_step_saving<'c, P>(
    ctx: &'c Ctx,
    per_collective: impl Fn(&InstanceRow) -> P,
    per_member: impl Fn(&InstanceRow, &P, &Member) -> Option<Ns>,
) -> Vec<(&'c RankRow, Ns)> {
    // One pass over every member of every collective (a rank's members
    // looked up, not scanned for: 1,000 ranks x 100,000 collectives).
    let index: std::collections::HashMap<u32, usize> = ctx
        .ranks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.rank, i))
        .collect();
    let mut saved: Vec<Ns> = vec![Ns::ZERO; ctx.ranks.len()];
    ctx.each_with_members(|c, members| {
        let whole = per_collective(c);
        for m in members {
            let Some(&i) = index.get(&m.rank) else {
                continue;
            };
            if ctx.ranks[i].counts(m.step) {
                saved[i] += per_member(c, &whole, m).unwrap_or(Ns::ZERO).max(Ns::ZERO);
            }
        }
    });
    ctx.rank_rows()
        .iter()
        .zip(&ctx.ranks)
        .zip(saved)
        .filter(|((r, _), _)| r.step_time.is_some())
        .map(|((row, t), saved)| (row, saved / t.step_count() as i64))
        .collect()
}

/// The what-if step per rank: measured step − min(saving, exposed comm),
/// with the derivation of the first rank as a note. Not applicable when a
/// rank's exposed communication per step exceeds its step: the device then
/// runs behind the step ranges the CPU records (work launched in a step
/// ends after it), and a step less its communication would be negative.
fn step_minus(savings: Vec<(&RankRow, Ns)>, what: &str) -> Outcome {
    let behind = savings
        .iter()
        .map(|&(r, _)| r)
        .find(|r| r.step_time.is_some_and(|st| r.exposed_comm > st));
    if let Some(r) = behind {
        return Outcome::na(format!(
            "rank {}'s exposed communication per step ({}) exceeds its step ({}): the device \
             runs behind the CPU's step ranges (work launched in a step ends after it)",
            r.rank,
            human(r.exposed_comm),
            human(r.step_time.unwrap_or(Ns::ZERO)),
        ));
    }
    let mut note = None;
    let out = Outcome::rank_mean(
        savings.iter().map(|&(r, saved)| {
            let st = r.step_time.unwrap_or(Ns::ZERO);
            let cut = saved.min(r.exposed_comm);
            note.get_or_insert_with(|| {
                format!(
                    "rank {}: step {} − {what} {} (of which counted: at most the exposed communication {}) = {}",
                    r.rank,
                    human(st),
                    human(saved),
                    human(r.exposed_comm),
                    human(st - cut)
                )
            });
            (r.rank, Some(ns_to_s(st - cut)))
        }),
        Why::Lacks(Lack::Steps, crate::model::timeline::NO_STEPS),
    );
    match note {
        Some(n) => out.with_note(n),
        None => out,
    }
}

/// Step time had the late ranks (the verdict's straggler or late set)
/// arrived with the others: each step's matched collectives are replayed
/// in the order of their last start, collectives as barriers. A member
/// arrives as measured, less what the collectives before it in the step
/// gained on its rank; a late member no later than the latest other
/// member; the collective ends at the latest arrival plus each member's
/// transfer, and everything after it on that rank moves by what it gained.
/// A step's saving is what its rank's last collective in it gained,
/// capped at the rank's exposed communication. The measured step without
/// a straggler; not applicable when the verdict is unknown.
pub(crate) fn no_straggler_step(ctx: &Ctx) -> Outcome {
    let rows = ctx.collective_rows();
    if rows.is_empty() {
        return Outcome::na(NO_MATCHED);
    }
    let v = super::ranks::verdict(ctx);
    if let super::ranks::Verdict::Unknown { .. } = v {
        return Outcome::na(v.sentence());
    }
    let late = v.late_set();
    // Each row's key read once: read in every comparison, rows on disk
    // were read 40 times each.
    let mut order: Vec<(Ns, usize)> = (0..rows.len())
        .map(|i| (rows.get(i).last_start, i))
        .collect();
    order.sort_unstable();
    // Per rank index: the step of its last replayed collective and what
    // the replay had gained on it by then; per (rank index, step): the
    // gain at its last collective in the step, put in when the rank's next
    // collective is in another step (or at the end), not at every member.
    // The sums below are of integers, so the map's order is moot.
    let mut gained: Vec<Option<(crate::model::Slot, Ns)>> = vec![None; ctx.trace.ranks.len()];
    let mut at_end: foldhash::HashMap<(u32, crate::model::Slot), Ns> = Default::default();
    let (mut members, mut arrive) = (Vec::new(), Vec::new());
    for (_, i) in order {
        let row = rows.get(i);
        members.clear();
        members.extend(ctx.members(&row));
        let before = |m: &Member| match gained[m.index as usize] {
            Some((step, g)) if step == m.step => g,
            _ => Ns::ZERO,
        };
        arrive.clear();
        arrive.extend(members.iter().map(|m| m.start - before(m)));
        let on_time = members
            .iter()
            .zip(&arrive)
            .filter(|(m, _)| !late.contains(&m.rank))
            .map(|(_, &a)| a)
            .max();
        if let Some(t) = on_time {
            for (m, a) in members.iter().zip(arrive.iter_mut()) {
                if late.contains(&m.rank) {
                    *a = (*a).min(t);
                }
            }
        }
        let Some(&barrier) = arrive.iter().max() else {
            continue;
        };
        for m in &members {
            let gain = (m.end() - (barrier + m.transfer)).max(Ns::ZERO);
            let last = &mut gained[m.index as usize];
            if let Some((step, g)) = *last {
                if step != m.step {
                    at_end.insert((m.index, step), g);
                }
            }
            *last = Some((m.step, gain));
        }
    }
    for (ri, last) in (0u32..).zip(&gained) {
        if let Some((step, g)) = *last {
            at_end.insert((ri, step), g);
        }
    }
    // Rank indices fit: ranks are numbered in u32 slots.
    let index: std::collections::HashMap<u32, u32> = (0u32..)
        .zip(&ctx.trace.ranks)
        .map(|(i, t)| (t.rank, i))
        .collect();
    // Each rank's gains in its counted steps, summed in one pass over them
    // all (a pass per rank was 2 million looks at 1,024 ranks).
    let mut counted: Vec<Option<&crate::model::RankTimeline>> = vec![None; ctx.trace.ranks.len()];
    for t in &ctx.ranks {
        if let Some(&ri) = index.get(&t.rank) {
            counted[ri as usize] = Some(t);
        }
    }
    let mut total = vec![Ns::ZERO; counted.len()];
    for (&(ri, step), &g) in &at_end {
        if counted[ri as usize].is_some_and(|t| t.counts(step)) {
            total[ri as usize] += g;
        }
    }
    let savings = ctx
        .rank_rows()
        .iter()
        .zip(&ctx.ranks)
        .filter(|(r, _)| r.step_time.is_some())
        .map(|(row, t)| {
            let total = index
                .get(&t.rank)
                .map_or(Ns::ZERO, |&ri| total[ri as usize]);
            (row, total / t.step_count() as i64)
        })
        .collect();
    step_minus(savings, "the late ranks' delay")
}

/// Step time with all communication hidden under compute: the measured step
/// minus its exposed communication (waiting included).
pub(crate) fn full_overlap_step(ctx: &Ctx) -> Outcome {
    if !ctx.ranks.iter().any(|t| t.ops.iter().any(|o| o.is_comm())) {
        return Outcome::na("the trace has no communication ops");
    }
    step_minus(
        ctx.rank_rows()
            .iter()
            .filter(|r| r.step_time.is_some())
            .map(|r| (r, r.exposed_comm))
            .collect(),
        "exposed communication",
    )
}

/// Step time had every sized collective transferred at the card's link
/// bandwidth: each member's transfer above S × factor / link is saved.
pub(crate) fn link_bandwidth_step(ctx: &Ctx) -> Outcome {
    let link = match super::collectives::link_gbps(ctx) {
        Ok((gbps, _)) => gbps * 1e9 / 8.0,
        Err(na) => return na,
    };
    if ctx.collective_rows().is_empty() {
        return Outcome::na(NO_MATCHED);
    }
    if !ctx.collective_rows().iter().any(|c| c.busbw().is_some()) {
        return Outcome::na("no matched collective has a known size and kind");
    }
    step_minus(
        per_step_saving(
            ctx,
            |c| {
                let ideal = c.data_bytes? as f64 * c.kind?.bus_factor(c.size)? / link * 1e9;
                Some(Ns::rounded(ideal))
            },
            |_, ideal, m| Some(m.transfer - (*ideal)?),
        ),
        "transfer beyond the link's bandwidth",
    )
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{eval, trace, value, with_card};

    #[test]
    fn late_pair_without_its_straggler() {
        // One 100 µs step; rank 0 waits 30 µs for rank 1 inside a 50 µs
        // all-reduce and has no compute: all 50 µs are exposed. Rank 1's
        // all-reduce (20 µs) is exposed too. Without the lateness the
        // all-reduce ends 30 µs sooner on both: 70 µs; rank 1 can save at
        // most its exposed 20 µs: 80 µs. Mean 75 µs.
        let t = trace(&crate::synth::late_pair());
        let v = value(&t, "whatif_no_straggler_step_s", None);
        assert!((v - 75e-6).abs() < 1e-12, "{v}");
        // All communication hidden: 100 − 50 and 100 − 20 µs.
        let v = value(&t, "whatif_full_overlap_step_s", None);
        assert!((v - 65e-6).abs() < 1e-12, "{v}");
    }

    /// Two 100 µs steps; rank 1 is late at the first all-reduce of each:
    /// by 30 µs at 10-60 µs (a second all-reduce follows at 70-80 µs,
    /// nobody late) and by 10 µs at 110-140 µs. Replayed, each step's last
    /// collective ends 30 and 10 µs sooner on both ranks (the gain carried
    /// through the second all-reduce of step 1, and not into step 2): 20 µs
    /// per step, within either rank's exposed communication (45 and 25 µs
    /// per step). 100 − 20 = 80 µs.
    #[test]
    fn a_steps_saving_is_its_last_collectives_gain() {
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        let ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        let mut ranks: Vec<_> = (0..2)
            .map(|r| crate::synth::RankTrace::new(Some(r), 2, 10))
            .collect();
        for t in &mut ranks {
            t.step(1, 0.0, 100.0);
            t.step(2, 100.0, 100.0);
        }
        ranks[0].collective(ar, 10.0, 50.0, 20, &c);
        ranks[1].collective(ar, 40.0, 20.0, 20, &c);
        for t in &mut ranks {
            t.collective(ar, 70.0, 10.0, 20, &c);
        }
        ranks[0].collective(ar, 110.0, 30.0, 20, &c);
        ranks[1].collective(ar, 120.0, 20.0, 20, &c);
        let t = trace(&ranks);
        assert_eq!(value(&t, "slowest_rank", None), 1.0);
        let v = value(&t, "whatif_no_straggler_step_s", None);
        assert!((v - 80e-6).abs() < 1e-12, "{v}");
    }

    /// Rank 1 arrives 30 µs late at an all-reduce with rank 0 (group a),
    /// then all three ranks all-reduce at 100 µs (group b), where rank 2,
    /// busy until then, is last. Without rank 1's delay the first ends 30
    /// µs sooner, but the second still waits for rank 2: nothing is saved,
    /// and the step stays 150 µs. (Summing each collective's gain alone
    /// saved 30 µs on ranks 0 and 1.)
    #[test]
    fn a_gain_absorbed_by_a_later_barrier_saves_nothing() {
        let c2 = crate::synth::Coll::all_reduce_f32(1, 2);
        let c3 = crate::synth::Coll::all_reduce_f32(1, 3);
        let ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        let mut ranks: Vec<_> = (0..3)
            .map(|r| crate::synth::RankTrace::new(Some(r), 3, 10))
            .collect();
        for t in &mut ranks {
            t.step(1, 0.0, 150.0);
        }
        ranks[0].collective_in(ar, 10.0, 50.0, 20, &c2, ("a", &[0, 1]));
        ranks[1].kernel("gemm", 0.0, 40.0, 7, 10);
        ranks[1].collective_in(ar, 40.0, 20.0, 20, &c2, ("a", &[0, 1]));
        ranks[2].kernel("gemm", 0.0, 100.0, 7, 10);
        for t in &mut ranks {
            t.collective_in(ar, 100.0, 20.0, 20, &c3, ("b", &[0, 1, 2]));
        }
        let t = trace(&ranks);
        assert_eq!(value(&t, "slowest_rank", None), 1.0);
        let v = value(&t, "whatif_no_straggler_step_s", None);
        assert!((v - 150e-6).abs() < 1e-12, "{v}");
    }

    /// One 100 µs step on the CPU; rank 0's all-reduce, launched in it,
    /// runs 10-160 µs with nothing under it: 150 µs exposed, more than the
    /// step. A step less its communication would be -50 µs: not a value.
    #[test]
    fn a_device_behind_its_steps_has_no_what_if() {
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        let mut ranks = vec![
            crate::synth::RankTrace::new(Some(0), 2, 10),
            crate::synth::RankTrace::new(Some(1), 2, 10),
        ];
        for (r, (start, dur)) in ranks.iter_mut().zip([(10.0, 150.0), (40.0, 120.0)]) {
            r.step(1, 0.0, 100.0);
            r.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                start,
                dur,
                20,
                &c,
            );
        }
        let t = trace(&ranks);
        for m in ["whatif_full_overlap_step_s", "whatif_no_straggler_step_s"] {
            let out = eval(&t, m, None);
            assert!(out.as_value().is_none(), "{m}: {out:?}");
            let why = format!("{out:?}");
            assert!(
                why.contains(
                    "rank 0's exposed communication per step (150 µs) exceeds its step (100 µs)"
                ),
                "{m}: {why}"
            );
        }
    }

    #[test]
    fn link_bandwidth_needs_a_card_and_sizes() {
        let mut t = trace(&crate::synth::late_pair());
        assert!(eval(&t, "whatif_link_bandwidth_step_s", None)
            .as_value()
            .is_none());
        with_card(&mut t);
        // The sample card's link moves the 4-byte all-reduce in well under a
        // nanosecond: each member's whole transfer (20 µs) is saved, within
        // what is exposed (50 and 20 µs): 80 µs on both ranks.
        let v = value(&t, "whatif_link_bandwidth_step_s", None);
        assert!((v - 80e-6).abs() < 1e-12, "{v}");
    }
}
