//! A rank's figures made in the map step (`derive::RankStats`), stored
//! beside its tables in its pack's `stats/<pack>.json`, so that the reduce
//! reads them and the rank's collectives (the `comm` table) instead of
//! every op.
//!
//! They are made as a load with the default preparation makes them (no
//! class rules, the measured steps only, clocks as read): a load with a
//! rules file or `--all-steps` reads every op and makes its own. What is
//! read back is checked like any table: a value out of range or a name
//! not in the rank's names is a damaged summary, never a figure.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::derive::kernels::{Acc, RankKernels};
use crate::derive::{sm::SmCoverage, RankStats, Unions};
use crate::model::build::MAX_OP_TIME;
use crate::model::time::in_range;
use crate::model::{Activity, Interval, IntervalSet, KernelClass, Ns, StrId};

/// The table of each rank's collectives (the ops table's columns).
pub(crate) const COMM: &str = "comm";
/// The folder of the stats files.
pub(crate) const STATS: &str = "stats";

/// The file of `pack`'s figures that the entry `e` lists (relative to the
/// summary): postcard (`.bin`), or a JSON list as summaries wrote them
/// before; and whether it is JSON.
pub(crate) fn figures_file<'e>(
    e: &'e super::manifest::Entry,
    pack: &str,
) -> Option<(&'e super::listed::Listed, bool)> {
    let file = |ext: &str| {
        let rel = format!("{STATS}/{pack}.{ext}");
        e.files.iter().find(|f| f.0 == rel)
    };
    (file("bin").map(|f| (f, false))).or_else(|| file("json").map(|f| (f, true)))
}

/// One timeline's figures, from its bytes in a file [`figures_file`] names.
pub(crate) fn decode(bytes: &[u8], json: bool) -> Result<Stored, String> {
    match json {
        true => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        false => postcard::from_bytes(bytes).map_err(|e| e.to_string()),
    }
}

/// The most ops (or ops of one name) a rank is taken to hold: 2^40.
const MAX_COUNT: u64 = 1 << 40;
/// The most bytes a rank's copies are taken to move: 2^52 (4 PiB).
const MAX_BYTES: u64 = 1 << 52;

/// Layout of a stats file; another one is not used (every op is read).
const VERSION: u32 = 2;

/// `RankStats` as stored: maps as sorted pairs (a file the same run writes
/// is the same bytes), the SM figure's float as its bits (exact).
#[derive(Debug, Serialize, Deserialize)]
pub struct Stored {
    version: u32,
    ops: usize,
    kernels: usize,
    kernel_sum: Ns,
    op_sum: Ns,
    kernel_class_sum: Vec<Ns>,
    op_class_sum: Vec<Ns>,
    counted_class_sum: Vec<Ns>,
    unclassified: Vec<(u32, Ns)>,
    copied: (u64, Ns),
    device_window: Option<(Ns, Ns)>,
    /// First kernel start to last kernel end (absent from older files).
    /// Written even when empty, as every field: the reduce's gathered
    /// copy is in an encoding that does not name its fields.
    #[serde(default)]
    kernel_window: Option<(Ns, Ns)>,
    /// `RedistributeBackward` CPU ops (absent from older files: none).
    #[serde(default)]
    iteration_marks: Vec<(Ns, Ns)>,
    window: Vec<(Ns, Ns)>,
    /// busy, comm, compute, compute or memory, comm under compute, exposed
    /// comm, exposed memory.
    whole: [Ns; 7],
    in_window: [Ns; 7],
    /// Communication kernels under compute, and communication kernels,
    /// within the measured steps' CPU ranges (version 2).
    step_overlap: (Ns, Ns),
    exposed: Vec<(Ns, Ns)>,
    sm: (Ns, u64, Ns, Ns),
    phases: Vec<Option<Ns>>,
    /// The kernel table: (name id, activity, class, count, total, longest)
    /// in order of first op, then (count, total, longest) per class.
    kernel_names: Vec<(u32, String, String, u64, Ns, Ns)>,
    kernel_classes: Vec<(u64, Ns, Ns)>,
    /// Per step, the device hull of its ops (absent from older files).
    #[serde(default)]
    step_hulls: Option<Vec<Option<(Ns, Ns)>>>,
}

fn pairs(m: &HashMap<StrId, Ns>) -> Vec<(u32, Ns)> {
    let mut v: Vec<(u32, Ns)> = m.iter().map(|(k, v)| (k.0, *v)).collect();
    v.sort_unstable();
    v
}

fn spans(s: &IntervalSet) -> Vec<(Ns, Ns)> {
    s.intervals().iter().map(|i| (i.start, i.end)).collect()
}

pub fn to_stored(s: &RankStats) -> Stored {
    Stored {
        version: VERSION,
        ops: s.ops,
        kernels: s.kernels,
        kernel_sum: s.kernel_sum,
        op_sum: s.op_sum,
        kernel_class_sum: s.kernel_class_sum.to_vec(),
        op_class_sum: s.op_class_sum.to_vec(),
        counted_class_sum: s.counted_class_sum.to_vec(),
        unclassified: pairs(&s.unclassified),
        copied: s.copied,
        device_window: s.device_window.map(|w| (w.start, w.end)),
        kernel_window: s.kernel_window.map(|w| (w.start, w.end)),
        iteration_marks: s.iteration_marks.iter().map(|w| (w.start, w.end)).collect(),
        window: spans(&s.window),
        whole: s.whole.to_array(),
        in_window: s.in_window.to_array(),
        step_overlap: s.step_overlap,
        exposed: spans(&s.exposed),
        sm: (
            s.sm.total,
            s.sm.weighted.to_bits(),
            s.sm.compute_bound,
            s.sm.memory_bound,
        ),
        phases: s.phases.to_vec(),
        kernel_names: s
            .kernel_table
            .names
            .iter()
            .map(|(id, activity, class, a)| {
                let (name, class) = (activity.name().to_owned(), class.name().to_owned());
                (id.0, name, class, a.count, a.total, a.max)
            })
            .collect(),
        kernel_classes: s
            .kernel_table
            .classes
            .iter()
            .map(|a| (a.count, a.total, a.max))
            .collect(),
        step_hulls: s
            .step_hulls
            .as_ref()
            .map(|v| v.iter().map(|h| h.map(|h| (h.start, h.end))).collect()),
    }
}

/// A length or sum as stored: not negative, and at most what a rank's ops
/// may sum to (every figure is a sum or union of its ops' durations), so
/// that summed over any number of ranks it cannot overflow.
fn length(x: Ns, what: &str) -> Result<Ns, String> {
    if (Ns::ZERO..=MAX_OP_TIME).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{what} {} out of range", x.get()))
    }
}

fn interval((start, end): (Ns, Ns), what: &str) -> Result<Interval, String> {
    if in_range(start) && in_range(end) && start <= end {
        Ok(Interval::new(start, end))
    } else {
        Err(format!(
            "{what} [{}, {}) out of range",
            start.get(),
            end.get()
        ))
    }
}

/// A set as stored: each span checked, then normalized (a stored set is
/// already; one that is not is made one, never trusted to be).
fn set(v: Vec<(Ns, Ns)>, what: &str) -> Result<IntervalSet, String> {
    let v = v
        .into_iter()
        .map(|i| interval(i, what))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(IntervalSet::from_unsorted(v))
}

fn array<const N: usize>(v: Vec<Ns>, what: &str) -> Result<[Ns; N], String> {
    let n = v.len();
    let v = v
        .into_iter()
        .map(|x| length(x, what))
        .collect::<Result<Vec<_>, _>>()?;
    v.try_into()
        .map_err(|_| format!("{what}: {n} values where there are {N}"))
}

fn by_id(v: Vec<(u32, Ns)>, names: usize, what: &str) -> Result<HashMap<StrId, Ns>, String> {
    let n = v.len();
    let m: HashMap<StrId, Ns> = v
        .into_iter()
        .map(|(id, x)| {
            if (id as usize) < names {
                Ok((StrId(id), length(x, what)?))
            } else {
                Err(format!("{what}: name {id} not among the rank's {names}"))
            }
        })
        .collect::<Result<_, _>>()?;
    if m.len() != n {
        return Err(format!("{what}: a name twice"));
    }
    Ok(m)
}

fn acc(count: u64, total: Ns, max: Ns, what: &str) -> Result<Acc, String> {
    let (total, max) = (length(total, what)?, length(max, what)?);
    if count > MAX_COUNT {
        return Err(format!("{what}: {count} ops"));
    }
    if max > total {
        return Err(format!("{what}: longest op past the total"));
    }
    Ok(Acc { count, total, max })
}

fn kernel_table(
    rows: Vec<(u32, String, String, u64, Ns, Ns)>,
    classes: Vec<(u64, Ns, Ns)>,
    names: usize,
) -> Result<RankKernels, String> {
    let what = "kernel table";
    let mut seen = std::collections::HashSet::new();
    let rows = rows
        .into_iter()
        .map(|(id, activity, class, count, total, max)| {
            let activity = Activity::from_name(&activity)
                .ok_or_else(|| format!("{what}: activity {activity}"))?;
            let class =
                KernelClass::from_name(&class).ok_or_else(|| format!("{what}: class {class}"))?;
            if id as usize >= names {
                return Err(format!("{what}: name {id} not among the rank's {names}"));
            }
            if !seen.insert((id, activity as usize)) {
                return Err(format!("{what}: a name twice"));
            }
            Ok((StrId(id), activity, class, acc(count, total, max, what)?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let n = classes.len();
    let classes = classes
        .into_iter()
        .map(|(c, t, m)| acc(c, t, m, what))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RankKernels {
        names: rows,
        classes: classes
            .try_into()
            .map_err(|_| format!("{what}: {n} classes"))?,
    })
}

fn read_unions(u: [Ns; 7], what: &str) -> Result<Unions, String> {
    Ok(Unions::from_array(array(u.to_vec(), what)?))
}

/// The stats as stored, checked; `names` is how many names the rank's
/// names table holds. `None` for another layout (then every op is read).
pub fn from_stored(s: Stored, rank: u32, names: usize) -> Result<Option<RankStats>, String> {
    if s.version != VERSION {
        return Ok(None);
    }
    if s.kernels > s.ops || s.ops as u64 > MAX_COUNT {
        return Err(format!("{} kernels of {} ops", s.kernels, s.ops));
    }
    if s.copied.0 > MAX_BYTES {
        return Err(format!("{} bytes copied", s.copied.0));
    }
    let weighted = f64::from_bits(s.sm.1);
    if !(weighted.is_finite() && weighted >= 0.0) {
        return Err("SM coverage not a finite figure".into());
    }
    let phases = s
        .phases
        .into_iter()
        .map(|p| p.map(|x| length(x, "phase time")).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let phase_count = phases.len();
    let table = kernel_table(s.kernel_names, s.kernel_classes, names)?;
    Ok(Some(RankStats {
        rank,
        ops: s.ops,
        kernels: s.kernels,
        kernel_sum: length(s.kernel_sum, "kernel time")?,
        op_sum: length(s.op_sum, "op time")?,
        kernel_class_sum: array(s.kernel_class_sum, "kernel time by class")?,
        op_class_sum: array(s.op_class_sum, "op time by class")?,
        counted_class_sum: array(s.counted_class_sum, "step time by class")?,
        unclassified: by_id(s.unclassified, names, "unclassified time")?,
        copied: (s.copied.0, length(s.copied.1, "copy time")?),
        device_window: s
            .device_window
            .map(|w| interval(w, "device window"))
            .transpose()?,
        kernel_window: s
            .kernel_window
            .map(|w| interval(w, "kernel window"))
            .transpose()?,
        iteration_marks: s
            .iteration_marks
            .into_iter()
            .map(|w| interval(w, "iteration mark"))
            .collect::<Result<_, _>>()?,
        window: set(s.window, "step window")?,
        whole: read_unions(s.whole, "unions")?,
        in_window: read_unions(s.in_window, "unions in steps")?,
        step_overlap: (
            length(s.step_overlap.0, "communication under compute in steps")?,
            length(s.step_overlap.1, "communication in steps")?,
        ),
        exposed: set(s.exposed, "exposed communication")?,
        sm: SmCoverage {
            total: length(s.sm.0, "SM-covered time")?,
            weighted,
            compute_bound: length(s.sm.2, "compute-bound time")?,
            memory_bound: length(s.sm.3, "memory-bound time")?,
        },
        phases: phases
            .try_into()
            .map_err(|_| format!("{phase_count} phase times"))?,
        kernel_table: table,
        step_hulls: s
            .step_hulls
            .map(|v| {
                v.into_iter()
                    .map(|h| h.map(|h| interval(h, "step hull")).transpose())
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RankTimeline;

    /// Rank 2 of the synthetic run: steps, copies, collectives, named kernels.
    fn rank() -> RankTimeline {
        let run = crate::synth::training_run(&Default::default());
        let json = run[2].to_json();
        crate::read::kineto::read(json.as_bytes(), std::path::Path::new("r2.json"))
            .expect("the synthetic run reads")
            .timeline
    }

    fn json(s: &RankStats) -> String {
        serde_json::to_string(&to_stored(s)).unwrap()
    }

    fn back(text: &str, names: usize) -> Result<Option<RankStats>, String> {
        from_stored(serde_json::from_str(text).unwrap(), 2, names)
    }

    #[test]
    fn stored_stats_read_back_to_the_same_figures() {
        let t = rank();
        let s = RankStats::of(&t);
        let text = json(&s);
        let r = back(&text, t.strings.len()).unwrap().expect("this layout");
        assert_eq!(json(&r), text);
        assert_eq!(r.sm.weighted.to_bits(), s.sm.weighted.to_bits());
        assert_eq!(
            (r.unclassified.len(), r.exposed),
            (s.unclassified.len(), s.exposed)
        );
        assert_eq!(r.kernel_table, s.kernel_table);
        assert!(r.kernel_table.names.len() > 3);
        // Maps as sorted pairs: the same rank writes the same bytes.
        let m: HashMap<StrId, Ns> = (0..50).map(|i| (StrId(i * 7 % 50), Ns(i.into()))).collect();
        let ids: Vec<u32> = pairs(&m).iter().map(|p| p.0).collect();
        assert_eq!(ids, (0..50).collect::<Vec<u32>>());
    }

    #[test]
    fn damaged_stats_are_refused_and_another_layout_is_not_used() {
        let t = rank();
        let good: serde_json::Value = serde_json::from_str(&json(&RankStats::of(&t))).unwrap();
        let names = t.strings.len();
        let with = |key: &str, value: serde_json::Value| {
            let mut v = good.clone();
            v[key] = value;
            back(&v.to_string(), names)
        };
        let refused = |r: Result<Option<RankStats>, String>, why: &str| {
            let e = r.err().unwrap_or_else(|| panic!("accepted: {why}"));
            assert!(e.contains(why), "{e} (expected {why})");
        };
        refused(
            with("kernel_sum", (-5).into()),
            "kernel time -5 out of range",
        );
        refused(with("op_sum", ((1i64 << 52) + 1).into()), "out of range");
        refused(
            with("copied", serde_json::json!([1u64 << 60, 5])),
            "bytes copied",
        );
        refused(with("kernels", (1u64 << 40).into()), "kernels of");
        refused(
            with("unclassified", serde_json::json!([[names, 10]])),
            "not among the rank's",
        );
        refused(
            with("unclassified", serde_json::json!([[0, 1], [0, 2]])),
            "a name twice",
        );
        refused(
            with("kernel_class_sum", serde_json::json!([1, 2])),
            "2 values",
        );
        refused(with("window", serde_json::json!([[30, 10]])), "step window");
        refused(
            with("sm", serde_json::json!([0, f64::NAN.to_bits(), 0, 0])),
            "not a finite",
        );
        refused(with("phases", serde_json::json!([null])), "1 phase times");
        let row = |activity: &str, total: i64, max: i64| {
            serde_json::json!([0, activity, "gemm", 2, total, max])
        };
        refused(
            with("kernel_names", serde_json::json!([row("warp", 5, 1)])),
            "activity warp",
        );
        refused(
            with("kernel_names", serde_json::json!([row("kernel", 5, 9)])),
            "longest op past the total",
        );
        refused(
            with(
                "kernel_names",
                serde_json::json!([row("kernel", 5, 1), row("kernel", 6, 1)]),
            ),
            "a name twice",
        );
        refused(with("kernel_classes", serde_json::json!([])), "0 classes");
        // Overlapping stored spans are made a set, not trusted to be one.
        let r = with("exposed", serde_json::json!([[20, 40], [10, 30]]))
            .unwrap()
            .unwrap();
        assert_eq!(r.exposed.intervals(), &[Interval::new(Ns(10), Ns(40))]);
        assert!(with("version", (VERSION + 1).into()).unwrap().is_none());
    }
}
