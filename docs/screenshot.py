"""Render `logwatch scan` of the demo sample with its model directory, in colour, to
docs/scan-demo.svg for the README: the summary line and the DIAGNOSIS section.

    .venv/bin/python docs/screenshot.py
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.core.report.text import render_text  # noqa: E402
from logwatch.library.files import load_signature_dirs  # noqa: E402
from logwatch.scan.offline import resolve_inputs, scan_inputs  # noqa: E402
from logwatch.scan.triage import SnapshotOptions  # noqa: E402


def main() -> None:
    sample = ROOT / "samples" / "logs" / "demo_marlin_and_mtp.log"
    model = ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4-mtp-uncovered"
    options = SnapshotOptions(model_dir=str(model.relative_to(ROOT)), gpu_capability=90)
    report = scan_inputs(resolve_inputs([str(sample.relative_to(ROOT))]), load_signature_dirs(),
                         snapshot_options=options)
    lines = render_text(report, colour=True, width=96).splitlines()
    start = next(i for i, ln in enumerate(lines) if "DIAGNOSIS" in ln)
    end = next(i for i, ln in enumerate(lines) if "OTHER PROBLEMS" in ln)
    top = "\n".join(lines[:3] + lines[start:end - 1])  # the summary and the diagnosis
    console = Console(record=True, width=112, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(Text.from_ansi(top), no_wrap=True, overflow="ellipsis", crop=True)
    console.save_svg(str(ROOT / "docs" / "scan-demo.svg"),
                     title="logwatch scan demo_marlin_and_mtp.log --model-dir qwen3.6-…-uncovered"
                           " --gpu-capability 9.0")


if __name__ == "__main__":
    main()
