//! `ccl-bench mcp`: a Model Context Protocol server on stdin/stdout, for
//! language-model agents. Its tools are the questions the screen answers,
//! and each answer is the JSON document the matching command prints with
//! `--format json` (built by `answers`, `report`), capped to fit a model's
//! context with the count of what was left out. Runs stay loaded between
//! calls; a question the run cannot answer gives the reason; bad input is
//! a tool error with the command line's message, and the server goes on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::session::load::{LoadOptions, Progress};
use crate::session::{self, Need};

/// Runs held at once; opening one more gives up the one asked least recently.
const MAX_RUNS: usize = 8;
/// Answers kept per run (the same question again is not recomputed).
const MAX_ANSWERS: usize = 256;
/// The most ops, instances, ranks or pairs one answer lists.
const MAX_LIST: usize = 2000;

/// How a run is read: what `open_run` takes besides the path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Reading {
    /// Count every step in per-step figures (by default, with three or
    /// more steps, the first and last are left out)
    #[serde(default)]
    all_steps: bool,
    /// Keep each file's own clock instead of aligning ranks on the
    /// collectives they share (default false: aligned)
    #[serde(default)]
    no_align: bool,
    /// Read profile_traces/iteration_K (default: the newest)
    #[serde(default)]
    iteration: Option<u32>,
    /// With one folder per rank holding a file per profiler window: window
    /// K (1 = oldest), "newest" (default) or "all"
    #[serde(default)]
    window: Option<String>,
    /// Of several unrelated runs in one folder, run K (in the order of
    /// their first file's name; default: the newest; the warnings list them)
    #[serde(default)]
    run: Option<u32>,
}

impl Reading {
    fn options(&self) -> Result<LoadOptions> {
        let windows = match &self.window {
            Some(w) => crate::discover::rank_dirs::parse_windows(w).map_err(|e| anyhow!(e))?,
            None => crate::discover::Windows::Newest,
        };
        Ok(LoadOptions {
            pick: crate::discover::Pick {
                iteration: self.iteration,
                windows,
                run: self.run,
            },
            align: !self.no_align,
            all_steps: self.all_steps,
            ..Default::default()
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OpenArgs {
    /// Trace directory or file, or a summary folder (absolute, or relative
    /// to the folder the server runs in)
    path: String,
    #[serde(flatten)]
    reading: Reading,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MetricsArgs {
    /// The run (opened with open_run, or opened now with default reading)
    path: String,
    /// Metric names (list_metrics lists them); all of them when left out
    #[serde(default)]
    names: Vec<String>,
    /// Only this rank (default: every rank, with per-rank values)
    #[serde(default)]
    rank: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CollectivesArgs {
    /// The run
    path: String,
    /// Only this kind: all_reduce, all_gather, reduce_scatter, all_to_all,
    /// send_recv, broadcast, reduce
    #[serde(default)]
    kind: Option<String>,
    /// Order: wait (default), transfer, busbw, size, late, start or id
    #[serde(default)]
    sort: Option<String>,
    /// Instances listed (default 20)
    #[serde(default)]
    top: Option<usize>,
    /// Only the grouped view (kind, size, group)
    #[serde(default)]
    grouped_only: bool,
    /// List each instance's members (rank, start, wait, transfer)
    #[serde(default)]
    members: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StragglersArgs {
    /// The run
    path: String,
    /// Ranks and waiting pairs listed (default 16)
    #[serde(default)]
    top: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OpsArgs {
    /// The run
    path: String,
    /// The rank whose ops to list
    rank: u32,
    /// Only ops launched during this step (its ProfilerStep number)
    #[serde(default)]
    step: Option<i64>,
    /// Only ops ending after this time (ns on the run's clock, as start_ns)
    #[serde(default)]
    from_ns: Option<i64>,
    /// Only ops starting before this time (ns)
    #[serde(default)]
    to_ns: Option<i64>,
    /// Ops listed at most (default 100)
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompareArgs {
    /// Run A, the reference
    a: String,
    /// Run B
    b: String,
    /// Relative change that counts (default 0.05)
    #[serde(default)]
    threshold: Option<f64>,
    /// Kernels, classes and collectives listed (default 12)
    #[serde(default)]
    top: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GateArgs {
    /// Run B, the one judged
    b: String,
    /// Run A, the reference (or give `against`)
    #[serde(default)]
    a: Option<String>,
    /// A baseline's name (`ccl-bench baseline save`) standing for run A
    #[serde(default)]
    against: Option<String>,
    /// The folder of baselines (default: $CCL_BENCH_BASELINES, else
    /// .ccl-bench/baselines at the repository's root)
    #[serde(default)]
    baselines: Option<String>,
    /// Relative change that counts (default 0.05)
    #[serde(default)]
    threshold: Option<f64>,
    /// Count every step, the first and last too
    #[serde(default)]
    all_steps: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HangArgs {
    /// A folder of NCCL Flight Recorder dumps (nccl_trace_rank_N), or one dump
    path: String,
}

/// A run held, and the answers already given about it.
struct Held {
    run: session::Run,
    answers: Mutex<HashMap<String, Value>>,
}

/// The runs held, the one asked least recently first.
#[derive(Default)]
struct Runs(Vec<(PathBuf, Reading, Arc<Held>)>);

#[derive(Clone)]
pub(crate) struct Server {
    runs: Arc<Mutex<Runs>>,
    tool_router: ToolRouter<Self>,
}

/// `ccl-bench mcp`: serves until the client closes stdin.
pub(crate) fn serve() -> Result<u8> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let service = Server::new()
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow!("cannot start the MCP server: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| anyhow!("the MCP server stopped: {e}"))?;
        Ok(0)
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding it leaves plain data behind: go on with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    fn new() -> Self {
        Self {
            runs: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// The run at `path`: held already (read as `reading` asks, or any way
    /// without), else read now and held.
    fn held(&self, path: &str, reading: Option<&Reading>) -> Result<Arc<Held>> {
        let path = PathBuf::from(path);
        {
            let mut runs = lock(&self.runs);
            let found = runs
                .0
                .iter()
                .rposition(|(p, r, _)| *p == path && reading.is_none_or(|want| want == r));
            if let Some(i) = found {
                let entry = runs.0.remove(i);
                let held = entry.2.clone();
                runs.0.push(entry);
                return Ok(held);
            }
        }
        let reading = reading.cloned().unwrap_or_default();
        let opts = reading.options()?;
        let found = session::find(&path, &opts)?;
        let inputs = &found.discovery.inputs;
        if !inputs.is_empty()
            && inputs
                .iter()
                .all(|i| matches!(i.format.role, crate::formats::Role::Flight(_)))
        {
            return Err(anyhow!(
                "{} holds NCCL Flight Recorder dumps only: ask the hang tool",
                path.display()
            ));
        }
        // Held as the exports and the Python package hold it: every op
        // there to list (a summary's a rank at a time).
        let run = session::open_found(&path, &found, &opts, Need::Listing, &Progress::default())?;
        let held = Arc::new(Held {
            run,
            answers: Mutex::default(),
        });
        let mut runs = lock(&self.runs);
        runs.0.retain(|(p, _, _)| *p != path);
        if runs.0.len() >= MAX_RUNS {
            runs.0.remove(0);
        }
        runs.0.push((path, reading, held.clone()));
        Ok(held)
    }

    /// `ask` of the run at `path` (held, or read with `reading`), kept under
    /// `key` so that the same question again is answered from memory.
    async fn answer(
        &self,
        path: String,
        reading: Option<Reading>,
        key: String,
        ask: impl FnOnce(&session::Run) -> Result<Value> + Send + 'static,
    ) -> Result<CallToolResult, String> {
        let this = self.clone();
        blocking(move || {
            let held = this.held(&path, reading.as_ref())?;
            if let Some(v) = lock(&held.answers).get(&key) {
                return Ok(v.clone());
            }
            let v = ask(&held.run)?;
            let mut answers = lock(&held.answers);
            if answers.len() >= MAX_ANSWERS {
                answers.clear();
            }
            answers.insert(key, v.clone());
            Ok(v)
        })
        .await
    }
}

/// Runs `f` off the server's threads (loading and metrics are CPU work);
/// its error, or a panic, is the tool's error, and the server goes on.
async fn blocking(
    f: impl FnOnce() -> Result<Value> + Send + 'static,
) -> Result<CallToolResult, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(doc)) => Ok(CallToolResult::structured(doc)),
        Ok(Err(e)) => Err(crate::error::one_line(&e)),
        Err(e) => Err(format!("internal error: {e}")),
    }
}

/// A list's length asked for, or `default`, within [1, MAX_LIST].
fn capped(asked: Option<usize>, default: usize) -> usize {
    asked.unwrap_or(default).clamp(1, MAX_LIST)
}

fn threshold(t: Option<f64>) -> Result<f64> {
    let t = t.unwrap_or(0.05);
    if t.is_finite() && t >= 0.0 {
        Ok(t)
    } else {
        Err(anyhow!(
            "threshold {t} is not a fraction (e.g. 0.05 for 5 %)"
        ))
    }
}

#[tool_router(router = tool_router)]
impl Server {
    #[tool(
        description = "Open a run (a trace directory or file) and hold it for the other tools. \
        Returns what the Summary says first: ranks, steps used, load warnings, the headline \
        metrics (avg_step_time, communication_fraction, exposed_comm_time_s, \
        compute_comm_overlap, aggregate_gpu_utilization, unclassified_fraction), the straggler \
        verdict, where the mean rank's step went (ns per measured step and % of it), and the \
        hang verdict in brief where Flight Recorder dumps lie beside the traces. Same JSON as \
        `ccl-bench overview DIR --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn open_run(
        &self,
        Parameters(a): Parameters<OpenArgs>,
    ) -> Result<CallToolResult, String> {
        self.answer(a.path, Some(a.reading), "overview".into(), |run| {
            crate::answers::overview(run)
        })
        .await
    }

    #[tool(
        description = "Every metric's name, unit, family and meaning (what `metrics` takes).",
        annotations(read_only_hint = true)
    )]
    async fn list_metrics(&self) -> Result<CallToolResult, String> {
        let metrics: Vec<Value> = crate::metrics::METRICS
            .iter()
            .map(|m| {
                json!({
                    "name": m.name,
                    "unit": m.unit.symbol(),
                    "group": m.group.name(),
                    "about": m.about,
                    "needs": m.needs.iter().map(|n| n.describe()).collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(CallToolResult::structured(json!({
            "schema_version": crate::report::json::SCHEMA_VERSION,
            "metrics": metrics,
        })))
    }

    #[tool(
        description = "Metrics of a run: value, unit, per-rank values, parts of a breakdown, \
        and for one that does not apply the reason (not_applicable). Same JSON as `ccl-bench \
        --trace DIR --metrics --format json` (the metrics asked for only).",
        annotations(read_only_hint = true)
    )]
    async fn metrics(
        &self,
        Parameters(a): Parameters<MetricsArgs>,
    ) -> Result<CallToolResult, String> {
        let key = format!("metrics {:?} {:?}", a.names, a.rank);
        self.answer(a.path, None, key, move |run| {
            crate::answers::metrics(run, &a.names, a.rank)
        })
        .await
    }

    #[tool(
        description = "Collectives matched across ranks: per instance its kind, group, size, \
        wait for the last member and who that was, transfer and bus bandwidth; the grouped \
        view by (kind, size, group); transfer fits; the process groups. Same JSON as `ccl-bench \
        collectives DIR --format json`; `matched` and `left_out` count what `top` cut.",
        annotations(read_only_hint = true)
    )]
    async fn collectives(
        &self,
        Parameters(a): Parameters<CollectivesArgs>,
    ) -> Result<CallToolResult, String> {
        let q = crate::answers::CollectivesQuery {
            kind: a.kind,
            sort: a.sort.unwrap_or_else(|| "wait".into()),
            top: Some(capped(a.top, 20)),
            grouped_only: a.grouped_only,
            members: a.members,
        };
        let key = format!("collectives {q:?}");
        self.answer(a.path, None, key, move |run| {
            crate::answers::with_collectives(run, &q, crate::report::collectives::document)
        })
        .await
    }

    #[tool(
        description = "Who holds the others up and why: the straggler verdict with its \
        evidence, the ranks that cause the most wait with where their steps went, and who waits \
        for whom at matched collectives. Same JSON as `ccl-bench stragglers DIR --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn stragglers(
        &self,
        Parameters(a): Parameters<StragglersArgs>,
    ) -> Result<CallToolResult, String> {
        let top = capped(a.top, 16);
        self.answer(a.path, None, format!("stragglers {top}"), move |run| {
            crate::answers::stragglers(run, top)
        })
        .await
    }

    #[tool(
        description = "One rank's device ops (kernels, copies, collectives) launched in a step \
        or overlapping a time window, in start order, capped by limit with the count left out; \
        fields as the ops table's. Same JSON as `ccl-bench ops DIR --rank N --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn ops(&self, Parameters(a): Parameters<OpsArgs>) -> Result<CallToolResult, String> {
        let window = crate::report::ops::Window {
            step: a.step,
            from: a.from_ns.map(crate::model::Ns),
            to: a.to_ns.map(crate::model::Ns),
        };
        let limit = capped(a.limit, 100);
        let key = format!("ops {} {window:?} {limit}", a.rank);
        let rank = a.rank;
        self.answer(a.path, None, key, move |run| {
            crate::answers::ops(run, rank, window, limit)
        })
        .await
    }

    #[tool(
        description = "Compare run B with run A: every metric with both values, the change and \
        whether it got better or worse beyond the threshold; the kernels and collectives whose \
        time changed most. Same JSON as `ccl-bench compare A B --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn compare(
        &self,
        Parameters(a): Parameters<CompareArgs>,
    ) -> Result<CallToolResult, String> {
        let this = self.clone();
        blocking(move || {
            let th = threshold(a.threshold)?;
            let (ha, hb) = (this.held(&a.a, None)?, this.held(&a.b, None)?);
            let ca = ha.run.ctx(None).map_err(|e| anyhow!(e))?;
            let cb = hb.run.ctx(None).map_err(|e| anyhow!(e))?;
            let cmp = crate::compare::compare(&ca, &cb, th);
            let sides = crate::report::compare::Sides {
                a: &a.a,
                b: &a.b,
                threshold: th,
                top: capped(a.top, 12),
            };
            Ok(crate::report::compare::to_json(&sides, &cmp))
        })
        .await
    }

    #[tool(
        description = "Gate run B against run A or a saved baseline for CI: per-step samples of \
        step time, exposed communication, collective wait and busy share give a 95 % interval \
        for each change, judged against the threshold: regressed, improved, no_change or \
        inconclusive. Same JSON as `ccl-bench gate A B --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn gate(&self, Parameters(a): Parameters<GateArgs>) -> Result<CallToolResult, String> {
        blocking(move || {
            let th = threshold(a.threshold)?;
            crate::headless::gate_json(
                a.a.as_deref().map(std::path::Path::new),
                a.against.as_deref(),
                a.baselines.as_deref().map(std::path::Path::new),
                std::path::Path::new(&a.b),
                th,
                a.all_steps,
            )
        })
        .await
    }

    #[tool(
        description = "Why a run hung, from its NCCL Flight Recorder dumps: per process group \
        the first collective not every member completed, the ranks that never scheduled it, \
        desyncs, unposted sends and receives, and how long each rank has been idle. Same JSON \
        as `ccl-bench hang DIR --format json`.",
        annotations(read_only_hint = true)
    )]
    async fn hang(&self, Parameters(a): Parameters<HangArgs>) -> Result<CallToolResult, String> {
        blocking(move || {
            let r = crate::headless::hang_report(std::path::Path::new(&a.path))?;
            Ok(crate::report::hang::to_json(&r))
        })
        .await
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "ccl-bench",
    instructions = "ccl-bench answers questions about profiler traces of distributed \
    GPU/TPU runs (PyTorch Kineto, Nsight Systems, XLA, nsys-jax; one file per rank). Start with \
    open_run on a trace directory: it gives the headline verdicts (step time, communication, \
    overlap, utilization, straggler) and where the step went. Then ask metrics, collectives, \
    stragglers or ops of the same path, compare or gate two runs, or hang for a folder of NCCL \
    Flight Recorder dumps. Times are in ns unless a field says otherwise; a figure that does not \
    apply has not_applicable with the reason; lists are capped and say how many were left out."
)]
impl ServerHandler for Server {}
