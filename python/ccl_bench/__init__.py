"""ccl-bench: communication and compute metrics from multi-rank GPU profiler traces.

>>> import ccl_bench
>>> run = ccl_bench.load("runs/llama_8gpu")          # Kineto, nsys, XLA, ... one file per rank
>>> run.metric("communication_fraction")            # float, or None when it does not apply
>>> run.why("mfu")                                  # why it does not apply
>>> run.ops().to_pandas()                           # every device op, Arrow-backed, no copy
>>> ccl_bench.compare("runs/nccl", "runs/msccl")    # what changed, with the regression gate

Loading and every computation run in Rust with the GIL released. Tables
implement the Arrow PyCapsule interface (``__arrow_c_stream__``), so
``pyarrow.table(t)``, ``polars.DataFrame(t)`` and DuckDB take them without a
copy. Bad input raises :class:`TraceError` with the message the command line
prints. The metric names, units and meanings are those of ``ccl-bench
--list-metrics``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Tuple, Union

from ccl_bench import _native
from ccl_bench._native import TraceError

__version__: str = _native.__version__

#: Version of the exported tables' layout (Python tables, Parquet, Perfetto metadata).
SCHEMA_VERSION: int = _native.SCHEMA_VERSION
#: Version of the ``--metrics --format json`` document (``Run.metrics_document()``).
METRICS_SCHEMA_VERSION: int = _native.METRICS_SCHEMA_VERSION

PathLike = Union[str, "os.PathLike[str]"]

#: Unit of each metric, by name.
_UNITS: Dict[str, str] = {m[0]: m[1] for m in _native.metric_list()}

__all__ = [
    "FAMILIES",
    "METRICS_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "Run",
    "Table",
    "TraceError",
    "TraceWarning",
    "compare",
    "gate",
    "hang",
    "load",
    "metric_cal",
    "metric_names",
    "metric_value",
    "summarize",
]


class TraceWarning(UserWarning):
    """Something loading noticed (damaged events skipped, a file not read, clocks).

    ``kind`` says what it is about, and so what it puts in doubt:
    ``"damaged"`` (a file read in part: every figure of its rank),
    ``"ignored"`` (values not taken), ``"reading"`` (how something the format
    leaves open was read), ``"ranks"`` (ranks missing or guessed: who waits
    for whom), ``"not_read"``, ``"clock"``, ``"matching"``, ``"rules"``,
    ``"not_spilled"``, ``"not_rebinned"``; ``None`` for a warning of the hang
    report.
    """

    def __init__(self, message: str, kind: Optional[str] = None) -> None:
        super().__init__(message)
        self.kind = kind


class Table:
    """An Arrow table (one record batch per rank for the op tables).

    It implements the Arrow PyCapsule interface: ``pyarrow.table(t)``,
    ``polars.DataFrame(t)`` and ``duckdb.sql("select * from t")`` read it in
    place. Column meanings: ``docs/schema.md`` in the ccl-bench repository.
    """

    __slots__ = ("_t", "name")

    def __init__(self, native: Any, name: str) -> None:
        self._t = native
        self.name = name

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._t.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> Any:
        return self._t.__arrow_c_schema__()

    def __len__(self) -> int:
        return self._t.num_rows

    @property
    def num_rows(self) -> int:
        return self._t.num_rows

    @property
    def column_names(self) -> List[str]:
        return list(self._t.column_names)

    def __repr__(self) -> str:
        return f"<ccl_bench.Table {self.name}: {self.num_rows} rows, columns {self.column_names}>"

    def to_pyarrow(self) -> Any:
        """A ``pyarrow.Table`` over the same buffers."""
        import pyarrow as pa

        return pa.table(self)

    def to_pandas(self) -> Any:
        """A pandas DataFrame with Arrow-backed columns (``pd.ArrowDtype``): no copy."""
        import pandas as pd

        return self.to_pyarrow().to_pandas(types_mapper=pd.ArrowDtype)

    def to_polars(self) -> Any:
        """A polars DataFrame over the same buffers (names become categoricals)."""
        import polars as pl

        return pl.DataFrame(self)


class Run:
    """A loaded run: every rank's timeline, its metrics and tables."""

    __slots__ = ("_r",)

    def __init__(self, native: Any) -> None:
        self._r = native

    def __repr__(self) -> str:
        return f"<ccl_bench.Run {self.path} ranks={self.rank_ids}>"

    @property
    def path(self) -> str:
        """The file or directory loaded."""
        return str(self._r.path)

    @property
    def rank_ids(self) -> List[int]:
        """Rank numbers, in order."""
        return list(self._r.rank_ids)

    @property
    def formats(self) -> List[str]:
        """Source format of each rank: "pytorch", "nsys" or "xla"."""
        return list(self._r.formats())

    @property
    def warnings(self) -> List[str]:
        """What loading noticed (also issued as :class:`TraceWarning`)."""
        return list(self._r.warnings)

    @property
    def warning_kinds(self) -> List[str]:
        """Each warning's kind, in the order of :attr:`warnings` (see
        :class:`TraceWarning`)."""
        return list(self._r.warning_kinds)

    def metric(self, name: str, rank: Optional[int] = None) -> Optional[Union[float, int]]:
        """The metric's value over all ranks (or ``rank`` only), in its unit.

        ``None`` when the metric does not apply to this trace; :meth:`why`
        says why. Counts and ranks are ``int``, everything else ``float``.
        Raises ``ValueError`` for an unknown name or rank.
        """
        v = self._r.metric(name, rank)
        if v is not None and _UNITS.get(name) in ("count", "rank") and float(v).is_integer():
            return int(v)
        return v

    def why(self, name: str, rank: Optional[int] = None) -> Optional[str]:
        """Why the metric does not apply (``None`` when it does)."""
        return self._r.why(name, rank)

    def metrics_document(self) -> Dict[str, Any]:
        """The ``ccl-bench --metrics --format json`` document of this run."""
        return json.loads(self._r.metrics_json())

    def metrics(self) -> Dict[str, Dict[str, Any]]:
        """Every metric by name: ``value`` (None when not applicable), ``unit``,
        ``per_rank`` ({rank: value}), ``terms`` ({label: value}, e.g. the classes
        of ``break_down_steps``), ``note``, ``not_applicable`` (the reason) and
        ``about`` (what it means and which steps and ranks it covers)."""
        out: Dict[str, Dict[str, Any]] = {}
        for m in self.metrics_document()["metrics"]:
            out[m["name"]] = {
                "value": m["value"],
                "unit": m["unit"],
                "per_rank": {int(k): v for k, v in m.get("per_rank", {}).items()},
                "terms": {p["label"]: p["value"] for p in m.get("parts", [])},
                "note": m.get("note"),
                "not_applicable": m.get("not_applicable"),
                "about": m["about"],
            }
        return out

    def ops(self, rank: Optional[int] = None) -> Table:
        """Every device op (kernel, memory copy or set) of every rank, or of
        ``rank`` alone, on the aligned clock. A summary's ranks are read
        from their tables a few at a time, so a run too large to hold whole
        can be walked rank by rank."""
        return Table(self._r.ops(rank), "ops")

    def kernels(self, rank: Optional[int] = None) -> Table:
        """Per rank (or ``rank`` alone) and op name: count, total, mean, min
        and max time, share."""
        return Table(self._r.kernels(rank), "kernels")

    def collectives(self) -> Table:
        """One row per member of each collective matched across ranks: start,
        end, wait for the last member, transfer, who arrived last."""
        return Table(self._r.collectives(), "collectives")

    def steps(self, rank: Optional[int] = None) -> Table:
        """Every step of every rank (or of ``rank``), and whether per-step
        metrics use it."""
        return Table(self._r.steps(rank), "steps")

    def ranks(self) -> Table:
        """One row per rank: source, clock offset, where its steps went."""
        return Table(self._r.ranks(), "ranks")

    def export_parquet(self, directory: PathLike) -> List[str]:
        """Writes ops, kernels, collectives, steps and ranks as Parquet files."""
        return [str(p) for p in self._r.export_parquet(os.fspath(directory))]

    def export_perfetto(self, path: PathLike) -> int:
        """Writes one Chrome trace file for Perfetto (gzipped for ``.gz``); returns events."""
        return self._r.export_perfetto(os.fspath(path))


def load(
    path: PathLike,
    *,
    iteration: Optional[int] = None,
    align: str = "collectives",
    classes: Optional[PathLike] = None,
    all_steps: bool = False,
    window: Optional[str] = None,
    card: Optional[PathLike] = None,
    progress: Optional[bool] = None,
    cache: Optional[PathLike] = None,
    run: Optional[int] = None,
) -> Run:
    """Loads a trace directory or file, as ``ccl-bench --trace PATH`` does.

    ``iteration``: which ``profile_traces/iteration_K`` (default the newest).
    ``align``: ``"collectives"`` puts every rank on rank 0's clock, ``"none"``
    keeps each file's own. ``classes``: kernel class rules (TOML). ``all_steps``:
    per-step averages over every step (default: warm-up and profiler stop left out).
    ``window``: per-rank window folders: ``"newest"``, ``"all"`` or a number.
    ``card``: a workload card to use instead of one beside the traces.
    ``progress``: a progress bar on stderr (default: when stderr is a terminal).
    ``cache``: a folder of summaries: the trace's summary there is used when
    current, and built first otherwise (see :func:`summarize`). ``path`` may
    be a summary folder itself. ``run``: of several unrelated runs in one
    folder, the ``run``-th in the order of their first file's name (default:
    the newest; a warning lists them).
    Raises :class:`TraceError` when the input cannot be read.
    """
    if align not in ("collectives", "none"):
        raise ValueError(f"align must be 'collectives' or 'none', not {align!r}")
    if progress is None:
        progress = sys.stderr is not None and sys.stderr.isatty()
    native = _native.load(
        os.fspath(path),
        iteration=iteration,
        window=window,
        align=align == "collectives",
        classes=os.fspath(classes) if classes is not None else None,
        all_steps=all_steps,
        card=os.fspath(card) if card is not None else None,
        progress=bool(progress),
        cache=os.fspath(cache) if cache is not None else None,
        run=run,
    )
    for w, kind in zip(native.warnings, native.warning_kinds):
        warnings.warn(TraceWarning(w, kind), stacklevel=2)
    return Run(native)


def summarize(
    path: PathLike,
    out: Optional[PathLike] = None,
    shard: Optional[Union[str, Tuple[int, int]]] = None,
    *,
    only: Optional[List[PathLike]] = None,
    iteration: Optional[int] = None,
    window: Optional[str] = None,
) -> Dict[str, Any]:
    """Summarizes a trace directory or file into compact Parquet tables, as
    ``ccl-bench summarize PATH --out OUT`` does: the map step of a large run.

    ``out`` defaults to ``PATH.sum`` beside the traces. ``shard`` (``"I/N"``
    or ``(I, N)``) takes this call's share of the inputs, so N calls on
    N workers (Dask, Ray, a process pool) write one summary together;
    ``only`` (a list of the run's files) takes those instead, for engines
    that map over files. Every call names the same ``path`` and ``out``;
    inputs already summarized and unchanged are skipped. A call that leaves
    the whole summary written (no ``shard``, no ``only``) also computes every
    metric once and keeps the results in it, as the command does, so that
    ``ccl-bench OUT --metric NAME`` answers without reading a table; after a
    fan-out, one such call runs that reduce. :func:`load` then opens
    ``out`` (or ``PATH``, while the summary beside it is current) without
    parsing a trace. Returns what was done: ``inputs``, ``mine``,
    ``written``, ``unchanged``, ``failed`` (reader errors, recorded in the
    summary), ``bytes_in`` and ``bytes_out``. Raises :class:`TraceError`.
    """
    if isinstance(shard, tuple):
        shard = f"{shard[0]}/{shard[1]}"
    target = os.fspath(out) if out is not None else os.fspath(path).rstrip("/\\") + ".sum"
    inputs, mine, written, unchanged, failed, bytes_in, bytes_out = _native.summarize(
        os.fspath(path),
        target,
        shard=shard,
        only=[os.fspath(f) for f in only or []],
        iteration=iteration,
        window=window,
    )
    return {
        "out": target,
        "inputs": inputs,
        "mine": mine,
        "written": written,
        "unchanged": unchanged,
        "failed": failed,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
    }


def _run(x: Union[Run, PathLike]) -> Run:
    return x if isinstance(x, Run) else load(x)


def compare(a: Union[Run, PathLike], b: Union[Run, PathLike], threshold: float = 0.05) -> Dict[str, Any]:
    """Compares two runs as ``ccl-bench compare A B --format json`` does.

    ``threshold`` is a fraction (0.05 = 5 %). The result holds every metric
    with both values, the change and its verdict, and the kernels, classes,
    collectives and ranks whose time changed most.
    """
    ra, rb = _run(a), _run(b)
    return json.loads(_native.compare_json(ra._r, rb._r, threshold=threshold))


def gate(
    a: PathLike, b: PathLike, threshold: float = 0.05, all_steps: bool = False
) -> Dict[str, Any]:
    """Run ``b`` judged against run ``a`` by their per-step samples, as
    ``ccl-bench gate A B --format json`` gives it (docs/compare.md).

    ``gate["verdict"]`` is ``"regressed"``, ``"improved"``, ``"no_change"``
    or ``"inconclusive"``; ``gate["figures"]`` has, per figure (step time,
    exposed communication, collective wait, busy share), each run's mean,
    spread and steps, the change relative to A and its 95 % interval, and
    why. ``threshold`` is relative (0.05: 5 %); ``all_steps`` counts the
    first and last steps too.
    """
    return json.loads(
        _native.gate_json(os.fspath(a), os.fspath(b), float(threshold), bool(all_steps))
    )


def hang(path: PathLike) -> Dict[str, Any]:
    """Why a run hung, from its NCCL Flight Recorder dumps, as
    ``ccl-bench hang PATH --format json`` gives it.

    ``path`` is a folder of dumps (``nccl_trace_rank_N``, pickle or JSON) or
    one dump. The result's ``verdict`` is ``"hang"``, ``"desync"`` or
    ``"none"``; ``headline`` says it in one sentence; ``findings`` has, per
    process group, the call not every member completed, the ranks that never
    scheduled it and where each side is; ``ranks`` has each rank's idle time,
    the one that stopped first first. Raises :class:`TraceError` when there
    are no dumps or none can be read.
    """
    doc: Dict[str, Any] = json.loads(_native.hang_json(os.fspath(path)))
    for w in doc["warnings"]:
        warnings.warn(w, TraceWarning, stacklevel=2)
    return doc


def metric_names() -> List[str]:
    """Every metric name, in the order of ``ccl-bench --list-metrics``."""
    return list(_UNITS)


def metric_value(directory: PathLike, name: str, missing: float = -1.0) -> float:
    """One metric as CCL-Bench's per-metric tools return it: a float, or
    ``missing`` (CCL-Bench's -1) when it does not apply."""
    v = load(directory, progress=False).metric(name)
    return missing if v is None else v


from ccl_bench._families import FAMILIES, metric_cal  # noqa: E402
