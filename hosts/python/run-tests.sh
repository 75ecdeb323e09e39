#!/usr/bin/env bash
# The Python package's tests: a virtual environment of pinned packages (under the cargo target
# directory), the package built from this workspace by maturin (release, abi3 manylinux
# wheel), the wheel installed offline into a fresh virtual environment and its `perfcast`
# command run, then pytest with a deadline per test against the wheel (and the release
# perfcast executable, built here too).
# Needs only python3 (3.9 or newer, with venv), a C compiler (the plugin tests) and the packages
# of PyPI.
set -euo pipefail
cd "$(dirname "$0")"
root="$(cd ../.. && pwd)"
venv="${CARGO_TARGET_DIR:-$root/target}/python-venv"
python3 -m venv "$venv"
# The build backend runs the venv's `maturin` executable.
export PATH="$venv/bin:$PATH"
pip=("$venv/bin/pip" --quiet --disable-pip-version-check --no-cache-dir)
"${pip[@]}" install maturin==1.9.4 pytest==8.3.4 pytest-timeout==2.4.0 pandas==2.2.3 numpy==2.4.6 ray==2.40.0 matplotlib==3.10.0 pyparsing==3.2.1 pyarrow==26.0.1 polars==2.2.0 mypy==2.4.1
# The wheel as a user gets it: release, abi3, tagged manylinux by the glibc symbols it uses
# (maturin's audit), with the `perfcast` command and the presets (the shipped experiments
# among them) inside.
wheels="${CARGO_TARGET_DIR:-$root/target}/wheels"
rm -rf "$wheels"
"$venv/bin/maturin" build --release --quiet --out "$wheels"
wheel=("$wheels"/perfcast-*-abi3-manylinux_*.whl)
[ -f "${wheel[0]}" ] || { echo "no manylinux abi3 wheel in $wheels" >&2; exit 1; }
# Installed offline into a fresh virtual environment, its command runs a shipped experiment
# from outside the repository.
fresh="${CARGO_TARGET_DIR:-$root/target}/python-fresh"
rm -rf "$fresh"
python3 -m venv "$fresh"
"$fresh/bin/pip" --quiet --disable-pip-version-check install --no-index --no-deps "${wheel[0]}"
out="$(cd / && "$fresh/bin/perfcast" predict preset:gpt3-175b-a100 --format json)"
case "$out" in *'"iteration_time"'*) ;; *) echo "the wheel's perfcast command failed: $out" >&2; exit 1 ;; esac
(cd / && "$fresh/bin/python" -c "import perfcast; r = perfcast.predict('preset:llama3-8b-h100'); print('wheel: a typed predict,', type(r).__name__, r.iteration_time_s, 's')")
rm -rf "$fresh"
# The tests run against the same wheel.
"${pip[@]}" install --force-reinstall --no-deps "${wheel[0]}"
# The executable the parity tests compare with (tests/test_parity.py).
cargo build --quiet --release -p perfcast-cli --bin perfcast
# Every test has a deadline (pytest-timeout): a hung test fails with its traceback, in 10 min.
"$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout=600 tests
