"""Only the operator decides: a real daemon run by root, and real local users of their own
(made with useradd for the module, removed after): a member of `socket.group` (a reader), a
member of `socket.operators_group` (an operator) and a user in neither (an outsider). Each
request is checked against the trust table, one user's connections cannot lock root out, an
idle connection is closed, an export directory another user controls is refused, an outsider
is told "permission denied" and who may connect, and `logwatch run` takes [socket] too."""

from __future__ import annotations

import asyncio
import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logwatch.daemon.client import request, wait_ready
from tests.conftest import ROOT, SAMPLES
from tests.following import Running, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="making users needs root")]


@dataclass(frozen=True)
class Users:
    readers: str  # socket.group
    operators: str  # socket.operators_group
    reader: str
    operator: str  # in both groups: the socket's file is the readers' group
    outsider: str


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def users() -> Iterator[Users]:
    """Two groups and three users of this test's own; skipped where users cannot be made."""
    if not all(shutil.which(t) for t in ("useradd", "userdel", "groupadd", "groupdel",
                                         "setpriv")):
        pytest.skip("useradd, groupadd or setpriv is not installed")
    tag = f"lw{os.getpid() % 100000}"
    made = Users(f"{tag}r", f"{tag}o", f"{tag}ru", f"{tag}ou", f"{tag}xu")
    groups: list[str] = []
    people: list[str] = []
    try:
        for group in (made.readers, made.operators):
            done = _run("groupadd", group)
            if done.returncode != 0:
                pytest.skip(f"groupadd cannot make a group here: {done.stderr.strip()}")
            groups.append(group)
        for name, member in ((made.reader, made.readers),
                             (made.operator, f"{made.operators},{made.readers}"),
                             (made.outsider, "")):
            done = _run("useradd", "-M", "-N", "-s", "/usr/sbin/nologin",
                        *(["-G", member] if member else []), name)
            if done.returncode != 0:
                pytest.skip(f"useradd cannot make a user here: {done.stderr.strip()}")
            people.append(name)
        probe = _as(made.reader, "-c", "import logwatch.daemon.client")
        if probe.returncode != 0:
            pytest.skip(f"a new user cannot run {sys.executable} on {ROOT}: {probe.stderr}")
        yield made
    finally:
        for name in people:
            _run("userdel", name)
        for group in groups:
            _run("groupdel", group)


def _as_argv(user: str) -> list[str]:
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/nonexistent",
            "LOGWATCH_CONFIG": "/nonexistent/logwatch.toml"}


def _as(user: str, *python_args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_as_argv(user), sys.executable, *python_args], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def _logwatch_as(user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _as(user, "-m", "logwatch", *args)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory everyone can reach (tmp_path is root's alone), sticky and world-writable
    as /tmp is."""
    path = Path(tempfile.mkdtemp(prefix="logwatch-trust-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _config(shared: Path, users: Users, extra: str = "", idle: float = 1) -> Path:
    config = shared / "root-only" / "logwatch.toml"
    config.parent.mkdir(mode=0o755)
    config.write_text(f'[socket]\ngroup = "{users.readers}"\noperators_group = '
                      f'"{users.operators}"\nidle_seconds = {idle}\n{extra}')
    return config


def _socket_dir(shared: Path) -> Path:
    run = shared / "run"
    run.mkdir()
    run.chmod(0o755)  # as the shipped unit's /run/logwatch: the socket's mode keeps others out
    return run / "lw.sock"


@pytest.fixture
def daemon(shared: Path, users: Users) -> Iterator[Running]:
    """Root's daemon following a log, with [socket] groups and an [export] directory that
    the outsider planted as a link to a directory of their own."""
    outsider = pwd.getpwnam(users.outsider)
    theirs = shared / "theirs"
    theirs.mkdir()
    os.chown(theirs, outsider.pw_uid, outsider.pw_gid)
    planted = _as(users.outsider, "-c", f"import os; os.symlink({str(theirs)!r}, "
                                        f"{str(shared / 'fleet')!r})")
    assert planted.returncode == 0, planted.stderr
    log = shared / "root-only" / "vllm.log"
    config = _config(shared, users, f'[export]\ndir = "{shared / "fleet"}"\n')
    log.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
    running = Running("--config", str(config), "--file", str(log), "--db",
                      str(shared / "root-only" / "h.duckdb"), sock=_socket_dir(shared))
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


_ASK = """
import asyncio, json, sys
from pathlib import Path
from logwatch.daemon.client import request
op, params = sys.argv[2], json.loads(sys.argv[3])
print(json.dumps(asyncio.run(request(Path(sys.argv[1]), op, **params))))
"""


def _ask_as(user: str, sock: Path, op: str, **params: object) -> dict[str, object]:
    done = _as(user, "-c", _ASK, str(sock), op, json.dumps(params))
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_only_root_and_the_operators_group_approve_reject_or_reset(
        daemon: Running, users: Users) -> None:
    """A reader reads and reloads, and is refused the operator's requests with who may; an
    operator's approve reaches the daemon's relaunches (none here: no policy is ask)."""
    sock = daemon.sock
    for op, params in (("approve", {"id": "a1"}), ("reject", {"id": "a1"}),
                       ("reset_breaker", {"target": "qwen"})):
        answer = _ask_as(users.reader, sock, op, **params)
        assert answer["ok"] is False and answer.get("denied") is True, answer
        assert str(answer["error"]).startswith("permission denied"), answer
        assert f"members of group {users.operators} may {op}" in str(answer["error"])
        assert users.reader in str(answer["error"])
        theirs = _ask_as(users.operator, sock, op, **params)
        assert theirs["ok"] is False and "denied" not in theirs, theirs
        assert "policy is ask or auto" in str(theirs["error"])
    for op in ("status", "signatures", "reload"):
        assert _ask_as(users.reader, sock, op)["ok"] is True, op
    cli = _logwatch_as(users.reader, "approve", "a1", "--socket", str(sock))
    assert cli.returncode == 1 and "permission denied" in cli.stderr, cli.stderr
    assert "no daemon" not in cli.stderr


_HOLD = """
import asyncio, json, sys
async def main():
    held, answers = [], []
    for _ in range(int(sys.argv[2])):
        reader, writer = await asyncio.open_unix_connection(sys.argv[1])
        try:
            writer.write(b'{"op": "subscribe", "events": ["library"]}\\n')
            answers.append(json.loads(await reader.readline()))
        except (ConnectionError, ValueError) as exc:  # turned away before it asked
            answers.append({"ok": False, "error": repr(exc)})
        held.append(writer)
    print(json.dumps(answers), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


def test_one_users_connections_never_lock_root_out(daemon: Running, users: Users) -> None:
    """70 subscriptions (never idle) from one reader: 16 held, the others refused as busy
    for that user; root still connects while they are held."""
    holder = subprocess.Popen([*_as_argv(users.reader), sys.executable, "-c", _HOLD,
                               str(daemon.sock), "70"], cwd=ROOT, env=_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        answers = json.loads(holder.stdout.readline() or "null")
        assert answers is not None, holder.stderr.read() if holder.stderr else ""
        held = [a for a in answers if a.get("ok")]
        busy = [a for a in answers if not a.get("ok")]
        assert len(held) == 16 and len(busy) == 54, answers[:20]
        assert "connections open (the most for one user)" in busy[0]["error"]
        answer = asyncio.run(request(daemon.sock, "status", timeout=10))
        assert answer["ok"] is True, answer
    finally:
        holder.kill()
        holder.wait(timeout=30)


_IDLE = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op": "hello"}\\n')
s.settimeout(30)
began = time.monotonic()
data = b""
while b"\\n" not in data:
    data += s.recv(65536)
closed = s.recv(65536)  # asks nothing more: the daemon closes it
print(closed == b"", round(time.monotonic() - began, 1))
"""


def test_an_idle_connection_is_closed(daemon: Running, users: Users) -> None:
    done = _as(users.reader, "-c", _IDLE, str(daemon.sock))
    assert done.returncode == 0, done.stderr
    closed, after = done.stdout.split()
    assert closed == "True" and float(after) < 20, done.stdout


def test_an_outsider_is_told_permission_denied_and_who_may_connect(
        daemon: Running, users: Users) -> None:
    for argv in (["status", "--socket", str(daemon.sock)],
                 ["approve", "a1", "--socket", str(daemon.sock)]):
        out = _logwatch_as(users.outsider, *argv)
        said = out.stdout + out.stderr
        assert "permission denied" in said, said
        assert f"members of group {users.readers} may connect" in said, said
        assert "no daemon running" not in said and out.returncode in (1, 2), said


def test_an_export_directory_someone_else_linked_is_refused(
        daemon: Running, users: Users, shared: Path) -> None:
    """Root's export never follows the outsider's link into their directory: the daemon
    says why, and so does `logwatch export`."""
    wait_for(lambda: "export_failed" in daemon.stderr, 60, lambda: daemon.stderr[-2000:])
    assert "is a symbolic link owned by" in daemon.stderr
    assert list((shared / "theirs").iterdir()) == []
    db = shared / "root-only" / "copy.duckdb"
    scan = subprocess.run([sys.executable, "-m", "logwatch", "scan", "--db", str(db),
                           str(SAMPLES / "healthy_033_startup.log")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert db.exists(), scan.stderr
    out = subprocess.run([sys.executable, "-m", "logwatch", "export", "--parquet",
                          str(shared / "fleet"), "--db", str(db)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and "export directory" in out.stderr, out.stderr
    assert "symbolic link owned by" in out.stderr
    assert list((shared / "theirs").iterdir()) == []


def test_logwatch_run_takes_the_socket_groups(shared: Path, users: Users) -> None:
    """`run --socket` with [socket]: a reader connects and reads, and may not approve."""
    config = _config(shared, users)
    sock = _socket_dir(shared)
    run = subprocess.Popen([sys.executable, "-m", "logwatch", "run", "--config", str(config),
                            "--socket", str(sock), "--db",
                            str(shared / "root-only" / "run.duckdb"), "--quiet", "--",
                            sys.executable, "-c", "import time; time.sleep(120)"], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        asyncio.run(wait_ready(sock, 60, alive=lambda: run.poll() is None))
        assert grp.getgrgid(sock.stat().st_gid).gr_name == users.readers
        assert _ask_as(users.reader, sock, "status")["ok"] is True
        answer = _ask_as(users.reader, sock, "approve", id="a1")
        assert answer.get("denied") is True and "permission denied" in str(answer["error"])
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)


_SILENT = """
import socket, sys
held = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
    except OSError:  # the backlog full for a moment: the flood goes on
        continue
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
"""


def test_a_flood_of_silent_connections_takes_no_more_than_its_share(
        shared: Path, users: Users) -> None:
    """300 connections from one reader that never ask anything: past its 16, each refusal
    waiting for a request held a descriptor for 5 s, without bound (a flood took every
    descriptor the daemon had: root's status and its own sources starved). Now at most 32
    wait; the rest are answered and closed at once, and root's status answers meanwhile."""
    config = _config(shared, users, idle=60)
    log = shared / "root-only" / "vllm.log"
    log.write_bytes((SAMPLES / "healthy_033_startup.log").read_bytes())
    daemon = Running("--config", str(config), "--file", str(log), "--db",
                     str(shared / "root-only" / "h.duckdb"), sock=_socket_dir(shared))
    flood: subprocess.Popen[str] | None = None
    try:
        daemon.wait_ready()
        flood = subprocess.Popen([*_as_argv(users.reader), sys.executable, "-c", _SILENT,
                                  str(daemon.sock), "300"], cwd=ROOT, env=_env(),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert flood.stdout is not None
        connected = int(flood.stdout.readline() or "0")
        assert connected > 100, flood.stderr.read() if flood.stderr else ""
        # held, waiting, its own files: within 3 s (a refusal waited 5 s for its request)
        deadline, descriptors = time.monotonic() + 3, 0
        while time.monotonic() < deadline:
            descriptors = len(os.listdir(f"/proc/{daemon.proc.pid}/fd"))
            if descriptors < 16 + 32 + 60:
                break
            time.sleep(0.05)
        assert descriptors < 16 + 32 + 60, descriptors
        answer = asyncio.run(request(daemon.sock, "status", timeout=10))
        assert answer["ok"] is True, answer
    finally:
        if flood is not None:
            flood.kill()
            flood.wait(timeout=30)
        daemon.stop()
