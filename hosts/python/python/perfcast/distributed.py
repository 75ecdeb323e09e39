"""Sweeps whose points run on a Ray cluster (``perfcast.sweep(study, executor="ray")``).

The driver counts the sweep's points (``perfcast sweep --count``), splits them into chunks of
consecutive points and submits one Ray task per chunk; a task runs ``perfcast sweep STUDY
--points A..B`` in its worker's process (the package's native module: each point a plan
evaluation, a full plan search or whatever the sweep's mode is) and returns the chunk's CSV.
The driver takes the chunks back in order as they finish, and joins them into the sweep's
rows (``perfcast sweep --merge``: the same CSV or Parquet as a local run). A chunk whose
worker died (a crashed or killed process, a lost node) is run again by Ray, up to
``max_retries`` times; a chunk that fails in perfcast (a point that does not fit, a bad key)
fails the sweep with perfcast's own exception and message, and no further chunk is
submitted (at most two chunks per CPU are in flight at a time).

The study, the files it names and the plugin libraries are read by the workers at the same
paths as on the driver: on one machine that is given; on a cluster, put them on a shared
file system (or ship them with Ray's ``runtime_env={"working_dir": ...}`` and give relative
paths). Libraries are passed with each task by path and sha256 pin (``load=``); a worker
checks the pin on the file it opens.
"""

from __future__ import annotations

import math
import os
import importlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = ["RayExecutor"]

#: The Ray the tests and the user guide's figures (docs/python.md) were measured with.
RAY_VERSION = "2.40.0"


def _ray() -> Any:
    try:
        ray = importlib.import_module("ray")
    except ImportError:
        raise ImportError(
            "executor=\"ray\" needs Ray, which is not installed: "
            f"pip install 'ray=={RAY_VERSION}' (or any Ray 2.x)"
        ) from None
    return ray


def _chunk_task(
    executor: "RayExecutor", args: List[str]
) -> Union[Tuple[str, str], Tuple[str, str, str, str]]:
    """One chunk, on a worker: ("ok", csv) or ("error", kind, message, output)."""
    from . import PerfcastError, _KINDS

    try:
        return ("ok", executor.run_chunk(args))
    except PerfcastError as e:
        return ("error", _KINDS.get(type(e), "other"), e.message, e.output)


class RayExecutor:
    """Run a sweep's chunks as Ray tasks.

    ``address``: the cluster (``"auto"``, ``"ray://HOST:10001"``); ``None`` connects to the Ray
    this process already initialised, else starts a local one (``ray.init`` with
    ``init_kwargs``). ``chunk_size``: points per task (default: the points spread over four
    tasks per CPU of the cluster, at least one point each). ``max_retries``: how many times a
    chunk whose worker died runs again. ``cpus_per_task``: Ray CPUs a task holds (and the
    threads perfcast uses in it). ``runtime_env``: Ray's, for every task (e.g. a
    ``working_dir``).
    """

    def __init__(
        self,
        address: Optional[str] = None,
        chunk_size: Optional[int] = None,
        max_retries: int = 3,
        cpus_per_task: int = 1,
        runtime_env: Optional[Dict[str, Any]] = None,
        init_kwargs: Optional[Dict[str, Any]] = None,
    ) -> None:
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive integer, not {chunk_size!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, not {max_retries!r}")
        if not isinstance(cpus_per_task, int) or cpus_per_task < 1:
            raise ValueError(f"cpus_per_task must be a positive integer, not {cpus_per_task!r}")
        self.address = address
        self.chunk_size = chunk_size
        self.max_retries = max_retries
        self.cpus_per_task = cpus_per_task
        self.runtime_env = dict(runtime_env or {})
        self.init_kwargs = dict(init_kwargs or {})

    def run_chunk(self, args: Sequence[str]) -> str:
        """Run one chunk (``perfcast sweep ... --points A..B``) here, on a worker."""
        from . import run

        return run(list(args))

    def connect(self) -> Any:
        """Ray, initialised (connecting to ``address`` or starting a local Ray)."""
        ray = _ray()
        if not ray.is_initialized():
            kw = {"include_dashboard": False, "log_to_driver": True}
            kw.update(self.init_kwargs)
            ray.init(address=self.address, **kw)
        return ray

    def chunks(self, n: int, cpus: float) -> List[range]:
        size = self.chunk_size or max(1, math.ceil(n / max(1, 4 * int(cpus / self.cpus_per_task))))
        return [range(a, min(n, a + size)) for a in range(0, n, size)]

    def map(
        self,
        args_of: Callable[[range], List[str]],
        n: int,
        progress: Optional[Callable[[int, int], Any]] = None,
    ) -> Iterator[str]:
        """The CSV of every chunk of ``n`` points, in order, as they finish (each chunk's
        command line from ``args_of(points)``)."""
        from . import PerfcastError, _error

        ray = self.connect()
        cpus = ray.cluster_resources().get("CPU", 1)
        chunks = self.chunks(n, cpus)
        env = dict(self.runtime_env)
        # perfcast's threads in a task: the CPUs the task holds.
        env["env_vars"] = {
            "RAYON_NUM_THREADS": str(self.cpus_per_task),
            **env.get("env_vars", {}),
        }
        task = ray.remote(
            num_cpus=self.cpus_per_task,
            max_retries=self.max_retries,
            retry_exceptions=False,
            runtime_env=env,
        )(_chunk_task)
        # A window of chunks in flight, submitted as the earliest come back: when a chunk
        # fails, no more are submitted and those in flight run out (cancelling a Ray 2.40 task
        # while it completes or is retried can take the driver down, so none is cancelled).
        window = max(1, 2 * int(cpus / self.cpus_per_task))
        refs = [task.remote(self, args_of(c)) for c in chunks[:window]]
        done = 0
        for i, c in enumerate(chunks):
            try:
                answer = ray.get(refs[i])
            except ray.exceptions.RayError as e:
                raise PerfcastError(
                    f"the chunk of points {c.start}..{c.stop} failed on Ray (after up to "
                    f"{self.max_retries} retries of a dead worker): {e}"
                ) from None
            if answer[0] == "error":
                raise _error(*answer[1:])
            if i + window < len(chunks):
                refs.append(task.remote(self, args_of(chunks[i + window])))
            refs[i] = None
            done += len(c)
            if progress is not None:
                progress(done, n)
            yield answer[1]
