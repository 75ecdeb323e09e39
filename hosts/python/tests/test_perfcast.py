"""The perfcast Python package against the command line's own outputs (the golden files of
tests/golden/ are the CLI's JSON), its configuration forms, its exceptions, and its tables.
Run from anywhere: the tests work in the repository root."""

import json
import pathlib
import threading

import pytest

import perfcast

ROOT = pathlib.Path(__file__).resolve().parents[3]
GPT3 = "configs/experiments/gpt3-175b-a100.toml"
LLAMA = "configs/experiments/llama2-70b-h100.toml"
SERVING = "configs/serving/llama3.1-8b-h100.toml"
SMALL = {"search.pp": [1, 2, 16], "search.tp": [4, 8]}


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def golden(name):
    return json.loads((ROOT / "tests/golden" / name).read_text())


def test_results_are_the_cli_json():
    assert perfcast.predict(GPT3).to_dict() == golden("predict/gpt3-175b-a100.json")
    assert perfcast.infer(LLAMA).to_dict() == golden("infer/llama2-70b-h100.json")


def test_a_config_is_a_path_a_preset_list_toml_text_or_a_dict():
    by_path = perfcast.predict(pathlib.Path(GPT3))["report"]
    text = (ROOT / GPT3).read_text()
    assert perfcast.predict(text)["report"] == by_path
    import tomllib

    assert perfcast.predict(tomllib.loads(text))["report"] == by_path
    # Several configurations merge in order; overrides as a dict or as keywords.
    h100 = perfcast.predict(GPT3, "preset:h100-sxm5-80gb")
    assert h100["report"]["iteration_time"] < by_path["iteration_time"]
    a = perfcast.predict(GPT3, overrides={"plan.tp": 4, "plan.pp": 32})
    b = perfcast.predict(GPT3, plan__tp=4, plan__pp=32)
    assert a == b and a["plan"]["tp"] == 4 and a["plan"]["pp"] == 32
    # No temporary file is left behind.
    assert not list(ROOT.glob(".perfcast-*"))


def test_errors_are_exceptions_with_the_cli_message():
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(GPT3, plan__tpp=2)
    # The message names the argument that gave the value (test_typed.py has the rest).
    assert "plan.tpp" in e.value.message and "(from plan__tpp=2)" in e.value.message
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict({"model": {"layers": 0}})
    # A dict or TOML text is named as given, not by the temporary file it is read from.
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict(GPT3, {"model": {"layers": "many"}})
    assert "model.layers" in e.value.message and "non-negative integer" in e.value.message
    assert "from the dict given as configuration 2" in e.value.message, e.value.message
    assert ".perfcast-" not in e.value.message
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.load(GPT3, "[plan]\ntp = \"eight\"\n")
    assert "the TOML text given as configuration 2" in e.value.message, e.value.message
    with pytest.raises(FileNotFoundError) as e:
        perfcast.search(GPT3, top=2, overrides=SMALL).to_parquet("/nonexistent/dir/plans.parquet")
    assert "/nonexistent/dir/plans.parquet" in str(e.value)
    with pytest.raises(perfcast.UsageError):
        perfcast.roofline(LLAMA, phase="middle")
    with pytest.raises(perfcast.PluginError) as e:
        perfcast.predict(GPT3, load="no-such-lib.so")
    assert "no-such-lib.so" in e.value.message
    with pytest.raises(perfcast.InfeasibleError) as e:
        perfcast.predict(GPT3, plan__tp=2, plan__pp=1, plan__dp=512)
    assert "does not fit" in e.value.message
    assert e.value.result["memory_per_stage"], "the report of the plan that does not fit"
    assert isinstance(e.value.result, perfcast.TrainingResult)
    with pytest.raises(perfcast.ValidationError):
        perfcast.validate(GPT3)
    with pytest.raises(TypeError):
        perfcast.predict(42)
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.predict("no/such/file.toml")
    assert "no/such/file.toml" in e.value.message


def test_search_serve_validate_give_rows_and_parquet(tmp_path):
    s = perfcast.search(GPT3, top=3, overrides=SMALL)
    assert len(s["plans"]) == 3 and len(s.records()) == 3
    # Parquet needs a writer (pyarrow or polars): test_typed.py tests it when one is there.
    if any(_importable(m) for m in ("pyarrow", "polars")):
        s.to_parquet(tmp_path / "plans.parquet")
        assert (tmp_path / "plans.parquet").read_bytes()[:4] == b"PAR1"
    r = perfcast.serve(SERVING, rates=[2, 8], requests=50)
    rows = r.records()
    assert [x["offered_rate_per_s"] for x in rows] == [2.0, 8.0]
    assert rows[0]["ttft_p90_s"] > 0
    pandas = pytest.importorskip("pandas")
    frame = r.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and list(frame["offered_rate_per_s"]) == [2.0, 8.0]
    assert "<table>" in r._repr_html_()
    v = perfcast.validate(group="narayanan2021-table1")
    # One row per case and metric.
    assert v["summary"] and len(v.records()) == sum(max(1, len(c["metrics"])) for c in v["cases"])


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def test_sweep_rows_are_typed(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(
        f'configs = ["{(ROOT / GPT3).as_posix()}"]\nmode = "evaluate"\n'
        '[grid]\n"components.a100_sxm4_80gb_hbm.bandwidth_tbs" = [1.5, 3.0]\n'
    )
    rows = perfcast.sweep(study)
    assert len(rows) == 2
    assert rows[0]["devices"] == 1024 and isinstance(rows[0]["time_s"], float)
    assert rows[1]["time_s"] <= rows[0]["time_s"]
    frame = rows.to_pandas()
    assert list(frame.columns) == list(rows[0]) and list(frame["time_s"]) == [r["time_s"] for r in rows]
    assert frame["fits"].dtype == bool and frame["devices"].dtype.kind == "i"


def test_calls_from_threads_give_the_same_results():
    want = perfcast.predict(GPT3)["report"]["iteration_time"]
    got = []

    def one():
        got.append(perfcast.predict(GPT3)["report"]["iteration_time"])

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 4


def test_plugins_presets_explain():
    names = {p["name"] for p in perfcast.plugins()}
    assert "tensor" in names or any("tensor" in n for n in names)
    assert "gpt3-175b" in {p.name for p in perfcast.presets()}
    rows = perfcast.explain(GPT3, plan__tp=4)
    tp = next(r for r in rows if r["key"] == "plan.tp")
    assert tp["source"].startswith("--set")


# The golden outputs of tests/golden/ are the command line's (hosts/cli/tests/golden.rs keeps
# them): every one of them, in every format, from Python. A search's counts of work and time
# (its summary's `pruned`, `evaluated`, `seconds`, ...) vary from run to run.
GOLDEN = [
    (command, config.stem)
    for command in ("predict", "infer", "search")
    for config in sorted((ROOT / "tests/golden" / command).glob("*.json"))
]
VARYING = {"pruned", "evaluated", "seconds", "pruned_bound", "plans_per_s", "evaluations_per_s", "threads"}


def masked(command, fmt, text):
    if fmt == "json":
        value = json.loads(text)
        if command == "search":
            value["summary"] = {k: v for k, v in value["summary"].items() if k not in VARYING}
        return value
    if fmt == "table" and command == "search":
        return [l for l in text.splitlines() if "plans enumerated" not in l]
    return text


@pytest.mark.parametrize("command,name", GOLDEN)
@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_every_golden_output_is_what_python_gets(command, name, fmt):
    ext = {"table": "txt"}.get(fmt, fmt)
    want = (ROOT / "tests/golden" / command / f"{name}.{ext}").read_text()
    got = perfcast.run([command, f"configs/experiments/{name}.toml", "--format", fmt])
    assert masked(command, fmt, got) == masked(command, fmt, want)


def test_a_loaded_scenario_gives_the_same_results_as_a_fresh_load():
    sc = perfcast.load(GPT3)
    assert sc.predict() == perfcast.predict(GPT3)
    assert sc.predict(plan__tp=4, plan__pp=32) == perfcast.predict(GPT3, plan__tp=4, plan__pp=32)
    # The overrides of one call do not stay for the next.
    assert sc.predict()["plan"]["tp"] == 8
    assert sc.search(top=2, overrides=SMALL)["plans"] == perfcast.search(GPT3, top=2, overrides=SMALL)["plans"]
    rows = sc.explain(plan__tp=2)
    assert next(r for r in rows if r["key"] == "plan.tp")["source"].startswith("--set")
    with pytest.raises(perfcast.ConfigError):
        sc.predict(plan__tpp=2)
    with pytest.raises(perfcast.ConfigError):
        perfcast.load({"model": {"layers": 0}, "plan": {"tp": 1}})
    serving = perfcast.load(SERVING)
    assert serving.serve(rates=[2], requests=50) == perfcast.serve(SERVING, rates=[2], requests=50)


def test_results_are_built_as_the_json_reads():
    """The native module builds the objects while it reads the JSON: the same values, types
    and key order as ``json.loads`` of the CLI's text."""
    for args in (
        ["predict", GPT3, "--format", "json"],
        ["serve", SERVING, "--rates", "2", "--requests", "50", "--format", "json"],
        ["roofline", LLAMA, "--phase", "decode", "--format", "json"],
    ):
        built, read = perfcast._run_json(args), json.loads(perfcast.run(args))
        assert json.dumps(built) == json.dumps(read), args
    nested = perfcast._native.run_json(["config", "explain", GPT3, "--format", "json"])
    assert isinstance(nested, list) and all(isinstance(r, dict) for r in nested)
