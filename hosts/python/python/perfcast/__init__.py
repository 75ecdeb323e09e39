"""perfcast: an analytical performance model of distributed LLM training and inference.

Every function runs the same code as the ``perfcast`` command line, in this process (the
native module releases the GIL while it runs), and returns the command's JSON as a
:class:`Result` (a ``dict`` with ``to_json``, ``to_pandas``, ``to_parquet`` and a notebook
table). Its fields are the CLI's ``--format json`` fields, so the user guide's command pages
(``docs/commands/``) apply.

A configuration is a path (``str`` or ``os.PathLike``), a built-in preset (``"preset:NAME"``),
TOML text, or a nested ``dict``; several are merged in order, as on the command line.
Overrides use the dotted keys of ``--set``: ``overrides={"plan.tp": 4}``, or as keyword
arguments with ``__`` for the dot (``plan__tp=4``). Errors are exceptions carrying the CLI's
message (which names the key and where its value came from)::

    import perfcast
    r = perfcast.predict("configs/experiments/gpt3-175b-a100.toml", plan__tp=4)
    r["report"]["iteration_time"], r["report"]["mfu"]
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _native

__version__ = _native.__version__

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
    """A perfcast command failed. ``message`` is what the CLI prints after ``error:``;
    ``output`` what the command printed before failing (e.g. the report of a plan that does
    not fit), as text."""

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
    printed first, parsed when it is JSON (the report of the plan that does not fit)."""

    @property
    def result(self) -> Optional["Result"]:
        try:
            return Result(json.loads(self.output))
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
    """Run ``perfcast ARGS...`` in process and return what it prints (any format)."""
    try:
        return _native.run([str(a) for a in args])
    except _native.Failure as f:
        raise _error(*f.args) from None


def _run_json(args: Sequence[str]):
    """``json.loads(run(args))`` for a ``--format json`` command, the objects built by the
    native module as it reads the JSON."""
    try:
        return _native.run_json([str(a) for a in args])
    except _native.Failure as f:
        raise _error(*f.args) from None


class Result(dict):
    """A command's JSON result: a ``dict`` of the CLI's ``--format json`` fields."""

    #: The list of records ``to_pandas`` turns into rows, by the fields a result has.
    _ROWS = ("plans", "runs", "cases", "rows", "ops", "points")

    def to_dict(self) -> dict:
        """A plain ``dict`` (deep copy)."""
        return json.loads(json.dumps(self))

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self, indent=indent)

    def records(self) -> list:
        """The result's rows as flat dicts (nested fields joined by ``.``): its first list of
        records (``plans``, ``runs``, ``cases``, ...), else the result itself as one row."""
        rows = next(
            (self[k] for k in self._ROWS if isinstance(self.get(k), list)),
            [dict(self)],
        )
        return [_flatten(r) if isinstance(r, dict) else {"value": r} for r in rows]

    def to_parquet(self, path: Union[str, os.PathLike]) -> None:
        """The CLI's Parquet file of this command (``--format parquet``: the CSV's columns,
        typed), for ``search``, ``serve`` and ``validate``: the command runs again with the
        same arguments (its results are deterministic) and writes ``path``."""
        args = getattr(self, "_args", None)
        if args is None:
            raise PerfcastError("this result does not come from a command")
        args.run(["--format", "parquet", "--out", os.fspath(path)])

    def to_pandas(self):
        """``records()`` as a pandas DataFrame (a list of dicts when pandas is not installed)."""
        try:
            import pandas
        except ImportError:
            return self.records()
        return pandas.DataFrame(self.records())

    def to_polars(self):
        """``records()`` as a polars DataFrame (a list of dicts when polars is not installed)."""
        return _polars(self.records())

    def _repr_html_(self) -> str:
        rows = self.records()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        esc = lambda v: str(v).replace("&", "&amp;").replace("<", "&lt;")  # noqa: E731
        head = "".join(f"<th>{esc(c)}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(r.get(c, ''))}</td>" for c in cols) + "</tr>"
            for r in rows[:50]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _polars(rows: list):
    try:
        import polars
    except ImportError:
        return rows
    return polars.DataFrame(rows)


class Rows(list):
    """A CSV result (``sweep``): a list of dicts, numbers parsed; ``path`` is the file it was
    written to (``out=``), else ``None``."""

    def __init__(self, text: str, path: Optional[str] = None) -> None:
        super().__init__(_parse(r) for r in csv.DictReader(io.StringIO(text)))
        self._text = text
        self.path = path
        #: A study's summary (`study`), else None.
        self.summary: Optional[str] = None

    def to_csv(self) -> str:
        """The CSV, as the command line prints it."""
        return self._text

    def to_pandas(self):
        """A pandas DataFrame, read from the CSV (an empty cell is missing; a list of dicts
        when pandas is not installed)."""
        try:
            import pandas
        except ImportError:
            return list(self)
        return pandas.read_csv(io.StringIO(self._text))

    def to_polars(self):
        """A polars DataFrame (a list of dicts when polars is not installed)."""
        return _polars(list(self))


def _flatten(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


Config = Union[str, "os.PathLike[str]", Mapping[str, Any]]


class Plugin:
    """A plugin library, checked to load (:func:`load_plugin`): give it to any function's
    ``load=``. ``components`` lists what it registers (category, name, version, ABI).
    ``isolate=True`` runs it in a child process (``python -m perfcast._plugin_host``) where a
    crash, a hang longer than ``timeout`` seconds or an exit is a :class:`PluginError`
    naming it, not the end of the interpreter; a call that loads an isolated library runs
    all of its libraries isolated (``--isolate``)."""

    def __init__(
        self,
        path: Union[str, os.PathLike],
        sha256: Optional[str] = None,
        isolate: bool = False,
        timeout: Optional[float] = None,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.sha256 = sha256
        self.isolate = isolate
        self.timeout = timeout
        self.components = [c for c in plugins(load=self) if c.get("origin") == self.path]

    def __repr__(self) -> str:
        names = ", ".join(c["name"] for c in self.components)
        return f"Plugin({self.path!r}: {names})"


def load_plugin(
    path: Union[str, os.PathLike],
    sha256: Optional[str] = None,
    isolate: bool = False,
    timeout: Optional[float] = None,
) -> Plugin:
    """Check that the library at ``path`` loads (its pin, its ABI, its components) and
    return it as a :class:`Plugin` for ``load=``; a library that does not load raises
    :class:`PluginError` with the reason."""
    return Plugin(path, sha256=sha256, isolate=isolate, timeout=timeout)


#: Libraries for ``load=``: a path, a ``(path, sha256)`` pair, a :class:`Plugin`, or a list.
Load = Union[None, str, os.PathLike, tuple, Plugin, Iterable]


def _load_args(load: Load) -> list:
    """The ``--load`` (``--sha256``, ``--isolate``) arguments of ``load=``."""
    if load is None:
        return []
    single = isinstance(load, (str, os.PathLike, tuple, Plugin))
    args: list = []
    isolate, timeout = False, None
    for lib in [load] if single else list(load):
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
    they would in a file there) for the run, and removed afterwards."""

    def __init__(self) -> None:
        self.args: list = []
        self.configs = 0

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
        items = list((overrides or {}).items()) + [(k.replace("__", "."), v) for k, v in kw.items()]
        for k, v in items:
            self.args += ["--set", f"{k}={json.dumps(v)}"]

    def flag(self, name: str, value: Any) -> None:
        if value is None or value is False:
            return
        if value is True:
            self.args.append(name)
        else:
            self.args += [name, str(value)]

    def loads(self, load: Load) -> None:
        self.args += _load_args(load)

    def run(self, extra: Sequence[str] = (), runner=run):
        return _with_files(self.args, lambda args: runner(args + list(extra)))


def _with_files(args: Sequence, call):
    """``call(args)`` with each configuration given as text or a dict written to a temporary
    file (removed afterwards); an error names it as the caller gave it, not by that file."""
    written: dict = {}
    try:
        files = [_write(a, written) if isinstance(a, _Temp) else a for a in args]
        try:
            return call(files)
        except PerfcastError as e:
            message = e.message
            for path, what in written.items():
                message = message.replace(f"file {path}", what).replace(path, what)
            raise type(e)(message, e.output) from None
    finally:
        for p in written:
            try:
                os.remove(p)
            except OSError:
                pass


def _write(t: _Temp, written: dict) -> str:
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


def _configured(command: Sequence[str], configs: Sequence[Config], overrides, load, kw) -> _Args:
    if not configs:
        raise TypeError(f"{command[0]}() needs a configuration")
    a = _Args()
    a.args += list(command)
    for c in configs:
        a.config(c)
    a.sets(overrides, kw)
    a.loads(load)
    return a


def _json(a: _Args) -> Result:
    r = Result(a.run(["--format", "json"], _run_json))
    r._args = a
    return r


class Scenario:
    """A configuration loaded once (files read, libraries loaded, model and plans checked):
    ``predict``, ``infer``, ``roofline``, ``serve``, ``search`` and ``explain`` run on it with
    their own overrides on top, without reading or loading again (``perfcast.load``)."""

    def __init__(self, *configs: Config, overrides=None, load=None, **kw) -> None:
        a = _configured([], configs, overrides, load, kw)

        def native_load(args):
            try:
                return _native.load(args)
            except _native.Failure as f:
                raise _error(*f.args) from None

        self._loaded = _with_files(a.args, native_load)

    def _call(self, native, command: Sequence[str], overrides, kw, extra: Sequence[str] = ()):
        a = _Args()
        a.args += list(command) + ["-"]
        a.sets(overrides, kw)
        a.args += list(extra) + ["--format", "json"]
        try:
            return native(a.args)
        except _native.Failure as f:
            raise _error(*f.args) from None

    def _run(self, command: Sequence[str], overrides, kw, extra: Sequence[str] = ()) -> Result:
        return Result(self._call(self._loaded.run_json, command, overrides, kw, extra))

    def predict(self, overrides=None, **kw) -> Result:
        return self._run(["predict"], overrides, kw)

    def infer(self, overrides=None, max_batch: bool = False, **kw) -> Result:
        return self._run(["infer"], overrides, kw, ["--max-batch"] if max_batch else [])

    def roofline(self, overrides=None, phase: Optional[str] = None, **kw) -> Result:
        return self._run(["roofline"], overrides, kw, ["--phase", phase] if phase else [])

    def search(self, overrides=None, top: Optional[int] = None, **kw) -> Result:
        return self._run(["search"], overrides, kw, ["--top", str(top)] if top else [])

    def serve(
        self,
        overrides=None,
        rates: Optional[Iterable[float]] = None,
        requests: Optional[int] = None,
        **kw,
    ) -> Result:
        extra: list = []
        if rates is not None:
            extra += ["--rates", ",".join(str(r) for r in rates)]
        if requests is not None:
            extra += ["--requests", str(requests)]
        return self._run(["serve"], overrides, kw, extra)

    def explain(self, overrides=None, **kw) -> list:
        return self._call(self._loaded.run_json, ["config", "explain"], overrides, kw)


def load(*configs: Config, overrides=None, load=None, **kw) -> Scenario:
    """Load a configuration once; its methods run commands on it (see :class:`Scenario`)."""
    return Scenario(*configs, overrides=overrides, load=load, **kw)


def predict(*configs: Config, overrides=None, load=None, **kw) -> Result:
    """One training step: time, MFU/HFU, breakdown, memory per stage (``perfcast predict``)."""
    return _json(_configured(["predict"], configs, overrides, load, kw))


def infer(*configs: Config, overrides=None, load=None, max_batch: bool = False, **kw) -> Result:
    """Static inference: TTFT, time per output token, throughput, memory (``perfcast infer``);
    ``max_batch=True``: the largest batch that fits."""
    a = _configured(["infer"], configs, overrides, load, kw)
    a.flag("--max-batch", max_batch)
    return _json(a)


def roofline(*configs: Config, overrides=None, load=None, phase: Optional[str] = None, **kw) -> Result:
    """Per-op roofline: the config's ``[[ops]]``, or a model's GEMMs (``phase``)."""
    a = _configured(["roofline"], configs, overrides, load, kw)
    a.flag("--phase", phase)
    return _json(a)


def serve(
    *configs: Config,
    overrides=None,
    load=None,
    rate: Optional[float] = None,
    rates: Optional[Iterable[float]] = None,
    concurrency: Optional[int] = None,
    trace: Optional[Union[str, os.PathLike]] = None,
    requests: Optional[int] = None,
    seed: Optional[int] = None,
    **kw,
) -> Result:
    """Serving under load (``perfcast serve``): one run per rate, the latency percentiles."""
    a = _configured(["serve"], configs, overrides, load, kw)
    a.flag("--rate", rate)
    if rates is not None:
        a.flag("--rates", ",".join(str(r) for r in rates))
    a.flag("--concurrency", concurrency)
    a.flag("--trace", os.fspath(trace) if trace is not None else None)
    a.flag("--requests", requests)
    a.flag("--seed", seed)
    return _json(a)


def search(
    *configs: Config,
    overrides=None,
    load=None,
    top: Optional[int] = None,
    objective: Optional[str] = None,
    max_seconds: Optional[float] = None,
    **kw,
) -> Result:
    """The best training plans and their Pareto front, or with ``[serving_search]`` the best
    deployments (``perfcast search``)."""
    a = _configured(["search"], configs, overrides, load, kw)
    a.flag("--top", top)
    a.flag("--objective", objective)
    a.flag("--max-seconds", max_seconds)
    return _json(a)


def sweep(
    study: Union[str, os.PathLike],
    force: bool = False,
    executor=None,
    out: Optional[Union[str, os.PathLike]] = None,
    format: str = "csv",
    load: Load = None,
    progress=None,
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
    study = os.fspath(study)
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


def _parse(row: Mapping[str, str]) -> dict:
    out = {}
    for k, v in row.items():
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except (TypeError, ValueError):
                pass
        out[k] = None if v == "" else v
    return out


def studies() -> list:
    """The seed paper's studies: one dict per study (``study``, ``config``, ``what``)."""
    lines = [l for l in run(["study", "--list"]).splitlines() if l.strip()]
    # A table: a header, a rule of dashes whose runs give the columns, then rows.
    rule = lines[1]
    spans, start = [], None
    for i, ch in enumerate(rule + " "):
        if ch == "-" and start is None:
            start = i
        elif ch != "-" and start is not None:
            spans.append((start, i))
            start = None
    cut = lambda l: [  # noqa: E731
        l[a : (spans[j + 1][0] if j + 1 < len(spans) else len(l))].strip()
        for j, (a, _) in enumerate(spans)
    ]
    names = cut(lines[0])
    return [dict(zip(names, cut(l))) for l in lines[2:]]


def study(
    name: str,
    out: Optional[Union[str, os.PathLike]] = None,
    config: Optional[Union[str, os.PathLike]] = None,
) -> Rows:
    """Run one of the seed paper's studies (``perfcast study NAME``): its CSV rows, with
    ``path`` the CSV written under ``out`` (``NAME.csv``, ``NAME.svg``, ``NAME.md``; without
    ``out`` they go to a temporary directory, removed afterwards) and ``summary`` the
    study's summary (``NAME.md``). ``config``: a study config to read instead of the
    built-in one."""
    import shutil

    tmp = None if out is not None else tempfile.mkdtemp(prefix="perfcast-study-")
    where = os.fspath(out) if out is not None else tmp
    try:
        args = ["study", name, "--out", where]
        if config is not None:
            args += ["--config", os.fspath(config)]
        run(args)
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
    cases: Optional[Union[str, os.PathLike]] = None,
    params: Optional[Iterable[str]] = None,
    cv: Optional[Iterable[str]] = None,
    out: Optional[Union[str, os.PathLike]] = None,
    residuals: Optional[Union[str, os.PathLike]] = None,
    exclude_serving: bool = False,
    max_evals: Optional[int] = None,
    serving: Optional[str] = None,
) -> Result:
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
        a.args += ["--param", p]
    if cv is not None:
        a.args += ["--cv", ",".join(cv)]
    a.flag("--out", os.fspath(out) if out is not None else None)
    a.flag("--residuals", os.fspath(residuals) if residuals is not None else None)
    a.flag("--exclude-serving", exclude_serving)
    a.flag("--serving", serving)
    a.flag("--max-evals", max_evals)
    return _json(a)


def validate(
    cases: Optional[Union[str, os.PathLike]] = None,
    group: Optional[str] = None,
    overlay: Optional[Union[str, os.PathLike]] = None,
) -> Result:
    """Predicted against published measurements (``perfcast validate``): per case, per group,
    overall; ``cases`` defaults to the built-in cases file."""
    a = _Args()
    a.args.append("validate")
    if cases is not None:
        a.args.append(os.fspath(cases))
    a.flag("--group", group)
    a.flag("--overlay", os.fspath(overlay) if overlay is not None else None)
    return _json(a)


def plugins(load=None) -> list:
    """Every registered component (built-in and loaded): category, name, origin, ABI."""
    a = _Args()
    a.args.append("plugins")
    a.loads(load)
    return json.loads(a.run(["--format", "json"]))


def presets() -> str:
    """The built-in presets and software stacks, as the CLI lists them."""
    return run(["config", "presets"])


def explain(*configs: Config, overrides=None, load=None, **kw) -> list:
    """Every configuration value and where it came from (``perfcast config explain``)."""
    a = _configured(["config", "explain"], configs, overrides, load, kw)
    return json.loads(a.run(["--format", "json"]))
