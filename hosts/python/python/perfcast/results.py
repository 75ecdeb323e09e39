"""Typed results: one class per kind of result, each a ``dict`` of the command's JSON (the
CLI's ``--format json`` fields, so ``r["report"]["mfu"]`` still works) with typed properties
for its headline numbers, one table schema (``columns()``, ``records()``, ``to_pandas()``,
``to_polars()``, ``to_parquet(path)``: the same columns and units in all of them) and a plot
(``plot()``, a matplotlib ``Figure``).

Units: a property or a column says its unit in its name: ``_s`` seconds, ``_bytes`` bytes,
``_gib`` GiB (2**30 bytes), ``_per_s`` per second (``tokens_per_s``, ``requests_per_s``,
``flops_per_s``), ``_gbs`` GB/s; a name without a unit is a count, a ratio (``mfu``, a share,
an occupancy) or text. The typed objects carry memory in bytes; the tables in GiB (one
number a person reads), both named so.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union

__all__ = [
    "Result",
    "TrainingResult",
    "InferenceResult",
    "MaxBatchResult",
    "RooflineResult",
    "SearchResult",
    "ServingSearchResult",
    "ServeResult",
    "ValidationResult",
    "CalibrationResult",
    "TrainingPlan",
    "TrainingStep",
    "StageMemory",
    "Network",
    "NetworkLevel",
    "Interval",
    "InferencePlan",
    "PhaseTime",
    "InferenceMemory",
    "RooflineOp",
    "RankedPlan",
    "ParetoPoint",
    "Deployment",
    "Percentiles",
    "ServeRun",
    "ValidationCase",
    "Preset",
    "Study",
]

GIB = float(2**30)

Row = Dict[str, Any]


# Optional packages: each says what to install when it is missing.


def _import(name: str) -> Any:
    """An optional package (``ImportError`` when it is not installed)."""
    return importlib.import_module(name)


def _pandas() -> Any:
    try:
        pandas = _import("pandas")
    except ImportError:
        raise ImportError(
            "to_pandas() needs pandas, which is not installed: pip install pandas"
        ) from None
    return pandas


def _polars() -> Any:
    try:
        polars = _import("polars")
    except ImportError:
        raise ImportError(
            "to_polars() needs polars, which is not installed: pip install polars"
        ) from None
    return polars


def _pyplot() -> Any:
    try:
        plt = _import("matplotlib.pyplot")
    except ImportError:
        raise ImportError(
            "plot() needs matplotlib, which is not installed: pip install matplotlib"
        ) from None
    return plt


def _axes(ax: Any) -> Tuple[Any, Any]:
    """``(figure, axes)``: a new figure (pyplot's, so that a notebook shows it and
    ``plt.show()`` does), or the figure of the ``ax`` given."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = _pyplot().subplots()
    return fig, ax


_PANDAS_TYPES = {"float": "float64", "int": "Int64", "bool": "boolean", "str": "object"}


def _pandas_frame(
    pandas: Any, rows: Sequence[Row], columns: Sequence[str], types: Optional[Mapping[str, str]]
) -> Any:
    frame = pandas.DataFrame(list(rows), columns=list(columns))
    if types:
        frame = frame.astype({c: _PANDAS_TYPES[t] for c, t in types.items()})
    return frame


def _polars_frame(
    polars: Any, rows: Sequence[Row], columns: Sequence[str], types: Optional[Mapping[str, str]]
) -> Any:
    data = {c: [r.get(c) for r in rows] for c in columns}
    if not types:
        return polars.DataFrame(data, strict=False)
    kinds = {"float": polars.Float64, "int": polars.Int64, "bool": polars.Boolean, "str": polars.String}
    return polars.DataFrame(data, schema={c: kinds[types[c]] for c in columns}, strict=False)


def write_parquet(
    rows: Sequence[Row],
    columns: Sequence[str],
    path: Union[str, "os.PathLike[str]"],
    types: Optional[Mapping[str, str]] = None,
) -> None:
    """Rows as a Parquet file with these columns (of these types): through pandas and
    pyarrow (or fastparquet), else polars; an ImportError naming what to install when none
    is there."""
    path = os.fspath(path)
    where = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(where):
        raise FileNotFoundError(2, f"no directory {where} to write {path} in", path)
    try:
        pandas = _import("pandas")
        frame = _pandas_frame(pandas, rows, columns, types)
        try:
            pyarrow = _import("pyarrow")
        except ImportError:
            _import("fastparquet")
            frame.to_parquet(path, engine="fastparquet", index=False)
            return
        kinds = {
            "float": pyarrow.float64(), "int": pyarrow.int64(), "bool": pyarrow.bool_(),
            "str": pyarrow.string(),
        }
        # The schema's types, also for a column of missing values only.
        schema = pyarrow.schema([(c, kinds[types[c]]) for c in columns]) if types else None
        frame.to_parquet(path, engine="pyarrow", index=False, schema=schema)
        return
    except ImportError:
        pass
    try:
        polars = _import("polars")
    except ImportError:
        raise ImportError(
            "to_parquet() needs pyarrow (with pandas) or polars, and neither is installed: "
            "pip install pyarrow (or pip install polars)"
        ) from None
    _polars_frame(polars, rows, columns, types).write_parquet(path)


# Small records.


def _num(d: Mapping[str, Any], key: str) -> float:
    """A number of a JSON object, 0 when missing or null."""
    return float(d.get(key) or 0.0)


def _f(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def _gib(v: Any) -> Optional[float]:
    return None if v is None else float(v) / GIB


def _ms(v: Any) -> Optional[float]:
    """Milliseconds in the JSON, seconds here."""
    return None if v is None else float(v) / 1e3


@dataclass(frozen=True)
class Interval:
    """An error bar: the ``level`` (e.g. 0.8) interval ``[low, high]`` of a value, in its
    unit (seconds for times)."""

    low: float
    high: float
    level: Optional[float] = None


def _interval(pair: Any, level: Any = None, scale: float = 1.0) -> Optional[Interval]:
    if not isinstance(pair, (list, tuple)) or len(pair) != 2 or None in pair:
        return None
    return Interval(float(pair[0]) * scale, float(pair[1]) * scale, _f(level))


def _metric_interval(doc: Mapping[str, Any], metric: str, scale: float = 1.0) -> Optional[Interval]:
    bars = doc.get("error_bars") or {}
    m = (bars.get("metrics") or {}).get(metric) or {}
    return _interval(m.get("interval"), bars.get("level"), scale)


@dataclass(frozen=True)
class TrainingPlan:
    """A training plan (the JSON's ``plan``; ``raw`` holds every field of it)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    sp: bool
    zero_stage: int
    micro_batch: int
    global_batch: int
    recompute: Optional[str]
    schedule: Optional[str]
    precision: Optional[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrainingPlan":
        g = d.get
        return cls(
            tp=g("tp", 1), pp=g("pp", 1), dp=g("dp", 1), cp=g("cp", 1), ep=g("ep", 1),
            vpp=g("vpp", 1), sp=bool(g("sp", False)), zero_stage=g("zero_stage", 0),
            micro_batch=g("micro_batch", 1), global_batch=g("global_batch", 1),
            recompute=g("recompute"), schedule=g("schedule"), precision=g("precision"),
            raw=dict(d),
        )


#: The types of the columns that are not numbers.
_PLAN_TYPES = {
    **{c: "int" for c in ("tp", "pp", "dp", "cp", "ep", "vpp", "zero_stage", "micro_batch", "global_batch")},
    "sp": "bool", "recompute": "str", "schedule": "str", "precision": "str",
}
_STEP_TYPES = {"devices": "int", "fits": "bool", "bottleneck": "str"}

#: A training plan's table columns (``TrainingPlan``'s fields).
PLAN_COLUMNS = (
    "tp", "pp", "dp", "cp", "ep", "vpp", "sp", "zero_stage", "micro_batch", "global_batch",
    "recompute", "schedule", "precision",
)


def _plan_row(plan: Mapping[str, Any]) -> Row:
    p = TrainingPlan.from_json(plan)
    return {c: getattr(p, c) for c in PLAN_COLUMNS}


@dataclass(frozen=True)
class StageMemory:
    """Memory per device of one pipeline stage, bytes."""

    stage: int
    in_flight: float
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    temp_bytes: float
    reserved_bytes: float
    total_bytes: float

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "StageMemory":
        return cls(
            stage=int(d.get("stage", 0)), in_flight=_num(d, "in_flight"), weights_bytes=_num(d, "weights"),
            grads_bytes=_num(d, "grads"), optimizer_bytes=_num(d, "optimizer"),
            activations_bytes=_num(d, "activations"), temp_bytes=_num(d, "temp"),
            reserved_bytes=_num(d, "reserved"), total_bytes=_num(d, "total"),
        )


@dataclass(frozen=True)
class NetworkLevel:
    """One level of the network: its kind, how many devices it joins (``None``: all) and its
    bandwidth per device, GB/s."""

    kind: str
    domain_size: Optional[int]
    bandwidth_gbs: float


@dataclass(frozen=True)
class Network:
    """The network a training step ran on (the JSON's ``network``; ``raw`` holds all of it:
    links, derived topology, cost breakdown)."""

    topology: Optional[str]
    component: Optional[str]
    levels: List[NetworkLevel]
    strategies: List[str]
    cost_usd: Optional[float]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Network":
        return cls(
            topology=d.get("topology"),
            component=d.get("component"),
            levels=[
                NetworkLevel(l.get("kind", ""), l.get("domain_size"), float(l.get("bandwidth_gbs") or 0.0))
                for l in d.get("levels") or []
            ],
            strategies=[str(s) for s in d.get("strategies") or []],
            cost_usd=_f(d.get("cost_usd")),
            raw=dict(d),
        )


#: The additive parts of a training step's time, in the order of the CLI's breakdown: each
#: op class's compute (recompute included), exposed communication, bubble, optimizer.
BREAKDOWN_KEYS = (
    "compute_gemm", "compute_attention", "compute_norm", "compute_activation",
    "compute_dropout", "compute_elementwise", "compute_rope", "compute_cast",
    "compute_embedding", "compute_loss", "tp_comm", "cp_comm", "pp_comm", "dp_comm",
    "zero_comm", "ep_comm", "bubble", "optimizer",
)
#: Parts of the breakdown that are not added to the step time: the recompute within the
#: compute above, and communication hidden under compute.
_NOT_ADDED = ("recompute", "hidden_comm")


def _breakdown(b: Mapping[str, Any]) -> Dict[str, float]:
    out = {k: 0.0 for k in BREAKDOWN_KEYS}
    for k, v in (b.get("compute") or {}).items():
        out[f"compute_{k}"] = float(v)
    for k, v in b.items():
        if k != "compute" and k not in _NOT_ADDED and isinstance(v, (int, float)):
            out[k] = float(v)
    return out


@dataclass(frozen=True)
class TrainingStep:
    """One training step's report (a ``predict``, or a plan of a ``search``)."""

    iteration_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    hfu: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    peak_tflops: float
    devices: int
    micro_batches: int
    tokens_per_iteration: float
    #: Seconds per part of the step (``BREAKDOWN_KEYS``); they add up to the step time.
    breakdown: Dict[str, float]
    #: Seconds of recomputed forward passes (within the compute parts).
    recompute_s: float
    #: Seconds of communication hidden under compute (not in the step time).
    hidden_comm_s: float
    peak_memory_bytes: float
    memory_capacity_bytes: float
    fits: bool
    bottleneck: Optional[str]
    memory_stages: List[StageMemory]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, r: Mapping[str, Any]) -> "TrainingStep":
        b = r.get("breakdown") or {}
        mem = r.get("memory") or {}
        stages = [
            StageMemory.from_json(mem[k])
            for k in ("first_stage", "second_stage", "last_stage")
            if isinstance(mem.get(k), dict)
        ]
        return cls(
            iteration_time_s=float(r["iteration_time"]),
            tokens_per_s=float(r.get("tokens_per_s", 0.0)),
            tokens_per_s_per_gpu=float(r.get("tokens_per_s_per_gpu", 0.0)),
            mfu=float(r.get("mfu", 0.0)),
            hfu=float(r.get("hfu", 0.0)),
            model_tflops_per_gpu=float(r.get("tflops_per_gpu_model", 0.0)),
            hardware_tflops_per_gpu=float(r.get("tflops_per_gpu_hardware", 0.0)),
            peak_tflops=float(r.get("peak_tflops", 0.0)),
            devices=int(r.get("devices", 0)),
            micro_batches=int(r.get("micro_batches", 0)),
            tokens_per_iteration=float(r.get("tokens_per_iteration", 0.0)),
            breakdown=_breakdown(b),
            recompute_s=float(b.get("recompute") or 0.0),
            hidden_comm_s=float(b.get("hidden_comm") or 0.0),
            peak_memory_bytes=float(mem.get("peak") or 0.0),
            memory_capacity_bytes=float(mem.get("capacity") or 0.0),
            fits=bool(mem.get("fits", True)),
            bottleneck=r.get("bottleneck"),
            memory_stages=stages,
            raw=dict(r),
        )


#: A training step's table columns (after the plan's).
STEP_COLUMNS = (
    "devices", "iteration_time_s", "iteration_time_lo_s", "iteration_time_hi_s",
    "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "hfu", "model_tflops_per_gpu",
    "hardware_tflops_per_gpu", "peak_memory_gib", "memory_capacity_gib", "fits", "bottleneck",
    *(f"{k}_s" for k in BREAKDOWN_KEYS), "recompute_s", "hidden_comm_s",
)


def _step_row(s: TrainingStep, interval: Optional[Interval]) -> Row:
    row: Row = {
        "devices": s.devices,
        "iteration_time_s": s.iteration_time_s,
        "iteration_time_lo_s": interval.low if interval else None,
        "iteration_time_hi_s": interval.high if interval else None,
        "tokens_per_s": s.tokens_per_s,
        "tokens_per_s_per_gpu": s.tokens_per_s_per_gpu,
        "mfu": s.mfu,
        "hfu": s.hfu,
        "model_tflops_per_gpu": s.model_tflops_per_gpu,
        "hardware_tflops_per_gpu": s.hardware_tflops_per_gpu,
        "peak_memory_gib": s.peak_memory_bytes / GIB,
        "memory_capacity_gib": s.memory_capacity_bytes / GIB,
        "fits": s.fits,
        "bottleneck": s.bottleneck,
    }
    for k, v in s.breakdown.items():
        row[f"{k}_s"] = v
    row["recompute_s"] = s.recompute_s
    row["hidden_comm_s"] = s.hidden_comm_s
    return row


# Results.


class Result(Dict[str, Any]):
    """A command's JSON result: a ``dict`` of the CLI's ``--format json`` fields, with one
    table (``records()``; ``to_pandas()``, ``to_polars()`` and ``to_parquet(path)`` of the
    same columns) and a plot (``plot()``). The typed subclasses name their headline numbers;
    this base class is what a command without one gives (its rows: its first list of
    records, flattened)."""

    #: The command whose JSON this is.
    kind: str = ""
    #: The table's columns (``None``: the union of the rows' keys, for this base class).
    COLUMNS: Optional[Tuple[str, ...]] = None
    _ROWS = ("plans", "runs", "cases", "rows", "ops", "points")

    #: The columns that are not numbers (``float``): ``int``, ``bool`` or ``str``.
    TYPES: Dict[str, str] = {}

    @classmethod
    def columns(cls) -> List[str]:
        """The table's columns, in order (the same in ``records()``, ``to_pandas()``,
        ``to_polars()`` and ``to_parquet()``)."""
        return list(cls.COLUMNS or ())

    @classmethod
    def schema(cls) -> Dict[str, str]:
        """Each column's type: ``float``, ``int``, ``bool`` or ``str`` (any may be missing:
        ``None``, NaN or null)."""
        return {c: cls.TYPES.get(c, "float") for c in cls.COLUMNS or ()}

    def _columns(self, rows: Sequence[Row]) -> List[str]:
        if self.COLUMNS is not None:
            return list(self.COLUMNS)
        return list(dict.fromkeys(k for r in rows for k in r))

    def to_dict(self) -> Dict[str, Any]:
        """A plain ``dict`` (deep copy)."""
        copy: Dict[str, Any] = json.loads(json.dumps(self))
        return copy

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self, indent=indent)

    def _rows(self) -> List[Row]:
        rows = next(
            (self[k] for k in self._ROWS if isinstance(self.get(k), list)),
            [dict(self)],
        )
        return [_flatten(r) if isinstance(r, dict) else {"value": r} for r in rows]

    def records(self) -> List[Row]:
        """The result's table as a list of dicts, one per row, every row with the same
        columns (``columns()``) in the units their names say."""
        rows = self._rows()
        cols = self._columns(rows)
        return [{c: r.get(c) for c in cols} for r in rows]

    def _schema(self, rows: Sequence[Row]) -> Optional[Dict[str, str]]:
        return self.schema() if self.COLUMNS is not None else None

    def to_pandas(self) -> Any:
        """The table (``records()``) as a pandas DataFrame, each column of its ``schema()``
        type (``float64``, nullable ``Int64`` and ``boolean``, ``object`` text)."""
        rows = self.records()
        return _pandas_frame(_pandas(), rows, self._columns(rows), self._schema(rows))

    def to_polars(self) -> Any:
        """The table (``records()``) as a polars DataFrame, each column of its ``schema()``
        type (``Float64``, ``Int64``, ``Boolean``, ``String``)."""
        rows = self.records()
        return _polars_frame(_polars(), rows, self._columns(rows), self._schema(rows))

    def to_parquet(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the table (``records()``: the columns and types of ``to_pandas()``) to a
        Parquet file, through pandas and pyarrow, or polars."""
        rows = self.records()
        write_parquet(rows, self._columns(rows), path, self._schema(rows))

    def plot(self, ax: Any = None) -> Any:
        """A matplotlib Figure of the result (into ``ax`` if given)."""
        raise NotImplementedError(f"no plot for a {type(self).__name__}")

    def _repr_html_(self) -> str:
        rows = self.records()
        cols = self._columns(rows)
        head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f"<td>{_esc(_cell(r.get(c)))}</td>" for c in cols) + "</tr>"
            for r in rows[:50]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _esc(v: Any) -> str:
    return str(v).replace("&", "&amp;").replace("<", "&lt;")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> Row:
    out: Row = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


class TrainingResult(Result):
    """One training step (``perfcast.predict``): time, rates, MFU, the time breakdown,
    memory per stage, the plan and the network. Its table is one row."""

    kind = "predict"
    COLUMNS = ("model", "system", *PLAN_COLUMNS, *STEP_COLUMNS)
    TYPES = {"model": "str", "system": "str", **_PLAN_TYPES, **_STEP_TYPES}

    @property
    def model(self) -> str:
        return str(self.get("model", ""))

    @property
    def system(self) -> str:
        return str(self.get("system", ""))

    @property
    def plan(self) -> TrainingPlan:
        return TrainingPlan.from_json(self.get("plan") or {})

    @property
    def step(self) -> TrainingStep:
        """The step's report, typed (the properties below are its fields)."""
        return TrainingStep.from_json(self["report"])

    @property
    def iteration_time_s(self) -> float:
        return float(self["report"]["iteration_time"])

    @property
    def tokens_per_s(self) -> float:
        return float(self["report"]["tokens_per_s"])

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return float(self["report"]["tokens_per_s_per_gpu"])

    @property
    def mfu(self) -> float:
        return float(self["report"]["mfu"])

    @property
    def hfu(self) -> float:
        return float(self["report"]["hfu"])

    @property
    def model_tflops_per_gpu(self) -> float:
        return float(self["report"]["tflops_per_gpu_model"])

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return float(self["report"]["tflops_per_gpu_hardware"])

    @property
    def devices(self) -> int:
        return int(self["report"]["devices"])

    @property
    def breakdown(self) -> Dict[str, float]:
        """Seconds per part of the step (compute per op class, exposed communication per
        parallelism, bubble, optimizer): they add up to ``iteration_time_s``."""
        return _breakdown(self["report"].get("breakdown") or {})

    @property
    def recompute_s(self) -> float:
        """Seconds of recomputed forward passes (part of the compute in ``breakdown``)."""
        return float((self["report"].get("breakdown") or {}).get("recompute") or 0.0)

    @property
    def peak_memory_bytes(self) -> float:
        return float(self["report"]["memory"]["peak"])

    @property
    def memory_capacity_bytes(self) -> float:
        return float(self["report"]["memory"]["capacity"])

    @property
    def fits(self) -> bool:
        return bool(self["report"]["memory"]["fits"])

    @property
    def bottleneck(self) -> Optional[str]:
        b = self["report"].get("bottleneck")
        return None if b is None else str(b)

    @property
    def memory_per_stage(self) -> List[StageMemory]:
        """Memory per device of every pipeline stage, bytes."""
        return [StageMemory.from_json(s) for s in self.get("memory_per_stage") or []]

    @property
    def network(self) -> Optional[Network]:
        n = self.get("network")
        return Network.from_json(n) if isinstance(n, dict) else None

    @property
    def stack(self) -> Optional[str]:
        """The software stack the step ran on."""
        return (self.get("software") or {}).get("stack")

    @property
    def notes(self) -> List[str]:
        return [str(n) for n in self.get("notes") or []]

    @property
    def interval(self) -> Optional[Interval]:
        """The error bar of ``iteration_time_s``, seconds (``None`` without error bars)."""
        return _metric_interval(self, "iteration_time")

    def _rows(self) -> List[Row]:
        row: Row = {"model": self.get("model"), "system": self.get("system")}
        row.update(_plan_row(self.get("plan") or {}))
        row.update(_step_row(self.step, self.interval))
        return [row]

    def plot(self, ax: Any = None) -> Any:
        """The time breakdown: a horizontal bar per part of the step, seconds."""
        fig, ax = _axes(ax)
        parts = {k: v for k, v in self.breakdown.items() if v > 0}
        names = list(parts)[::-1]
        ax.barh(names, [parts[n] for n in names], color="C0")
        ax.set_xlabel("seconds per step")
        ax.set_title(f"{self.model}: {self.iteration_time_s:.3g} s per step, MFU {self.mfu:.1%}")
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class InferencePlan:
    """A static inference plan (the JSON's ``plan``; ``raw`` holds every field)."""

    tp: int
    pp: int
    replicas: int
    batch: int
    input_len: int
    output_len: int
    weight_dtype: Optional[str]
    activation_dtype: Optional[str]
    kv_dtype: Optional[str]
    attention: Optional[str]
    ep: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "InferencePlan":
        g = d.get
        return cls(
            tp=g("tp", 1), pp=g("pp", 1), replicas=g("replicas", 1), batch=g("batch", 1),
            input_len=g("input_len", 0), output_len=g("output_len", 0),
            weight_dtype=g("weight_dtype"), activation_dtype=g("activation_dtype"),
            kv_dtype=g("kv_dtype"), attention=g("attention"), ep=g("ep", 1), raw=dict(d),
        )


@dataclass(frozen=True)
class PhaseTime:
    """Prefill or decode: seconds per part, steps, FLOPs and device-memory bytes."""

    total_s: float
    gemm_s: float
    attention_s: float
    other_ops_s: float
    communication_s: float
    overheads_s: float
    steps: int
    flops: float
    device_bytes: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "PhaseTime":
        return cls(
            total_s=_num(d, "total"), gemm_s=_num(d, "gemm"), attention_s=_num(d, "attention"),
            other_ops_s=_num(d, "other_ops"), communication_s=_num(d, "communication"),
            overheads_s=_num(d, "overheads"), steps=int(d.get("steps") or 0), flops=_num(d, "flops"),
            device_bytes=_num(d, "device_bytes"),
        )


@dataclass(frozen=True)
class InferenceMemory:
    """Memory per device of an inference instance, bytes."""

    weights_bytes: float
    kv_cache_bytes: float
    workspace_bytes: float
    reserve_bytes: float
    total_bytes: float
    capacity_bytes: float
    kv_per_token_bytes: float
    fits: bool

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "InferenceMemory":
        return cls(
            weights_bytes=_num(d, "weights"), kv_cache_bytes=_num(d, "kv_cache"),
            workspace_bytes=_num(d, "workspace"), reserve_bytes=_num(d, "reserve"),
            total_bytes=_num(d, "total"),
            capacity_bytes=_num(d, "capacity"), kv_per_token_bytes=_num(d, "kv_per_token"),
            fits=bool(d.get("fits", True)),
        )


_INFER_MEMORY_COLUMNS = (
    "weights_gib", "kv_cache_gib", "workspace_gib", "reserve_gib", "memory_total_gib",
    "memory_capacity_gib", "fits",
)


def _infer_memory_row(m: InferenceMemory) -> Row:
    return {
        "weights_gib": m.weights_bytes / GIB,
        "kv_cache_gib": m.kv_cache_bytes / GIB,
        "workspace_gib": m.workspace_bytes / GIB,
        "reserve_gib": m.reserve_bytes / GIB,
        "memory_total_gib": m.total_bytes / GIB,
        "memory_capacity_gib": m.capacity_bytes / GIB,
        "fits": m.fits,
    }


_PHASE_PARTS = ("gemm", "attention", "other_ops", "communication", "overheads")


class InferenceResult(Result):
    """Static inference (``perfcast.infer``): TTFT, time per output token, latency,
    throughput, prefill and decode time, memory. Its table is one row."""

    kind = "infer"
    COLUMNS = (
        "model", "system", "tp", "pp", "replicas", "batch", "input_len", "output_len",
        "weight_dtype", "kv_dtype", "attention", "gpus",
        "ttft_s", "ttft_lo_s", "ttft_hi_s", "tpot_s", "tpot_lo_s", "tpot_hi_s",
        "latency_s", "tokens_per_s", "tokens_per_s_per_gpu",
        "prefill_s", *(f"prefill_{p}_s" for p in _PHASE_PARTS),
        "decode_s", *(f"decode_{p}_s" for p in _PHASE_PARTS), "decode_steps",
        "prefill_mfu", "decode_bandwidth_utilization", *_INFER_MEMORY_COLUMNS,
    )
    TYPES = {
        "model": "str", "system": "str", "weight_dtype": "str", "kv_dtype": "str", "attention": "str",
        **{
            c: "int"
            for c in ("tp", "pp", "replicas", "batch", "input_len", "output_len", "gpus", "decode_steps")
        },
        "fits": "bool",
    }

    @property
    def model(self) -> str:
        return str(self.get("model", ""))

    @property
    def system(self) -> str:
        return str(self.get("system", ""))

    @property
    def plan(self) -> InferencePlan:
        return InferencePlan.from_json(self.get("plan") or {})

    @property
    def gpus(self) -> int:
        return int(self["gpus"])

    @property
    def ttft_s(self) -> float:
        """Time to first token, seconds."""
        return float(self["ttft"])

    @property
    def tpot_s(self) -> float:
        """Time per output token (decode step), seconds."""
        return float(self["tpot"])

    @property
    def latency_s(self) -> float:
        """Time of the whole request, seconds."""
        return float(self["latency"])

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second (all replicas)."""
        return float(self["tokens_per_s"])

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return float(self["tokens_per_s_per_gpu"])

    @property
    def prefill(self) -> PhaseTime:
        return PhaseTime.from_json(self.get("prefill") or {})

    @property
    def decode(self) -> PhaseTime:
        return PhaseTime.from_json(self.get("decode") or {})

    @property
    def memory(self) -> InferenceMemory:
        return InferenceMemory.from_json(self.get("memory") or {})

    @property
    def prefill_mfu(self) -> Optional[float]:
        return _f(self.get("prefill_mfu"))

    @property
    def decode_bandwidth_utilization(self) -> Optional[float]:
        return _f(self.get("decode_bandwidth_utilization"))

    @property
    def intervals(self) -> Dict[str, Interval]:
        """The error bars, seconds for the times: ``ttft_s``, ``tpot_s``, ``latency_s``,
        ``tokens_per_s``, ``tokens_per_s_per_gpu`` (those the result has)."""
        out = {}
        for metric, name, scale in (
            ("ttft", "ttft_s", 1e-3), ("tpot", "tpot_s", 1e-3), ("latency", "latency_s", 1e-3),
            ("tokens_per_s", "tokens_per_s", 1.0),
            ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu", 1.0),
        ):
            i = _metric_interval(self, metric, scale)
            if i is not None:
                out[name] = i
        return out

    def _rows(self) -> List[Row]:
        p = self.plan
        pre, dec, iv = self.prefill, self.decode, self.intervals
        row: Row = {
            "model": self.get("model"), "system": self.get("system"), "tp": p.tp, "pp": p.pp,
            "replicas": p.replicas, "batch": p.batch, "input_len": p.input_len,
            "output_len": p.output_len, "weight_dtype": p.weight_dtype, "kv_dtype": p.kv_dtype,
            "attention": p.attention, "gpus": self.gpus,
            "ttft_s": self.ttft_s,
            "ttft_lo_s": iv["ttft_s"].low if "ttft_s" in iv else None,
            "ttft_hi_s": iv["ttft_s"].high if "ttft_s" in iv else None,
            "tpot_s": self.tpot_s,
            "tpot_lo_s": iv["tpot_s"].low if "tpot_s" in iv else None,
            "tpot_hi_s": iv["tpot_s"].high if "tpot_s" in iv else None,
            "latency_s": self.latency_s, "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
        }
        for name, phase in (("prefill", pre), ("decode", dec)):
            row[f"{name}_s"] = phase.total_s
            for part in _PHASE_PARTS:
                row[f"{name}_{part}_s"] = getattr(phase, f"{part}_s")
        row["decode_steps"] = dec.steps
        row["prefill_mfu"] = self.prefill_mfu
        row["decode_bandwidth_utilization"] = self.decode_bandwidth_utilization
        row.update(_infer_memory_row(self.memory))
        return [row]

    def plot(self, ax: Any = None) -> Any:
        """TTFT and time per output token as bars, each split into GEMM, attention, other
        ops, communication and overheads, milliseconds."""
        fig, ax = _axes(ax)
        pre, dec = self.prefill, self.decode
        steps = max(1, dec.steps)
        bars = ["TTFT (prefill)", "TPOT (one decode step)"]
        bottom = [0.0, 0.0]
        for i, part in enumerate(_PHASE_PARTS):
            vals = [getattr(pre, f"{part}_s") * 1e3, getattr(dec, f"{part}_s") / steps * 1e3]
            ax.bar(bars, vals, bottom=bottom, label=part.replace("_", " "), color=f"C{i}")
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_ylabel("ms")
        ax.set_title(f"{self.model}: TTFT {self.ttft_s * 1e3:.3g} ms, TPOT {self.tpot_s * 1e3:.3g} ms")
        ax.legend()
        fig.tight_layout()
        return fig


class MaxBatchResult(Result):
    """The largest batch that fits (``perfcast.infer(..., max_batch=True)``). One row."""

    kind = "infer --max-batch"
    COLUMNS = ("model", "system", "max_batch", "input_len", "output_len", *_INFER_MEMORY_COLUMNS)
    TYPES = {
        "model": "str", "system": "str", "max_batch": "int", "input_len": "int", "output_len": "int",
        "fits": "bool",
    }

    @property
    def max_batch(self) -> int:
        return int(self["max_batch"])

    @property
    def memory(self) -> InferenceMemory:
        return InferenceMemory.from_json(self.get("memory") or {})

    def _rows(self) -> List[Row]:
        row: Row = {k: self.get(k) for k in ("model", "system", "max_batch", "input_len", "output_len")}
        row.update(_infer_memory_row(self.memory))
        return [row]


@dataclass(frozen=True)
class RooflineOp:
    """One op on the roofline: FLOPs, bytes moved, arithmetic intensity and the ridge point
    (FLOP/byte), its time (one instance; ``count`` instances), what bounds it."""

    name: str
    phase: Optional[str]
    op: str
    shape: str
    dtype: Optional[str]
    count: int
    flops: float
    bytes: float
    intensity: float
    ridge: float
    time_s: float
    bound: str
    limiter: Optional[str]
    share_of_phase_time: Optional[float]

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RooflineOp":
        if "m" in d:  # a model's GEMM (`--phase`)
            bound = d.get("bound")
            return cls(
                name=str(d.get("name")), phase=d.get("phase"), op="gemm",
                shape=f"{d.get('m')}x{d.get('n')}x{d.get('k')}", dtype=d.get("dtype"),
                count=int(d.get("count") or 1), flops=float(d.get("flops") or 0.0),
                bytes=float(d.get("bytes") or 0.0), intensity=float(d.get("intensity") or 0.0),
                ridge=float(d.get("ridge") or 0.0), time_s=float(d.get("time") or 0.0),
                bound=str(bound.get("bound") if isinstance(bound, dict) else bound),
                limiter=d.get("limiter"), share_of_phase_time=_f(d.get("share_of_phase_time")),
            )
        return cls(
            name=str(d.get("name")), phase=None, op=str(d.get("op")), shape=str(d.get("shape")),
            dtype=d.get("dtype"), count=1, flops=float(d.get("flops") or 0.0),
            bytes=float(d.get("bytes") or 0.0), intensity=float(d.get("intensity") or 0.0),
            ridge=float(d.get("ridge") or 0.0), time_s=float(d.get("time_s") or 0.0),
            bound=str(d.get("bound")), limiter=d.get("engine"), share_of_phase_time=None,
        )


class RooflineResult(Result):
    """Per-op roofline (``perfcast.roofline``): the config's ``[[ops]]``, or a model's GEMMs
    per phase. One row per op."""

    kind = "roofline"
    COLUMNS = (
        "name", "phase", "op", "shape", "dtype", "count", "flops", "bytes",
        "intensity_flops_per_byte", "ridge_flops_per_byte", "time_s", "achieved_flops_per_s",
        "bound", "limiter", "share_of_phase_time",
    )
    TYPES = {
        "name": "str", "phase": "str", "op": "str", "shape": "str", "dtype": "str", "count": "int",
        "bound": "str", "limiter": "str",
    }

    @property
    def ops(self) -> List[RooflineOp]:
        return [RooflineOp.from_json(o) for o in self.get("ops") or self.get("gemms") or []]

    def _rows(self) -> List[Row]:
        return [
            {
                "name": o.name, "phase": o.phase, "op": o.op, "shape": o.shape, "dtype": o.dtype,
                "count": o.count, "flops": o.flops, "bytes": o.bytes,
                "intensity_flops_per_byte": o.intensity, "ridge_flops_per_byte": o.ridge,
                "time_s": o.time_s, "achieved_flops_per_s": o.achieved_flops_per_s,
                "bound": o.bound, "limiter": o.limiter,
                "share_of_phase_time": o.share_of_phase_time,
            }
            for o in self.ops
        ]

    def plot(self, ax: Any = None) -> Any:
        """The roofline: each op's achieved TFLOP/s against its arithmetic intensity
        (log-log), coloured by what bounds it, with each ridge point."""
        fig, ax = _axes(ax)
        ops = [o for o in self.ops if o.time_s > 0 and o.intensity > 0]
        bounds = list(dict.fromkeys(o.bound for o in ops))
        for i, b in enumerate(bounds):
            sel = [o for o in ops if o.bound == b]
            ax.scatter([o.intensity for o in sel], [o.achieved_flops_per_s / 1e12 for o in sel],
                       label=f"{b}-bound", color=f"C{i}")
        for r in sorted({o.ridge for o in ops if o.ridge > 0}):
            ax.axvline(r, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("achieved TFLOP/s")
        ax.legend()
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class RankedPlan:
    """One plan a search kept: its rank, plan, device placement, step and error bar."""

    rank: int
    plan: TrainingPlan
    placement: Optional[str]
    step: TrainingStep
    interval: Optional[Interval]

    @property
    def iteration_time_s(self) -> float:
        return self.step.iteration_time_s

    @property
    def mfu(self) -> float:
        return self.step.mfu

    @property
    def peak_memory_bytes(self) -> float:
        return self.step.peak_memory_bytes


@dataclass(frozen=True)
class ParetoPoint:
    """A plan on the Pareto front of step time against memory per device."""

    time_s: float
    memory_gib: float
    devices: int
    plan: TrainingPlan
    placement: Optional[str]


class SearchResult(Result):
    """A training plan search (``perfcast.search``): the best plans, ranked, and the Pareto
    front of step time against memory. One row per plan kept."""

    kind = "search"
    COLUMNS = ("rank", *PLAN_COLUMNS, "placement", *STEP_COLUMNS)
    TYPES = {"rank": "int", **_PLAN_TYPES, "placement": "str", **_STEP_TYPES}

    @property
    def plans(self) -> List[RankedPlan]:
        level = (self.get("error_bars") or {}).get("level")
        return [
            RankedPlan(
                rank=int(p.get("rank", i + 1)),
                plan=TrainingPlan.from_json(p.get("plan") or {}),
                placement=p.get("placement"),
                step=TrainingStep.from_json(p["report"]),
                interval=_interval(p.get("interval"), level),
            )
            for i, p in enumerate(self.get("plans") or [])
        ]

    @property
    def best(self) -> Optional[RankedPlan]:
        plans = self.plans
        return plans[0] if plans else None

    @property
    def pareto(self) -> List[ParetoPoint]:
        """Less memory, more time: the plans no other plan beats on both."""
        return [
            ParetoPoint(
                time_s=float(p["time_s"]), memory_gib=float(p["memory_gib"]),
                devices=int(p.get("devices", 0)), plan=TrainingPlan.from_json(p.get("plan") or {}),
                placement=p.get("placement"),
            )
            for p in self.get("pareto") or []
        ]

    @property
    def summary(self) -> Dict[str, Any]:
        """What the search enumerated, pruned and evaluated, and how long it took."""
        return dict(self.get("summary") or {})

    def _rows(self) -> List[Row]:
        rows = []
        for p in self.plans:
            row: Row = {"rank": p.rank}
            row.update(_plan_row(p.plan.raw))
            row["placement"] = p.placement
            row.update(_step_row(p.step, p.interval))
            rows.append(row)
        return rows

    def plot(self, ax: Any = None) -> Any:
        """The Pareto front: step time against memory per device, with the plans kept."""
        fig, ax = _axes(ax)
        front = sorted(self.pareto, key=lambda p: p.memory_gib)
        ax.plot([p.memory_gib for p in front], [p.time_s for p in front], "o-", color="C3",
                label="Pareto front")
        plans = self.plans
        ax.scatter([p.step.peak_memory_bytes / GIB for p in plans],
                   [p.iteration_time_s for p in plans], color="C0", label=f"top {len(plans)} plans",
                   zorder=3)
        ax.set_xlabel("memory per device (GiB)")
        ax.set_ylabel("step time (s)")
        ax.legend()
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class Deployment:
    """A serving deployment a search measured: its shape and its load point's numbers."""

    label: str
    disaggregated: bool
    tp: int
    pp: int
    ep: int
    attention_dp: bool
    instances: int
    prefill_instances: Optional[int]
    prefill_tp: Optional[int]
    max_batch: int
    max_num_tokens: int
    chunk_size: int
    gpus: int
    clients: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    output_tokens_per_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    slo_met: List[bool]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Deployment":
        pre = d.get("prefill")
        return cls(
            label=str(d.get("label")), disaggregated=bool(d.get("disaggregated")),
            tp=int(d.get("tp") or 1), pp=int(d.get("pp") or 1), ep=int(d.get("ep") or 1),
            attention_dp=bool(d.get("attention_dp")), instances=int(d.get("instances") or 1),
            prefill_instances=int(pre[0]) if pre else None,
            prefill_tp=int(pre[1]) if pre else None,
            max_batch=int(d.get("max_batch") or 0), max_num_tokens=int(d.get("max_num_tokens") or 0),
            chunk_size=int(d.get("chunk_size") or 0), gpus=int(d.get("gpus") or 0),
            clients=int(d.get("clients") or 0),
            tokens_per_s_per_gpu=float(d.get("tokens_per_s_per_gpu") or 0.0),
            tokens_per_s_per_user=float(d.get("tokens_per_s_per_user") or 0.0),
            output_tokens_per_s=float(d.get("output_tokens_per_s") or 0.0),
            ttft_p50_s=float(d.get("ttft_p50_ms") or 0.0) / 1e3,
            ttft_p90_s=float(d.get("ttft_p90_ms") or 0.0) / 1e3,
            tpot_p50_s=float(d.get("tpot_p50_ms") or 0.0) / 1e3,
            tpot_p90_s=float(d.get("tpot_p90_ms") or 0.0) / 1e3,
            slo_met=[bool(x) for x in d.get("slo_met") or []],
        )


_DEPLOYMENT_COLUMNS = (
    "label", "disaggregated", "tp", "pp", "ep", "attention_dp", "instances",
    "prefill_instances", "prefill_tp", "max_batch", "max_num_tokens", "chunk_size", "gpus",
    "clients", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "output_tokens_per_s",
    "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s",
)


class ServingSearchResult(Result):
    """A serving deployment search (``perfcast.search`` of a config with
    ``[serving_search]``): the best deployments and the Pareto front of throughput per GPU
    against speed per user. One row per deployment of ``top``, ranked."""

    kind = "search (serving)"
    COLUMNS = ("rank", *_DEPLOYMENT_COLUMNS, "slo_met", "on_pareto")
    TYPES = {
        "label": "str", "disaggregated": "bool", "attention_dp": "bool", "slo_met": "bool",
        "on_pareto": "bool",
        **{c: "int" for c in ("rank", "tp", "pp", "ep", "instances", "prefill_instances", "prefill_tp",
                              "max_batch", "max_num_tokens", "chunk_size", "gpus", "clients")},
    }

    @property
    def top(self) -> List[Deployment]:
        return [Deployment.from_json(d) for d in self.get("top") or []]

    @property
    def pareto(self) -> List[Deployment]:
        return [Deployment.from_json(d) for d in self.get("pareto") or []]

    @property
    def best(self) -> List[Optional[Deployment]]:
        """Per SLO, the deployment of most throughput per GPU that meets it (``None``: none
        does)."""
        return [
            Deployment.from_json(b["best"]) if b.get("best") else None
            for b in self.get("best") or []
        ]

    def _rows(self) -> List[Row]:
        front = {d.get("label") for d in self.get("pareto") or []}
        rows = []
        for i, d in enumerate(self.top):
            row: Row = {"rank": i + 1}
            row.update({c: getattr(d, c) for c in _DEPLOYMENT_COLUMNS})
            row["slo_met"] = all(d.slo_met) if d.slo_met else None
            row["on_pareto"] = d.label in front
            rows.append(row)
        return rows

    def plot(self, ax: Any = None) -> Any:
        """The Pareto front: output tokens/s per GPU against tokens/s per user."""
        fig, ax = _axes(ax)
        front = sorted(self.pareto, key=lambda d: d.tokens_per_s_per_user)
        ax.plot([d.tokens_per_s_per_user for d in front], [d.tokens_per_s_per_gpu for d in front],
                "o-", color="C3", label="Pareto front")
        top = self.top
        ax.scatter([d.tokens_per_s_per_user for d in top], [d.tokens_per_s_per_gpu for d in top],
                   color="C0", label=f"top {len(top)}", zorder=3)
        ax.set_xlabel("output tokens/s per user")
        ax.set_ylabel("output tokens/s per GPU")
        ax.legend()
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class Percentiles:
    """A latency's distribution over the requests, seconds."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float

    @classmethod
    def from_json(cls, d: Any) -> Optional["Percentiles"]:
        if not isinstance(d, dict):
            return None
        return cls(*(float(d.get(k) or 0.0) for k in ("mean", "p50", "p90", "p99", "max")))


@dataclass(frozen=True)
class ServeRun:
    """One load point of a serving simulation: the load, throughput, latencies, SLOs."""

    load: str
    offered_rate_per_s: Optional[float]
    concurrency: Optional[int]
    gpus: int
    requests: int
    completed: int
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    itl_mean_s: float
    kv_transfer: Optional[Percentiles]
    preemptions: int
    #: The first SLO's attainment (share of requests meeting it), goodput and verdict.
    slo_attainment: Optional[float]
    goodput_requests_per_s: Optional[float]
    slo_met: Optional[bool]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ServeRun":
        slo = (d.get("slo") or [{}])[0] or {}
        zero = Percentiles(0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            load=str(d.get("load")), offered_rate_per_s=_f(d.get("offered_rate")),
            concurrency=d.get("concurrency"), gpus=int(d.get("gpus") or 0),
            requests=int(d.get("requests") or 0), completed=int(d.get("completed") or 0),
            duration_s=float(d.get("duration") or 0.0),
            requests_per_s=float(d.get("requests_per_s") or 0.0),
            output_tokens_per_s=float(d.get("output_tokens_per_s") or 0.0),
            input_tokens_per_s=float(d.get("input_tokens_per_s") or 0.0),
            output_tokens_per_s_per_gpu=float(d.get("output_tokens_per_s_per_gpu") or 0.0),
            tokens_per_s_per_user=float(d.get("tokens_per_s_per_user") or 0.0),
            ttft=Percentiles.from_json(d.get("ttft")) or zero,
            tpot=Percentiles.from_json(d.get("tpot")) or zero,
            e2e=Percentiles.from_json(d.get("e2e")) or zero,
            itl_mean_s=float(d.get("itl_mean") or 0.0),
            kv_transfer=Percentiles.from_json(d.get("kv_transfer")),
            preemptions=int(d.get("preemptions") or 0),
            slo_attainment=_f(slo.get("attainment")),
            goodput_requests_per_s=_f(slo.get("goodput_requests_per_s")),
            slo_met=slo.get("met"),
            raw=dict(d),
        )


_PCT = ("mean", "p50", "p90", "p99", "max")


class ServeResult(Result):
    """Serving under load (``perfcast.serve``): one run per request rate (or concurrency),
    its throughput and latency percentiles. One row per run."""

    kind = "serve"
    COLUMNS = (
        "load", "offered_rate_per_s", "concurrency", "gpus", "requests", "completed",
        "duration_s", "requests_per_s", "output_tokens_per_s", "input_tokens_per_s",
        "output_tokens_per_s_per_gpu", "tokens_per_s_per_user",
        *(f"ttft_{p}_s" for p in _PCT), *(f"tpot_{p}_s" for p in _PCT), "itl_mean_s",
        *(f"e2e_{p}_s" for p in _PCT), "kv_transfer_mean_s", "preemptions",
        "slo_attainment", "goodput_requests_per_s", "slo_met", "kv_mean_occupancy",
        "kv_peak_occupancy",
    )
    TYPES = {
        "load": "str", "slo_met": "bool",
        **{c: "int" for c in ("concurrency", "gpus", "requests", "completed", "preemptions")},
    }

    @property
    def runs(self) -> List[ServeRun]:
        return [ServeRun.from_json(r) for r in self.get("runs") or []]

    @property
    def model(self) -> str:
        return str(self.get("model", ""))

    @property
    def system(self) -> str:
        return str(self.get("system", ""))

    def _rows(self) -> List[Row]:
        rows = []
        for r in self.runs:
            row: Row = {
                "load": r.load, "offered_rate_per_s": r.offered_rate_per_s,
                "concurrency": r.concurrency, "gpus": r.gpus, "requests": r.requests,
                "completed": r.completed, "duration_s": r.duration_s,
                "requests_per_s": r.requests_per_s, "output_tokens_per_s": r.output_tokens_per_s,
                "input_tokens_per_s": r.input_tokens_per_s,
                "output_tokens_per_s_per_gpu": r.output_tokens_per_s_per_gpu,
                "tokens_per_s_per_user": r.tokens_per_s_per_user,
            }
            for name in ("ttft", "tpot"):
                for p in _PCT:
                    row[f"{name}_{p}_s"] = getattr(getattr(r, name), f"{p}_s")
            row["itl_mean_s"] = r.itl_mean_s
            for p in _PCT:
                row[f"e2e_{p}_s"] = getattr(r.e2e, f"{p}_s")
            row["kv_transfer_mean_s"] = r.kv_transfer.mean_s if r.kv_transfer else None
            row["preemptions"] = r.preemptions
            row["slo_attainment"] = r.slo_attainment
            row["goodput_requests_per_s"] = r.goodput_requests_per_s
            row["slo_met"] = r.slo_met
            pools = r.raw.get("pools") or []
            occ = [p.get("kv_mean_occupancy") for p in pools if p.get("kv_mean_occupancy") is not None]
            peak = [p.get("kv_peak_occupancy") for p in pools if p.get("kv_peak_occupancy") is not None]
            row["kv_mean_occupancy"] = max(occ) if occ else None
            row["kv_peak_occupancy"] = max(peak) if peak else None
            rows.append(row)
        return rows

    def plot(self, ax: Any = None) -> Any:
        """Latency against throughput: p90 time per output token and to first token (ms,
        log scale) against output tokens/s, one point per run."""
        fig, ax = _axes(ax)
        runs = self.runs
        x = [r.output_tokens_per_s for r in runs]
        ax.plot(x, [r.tpot.p90_s * 1e3 for r in runs], "o-", label="time per output token, p90")
        ax.plot(x, [r.ttft.p90_s * 1e3 for r in runs], "s-", label="time to first token, p90")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class ValidationCase:
    """One metric of one validation case: predicted against measured (in the metric's
    unit, which its name says), the relative error and the error bar."""

    case: str
    group: str
    kind: str
    status: str
    stack: Optional[str]
    metric: Optional[str]
    measured: Optional[float]
    predicted: Optional[float]
    rel_error: Optional[float]
    interval: Optional[Interval]
    reason: Optional[str]


class ValidationResult(Result):
    """Predictions against published measurements (``perfcast.validate``). One row per
    case and metric (a case without a metric, e.g. unsupported: one row, metric empty)."""

    kind = "validate"
    COLUMNS = (
        "case", "group", "kind", "status", "stack", "metric", "measured", "predicted",
        "rel_error", "interval_lo", "interval_hi", "reason",
    )
    TYPES = {
        c: "str" for c in ("case", "group", "kind", "status", "stack", "metric", "reason")
    }

    @property
    def cases(self) -> List[ValidationCase]:
        out = []
        for c in self.get("cases") or []:
            level = (c.get("error_bars") or {}).get("level")
            stack = c.get("stack")
            base = dict(
                case=str(c.get("id")), group=str(c.get("group")), kind=str(c.get("kind")),
                status=str(c.get("status")),
                stack=stack.get("name") if isinstance(stack, dict) else stack,
                reason=c.get("reason"),
            )
            metrics = c.get("metrics") or [None]
            for m in metrics:
                m = m or {}
                out.append(ValidationCase(
                    metric=m.get("name"), measured=_f(m.get("measured")),
                    predicted=_f(m.get("predicted")), rel_error=_f(m.get("rel_error")),
                    interval=_interval(m.get("interval"), level), **base,
                ))
        return out

    @property
    def mape(self) -> Optional[float]:
        """The mean absolute percentage error over every scored case (a ratio)."""
        return _f(((self.get("summary") or {}).get("overall") or {}).get("mape"))

    @property
    def groups(self) -> Dict[str, Dict[str, Any]]:
        """Per group: cases, scored, MAPE, worst error, ..."""
        return dict((self.get("summary") or {}).get("groups") or {})

    def _rows(self) -> List[Row]:
        return [
            {
                "case": c.case, "group": c.group, "kind": c.kind, "status": c.status,
                "stack": c.stack, "metric": c.metric, "measured": c.measured,
                "predicted": c.predicted, "rel_error": c.rel_error,
                "interval_lo": c.interval.low if c.interval else None,
                "interval_hi": c.interval.high if c.interval else None, "reason": c.reason,
            }
            for c in self.cases
        ]

    def plot(self, ax: Any = None) -> Any:
        """Predicted against measured, one point per case and metric, with y = x."""
        fig, ax = _axes(ax)
        pts = [c for c in self.cases if c.measured and c.predicted]
        ax.scatter([c.measured for c in pts], [c.predicted for c in pts], color="C0")
        if pts:
            lo = min(min(c.measured or 0.0, c.predicted or 0.0) for c in pts)
            hi = max(max(c.measured or 0.0, c.predicted or 0.0) for c in pts)
            ax.plot([lo, hi], [lo, hi], color="grey", linestyle=":")
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted")
        ax.set_title(f"MAPE {self.mape:.1%}" if self.mape is not None else "")
        fig.tight_layout()
        return fig


class CalibrationResult(Result):
    """A calibration (``perfcast.calibrate``): the fitted values and the error before and
    after. One row per fitted parameter (values in the parameter's own unit)."""

    kind = "calibrate"
    COLUMNS = ("parameter", "lo", "hi", "start", "fitted", "cases")
    TYPES = {"parameter": "str", "cases": "int"}

    @property
    def params(self) -> Dict[str, float]:
        """Each fitted key and its value."""
        return {k: float(v) for k, v in (self.get("params") or {}).items()}

    @property
    def converged(self) -> bool:
        return bool(self.get("converged"))

    def _rows(self) -> List[Row]:
        return [
            {
                "parameter": ",".join(p.get("keys") or []), "lo": _f(p.get("lo")),
                "hi": _f(p.get("hi")), "start": _f(p.get("start")), "fitted": _f(p.get("fitted")),
                "cases": p.get("cases"),
            }
            for p in self.get("parameters") or []
        ]


#: The class of each command's result.
KINDS: Dict[str, Type[Result]] = {
    "predict": TrainingResult,
    "infer": InferenceResult,
    "roofline": RooflineResult,
    "search": SearchResult,
    "serve": ServeResult,
    "validate": ValidationResult,
    "calibrate": CalibrationResult,
}


def typed(command: str, doc: Any) -> Result:
    """The typed result of ``command``'s JSON (a search's class by its fields: plans or
    deployments; infer's by ``max_batch``)."""
    if not isinstance(doc, dict):
        return Result({"value": doc})
    cls: Type[Result] = KINDS.get(command, Result)
    if command == "search" and "top" in doc and "plans" not in doc:
        cls = ServingSearchResult
    elif command == "infer" and "max_batch" in doc and "ttft" not in doc:
        cls = MaxBatchResult
    return cls(doc)


def guess(doc: Any) -> Result:
    """The typed result of a JSON whose command is not known (what a failing command printed
    before its error), by its fields."""
    if not isinstance(doc, dict):
        return Result({"value": doc})
    if "report" in doc and "memory_per_stage" in doc:
        return TrainingResult(doc)
    if "ttft" in doc and "tpot" in doc:
        return InferenceResult(doc)
    if "plans" in doc and "pareto" in doc:
        return SearchResult(doc)
    if "top" in doc and "pareto" in doc:
        return ServingSearchResult(doc)
    if "runs" in doc:
        return ServeResult(doc)
    return Result(doc)


@dataclass(frozen=True)
class Preset:
    """A built-in preset: its name, group (``hardware``, ``systems``, ``models``,
    ``stacks``, ``experiments``), how a configuration names it (``use``: ``preset:NAME``,
    or ``stack = "NAME"`` for a stack) and a stack's description."""

    name: str
    group: str
    use: str
    description: Optional[str] = None


@dataclass(frozen=True)
class Study:
    """One of the studies ``perfcast.study(name)`` runs: its name, built-in config and what
    it shows."""

    name: str
    config: str
    title: str

    def __getitem__(self, key: str) -> str:
        """The fields by the names of the CLI's table (``study``, ``config``, ``what``), as
        ``studies()`` gave them before it returned records."""
        return {"study": self.name, "config": self.config, "what": self.title}[key]
