"""`logwatch approve`, `reject` and `reset-breaker`: an operator's word on a relaunch, sent to
the daemon on its control socket. The daemon records who asked (from the socket's
credentials, not from anything the client says) and answers with where the action stands.

Exit codes: 0 done, 1 the daemon refused (the message says why), 3 no daemon answers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from logwatch.core.safe_text.visible import visible

EXIT_DONE, EXIT_REFUSED, EXIT_NO_DAEMON = 0, 1, 3


def operator_request(op: str, socket: Path | None, as_json: bool, **params: Any) -> int:
    """Send one of the operator's requests and print the answer."""
    from logwatch.daemon import client
    from logwatch.daemon.config_file import default_socket_path

    path = socket or default_socket_path()
    try:
        answer = asyncio.run(client.request(path, op, **params))
    except client.ProtocolMismatch as exc:
        return _said(as_json, EXIT_NO_DAEMON, {"ok": False, "error": str(exc)})
    except client.PermissionDenied as exc:  # a daemon runs and does not let us in
        return _said(as_json, EXIT_REFUSED, {"ok": False, "denied": True, "error": str(exc)})
    except (OSError, TimeoutError, ValueError) as exc:
        return _said(as_json, EXIT_NO_DAEMON, {
            "ok": False, "error": f"{exc}; actions are approved, rejected and reset "
                                  "through the daemon that proposed them"})
    if not answer.get("ok"):
        return _said(as_json, EXIT_REFUSED, answer)
    return _said(as_json, EXIT_DONE, answer)


def _said(as_json: bool, code: int, answer: dict[str, Any]) -> int:
    if as_json:
        sys.stdout.write(json.dumps(answer, indent=2, default=str) + "\n")
        return code
    if not answer.get("ok"):
        print(visible(f"logwatch: {answer.get('error')}", lines=True), file=sys.stderr)
    elif "was_open" in answer:
        print(visible(f"breaker of {answer['target']} "
                      + ("reset: its blocked actions are decided again" if answer["was_open"]
                         else "was not open; the reset is recorded"), lines=True))
    else:
        print(visible(f"action {answer['id']}: {answer['state'].replace('_', ' ')} "
                      f"({answer['reason']})", lines=True))
    return code
