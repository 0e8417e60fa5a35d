//! One rank's profiling windows (a file per profiler cycle) joined into one
//! timeline, in time order.

use super::build::step_at;
use super::{CpuThread, Interval, Ns, RankTimeline, StrId, Warning};

/// Joins one rank's windows, recorded in this order, into one timeline:
/// names are re-interned, collective and step indexes moved past the earlier
/// windows', and ops placed in their launch step again. Linear in the events:
/// a rank of 12,000 windows is joined once, not re-sorted per window. Warns
/// when windows overlap in time or disagree on the world size.
pub fn join(windows: Vec<RankTimeline>) -> Option<(RankTimeline, Vec<Warning>)> {
    let mut windows = windows.into_iter();
    let mut t = windows.next()?;
    // Each kind of disagreement said once for all the windows it concerns:
    // a rank of 100,000 windows gets one line, not 100,000.
    let (mut overlapping, mut other_world) = (Vec::new(), Vec::new());
    for later in windows {
        let source = later.source.display().to_string();
        let (overlaps, world) = t.append(later);
        if overlaps {
            overlapping.push(source.clone());
        }
        if let Some(w) = world {
            other_world.push(format!("{source} (world size {w})"));
        }
    }
    let mut warnings = Vec::new();
    warnings.extend(summarised(
        &overlapping,
        "overlaps the profiling window before it; both are kept",
        "overlap the profiling window before them; all are kept",
    ));
    if let Some(w) = t.world_size {
        warnings.extend(summarised(
            &other_world,
            &format!("the windows before it say world size {w}; the first is kept"),
            &format!("disagree with the first window's world size {w}; the first is kept"),
        ));
    }
    if !overlapping.is_empty() {
        // Rare: keep the builder's invariants (sorted steps and ops); launch
        // counts per step cannot be redone without the calls.
        t.steps.sort_by_key(|s| (s.start, s.number));
        t.launch_by_step = vec![(0, Ns::ZERO); t.steps.len()];
        super::build::sort_ops(&mut t.ops);
        std::sync::Arc::make_mut(&mut t.annotations).sort_by_key(|a| a.start);
    }
    let steps = &t.steps;
    for o in &mut t.ops {
        o.step = step_at(steps, o.launch).into();
    }
    Some((t, warnings))
}

/// Windows named in a warning before the rest are counted.
const NAMED: usize = 3;

/// One warning for `windows`: `one` after the name of a single window, or
/// `many` after a count and the first few names.
fn summarised(windows: &[String], one: &str, many: &str) -> Option<Warning> {
    match windows {
        [] => None,
        [w] => Some(Warning::reading(format!("{w}: {one}"))),
        _ => {
            let named = windows[..windows.len().min(NAMED)].join(", ");
            let more = windows.len().saturating_sub(NAMED);
            Some(Warning::reading(format!(
                "{} windows ({named}{}) {many}",
                windows.len(),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )))
        }
    }
}

impl RankTimeline {
    /// Appends `later`, recorded after this window; returns whether the two
    /// overlap in time (then the caller sorts once at the end), and the
    /// world size `later` states when it differs from this one's.
    fn append(&mut self, later: RankTimeline) -> (bool, Option<u32>) {
        let ids: Vec<StrId> = (0..later.strings.len())
            .map(|i| self.strings.intern(later.strings.get(StrId(i as u32))))
            .collect();
        let id = |s: StrId| ids[s.0 as usize];
        let overlap = match (self.window, later.window) {
            (Some(a), Some(b)) => b.start < a.end,
            _ => false,
        };
        let other_world = match (self.world_size, later.world_size) {
            (Some(a), Some(b)) if a != b => Some(b),
            _ => None,
        };
        self.world_size = self.world_size.or(later.world_size);
        for mut th in later.cpu {
            for op in &mut th.ops {
                op.name = id(op.name);
            }
            match self.cpu.iter_mut().find(|h| h.tid == th.tid) {
                Some(h) => {
                    let mut ops = std::mem::take(&mut h.ops);
                    ops.append(&mut th.ops);
                    *h = CpuThread::new(h.tid, h.launches + th.launches, ops);
                }
                None => self.cpu.push(th),
            }
        }
        for g in later.groups {
            if !self.groups.iter().any(|h| h.name == g.name) {
                self.groups.push(g);
            }
        }
        let colls = u32::try_from(self.colls.len()).unwrap_or(u32::MAX);
        self.colls.extend(later.colls.into_iter().map(|mut c| {
            c.name = id(c.name);
            c.pg_name = c.pg_name.map(id);
            c.pg_ranks = c.pg_ranks.map(id);
            c
        }));
        self.ops
            .vec_mut()
            .extend(later.ops.into_vec().into_iter().map(|mut o| {
                o.name = id(o.name);
                o.meta = o.meta.get().map(|m| m.saturating_add(colls)).into();
                o
            }));
        std::sync::Arc::make_mut(&mut self.annotations).extend(
            std::sync::Arc::unwrap_or_clone(later.annotations)
                .into_iter()
                .map(|mut a| {
                    a.name = id(a.name);
                    a
                }),
        );
        self.steps.extend(later.steps);
        self.launch_by_step.extend(later.launch_by_step);
        for d in later.devices {
            if !self.devices.iter().any(|x| x.id == d.id) {
                self.devices.push(d);
            }
        }
        self.window = match (self.window, later.window) {
            (Some(a), Some(b)) => Some(Interval::new(a.start.min(b.start), a.end.max(b.end))),
            (a, b) => a.or(b),
        };
        self.flops = match (self.flops, later.flops) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.launch_calls = self.launch_calls.saturating_add(later.launch_calls);
        self.launch_time = self.launch_time.saturating_add(later.launch_time);
        self.engine_steps &= later.engine_steps;
        // Windows whose files state different zeros: neither holds for both.
        self.epoch = match (self.epoch, later.epoch) {
            (Some(a), Some(b)) => (a == b).then_some(a),
            (a, b) => a.or(b),
        };
        (overlap, other_world)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{join, Warning};
    use crate::build::TimelineBuilder;
    use crate::timeline::SourceFormat;
    use crate::Ns;
    use crate::{Activity, DeviceOp, KernelClass, RankTimeline};

    fn window(source: &str, at: i64, kernel: &str, step: i64) -> RankTimeline {
        let mut b = TimelineBuilder::new(Path::new(source), SourceFormat::PyTorch);
        b.span(Ns(at), Ns(100)).unwrap();
        b.push_step(step, Ns(at), Ns(at + 100));
        let name = b.intern(kernel);
        b.push_op(DeviceOp {
            launch: Ns(at + 5),
            ..DeviceOp::new(
                name,
                Activity::Kernel,
                KernelClass::Gemm,
                Ns(at + 10),
                Ns(50),
            )
        })
        .unwrap();
        b.finish().0
    }

    #[test]
    fn windows_join_in_time_order() {
        let (t, warnings) = join(vec![
            window("a.json", 0, "gemm_a", 5),
            window("b.json", 1_000, "gemm_b", 10),
        ])
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<&str> = t.ops.iter().map(|o| t.name(o.name)).collect();
        assert_eq!(names, ["gemm_a", "gemm_b"]);
        assert_eq!(
            t.steps.iter().map(|s| s.number).collect::<Vec<_>>(),
            [5, 10]
        );
        // Each op stays in the step that launched it.
        assert_eq!(
            t.ops.iter().map(|o| o.step.get()).collect::<Vec<_>>(),
            [Some(0), Some(1)]
        );
        assert_eq!(
            t.window.map(|w| (w.start, w.end)),
            Some((Ns::ZERO, Ns(1_100)))
        );
    }

    #[test]
    fn overlapping_windows_are_kept_with_a_warning() {
        let (t, w) = join(vec![
            window("a.json", 1_000, "gemm_a", 5),
            window("b.json", 0, "gemm_a", 4),
        ])
        .unwrap();
        assert_eq!(
            w,
            [Warning::reading(
                "b.json: overlaps the profiling window before it; both are kept"
            )]
        );
        assert_eq!(t.steps.iter().map(|s| s.number).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(
            t.ops.iter().map(|o| o.step.get()).collect::<Vec<_>>(),
            [Some(0), Some(1)]
        );
        // One name, interned once.
        assert_eq!(t.ops[0].name, t.ops[1].name);
    }

    #[test]
    fn many_overlapping_windows_are_one_warning() {
        let windows = (0..1000)
            .map(|i| window(&format!("w{i}.json"), 0, "gemm_a", i))
            .collect();
        let (t, w) = join(windows).unwrap();
        assert_eq!(
            w,
            [Warning::reading(
                "999 windows (w1.json, w2.json, w3.json and 996 more) overlap the profiling \
              window before them; all are kept"
            )]
        );
        assert_eq!(t.steps.len(), 1000);
    }
}
