"""The command on a terminal (issue 44): a table wider than the terminal is written as a
record per row, one that fits keeps its columns, and piped output keeps its columns whatever
the width; a command that works for over a second shows it on standard error. The terminal is a pseudo-terminal of a set size (the standard library's ``pty``).

The executable is the release build `run-tests.sh` makes (or $PERFCAST_BIN)."""

import fcntl
import os
import pathlib
import pty
import struct
import subprocess
import termios

ROOT = pathlib.Path(__file__).resolve().parents[3]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BIN = pathlib.Path(os.environ.get("PERFCAST_BIN", TARGET / "release/perfcast"))


def on_terminal(args, columns, stderr=False):
    """Run ``perfcast args`` with standard output (or, with ``stderr``, standard error) on a
    terminal of ``columns`` columns; what the terminal shows."""
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    out, err = (subprocess.DEVNULL, sub) if stderr else (sub, subprocess.DEVNULL)
    p = subprocess.Popen([str(BIN), *args], stdout=out, stderr=err, cwd=ROOT)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:  # the terminal closes when the command exits
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert p.wait(timeout=60) == 0
    return out.decode().replace("\r\n", "\n")


def test_wide_tables_become_records_on_a_narrow_terminal():
    narrow = on_terminal(["plugins"], 100)
    assert narrow.startswith("-[ row 1 ]")
    assert "name         gpu\n" in narrow
    assert all(len(line) <= 100 or line.startswith("description") for line in narrow.splitlines())
    wide = on_terminal(["plugins"], 400)
    assert wide.startswith("category") and "-[ row" not in wide
    piped = subprocess.run(
        [str(BIN), "plugins"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert piped.startswith("category") and "-[ row" not in piped


def test_a_long_command_shows_it_is_working_on_a_terminal():
    # A deployment search of DeepSeek-R1 on GB200 NVL72: about 4 s on 2 cores.
    shown = on_terminal(["search", "configs/serving/deepseek-r1-gb200-nvl72-search.toml"], 120, True)
    assert "searching deployments" in shown
    piped = subprocess.run(
        [str(BIN), "search", "configs/serving/llama3.1-70b-dgx-h100-search.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "searching" not in piped.stderr
