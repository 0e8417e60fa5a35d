//! Command-line interface (clap derive). Only plain values go inward from here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

// The views own their formats; the command line only names them.
pub use crate::report::Format;

/// Communication and compute metrics from multi-rank GPU profiler traces.
///
/// Point it at a directory of per-rank PyTorch profiler (Kineto) traces, one file
/// per rank (`rank{N}_trace.json`, `kineto_trace_{N}.json`, `worker{N}*.pt.trace.json`,
/// `rank-{N}*.json.gz`, or a ccl-bench `profile_traces/iteration_{K}/` layout), or at
/// Nsight Systems exports (.sqlite, or .json from `nsys export --type json`) or XLA
/// profiler XSpaces (*.xplane.pb). CUDA memory snapshots (*.pickle), PyTorch
/// execution traces and a workload card beside them are read too (--inputs lists
/// what was found). `ccl-bench DIR` opens the terminal UI (without a terminal it
/// prints the metric table); `ccl-bench DIR_A DIR_B` opens two runs with a Compare
/// tab; `ccl-bench` alone opens the bundled sample in trace_collection/.
#[derive(Debug, Parser)]
#[command(
    name = "ccl-bench",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Trace directory or file to open in the terminal UI (same as --trace)
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// A second run: the UI opens both with a Compare tab (piped, prints the
    /// comparison like `ccl-bench compare`)
    #[arg(value_name = "DIR_B")]
    pub dir_b: Option<PathBuf>,

    /// With two runs: relative change that counts, e.g. 5% or 0.05
    #[arg(long, value_name = "PCT", default_value = "5%", value_parser = parse_threshold)]
    pub threshold: f64,

    /// Trace directory or single trace file (.json or .json.gz)
    #[arg(long, short = 't', value_name = "DIR|FILE")]
    pub trace: Option<PathBuf>,

    /// Print one metric as a bare number (exit 3 when it does not apply);
    /// NAME.PART prints one part of its breakdown (comm_time_by_role_s.tp)
    #[arg(long, short = 'm', value_name = "NAME", conflicts_with = "metrics")]
    pub metric: Option<String>,

    /// Print every metric with value, unit and meaning
    #[arg(long, visible_alias = "all")]
    pub metrics: bool,

    /// Output format for --metrics
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Only this rank (default: all ranks; single-rank metrics use rank 0)
    #[arg(long, value_name = "N")]
    pub rank: Option<u32>,

    #[command(flatten)]
    pub load: LoadArgs,

    /// Devices the run spans, for MFU and per-chip counts (default: the workload
    /// card's total_count, else the number of ranks)
    #[arg(long, visible_alias = "n_chips", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub n_chips: Option<u32>,

    /// Model parameters, e.g. 7e9 or 7B (default: the workload card's num_params)
    #[arg(long, visible_alias = "model_params", value_name = "P", value_parser = parse_params)]
    pub model_params: Option<f64>,

    /// Print VALUE (exit 0) instead of failing when the metric does not apply, e.g. -1
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    pub missing: Option<String>,

    /// List metric names, units, meanings and the inputs each needs
    #[arg(long)]
    pub list_metrics: bool,

    /// List the kernel classification rules
    #[arg(long)]
    pub list_classes: bool,

    /// List the inputs found in the trace directory (profiler traces, Nsight
    /// Systems exports, XSpaces, execution traces, memory snapshots, workload
    /// card), which were read, and why others were not
    #[arg(long)]
    pub inputs: bool,

    /// How the UI opens a summary: `auto` reads its ops a window at a time
    /// (memory bounded whatever the run) when it holds more than 8 Mi ops,
    /// `always` does so for any summary, `never` reads every op (CPU lanes
    /// need that). Also where the collectives that metrics and views match
    /// across ranks are kept: past 4 Mi of them (`auto`) or all (`always`)
    /// in a temporary file in TMPDIR rather than in memory; `never` keeps
    /// them in memory
    #[arg(long, value_enum, default_value_t = crate::session::load::Pages::Auto)]
    pub pages: crate::session::load::Pages,

    /// Write the UI as an SVG image instead of opening it (for screenshots)
    #[arg(long, value_name = "FILE", hide = true)]
    pub screenshot: Option<PathBuf>,

    /// Tab shown by --screenshot: a name in the tab bar, or its start
    #[arg(long, value_name = "TAB", default_value = "summary", hide = true)]
    pub tab: String,

    /// Keys pressed before --screenshot draws, one character per key (e.g. "]]" on
    /// the timeline jumps to the second step)
    #[arg(long, value_name = "KEYS", default_value = "", hide = true)]
    pub keys: String,

    /// Terminal size for --screenshot, in cells
    #[arg(long, value_name = "WxH", default_value = "120x36", hide = true)]
    pub size: String,
}

/// How a trace is read: which iteration and windows, clock alignment, class
/// rules and steps (shared by the main command and `export`).
#[derive(Debug, Clone, Args)]
pub(crate) struct LoadArgs {
    /// Read profile_traces/iteration_K (default: the newest)
    #[arg(long, value_name = "K")]
    pub iteration: Option<u32>,

    /// With one folder per rank (rank_N/, worker_N/) holding a file per profiler
    /// window: read window K of each rank (1 = oldest), `newest`, or `all`
    /// joined in time order
    #[arg(long, visible_alias = "windows", value_name = "K|all", default_value = "newest", value_parser = crate::discover::rank_dirs::parse_windows)]
    pub window: crate::discover::Windows,

    /// Of several unrelated runs in one folder (told apart by world size,
    /// XLA programs or profiling time), read run K (in the order of their
    /// first file's name; default: the newest). The warning lists them
    #[arg(long, value_name = "K")]
    pub run: Option<u32>,

    /// Per-step averages over every ProfilerStep. By default, with three or
    /// more steps on a rank, the first (warm-up) and the last (it runs until
    /// the profiler stops) are left out, as CCL-Bench does
    #[arg(long)]
    pub all_steps: bool,

    /// Clock alignment across ranks: `collectives` puts every rank on rank 0's
    /// clock using the end times of the collectives they share; `none` keeps each
    /// file's own clock
    #[arg(long, value_enum, default_value_t = Align::Collectives)]
    pub align: Align,

    /// Kernel class rules (TOML, `[[rule]] class = "gemm" pattern = "^my_mm"`)
    /// applied before the built-in ones; default: ccl-bench-classes.toml beside the trace
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,

    /// Workload card (YAML) to use instead of the one beside the traces
    #[arg(long, value_name = "FILE")]
    pub card: Option<PathBuf>,

    /// Keep summaries in this folder: a trace's summary there is used when
    /// its inputs are unchanged, and built first when missing or stale
    /// (without it, only a summary beside the traces, DIR.sum, is used)
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,

    /// Read the traces themselves, even where a current summary of them
    /// stands beside them (DIR.sum) or in --cache
    #[arg(long, conflicts_with = "cache")]
    pub no_summary: bool,
}

impl LoadArgs {
    pub(crate) fn options(&self) -> crate::session::load::LoadOptions {
        crate::session::load::LoadOptions {
            pick: crate::discover::Pick {
                iteration: self.iteration,
                windows: self.window,
                run: self.run,
            },
            align: self.align == Align::Collectives,
            classes: self.classes.clone(),
            all_steps: self.all_steps,
            card: self.card.clone(),
            cache: self.cache.clone(),
            no_summary: self.no_summary,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Align {
    None,
    Collectives,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Compare two runs: every metric with both values and the change, the
    /// kernels and collectives whose time changed most, and per-rank steps
    Compare(CompareArgs),
    /// Write the run for other tools: Parquet tables (ops, kernels, collectives,
    /// steps, ranks) into a folder, or one Perfetto / chrome://tracing file
    Export(ExportArgs),
    /// Every collective matched across ranks: members, wait for the last to
    /// arrive and who it was, transfer, bandwidth; then grouped by kind, size
    /// and group
    Collectives(CollectivesArgs),
    /// Summarize each input into compact Parquet tables (the map step on a
    /// cluster): any command then opens the summary folder like the traces,
    /// without parsing them. Unchanged inputs are skipped on a re-run
    Summarize(SummarizeArgs),
    /// Gate run B against run A for CI: per-step samples of step time,
    /// exposed communication, collective wait and busy share give a 95 %
    /// interval for each change, judged against the threshold: regressed,
    /// improved, no change or inconclusive. Exit 0: passed, 4: regressed, 5:
    /// inconclusive under --inconclusive fail
    Gate(GateArgs),
    /// Keep a run as a named baseline for `gate --against`, or list them
    Baseline(BaselineArgs),
    /// Why a run hung, from its NCCL Flight Recorder dumps: per process
    /// group the first collective not every member completed, the ranks that
    /// never scheduled it and where each side is, desyncs, unposted sends and
    /// receives, and how long each rank has been idle. Exit 0: no hang found,
    /// 1: a hang or desync, 2: no dumps or bad input
    Hang(HangArgs),
    /// What the Summary tab says first: the run, the headline verdicts
    /// (step time, communication, overlap, utilization, straggler) and
    /// where the mean rank's step went
    Overview(AskArgs),
    /// Who holds the others up and why: the straggler verdict, the ranks
    /// charged most wait with where their steps went, and who waits for
    /// whom at the collectives matched across ranks
    Stragglers(StragglersArgs),
    /// One rank's device ops in a step or a time window, in start order
    Ops(OpsArgs),
    /// Serve the same answers to language-model agents: a Model Context
    /// Protocol server on stdin/stdout (docs/mcp.md)
    Mcp,
}

/// Two runs, or a run and a saved baseline, and the change that counts:
/// what `compare` and `gate` take.
#[derive(Debug, Args)]
pub(crate) struct PairArgs {
    /// Run A then run B (DIR_A DIR_B), or with --against run B alone
    #[arg(value_name = "DIR", num_args = 1..=2, required = true)]
    pub runs: Vec<PathBuf>,

    /// Take run A from this saved baseline (`ccl-bench baseline save`)
    /// instead of a second run
    #[arg(long, value_name = "NAME")]
    pub against: Option<String>,

    /// The folder of baselines (default: $CCL_BENCH_BASELINES, else
    /// .ccl-bench/baselines at the repository's root)
    #[arg(long, value_name = "DIR")]
    pub baselines: Option<PathBuf>,

    /// Relative change that counts, e.g. 5% or 0.05
    #[arg(long, value_name = "PCT", default_value = "5%", value_parser = parse_threshold)]
    pub threshold: f64,
}

#[derive(Debug, Args)]
pub(crate) struct GateArgs {
    #[command(flatten)]
    pub pair: PairArgs,

    /// Count every step, the first and last too (by default they are left
    /// out with three or more: warm-up and the profiler's flush)
    #[arg(long)]
    pub all_steps: bool,

    /// What an inconclusive gate does: pass (exit 0) or fail (exit 5)
    #[arg(long, value_enum, default_value_t = Inconclusive::Pass)]
    pub inconclusive: Inconclusive,

    /// Output format
    #[arg(long, value_enum, default_value_t = crate::report::gate::GateFormat::Table)]
    pub format: crate::report::gate::GateFormat,
}

#[derive(Debug, Args)]
pub(crate) struct BaselineArgs {
    #[command(subcommand)]
    pub action: BaselineAction,

    /// The folder of baselines (default: $CCL_BENCH_BASELINES, else
    /// .ccl-bench/baselines at the repository's root)
    #[arg(long, value_name = "DIR", global = true)]
    pub baselines: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BaselineAction {
    /// Keep what a later gate needs of a run (its figures per rank and
    /// measured step, every metric's value) under NAME
    Save {
        #[arg(value_name = "NAME")]
        name: String,
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Count every step, the first and last too
        #[arg(long)]
        all_steps: bool,
    },
    /// The baselines kept: name, run, when, ranks and steps
    List,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Inconclusive {
    Pass,
    Fail,
}

#[derive(Debug, Args)]
pub(crate) struct HangArgs {
    /// Folder of dumps (nccl_trace_rank_N, pickle or JSON), or one dump
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Output format
    #[arg(long, value_enum, default_value_t = DocFormat::Table)]
    pub format: DocFormat,
}

/// How a command that answers one question prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DocFormat {
    /// In words, for people
    Table,
    /// The JSON document (docs/schema.md; `hang`: docs/hang.md)
    Json,
}

/// A run and how to read it, for the commands that answer one question of it.
#[derive(Debug, Args)]
pub(crate) struct AskArgs {
    /// Trace directory or file
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Output format
    #[arg(long, value_enum, default_value_t = DocFormat::Table)]
    pub format: DocFormat,

    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Debug, Args)]
pub(crate) struct StragglersArgs {
    #[command(flatten)]
    pub ask: AskArgs,

    /// Ranks and waiting pairs listed (the rest are counted)
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub top: usize,
}

#[derive(Debug, Args)]
pub(crate) struct OpsArgs {
    #[command(flatten)]
    pub ask: AskArgs,

    /// The rank whose ops to list
    #[arg(long, value_name = "N")]
    pub rank: u32,

    /// Only ops launched during this step (its ProfilerStep number)
    #[arg(long, value_name = "K")]
    pub step: Option<i64>,

    /// Only ops that end after this time (ns on the run's clock, as the
    /// JSON's start_ns)
    #[arg(long, value_name = "NS", allow_hyphen_values = true)]
    pub from: Option<i64>,

    /// Only ops that start before this time (ns)
    #[arg(long, value_name = "NS", allow_hyphen_values = true)]
    pub to: Option<i64>,

    /// Ops listed at most (the rest are counted)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub(crate) struct SummarizeArgs {
    /// Trace directory or file
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Summary folder (default: DIR.sum beside the traces, which commands
    /// given DIR then use while its inputs are unchanged)
    #[arg(long, value_name = "SUM")]
    pub out: Option<PathBuf>,

    /// This process's share of the inputs, I/N from 0 (default: Slurm's
    /// SLURM_ARRAY_TASK_ID/COUNT under `sbatch --array`, SLURM_PROCID/NTASKS
    /// under `srun`, else all of them)
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::summary::Shard>,

    /// Only this input file of the run (repeatable), instead of a shard: for
    /// tools that map over files (GNU parallel, Dask, Ray)
    #[arg(long, value_name = "FILE", conflicts_with = "shard")]
    pub only: Vec<PathBuf>,

    /// Read profile_traces/iteration_K (default: the newest)
    #[arg(long, value_name = "K")]
    pub iteration: Option<u32>,

    /// Profiling windows of per-rank folders: K, `newest` or `all`
    #[arg(long, value_name = "K|all", default_value = "newest", value_parser = crate::discover::rank_dirs::parse_windows)]
    pub window: crate::discover::Windows,
}

#[derive(Debug, Args)]
pub(crate) struct CollectivesArgs {
    /// Trace directory or file
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Output format (json lists each instance's members)
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Only the grouped view
    #[arg(long)]
    pub grouped: bool,

    /// Sort instances by: id, start, wait, transfer, busbw, size or late
    #[arg(long, value_name = "COL", default_value = "id", value_parser = clap::builder::PossibleValuesParser::new(crate::report::collectives::SORT_KEYS))]
    pub sort: String,

    /// Only collectives of this kind: all_reduce, all_gather,
    /// reduce_scatter, all_to_all, send_recv, broadcast, reduce
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,

    /// Only the first N instances after sorting (the JSON counts the rest)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// JSON: leave out each instance's members
    #[arg(long)]
    pub no_members: bool,

    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One .parquet file per table in OUT/ (schema: docs/schema.md)
    Parquet,
    /// One Chrome trace JSON file (gzipped when OUT ends in .gz)
    Perfetto,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Trace directory or file
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// What to write
    #[arg(long, value_enum)]
    pub to: ExportFormat,

    /// Output folder (parquet) or file (perfetto, e.g. run.json.gz)
    #[arg(value_name = "OUT")]
    pub out: PathBuf,

    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    pub pair: PairArgs,

    /// Print only this metric's difference B - A as a bare number
    #[arg(long, short = 'm', value_name = "NAME")]
    pub metric: Option<String>,

    /// Exit 1 when a metric got worse beyond the threshold (for CI gates)
    #[arg(long)]
    pub fail_on_regression: bool,

    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Kernels, classes and collectives listed in the table
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub top: usize,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.trim().strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s.trim(), 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|v| v / scale)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("'{s}' is not a threshold (e.g. 5% or 0.05)"))
}

const AFTER_HELP: &str = "\
Examples:
  ccl-bench --trace runs/llama_8gpu --metric communication_fraction
  ccl-bench --trace runs/llama_8gpu --metrics --format json
  ccl-bench --list-metrics
  ccl-bench compare runs/nccl runs/msccl --threshold 3% --fail-on-regression
  ccl-bench gate runs/main runs/pr --threshold 3% --format markdown
  ccl-bench baseline save main runs/main && ccl-bench gate runs/pr --against main
  srun -n 64 ccl-bench summarize runs/big --out runs/big.sum && ccl-bench runs/big.sum

Exit status: 0 ok, 1 unreadable or invalid input, 2 usage error (e.g. unknown metric),
3 the metric does not apply to this trace (reason on stderr); compare --fail-on-regression
exits 1 when a metric got worse beyond the threshold; gate exits 4 when run B regressed
and 5 when the gate is inconclusive under --inconclusive fail.";

fn parse_params(s: &str) -> Result<f64, String> {
    crate::model::card::parse_count(s)
        .filter(|v| *v > 0.0)
        .ok_or_else(|| format!("'{s}' is not a parameter count (e.g. 7e9 or 7B)"))
}

impl Cli {
    /// How to load the trace.
    pub(crate) fn load_options(&self) -> crate::session::load::LoadOptions {
        crate::session::load::LoadOptions {
            pages: self.pages,
            ..self.load.options()
        }
    }

    /// The metric options given on the command line.
    pub(crate) fn options(&self) -> crate::metrics::Options {
        crate::metrics::Options {
            n_chips: self.n_chips,
            model_params: self.model_params,
        }
    }

    /// The trace path, from --trace or the positional argument.
    pub(crate) fn trace_path(&self) -> Option<&PathBuf> {
        self.trace.as_ref().or(self.dir.as_ref())
    }

    /// The runs to open: the trace, and the second run when given.
    pub(crate) fn runs(&self) -> Vec<PathBuf> {
        self.trace_path()
            .into_iter()
            .chain(self.dir_b.as_ref())
            .cloned()
            .collect()
    }

    /// `ccl-bench A B` without a terminal (or with --metric/--format): the same
    /// as `ccl-bench compare A B`.
    pub(crate) fn as_compare(&self) -> Option<CompareArgs> {
        let b = self.dir_b.clone()?;
        Some(CompareArgs {
            pair: PairArgs {
                runs: vec![self.trace_path()?.clone(), b],
                against: None,
                baselines: None,
                threshold: self.threshold,
            },
            metric: self.metric.clone(),
            fail_on_regression: false,
            format: self.format,
            top: 12,
        })
    }

    /// True when no headless output was asked for: browse the trace.
    pub(crate) fn browse(&self) -> bool {
        self.metric.is_none()
            && !self.metrics
            && !self.list_metrics
            && !self.list_classes
            && !self.inputs
            && self.screenshot.is_none()
    }

    /// `--size WxH` as (width, height).
    /// `--size` in cells, when it is one and at most 1000 × 1000 (a
    /// terminal never is larger, and the image is drawn in memory).
    pub(crate) fn screenshot_size(&self) -> Option<(u16, u16)> {
        let (w, h) = self.size.split_once(['x', 'X'])?;
        let (w, h): (u16, u16) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
        (w <= 1000 && h <= 1000).then_some((w, h))
    }
}

/// The sample the README opens, relative to the working directory or to the
/// source checkout the binary was built from.
pub(crate) const SAMPLE: &str = "trace_collection/llama_fsdp_8gpu";

pub(crate) fn sample_path() -> Option<PathBuf> {
    [
        PathBuf::from(SAMPLE),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SAMPLE),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn positional_and_flag_paths() {
        let c = Cli::parse_from(["ccl-bench", "some/dir"]);
        assert_eq!(c.trace_path(), Some(&PathBuf::from("some/dir")));
        let c = Cli::parse_from([
            "ccl-bench",
            "--trace",
            "x",
            "--metric",
            "mfu",
            "--missing",
            "-1",
        ]);
        assert_eq!(c.trace_path(), Some(&PathBuf::from("x")));
        assert_eq!(c.missing.as_deref(), Some("-1"));
        let c = Cli::parse_from(["ccl-bench", "--all", "x"]);
        assert!(c.metrics);
        let c = Cli::parse_from(["ccl-bench", "x", "--n_chips", "16", "--model_params", "7B"]);
        assert_eq!((c.n_chips, c.model_params), (Some(16), Some(7e9)));
        assert!(Cli::try_parse_from(["ccl-bench", "--model-params", "lots"]).is_err());
        assert!(Cli::try_parse_from(["ccl-bench", "--n-chips", "0"]).is_err());
        let c = Cli::parse_from(["ccl-bench", "compare", "a", "b", "--threshold", "2.5%"]);
        let Some(Command::Compare(args)) = c.command else {
            panic!("compare parses")
        };
        assert_eq!(args.pair.runs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert!((args.pair.threshold - 0.025).abs() < 1e-12);
        assert!(
            Cli::try_parse_from(["ccl-bench", "compare", "a", "b", "--threshold", "x"]).is_err()
        );
        // A plain directory still parses as the positional argument.
        assert!(Cli::parse_from(["ccl-bench", "runs/x"]).command.is_none());
        let c = Cli::parse_from(["ccl-bench", "a", "b", "--threshold", "10%"]);
        assert_eq!(c.runs(), vec![PathBuf::from("a"), PathBuf::from("b")]);
        let args = c.as_compare().expect("two runs compare");
        assert!((args.pair.threshold - 0.1).abs() < 1e-12);
        assert!(Cli::parse_from(["ccl-bench", "a"]).as_compare().is_none());
    }
}
