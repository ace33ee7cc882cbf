"""Build logwatch.core.signatures._speedups (its `_speedups.c`) with the C compiler Python was
built with.

It is an accelerator, not a requirement: where no compiler or no Python headers are at hand
the build says so and goes on, and logwatch runs its pure-Python path (same results, slower;
`logwatch scan --json` says `"speedups": false` in its stats). An editable install
(`make test`, `make demo`) builds it beside the sources; a wheel carries it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("logwatch") / "core" / "signatures" / "_speedups.c"


def build_speedups(root: Path) -> Path | None:
    """Compile the extension into the package directory; its path, or None (and why, on
    stderr) where it cannot be built."""
    source = root / SOURCE
    target = source.with_name("_speedups" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    if os.environ.get("LOGWATCH_NO_SPEEDUPS"):
        target.unlink(missing_ok=True)
        print("logwatch: LOGWATCH_NO_SPEEDUPS is set: the pure-Python path only",
              file=sys.stderr)
        return None
    # the compiler Python was built with, unless CC names another (as setuptools does)
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    command = [*compiler, "-O3", "-shared", "-fPIC", "-fvisibility=hidden",
               "-Wall", "-Werror=implicit-function-declaration",
               f"-I{include}", str(source), "-o", str(target)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"logwatch: the C speedups were not built ({error}); the pure-Python path "
              "runs instead", file=sys.stderr)
        target.unlink(missing_ok=True)  # never one built from older sources
        return None
    if done.returncode != 0:
        print(f"logwatch: the C speedups were not built ({shlex.join(command)} failed: "
              f"{done.stderr.strip()[-600:]}); the pure-Python path runs instead",
              file=sys.stderr)
        target.unlink(missing_ok=True)
        return None
    return target


class SpeedupsHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":  # an sdist carries the source, never a binary
            return
        built = build_speedups(Path(self.root))
        if built is None or version == "editable":
            return  # an editable install imports it from the source tree
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["force_include"][str(built)] = str(built.relative_to(self.root))
