"""Render `logwatch scan` of the demo sample, in colour, to docs/scan-demo.svg for the README.

    .venv/bin/python docs/screenshot.py
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
SHOWN_LINES = 26
sys.path.insert(0, str(ROOT))

from logwatch.core.report import render_text  # noqa: E402
from logwatch.scan import resolve_inputs, scan_inputs  # noqa: E402
from logwatch.signature_files import load_signature_dirs  # noqa: E402


def main() -> None:
    sample = ROOT / "samples" / "logs" / "demo_marlin_and_mtp.log"
    report = scan_inputs(resolve_inputs([str(sample.relative_to(ROOT))]), load_signature_dirs())
    text = render_text(report, colour=True, width=96)
    top = "\n".join(text.splitlines()[:SHOWN_LINES])  # the summary and the root cause
    console = Console(record=True, width=168, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(Text.from_ansi(top), no_wrap=True, overflow="ellipsis", crop=True)
    console.save_svg(str(ROOT / "docs" / "scan-demo.svg"),
                     title="logwatch scan samples/logs/demo_marlin_and_mtp.log")


if __name__ == "__main__":
    main()
