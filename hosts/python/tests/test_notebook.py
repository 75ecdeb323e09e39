"""The quickstart notebook (examples/notebooks/quickstart.ipynb) runs: its code cells in
order, as a script, with matplotlib drawing off screen."""

import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "examples/notebooks/quickstart.ipynb"


@pytest.fixture
def ray_off():
    """The notebook starts its own local Ray; leave it stopped afterwards."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    yield
    import ray

    ray.shutdown()


def test_the_quickstart_notebook_runs(ray_off, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(NOTEBOOK.parent)
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    # Shipped clean: no outputs, no execution counts.
    assert all(not c["outputs"] and c["execution_count"] is None for c in cells)
    ns: dict = {"__name__": "__main__"}
    for i, c in enumerate(cells):
        exec(compile("".join(c["source"]), f"{NOTEBOOK.name}[{i}]", "exec"), ns)
    # What each part computed.
    assert ns["r"].mfu > 0.3 and sum(ns["breakdown"]) == pytest.approx(ns["r"].iteration_time_s)
    front = ns["front"]  # less memory, more time
    assert len(front) >= 2 and front["memory_gib"].is_monotonic_increasing
    assert front["time_s"].is_monotonic_decreasing
    runs = ns["runs"]
    assert list(runs["offered_rate_per_s"]) == [1, 2, 4, 8, 16, 32]
    assert (runs["tpot_p90_s"] > 0).all()
    assert ns["grid"].shape == (3, 3)
    assert {c["name"] for c in ns["plugin"].components} >= {"cvendor/dsp1"}
    import matplotlib.pyplot as plt

    # The search's and the serve's plot(), the sweep's heat map.
    assert len(plt.get_fignums()) == 3
    plt.close("all")
