//! Clock alignment on traces read by the Kineto reader.

use crate::metrics::testing::trace;
use crate::model::clock::*;
use crate::model::collectives::instances;
use crate::model::trace::Offset;
use crate::model::{Ns, Trace};
use crate::synth::{Coll, RankTrace};

/// Two ranks with `n` all-reduces 100 ms apart, each 50 µs long; rank 1's
/// clock reads `offset_us` more and gains `ppm` per million.
fn pair(n: usize, offset_us: f64, ppm: f64, with_colls: bool) -> Trace {
    let ar = Coll::all_reduce_f32(1 << 20, 2);
    let mut ranks = vec![
        RankTrace::new(Some(0), 2, 10),
        RankTrace::new(Some(1), 2, 10),
    ];
    for (r, t) in ranks.iter_mut().enumerate() {
        let clock = |x: f64| {
            if r == 0 {
                x
            } else {
                x + offset_us + x * ppm * 1e-6
            }
        };
        for k in 0..n {
            let start = 1000.0 + k as f64 * 100_000.0;
            if with_colls {
                t.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    clock(start),
                    50.0,
                    7,
                    &ar,
                );
            } else {
                t.kernel("gemm", clock(start), 50.0, 7, 8);
            }
        }
    }
    trace(&ranks)
}

fn findings(t: &Trace, align: bool) -> Vec<String> {
    let inst = instances(t);
    let s = samples(t, &inst);
    let offsets = estimate_offsets(t, &inst);
    let measured: Vec<_> = s.iter().map(|s| measure(s)).collect();
    check(t, &measured, align.then_some(&offsets[..]))
}

#[test]
fn one_clock_is_fine() {
    assert!(findings(&pair(20, 3.0, 0.0, true), true).is_empty());
}

#[test]
fn another_epoch_is_found_and_said_to_be_aligned() {
    // Rank 1 stamps Unix time (1.7e9 s), rank 0 time since boot.
    let f = findings(&pair(20, 1.7e15, 0.0, true), true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with("rank 1: its clock reads 1700000000 s ahead of rank 0's"),
        "{f:?}"
    );
    assert!(f[0].ends_with("aligned on 20 shared collectives"), "{f:?}");
    // Nothing to align by: the cross-rank timings are not to be trusted.
    let f = findings(&pair(20, -1.7e15, 0.0, false), true);
    assert!(f[0].contains("behind rank 0's"), "{f:?}");
    assert!(f[0].contains("not meaningful"), "{f:?}");
}

/// 100 collectives 0.1 s apart, the clocks 0.01 ppm apart (10 ns over the
/// 9.9 s), ±1 µs of jitter; the last 28 end 50 µs late on rank 1 (its
/// offset 50 µs lower). Half the later half is late: the medians of the two
/// halves, as drift was read before, call that 10 ppm; a repeated median
/// over all of them 0.48 ppm. Left out as off the line, they tilt nothing.
#[test]
fn a_late_bunch_of_collectives_is_not_drift() {
    let s: Vec<(Ns, Ns)> = (0..100i64)
        .map(|k| {
            let t = Ns(k * 100_000_000);
            let jitter = if k % 2 == 0 { 1_000 } else { -1_000 };
            let late = if k >= 72 { -50_000 } else { 0 };
            let drift = -Ns::rounded(0.01e-6 * t.as_f64()).get();
            (t, Ns(drift + jitter + late))
        })
        .collect();
    let ppm = drift_ppm(&s).unwrap();
    // ±1 µs over baselines of 5 s or more: a tenth of a ppm is the noise.
    assert!((ppm - 0.01).abs() < 0.1, "{ppm}");
    // And with no drift and no late ones, none: every slope is jitter.
    let flat: Vec<(Ns, Ns)> = (0..100i64)
        .map(|k| {
            (
                Ns(k * 100_000_000),
                Ns(if k % 2 == 0 { 1_000 } else { -1_000 }),
            )
        })
        .collect();
    assert!(drift_ppm(&flat).unwrap().abs() < 0.1);
    assert_eq!(drift(&flat), None);
}

/// The shape of a real 4-process PAX run (nsys-jax): 4 collectives in the
/// first minute of start-up (at 0, 0.05, 0.1 and 27 s), then 116 in the
/// last second of the 86 s, whose ends scatter ±40 µs between ranks (large
/// all-gathers), the clocks 0.01 ppm apart. Slopes between collectives
/// a few ms apart are that scatter over ms (thousands of ppm) and decided
/// the repeated median: it read 1.4 ppm, and warned of 122 µs. Fitted on
/// the long baselines it reads what four early ends can tell (±0.5 ppm),
/// within the scatter, and no warning is given.
#[test]
fn a_short_window_after_a_long_start_up_is_not_drift() {
    let mut seed = 12_345u64;
    let mut jitter = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        ((seed >> 33) % 80_001) as i64 - 40_000
    };
    let mut at: Vec<i64> = vec![0, 50_000_000, 100_000_000, 27_000_000_000];
    at.extend((0..116).map(|k| 85_200_000_000 + k * 8_000_000));
    let s: Vec<(Ns, Ns)> = at
        .iter()
        .map(|&t| {
            let drift = -Ns::rounded(0.01e-6 * t as f64).get();
            (Ns(t), Ns(drift + jitter()))
        })
        .collect();
    // Four early ends ±40 µs over 85 s: ±0.5 ppm is all the data can tell.
    let ppm = drift_ppm(&s).unwrap();
    assert!(ppm.abs() < 0.6, "{ppm}");
    assert_eq!(drift(&s), None, "{ppm}");
}

#[test]
fn drift_is_measured_in_ppm() {
    // 20 collectives over 1.9 s, rank 1 gains 50 ppm: 95 µs by the end.
    let t = pair(20, 0.0, 50.0, true);
    let inst = instances(&t);
    let s = samples(&t, &inst);
    // Every pair's slope is 50 ppm: so is the repeated median.
    let ppm = drift_ppm(&s[1]).unwrap();
    assert!((ppm - 50.0).abs() < 0.01, "{ppm}");
    let f = findings(&t, true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with(
            "rank 1: its clock runs 50.0 ppm fast against rank 0's (95.0 µs over the 1.90 s"
        ),
        "{f:?}"
    );
    assert!(f[0].ends_with("off by up to 47.5 µs at the ends"), "{f:?}");
    // Ends 5 ms apart on alternate collectives: not the same calls.
    let mut t = pair(20, 0.0, 0.0, true);
    for (k, op) in t.ranks[1].ops.iter_mut().enumerate() {
        op.start += if k % 2 == 0 {
            Ns(5_000_000)
        } else {
            Ns(-5_000_000)
        };
    }
    let f = findings(&t, true);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].starts_with("rank 1: the collectives matched with rank 0's end ±5.00 ms apart (median deviation over 20)"), "{f:?}");
    // 1 ppm over 1.9 s is 1.9 µs: below the floor, not reported.
    assert!(findings(&pair(20, 0.0, 1.0, true), true).is_empty());
}

#[test]
fn recovers_injected_offsets() {
    // The simulated run ends each collective on all ranks at once; shift
    // rank 3 by +0.8 ms and rank 6 by −3 s, then estimate.
    let mut t = crate::metrics::testing::trace(&crate::synth::training_run(
        &crate::synth::RunShape::default(),
    ));
    let injected: Vec<Ns> = (0..8)
        .map(|r| match r {
            3 => Ns(800_000),
            6 => Ns(-3_000_000_000),
            _ => Ns::ZERO,
        })
        .collect();
    let shift: Vec<Offset> = injected
        .iter()
        .enumerate()
        .map(|(r, &d)| Offset {
            rank: r as u32,
            offset: d,
            spread: Ns::ZERO,
            samples: 0,
        })
        .collect();
    t.shift(&shift);
    let inst = instances(&t);
    // 3 steps × (8 all-gathers + 8 reduce-scatters + 1 all-reduce) in one group.
    assert_eq!(inst.len(), 51);
    let est = estimate_offsets(&t, &inst);
    for (r, o) in est.iter().enumerate() {
        assert!(
            (o.offset + injected[r]).abs() <= Ns(5_000),
            "rank {r}: {o:?}"
        );
        assert_eq!(o.samples, 51);
    }
    t.shift(&est);
    let again = estimate_offsets(&t, &instances(&t));
    assert!(
        again.iter().all(|o| o.offset.abs() <= Ns(1_000)),
        "{again:?}"
    );
}
