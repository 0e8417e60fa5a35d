//! Collective matching, arrivals and waits on traces read by the Kineto reader.

use crate::metrics::testing::trace;
use crate::model::collectives::*;
use crate::model::trace::Offset;
use crate::model::{DeviceOp, Ns, Trace};
use crate::synth::{training_run, RunShape};

#[test]
fn the_straggler_arrives_last() {
    // In the sample run rank 5 computes 1.3x slower: it starts every
    // collective last, so its row of the heatmap is the late one.
    let t = trace(&training_run(&RunShape::default()));
    let a = arrivals(&t, &instances(&t));
    assert_eq!(a.steps, vec![(1, 0), (2, 0), (3, 0)]);
    assert_eq!(a.collectives, 51);
    let most = (0..8).max_by_key(|&r| a.last[r]).unwrap();
    assert_eq!(most, 5);
    assert!(a.last[5] >= 40, "{:?}", a.last);
    assert!(a.late[5].iter().all(|l| l.unwrap() > Ns::ZERO));
    assert!(a.last_by[5] > Ns::ZERO);
}

/// Four ranks starting one all-reduce at 10, 40, 40 and 25 µs: the
/// latest is rank index 1 (the lowest of the two at 40), the next-latest
/// started at 40 too, so it caused no wait; with rank 2 at 35 instead it
/// caused 5 µs. Two ranks take part in every one, from their sequences.
#[test]
fn the_latest_member_by_hand() {
    let c = crate::synth::Coll::all_reduce_f32(1, 4);
    let run = |starts: [f64; 4]| {
        let mut ranks: Vec<_> = (0..4)
            .map(|r| crate::synth::RankTrace::new(Some(r), 4, 10))
            .collect();
        for (r, s) in ranks.iter_mut().zip(starts) {
            r.step(1, 0.0, 100.0);
            r.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", s, 50.0, 20, &c);
        }
        trace(&ranks)
    };
    let t = run([10.0, 40.0, 40.0, 25.0]);
    let inst = instances(&t);
    assert_eq!(inst.len(), 1);
    let i = inst.get(0);
    assert_eq!(i.len(), 4);
    let (r, _, caused) = i.latest(&t).unwrap();
    assert_eq!((r, caused), (1, Ns::ZERO));
    assert_eq!(i.last_start(&t), Ns(40_000));
    let t = run([10.0, 40.0, 35.0, 25.0]);
    let (r, _, caused) = instances(&t).get(0).latest(&t).unwrap();
    assert_eq!((r, caused), (1, Ns(5_000)));
}

/// Members of one collective starting at the given µs, each op lasting
/// the given µs.
fn members(at: &[(f64, f64)]) -> Vec<MemberOp> {
    at.iter()
        .enumerate()
        .map(|(r, &(start, dur))| MemberOp {
            r,
            o: 0,
            op: DeviceOp::new(
                crate::model::StrId(0),
                crate::model::Activity::Kernel,
                crate::model::KernelClass::Communication,
                Ns::rounded(start * 1e3),
                Ns::rounded(dur * 1e3),
            ),
        })
        .collect()
}

/// Three members at 0, 10 and 30 µs. Over [0, 10) the first waits while
/// the other two are absent: 5 µs each. Over [10, 30) the first two
/// wait for the third: 2 x 20 µs to it. Charged 0, 5, 45: the 50 µs of
/// waiting (30 + 20) in full. Had the third been on time, the first
/// would have waited 5 + 20 µs less and the second 20.
#[test]
fn blame_by_hand() {
    let b = Blame::of(&members(&[(0.0, 100.0), (10.0, 100.0), (30.0, 100.0)]));
    assert_eq!(b.charged(), [Ns(0), Ns(5_000), Ns(45_000)]);
    assert_eq!(
        b.explained_by(&[false, false, true]),
        [Ns(25_000), Ns(20_000), Ns(0)]
    );
    // The first op lasts 15 µs: it waits 15, not 30. [0, 10): 5 and 5;
    // [10, 15): two waiters, 10 to the third; [15, 30): 15 to it.
    let b = Blame::of(&members(&[(0.0, 15.0), (10.0, 100.0), (30.0, 100.0)]));
    assert_eq!(b.charged(), [Ns(0), Ns(5_000), Ns(30_000)]);
}

/// A late pair: ranks 0 and 3 start at 0, ranks 1 and 2 at 164 ms
/// together. Each early rank waits 164 ms, shared by the two late ones:
/// 164 ms charged to each, where the last one's margin over the
/// next-latest is nothing.
#[test]
fn a_late_pair_shares_the_blame() {
    let ms = 1e3;
    let b = Blame::of(&members(&[
        (0.0, 200.0 * ms),
        (164.0 * ms, 3.0 * ms),
        (164.0 * ms, 3.0 * ms),
        (0.0, 200.0 * ms),
    ]));
    let c = Ns(164_000_000);
    assert_eq!(b.charged(), [Ns::ZERO, c, c, Ns::ZERO]);
    assert_eq!(
        b.explained_by(&[false, true, true, false]),
        [c, Ns::ZERO, Ns::ZERO, c]
    );
    assert_eq!(
        latest_of(&members(&[(0.0, 1.0), (5.0, 1.0), (5.0, 1.0)]))
            .unwrap()
            .2,
        Ns::ZERO
    );
}

/// Offsets are applied only when trusted: rank 1 (spread 2 µs, 50 µs
/// off) moves; rank 2 (within 10 µs: one host clock) keeps its raw
/// clock; rank 3 (spread 3 ms against a 100 µs step: limit 20 µs) is
/// kept raw and makes the clocks doubtful.
#[test]
fn only_trusted_offsets_are_applied() {
    let t = trace(&crate::synth::late_pair());
    let o = |rank, offset, spread| Offset {
        rank,
        offset: Ns(offset),
        spread: Ns(spread),
        samples: 10,
    };
    let (got, doubt) = trusted(
        &t,
        vec![
            o(0, 0, 0),
            o(1, 50_000, 2_000),
            o(2, 8_000, 1_000),
            o(3, 7_400_000, 3_000_000),
        ],
    );
    let offsets: Vec<Ns> = got.iter().map(|o| o.offset).collect();
    assert_eq!(offsets, [Ns(0), Ns(50_000), Ns(0), Ns(0)]);
    let doubt = doubt.expect("rank 3 is doubtful");
    assert!(
        doubt.contains("rank 3 ±3.00 ms over 10 collectives"),
        "{doubt}"
    );
    assert!(doubt.contains("at most 20.0 µs"), "{doubt}");
}

/// Four ranks on one host, three steps of 1 ms: rank 1 sends to rank 2
/// (a long transfer, 300 µs), then all four all-reduce at the step's
/// end. With `Dst Rank` / `Src Rank` recorded, each send pairs with its
/// recv (2 members) and the all-reduces with each other (4 members):
/// 3 + 3 instances, every member in its own step. Without them the
/// send/recv sit in the group's sequence on ranks 1 and 2 only: the
/// first position already differs in kind, so nothing is matched (and a
/// finding says so) rather than pairing one step's all-reduce with
/// another's send.
fn send_then_all_reduce(peers: bool) -> Trace {
    let c = crate::synth::Coll::all_reduce_f32(1 << 20, 4);
    let ranks: Vec<_> = (0..4u32)
        .map(|r| {
            let mut t = crate::synth::RankTrace::new(Some(r), 4, 10);
            for k in 0..3 {
                let at = 1000.0 * f64::from(k);
                t.step(k + 1, at, 1000.0);
                match r {
                    1 => {
                        t.p2p(true, peers.then_some(2), at + 100.0, 300.0, 4);
                    }
                    2 => {
                        t.p2p(false, peers.then_some(1), at + 100.0, 300.0, 4);
                    }
                    _ => {}
                }
                t.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    at + 500.0,
                    50.0,
                    20,
                    &c,
                );
            }
            t
        })
        .collect();
    trace(&ranks)
}

#[test]
fn a_send_pairs_with_its_recv() {
    let t = send_then_all_reduce(true);
    let inst = instances(&t);
    assert_eq!(inst.len(), 6);
    let sizes: Vec<usize> = inst.iter().map(|i| i.len()).collect();
    assert_eq!(sizes.iter().filter(|&&n| n == 4).count(), 3);
    assert_eq!(sizes.iter().filter(|&&n| n == 2).count(), 3);
    for i in inst.iter() {
        let steps: Vec<_> = i.member_ops(&t).iter().map(|m| m.op.step).collect();
        assert!(
            steps.iter().all(|s| *s == steps[0]),
            "{}: {steps:?}",
            i.group
        );
        if i.len() == 2 {
            assert_eq!(&**i.group, "0 p2p 1->2");
        }
    }
    assert!(disagreements(&t, &inst).is_empty());
    // Same host: the clocks are left alone.
    let offsets = crate::model::clock::estimate_offsets(&t, &inst);
    let (offsets, doubt) = trusted(&t, offsets);
    assert!(offsets.iter().all(|o| o.offset == Ns::ZERO), "{offsets:?}");
    assert_eq!(doubt, None);
}

#[test]
fn without_peers_matching_stops_where_the_calls_differ() {
    let t = send_then_all_reduce(false);
    let inst = instances(&t);
    assert_eq!(inst.len(), 0);
    let found = disagreements(&t, &inst);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("process group 0: the ranks' calls differ in kind at call 1"),
        "{found:?}"
    );
}

/// Two ranks' all-reduces, 100 µs apart, each carrying the `Seq` given.
fn with_seqs(seqs: [[u64; 3]; 2]) -> Trace {
    let c = crate::synth::Coll::all_reduce_f32(1 << 20, 2);
    let ranks: Vec<_> = (0..2u32)
        .zip(seqs)
        .map(|(r, seqs)| {
            let mut t = crate::synth::RankTrace::new(Some(r), 2, 10);
            for (k, seq) in seqs.into_iter().enumerate() {
                let at = 100.0 * k as f64;
                t.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", at, 50.0, 20, &c);
                t.last_arg("Seq", serde_json::json!(seq));
            }
            t
        })
        .collect();
    trace(&ranks)
}

/// Rank 1's profiler started one call later: its all-reduces carry
/// `Seq` 2, 3, 4 where rank 0's carry 1, 2, 3. Lined up by `Seq`, rank
/// 0's first call is left out and its calls 2 and 3 pair with rank 1's
/// first two; by position, every pair would have been one call apart.
#[test]
fn calls_are_lined_up_by_sequence_number() {
    let t = with_seqs([[1, 2, 3], [2, 3, 4]]);
    assert_eq!(
        t.ranks[1].colls.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [Some(2), Some(3), Some(4)]
    );
    let inst = instances(&t);
    assert_eq!(inst.len(), 2);
    for i in inst.iter() {
        let seqs: Vec<_> = i
            .pairs()
            .map(|(r, o)| t.ranks[r].coll_meta(&t.ranks[r].ops[o]).unwrap().seq)
            .collect();
        assert_eq!(seqs[0], seqs[1], "{seqs:?}");
    }
    assert_eq!(inst.lead("0", 0), 1);
    assert_eq!(inst.of_op(&t.ranks[0], 0), None);
    assert_eq!(inst.of_op(&t.ranks[0], 1), Some(0));
    assert_eq!(inst.of_op(&t.ranks[1], 0), Some(0));
    // A rank's walk finds the same pairs. Rank 0's calls at 100 and 200
    // µs start last and wait for nothing; rank 1's at 0 and 100 wait
    // for them, at most their 50 µs.
    let w = wait_intervals(&t, &inst);
    let iv = |a, b| crate::model::Interval::new(Ns(a), Ns(b));
    assert_eq!(
        w[0].iter().map(|x| x.1).collect::<Vec<_>>(),
        [iv(100_000, 100_000), iv(200_000, 200_000)]
    );
    assert_eq!(
        w[1].iter().map(|x| x.1).collect::<Vec<_>>(),
        [iv(0, 50_000), iv(100_000, 150_000)]
    );
    assert!(disagreements(&t, &inst).is_empty());
}

/// Rank 1 skipped `Seq` 2 (a call it did not issue): at the second
/// position the members differ in sequence number, and matching stops
/// after the first call.
#[test]
fn a_sequence_number_mismatch_stops_matching() {
    let t = with_seqs([[1, 2, 3], [1, 3, 4]]);
    let inst = instances(&t);
    assert_eq!(inst.len(), 1);
    let found = disagreements(&t, &inst);
    assert!(
        found[0].contains("differ in sequence number at call 2"),
        "{found:?}"
    );
    // The load says it as a matching warning, not a clock one.
    let mut t = t;
    let said = crate::session::load::check_and_align_clocks(&mut t, true);
    let w = said
        .iter()
        .find(|w| w.text == found[0])
        .expect("said by the load");
    assert_eq!(w.kind, crate::model::warning::Kind::Matching);
}

/// Rank 1's second all-reduce moves bf16 where rank 0's moves fp32: not
/// one call, so matching stops after the first.
#[test]
fn an_element_type_mismatch_stops_matching() {
    let f32 = crate::synth::Coll::all_reduce_f32(1 << 20, 2);
    let bf16 = crate::synth::Coll {
        dtype: "BFloat16",
        ..f32.clone()
    };
    let ranks: Vec<_> = (0..2u32)
        .map(|r| {
            let mut t = crate::synth::RankTrace::new(Some(r), 2, 10);
            for k in 0..3 {
                let c = if r == 1 && k == 1 { &bf16 } else { &f32 };
                t.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    100.0 * f64::from(k),
                    50.0,
                    20,
                    c,
                );
            }
            t
        })
        .collect();
    let t = trace(&ranks);
    let inst = instances(&t);
    assert_eq!(inst.len(), 1);
    let found = disagreements(&t, &inst);
    assert!(
        found[0].contains("differ in element type at call 2"),
        "{found:?}"
    );
}

/// A walk gives each instance's members as its pairs name them, with
/// their ops, whether the ops are held or spilled, read a value at a
/// time or in blocks; the passes made of it agree.
#[test]
fn a_walk_reads_each_members_op() {
    // More positions in a group than are gathered at a time (64).
    let shape = RunShape {
        steps: 11,
        ..RunShape::default()
    };
    let held = trace(&training_run(&shape));
    let mut spilled = held.clone();
    for t in &mut spilled.ranks {
        t.ops.spill(&crate::spill::TEMP_FILES).unwrap();
    }
    let inst = instances(&held);
    assert_eq!(inst, instances(&spilled));
    assert!(inst.iter().any(|i| i.seq > 64), "a group of 65 or more");
    for t in [&held, &spilled] {
        // Members gathered 64 positions at a time, 1 and 2 (of 8 members).
        for (bytes, min) in [(WALK_BYTES, MIN_VALUES), (1, 1), (8 * 72 * 2, 1)] {
            let mut seen = 0;
            inst.walk_in(t, bytes, min, |id, i, members| {
                assert_eq!(id, seen);
                assert_eq!(i.seq, inst.get(id).seq);
                assert_eq!(members, i.member_ops(&held));
                seen += 1;
            });
            assert_eq!(seen, inst.len());
        }
    }
    assert_eq!(arrivals(&held, &inst), arrivals(&spilled, &inst),);
    assert_eq!(wait_split(&held, &inst), wait_split(&spilled, &inst));
}

/// Every instance's id finds it again, by its group and position.
#[test]
fn an_instance_is_found_by_its_group_and_position() {
    let t = trace(&training_run(&RunShape::default()));
    let inst = instances(&t);
    for (id, i) in inst.iter().enumerate() {
        assert_eq!(inst.id_of(i.group, i.seq), Some(id));
    }
    assert_eq!(inst.id_of("no such group", 0), None);
}

#[test]
fn lateness_by_hand() {
    // `late_pair`: rank 1 starts the all-reduce 30 µs after rank 0.
    let t = trace(&crate::synth::late_pair());
    let a = arrivals(&t, &instances(&t));
    assert_eq!(a.late, vec![vec![Some(Ns::ZERO)], vec![Some(Ns(30_000))]]);
    assert_eq!(a.last, vec![0, 1]);
    assert_eq!(a.last_by, vec![Ns::ZERO, Ns(30_000)]);
}

#[test]
fn wait_is_until_the_last_member_starts() {
    let t = trace(&crate::synth::late_pair());
    let w = wait_split(&t, &instances(&t));
    let split = |wait, transfer| WaitSplit {
        wait,
        transfer,
        ops: 1,
        ..Default::default()
    };
    // Rank 1 started 30 µs late: it caused rank 0's 30 µs wait.
    let late = WaitSplit {
        caused: Ns(30_000),
        last: 1,
        ..split(Ns::ZERO, Ns(20_000))
    };
    assert_eq!(w, vec![split(Ns(30_000), Ns(20_000)), late]);
}

/// A rank's waits, found by walking its ops, are those of its members
/// of each matched collective: here 8 ranks and 51 collectives.
#[test]
fn waits_by_walk_are_the_members_waits() {
    let t = trace(&training_run(&RunShape::default()));
    let inst = instances(&t);
    let mut by_member = vec![Vec::new(); t.ranks.len()];
    for i in inst.iter() {
        let last = i.last_start(&t);
        for (r, o) in i.pairs() {
            let op = &t.ranks[r].ops[o];
            let end = last.clamp(op.start, op.end());
            by_member[r].push((op.stream, crate::model::Interval::new(op.start, end)));
        }
    }
    for w in &mut by_member {
        w.sort_by_key(|x| x.1.start);
    }
    assert_eq!(by_member[0].len(), 51);
    assert_eq!(wait_intervals(&t, &inst), by_member);
}

/// The n-th op of a group is in its n-th collective: a third all-reduce
/// on rank 0 alone (rank 1's trace cut off) waits for nothing.
#[test]
fn an_unmatched_op_has_no_wait() {
    let mut ranks = crate::synth::late_pair();
    let c = crate::synth::Coll::all_reduce_f32(1, 2);
    ranks[0].collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 70.0, 5.0, 20, &c);
    let t = trace(&ranks);
    let inst = instances(&t);
    assert_eq!(inst.len(), 1);
    let w = wait_intervals(&t, &inst);
    // Rank 0 waited from 10 µs until rank 1 started at 40 µs; rank 1 none.
    let iv = |a, b| crate::model::Interval::new(Ns(a), Ns(b));
    assert_eq!(
        w[0].iter().map(|x| x.1).collect::<Vec<_>>(),
        [iv(10_000, 40_000)]
    );
    assert_eq!(
        w[1].iter().map(|x| x.1).collect::<Vec<_>>(),
        [iv(40_000, 40_000)]
    );
}
