//! Headless mode: load, evaluate, print a bare number, a table, JSON or CSV.

use std::io::IsTerminal;
use std::io::{self, Write};

use anyhow::{anyhow, Context, Result};

use crate::cli::Cli;
use crate::kept;
use crate::metrics::{self, Ctx, Metric, Outcome, METRICS};
use crate::model::classify::RULES;
use crate::model::Trace;
use crate::report::{self, About};
use crate::session::load::{self, LoadOptions, Progress};
use crate::session::{self, Need};

/// Exit status: the metric does not apply to this trace.
pub(crate) const EXIT_NOT_APPLICABLE: u8 = 3;
/// Exit status: usage error (unknown metric, missing argument).
pub(crate) const EXIT_USAGE: u8 = 2;

pub(crate) fn run(cli: &Cli) -> Result<u8> {
    // Written whole at the end: line by line, a table of every metric took
    // a system call per row.
    let mut out = crate::safe::Safe(io::BufWriter::new(io::stdout().lock()));
    let code = answer(cli, &mut out)?;
    out.flush()?;
    Ok(code)
}

fn answer(cli: &Cli, mut out: &mut dyn Write) -> Result<u8> {
    if cli.list_metrics {
        list_metrics(&mut out)?;
        return Ok(0);
    }
    if cli.list_classes {
        if let Some(path) = &cli.load.classes {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let rules = crate::model::classify::UserRules::parse(&text, path)
                .map_err(|why| anyhow!("{}: {why}", path.display()))?;
            for (class, pattern, _) in &rules.rules {
                writeln!(
                    out,
                    "{:<14}  {pattern}  (from {})",
                    class.name(),
                    path.display()
                )?;
            }
        }
        list_classes(&mut out)?;
        return Ok(0);
    }
    // Check the metric name before spending time on loading.
    let metric = match cli.metric.as_deref().map(metrics::lookup_part).transpose() {
        Ok(m) => m,
        Err(e) => return Ok(unknown_metric(&e)),
    };
    // Plain `ccl-bench` piped or in a job: the metric table of the sample the
    // UI would open, as the README says. A metric asked for without a trace
    // is a usage error: a script must not get the sample's number.
    let sample = if cli.trace_path().is_none() && cli.browse() {
        crate::cli::sample_path()
    } else {
        None
    };
    let Some(path) = cli.trace_path().or(sample.as_ref()) else {
        crate::say!("ccl-bench: no trace given; use --trace DIR (ccl-bench --help for more)");
        return Ok(EXIT_USAGE);
    };
    if sample.is_some() {
        crate::say!(
            "ccl-bench: no trace given; showing the bundled sample {}",
            path.display()
        );
    }
    if cli.inputs {
        let report = session::inputs(path, &cli.load_options(), &Progress::default())?;
        for line in report.input_lines() {
            writeln!(out, "{line}")?;
        }
        for w in &report.warnings {
            writeln!(out, "warning: {w}")?;
        }
        return Ok(0);
    }
    let opts = cli.load_options();
    let found = session::find(path, &opts)?;
    // Flight Recorder dumps alone: the UI opens on the Hang tab, so the
    // table it stands for is the hang verdict.
    let inputs = &found.discovery.inputs;
    let dumps_only = !inputs.is_empty()
        && inputs
            .iter()
            .all(|i| matches!(i.format.role, crate::formats::Role::Flight(_)));
    if cli.browse() && dumps_only {
        let format = match cli.format {
            crate::cli::Format::Json => crate::cli::DocFormat::Json,
            _ => crate::cli::DocFormat::Table,
        };
        return hang(&crate::cli::HangArgs {
            dir: path.clone(),
            format,
        });
    }
    // A summary may hold what a run of all metrics computed (`summarize`
    // keeps the plain question's): served when it answers this question.
    let metric_opts = cli.options();
    let query = kept::Query {
        path,
        opts: &opts,
        rank: cli.rank,
        metric_opts: &metric_opts,
    };
    let key = found
        .summary
        .as_ref()
        .map(|s| s.path.as_path())
        .zip(kept::key(&found, &query));
    if let Some(r) = key.as_ref().and_then(|(sum, key)| kept::get(sum, key)) {
        for w in found.discovery.notes.iter().chain(&r.warnings) {
            crate::say!("warning: {w}");
        }
        return print(metric, &r.about, &r.rows, cli, &mut out);
    }
    // Reading writes nothing, but into a cache the command line named.
    let kept = key.filter(|(sum, _)| kept::in_cache(sum, &opts));
    // Metrics need each rank's ops only while it is read (see `load::Lean`).
    let run = session::open_found(path, &found, &opts, Need::Figures, &Progress::default())?;
    if kept.is_some() {
        session::keep_clock_check(path, &found, &opts, &run);
    }
    let (trace, said, made) = run.into_parts();
    for w in &said.warnings {
        crate::say!("warning: {w}");
    }
    let ctx = match Ctx::with_made(&trace, cli.rank, made) {
        Ok(c) => c.with_options(metric_opts),
        Err(e) => {
            crate::say!("ccl-bench: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let about = About::of(&ctx);
    match (metric, kept) {
        (Some((m, part)), None) => {
            let outcome = m.eval(&ctx);
            print_one(m, part, outcome, &about.source, cli, &mut out)
        }
        (_, None) => print(metric, &about, &report::rows(&ctx), cli, &mut out),
        (_, Some((sum, key))) => {
            let r = kept::Results::of(&found, &said, about, report::rows(&ctx));
            kept::put(sum, &key, &r);
            print(metric, &r.about, &r.rows, cli, &mut out)
        }
    }
}

/// Prints `metric` of `rows` (all of them without one) as the command line asked.
fn print(
    metric: Option<(&Metric, Option<&str>)>,
    about: &About,
    rows: &[report::Row],
    cli: &Cli,
    out: &mut dyn Write,
) -> Result<u8> {
    let Some((m, part)) = metric else {
        report::write(cli.format, about, rows, out)?;
        return Ok(0);
    };
    let outcome = rows
        .iter()
        .find(|r| std::ptr::eq(r.metric, m))
        .map(|r| r.outcome.clone())
        .ok_or_else(|| anyhow!("metric {} not evaluated", m.name))?;
    print_one(m, part, outcome, &about.source, cli, out)
}

/// The run at `path` with every op in memory (`session::Need::EveryOp`),
/// its load warnings printed on stderr.
pub fn load(path: &std::path::Path, opts: &LoadOptions) -> Result<Trace> {
    let run = session::open(path, opts, Need::EveryOp, &Progress::default())?;
    for w in run.warnings() {
        crate::say!("warning: {w}");
    }
    Ok(run.trace)
}

/// The run at `path` held for its figures (`session::Need::Figures`): each
/// rank's stats and collectives, its load warnings printed.
fn lean(
    path: &std::path::Path,
    opts: &LoadOptions,
) -> Result<(Trace, Vec<crate::derive::RankStats>)> {
    let run = session::open(path, opts, Need::Figures, &Progress::default())?;
    for w in run.warnings() {
        crate::say!("warning: {w}");
    }
    let (trace, _, made) = run.into_parts();
    Ok((trace, made.stats.expect("held lean")))
}

/// Says that a metric asked for does not exist; the usage error's status.
fn unknown_metric(e: &metrics::UnknownMetric) -> u8 {
    crate::say!("ccl-bench: {e} (ccl-bench --list-metrics lists all)");
    EXIT_USAGE
}

/// `ccl-bench compare A B`.
pub(crate) fn compare(args: &crate::cli::CompareArgs) -> Result<u8> {
    use crate::report::compare::{write, Sides};
    let metric = match args.metric.as_deref().map(metrics::lookup).transpose() {
        Ok(m) => m,
        Err(e) => return Ok(unknown_metric(&e)),
    };
    let opts = LoadOptions::default();
    // Lean: what compare reads of a rank's ops (metrics, the kernel table,
    // collectives) is in its stats and collectives.
    let run = |path: &std::path::Path| -> Result<(Trace, Vec<crate::derive::RankStats>)> {
        lean(path, &opts)
    };
    let (a, base, b) = match sides(&args.pair, "compare")? {
        Ok(sides) => sides,
        Err(code) => return Ok(code),
    };
    let held = a.map(run).transpose()?;
    let (tb, sb) = run(b)?;
    let cb = Ctx::with_stats(&tb, None, Some(sb)).map_err(|e| anyhow!(e))?;
    // Run A held, or the baseline's values.
    let (ta, sa) = held.map_or((None, None), |(t, s)| (Some(t), Some(s)));
    let ca = match &ta {
        Some(ta) => Some(Ctx::with_stats(ta, None, sa).map_err(|e| anyhow!(e))?),
        None => None,
    };
    let a_name = match (&base, a) {
        (Some(base), _) => base.describe(),
        (None, Some(p)) => p.display().to_string(),
        (None, None) => String::new(),
    };
    let mut out = crate::safe::Safe(io::stdout().lock());
    if let Some(m) = metric {
        let oa = match (&ca, &base) {
            (Some(ca), _) => m.eval(ca),
            (None, Some(base)) => crate::compare::kept(&base.metrics, m),
            (None, None) => unreachable!("run A held or a baseline"),
        };
        return match (oa, m.eval(&cb)) {
            (Outcome::Value(a), Outcome::Value(b)) => {
                writeln!(out, "{}", b.value - a.value)?;
                Ok(0)
            }
            (oa, ob) => {
                for (side, o) in [("A", oa), ("B", ob)] {
                    if let Outcome::NotApplicable(why) = o {
                        crate::say!("ccl-bench: {} does not apply to run {side}: {why}", m.name);
                    }
                }
                Ok(EXIT_NOT_APPLICABLE)
            }
        };
    }
    let cmp = match (&ca, &base) {
        (Some(ca), _) => crate::compare::compare(ca, &cb, args.pair.threshold),
        (None, Some(base)) => crate::compare::against(&base.metrics, &cb, args.pair.threshold),
        (None, None) => unreachable!("run A held or a baseline"),
    };
    let sides = Sides {
        a: &a_name,
        b: &b.display().to_string(),
        threshold: args.pair.threshold,
        top: args.top,
    };
    write(args.format, &sides, &cmp, &mut out)?;
    // Say what tripped the gate and by how much.
    let worse: Vec<String> = cmp
        .regressions()
        .map(|d| {
            let change = d.change_text();
            let change = if change.is_empty() {
                format!("{} from 0", d.metric.unit.human(d.delta().unwrap_or(0.0)))
            } else {
                change
            };
            format!("{} {change}", d.metric.name)
        })
        .collect();
    if args.fail_on_regression && !worse.is_empty() {
        crate::say!(
            "ccl-bench: {} metric(s) got worse beyond the threshold ({:.1} %, for shares {:.1} points): {}",
            worse.len(),
            args.pair.threshold * 100.0,
            (args.pair.threshold * 100.0).max(crate::compare::SHARE_FLOOR_POINTS),
            worse.join(", ")
        );
        return Ok(1);
    }
    Ok(0)
}

/// Exit status of a gate that found run B regressed.
pub(crate) const EXIT_REGRESSED: u8 = 4;
/// Exit status of an inconclusive gate under `--inconclusive fail`.
pub(crate) const EXIT_INCONCLUSIVE: u8 = 5;

/// A run read whole (a step's exposed communication and busy time are
/// unions of its ops), its warnings said with its path.
fn whole_run(path: &std::path::Path, all_steps: bool) -> Result<session::Run> {
    let opts = LoadOptions {
        all_steps,
        ..LoadOptions::default()
    };
    let run = session::open(path, &opts, Need::EveryOp, &Progress::default())?;
    for w in run.warnings() {
        crate::say!("warning: {}: {w}", path.display());
    }
    Ok(run)
}

/// Run A and B of `compare` or `gate` (`what`); with `--against`, B and
/// the baseline standing for A. `Err`: a usage error's status, said.
type Pair<'p> = (
    Option<&'p std::path::Path>,
    Option<crate::baseline::Baseline>,
    &'p std::path::Path,
);

fn sides<'p>(
    pair: &'p crate::cli::PairArgs,
    what: &str,
) -> Result<std::result::Result<Pair<'p>, u8>> {
    Ok(match (&pair.against, pair.runs.as_slice()) {
        (Some(name), [b]) => {
            let dir = crate::baseline::folder(pair.baselines.as_deref());
            Ok((None, Some(crate::baseline::load(&dir, name)?), b))
        }
        (None, [a, b]) => Ok((Some(a), None, b)),
        (Some(_), _) => {
            crate::say!("ccl-bench: {what} --against NAME takes one run, run B");
            Err(EXIT_USAGE)
        }
        (None, _) => {
            crate::say!("ccl-bench: {what} takes two runs, A then B (or B with --against NAME)");
            Err(EXIT_USAGE)
        }
    })
}

/// The gate's figures of the run at `path`, read whole.
fn step_figures(path: &std::path::Path, all_steps: bool) -> Result<crate::gate::StepFigures> {
    let run = whole_run(path, all_steps)?;
    Ok(crate::gate::StepFigures::of(
        &run.ctx(None).map_err(|e| anyhow!(e))?,
    ))
}

/// `ccl-bench gate A B`, or `gate B --against NAME`.
pub(crate) fn gate(args: &crate::cli::GateArgs) -> Result<u8> {
    use crate::gate::Verdict;
    let (a, base, b) = match sides(&args.pair, "gate")? {
        Ok(sides) => sides,
        Err(code) => return Ok(code),
    };
    let (a_name, g) = judged(a, base, b, args.pair.threshold, args.all_steps)?;
    let sides = crate::report::gate::Sides {
        a: &a_name,
        b: &b.display().to_string(),
    };
    let mut out = crate::safe::Safe(io::stdout().lock());
    crate::report::gate::write(args.format, &sides, &g, &mut out)?;
    Ok(match g.verdict {
        Verdict::Regressed => EXIT_REGRESSED,
        Verdict::Inconclusive if args.inconclusive == crate::cli::Inconclusive::Fail => {
            EXIT_INCONCLUSIVE
        }
        _ => 0,
    })
}

/// Run `b` judged against run `a` or the baseline `base` (one of them):
/// A's name, and the gate.
fn judged(
    a: Option<&std::path::Path>,
    base: Option<crate::baseline::Baseline>,
    b: &std::path::Path,
    threshold: f64,
    all_steps: bool,
) -> Result<(String, crate::gate::Gate)> {
    let (a_name, fa) = match (base, a) {
        (Some(base), _) => (base.describe(), base.figures),
        (None, Some(a)) => (a.display().to_string(), step_figures(a, all_steps)?),
        (None, None) => return Err(anyhow!("gate needs run A or a baseline")),
    };
    let fb = step_figures(b, all_steps)?;
    let g = crate::gate::gate_samples(&fa.samples(), &fb.samples(), threshold);
    Ok((a_name, g))
}

/// The gate of run `b` against run `a`, or against the baseline `against`
/// kept in `baselines` (default folder without), as `gate --format json`
/// prints it: for the Python package and the MCP server.
pub fn gate_json(
    a: Option<&std::path::Path>,
    against: Option<&str>,
    baselines: Option<&std::path::Path>,
    b: &std::path::Path,
    threshold: f64,
    all_steps: bool,
) -> Result<serde_json::Value> {
    let base = match (a, against) {
        (None, Some(name)) => Some(crate::baseline::load(
            &crate::baseline::folder(baselines),
            name,
        )?),
        (Some(_), None) => None,
        _ => {
            return Err(anyhow!(
                "the gate takes run A or a baseline's name, one of them"
            ))
        }
    };
    let (a_name, g) = judged(a, base, b, threshold, all_steps)?;
    let sides = crate::report::gate::Sides {
        a: &a_name,
        b: &b.display().to_string(),
    };
    Ok(crate::report::gate::to_json(&sides, &g))
}

/// `ccl-bench baseline save NAME DIR` and `baseline list`.
pub(crate) fn baseline(args: &crate::cli::BaselineArgs) -> Result<u8> {
    use crate::cli::BaselineAction;
    let dir = crate::baseline::folder(args.baselines.as_deref());
    match &args.action {
        BaselineAction::Save {
            name,
            dir: run_dir,
            all_steps,
        } => {
            let figures = step_figures(run_dir, *all_steps)?;
            // The values `--metrics` and `compare` print: of the run held
            // as they hold it (lean), to the last digit.
            let opts = LoadOptions {
                all_steps: *all_steps,
                ..LoadOptions::default()
            };
            let (trace, stats) = lean(run_dir, &opts)?;
            let ctx = Ctx::with_stats(&trace, None, Some(stats)).map_err(|e| anyhow!(e))?;
            let metrics = (metrics::METRICS.iter())
                .zip(metrics::eval_all(&ctx))
                .filter_map(|(m, o)| Some((m.name.to_owned(), o.as_value()?)))
                .collect();
            let (ranks, steps) = (figures.ranks.len(), figures.steps);
            let path = crate::baseline::save(&dir, name, run_dir, figures, metrics)?;
            crate::say!(
                "ccl-bench: kept baseline {name} ({ranks} rank(s), {steps} measured step(s)) in {}",
                path.display()
            );
        }
        BaselineAction::List => {
            let list = crate::baseline::list(&dir)?;
            let mut out = crate::safe::Safe(io::stdout().lock());
            if list.is_empty() {
                crate::say!("ccl-bench: no baselines in {}", dir.display());
            }
            for b in list {
                writeln!(
                    out,
                    "{}  {}  {}  {} rank(s), {} measured step(s)",
                    b.name,
                    b.saved,
                    b.run,
                    b.figures.ranks.len(),
                    b.figures.steps
                )?;
            }
        }
    }
    Ok(0)
}

/// `ccl-bench export DIR --to parquet|perfetto OUT`.
pub(crate) fn export(args: &crate::cli::ExportArgs) -> Result<u8> {
    use crate::cli::ExportFormat;
    let opts = args.load.options();
    let found = session::find(&args.dir, &opts)?;
    crate::export::check_target(&args.out, args.to == ExportFormat::Parquet, &found)?;
    let run = session::open_found(
        &args.dir,
        &found,
        &opts,
        Need::Listing,
        &Progress::default(),
    )?;
    for w in run.warnings() {
        crate::say!("warning: {w}");
    }
    let (ctx, ops) = (
        run.ctx(None).map_err(|e| anyhow!(e))?,
        crate::export::Ops::of(&run),
    );
    match args.to {
        ExportFormat::Parquet => {
            for w in crate::export::parquet::write_all(&ctx, ops, &args.out)? {
                crate::say!(
                    "ccl-bench: wrote {} ({} rows)",
                    w.path.display(),
                    report::human::count(w.rows as u64)
                );
            }
        }
        ExportFormat::Perfetto => {
            let n = crate::export::perfetto::write(&ctx, ops, &args.out)?;
            crate::say!(
                "ccl-bench: wrote {} ({} events); open it in https://ui.perfetto.dev",
                args.out.display(),
                report::human::count(n as u64)
            );
        }
    }
    Ok(0)
}

/// `ccl-bench summarize DIR [--out SUM] [--shard I/N]`.
pub(crate) fn summarize(args: &crate::cli::SummarizeArgs) -> Result<u8> {
    use crate::summary;
    let (shard, from) = match args.shard {
        Some(s) => (s, "--shard"),
        None if !args.only.is_empty() => (summary::Shard::default(), "--only"),
        None => summary::Shard::from_slurm(|k| std::env::var(k).ok())
            .map_err(|e| anyhow!("the Slurm environment gives no shard: {e}"))?,
    };
    let out = match &args.out {
        Some(o) => o.clone(),
        None => summary::beside(&args.dir)
            .ok_or_else(|| anyhow!("{}: give --out for this path", args.dir.display()))?,
    };
    summary::write::check_out(&out)?;
    let opts = summary::Options {
        out: out.clone(),
        shard,
        only: args.only.clone(),
        pick: crate::discover::Pick {
            iteration: args.iteration,
            windows: args.window,
            // A summary keeps every run's inputs; a load chooses.
            run: None,
        },
        formats: crate::formats::FORMATS,
    };
    // Thousands of inputs take minutes: on a terminal, say how far it got.
    let progress = crate::progress::Progress::default();
    let r = if std::io::stderr().is_terminal() {
        std::thread::scope(|s| {
            let job = s.spawn(|| summary::summarize_with(&args.dir, &opts, &progress));
            progress.show_until("summarizing", || job.is_finished());
            job.join().expect("summarize does not panic")
        })?
    } else {
        summary::summarize(&args.dir, &opts)?
    };
    let share = if !args.only.is_empty() {
        format!("{} of {} inputs (--only)", r.mine, r.inputs)
    } else if shard.count > 1 {
        format!(
            "shard {shard} (from {from}): {} of {} inputs",
            r.mine, r.inputs
        )
    } else {
        format!("{} inputs", r.inputs)
    };
    let ratio = if r.bytes_in > 0 {
        format!(
            " ({:.1} % of the inputs)",
            100.0 * r.bytes_out as f64 / r.bytes_in as f64
        )
    } else {
        String::new()
    };
    crate::say!(
        "ccl-bench: summarized {share} into {}: {} written, {} unchanged; {} read, {} written{ratio}",
        out.display(),
        r.written,
        r.skipped,
        report::human::bytes(r.bytes_in),
        report::human::bytes(r.bytes_out),
    );
    for e in &r.failed {
        crate::say!("ccl-bench: {e} (recorded: the summary fails where the trace does)");
    }
    // The whole summary is written (not one shard of it): the plain
    // question's answer is kept in it, so that scripts asking one metric
    // after another read it instead of the tables.
    if args.only.is_empty() && shard.count <= 1 {
        for note in keep_answers(&args.dir, &out, opts.pick) {
            crate::say!("ccl-bench: {note}");
        }
    }
    Ok(u8::from(!r.failed.is_empty()))
}

/// Computes every metric of the summary `sum` of `traces` as a plain
/// `ccl-bench --trace P --metrics` would, for `P` the summary's path and
/// the traces' folder (when the summary stands beside it, so that `P` opens
/// it), and keeps the results in the summary; says what it kept, or why
/// not. Nothing is printed or kept for a `P` that fails to load: asking
/// will say why.
pub fn keep_answers(
    traces: &std::path::Path,
    sum: &std::path::Path,
    pick: crate::discover::Pick,
) -> Vec<String> {
    let Ok(plain) = <Cli as clap::Parser>::try_parse_from(["ccl-bench"]) else {
        return Vec::new();
    };
    let opts = LoadOptions {
        pick,
        ..plain.load_options()
    };
    let metric_opts = plain.options();
    let mut notes = Vec::new();
    for path in [sum, traces] {
        let Ok(found) = session::find(path, &opts) else {
            continue;
        };
        if found.summary.as_ref().map(|s| s.path.as_path()) != Some(sum) {
            continue;
        }
        let query = kept::Query {
            path,
            opts: &opts,
            rank: None,
            metric_opts: &metric_opts,
        };
        let Some(key) = kept::key(&found, &query) else {
            continue;
        };
        if kept::get(sum, &key).is_some() {
            continue;
        }
        let Ok(run) = session::open_found(path, &found, &opts, Need::Figures, &Progress::default())
        else {
            continue;
        };
        session::keep_clock_check(path, &found, &opts, &run);
        let (trace, said, made) = run.into_parts();
        let Ok(ctx) = Ctx::with_made(&trace, None, made) else {
            continue;
        };

        let ctx = ctx.with_options(metric_opts);
        let about = About::of(&ctx);
        let r = kept::Results::of(&found, &said, about, report::rows(&ctx));
        if kept::put(sum, &key, &r) {
            notes.push(format!(
                "kept every metric's result for `ccl-bench {}`",
                path.display()
            ));
        }
    }
    notes
}

/// `ccl-bench collectives DIR`.
pub(crate) fn collectives(args: &crate::cli::CollectivesArgs) -> Result<u8> {
    let run = opened(&args.dir, &args.load.options(), Need::EveryOp)?;
    let q = crate::answers::CollectivesQuery {
        kind: args.kind.clone(),
        sort: args.sort.clone(),
        top: args.top,
        grouped_only: args.grouped,
        members: !args.no_members,
    };
    let mut out = crate::safe::Safe(io::stdout().lock());
    crate::answers::with_collectives(&run, &q, |view| {
        report::collectives::write(args.format, view, &mut out)
    })??;
    Ok(0)
}

/// The run at `path` held as `need` asks, its load warnings said.
fn opened(path: &std::path::Path, opts: &LoadOptions, need: Need) -> Result<session::Run> {
    let run = session::open(path, opts, need, &Progress::default())?;
    for w in run.warnings() {
        crate::say!("warning: {w}");
    }
    Ok(run)
}

/// Prints `doc` as `format` asks, `text` writing it in words.
fn print_doc(
    format: crate::cli::DocFormat,
    doc: &serde_json::Value,
    text: fn(&serde_json::Value, &mut dyn Write) -> io::Result<()>,
) -> Result<u8> {
    let mut out = crate::safe::Safe(io::stdout().lock());
    match format {
        crate::cli::DocFormat::Json => {
            serde_json::to_writer_pretty(&mut out, doc)?;
            writeln!(out)?;
        }
        crate::cli::DocFormat::Table => text(doc, &mut out)?,
    }
    Ok(0)
}

/// `ccl-bench overview DIR`.
pub(crate) fn overview(args: &crate::cli::AskArgs) -> Result<u8> {
    let run = opened(&args.dir, &args.load.options(), Need::Figures)?;
    let doc = crate::answers::overview(&run)?;
    print_doc(args.format, &doc, report::overview::write_text)
}

/// `ccl-bench stragglers DIR`.
pub(crate) fn stragglers(args: &crate::cli::StragglersArgs) -> Result<u8> {
    let run = opened(&args.ask.dir, &args.ask.load.options(), Need::Figures)?;
    let doc = crate::answers::stragglers(&run, args.top)?;
    print_doc(args.ask.format, &doc, report::stragglers::write_text)
}

/// `ccl-bench ops DIR --rank N`.
pub(crate) fn ops(args: &crate::cli::OpsArgs) -> Result<u8> {
    let run = opened(&args.ask.dir, &args.ask.load.options(), Need::Listing)?;
    let window = report::ops::Window {
        step: args.step,
        from: args.from.map(crate::model::Ns),
        to: args.to.map(crate::model::Ns),
    };
    let doc = crate::answers::ops(&run, args.rank, window, args.limit)?;
    print_doc(args.ask.format, &doc, report::ops::write_text)
}

fn print_one(
    m: &Metric,
    part: Option<&str>,
    outcome: Outcome,
    source: &str,
    cli: &Cli,
    out: &mut dyn Write,
) -> Result<u8> {
    let outcome = match part {
        Some(p) => metrics::part_of(outcome, p),
        None => outcome,
    };
    match outcome {
        // CCL-Bench's `straggler_metrics` prints its two figures on two
        // labelled lines; scripts written for it parse those.
        Outcome::Value(v) if m.name == "straggler_metrics" && part.is_none() => {
            let part = |k: &str| v.parts.iter().find(|p| p.0 == k).map_or(f64::NAN, |p| p.1);
            writeln!(out, "Straggler Delay:  {}", part("delay"))?;
            writeln!(out, "Straggler Slowdown:  {}", part("slowdown"))?;
            Ok(0)
        }
        Outcome::Value(v) => {
            writeln!(out, "{}", m.unit.bare(v.value))?;
            Ok(0)
        }
        Outcome::NotApplicable(why) => {
            crate::say!(
                "ccl-bench: {} does not apply to {}: {why}",
                cli.metric.as_deref().unwrap_or(m.name),
                source
            );
            match &cli.missing {
                Some(v) => {
                    writeln!(out, "{v}")?;
                    Ok(0)
                }
                None => Ok(EXIT_NOT_APPLICABLE),
            }
        }
    }
}

fn list_metrics(out: &mut dyn Write) -> io::Result<()> {
    let width = METRICS.iter().map(|m| m.name.len()).max().unwrap_or(0);
    writeln!(
        out,
        "{:<width$}  {:<6}  {:<44}  meaning",
        "metric", "unit", "needs"
    )?;
    for m in METRICS {
        let needs: Vec<&str> = m.needs.iter().map(|n| n.describe()).collect();
        writeln!(
            out,
            "{:<width$}  {:<6}  {:<44}  {}",
            m.name,
            m.unit.symbol(),
            needs.join(", "),
            m.about
        )?;
    }
    Ok(())
}

fn list_classes(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Kernel names are matched case-insensitively, first rule wins; no match = unclassified. Rules from --classes FILE or ccl-bench-classes.toml beside the trace come first (on the full name)."
    )?;
    writeln!(
        out,
        "Built-in rules match the kernel's own name: its qualified name without template arguments or parameters, and without the fbgemm_gpu namespace (`void fbgemm_gpu::permute_kernel<gemm_t>(int)` -> `permute_kernel`); for a wrapper (`cutlass::Kernel2<...>`, `cutlass::device_kernel<...>`) the wrapped kernel's name, then the wrapper's."
    )?;
    writeln!(
        out,
        "memcpy/memset events are memory unless they match communication (peer-to-peer copies)."
    )?;
    for r in RULES {
        writeln!(out, "{:<14}  {}  ({})", r.class.name(), r.pattern, r.what)?;
    }
    Ok(())
}

/// Exit status of `hang`: a hang or desync was found.
pub(crate) const EXIT_HANG: u8 = 1;

/// The hang report of the Flight Recorder dumps at `path`, the warnings
/// of reading them first among its own; an error when none could be read.
pub fn hang_report(path: &std::path::Path) -> Result<metrics::hang::HangReport> {
    let (dumps, warnings) = load::flight_dumps(path)?;
    if dumps.is_empty() {
        let why = match warnings.as_slice() {
            [] => String::new(),
            w => format!(" ({})", crate::model::warning::joined(w, "; ")),
        };
        return Err(anyhow!(
            "{}: none of the Flight Recorder dumps could be read{why}",
            path.display()
        ));
    }
    let mut r = metrics::hang::analyze(&dumps);
    r.warnings
        .splice(0..0, warnings.into_iter().map(|w| w.text));
    // Freeing a million entries one by one takes a tenth of a second the
    // report does not need to wait for.
    std::thread::spawn(move || drop(dumps));
    Ok(r)
}

/// `ccl-bench hang DIR`: the verdict from the Flight Recorder dumps.
pub(crate) fn hang(args: &crate::cli::HangArgs) -> Result<u8> {
    let r = match hang_report(&args.dir) {
        Ok(r) => r,
        Err(e) => {
            crate::say!("ccl-bench: error: {}", crate::error::one_line(&e));
            return Ok(EXIT_USAGE);
        }
    };
    let mut out = crate::safe::Safe(io::stdout().lock());
    match args.format {
        crate::cli::DocFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report::hang::to_json(&r))?;
            writeln!(out)?;
        }
        crate::cli::DocFormat::Table => {
            for (_, line) in report::hang::lines(&r) {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(if r.verdict == "none" { 0 } else { EXIT_HANG })
}
