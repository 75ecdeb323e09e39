"""perfcast: an analytical performance model of distributed LLM training and inference.

Every function runs the same code as the ``perfcast`` command line, in this process (the
native module releases the GIL while it runs), and returns a typed result
(:mod:`perfcast.results`): ``predict`` a :class:`TrainingResult`, ``infer`` an
:class:`InferenceResult`, ``roofline`` a :class:`RooflineResult`, ``search`` a
:class:`SearchResult` (or :class:`ServingSearchResult`), ``serve`` a :class:`ServeResult`,
``validate`` a :class:`ValidationResult`, ``calibrate`` a :class:`CalibrationResult`. Each
is a ``dict`` of the CLI's ``--format json`` fields (the user guide's command pages,
``docs/commands/``, apply) with typed properties for its headline numbers, units in their
names (``iteration_time_s``, ``peak_memory_bytes``), one table (``records()``,
``to_pandas()``, ``to_polars()``, ``to_parquet(path)``: the same columns in each) and
``plot()`` (a matplotlib Figure).

A configuration is a path (``str`` or ``os.PathLike``), a built-in preset (``"preset:NAME"``),
TOML text, or a nested ``dict``; several are merged in order, as on the command line.
Overrides are dotted keys: ``overrides={"plan.tp": 4}``, or keyword arguments with ``__``
for the dot (``plan__tp=4``). Errors are exceptions carrying the command's message (which
names the key and where its value came from, in the arguments the call was given)::

    import perfcast
    r = perfcast.predict("configs/experiments/gpt3-175b-a100.toml", plan__tp=4, plan__pp=32)
    r.iteration_time_s, r.mfu, r.breakdown["tp_comm"]
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
import tempfile
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

from . import _native
from .results import (
    CalibrationResult,
    Deployment,
    InferenceMemory,
    InferencePlan,
    InferenceResult,
    Interval,
    MaxBatchResult,
    Network,
    NetworkLevel,
    ParetoPoint,
    Percentiles,
    PhaseTime,
    Preset,
    RankedPlan,
    Result,
    RooflineOp,
    RooflineResult,
    SearchResult,
    ServeResult,
    ServeRun,
    ServingSearchResult,
    StageMemory,
    Study,
    TrainingPlan,
    TrainingResult,
    TrainingStep,
    ValidationCase,
    ValidationResult,
    guess as _guess,
    typed as _typed,
)

__version__: str = _native.__version__

# Isolated plugin libraries run in a child process serving one library: here the executable
# is Python, so the child is this interpreter running the package's plugin host.
if sys.executable:
    _native.set_plugin_host(sys.executable, ["-m", "perfcast._plugin_host"])

__all__ = [
    "predict",
    "infer",
    "roofline",
    "serve",
    "search",
    "sweep",
    "study",
    "studies",
    "validate",
    "calibrate",
    "plugins",
    "load_plugin",
    "Plugin",
    "presets",
    "explain",
    "run",
    "load",
    "Scenario",
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
    "Rows",
    "PerfcastError",
    "ConfigError",
    "UsageError",
    "PluginError",
    "ValidationError",
    "InfeasibleError",
    "InternalError",
]


class PerfcastError(Exception):
    """A perfcast command failed. ``message`` is what the CLI prints after ``error:`` (from
    the functions, with the command line's options named by the Python arguments that gave
    them); ``output`` what the command printed before failing (e.g. the report of a plan
    that does not fit), as text."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.output = output


class ConfigError(PerfcastError, ValueError):
    """A configuration key, value or file is wrong (the message names it and its origin)."""


class UsageError(PerfcastError, ValueError):
    """An argument the command does not take (an unknown option or value)."""


class PluginError(PerfcastError):
    """A plugin library does not load, or a plugin fails or answers badly."""


class ValidationError(PerfcastError):
    """A validation cases file (or overlay, residuals file) cannot be used."""


class InfeasibleError(PerfcastError):
    """No result under the configuration's limits: a plan that does not fit in memory, an
    empty plan space, no deployment meeting an SLO. ``result`` holds what the command
    printed first, typed when it is JSON (the :class:`TrainingResult` of the plan that does
    not fit)."""

    @property
    def result(self) -> Optional[Result]:
        try:
            return _guess(json.loads(self.output))
        except ValueError:
            return None


class InternalError(PerfcastError):
    """A bug in perfcast (please report it)."""


_ERRORS = {
    "usage": UsageError,
    "config": ConfigError,
    "plugin": PluginError,
    "validation": ValidationError,
    "infeasible": InfeasibleError,
    "internal": InternalError,
}


#: The kind of failure each exception class stands for.
_KINDS = {cls: kind for kind, cls in _ERRORS.items()}


def _error(kind: str, message: str, output: str = "") -> PerfcastError:
    """The exception of a failure of ``kind``."""
    return _ERRORS.get(kind, PerfcastError)(message, output)


def run(args: Sequence[str]) -> str:
    """Run ``perfcast ARGS...`` in process and return what it prints (any format); an error
    is the command line's, options and all."""
    try:
        return _native.run([str(a) for a in args])
    except _native.Failure as f:
        raise _error(*f.args) from None


def _run_json(args: Sequence[str]) -> Any:
    """``json.loads(run(args))`` for a ``--format json`` command, the objects built by the
    native module as it reads the JSON."""
    try:
        return _native.run_json([str(a) for a in args])
    except _native.Failure as f:
        raise _error(*f.args) from None


# Errors that speak Python: the command line's options in a message from a function are
# named by the function's arguments that gave them.

#: The Python argument of each command-line option the functions pass.
_PY_ARGS = {
    "--set": "overrides",
    "--load": "load",
    "--sha256": "sha256",
    "--isolate": "isolate",
    "--plugin-timeout": "timeout",
    "--format": "format",
    "--out": "out",
    "--top": "top",
    "--objective": "objective",
    "--max-seconds": "max_seconds",
    "--rates": "rates",
    "--rate": "rate",
    "--concurrency": "concurrency",
    "--trace": "trace",
    "--requests": "requests",
    "--seed": "seed",
    "--phase": "phase",
    "--max-batch": "max_batch",
    "--group": "group",
    "--overlay": "overlay",
    "--param": "params",
    "--cv": "cv",
    "--residuals": "residuals",
    "--serving": "serving",
    "--exclude-serving": "exclude_serving",
    "--max-evals": "max_evals",
    "--config": "config",
    "--force": "force",
}
#: Options that take no value (``True`` in Python).
_SWITCHES = {"--isolate", "--max-batch", "--exclude-serving", "--force"}
_FLAG = "|".join(re.escape(f) for f in sorted(_PY_ARGS, key=len, reverse=True))


def _py_arg(flag: str) -> str:
    name = _PY_ARGS[flag]
    return f"{name}=True" if flag in _SWITCHES else f"{name}="


def _speak_python(message: str, spoken: Mapping[str, str]) -> str:
    """``message`` with the command line's options named as the Python call gave them: the
    options the call passed by their arguments (``--set plan.tp=3`` as ``plan__tp=3`` or
    ``overrides={'plan.tp': 3}``, ``--top 0`` as ``top=0``: ``spoken``), any other option
    the functions pass by its argument's name (``--load`` as ``load=``, ``'--phase
    <PHASE>'`` as ``phase=``); clap's ``error:`` prefix, its pointers to ``--help`` and its
    usage lines go."""
    message = message.strip()
    if message.startswith("error: "):
        message = message[len("error: "):]
    for cli in sorted(spoken, key=len, reverse=True):
        py = spoken[cli]
        message = re.sub(re.escape(cli) + r"(?![\w.=/-])", lambda m: py, message)
    lines = [
        l
        for l in message.split("\n")
        if not l.startswith(("For more information, try", "Usage: ", "  tip: "))
    ]
    message = "\n".join(lines).strip()
    # clap: "invalid value 'x' for '--phase <PHASE>'\n  [possible values: a, b]"
    message = re.sub(r"\n\s*\[possible values: ([^\]]*)\]", r" (possible values: \1)", message)
    message = re.sub(rf"'({_FLAG})(?: <[^>]*>)?'", lambda m: _py_arg(m.group(1)), message)
    # `--param KEY=LO..HI`: one entry of ``params``.
    message = re.sub(r"--param ([^\s`'\",;:()]+)", lambda m: f"params=[{m.group(1)!r}]", message)
    message = re.sub(rf"(?<![\w-])({_FLAG})(?![\w-])", lambda m: _py_arg(m.group(1)), message)
    return message


def _spoken(e: PerfcastError, spoken: Mapping[str, str]) -> PerfcastError:
    return type(e)(_speak_python(e.message, spoken), e.output)


class Rows(List[Dict[str, Any]]):
    """A CSV result (``sweep``, ``study``): a list of dicts, numbers parsed; ``path`` is the
    file it was written to (``out=``), else ``None``."""

    def __init__(self, text: str, path: Optional[str] = None) -> None:
        super().__init__(_parse(r) for r in csv.DictReader(io.StringIO(text)))
        self._text = text
        self.path = path
        #: A study's summary (`study`), else None.
        self.summary: Optional[str] = None

    def to_csv(self) -> str:
        """The CSV, as the command line prints it."""
        return self._text

    def to_pandas(self) -> Any:
        """A pandas DataFrame, read from the CSV (an empty cell is missing)."""
        from .results import _pandas

        return _pandas().read_csv(io.StringIO(self._text))

    def to_polars(self) -> Any:
        """A polars DataFrame."""
        from .results import _polars

        return _polars().DataFrame(list(self))


Config = Union[str, "os.PathLike[str]", Mapping[str, Any]]
PathLike = Union[str, "os.PathLike[str]"]


class Plugin:
    """A plugin library, checked to load (:func:`load_plugin`): give it to any function's
    ``load=``. ``components`` lists what it registers (category, name, version, ABI).
    ``isolate=True`` runs it in a child process (``python -m perfcast._plugin_host``) where a
    crash, a hang longer than ``timeout`` seconds or an exit is a :class:`PluginError`
    naming it, not the end of the interpreter; a call that loads an isolated library runs
    all of its libraries isolated (``--isolate``)."""

    def __init__(
        self,
        path: PathLike,
        sha256: Optional[str] = None,
        isolate: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.sha256 = sha256
        self.isolate = isolate
        self.timeout = timeout
        self.components: List[Dict[str, Any]] = [
            c for c in plugins(load=self) if c.get("origin") == self.path
        ]

    def __repr__(self) -> str:
        names = ", ".join(c["name"] for c in self.components)
        return f"Plugin({self.path!r}: {names})"


def load_plugin(
    path: PathLike,
    sha256: Optional[str] = None,
    isolate: bool = False,
    timeout: Optional[float] = None,
) -> Plugin:
    """Check that the library at ``path`` loads (its pin, its ABI, its components) and
    return it as a :class:`Plugin` for ``load=``; a library that does not load raises
    :class:`PluginError` with the reason."""
    return Plugin(path, sha256=sha256, isolate=isolate, timeout=timeout)


#: Libraries for ``load=``: a path, a ``(path, sha256)`` pair, a :class:`Plugin`, or a list.
Load = Union[None, str, "os.PathLike[str]", Tuple[PathLike, str], Plugin, Iterable[Any]]


def _load_args(load: Load) -> List[str]:
    """The ``--load`` (``--sha256``, ``--isolate``) arguments of ``load=``."""
    if load is None:
        return []
    single = isinstance(load, (str, os.PathLike, tuple, Plugin))
    args: List[str] = []
    isolate, timeout = False, None
    path: Any
    for lib in [load] if single else list(load):  # type: ignore[arg-type]
        if isinstance(lib, Plugin):
            path, pin = lib.path, lib.sha256
            isolate |= lib.isolate
            if lib.timeout is not None:
                timeout = lib.timeout if timeout is None else min(timeout, lib.timeout)
        elif isinstance(lib, tuple):
            path, pin = lib
        else:
            path, pin = lib, None
        args += ["--load", os.fspath(path)]
        if pin is not None:
            args += ["--sha256", str(pin)]
    if isolate:
        args.append("--isolate")
    if timeout is not None:
        args += ["--plugin-timeout", str(timeout)]
    return args


class _Temp:
    """A configuration given as text or a dict: written to a temporary file for each run;
    ``what`` names it in messages instead of that file."""

    def __init__(self, text: str, suffix: str, what: str) -> None:
        self.text, self.suffix, self.what = text, suffix, what


class _Args:
    """The command line of one call. A configuration given as text or a dict is written to a
    temporary file beside the working directory's files (so its relative paths mean what
    they would in a file there) for the run, and removed afterwards. ``spoken``: how each
    override reads in Python, for the messages."""

    def __init__(self) -> None:
        self.args: List[Any] = []
        self.configs = 0
        self.spoken: Dict[str, str] = {}

    def config(self, c: Config) -> None:
        self.configs += 1
        n = self.configs
        if isinstance(c, Mapping):
            self.args.append(_Temp(json.dumps(c), ".json", f"the dict given as configuration {n}"))
        elif isinstance(c, os.PathLike):
            self.args.append(os.fspath(c))
        elif isinstance(c, str):
            text = "\n" in c or ("=" in c and not os.path.exists(c))
            what = f"the TOML text given as configuration {n}"
            self.args.append(_Temp(c, ".toml", what) if text else c)
        else:
            raise TypeError(
                f"a configuration is a path, TOML text or a dict, not {type(c).__name__}"
            )

    def sets(self, overrides: Optional[Mapping[str, Any]], kw: Mapping[str, Any]) -> None:
        for k, v in (overrides or {}).items():
            cli = f"{k}={json.dumps(v)}"
            self.args += ["--set", cli]
            self.spoken[f"--set {cli}"] = f"overrides={{{k!r}: {v!r}}}"
        for k, v in kw.items():
            cli = f"{k.replace('__', '.')}={json.dumps(v)}"
            self.args += ["--set", cli]
            self.spoken[f"--set {cli}"] = f"{k}={v!r}"

    def flag(self, name: str, value: Any, given: Any = None) -> None:
        """``name VALUE`` (``given``: the value as the caller gave it, for the messages)."""
        if value is None or value is False:
            return
        if value is True:
            self.args.append(name)
        else:
            # `--name=VALUE`: a value that starts with `-` is the option's, not an option.
            self.args.append(f"{name}={value}")
            py = value if given is None else given
            self.spoken[f"{name} {value}"] = f"{_PY_ARGS.get(name, name)}={py!r}"

    def loads(self, load: Load) -> None:
        self.args += _load_args(load)

    def run(self, extra: Sequence[str] = (), runner: Callable[[Sequence[str]], Any] = run) -> Any:
        return _with_files(self.args, lambda args: runner(list(args) + list(extra)), self.spoken)


def _with_files(args: Sequence[Any], call: Callable[[List[str]], Any], spoken: Mapping[str, str]) -> Any:
    """``call(args)`` with each configuration given as text or a dict written to a temporary
    file (removed afterwards); an error names it as the caller gave it, not by that file, and
    the options by the Python arguments (``spoken``)."""
    written: Dict[str, str] = {}
    try:
        files = [_write(a, written) if isinstance(a, _Temp) else a for a in args]
        try:
            return call(files)
        except PerfcastError as e:
            message = e.message
            for path, what in written.items():
                message = message.replace(f"file {path}", what).replace(path, what)
            raise _spoken(type(e)(message, e.output), spoken) from None
    finally:
        for p in written:
            try:
                os.remove(p)
            except OSError:
                pass


def _write(t: _Temp, written: Dict[str, str]) -> str:
    for where in (os.getcwd(), None):
        try:
            fd, path = tempfile.mkstemp(prefix=".perfcast-", suffix=t.suffix, dir=where)
        except OSError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(t.text)
        written[path] = t.what
        return path
    raise OSError("cannot write a temporary configuration file")


def _configured(
    command: Sequence[str],
    configs: Sequence[Config],
    overrides: Optional[Mapping[str, Any]],
    load: Load,
    kw: Mapping[str, Any],
) -> _Args:
    if not configs:
        raise TypeError(f"{command[0]}() needs a configuration")
    a = _Args()
    a.args += list(command)
    for c in configs:
        a.config(c)
    a.sets(overrides, kw)
    a.loads(load)
    return a


def _json(command: str, a: _Args) -> Any:
    return _typed(command, a.run(["--format", "json"], _run_json))


class Scenario:
    """A configuration loaded once (files read, libraries loaded, model and plans checked):
    ``predict``, ``infer``, ``roofline``, ``serve``, ``search`` and ``explain`` run on it with
    their own overrides on top, without reading or loading again (``perfcast.load``)."""

    def __init__(
        self,
        *configs: Config,
        overrides: Optional[Mapping[str, Any]] = None,
        load: Load = None,
        **kw: Any,
    ) -> None:
        a = _configured(["load"], configs, overrides, load, kw)
        a.args = a.args[1:]

        def native_load(args: List[str]) -> Any:
            try:
                return _native.load(args)
            except _native.Failure as f:
                raise _error(*f.args) from None

        self._loaded = _with_files(a.args, native_load, a.spoken)

    def _call(
        self,
        command: Sequence[str],
        overrides: Optional[Mapping[str, Any]],
        kw: Mapping[str, Any],
        flags: Sequence[Tuple[str, Any, Any]] = (),
    ) -> Any:
        a = _Args()
        a.args += list(command) + ["-"]
        a.sets(overrides, kw)
        for name, value, given in flags:
            a.flag(name, value, given)
        a.args += ["--format", "json"]
        try:
            return self._loaded.run_json(a.args)
        except _native.Failure as f:
            raise _spoken(_error(*f.args), a.spoken) from None

    def predict(self, overrides: Optional[Mapping[str, Any]] = None, **kw: Any) -> TrainingResult:
        return cast(TrainingResult, _typed("predict", self._call(["predict"], overrides, kw)))

    def infer(
        self, overrides: Optional[Mapping[str, Any]] = None, max_batch: bool = False, **kw: Any
    ) -> Union[InferenceResult, MaxBatchResult]:
        r = self._call(["infer"], overrides, kw, [("--max-batch", max_batch, None)])
        return cast(Union[InferenceResult, MaxBatchResult], _typed("infer", r))

    def roofline(
        self, overrides: Optional[Mapping[str, Any]] = None, phase: Optional[str] = None, **kw: Any
    ) -> RooflineResult:
        r = self._call(["roofline"], overrides, kw, [("--phase", phase, None)])
        return cast(RooflineResult, _typed("roofline", r))

    def search(
        self, overrides: Optional[Mapping[str, Any]] = None, top: Optional[int] = None, **kw: Any
    ) -> Union[SearchResult, ServingSearchResult]:
        r = self._call(["search"], overrides, kw, [("--top", top, None)])
        return cast(Union[SearchResult, ServingSearchResult], _typed("search", r))

    def serve(
        self,
        overrides: Optional[Mapping[str, Any]] = None,
        rates: Optional[Iterable[float]] = None,
        requests: Optional[int] = None,
        **kw: Any,
    ) -> ServeResult:
        rates = None if rates is None else list(rates)
        flags = [
            ("--rates", None if rates is None else ",".join(str(r) for r in rates), rates),
            ("--requests", requests, None),
        ]
        return cast(ServeResult, _typed("serve", self._call(["serve"], overrides, kw, flags)))

    def explain(self, overrides: Optional[Mapping[str, Any]] = None, **kw: Any) -> List[Dict[str, Any]]:
        return cast(List[Dict[str, Any]], self._call(["config", "explain"], overrides, kw))


def load(
    *configs: Config, overrides: Optional[Mapping[str, Any]] = None, load: Load = None, **kw: Any
) -> Scenario:
    """Load a configuration once; its methods run commands on it (see :class:`Scenario`)."""
    return Scenario(*configs, overrides=overrides, load=load, **kw)


def predict(
    *configs: Config, overrides: Optional[Mapping[str, Any]] = None, load: Load = None, **kw: Any
) -> TrainingResult:
    """One training step: time, MFU/HFU, breakdown, memory per stage (``perfcast predict``)."""
    return cast(TrainingResult, _json("predict", _configured(["predict"], configs, overrides, load, kw)))


def infer(
    *configs: Config,
    overrides: Optional[Mapping[str, Any]] = None,
    load: Load = None,
    max_batch: bool = False,
    **kw: Any,
) -> Union[InferenceResult, MaxBatchResult]:
    """Static inference: TTFT, time per output token, throughput, memory (``perfcast infer``);
    ``max_batch=True``: the largest batch that fits (a :class:`MaxBatchResult`)."""
    a = _configured(["infer"], configs, overrides, load, kw)
    a.flag("--max-batch", max_batch)
    return cast(Union[InferenceResult, MaxBatchResult], _json("infer", a))


def roofline(
    *configs: Config,
    overrides: Optional[Mapping[str, Any]] = None,
    load: Load = None,
    phase: Optional[str] = None,
    **kw: Any,
) -> RooflineResult:
    """Per-op roofline: the config's ``[[ops]]``, or a model's GEMMs (``phase``)."""
    a = _configured(["roofline"], configs, overrides, load, kw)
    a.flag("--phase", phase)
    return cast(RooflineResult, _json("roofline", a))


def serve(
    *configs: Config,
    overrides: Optional[Mapping[str, Any]] = None,
    load: Load = None,
    rate: Optional[float] = None,
    rates: Optional[Iterable[float]] = None,
    concurrency: Optional[int] = None,
    trace: Optional[PathLike] = None,
    requests: Optional[int] = None,
    seed: Optional[int] = None,
    **kw: Any,
) -> ServeResult:
    """Serving under load (``perfcast serve``): one run per rate, the latency percentiles."""
    a = _configured(["serve"], configs, overrides, load, kw)
    a.flag("--rate", rate)
    if rates is not None:
        rates = list(rates)
        a.flag("--rates", ",".join(str(r) for r in rates), rates)
    a.flag("--concurrency", concurrency)
    a.flag("--trace", os.fspath(trace) if trace is not None else None, trace)
    a.flag("--requests", requests)
    a.flag("--seed", seed)
    return cast(ServeResult, _json("serve", a))


def search(
    *configs: Config,
    overrides: Optional[Mapping[str, Any]] = None,
    load: Load = None,
    top: Optional[int] = None,
    objective: Optional[str] = None,
    max_seconds: Optional[float] = None,
    **kw: Any,
) -> Union[SearchResult, ServingSearchResult]:
    """The best training plans and their Pareto front (a :class:`SearchResult`), or with
    ``[serving_search]`` the best deployments (a :class:`ServingSearchResult`)
    (``perfcast search``)."""
    a = _configured(["search"], configs, overrides, load, kw)
    a.flag("--top", top)
    a.flag("--objective", objective)
    a.flag("--max-seconds", max_seconds)
    return cast(Union[SearchResult, ServingSearchResult], _json("search", a))


def sweep(
    study: PathLike,
    force: bool = False,
    executor: Any = None,
    out: Optional[PathLike] = None,
    format: str = "csv",
    load: Load = None,
    progress: Optional[Callable[[int, int], Any]] = None,
) -> Rows:
    """A sweep file's points (``perfcast sweep``): one dict per point, numbers parsed.

    ``executor``: ``None`` runs the points here, on every core; ``"ray"`` (or a
    :class:`perfcast.distributed.RayExecutor` for its address, chunk size and retries) runs
    chunks of them as Ray tasks, taken back in order. ``out=DIR`` also writes
    ``DIR/STUDY.csv`` (``format="parquet"``: ``DIR/STUDY.parquet``), whole or not at all,
    exactly as the command line does. ``load=``: libraries every point loads (and every Ray
    task, by path and pin). ``progress(done, total)`` is called as Ray chunks come back.
    Under Ray, a sweep's ``max_seconds`` bounds each chunk (one task's time), unless
    ``force``."""
    if format not in ("csv", "parquet"):
        raise UsageError(f"format must be \"csv\" or \"parquet\", not {format!r}")
    try:
        return _sweep(os.fspath(study), force, executor, out, format, load, progress)
    except PerfcastError as e:
        raise _spoken(e, {}) from None


def _sweep(
    study: str,
    force: bool,
    executor: Any,
    out: Optional[PathLike],
    format: str,
    load: Load,
    progress: Optional[Callable[[int, int], Any]],
) -> Rows:
    libs = _load_args(load)
    forced = ["--force"] if force else []
    if executor is None or executor == "local":
        text = run(["sweep", study, *forced, *libs])
    else:
        from .distributed import RayExecutor

        if executor == "ray":
            executor = RayExecutor()
        elif not isinstance(executor, RayExecutor):
            raise UsageError(
                f"executor must be None, \"local\", \"ray\" or a RayExecutor, not {executor!r}"
            )
        n = int(run(["sweep", study, "--count"]))
        path = os.path.abspath(study)
        header, rows = None, []
        for chunk in executor.map(
            lambda c: ["sweep", path, "--points", f"{c.start}..{c.stop}", *forced, *libs],
            n,
            progress,
        ):
            head, _, body = chunk.partition("\n")
            header = head
            rows.append(body)
        if header is None:
            # No points: the header alone, as a local run prints it.
            header = run(["sweep", study, "--points", "0..0"]).rstrip("\n")
        text = header + "\n" + "".join(rows)
    written = None
    if out is not None:
        fd, chunk_file = tempfile.mkstemp(prefix=".perfcast-sweep-", suffix=".csv")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            run(["sweep", study, "--out", os.fspath(out), "--format", format, "--merge", chunk_file])
        finally:
            os.remove(chunk_file)
        # DIR/STUDY.csv, as the command line names it (the study file's stem).
        stem = os.path.splitext(os.path.basename(study))[0]
        written = os.path.join(os.fspath(out), f"{stem}.{format}")
    return Rows(text, written)


def _parse(row: Mapping[str, str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in row.items():
        value: Any = v
        for cast in (int, float):
            try:
                value = cast(v)
                break
            except (TypeError, ValueError):
                pass
        out[k] = None if value == "" else value
    return out


def studies() -> List[Study]:
    """The studies :func:`study` runs: one :class:`Study` (``name``, ``config``, ``title``)
    each, in the order of ``perfcast study --list``."""
    return [
        Study(name=s["name"], config=s["config"], title=s["title"])
        for s in _run_json(["study", "--list", "--format", "json"])
    ]


def study(name: str, out: Optional[PathLike] = None, config: Optional[PathLike] = None) -> Rows:
    """Run one of the studies (``perfcast study NAME``; :func:`studies` lists them): its CSV
    rows, with ``path`` the CSV written under ``out`` (``NAME.csv``, ``NAME.svg``,
    ``NAME.md``; without ``out`` they go to a temporary directory, removed afterwards) and
    ``summary`` the study's summary (``NAME.md``). ``config``: a study config to read
    instead of the built-in one."""
    import shutil

    tmp = None if out is not None else tempfile.mkdtemp(prefix="perfcast-study-")
    where = os.fspath(out) if out is not None else tmp
    assert where is not None
    try:
        args = ["study", name, "--out", where]
        if config is not None:
            args += ["--config", os.fspath(config)]
        try:
            run(args)
        except PerfcastError as e:
            raise _spoken(e, {}) from None
        csv_path = os.path.join(where, f"{name}.csv")
        with open(csv_path, encoding="utf-8") as f:
            rows = Rows(f.read(), csv_path if out is not None else None)
        with open(os.path.join(where, f"{name}.md"), encoding="utf-8") as f:
            rows.summary = f.read()
        return rows
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def calibrate(
    cases: Optional[PathLike] = None,
    params: Optional[Iterable[str]] = None,
    cv: Optional[Iterable[str]] = None,
    out: Optional[PathLike] = None,
    residuals: Optional[PathLike] = None,
    exclude_serving: bool = False,
    max_evals: Optional[int] = None,
    serving: Optional[str] = None,
) -> CalibrationResult:
    """Fit named parameters to published measurements (``perfcast calibrate``): ``params``
    as ``--param`` takes them (``"KEY[,KEY...][=LO..HI]"``), ``cv`` the cross-validation
    schemes; the fitted values, in-sample and cross-validated error per group. ``out``
    writes the fitted overlay; ``residuals`` the per-class error bars. ``serving`` is what
    the serving runs are to the fit (``"score"``, the default: predicted and scored, not
    fitted on; ``"fit"``; ``"exclude"``, which ``exclude_serving=True`` also says)."""
    a = _Args()
    a.args.append("calibrate")
    if cases is not None:
        a.args.append(os.fspath(cases))
    for p in params or ():
        a.flag("--param", p, [p])
    if cv is not None:
        cv = list(cv)
        a.flag("--cv", ",".join(cv), cv)
    a.flag("--out", os.fspath(out) if out is not None else None, out)
    a.flag("--residuals", os.fspath(residuals) if residuals is not None else None, residuals)
    a.flag("--exclude-serving", exclude_serving)
    a.flag("--serving", serving)
    a.flag("--max-evals", max_evals)
    return cast(CalibrationResult, _json("calibrate", a))


def validate(
    cases: Optional[PathLike] = None,
    group: Optional[str] = None,
    overlay: Optional[PathLike] = None,
) -> ValidationResult:
    """Predicted against published measurements (``perfcast validate``): per case, per group,
    overall; ``cases`` defaults to the built-in cases file."""
    a = _Args()
    a.args.append("validate")
    if cases is not None:
        a.args.append(os.fspath(cases))
    a.flag("--group", group)
    a.flag("--overlay", os.fspath(overlay) if overlay is not None else None, overlay)
    return cast(ValidationResult, _json("validate", a))


def plugins(load: Load = None) -> List[Dict[str, Any]]:
    """Every registered component (built-in and loaded): category, name, origin, ABI."""
    a = _Args()
    a.args.append("plugins")
    a.loads(load)
    return cast(List[Dict[str, Any]], a.run(["--format", "json"], _run_json))


def presets() -> List[Preset]:
    """The built-in presets: one :class:`Preset` (``name``, ``group``, ``use``,
    ``description``) each, hardware, systems, models, software stacks and the shipped
    experiments (``perfcast config presets``)."""
    return [
        Preset(name=p["name"], group=p["group"], use=p["use"], description=p.get("description"))
        for p in _run_json(["config", "presets", "--format", "json"])
    ]


def explain(
    *configs: Config, overrides: Optional[Mapping[str, Any]] = None, load: Load = None, **kw: Any
) -> List[Dict[str, Any]]:
    """Every configuration value and where it came from (``perfcast config explain``)."""
    a = _configured(["config", "explain"], configs, overrides, load, kw)
    return cast(List[Dict[str, Any]], a.run(["--format", "json"], _run_json))
