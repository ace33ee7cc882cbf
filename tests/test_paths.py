"""One resolution of where the history and the socket are, for the daemon under its unit and
for a command the operator types: the unit's StateDirectory= as systemd maps it (checked
against a real `systemd --user` manager), the configuration's paths read by every command,
and `show-config` printing the paths in use instead of ''."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logwatch.paths import DB_FILENAME, db_path_for, systemd_release, user_state_dir
from tests.conftest import ROOT, SAMPLES


def test_under_systemd_the_daemon_uses_the_directory_systemd_made() -> None:
    env = {"STATE_DIRECTORY": "/var/lib/logwatch:/var/lib/other", "HOME": "/h"}
    assert db_path_for(env, 1000, 252) == Path("/var/lib/logwatch") / DB_FILENAME


def test_root_reads_where_the_system_unit_writes() -> None:
    """Before, root's CLI looked in /root/.local/share while the unit wrote /var/lib."""
    assert db_path_for({"HOME": "/root"}, 0, 252) == Path("/var/lib/logwatch") / DB_FILENAME


@pytest.mark.parametrize(("release", "expect"), [
    (252, "/h/.config/logwatch"),  # systemd before 254 maps user state to XDG config
    (254, "/h/.local/state/logwatch"),
    (None, "/h/.local/state/logwatch"),  # no systemd: the XDG state dir
])
def test_a_user_reads_where_a_user_unit_writes(release: int | None, expect: str) -> None:
    assert db_path_for({"HOME": "/h"}, 1000, release) == Path(expect) / DB_FILENAME
    assert user_state_dir({"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"},
                          release) == Path("/c/logwatch" if release == 252 else "/s/logwatch")


def test_a_history_in_the_earlier_place_is_found_while_it_is_the_only_one(tmp_path: Path
                                                                          ) -> None:
    env = {"HOME": str(tmp_path)}
    earlier = tmp_path / ".local" / "share" / "logwatch" / DB_FILENAME
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"")
    assert db_path_for(env, 1000, 255) == earlier
    state = tmp_path / ".local" / "state" / "logwatch" / DB_FILENAME
    state.parent.mkdir(parents=True)
    state.write_bytes(b"")
    assert db_path_for(env, 1000, 255) == state  # the unit's place wins once it has one


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "logwatch", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def test_every_reader_uses_the_configurations_database_and_socket(tmp_path: Path) -> None:
    """`status`, `sql` and `history` with no --db read the configured database.path (as the
    daemon writes it), and show-config prints the paths in use."""
    db, sock = tmp_path / "configured.duckdb", tmp_path / "configured.sock"
    recorded = _cli("scan", "--db", str(db), str(SAMPLES / "demo_marlin_and_mtp.log"))
    assert recorded.returncode == 1, recorded.stderr  # a fatal incident: recorded
    config = tmp_path / "logwatch.toml"
    config.write_text(f'[database]\npath = {json.dumps(str(db))}\n'
                      f'[socket]\npath = {json.dumps(str(sock))}\n')
    env = {"LOGWATCH_CONFIG": str(config)}
    status = _cli("status", "--json", env=env)
    assert status.returncode == 3, status.stdout + status.stderr  # no daemon on that socket
    body = json.loads(status.stdout)
    assert body["database"] == str(db) and body["fatal_incidents"] >= 1
    count = _cli("sql", "--csv", "SELECT count(*) AS n FROM incidents WHERE fatal", env=env)
    assert count.returncode == 0, count.stderr
    assert int(count.stdout.splitlines()[1]) == body["fatal_incidents"]
    assert "weights.tensor_size_mismatch" in _cli("history", env=env).stdout
    shown = _cli("show-config", env=env).stdout
    assert f"'{db}'" in shown and f"'{sock}'" in shown and f"'{tmp_path}'" in shown
    # a flag still wins over the configuration
    other = tmp_path / "other.duckdb"
    assert json.loads(_cli("status", "--json", "--db", str(other), env=env).stdout)[
        "database"] == str(other)


def test_show_config_prints_the_default_paths_it_resolves(tmp_path: Path) -> None:
    config = tmp_path / "empty.toml"
    config.write_text("")
    shown = _cli("show-config", "--config", str(config)).stdout
    values = {line.split("=", 1)[0].strip(): line.split("=", 1)[1].split("#")[0].strip()
              for line in shown.splitlines() if "=" in line and not line.startswith("#")}
    state, run = os.environ["STATE_DIRECTORY"], os.environ["RUNTIME_DIRECTORY"]
    assert values["database.path"] == repr(str(Path(state) / DB_FILENAME))
    assert values["socket.path"] == repr(str(Path(run) / "logwatch.sock"))
    assert values["relaunch.state_dir"] == repr(state)


@pytest.mark.slow
def test_the_user_state_directory_is_where_a_real_user_manager_puts_it(
        systemd_user: dict[str, str], tmp_path: Path) -> None:
    """StateDirectory= and RuntimeDirectory= of a unit under this machine's systemd --user
    manager, against what a command works out without $STATE_DIRECTORY."""
    env = systemd_user
    unit_dir = Path("/run/user/0/systemd/user")
    unit_dir.mkdir(parents=True, exist_ok=True)
    name = f"logwatch-paths-{os.getpid()}"
    unit = f"{name}.service"
    # what the unit was given, written to a file (not read back from its journal: a busy
    # harness's journald once stored nothing within a minute)
    told = tmp_path / "told"
    (unit_dir / unit).write_text(
        f"[Service]\nType=oneshot\nStateDirectory={name}\nRuntimeDirectory={name}\n"
        "RemainAfterExit=yes\n"
        f'ExecStart=/bin/sh -c "echo $STATE_DIRECTORY $RUNTIME_DIRECTORY > {told}.part && '
        f'mv {told}.part {told}"\n')
    state = None
    try:
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, check=True,
                       timeout=60)
        subprocess.run(["systemctl", "--user", "start", unit], env=env, check=True, timeout=60)
        # a oneshot unit: `start` returns once its command has run (and written the file)
        said = told.read_text().split() if told.exists() else []
        assert len(said) == 2, f"the unit did not say its directories: {said}"
        state, runtime = Path(said[-2]), Path(said[-1])
        manager = {"HOME": str(Path.home())}  # the manager's environment has no XDG_*_HOME
        assert state == user_state_dir(manager, systemd_release()).with_name(name)
        assert runtime == Path(env["XDG_RUNTIME_DIR"]) / name
    finally:
        subprocess.run(["systemctl", "--user", "stop", unit], env=env, timeout=60,
                       check=False)
        (unit_dir / unit).unlink(missing_ok=True)
        subprocess.run(["systemctl", "--user", "daemon-reload"], env=env, timeout=60,
                       check=False)
        if state is not None and state.name == name:
            state.rmdir()
