//! The hang verdict in words: what `ccl-bench hang` prints and the Hang tab
//! shows, line by line, each with a kind the screen styles.

use crate::metrics::hang::{
    group_name as group, ranges, CallRef, Finding, HangReport, RankLast, Stack, StackFrame,
};

/// How a line reads on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The verdict.
    Verdict,
    Heading,
    /// Names the rank(s) to look at.
    Culprit,
    Plain,
    /// Context: sources, stacks.
    Dim,
    Warning,
}

/// Stack lines shown per stack: the innermost frames outside PyTorch, where
/// the user's code called in.
const FRAMES: usize = 5;
/// Ranks listed in the "when" table; the rest are counted.
pub(crate) const RANKS_SHOWN: usize = 16;

/// The report as `hang --format json` prints it (docs/hang.md), with the
/// version of the JSON layouts.
pub fn to_json(r: &HangReport) -> serde_json::Value {
    let mut doc = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
    if let Some(o) = doc.as_object_mut() {
        o.insert("schema_version".into(), super::json::SCHEMA_VERSION.into());
    }
    doc
}

pub(crate) fn lines(r: &HangReport) -> Vec<(Kind, String)> {
    let mut out = Vec::new();
    let mut push = |k: Kind, s: String| out.push((k, s));
    let tag = match r.verdict {
        "hang" => "HANG",
        "desync" => "DESYNC",
        _ => "NO HANG",
    };
    push(Kind::Verdict, format!("{tag}  {}", r.headline));
    let versions: Vec<String> = r.versions.iter().map(|v| v.version.clone()).collect();
    push(
        Kind::Dim,
        format!(
            "{} dump(s) (ranks {}), schema {}{}",
            r.dumps,
            ranges(
                &r.world
                    .iter()
                    .copied()
                    .filter(|x| !r.no_dump.contains(x))
                    .collect::<Vec<_>>()
            ),
            versions.join(", "),
            r.dumped_at_ns
                .map_or_else(String::new, |t| format!("; latest event {}", utc(t))),
        ),
    );
    for w in &r.warnings {
        push(Kind::Warning, format!("warning: {w}"));
    }
    for f in &r.findings {
        push(Kind::Plain, String::new());
        finding(f, r.dumped_at_ns, &mut push);
    }
    push(Kind::Plain, String::new());
    push(
        Kind::Heading,
        "ranks by time since their last completed call (to the latest event of any rank)".into(),
    );
    let shown = &r.ranks[..r.ranks.len().min(RANKS_SHOWN)];
    let width = shown
        .iter()
        .filter_map(|x| x.last_completed.as_ref())
        .map(|c| call(c).chars().count())
        .max()
        .unwrap_or(0)
        .max("last completed".len());
    push(
        Kind::Dim,
        format!(
            "  {:>5}  {:>9}  {:>9}  {:<width$}  pending",
            "rank", "idle", "quiet", "last completed"
        ),
    );
    for x in shown {
        push(
            if x.stands_out {
                Kind::Culprit
            } else {
                Kind::Plain
            },
            rank_line(x, width),
        );
    }
    if r.ranks.len() > RANKS_SHOWN {
        push(
            Kind::Dim,
            format!(
                "  … {} more rank(s) (--format json lists all)",
                r.ranks.len() - RANKS_SHOWN
            ),
        );
    }
    out
}

fn rank_line(x: &RankLast, width: usize) -> String {
    let secs = |s: Option<f64>| s.map_or_else(|| "-".into(), seconds);
    format!(
        "  {:>5}  {:>9}  {:>9}  {:<width$}  {}{}",
        x.rank,
        secs(x.idle_s),
        secs(x.quiet_s),
        x.last_completed
            .as_ref()
            .map_or_else(|| "none".into(), call),
        x.pending
            .as_ref()
            .map_or_else(|| "-".into(), |p| format!("{} ({})", call(p), p.state)),
        if x.stands_out {
            "  ◀ stopped before the others"
        } else {
            ""
        },
    )
}

fn finding(f: &Finding, now: Option<i64>, push: &mut impl FnMut(Kind, String)) {
    let group = group(&f.group, &f.desc);
    let what = match f.kind {
        "p2p" => format!("{} (p2p #{})", f.op, f.seq),
        _ => format!("{} #{}", f.op, f.seq),
    };
    let mut head = format!(
        "{group}, {} member(s) {}: {what}",
        f.members.len(),
        ranges(&f.members)
    );
    if !f.input_sizes.is_empty() {
        head.push_str(&format!(" {:?}", f.input_sizes));
    }
    if !f.dtypes.is_empty() {
        head.push_str(&format!(" {}", f.dtypes.join(",")));
    }
    if f.downstream {
        head.push_str("  (waits on a rank stuck elsewhere)");
    }
    push(Kind::Heading, head);
    if let Some(m) = &f.mismatch {
        push(
            Kind::Culprit,
            format!(
                "  members disagree on the {} at collective #{}:",
                m.field, m.seq
            ),
        );
        for (i, v) in m.variants.iter().enumerate() {
            push(
                if i == 0 { Kind::Plain } else { Kind::Culprit },
                format!(
                    "    ranks {:<12} {} in {:?} out {:?} {}",
                    ranges(&v.ranks),
                    v.op,
                    v.input_sizes,
                    v.output_sizes,
                    v.dtypes.join(",")
                ),
            );
        }
    }
    if !f.missing.is_empty() {
        let label = if f.kind == "p2p" {
            "never posted its side:"
        } else {
            "never scheduled it:"
        };
        push(
            Kind::Culprit,
            format!("  {label:<22} {}", ranges(&f.missing)),
        );
        for m in &f.missing_detail {
            let last = m.last_here.as_ref().map_or_else(
                || "nothing completed here".into(),
                |c| format!("last completed here {}{}", call(c), ago(c, now)),
            );
            let pending = m.pending.as_ref().map_or_else(
                || "no call in flight (left the loop, or died?)".into(),
                |p| format!("waits in {} ({})", call(p), p.state),
            );
            push(Kind::Plain, format!("    rank {}: {last}", m.rank));
            let indent = format!("rank {}: ", m.rank).len();
            push(Kind::Plain, format!("    {:indent$}{pending}", ""));
        }
    }
    if !f.no_dump.is_empty() {
        push(
            Kind::Culprit,
            format!("  {:<22} {}", "left no dump:", ranges(&f.no_dump)),
        );
    }
    if !f.waiting.is_empty() {
        let mut by: Vec<(&str, Vec<u32>)> = Vec::new();
        for w in &f.waiting {
            match by.iter_mut().find(|b| b.0 == w.state) {
                Some(b) => b.1.push(w.rank),
                None => by.push((w.state, vec![w.rank])),
            }
        }
        for (state, ranks) in by {
            push(
                Kind::Plain,
                format!("  {:<22} {} ({state})", "waiting in it:", ranges(&ranks)),
            );
        }
    }
    if !f.completed.is_empty() {
        push(
            Kind::Warning,
            format!(
                "  {:<22} {} (impossible without every member: the dumps disagree)",
                "completed it:",
                ranges(&f.completed)
            ),
        );
    }
    if !f.unknown.is_empty() {
        push(
            Kind::Dim,
            format!(
                "  {:<22} {} (its entry left their ring buffer; raise TORCH_NCCL_TRACE_BUFFER_SIZE)",
                "unknown:",
                ranges(&f.unknown)
            ),
        );
    }
    if !f.stacks.is_empty() {
        push(Kind::Plain, "  where:".into());
        for s in &f.stacks {
            stack(s, push);
        }
    }
}

fn stack(s: &Stack, push: &mut impl FnMut(Kind, String)) {
    push(
        Kind::Plain,
        format!("    {} — rank(s) {}", s.role, ranges(&s.ranks)),
    );
    for line in stack_lines(&s.frames) {
        push(Kind::Dim, line);
    }
}

/// From where the user's code calls into PyTorch outwards, the user's own
/// frames: PyTorch's between them (`nn.Module` call plumbing between a
/// model's `forward`s) are left out and counted. A stack with no user frame
/// shows PyTorch's.
fn stack_lines(frames: &[StackFrame]) -> Vec<String> {
    let line = |f: &StackFrame| format!("      {}  {}:{}", f.name, f.file, f.line);
    let Some(first) = frames.iter().position(|f| !is_torch(&f.file)) else {
        let mut out: Vec<String> = frames.iter().take(FRAMES).map(line).collect();
        let outer = frames.len().saturating_sub(FRAMES);
        if outer > 0 {
            out.push(format!("      … {outer} outer frame(s)"));
        }
        return out;
    };
    let rest = &frames[first..];
    let user: Vec<usize> = (0..rest.len())
        .filter(|&i| !is_torch(&rest[i].file))
        .collect();
    let shown = &user[..user.len().min(FRAMES)];
    let mut out: Vec<String> = shown.iter().map(|&i| line(&rest[i])).collect();
    let outer = user.len() - shown.len();
    let last = shown.last().map_or(0, |&i| i + 1);
    let between = last - shown.len();
    match (outer, between) {
        (0, 0) => {}
        (0, b) => out.push(format!(
            "      ({b} of PyTorch's frames between these left out)"
        )),
        (o, 0) => out.push(format!("      … {o} outer frame(s)")),
        (o, b) => out.push(format!(
            "      … {o} outer frame(s); {b} of PyTorch's between these left out"
        )),
    }
    out
}

fn is_torch(file: &str) -> bool {
    file.contains("/torch/") || file.starts_with("torch/")
}

fn call(c: &CallRef) -> String {
    if c.p2p {
        format!("{} p2p #{} {}", c.op, c.seq, group(&c.group, &c.desc))
    } else {
        format!("{} #{} {}", c.op, c.seq, group(&c.group, &c.desc))
    }
}

fn ago(c: &CallRef, now: Option<i64>) -> String {
    now.map_or_else(String::new, |now| {
        format!(
            ", {} before the latest event",
            seconds((now - c.at_ns).max(0) as f64 / 1e9)
        )
    })
}

/// `0.52 s`, `31.0 s`, `12 min 5 s`, `3 h 2 min`.
pub(crate) fn seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!(
            "{} h {} min",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    } else if s >= 60.0 {
        format!("{} min {} s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else if s >= 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.3} s")
    }
}

/// Nanoseconds since the epoch as `2024-08-27 17:20:39 UTC`.
fn utc(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_show_the_users_frames() {
        let f = |name: &str, file: &str| StackFrame {
            name: name.into(),
            file: file.into(),
            line: 1,
        };
        let c10d = f("all_reduce", "/py/torch/distributed/distributed_c10d.py");
        let call = f("_call_impl", "/py/torch/nn/modules/module.py");
        let model = |n: &str| f(n, "/work/model.py");
        // The collective's own frames, then user frames with module
        // plumbing between them: 7 user frames, 5 shown, 4 of PyTorch's
        // among those.
        let mut frames = vec![c10d.clone(), c10d.clone()];
        for n in ["a", "b", "c", "d", "e", "f", "g"] {
            frames.push(model(n));
            frames.push(call.clone());
        }
        let lines = stack_lines(&frames);
        assert_eq!(lines.len(), 6);
        assert_eq!(lines[0], "      a  /work/model.py:1");
        assert_eq!(lines[4], "      e  /work/model.py:1");
        assert_eq!(
            lines[5],
            "      … 2 outer frame(s); 4 of PyTorch's between these left out"
        );
        // Only PyTorch's frames: shown as they are.
        let lines = stack_lines(&[c10d.clone(), call.clone()]);
        assert_eq!(lines.len(), 2);
        // No plumbing: nothing counted.
        let lines = stack_lines(&[c10d, model("a"), model("b")]);
        assert_eq!(
            lines,
            ["      a  /work/model.py:1", "      b  /work/model.py:1"]
        );
    }

    #[test]
    fn times_for_people() {
        assert_eq!(utc(1_724_779_239_936_775_119), "2024-08-27 17:20:39 UTC");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(seconds(0.52), "0.520 s");
        assert_eq!(seconds(30.00052), "30.0 s");
        assert_eq!(seconds(725.0), "12 min 5 s");
        assert_eq!(seconds(3.0 * 3600.0 + 130.0), "3 h 2 min");
    }
}
