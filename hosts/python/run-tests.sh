#!/usr/bin/env bash
# The Python package's tests: a virtual environment of pinned packages (under the cargo target
# directory), the package built from this workspace by maturin (release, abi3 wheel), then
# pytest with a deadline per test (against the release perfcast executable, built here too).
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
"${pip[@]}" install maturin==1.9.4 pytest==8.3.4 pytest-timeout==2.4.0 pandas==2.2.3 numpy==2.4.6 ray==2.40.0 matplotlib==3.10.0 pyparsing==3.2.1
"${pip[@]}" install --no-build-isolation --force-reinstall --no-deps .
# The executable the parity tests compare with (tests/test_parity.py).
cargo build --quiet --release -p perfcast-cli --bin perfcast
# Every test has a deadline (pytest-timeout): a hung test fails with its traceback, in 10 min.
"$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout=600 tests
