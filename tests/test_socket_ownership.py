"""The control socket belongs to its owner. A directory, link or socket another local user
could control is refused by the daemon and by the clients, run as real users of their own
(setpriv); the fallback directory without $XDG_RUNTIME_DIR is made private."""

from __future__ import annotations

import asyncio
import grp
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from logwatch.daemon.client import request, subscribe, wait_ready
from logwatch.host.trusted_dirs import UnsafeSocketPath, check_directory
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="files of other users need root")

VICTIM = 65534  # nobody: the user whose daemon and clients are protected
INTRUDER = 65533  # an unused uid: another local user


def as_user(uid: int, *groups: int) -> list[str]:
    """Run a command as `uid` (primary group the same number), with these extra groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}",
            f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"]


@pytest.fixture(scope="module")
def victim_runs_logwatch() -> None:
    """Skip unless uid 65534 can run this Python and logwatch from this checkout."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    probe = subprocess.run([*as_user(VICTIM), sys.executable, "-c",
                            "import logwatch.daemon.control"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, check=False)
    if probe.returncode != 0:
        pytest.skip(f"uid {VICTIM} cannot run {sys.executable} on {ROOT}: {probe.stderr}")


@pytest.fixture
def shared_tmp(victim_runs_logwatch: None) -> Iterator[Path]:
    """A sticky world-writable directory, as /tmp is (tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="logwatch-ownership-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def private_dir(path: Path, uid: int, mode: int = 0o700) -> Path:
    path.mkdir(parents=True)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


class FakeServer:
    """Someone else's server on a socket path: records what it is told and answers with
    a fake status (with terminal escapes, as in the report)."""

    def __init__(self, path: Path, owner: int) -> None:
        self.received = b""
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        os.chown(path, owner, owner)
        path.chmod(0o777)
        self.listener.listen()
        self.listener.settimeout(0.1)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                self.received += conn.recv(65536)
                status = {"uptime_s": 1, "lines": 1, "findings_recorded": 0,
                          "library": "\x1b]0;owned\x07", "sources": [], "events": []}
                conn.sendall(json.dumps({"ok": True, "status": status}).encode() + b"\n")

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()


def _fallback_made_by_intruder(base: Path) -> tuple[Path | None, Path]:
    made = private_dir(base / f"logwatch-{VICTIM}" / "logwatch", INTRUDER, 0o777)
    made.parent.chmod(0o777)
    os.chown(made.parent, INTRUDER, INTRUDER)
    return None, made / "logwatch.sock"  # no --socket: the default path


def _directory_of_intruder(base: Path) -> tuple[Path | None, Path]:
    sock = private_dir(base / "theirs", INTRUDER, 0o755) / "lw.sock"
    return sock, sock


def _own_directory_open_to_all(base: Path) -> tuple[Path | None, Path]:
    sock = private_dir(base / "mine", VICTIM, 0o777) / "lw.sock"
    return sock, sock


def _link_planted_at_the_directory(base: Path) -> tuple[Path | None, Path]:
    target = private_dir(base / "theirs", INTRUDER, 0o755)
    (base / "mine").symlink_to(target)
    os.lchown(base / "mine", INTRUDER, INTRUDER)
    return base / "mine" / "lw.sock", target / "lw.sock"


def _socket_of_intruder(base: Path) -> tuple[Path | None, Path]:
    sock = private_dir(base / "mine", VICTIM, 0o755) / "lw.sock"
    return sock, sock


CASES: dict[str, tuple[Callable[[Path], tuple[Path | None, Path]], str]] = {
    "fallback made by another user": (_fallback_made_by_intruder,
                                      f"logwatch-{VICTIM} belongs to uid {INTRUDER}"),
    "directory of another user": (_directory_of_intruder, f"theirs belongs to uid {INTRUDER}"),
    "own directory, mode 0777": (_own_directory_open_to_all,
                                 "mine is writable by others (mode 0777)"),
    "symlink at the directory": (_link_planted_at_the_directory, "mine is a symbolic link"),
    "socket of another user": (_socket_of_intruder, f"lw.sock belongs to uid {INTRUDER}"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_client_refuses_a_socket_someone_else_controls(case: str, shared_tmp: Path) -> None:
    """`logwatch status` of the victim never talks to the intruder's server, and says why."""
    prepare, reason = CASES[case]
    given, bound = prepare(shared_tmp)
    server = FakeServer(bound, INTRUDER)
    home = private_dir(shared_tmp / "home", VICTIM)
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY")}
    env.update(TMPDIR=str(shared_tmp), HOME=str(home))
    try:
        out = subprocess.run([*as_user(VICTIM), sys.executable, "-m", "logwatch", "status",
                              *(["--socket", str(given)] if given else [])],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                             check=False)
    finally:
        server.close()
    assert server.received == b"", "the query reached the intruder"
    assert "daemon running" not in out.stdout
    assert out.returncode == 2 and reason in out.stderr, out.stderr


def test_request_and_subscribe_refuse_a_directory_of_another_user(tmp_path: Path) -> None:
    sock = private_dir(tmp_path / "theirs", VICTIM, 0o755) / "lw.sock"  # we are root here
    server = FakeServer(sock, VICTIM)
    try:
        with pytest.raises(UnsafeSocketPath, match=f"belongs to uid {VICTIM}"):
            asyncio.run(request(sock, "sql", query="SELECT 1"))
        with pytest.raises(UnsafeSocketPath, match=f"belongs to uid {VICTIM}"):
            asyncio.run(subscribe(sock, wait=5).start())  # refused at once, not retried
        with pytest.raises(UnsafeSocketPath, match=f"belongs to uid {VICTIM}"):
            asyncio.run(wait_ready(sock, 5))  # not waited on either
    finally:
        server.close()
    assert server.received == b""


def test_a_server_running_as_someone_else_is_refused(tmp_path: Path,
                                                     shared_tmp: Path) -> None:
    """The path is ours and the socket file too, but another user's process listens on it
    (the kernel says who: SO_PEERCRED)."""
    sock = tmp_path / "lw.sock"
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(sock))
    listener = subprocess.Popen(
        [*as_user(VICTIM), sys.executable, "-c",
         f"import socket, sys; s = socket.socket(fileno={bound.fileno()}); s.listen(); "
         "print('ready', flush=True); sys.stdin.read()"],
        pass_fds=[bound.fileno()], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert listener.stdout is not None and listener.stdout.readline() == b"ready\n"
        with pytest.raises(UnsafeSocketPath, match=f"served by a process of uid {VICTIM}"):
            asyncio.run(request(sock, "status"))
    finally:
        listener.kill()
        listener.wait()
        bound.close()


@pytest.mark.parametrize(("layout", "refused"), [
    ("root 0755, like /run/logwatch", None),
    ("ours inside a sticky 1777 directory, like /tmp", None),
    ("behind a link owned by root", None),
    ("inside a group-writable directory", "is writable by others (mode 0775)"),
    ("sticky itself", "is writable by others (mode 1777)"),
    ("behind a link owned by another user", f"is a symbolic link owned by uid {VICTIM}"),
    ("inside a directory of another user", f"belongs to uid {VICTIM}"),
])
def test_which_directories_are_trusted(layout: str, refused: str | None,
                                       tmp_path: Path) -> None:
    """Root runs this: root's own directories pass, anything uid 65534 could change fails."""
    top = tmp_path / "top"
    top.mkdir()
    target = top / "sock-dir"
    if "1777" in layout or "group-writable" in layout:
        top.chmod(0o1777 if "1777" in layout else 0o775)
    if "sticky itself" in layout:
        target.mkdir(mode=0o755)
        target.chmod(0o1777)
    elif "link" in layout:
        (tmp_path / "real" / "sock-dir").mkdir(parents=True)
        top.rmdir()
        top.symlink_to(tmp_path / "real")
        if "another user" in layout:
            os.lchown(top, VICTIM, VICTIM)
    elif "another user" in layout:
        target.mkdir()
        os.chown(top, VICTIM, VICTIM)
    else:
        target.mkdir(mode=0o755)
    if refused is None:
        check_directory(target)
    else:
        with pytest.raises(UnsafeSocketPath, match=refused.replace("(", r"\(").replace(")", r"\)")):
            check_directory(target)


def _daemon(shared_tmp: Path, *extra: str) -> tuple[list[str], dict[str, str]]:
    home = private_dir(shared_tmp / "home", VICTIM)
    log = home / "vllm.log"
    log.write_bytes(b"hello\n")
    os.chown(log, VICTIM, VICTIM)
    config = home / "logwatch.toml"
    config.write_text("")  # not /etc/logwatch/logwatch.toml, whatever this host has
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY")}
    env.update(TMPDIR=str(shared_tmp), HOME=str(home))
    return [*as_user(VICTIM), sys.executable, "-m", "logwatch", "daemon", "--config",
            str(config), "--file", str(log), "--db", str(home / "h.duckdb"), *extra], env


@pytest.mark.slow
def test_the_daemon_makes_its_fallback_directory_private(shared_tmp: Path) -> None:
    argv, env = _daemon(shared_tmp)
    sock = shared_tmp / f"logwatch-{VICTIM}" / "logwatch" / "logwatch.sock"
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not sock.is_socket():
            assert time.monotonic() < deadline and proc.poll() is None, "no socket"
            time.sleep(0.05)
        for path, mode in ((sock.parent.parent, 0o700), (sock.parent, 0o700), (sock, 0o660)):
            st = path.lstat()
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (VICTIM, mode), path
        status = subprocess.run([*as_user(VICTIM), sys.executable, "-m", "logwatch", "status"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                                check=False)
        assert status.returncode == 0 and "daemon running" in status.stdout, status.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_the_daemon_refuses_a_fallback_directory_made_by_someone_else(
        shared_tmp: Path) -> None:
    """It goes on reading its logs without a socket, and says why."""
    made = private_dir(shared_tmp / f"logwatch-{VICTIM}", INTRUDER, 0o777)
    argv, env = _daemon(shared_tmp, "--until-idle", "0.2")
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert f"logwatch-{VICTIM} belongs to uid {INTRUDER}" in out.stderr
    assert "1 lines read" in out.stderr
    assert list(made.iterdir()) == []  # nothing of ours in there


def _shipped(key: str) -> str:
    """A setting of the shipped systemd/logwatch.service."""
    for line in (ROOT / "systemd" / "logwatch.service").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{key}= is not in the shipped unit")


def _systemctl(env: dict[str, str], *args: str, check: bool = True) -> str:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=check).stdout.strip()


CONNECT = """import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""


@pytest.mark.slow
def test_socket_group_members_connect_under_systemd(systemd_user: dict[str, str],
                                                    victim_runs_logwatch: None,
                                                    tmp_path: Path) -> None:
    """The shipped unit's RuntimeDirectory, RuntimeDirectoryMode and UMask, applied by a real
    systemd manager; socket.group set: a member of the group (uid 65534 with that group
    added) gets answers, the same uid without it is refused by the socket's mode."""
    env = systemd_user
    group = next((g for g in grp.getgrall() if g.gr_name == "users"), None)
    if group is None:
        pytest.skip("no group named users to give the socket to")
    runtime = Path(env["XDG_RUNTIME_DIR"])  # %t of the manager
    unit_dir = runtime / "systemd" / "user"
    unit_dir.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-group-{os.getpid()}.service"
    log, config = tmp_path / "vllm.log", tmp_path / "logwatch.toml"
    log.write_bytes(b"hello\n")
    config.write_text(f'[socket]\ngroup = "{group.gr_name}"\n')
    (unit_dir / name).write_text(
        "[Service]\nType=notify\nNotifyAccess=main\n"
        f"ExecStart={sys.executable} -m logwatch daemon --config {config} --file {log} "
        f"--db {tmp_path / 'h.duckdb'} --socket %t/logwatch/logwatch.sock\n"
        f"WorkingDirectory={ROOT}\n"
        f"RuntimeDirectory={_shipped('RuntimeDirectory')}\n"
        f"RuntimeDirectoryMode={_shipped('RuntimeDirectoryMode')}\n"
        f"UMask={_shipped('UMask')}\n")
    sock = runtime / _shipped("RuntimeDirectory") / "logwatch.sock"
    runtime_mode = stat.S_IMODE(runtime.stat().st_mode)
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY")}
    _systemctl(env, "daemon-reload")
    try:
        _systemctl(env, "start", name)  # Type=notify: back once READY=1, the socket bound
        made = sock.parent.stat()
        assert (made.st_uid, stat.S_IMODE(made.st_mode)) == (0, int(_shipped(
            "RuntimeDirectoryMode"), 8))
        bound = sock.lstat()
        assert stat.S_ISSOCK(bound.st_mode)
        assert (bound.st_uid, bound.st_gid, stat.S_IMODE(bound.st_mode)) == (0, group.gr_gid,
                                                                            0o660)
        runtime.chmod(0o711)  # root's runtime directory: let other users pass, for this test
        member = subprocess.run([*as_user(VICTIM, group.gr_gid), sys.executable, "-m",
                                 "logwatch", "status", "--socket", str(sock)], cwd=ROOT,
                                env=child_env, capture_output=True, text=True, timeout=60,
                                check=False)
        assert member.returncode == 0 and "daemon running" in member.stdout, member.stderr
        outsider = subprocess.run([*as_user(VICTIM), sys.executable, "-c", CONNECT, str(sock)],
                                  cwd=ROOT, env=child_env, capture_output=True, text=True,
                                  timeout=60, check=False)
        assert outsider.stdout.strip() == "EACCES", outsider.stderr
    finally:
        runtime.chmod(runtime_mode)
        _systemctl(env, "stop", name, check=False)
        (unit_dir / name).unlink(missing_ok=True)
        _systemctl(env, "daemon-reload", check=False)


@pytest.mark.slow
def test_the_daemon_says_when_its_group_cannot_reach_the_socket(tmp_path: Path) -> None:
    """A directory made 0750 root:root beforehand (the unit's old RuntimeDirectoryMode)."""
    group = next((g for g in grp.getgrall() if g.gr_name == "users"), None)
    if group is None:
        pytest.skip("no group named users to give the socket to")
    run = tmp_path / "run"
    run.mkdir(mode=0o750)
    log, config = tmp_path / "vllm.log", tmp_path / "logwatch.toml"
    log.write_bytes(b"hello\n")
    config.write_text(f'[socket]\ngroup = "{group.gr_name}"\n')
    out = subprocess.run([sys.executable, "-m", "logwatch", "daemon", "--config", str(config),
                          "--file", str(log), "--db", str(tmp_path / "h.duckdb"), "--socket",
                          str(run / "lw.sock"), "--until-idle", "0.2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert f"members of group {group.gr_name} cannot reach {run}" in out.stderr
