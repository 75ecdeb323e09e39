"""Python results equal the perfcast executable's for every shipped experiment and serving
config (predict, infer, serve: the JSON, or the same error) and every study (the CSV files).
The executable is the release build `run-tests.sh` makes (or $PERFCAST_BIN)."""

import json
import os
import pathlib
import subprocess

import pytest

import perfcast

ROOT = pathlib.Path(__file__).resolve().parents[3]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BIN = pathlib.Path(os.environ.get("PERFCAST_BIN", TARGET / "release/perfcast"))
#: Wall-clock fields, the only ones that differ between two runs.
VARYING = {"seconds", "plans_per_s", "evaluations_per_s", "threads"}


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def cli(*args):
    assert BIN.is_file(), f"no perfcast executable at {BIN}: run hosts/python/run-tests.sh"
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def masked(v):
    if isinstance(v, dict):
        return {k: masked(x) for k, x in v.items() if k not in VARYING}
    if isinstance(v, list):
        return [masked(x) for x in v]
    return v


CASES = [
    (command, c.relative_to(ROOT).as_posix(), extra)
    for command, folder, extra in [
        ("predict", "experiments", {}),
        ("infer", "experiments", {}),
        ("infer", "serving", {}),
        ("serve", "serving", {"requests": 100}),
    ]
    for c in sorted((ROOT / "configs" / folder).glob("*.toml"))
]


@pytest.mark.parametrize("command,config,extra", CASES)
def test_every_shipped_config_gives_the_cli_json_or_its_error(command, config, extra):
    flags = [x for k, v in extra.items() for x in (f"--{k}", str(v))]
    o = cli(command, config, *flags, "--format", "json")
    call = getattr(perfcast, command)
    if o.returncode == 0:
        assert masked(call(config, **extra).to_dict()) == masked(json.loads(o.stdout))
    else:
        with pytest.raises(perfcast.PerfcastError) as e:
            call(config, **extra)
        said = o.stderr[o.stderr.index("error: ") + len("error: "):].rstrip("\n")
        # The same message, the options it names spoken as Python arguments (`--requests`
        # as `requests=`: test_typed.py).
        assert e.value.message == perfcast._speak_python(said, {})


def test_python_covers_every_shipped_config():
    assert len([c for c in CASES if c[0] == "predict"]) >= 8
    assert len([c for c in CASES if c[0] == "serve"]) >= 4


@pytest.mark.parametrize("name", [s["study"] for s in perfcast.studies()])
def test_every_study_gives_the_cli_files(name, tmp_path):
    o = cli("study", name, "--out", str(tmp_path / "cli"))
    assert o.returncode == 0, o.stderr
    rows = perfcast.study(name, out=tmp_path / "py")
    for ext in ("csv", "svg", "md"):
        assert (tmp_path / "py" / f"{name}.{ext}").read_text() == (
            tmp_path / "cli" / f"{name}.{ext}"
        ).read_text(), ext
    assert rows.path == str(tmp_path / "py" / f"{name}.csv")
    assert rows.to_csv() == (tmp_path / "cli" / f"{name}.csv").read_text()
    assert len(rows) >= 3 and rows.summary.strip()
    # Without `out`, nothing is left behind.
    again = perfcast.study(name)
    assert again.path is None and again.to_csv() == rows.to_csv()


def test_studies_list_and_calibrate():
    names = [s["study"] for s in perfcast.studies()]
    assert names[:2] == ["memory-vs-recompute", "a100-to-b200"]
    assert names[-1] == "moe-ep-placement" and len(names) == 7
    assert all(s["config"] and s["what"] for s in perfcast.studies())
    with pytest.raises(perfcast.PerfcastError):
        perfcast.study("no-such-study")
    param = "options.step_overhead_us=0..1000"
    c = perfcast.calibrate(params=[param], cv=["none"], serving="exclude")
    o = cli("calibrate", "--param", param, "--cv", "none", "--exclude-serving", "--format", "json")
    assert o.returncode == 0, o.stderr
    assert masked(c.to_dict()) == masked(json.loads(o.stdout))
    assert c["serving"] == "exclude"
    assert list(c["params"]) == ["options.step_overhead_us"]
    # A fit that does not converge: the error, with what was printed before it.
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.calibrate(max_evals=20, cv=["none"], exclude_serving=True)
    assert "did not converge" in e.value.message and e.value.output.startswith("{")
