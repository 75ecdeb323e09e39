"""The typed Python API: a class per kind of result with typed headline numbers, one table
schema per kind (the same columns, types and units in records(), to_pandas(), to_polars()
and to_parquet()), plot() giving a matplotlib Figure, ImportErrors that say what to install,
errors that name Python arguments rather than command-line options, presets and studies as
records, and the types shipped (py.typed)."""

import json
import math
import pathlib
import re
import sys

import pytest

import perfcast
from perfcast import results

ROOT = pathlib.Path(__file__).resolve().parents[3]
GPT3 = "configs/experiments/gpt3-175b-a100.toml"
LLAMA = "configs/experiments/llama2-70b-h100.toml"
OPS = "configs/experiments/roofline-a100.toml"
SERVING = "configs/serving/llama3.1-8b-h100.toml"
SERVING_SEARCH = "configs/serving/llama3.1-70b-dgx-h100-search.toml"
SMALL = {"search.pp": [1, 2, 16], "search.tp": [4, 8]}
GIB = 2**30


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def made():
    """One result of every kind (module scope: the commands run once)."""
    import os

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return {
            "predict": perfcast.predict(GPT3),
            "infer": perfcast.infer(LLAMA),
            "max_batch": perfcast.infer(LLAMA, max_batch=True),
            "roofline_ops": perfcast.roofline(OPS),
            "roofline_gemms": perfcast.roofline(LLAMA, phase="decode"),
            "search": perfcast.search(GPT3, top=3, overrides=SMALL),
            "serving_search": perfcast.search(SERVING_SEARCH),
            "serve": perfcast.serve(SERVING, rates=[2, 8], requests=50),
            "validate": perfcast.validate(group="narayanan2021-table1"),
        }
    finally:
        os.chdir(here)


KINDS = {
    "predict": perfcast.TrainingResult,
    "infer": perfcast.InferenceResult,
    "max_batch": perfcast.MaxBatchResult,
    "roofline_ops": perfcast.RooflineResult,
    "roofline_gemms": perfcast.RooflineResult,
    "search": perfcast.SearchResult,
    "serving_search": perfcast.ServingSearchResult,
    "serve": perfcast.ServeResult,
    "validate": perfcast.ValidationResult,
}


def test_each_command_gives_its_class_still_a_dict_of_the_json(made):
    for name, cls in KINDS.items():
        r = made[name]
        assert type(r) is cls, name
        assert isinstance(r, perfcast.Result) and isinstance(r, dict), name
    # The JSON is all there, by key, as before.
    p = made["predict"]
    assert p["report"]["iteration_time"] == p.iteration_time_s
    assert p.to_dict() == json.loads(perfcast.run(["predict", GPT3, "--format", "json"]))


def test_a_training_step_is_typed(made):
    r = made["predict"]
    for v in (r.iteration_time_s, r.mfu, r.hfu, r.tokens_per_s, r.tokens_per_s_per_gpu,
              r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, r.peak_memory_bytes,
              r.memory_capacity_bytes, r.recompute_s):
        assert isinstance(v, float) and math.isfinite(v)
    assert r.iteration_time_s == pytest.approx(29.515, rel=1e-3) and 0.3 < r.mfu < 0.4
    assert isinstance(r.devices, int) and r.devices == 1024 and r.fits is True
    # The breakdown: seconds, its parts adding up to the step time.
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in r.breakdown.items())
    assert sum(r.breakdown.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert r.breakdown["tp_comm"] == r["report"]["breakdown"]["tp_comm"]
    assert r.breakdown["compute_gemm"] == r["report"]["breakdown"]["compute"]["gemm"]
    plan = r.plan
    assert isinstance(plan, perfcast.TrainingPlan) and (plan.tp, plan.pp, plan.dp) == (8, 16, 8)
    assert plan.recompute == "full" and plan.raw == r["plan"]
    stages = r.memory_per_stage
    assert len(stages) == plan.pp and all(isinstance(s, perfcast.StageMemory) for s in stages)
    assert stages[0].total_bytes == r["memory_per_stage"][0]["total"]
    assert max(s.total_bytes for s in stages) == r.peak_memory_bytes
    assert stages[0].total_gib == stages[0].total_bytes / GIB
    net = r.network
    assert isinstance(net, perfcast.Network) and net.topology == "hierarchical"
    assert [l.kind for l in net.levels] == ["nvlink", "infiniband"]
    assert net.levels[0].domain_size == 8 and isinstance(net.levels[0].bandwidth_gbs, float)
    assert "tensor" in net.strategies
    iv = r.interval
    assert isinstance(iv, perfcast.Interval) and iv.low < r.iteration_time_s < iv.high
    assert iv.level == 0.8
    assert r.stack == "megatron-lm-2021" and all(isinstance(n, str) for n in r.notes)
    assert r.step.breakdown == r.breakdown and r.step.iteration_time_s == r.iteration_time_s


def test_inference_roofline_search_serve_validate_are_typed(made):
    i = made["infer"]
    assert (i.ttft_s, i.tpot_s, i.latency_s) == (i["ttft"], i["tpot"], i["latency"])
    assert isinstance(i.plan, perfcast.InferencePlan) and i.plan.batch == 8
    assert isinstance(i.prefill, perfcast.PhaseTime) and i.prefill.total_s == i.ttft_s
    assert i.decode.steps == i.plan.output_len - 1
    assert isinstance(i.memory, perfcast.InferenceMemory) and i.memory.fits
    # The error bars in seconds (the JSON's are in ms).
    assert i.intervals["ttft_s"].low < i.ttft_s < i.intervals["ttft_s"].high
    assert i.intervals["tpot_s"].high == i["error_bars"]["metrics"]["tpot"]["interval"][1] / 1e3
    assert made["max_batch"].max_batch == made["max_batch"]["max_batch"] > 8

    for name in ("roofline_ops", "roofline_gemms"):
        ops = made[name].ops
        assert ops and all(isinstance(o, perfcast.RooflineOp) for o in ops)
        # What bounds each: compute, overhead, memory or the memory tier's name.
        assert all(isinstance(o.bound, str) and o.bound for o in ops), name
    gemm = made["roofline_gemms"].ops[0]
    assert gemm.phase == "decode" and re.fullmatch(r"\d+x\d+x\d+", gemm.shape)
    assert gemm.achieved_flops_per_s == gemm.flops / gemm.time_s

    s = made["search"]
    assert [p.rank for p in s.plans] == [1, 2, 3] and s.best == s.plans[0]
    assert isinstance(s.best.step, perfcast.TrainingStep)
    assert s.best.iteration_time_s == s["plans"][0]["report"]["iteration_time"]
    assert s.best.interval.low < s.best.iteration_time_s < s.best.interval.high
    assert s.pareto and all(isinstance(p, perfcast.ParetoPoint) for p in s.pareto)
    assert s.summary["enumerated"] > 0

    ss = made["serving_search"]
    assert ss.top and all(isinstance(d, perfcast.Deployment) for d in ss.top)
    assert ss.top[0].ttft_p90_s == ss["top"][0]["ttft_p90_ms"] / 1e3
    assert len(ss.best) == len(ss["best"])

    v = made["serve"]
    runs = v.runs
    assert [r.offered_rate_per_s for r in runs] == [2.0, 8.0]
    assert isinstance(runs[0].ttft, perfcast.Percentiles)
    assert runs[0].ttft.p90_s == v["runs"][0]["ttft"]["p90"] and runs[0].completed == 50

    val = made["validate"]
    assert isinstance(val.mape, float) and 0 < val.mape < 0.2
    assert all(isinstance(c, perfcast.ValidationCase) for c in val.cases)
    assert "narayanan2021-table1" in val.groups


def test_a_scenario_and_an_infeasible_plan_give_typed_results():
    sc = perfcast.load(GPT3)
    assert type(sc.predict()) is perfcast.TrainingResult
    assert type(sc.search(top=2, overrides=SMALL)) is perfcast.SearchResult
    assert type(perfcast.load(LLAMA).infer()) is perfcast.InferenceResult
    assert type(perfcast.load(LLAMA).roofline(phase="prefill")) is perfcast.RooflineResult
    assert type(perfcast.load(SERVING).serve(rates=[2], requests=20)) is perfcast.ServeResult
    with pytest.raises(perfcast.InfeasibleError) as e:
        perfcast.predict(GPT3, plan__tp=2, plan__pp=1, plan__dp=512)
    assert type(e.value.result) is perfcast.TrainingResult
    assert e.value.result.fits is False and e.value.result.peak_memory_bytes > 80 * GIB


@pytest.mark.parametrize("name", list(KINDS))
def test_one_schema_per_kind(made, name):
    """records(), to_pandas() and the class's columns() and schema() agree: the same
    columns in the same order, each of its declared type."""
    pandas = pytest.importorskip("pandas")
    r = made[name]
    cols = type(r).columns()
    assert cols and list(type(r).schema()) == cols
    rows = r.records()
    assert rows and all(list(row) == cols for row in rows)
    frame = r.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and list(frame.columns) == cols
    assert len(frame) == len(rows)
    kinds = {"float": "float64", "int": "Int64", "bool": "boolean", "str": "object"}
    for c, t in type(r).schema().items():
        assert str(frame[c].dtype) == kinds[t], (c, t, frame[c].dtype)
    # Unit-suffixed names: no time, memory or rate column without its unit.
    for c in cols:
        if not c.startswith("share_"):  # a ratio
            assert not re.search(r"(time|ttft|tpot|latency|duration|memory)$", c), c
    assert "<table>" in r._repr_html_()


def test_the_units_are_the_names(made):
    p = made["predict"].records()[0]
    assert p["iteration_time_s"] == made["predict"]["report"]["iteration_time"]
    assert p["peak_memory_gib"] == made["predict"]["report"]["memory"]["peak"] / GIB
    assert p["tp_comm_s"] == made["predict"]["report"]["breakdown"]["tp_comm"]
    i = made["infer"].records()[0]
    assert i["ttft_s"] == made["infer"]["ttft"] and i["weights_gib"] < 80
    s = made["serve"].records()
    assert [x["offered_rate_per_s"] for x in s] == [2.0, 8.0]
    assert s[0]["ttft_p90_s"] == made["serve"]["runs"][0]["ttft"]["p90"] < 1.0
    assert s[0]["output_tokens_per_s"] == made["serve"]["runs"][0]["output_tokens_per_s"]
    # The CLI's serving CSV says milliseconds; the Python table says seconds, named so.
    assert made["serving_search"].records()[0]["tpot_p90_s"] < 1.0
    # Search: the plan's columns and the step's, one row per plan kept.
    rows = made["search"].records()
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["iteration_time_s"] == made["search"].best.iteration_time_s


def test_predict_and_search_tables_share_the_plan_and_step_columns():
    plan, step = list(results.PLAN_COLUMNS), list(results.STEP_COLUMNS)
    assert perfcast.TrainingResult.columns() == ["model", "system", *plan, *step]
    assert perfcast.SearchResult.columns() == ["rank", *plan, "placement", *step]


@pytest.mark.parametrize("name", ["predict", "search", "serve", "infer", "validate"])
def test_to_parquet_has_the_columns_and_types_of_to_pandas(made, name, tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    r = made[name]
    path = tmp_path / f"{name}.parquet"
    r.to_parquet(path)
    assert path.read_bytes()[:4] == b"PAR1"
    back = pandas.read_parquet(path)
    frame = r.to_pandas()
    assert list(back.columns) == list(frame.columns)
    assert list(back.dtypes) == list(frame.dtypes)
    pandas.testing.assert_frame_equal(back, frame)


@pytest.mark.parametrize("name", ["predict", "search", "serve"])
def test_to_polars_has_the_columns_of_to_pandas(made, name, tmp_path):
    polars = pytest.importorskip("polars")
    r = made[name]
    frame = r.to_polars()
    assert isinstance(frame, polars.DataFrame) and frame.columns == type(r).columns()
    assert frame.height == len(r.records())
    # Written through polars alone (no pandas): the same columns.
    r_path = tmp_path / "p.parquet"
    results.write_parquet(r.records(), r.columns(), r_path, r.schema())
    assert polars.read_parquet(r_path).columns == frame.columns


def test_to_parquet_of_a_predict_runs_no_command(made, tmp_path, monkeypatch):
    """The table is computed from the JSON: no command runs again (a predict's to_parquet
    used to fail with the command line's usage error)."""
    if not any(_importable(m) for m in ("pyarrow", "fastparquet", "polars")):
        pytest.skip("no Parquet writer installed (pyarrow, fastparquet or polars)")

    def no_command(*a, **k):
        raise AssertionError("to_parquet ran a command")

    monkeypatch.setattr(perfcast._native, "run", no_command)
    monkeypatch.setattr(perfcast._native, "run_json", no_command)
    made["predict"].to_parquet(tmp_path / "step.parquet")
    assert (tmp_path / "step.parquet").read_bytes()[:4] == b"PAR1"


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def test_missing_packages_are_import_errors_naming_them(made, monkeypatch, tmp_path):
    r = made["serve"]
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install pandas"):
        r.to_pandas()
    rows = perfcast.Rows("a,b\n1,2\n")
    with pytest.raises(ImportError, match=r"pip install pandas"):
        rows.to_pandas()
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ImportError, match=r"pip install polars"):
        r.to_polars()
    with pytest.raises(ImportError, match=r"pip install polars"):
        rows.to_polars()
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    with pytest.raises(ImportError, match=r"pip install pyarrow"):
        r.to_parquet(tmp_path / "runs.parquet")
    assert not (tmp_path / "runs.parquet").exists()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install matplotlib"):
        r.plot()


def test_to_parquet_into_a_missing_directory_is_file_not_found(made):
    with pytest.raises(FileNotFoundError) as e:
        made["search"].to_parquet("/nonexistent/dir/plans.parquet")
    assert "/nonexistent/dir" in str(e.value)


@pytest.fixture
def pyplot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    yield plt
    plt.close("all")


@pytest.mark.parametrize(
    "name",
    ["predict", "infer", "search", "serving_search", "serve", "roofline_ops", "roofline_gemms", "validate"],
)
def test_plot_returns_a_figure(made, name, pyplot, tmp_path):
    from matplotlib.figure import Figure

    fig = made[name].plot()
    assert isinstance(fig, Figure) and fig.axes
    fig.savefig(tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").stat().st_size > 1000
    # Into axes the caller gives: their figure.
    mine, ax = pyplot.subplots()
    assert made[name].plot(ax=ax) is mine


def test_plots_draw_what_they_say(made, pyplot):
    fig = made["predict"].plot()
    fig.canvas.draw()
    ax = fig.axes[0]
    bars = {t.get_text(): p.get_width() for t, p in zip(ax.get_yticklabels(), ax.patches)}
    assert bars["tp_comm"] == made["predict"].breakdown["tp_comm"]
    assert ax.get_xlabel() == "seconds per step"
    ax = made["search"].plot().axes[0]
    front = ax.lines[0]
    assert list(front.get_ydata()) == sorted((p.time_s for p in made["search"].pareto), reverse=True)
    ax = made["serve"].plot().axes[0]
    assert list(ax.lines[0].get_xdata()) == [r.output_tokens_per_s for r in made["serve"].runs]
    assert ax.get_yscale() == "log"
    ax = made["infer"].plot().axes[0]
    assert sum(p.get_height() for p in ax.patches[::2]) == pytest.approx(made["infer"].ttft_s * 1e3, rel=1e-3)
    with pytest.raises(NotImplementedError):
        made["max_batch"].plot()


def test_errors_name_python_arguments_not_options():
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(GPT3, plan__tpp=2)
    assert "(from plan__tpp=2)" in e.value.message and "--set" not in e.value.message
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(GPT3, overrides={"plan.tp": "eight"})
    assert "(from overrides={'plan.tp': 'eight'})" in e.value.message, e.value.message
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.load(GPT3).predict(plan__recompute="sometimes")
    assert "(from plan__recompute='sometimes')" in e.value.message
    with pytest.raises(perfcast.PluginError) as e:
        perfcast.predict(GPT3, load="no-such-lib.so")
    assert "named by load=" in e.value.message and "--load" not in e.value.message
    with pytest.raises(perfcast.UsageError) as e:
        perfcast.roofline(LLAMA, phase="middle")
    m = e.value.message
    assert m.startswith("invalid value 'middle' for phase=") and "prefill, decode" in m, m
    assert "--" not in m and "For more information" not in m and not m.startswith("error:")
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.search(GPT3, top=0)
    assert "`top=0`" in e.value.message
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.search(GPT3, max_seconds=-1)
    assert "`max_seconds=-1`" in e.value.message
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.load(SERVING).serve(requests=0)
    assert "`requests=0`" in e.value.message
    with pytest.raises(perfcast.UsageError) as e:
        perfcast.serve(SERVING, rates=[0])
    assert "for rates=" in e.value.message and "--rates" not in e.value.message
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.serve(SERVING, trace="no-such-trace.csv")
    assert e.value.message.startswith("trace='no-such-trace.csv'")
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.calibrate(params=["no.such.key"], cv=["none"])
    assert e.value.message.startswith("params=['no.such.key']") and "--param" not in e.value.message
    # The command line from Python (`run`) keeps the command line's words.
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.run(["predict", GPT3, "--set", "plan.tpp=2"])
    assert "(from --set plan.tpp=2)" in e.value.message


def test_presets_and_studies_are_records():
    presets = perfcast.presets()
    assert presets and all(isinstance(p, perfcast.Preset) for p in presets)
    groups = {p.group for p in presets}
    assert {"hardware", "systems", "models", "stacks"} <= groups
    by_name = {p.name: p for p in presets}
    assert by_name["gpt3-175b"].group == "models"
    assert by_name["gpt3-175b"].use == "preset:gpt3-175b" and by_name["gpt3-175b"].description is None
    vllm = by_name["vllm-2025"]
    assert vllm.group == "stacks" and vllm.use == 'stack = "vllm-2025"'
    assert vllm.description and vllm.description.startswith("vLLM")
    # The same presets as the command line's table.
    table = perfcast.run(["config", "presets"])
    assert all(p.use in table for p in presets)
    assert len(presets) == len([l for l in table.splitlines() if l.startswith(("preset:", "stack ="))])
    # A preset's use works in a configuration.
    assert perfcast.predict(GPT3, by_name["h100-sxm5-80gb"].use).iteration_time_s > 0

    studies = perfcast.studies()
    assert all(isinstance(s, perfcast.Study) for s in studies)
    assert [s.name for s in studies][:2] == ["memory-vs-recompute", "a100-to-b200"]
    listed = perfcast.run(["study", "--list"])
    assert all(s.name in listed and s.title in listed for s in studies)
    assert all(s.config == f"configs/studies/{s.name}.toml" for s in studies)
    # Read as the CLI's table's columns, as before.
    assert studies[0]["study"] == studies[0].name and studies[0]["what"] == studies[0].title


def test_the_types_ship():
    package = pathlib.Path(perfcast.__file__).parent
    assert (package / "py.typed").is_file()
    assert (package / "_native.pyi").is_file()
    hints = perfcast.TrainingResult.iteration_time_s.fget.__annotations__
    assert hints["return"] in (float, "float")


def test_a_type_checker_accepts_the_api(tmp_path):
    api = pytest.importorskip("mypy.api")
    (tmp_path / "use.py").write_text(
        "import perfcast\n"
        "r = perfcast.predict('x.toml', plan__tp=4)\n"
        "t: float = r.iteration_time_s\n"
        "b: dict[str, float] = r.breakdown\n"
        "s: list[perfcast.StageMemory] = r.memory_per_stage\n"
        "tp: int = r.plan.tp\n"
        "raw = r['report']\n"
        "v = perfcast.serve('y.toml', rates=[1.0])\n"
        "p90: float = v.runs[0].ttft.p90_s\n"
        "names: list[str] = [p.name for p in perfcast.presets()]\n"
        "bad: str = r.mfu\n"
    )
    out, err, code = api.run([str(tmp_path / "use.py"), "--no-incremental",
                              "--cache-dir", str(tmp_path / ".mypy")])
    # The one error is the deliberate one: a float is not a str.
    assert code == 1, out + err
    errors = [l for l in out.splitlines() if ": error:" in l]
    assert len(errors) == 1 and "use.py:11:" in errors[0], out


def test_the_python_guide_page_runs(tmp_path, monkeypatch, pyplot):
    """Every ```python block of docs/python.md runs, in order (in a directory of its own
    that sees the repository's configs; a block writing Parquet needs a writer)."""
    page = (ROOT / "docs/python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 5
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    writer = any(_importable(m) for m in ("pyarrow", "fastparquet", "polars"))
    ran = 0
    for i, block in enumerate(blocks):
        if "to_parquet" in block and not writer:
            continue
        exec(compile(block, f"docs/python.md[{i}]", "exec"), {"__name__": "__main__"})
        ran += 1
    assert ran >= len(blocks) - 1
    if writer:
        assert (tmp_path / "plans.parquet").read_bytes()[:4] == b"PAR1"
