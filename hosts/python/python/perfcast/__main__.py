"""``python -m perfcast ARGS...``: the ``perfcast`` command line, from the package (same
commands, options, output and exit codes), plus ``sweep STUDY.toml --ray [ADDRESS]``: the
sweep's chunks run as Ray tasks (:func:`perfcast.sweep` with ``executor="ray"``)::

    python -m perfcast predict configs/experiments/gpt3-175b-a100.toml
    python -m perfcast sweep configs/sweeps/a100-hbm-nvlink.toml --ray auto --out out/
"""

import argparse
import sys
from typing import List, Optional

from . import PerfcastError, Plugin, UsageError, _native, _sweep
from .distributed import RayExecutor


def _ray_sweep(argv: List[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m perfcast sweep",
        description="A sweep whose chunks run as Ray tasks (see `perfcast sweep --help`).",
    )
    p.add_argument("study", metavar="STUDY.toml")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        nargs="?",
        const="",
        required=True,
        help="the Ray cluster (`auto`, `ray://HOST:10001`); none: a local Ray",
    )
    p.add_argument("--out", metavar="DIR")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("--force", action="store_true")
    p.add_argument("--chunk-size", type=int, metavar="N")
    p.add_argument("--load", action="append", default=[], metavar="PATH")
    p.add_argument("--sha256", action="append", default=[], metavar="HEX")
    p.add_argument("--isolate", action="store_true", help="run the libraries in child processes")
    a = p.parse_args(argv)
    if a.sha256 and len(a.sha256) != len(a.load):
        p.error("give one --sha256 per --load, in the same order")
    pins = a.sha256 or [None] * len(a.load)
    executor = RayExecutor(address=a.ray or None, chunk_size=a.chunk_size)
    try:
        load = [Plugin(path, sha256=pin, isolate=a.isolate) for path, pin in zip(a.load, pins)]
        # `_sweep`, not `sweep`: errors keep the command line's wording (`--out`, not `out=`).
        rows = _sweep(a.study, a.force, executor, a.out, a.format, load, None)
    except PerfcastError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        # Leave Ray (and stop the local one this command started) before the interpreter
        # exits, not while it tears down.
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    if a.out is None:
        sys.stdout.write(rows.to_csv())
    else:
        print(f"wrote {rows.path} ({len(rows)} points)")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["sweep"] and any(x == "--ray" or x.startswith("--ray=") for x in argv):
        return _ray_sweep(argv[1:])
    return _native.main(["perfcast", *argv])


if __name__ == "__main__":
    sys.exit(main())
