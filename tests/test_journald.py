"""The journald source on real journal files written by systemd-journal-remote, followed with
`journalctl --file ... -f`: multi-line and byte-array messages, a saved cursor across daemon
restarts, and a cursor journalctl rejects."""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from tests.inprocess import Completed, logwatch_text

REMOTE = next((p for p in ("/lib/systemd/systemd-journal-remote",
                           "/usr/lib/systemd/systemd-journal-remote") if Path(p).exists()), None)
pytestmark = pytest.mark.skipif(REMOTE is None or shutil.which("journalctl") is None,
                                reason="systemd-journal-remote / journalctl not installed")

TRACEBACK = (
    "EngineCore failed to start.\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/vllm/vllm/model_executor/layers/fused_moe/routed_experts.py", line 877\n'
    "    expert_data.copy_(loaded_weight)\n"
    "RuntimeError: The size of tensor a (256) must match the size of tensor b (512) at "
    "non-singleton dimension 1")


BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")


def export_entry(message: bytes | str, usec: int, pid: int = 4242,
                 invocation: str | None = None) -> bytes:
    """One entry in journald's export format (binary-safe form for MESSAGE)."""
    data = message.encode() if isinstance(message, str) else message
    fields = (f"__REALTIME_TIMESTAMP={usec}\n_BOOT_ID={BOOT_ID}\n_PID={pid}\n"
              "SYSLOG_IDENTIFIER=vllm\n"
              + (f"_SYSTEMD_INVOCATION_ID={invocation}\n" if invocation else "")
              + "_SYSTEMD_UNIT=vllm.service\nPRIORITY=6\n").encode()
    return fields + b"MESSAGE\n" + struct.pack("<Q", len(data)) + data + b"\n\n"


def append(journal: Path, entries: list[bytes]) -> None:
    assert REMOTE is not None
    subprocess.run([REMOTE, f"--output={journal}", "-"], input=b"".join(entries), check=True,
                   capture_output=True, timeout=60)


def daemon(journal: Path, db: Path, idle: str = "2") -> Completed[str]:
    return logwatch_text("daemon", "--journal-file", str(journal), "--db", str(db),
                         "--until-idle", idle)


def findings(db: Path) -> list[tuple[str, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT signature, line FROM findings ORDER BY line").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_journal_follow_restart_and_bad_cursor(tmp_path: Path) -> None:
    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    append(journal, [
        export_entry("(APIServer pid=1) INFO 11-29 10:00:00 [api_server.py:1] vLLM API server "
                     "version 0.11.2", t0),
        export_entry(TRACEBACK, t0 + 1000),  # one entry, six lines
        export_entry(b"\x1b[31mRuntimeError: CUDA error: an illegal memory access was "
                     b"encountered\x1b[0m \xff\xfe", t0 + 2000),  # a byte-array MESSAGE
    ])
    first = daemon(journal, db)
    assert first.returncode == 0, first.stderr
    got = findings(db)
    assert ("weights.tensor_size_mismatch", 6) in got  # line 6: the traceback's last line
    assert ("engine.core_failed_to_start", 2) in got
    assert ("distributed.cuda_error", 7) in got
    count = len(got)

    append(journal, [export_entry("RuntimeError: NCCL error: unhandled system error",
                                  t0 + 3000)])
    second = daemon(journal, db)  # resumes after the saved cursor: only the new entry
    assert second.returncode == 0, second.stderr
    got = findings(db)
    assert len(got) == count + 1 and ("distributed.nccl_error", 8) in got
    assert "1 lines read" in second.stderr

    con = duckdb.connect(str(db))
    con.execute("UPDATE checkpoints SET cursor = 'garbage-cursor'")
    con.close()
    third = daemon(journal, db)
    assert third.returncode == 0, third.stderr
    assert "rejected the saved cursor" in third.stderr
    assert "8 lines read" in third.stderr  # it read the whole journal again ...
    assert len(findings(db)) == count + 1  # ... and recorded nothing twice (entry cursors)
    assert "Unknown child process" not in first.stderr + second.stderr + third.stderr


@pytest.mark.slow
def test_a_unit_started_again_is_a_new_launch_even_without_start_lines(tmp_path: Path) -> None:
    """vLLM that dies before printing its version (here: a model path that does not exist)
    twice: the unit's InvocationID changed, so these are two launches, and the second
    failed again."""
    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    crash = ("ValueError: Invalid repository ID or local directory specified: "
             "'/models/qwen3-32b-awq'.")
    append(journal, [export_entry(crash, t0, pid=100, invocation="a" * 32),
                     export_entry(crash, t0 + 5_000_000, pid=200, invocation="b" * 32),
                     export_entry(crash, t0 + 6_000_000, pid=200, invocation="b" * 32)])
    result = daemon(journal, db)
    assert result.returncode == 0, result.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        launches = con.execute("SELECT number, start_line, outcome, root_signature, "
                               "failed_before FROM launches ORDER BY number").fetchall()
        counts = con.execute("SELECT count FROM incidents WHERE signature = "
                             "'model.not_found' ORDER BY first_line").fetchall()
    finally:
        con.close()
    assert launches == [(1, 1, "failed", "model.not_found", 0),
                        (2, 2, "failed", "model.not_found", 1)]
    assert counts == [(1,), (2,)]
    assert "launch #2 failed again (1 time(s) before)" in result.stderr


@pytest.mark.slow
def test_a_journal_followed_under_another_name_goes_on_where_it_stopped(tmp_path: Path
                                                                        ) -> None:
    """A journal read from a `--journal-file` flag, then from a configured target (another
    source name): its checkpoint is the journal's, so nothing is read or recorded again, and
    entries written since are recorded."""
    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    append(journal, [export_entry(TRACEBACK, t0),
                     export_entry("RuntimeError: CUDA error: an illegal memory access was "
                                  "encountered", t0 + 1000)])
    first = daemon(journal, db)
    assert first.returncode == 0, first.stderr
    before = findings(db)
    assert ("weights.tensor_size_mismatch", 5) in before and "6 lines read" in first.stderr

    config = tmp_path / "logwatch.toml"
    config.write_text(f'[[targets]]\nname = "vllm"\n[targets.source]\nkind = "journald"\n'
                      f'file = "{journal}"\n')
    renamed = ["daemon", "--config", str(config), "--db", str(db), "--until-idle", "2",
               "--no-socket"]
    second = logwatch_text(*renamed)
    assert second.returncode == 0, second.stderr
    assert "0 lines read" in second.stderr  # resumed after the saved cursor
    assert findings(db) == before  # nothing recorded twice

    append(journal, [export_entry("RuntimeError: NCCL error: unhandled system error",
                                  t0 + 2000)])
    third = logwatch_text(*renamed)
    assert third.returncode == 0, third.stderr
    assert "1 lines read" in third.stderr
    assert findings(db) == [*before, ("distributed.nccl_error", 7)]
    con = duckdb.connect(str(db), read_only=True)
    try:  # one position, the journal's, whatever the source was called
        keys = [r[0] for r in con.execute("SELECT source_id FROM checkpoints").fetchall()]
        labels = con.execute("SELECT DISTINCT source FROM launches").fetchall()
    finally:
        con.close()
    assert keys == [f"journal:file={journal}"]
    # one source in the history too: the flag's launches took the target's name (issue 35)
    assert labels == [(f"vllm:journal:--file {journal}",)]


@pytest.mark.slow
def test_a_restart_reads_every_entry_written_while_it_was_down(tmp_path: Path) -> None:
    """More than journalctl's default tail of 10 entries came after the saved cursor: every one
    is read (`-f --after-cursor` alone would show the last 10 and wait)."""
    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    append(journal, [export_entry("INFO started", t0)])
    assert daemon(journal, db).returncode == 0
    append(journal, [export_entry(f"INFO line {n}", t0 + 1000 * (n + 1)) for n in range(15)]
           + [export_entry("RuntimeError: NCCL error: unhandled system error", t0 + 20_000)])
    second = daemon(journal, db)
    assert second.returncode == 0, second.stderr
    assert "16 lines read" in second.stderr, second.stderr
    assert ("distributed.nccl_error", 17) in findings(db)


def manager_exit(unit: str, how: str, status: int, usec: int,
                 writer: str = "init.scope") -> bytes:
    """The entry systemd's manager writes when a unit's main process ends (its message id,
    the unit in UNIT=, EXIT_CODE and EXIT_STATUS), as `journalctl -u UNIT` shows it;
    `writer`: the unit journald says wrote it (the manager's own: init.scope)."""
    word = {"exited": f"{status}/FAILURE" if status else "0/SUCCESS"}.get(how, str(status))
    data = f"{unit}: Main process exited, code={how}, status={word}".encode()
    fields = (f"__REALTIME_TIMESTAMP={usec}\n_BOOT_ID={BOOT_ID}\n_PID=1\n"
              f"SYSLOG_IDENTIFIER=systemd\n_SYSTEMD_UNIT={writer}\n"
              "MESSAGE_ID=98e322203f7a4ed290d09fe03c09fe15\n"
              f"UNIT={unit}\nEXIT_CODE={how}\nEXIT_STATUS={status}\nPRIORITY=5\n").encode()
    return fields + b"MESSAGE\n" + struct.pack("<Q", len(data)) + data + b"\n\n"


@pytest.mark.slow
def test_each_launch_of_a_unit_gets_its_exit_status_from_its_manager(tmp_path: Path) -> None:
    """Three invocations of a unit, each ended as its manager wrote in the journal: exit 1
    after a recognised failure, SIGTERM after it served (clean: stopped), SIGKILL while it
    was starting with nothing recognised (failed, and the fallback names the status).
    Before, `launches.exit_code` was always empty for a journald source, and the killed
    launch stayed `starting` until the next start replaced it."""
    journal, db = tmp_path / "j" / "vllm.journal", tmp_path / "h.duckdb"
    journal.parent.mkdir()
    t0 = int(time.time() * 1e6)
    crash = ("ValueError: Invalid repository ID or local directory specified: "
             "'/models/qwen3-32b-awq'.")
    version = "INFO 12-04 10:00:00 [api_server.py:1043] vLLM API server version 0.11.0"
    served = "INFO:     Application startup complete."
    second = [version, served]
    append(journal, [
        export_entry(crash, t0, pid=100, invocation="a" * 32),
        # neither another unit's end (a journal file holds every unit's) nor an entry a
        # process inside the unit wrote with the manager's fields is vLLM's exit
        manager_exit("logrotate.service", "exited", 1, t0 + 1),
        manager_exit("vllm.service", "exited", 3, t0 + 1, writer="vllm.service"),
        manager_exit("vllm.service", "exited", 1, t0 + 1),
        *[export_entry(text, t0 + 5_000_000 + i, pid=200, invocation="b" * 32)
          for i, text in enumerate(second)],
        manager_exit("vllm.service", "killed", 15, t0 + 6_000_000),
        export_entry(version, t0 + 9_000_000, pid=300, invocation="c" * 32),
        manager_exit("vllm.service", "killed", 9, t0 + 9_500_000)])
    result = daemon(journal, db)
    assert result.returncode == 0, result.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        launches = con.execute("SELECT number, outcome, exit_code, root_signature "
                               "FROM launches ORDER BY number").fetchall()
    finally:
        con.close()
    assert launches == [(1, "failed", 1, "model.not_found"),
                        (2, "stopped", -15, None),
                        (3, "failed", -9, "generic.exit_status")], launches


def test_only_a_managers_exit_entry_about_the_unit_is_an_exit() -> None:
    from logwatch.sources.journald import PROCESS_EXIT_MESSAGE_ID, main_process_exit, unit_of

    unit = unit_of({"_SYSTEMD_INVOCATION_ID": "a" * 32, "_SYSTEMD_UNIT": "vllm.service"})
    assert unit == ("UNIT", "vllm.service")
    user = unit_of({"_SYSTEMD_INVOCATION_ID": "a" * 32, "_SYSTEMD_UNIT": "user@0.service",
                    "_SYSTEMD_USER_UNIT": "vllm.service"})
    assert user == ("USER_UNIT", "vllm.service")
    assert unit_of({"_SYSTEMD_UNIT": "init.scope"}) is None  # the manager's own

    def ended(how: str, status: str, **more: str) -> dict[str, str]:
        return {"MESSAGE_ID": PROCESS_EXIT_MESSAGE_ID, "UNIT": "vllm.service",
                "_SYSTEMD_UNIT": "init.scope", "EXIT_CODE": how, "EXIT_STATUS": status, **more}

    assert main_process_exit(ended("exited", "0"), unit) == (0, True)
    assert main_process_exit(ended("exited", "137"), unit) == (137, False)
    assert main_process_exit(ended("killed", "15"), unit) == (-15, True)
    assert main_process_exit(ended("dumped", "11"), unit) == (-11, False)
    assert main_process_exit(ended("exited", "9" * 30), unit) is None
    assert main_process_exit(ended("exited", "1"), None) is None  # no vLLM line read yet
    assert main_process_exit(ended("exited", "1", UNIT="logrotate.service"), unit) is None
    assert main_process_exit(ended("exited", "1", _SYSTEMD_UNIT="vllm.service"), unit) is None
    assert main_process_exit({**ended("exited", "1"), "MESSAGE_ID": "x"}, unit) is None
    user_end = {**ended("exited", "1", _SYSTEMD_UNIT="user@0.service"), "USER_UNIT":
                "vllm.service"}
    assert main_process_exit(user_end, user) == (1, False)
    assert main_process_exit({**user_end, "_SYSTEMD_USER_UNIT": "vllm.service"}, user) is None
