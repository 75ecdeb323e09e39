"""The plugin host of isolated libraries when perfcast runs inside Python: the interpreter
started as ``python -m perfcast._plugin_host PATH [--sha256 HEX]`` serves one library as
``perfcast plugin-host`` does (the package points perfcast's isolation at this module, since
the process's executable is Python, not perfcast)."""

import sys

from . import _native

if __name__ == "__main__":
    sys.exit(_native.main(["perfcast", "plugin-host", *sys.argv[1:]]))
