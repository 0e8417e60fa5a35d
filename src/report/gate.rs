//! Output of `ccl-bench gate`: a table for people, JSON for tools, and
//! Markdown for a pull request comment or a CI job summary.

use std::io::{self, Write};

use serde_json::json;

use crate::gate::{Figure, Gate, Judgement, Summary, Verdict};
use crate::model::time::{human, Ns};

/// How the gate is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GateFormat {
    /// A table for people
    Table,
    /// Every figure, interval and reason, for tools
    Json,
    /// A summary for a pull request comment or a CI job summary
    Markdown,
}

pub struct Sides<'a> {
    pub a: &'a str,
    pub b: &'a str,
}

/// The JSON document's layout version.
const SCHEMA: u32 = 1;

pub(crate) fn write(
    format: GateFormat,
    s: &Sides,
    g: &Gate,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        GateFormat::Table => table(s, g, out),
        GateFormat::Markdown => markdown(s, g, out),
        GateFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &to_json(s, g))?;
            writeln!(out)
        }
    }
}

/// The `--format json` document (also what Python's `ccl_bench.gate` returns).
pub fn to_json(s: &Sides, g: &Gate) -> serde_json::Value {
    json!({
        "schema_version": SCHEMA,
        "a": s.a,
        "b": s.b,
        "gate": g,
    })
}

/// A figure's value for people: a time, or a share in percent.
fn value(f: Figure, v: f64) -> String {
    if f.is_share() {
        format!("{:.1} %", v * 100.0)
    } else if v.is_finite() {
        human(Ns((v * 1e9).round() as i64))
    } else {
        "n/a".into()
    }
}

/// Mean ± sd over n steps.
fn side(f: Figure, s: Option<Summary>) -> String {
    s.map_or("n/a".into(), |s| match s.steps {
        0 | 1 => format!("{} (n={})", value(f, s.mean), s.steps),
        n => format!("{} ±{} (n={n})", value(f, s.mean), value(f, s.sd)),
    })
}

fn pct(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{:+.1} %", v * 100.0))
}

fn interval(j: &Judgement) -> String {
    j.interval.map_or(String::new(), |(lo, hi)| {
        format!("{} .. {}", pct(Some(lo)), pct(Some(hi)))
    })
}

fn headline(g: &Gate) -> String {
    let why = match g.verdict {
        Verdict::Regressed => "a figure got worse beyond the threshold throughout its interval",
        Verdict::Improved => "a figure got better beyond the threshold, none worse",
        Verdict::NoChange => "every figure stayed within the threshold",
        Verdict::Inconclusive => "a figure's interval straddles the threshold, or too few steps",
        Verdict::NotApplicable => "",
    };
    format!(
        "gate: {} ({why}; threshold {:.1} %, {:.0} % intervals)",
        g.verdict.label(),
        g.threshold * 100.0,
        g.confidence * 100.0
    )
}

fn table(s: &Sides, g: &Gate, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "A: {}\nB: {}", s.a, s.b)?;
    writeln!(out, "{}\n", headline(g))?;
    let cells: Vec<[String; 6]> = (g.figures.iter())
        .map(|j| {
            [
                j.figure.name().to_owned(),
                side(j.figure, j.a),
                side(j.figure, j.b),
                pct(j.change),
                interval(j),
                j.verdict.label().to_owned(),
            ]
        })
        .collect();
    let head = [
        "figure",
        "A (per step)",
        "B (per step)",
        "change",
        "95 % interval",
        "verdict",
    ];
    let w: Vec<usize> = (0..6)
        .map(|k| {
            cells
                .iter()
                .map(|c| c[k].chars().count())
                .chain([head[k].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let row = |c: &[&str]| {
        format!(
            "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:>w4$}  {}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        )
    };
    writeln!(out, "{}", row(&head))?;
    for c in &cells {
        writeln!(out, "{}", row(&c.each_ref().map(String::as_str)))?;
    }
    writeln!(out)?;
    for j in &g.figures {
        writeln!(out, "{}: {}", j.figure.name(), j.why)?;
    }
    Ok(())
}

fn markdown(s: &Sides, g: &Gate, out: &mut dyn Write) -> io::Result<()> {
    let icon = match g.verdict {
        Verdict::Regressed => "🔴",
        Verdict::Inconclusive => "🟡",
        _ => "🟢",
    };
    writeln!(out, "### {icon} {}\n", headline(g))?;
    writeln!(out, "A: `{}`  \nB: `{}`\n", s.a, s.b)?;
    writeln!(
        out,
        "| figure | A (per step) | B (per step) | change | 95 % interval | verdict |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---|")?;
    for j in &g.figures {
        let verdict = match j.verdict {
            Verdict::Regressed => format!("**{}**", j.verdict.label()),
            v => v.label().to_owned(),
        };
        writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {verdict} |",
            j.figure.name(),
            side(j.figure, j.a),
            side(j.figure, j.b),
            pct(j.change),
            interval(j),
        )?;
    }
    writeln!(out)?;
    for j in &g.figures {
        writeln!(out, "- `{}`: {}", j.figure.name(), j.why)?;
    }
    Ok(())
}
