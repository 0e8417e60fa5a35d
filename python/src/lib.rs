//! `ccl_bench._native`: the Python face of ccl-bench. Loading and every
//! computation run in Rust with the GIL released; tables leave as Arrow
//! record batches through the Arrow C stream interface (no copy on the
//! Python side). The typed, documented API is `ccl_bench/__init__.py`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ccl_bench::discover::{Pick, Windows};
use ccl_bench::load::{LoadOptions, Progress};
use ccl_bench::metrics::{self, Ctx, Outcome};
use ccl_bench::session::{self, Need, Run as Held};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3_arrow::PyTable;

create_exception!(
    _native,
    TraceError,
    PyException,
    "A trace that cannot be read: the message names the file and what is wrong."
);

fn trace_error(e: anyhow::Error) -> PyErr {
    TraceError::new_err(ccl_bench::error::one_line(&e))
}

/// A loaded run: the timelines of every rank (a summary's lean, each
/// rank's ops read when a table needs them), the metrics (evaluated once,
/// on first use) and the warnings of loading.
#[pyclass(frozen, module = "ccl_bench._native")]
struct Run {
    held: Arc<Held>,
    all: OnceLock<Vec<Outcome>>,
    json: OnceLock<String>,
}

fn ctx(held: &Held, rank: Option<u32>) -> PyResult<Ctx<'_>> {
    held.ctx(rank).map_err(PyValueError::new_err)
}

/// A metric, or a part of one's breakdown (`comm_time_by_role_s.tp`).
fn find(name: &str) -> PyResult<(&'static metrics::Metric, Option<&str>)> {
    metrics::lookup_part(name).map_err(|e| PyValueError::new_err(e.to_string()))
}

impl Run {
    fn outcomes(&self, py: Python<'_>) -> PyResult<&[Outcome]> {
        if let Some(all) = self.all.get() {
            return Ok(all);
        }
        let held = self.held.clone();
        let all = py
            .detach(move || held.ctx(None).map(|c| metrics::eval_all(&c)))
            .map_err(PyValueError::new_err)?;
        Ok(self.all.get_or_init(|| all))
    }

    fn outcome(&self, py: Python<'_>, name: &str, rank: Option<u32>) -> PyResult<Outcome> {
        let (m, part) = find(name)?;
        let whole = if rank.is_none() {
            let i = metrics::METRICS
                .iter()
                .position(|x| x.name == m.name)
                .expect("a registered metric");
            self.outcomes(py)?[i].clone()
        } else {
            let held = self.held.clone();
            py.detach(move || ctx(&held, rank).map(|c| m.eval(&c)))?
        };
        Ok(match part {
            Some(p) => metrics::part_of(whole, p),
            None => whole,
        })
    }

    /// The table `name` over every rank, or `rank` alone (a summary's ops
    /// read a rank at a time, whichever).
    fn table(&self, py: Python<'_>, name: &str, rank: Option<u32>) -> PyResult<PyTable> {
        let held = self.held.clone();
        let name = name.to_owned();
        let (schema, batches) = py.detach(move || -> PyResult<_> {
            let c = ctx(&held, rank)?;
            let schema = ccl_bench::export::tables::schema_of(&name).expect("a known table");
            let mut batches = Vec::new();
            ccl_bench::export::tables::stream(
                &c,
                ccl_bench::export::Ops::of(&held),
                &name,
                &mut |b| {
                    batches.push(b);
                    Ok(())
                },
            )
            .map_err(TraceError::new_err)?;
            Ok((schema, batches))
        })?;
        PyTable::try_new(batches, schema)
    }
}

#[pymethods]
impl Run {
    /// The file or directory loaded.
    #[getter]
    fn path(&self) -> PathBuf {
        self.held.trace.source.clone()
    }

    /// Rank numbers, in order.
    #[getter]
    fn rank_ids(&self) -> Vec<u32> {
        self.held.trace.ranks.iter().map(|t| t.rank).collect()
    }

    /// What loading noticed (damaged events, skipped files, clock checks).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.held
            .warnings()
            .iter()
            .map(|w| w.text.clone())
            .collect()
    }

    /// Each warning's kind, in the order of `warnings` (`damaged`,
    /// `ignored`, `reading`, `ranks`, `not_read`, `clock`, `matching`, `rules`,
    /// `not_spilled`, `not_rebinned`).
    #[getter]
    fn warning_kinds(&self) -> Vec<String> {
        (self.held.warnings().iter())
            .map(|w| w.kind.name().to_owned())
            .collect()
    }

    /// The metric's value (`None` when it does not apply), over all ranks or one.
    #[pyo3(signature = (name, rank=None))]
    fn metric(&self, py: Python<'_>, name: &str, rank: Option<u32>) -> PyResult<Option<f64>> {
        Ok(self.outcome(py, name, rank)?.as_value())
    }

    /// Why the metric does not apply (`None` when it does).
    #[pyo3(signature = (name, rank=None))]
    fn why(&self, py: Python<'_>, name: &str, rank: Option<u32>) -> PyResult<Option<String>> {
        Ok(match self.outcome(py, name, rank)? {
            Outcome::NotApplicable(why) => Some(why.to_string()),
            Outcome::Value(_) => None,
        })
    }

    /// The `--metrics --format json` document of this run.
    fn metrics_json(&self, py: Python<'_>) -> PyResult<String> {
        if let Some(j) = self.json.get() {
            return Ok(j.clone());
        }
        let outcomes = self.outcomes(py)?.to_vec();
        let held = self.held.clone();
        let text = py.detach(move || -> PyResult<String> {
            let c = ctx(&held, None)?;
            let rows: Vec<_> = metrics::METRICS
                .iter()
                .zip(outcomes)
                .map(|(metric, outcome)| ccl_bench::report::Row { metric, outcome })
                .collect();
            let about = ccl_bench::report::About::of(&c);
            let mut out = Vec::new();
            ccl_bench::report::json::write(&about, &rows, &mut out)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            String::from_utf8(out).map_err(|e| PyValueError::new_err(e.to_string()))
        })?;
        Ok(self.json.get_or_init(|| text).clone())
    }

    #[pyo3(signature = (rank=None))]
    fn ops(&self, py: Python<'_>, rank: Option<u32>) -> PyResult<PyTable> {
        self.table(py, "ops", rank)
    }

    #[pyo3(signature = (rank=None))]
    fn kernels(&self, py: Python<'_>, rank: Option<u32>) -> PyResult<PyTable> {
        self.table(py, "kernels", rank)
    }

    fn collectives(&self, py: Python<'_>) -> PyResult<PyTable> {
        self.table(py, "collectives", None)
    }

    #[pyo3(signature = (rank=None))]
    fn steps(&self, py: Python<'_>, rank: Option<u32>) -> PyResult<PyTable> {
        self.table(py, "steps", rank)
    }

    fn ranks(&self, py: Python<'_>) -> PyResult<PyTable> {
        self.table(py, "ranks", None)
    }

    /// Writes the Parquet tables into `dir`; returns the files written.
    fn export_parquet(&self, py: Python<'_>, dir: PathBuf) -> PyResult<Vec<PathBuf>> {
        let held = self.held.clone();
        py.detach(move || {
            let c = ctx(&held, None)?;
            ccl_bench::export::parquet::write_all(&c, ccl_bench::export::Ops::of(&held), &dir)
                .map(|w| w.into_iter().map(|w| w.path).collect())
                .map_err(|e| TraceError::new_err(e.to_string()))
        })
    }

    /// Writes the Perfetto trace to `path`; returns the number of events.
    fn export_perfetto(&self, py: Python<'_>, path: PathBuf) -> PyResult<usize> {
        let held = self.held.clone();
        py.detach(move || {
            let c = ctx(&held, None)?;
            ccl_bench::export::perfetto::write(&c, ccl_bench::export::Ops::of(&held), &path)
                .map_err(|e| TraceError::new_err(e.to_string()))
        })
    }

    /// The source format of each rank ("pytorch", "nsys", "xla").
    fn formats(&self) -> Vec<&'static str> {
        self.held
            .trace
            .ranks
            .iter()
            .map(|t| t.format.name())
            .collect()
    }
}

/// Loads a trace directory or file. `progress` draws a bar on stderr.
#[pyfunction]
#[pyo3(signature = (path, iteration=None, window=None, align=true, classes=None, all_steps=false, card=None, progress=false, cache=None, run=None))]
#[allow(clippy::too_many_arguments)]
fn load(
    py: Python<'_>,
    path: PathBuf,
    iteration: Option<u32>,
    window: Option<String>,
    align: bool,
    classes: Option<PathBuf>,
    all_steps: bool,
    card: Option<PathBuf>,
    progress: bool,
    cache: Option<PathBuf>,
    run: Option<u32>,
) -> PyResult<Run> {
    let windows = windows(window)?;
    let opts = LoadOptions {
        pick: Pick {
            iteration,
            windows,
            run,
        },
        align,
        classes,
        all_steps,
        card,
        cache,
        ..Default::default()
    };
    let held = py
        .detach(move || {
            let p = Progress::default();
            std::thread::scope(|s| {
                // Held as the exports hold it: the tables list every op.
                let job = s.spawn(|| session::open(&path, &opts, Need::Listing, &p));
                if progress {
                    bar(&p, &job);
                }
                job.join().expect("the loader does not panic")
            })
        })
        .map_err(trace_error)?;
    Ok(Run {
        held: Arc::new(held),
        all: OnceLock::new(),
        json: OnceLock::new(),
    })
}

fn windows(window: Option<String>) -> PyResult<Windows> {
    match window {
        Some(w) => ccl_bench::discover::rank_dirs::parse_windows(&w).map_err(PyValueError::new_err),
        None => Ok(Windows::Newest),
    }
}

/// What `summarize` did: (inputs, this shard's, written, unchanged, failed,
/// bytes read, bytes written).
type Summarized = (usize, usize, usize, usize, Vec<String>, u64, u64);

/// Summarizes a trace directory or file into `out` (its share `shard`,
/// "I/N"), as `ccl-bench summarize` does.
#[pyfunction]
#[pyo3(signature = (path, out, shard=None, only=Vec::new(), iteration=None, window=None))]
#[allow(clippy::too_many_arguments)]
fn summarize(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    shard: Option<String>,
    only: Vec<PathBuf>,
    iteration: Option<u32>,
    window: Option<String>,
) -> PyResult<Summarized> {
    use ccl_bench::summary;
    let shard: summary::Shard = match shard {
        Some(s) => s.parse().map_err(PyValueError::new_err)?,
        None => summary::Shard::default(),
    };
    let opts = summary::Options {
        out,
        shard,
        only,
        pick: Pick {
            iteration,
            windows: windows(window)?,
            // A summary keeps every run's inputs; a load chooses.
            run: None,
        },
        formats: ccl_bench::formats::FORMATS,
    };
    let r = py
        .detach(move || {
            summary::write::check_out(&opts.out)?;
            let r = summary::summarize(&path, &opts)?;
            // The whole summary written: the plain question's answer kept
            // in it, as `ccl-bench summarize` keeps it.
            if opts.only.is_empty() && opts.shard.count <= 1 {
                ccl_bench::headless::keep_answers(&path, &opts.out, opts.pick);
            }
            Ok::<_, ccl_bench::error::Error>(r)
        })
        .map_err(|e| trace_error(e.into()))?;
    Ok((
        r.inputs,
        r.mine,
        r.written,
        r.skipped,
        r.failed,
        r.bytes_in,
        r.bytes_out,
    ))
}

/// A progress line on stderr while `job` runs, erased when it ends.
fn bar<T>(p: &Progress, job: &std::thread::ScopedJoinHandle<'_, T>) {
    p.show_until("loading", || job.is_finished());
}

/// `ccl-bench compare` of two loaded runs as the JSON document it prints.
#[pyfunction]
#[pyo3(signature = (a, b, threshold=0.05, top=12))]
fn compare_json(py: Python<'_>, a: &Run, b: &Run, threshold: f64, top: usize) -> PyResult<String> {
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(PyValueError::new_err(format!(
            "threshold {threshold} is not a fraction (e.g. 0.05 for 5 %)"
        )));
    }
    let (ta, tb) = (a.held.clone(), b.held.clone());
    py.detach(move || {
        let (ca, cb) = (ctx(&ta, None)?, ctx(&tb, None)?);
        let cmp = ccl_bench::compare::compare(&ca, &cb, threshold);
        let (sa, sb) = (
            ta.trace.source.display().to_string(),
            tb.trace.source.display().to_string(),
        );
        let sides = ccl_bench::report::compare::Sides {
            a: &sa,
            b: &sb,
            threshold,
            top,
        };
        Ok(ccl_bench::report::compare::to_json(&sides, &cmp).to_string())
    })
}

/// `ccl-bench hang PATH --format json`: the verdict from the Flight Recorder
/// dumps at `path`, and the warnings of reading them.
#[pyfunction]
fn hang_json(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(move || {
        ccl_bench::headless::hang_report(&path)
            .map(|r| ccl_bench::report::hang::to_json(&r).to_string())
            .map_err(trace_error)
    })
}

/// `ccl-bench gate A B --format json`: run `b` judged against run `a` by
/// their per-step samples.
#[pyfunction]
#[pyo3(signature = (a, b, threshold, all_steps))]
fn gate_json(
    py: Python<'_>,
    a: PathBuf,
    b: PathBuf,
    threshold: f64,
    all_steps: bool,
) -> PyResult<String> {
    py.detach(move || {
        ccl_bench::headless::gate_json(Some(&a), None, None, &b, threshold, all_steps)
            .map(|doc| doc.to_string())
            .map_err(|e| TraceError::new_err(format!("{e:#}")))
    })
}

/// Every metric: (name, unit, group, about).
#[pyfunction]
fn metric_list() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    metrics::METRICS
        .iter()
        .map(|m| (m.name, m.unit.symbol(), m.group.name(), m.about))
        .collect()
}

/// Runs the command line with `argv` (the program name first); returns the
/// exit status.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(move || ccl_bench::entry::main(argv))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    m.add("SCHEMA_VERSION", ccl_bench::export::SCHEMA_VERSION)?;
    m.add(
        "METRICS_SCHEMA_VERSION",
        ccl_bench::report::json::SCHEMA_VERSION,
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Run>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(gate_json, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(hang_json, m)?)?;
    m.add_function(wrap_pyfunction!(metric_list, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    Ok(())
}
