"""Sweeps on Ray (a local Ray of 2 CPUs: the tests' machines have no network beyond the
package registries), the package's command line (`python -m perfcast`), and plugin
libraries loaded from Python, isolated or not."""

import os
import pathlib
import subprocess
import sys

import pytest

import perfcast
from perfcast.distributed import RayExecutor

ROOT = pathlib.Path(__file__).resolve().parents[3]
GPT3 = (ROOT / "configs/experiments/gpt3-175b-a100.toml").as_posix()
INCLUDE = ROOT / "crates/perfcast-abi/include"


@pytest.fixture(scope="module")
def ray():
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def write_sweep(dir, body, name="s.toml"):
    p = dir / name
    p.write_text(f'configs = ["{GPT3}"]\n{body}')
    return p


def grid(n_bw, n_flops):
    """An evaluate sweep of n_bw x n_flops A100 variants (HBM bandwidth x bf16 peak)."""
    bw = ", ".join(f"{1.0 + 0.02 * i:.2f}" for i in range(n_bw))
    fl = ", ".join(f"{200.0 + 3 * i:.1f}" for i in range(n_flops))
    return (
        'mode = "evaluate"\n[grid]\n'
        f'"components.a100_sxm4_80gb_hbm.bandwidth_tbs" = [{bw}]\n'
        f'"components.a100_sxm4_80gb.matrix_tflops.fp16" = [{fl}]\n'
    )


def timeless(rows):
    """Rows without the points' wall times (the only column that differs between runs)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_a_ray_sweep_gives_the_local_rows(ray, tmp_path):
    study = write_sweep(tmp_path, grid(10, 100))
    local = perfcast.sweep(study)
    assert len(local) == 1000
    seen = []
    dist = perfcast.sweep(
        study, executor="ray", out=tmp_path / "out", progress=lambda d, n: seen.append((d, n))
    )
    assert timeless(dist) == timeless(local)
    # The chunks came back in order (4 per CPU by default), and the file is the rows.
    assert [n for _, n in seen] == [1000] * 8 and seen[-1][0] == 1000
    assert seen == sorted(seen)
    assert dist.path == str(tmp_path / "out" / "s.csv")
    assert pathlib.Path(dist.path).read_text() == dist.to_csv()
    # Parquet through the same rows.
    pq = perfcast.sweep(study, executor=RayExecutor(chunk_size=300), out=tmp_path / "out",
                        format="parquet")
    assert pathlib.Path(pq.path).read_bytes()[:4] == b"PAR1"
    assert timeless(pq) == timeless(local)


def test_a_chunk_whose_worker_dies_runs_again(ray, tmp_path):
    study = write_sweep(tmp_path, grid(2, 6))
    marks = tmp_path / "marks"
    marks.mkdir()

    class Dying(RayExecutor):
        """Kills its worker process the first time it meets each chunk."""

        def run_chunk(self, args):
            mark = marks / args[args.index("--points") + 1]
            if not mark.exists():
                mark.touch()
                os._exit(9)
            return super().run_chunk(args)

    rows = perfcast.sweep(study, executor=Dying(chunk_size=4))
    assert timeless(rows) == timeless(perfcast.sweep(study))
    assert sorted(m.name for m in marks.iterdir()) == ["0..4", "4..8", "8..12"]
    # Without retries the dead worker fails the sweep, naming the chunk.
    for m in marks.iterdir():
        m.unlink()
    with pytest.raises(perfcast.PerfcastError) as e:
        perfcast.sweep(study, executor=Dying(chunk_size=4, max_retries=0))
    assert "the chunk of points 0..4 failed on Ray" in e.value.message


def test_a_failing_point_fails_the_ray_sweep_with_perfcast_s_error(ray, tmp_path):
    study = write_sweep(tmp_path, '[grid]\n"search.memory_headroom" = [0.0, 0.99]\n')
    with pytest.raises(perfcast.PerfcastError) as local:
        perfcast.sweep(study)
    with pytest.raises(type(local.value)) as e:
        perfcast.sweep(study, executor=RayExecutor(chunk_size=1))
    assert "point 2" in e.value.message and e.value.message == local.value.message
    bad = write_sweep(tmp_path, '[grid]\n"plan.tpp" = [1]\n', "bad.toml")
    with pytest.raises(perfcast.ConfigError) as e:
        perfcast.sweep(bad, executor="ray")
    assert "did you mean" in e.value.message


def test_bad_executors_and_no_ray(tmp_path):
    study = write_sweep(tmp_path, grid(1, 2))
    with pytest.raises(perfcast.UsageError):
        perfcast.sweep(study, executor="dask")
    with pytest.raises(perfcast.UsageError):
        perfcast.sweep(study, format="xlsx")
    for bad in [dict(chunk_size=0), dict(max_retries=-1), dict(cpus_per_task=0)]:
        with pytest.raises(ValueError):
            RayExecutor(**bad)
    # Without Ray (an interpreter where `import ray` fails): how to install it.
    code = (
        "import sys; sys.modules['ray'] = None; import perfcast\n"
        "try:\n    perfcast.sweep(sys.argv[1], executor='ray')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    o = subprocess.run(
        [sys.executable, "-c", code, str(study)], capture_output=True, text=True, timeout=300
    )
    assert o.returncode == 0 and "pip install 'ray==" in o.stdout, o.stdout + o.stderr
    # The same from the command line (a `ray` module that cannot be imported first on the path).
    (tmp_path / "ray.py").write_text("raise ImportError('No module named ray')\n")
    o = python_m("sweep", study, "--ray", env={"PYTHONPATH": str(tmp_path)})
    assert o.returncode == 1 and "error: executor=\"ray\" needs Ray" in o.stderr, o.stderr


def python_m(*args, cwd=ROOT, env=None):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "perfcast", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def test_python_m_perfcast_is_the_command_line(ray, tmp_path):
    o = python_m("predict", GPT3, "--format", "json")
    assert o.returncode == 0, o.stderr
    assert o.stdout == perfcast.run(["predict", GPT3, "--format", "json"])
    o = python_m("predict", GPT3, "--set", "plan.tpp=2")
    assert o.returncode == 1 and "error:" in o.stderr and "plan.tpp" in o.stderr
    assert python_m("predict", "--bogus").returncode == 2
    # A sweep on the Ray this test runs (`--ray auto`).
    study = write_sweep(tmp_path, grid(2, 3))
    o = python_m("sweep", study, "--ray", "auto", "--out", tmp_path / "o", "--chunk-size", "2")
    assert o.returncode == 0, o.stderr
    assert o.stdout.startswith(f"wrote {tmp_path / 'o' / 's.csv'} (6 points)")
    assert timeless(perfcast.sweep(study)) == timeless(
        perfcast.Rows((tmp_path / "o" / "s.csv").read_text())
    )
    o = python_m("sweep", write_sweep(tmp_path, '[grid]\n"plan.tpp" = [1]\n', "b.toml"),
                 "--ray", "auto")
    assert o.returncode == 1 and "\nerror: " in "\n" + o.stderr and "plan.tpp" in o.stderr


CRASH = r"""
#include "perfcast_plugin.h"
#include <stdlib.h>
static int create(const char *json, void **out, char *err, size_t cap) {
    (void)json; (void)err; (void)cap; *out = (void *)1; return PERFCAST_OK;
}
static int32_t peak(const void *self, uint32_t engine, uint32_t dtype, double *out, char *err,
                    size_t cap) {
    (void)self; (void)engine; (void)dtype; (void)err; (void)cap; *out = 1e14; return PERFCAST_OK;
}
static int32_t efficiency(const void *self, const perfcast_op *op, double *out, char *err,
                          size_t cap) {
    (void)self; (void)op; (void)err; (void)cap;
    *(volatile int *)0 = 1;
    *out = 0.5; return PERFCAST_OK;
}
static const perfcast_compute_unit_vtable vt = {
    .struct_size = sizeof(perfcast_compute_unit_vtable), .peak = peak, .efficiency = efficiency,
};
static const perfcast_component comp = {
    .struct_size = sizeof(perfcast_component), .category = PERFCAST_CATEGORY_COMPUTE_UNIT,
    .name = "crash/dev", .description = "crashes in efficiency", .create = create,
    .vtable = &vt,
};
static const perfcast_component *const comps[] = {&comp};
static const perfcast_plugin plugin = {
    .struct_size = sizeof(perfcast_plugin), .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR, .n_components = 1, .name = "crash",
    .version = "0.0.1", .components = comps,
};
const perfcast_plugin *perfcast_plugin_entry_v1(void) { return &plugin; }
"""

CRASH_CONFIG = {
    "components": {
        "dev": {"kind": "crash/dev"},
        "mem": {"kind": "hbm", "capacity_gb": 80.0, "bandwidth_tbs": 2.0},
    },
    "device": {"compute": "dev", "memory": ["mem"]},
    "ops": [{"name": "g", "op": "gemm", "m": 1024, "n": 1024, "k": 1024, "dtype": "bf16"}],
}


def cc(tmp_path, name, source=None, path=None):
    out = tmp_path / f"lib{name}.so"
    if source is not None:
        path = tmp_path / f"{name}.c"
        path.write_text(source)
    cmd = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-I", INCLUDE, path, "-o", out, "-lm"]
    subprocess.run([str(c) for c in cmd], check=True, timeout=300)
    return out


def test_plugins_load_from_python_in_process_isolated_and_on_ray(ray, tmp_path):
    lib = cc(tmp_path, "c_vendor", path=ROOT / "plugins/examples/c-vendor/c_vendor.c")
    (tmp_path / "plan.toml").write_text(
        'include = ["preset:megatron-gpt-1.7b"]\n'
        "[plan]\ntp = 8\npp = 1\ndp = 1\nmicro_batch = 1\nglobal_batch = 8\n"
    )
    study = tmp_path / "s.toml"
    study.write_text(
        f'configs = ["{(ROOT / "configs/examples/c-vendor.toml").as_posix()}", "plan.toml"]\n'
        'mode = "evaluate"\n[grid]\n"components.dsp1.bf16_tflops" = [25.0, 50.0, 100.0]\n'
    )
    plugin = perfcast.load_plugin(lib)
    assert {c["name"] for c in plugin.components} == {"cvendor/dsp1", "cvendor/lpddr", "cvendor/ring"}
    rows = timeless(perfcast.sweep(study, load=plugin))
    assert len(rows) == 3 and rows[2]["time_s"] < rows[0]["time_s"]
    import hashlib

    pin = hashlib.sha256(lib.read_bytes()).hexdigest()
    isolated = perfcast.load_plugin(lib, sha256=pin, isolate=True)
    assert timeless(perfcast.sweep(study, load=isolated)) == rows
    # Ray tasks get the library by path and pin, from Python and from the command line.
    assert timeless(perfcast.sweep(study, load=isolated, executor="ray")) == rows
    o = python_m("sweep", study, "--ray", "auto", "--load", lib, "--sha256", pin, "--isolate")
    assert o.returncode == 0, o.stderr
    assert timeless(perfcast.Rows(o.stdout)) == rows
    o = python_m("sweep", study, "--ray", "auto", "--load", lib, "--sha256", "0" * 64)
    assert o.returncode == 1 and "sha256" in o.stderr, o.stderr
    with pytest.raises(perfcast.PluginError) as e:
        perfcast.load_plugin(lib, sha256="0" * 64)
    assert "sha256" in e.value.message
    with pytest.raises(perfcast.PluginError):
        perfcast.load_plugin(tmp_path / "plan.toml")


def test_a_crashing_isolated_plugin_is_a_plugin_error(tmp_path):
    lib = cc(tmp_path, "crash", source=CRASH)
    plugin = perfcast.load_plugin(lib, isolate=True, timeout=5)
    with pytest.raises(perfcast.PluginError) as e:
        perfcast.roofline(CRASH_CONFIG, load=plugin)
    assert "SIGSEGV" in e.value.message and str(lib) in e.value.message
    # The interpreter is still here, and so is perfcast.
    assert perfcast.predict(GPT3)["report"]["mfu"] > 0
