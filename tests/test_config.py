"""The configuration file: strict checks with file, line and hints; origins; the daemon."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from logwatch.core.settings.config import parse_config
from logwatch.daemon.config_file import load_config
from tests.conftest import ROOT, SAMPLES
from tests.inprocess import logwatch_text

GOOD = """\
[database]
path = "/var/lib/logwatch/logwatch.duckdb"

[socket]
group = "logwatch"

[[targets]]
name = "qwen"
model_dir = "/models/Qwen3.6-NVFP4"
[targets.source]
kind = "journald"
unit = "vllm.service"
[targets.launch]
unit = "vllm.service"
[targets.variants]
w4a4 = "/models/Qwen3.6-NVFP4-W4A4"
[targets.relaunch]
policy = "ask"
max_per_hour = 2
"""


def messages(text: str) -> list[str]:
    return [str(p) for p in parse_config("lw.toml", text).problems]


def test_a_good_config() -> None:
    config = parse_config("lw.toml", GOOD, {"database.path": None})
    assert config.problems == []
    assert config.get("database.path") == "/var/lib/logwatch/logwatch.duckdb"
    assert config.origins["database.path"] == "lw.toml"
    assert config.origins["socket.path"] == "default"
    (target,) = config.targets
    assert (target.name, target.source["unit"], target.relaunch["policy"]) == (
        "qwen", "vllm.service", "ask")


def test_every_problem_at_once_with_lines_and_hints() -> None:
    bad = GOOD.replace('group = "logwatch"', 'grup = "logwatch"') \
              .replace('kind = "journald"', 'kind = "journal"') \
              .replace('policy = "ask"', 'policy = "always"') \
              .replace("[database]", "[databse]")
    msgs = messages(bad)
    assert "lw.toml:1: unknown section [databse] (did you mean 'database'?)" in msgs
    assert "lw.toml:5: unknown key 'grup' in [socket] (did you mean 'group'?)" in msgs
    assert any("lw.toml:11: source kind 'journal'" in m and "did you mean 'journald'?" in m
               for m in msgs)
    assert any("relaunch policy 'always'" in m for m in msgs)
    assert len(msgs) == 4


def test_types_duplicates_missing_pieces_and_bad_toml() -> None:
    text = ('[signatures]\ndirs = "x"\n[[targets]]\nname = "a"\n[[targets]]\nname = "a"\n'
            '[targets.source]\nkind = "file"\n')
    msgs = messages(text)
    assert any("signatures.dirs must be a list" in m for m in msgs)
    assert any("needs a [targets.source] table" in m for m in msgs)
    assert any("a file source needs path" in m for m in msgs)
    assert any("target name 'a' is used twice" in m for m in msgs)
    assert messages("[database\npath=1")[0].startswith("lw.toml:1: invalid TOML")


def test_missing_files(tmp_path: Path) -> None:
    given = load_config(tmp_path / "nope.toml")
    assert [p.message for p in given.problems] == ["config file not found"]
    assert load_config(None).problems == [] or Path("/etc/logwatch/logwatch.toml").exists()


def test_check_and_show_config_cli(tmp_path: Path) -> None:
    conf = tmp_path / "lw.toml"
    conf.write_text(GOOD)
    ok = logwatch_text("check-config", "--config", str(conf))
    assert ok.returncode == 0 and "1 target(s)" in ok.stdout
    shown = logwatch_text("show-config", "--config", str(conf), "--db", "/x.duckdb").stdout
    assert "database.path" in shown and "# command line" in shown
    assert "socket.path" in shown and "# default" in shown
    conf.write_text(GOOD.replace("[socket]", "[sockets]"))
    bad = logwatch_text("check-config", "--config", str(conf))
    assert bad.returncode == 1 and "unknown section [sockets]" in bad.stderr
    assert f"1 target(s) in {conf}" in ok.stdout


@pytest.mark.skipif(Path("/etc/logwatch/logwatch.toml").exists(),
                    reason="this host has a logwatch configuration")
def test_check_config_with_no_file_says_none_was_checked(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.delenv("LOGWATCH_CONFIG", raising=False)
    said = logwatch_text("check-config")
    assert said.returncode == 0
    assert "no configuration file at /etc/logwatch/logwatch.toml" in said.stdout


@pytest.mark.slow
def test_the_daemon_runs_targets_and_refuses_a_bad_config(tmp_path: Path) -> None:
    log, db, conf = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.toml"
    log.write_bytes((SAMPLES / "journald_kv_cache.log").read_bytes())
    conf.write_text(f'[database]\npath = "{db}"\n[[targets]]\nname = "q"\n'
                    f'[targets.source]\nkind = "file"\npath = "{log}"\n')
    run = ["daemon", "--config", str(conf)]
    done = logwatch_text(*run, "--until-idle", "1")
    assert done.returncode == 0, done.stderr
    con = duckdb.connect(str(db), read_only=True)
    assert ("memory.kv_cache_too_small",) in con.execute(
        "SELECT signature FROM findings").fetchall()
    con.close()
    conf.write_text(conf.read_text() + "colour = true\n")
    refused = logwatch_text(*run)
    assert refused.returncode == 2
    assert "not starting" in refused.stderr and "unknown key 'colour'" in refused.stderr


def test_the_shipped_example_config_is_valid() -> None:
    example = ROOT / "systemd" / "logwatch.toml"
    config = parse_config(str(example), example.read_text())
    assert config.problems == []
    assert [t.name for t in config.targets] == ["qwen", "bench"]
    assert config.targets[0].relaunch["policy"] == "ask"
    from logwatch.daemon.config_file import source_for
    from logwatch.sources.globbed import GlobSource

    assert isinstance(source_for(config.targets[1]), GlobSource)  # the glob path


@pytest.mark.slow
def test_a_targets_findings_link_to_the_snapshot_of_its_launch(tmp_path: Path) -> None:
    log, db, conf = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "lw.toml"
    log.write_bytes((SAMPLES / "demo_marlin_and_mtp.log").read_bytes())
    model = ROOT / "samples" / "models" / "qwen3.6-35b-a3b-nvfp4a16"
    conf.write_text(f'[database]\npath = "{db}"\n[[targets]]\nname = "q"\n'
                    f'model_dir = "{model}"\n'
                    f'[targets.source]\nkind = "file"\npath = "{tmp_path}/*.log"\n'
                    '[targets.launch]\nargv = ["vllm", "serve", "' + str(model) + '", '
                    '"--tensor-parallel-size", "4", "--api-key", "sk-live-abcdefgh1234"]\n')
    done = logwatch_text("daemon", "--config", str(conf), "--no-socket", "--until-idle", "1")
    assert done.returncode == 0, done.stderr
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT DISTINCT s.quant_scheme, s.tensor_parallel_size, s.body "
                       "FROM findings f JOIN snapshots s ON s.hash = f.snapshot_hash "
                       "WHERE f.signature = 'marlin.repack_tile_n'").fetchall()
    unlinked = con.execute("SELECT count(*) FROM findings WHERE snapshot_hash IS NULL")
    assert unlinked.fetchone() == (0,)
    con.close()
    assert len(rows) == 1 and rows[0][1] == 4
    assert rows[0][0] == "NVFP4A16"  # from the model directory's quantization config
    assert "sk-live-abcdefgh1234" not in rows[0][2]  # redacted before it is stored


def test_unknown_keys_and_types_in_each_target_table() -> None:
    text = ('[[targets]]\nname = "q"\n[targets.source]\nkind = "file"\npath = "/x"\n'
            'paht = "/y"\n[targets.launch]\nunti = "vllm.service"\nuser = "yes"\n'
            '[targets.relaunch]\nmax_per_hr = 2\nmax_per_hour = "2"\n')
    msgs = messages(text)
    assert any("unknown key 'paht' in the source of target 'q'" in m
               and "did you mean 'path'?" in m for m in msgs)
    assert any("unknown key 'unti' in the launch of target 'q'" in m
               and "did you mean 'unit'?" in m for m in msgs)
    assert any("launch.user of target 'q' must be a bool" in m for m in msgs)
    assert any("unknown key 'max_per_hr' in the relaunch policy of target 'q'" in m
               for m in msgs)
    assert any("relaunch.max_per_hour of target 'q' must be a int" in m for m in msgs)
    assert len(msgs) == 5


def test_target_tables_of_the_wrong_kind_are_reported_not_ignored() -> None:
    text = ('[[targets]]\nname = "q"\nlaunch = "vllm.service"\nrelaunch = "ask"\n'
            'model_dir = 7\n[targets.source]\nkind = "stdin"\n')
    msgs = messages(text)
    assert any("launch of target 'q' must be a table" in m for m in msgs)
    assert any("relaunch of target 'q' must be a table" in m for m in msgs)
    assert any("model_dir of target 'q' must be a string" in m for m in msgs)
    assert len(msgs) == 3


def test_a_relaunch_policy_that_may_act_needs_a_way_to_act() -> None:
    """ask/auto without a unit or a site command would propose actions nothing can carry
    out: refused before the daemon starts, with what to add."""
    no_unit = GOOD.replace("[targets.launch]\nunit = \"vllm.service\"\n", "")
    assert any("has no way to relaunch" in m for m in messages(no_unit))
    with_command = no_unit.replace("max_per_hour = 2\n", "max_per_hour = 2\n"
                                   'command = ["/bin/restart-vllm", "{argv}"]\n'
                                   'undo_command = ["/bin/restart-vllm", "--previous"]\n')
    assert messages(with_command) == []
    half = no_unit.replace("max_per_hour = 2\n", "max_per_hour = 2\n"
                           'command = ["/bin/restart-vllm", "{argv}"]\n')
    assert any("needs both command and undo_command" in m for m in messages(half))
    hostile = with_command.replace('"{argv}"', '"--x={argv}", "{log_line}"')
    found = messages(hostile)
    assert any("{argv} must be a word of its own" in m for m in found), found
    assert any("{log_line} is not one of" in m for m in found), found


def test_the_relaunch_section() -> None:
    config = parse_config("lw.toml", GOOD + "")
    assert config.get("relaunch.dropin") == "persistent"
    assert config.get("relaunch.start_seconds") == 900.0
    text = "[relaunch]\ndropin = \"tmp\"\nsoak_seconds = 0\n"
    found = messages(text)
    assert any("relaunch.dropin is 'tmp': one of persistent, runtime" in m for m in found)
    assert any("relaunch.soak_seconds must be more than 0" in m for m in found)


def test_the_example_configuration_checks_clean() -> None:
    example = Path(__file__).resolve().parent.parent / "systemd" / "logwatch.toml"
    assert messages(example.read_text()) == []


def test_check_config_names_a_signature_directory_the_daemon_would_refuse(
        tmp_path: Path) -> None:
    conf = tmp_path / "lw.toml"
    conf.write_text(f'[signatures]\ndirs = ["{tmp_path / "site"}"]\n')
    missing = logwatch_text("check-config", "--config", str(conf))
    assert missing.returncode == 1
    assert f"lw.toml:2: signatures.dirs: {tmp_path / 'site'}: not a directory" in missing.stderr
    (tmp_path / "site").mkdir()
    assert logwatch_text("check-config", "--config", str(conf)).returncode == 0


def test_the_socket_groups_are_parsed_strictly_as_the_docs_show(tmp_path: Path) -> None:
    """docs/daemon.md's [socket] block passes check-config (a group this host lacks is a
    note, the file may be meant for another host) and show-config shows its values; the
    operators' group may not be the readers' and a group's name is a name."""
    text = (ROOT / "docs" / "daemon.md").read_text(encoding="utf-8")
    block = next(b.split("```", 1)[0] for b in text.split("```toml\n")[1:] if "[socket]" in b)
    conf = tmp_path / "lw.toml"
    conf.write_text(block)
    ok = logwatch_text("check-config", "--config", str(conf))
    assert ok.returncode == 0, ok.stderr
    shown = logwatch_text("show-config", "--config", str(conf)).stdout
    assert "socket.operators_group" in shown and "'logwatch-ops'" in shown
    assert "socket.idle_seconds" in shown
    same = messages('[socket]\ngroup = "ops"\noperators_group = "ops"\n')
    assert len(same) == 1 and "the same as socket.group" in same[0] and ":3:" in same[0]
    assert "a group's name" in messages('[socket]\noperators_group = "../x"\n')[0]
    assert "must be more than 0" in messages("[socket]\nidle_seconds = 0\n")[0]
