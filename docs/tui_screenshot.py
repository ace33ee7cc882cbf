"""Picture the TUI's dashboard for the README, from the real app over a real daemon: the
demo's stand-in vLLM run under `logwatch run --relaunch ask` fails its first launch, and the
picture is taken when the plan waits for the operator (root cause, diagnosis, the plan as a
diff, Approve/Reject in the footer). Writes docs/tui-dashboard.svg and, with rsvg-convert
(librsvg2-bin), docs/tui-dashboard.png.

    .venv/bin/python docs/tui_screenshot.py
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logwatch.daemon.client import wait_ready  # noqa: E402
from logwatch.demo.live import start_run  # noqa: E402
from logwatch.demo.scenario import workspace  # noqa: E402
from logwatch.tui.app import LogwatchApp  # noqa: E402
from logwatch.tui.state import LIVE  # noqa: E402

SIZE = (120, 34)


async def picture(root: Path) -> str:
    ws = workspace(root)
    run, sock = start_run(ws, "b200", "ask")
    try:
        await wait_ready(sock, 30, alive=lambda: run.poll() is None)
        app = LogwatchApp(sock, ws["db"])
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(1200):
                if (app.connection.kind == LIVE and app.board.plan is not None
                        and app.board.incidents and app.can_act):
                    break
                await pilot.pause(0.05)
            else:
                raise SystemExit("the plan never waited for approval")
            await pilot.pause(1.0)  # the activity and the footer settle
            return app.export_screenshot(title="logwatch tui")
    finally:
        run.send_signal(signal.SIGINT)
        try:
            run.wait(30)
        except subprocess.TimeoutExpired:
            run.kill()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="logwatch-") as tmp:
        svg = asyncio.run(picture(Path(tmp) / "demo"))
    out = ROOT / "docs" / "tui-dashboard.svg"
    out.write_text(svg)
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print(f"wrote {out}; no rsvg-convert for the PNG (apt-get install librsvg2-bin)")
        return 0
    png = out.with_suffix(".png")
    subprocess.run([converter, "--zoom", "1", str(out), "-o", str(png)], check=True)
    print(f"wrote {out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
