"""Unknown errors become signatures: lines grouped by template, and `signatures draft` turning a
group (from a log or the history) into a signature that `test` and `lint` accept and that
names the failure on the next scan."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from logwatch.core.signatures.draft import draft_regex, draft_signature, near_miss
from logwatch.core.signatures.lint import nested_quantifier, unanchored
from logwatch.core.signatures.templates import TemplateGroup, TemplateGroups, template_of
from tests.inprocess import logwatch_text
from tests.test_unrecognised import HEAD, KEYERROR_LOG


@pytest.mark.parametrize(("message", "template"), [
    ("KeyError: 'model.layers.7.frob.weight'", "KeyError: <str>"),
    ("Could not open /opt/models/zorb-7b/config.json", "Could not open <path>"),
    ("bad pointer 0x7f00deadbeef at slot 3", "bad pointer <hex> at slot <num>"),
    ("Tried to allocate 2.50 GiB; 512 bytes free", "Tried to allocate <size>; <size> free"),
    ("peer 10.0.0.7:9000 refused rank -1", "peer <addr> refused rank <num>"),
    ("layer_12 has size_n=160", "layer_12 has size_n=<num>"),
])
def test_template_masks_the_variable_parts(message: str, template: str) -> None:
    assert template_of(message) == template


def test_ten_thousand_lines_of_one_failure_are_one_group() -> None:
    groups = TemplateGroups(limit=3)
    for i in range(10_000):
        groups.add_line(f"Zorblax shard {i} failed at 0x{i:x}ff", f"line {i}",
                        "generic.error_line", "x.log", i + 1, fatal=False)
    for i in range(5):
        groups.add_line(f"other failure kind {'abcde'[i]}", "l", "generic.error_line", "x.log",
                        1, fatal=False)
    ordered = groups.ordered()
    assert (ordered[0].template, ordered[0].count) == ("Zorblax shard <num> failed at <hex>",
                                                       10_000)
    assert ordered[0].line == 1 and ordered[0].example == "line 0"
    assert len(ordered) == 3 and groups.others == 3  # bounded: later templates only counted


def test_the_drafted_pattern_is_bounded_and_matches_its_example() -> None:
    template = "Zorblax <str> failed at <addr> after <num> tries in <path> (<size>, <hex>)"
    regex, names, literal = draft_regex(template)
    assert names == ["str1", "addr1", "num1", "path1", "size1", "hex1"]
    assert literal == "failed at"  # the longest fixed text: the prefilter's literal
    assert not nested_quantifier(regex) and not unanchored(regex)
    group = TemplateGroup(template, "generic.error_line", 2,
                          "Zorblax 'north' failed at 10.1.2.3:80 after 4 tries in /a/b.py "
                          "(3 GiB, 0xff)", HEAD + "Zorblax 'north' failed at 10.1.2.3:80 "
                          "after 4 tries in /a/b.py (3 GiB, 0xff)", "x.log", 7, False)
    body = tomllib.loads(draft_signature(group))
    assert body["status"] == "experimental" and body["id"].startswith("draft.zorblax")
    assert body["examples"][0]["captures"] == {
        "str1": "'north'", "addr1": "10.1.2.3:80", "num1": "4", "path1": "/a/b.py",
        "size1": "3 GiB", "hex1": "0xff"}
    assert body["counter_examples"][0]["text"] == near_miss(group.example, literal)
    assert "'north' Failed at" in body["counter_examples"][0]["text"]


@pytest.mark.slow
def test_draft_from_a_log_is_tested_linted_and_names_the_failure(tmp_path: Path) -> None:
    log, extra = tmp_path / "vllm.log", tmp_path / "site-signatures"
    log.write_text(KEYERROR_LOG)
    before = json.loads(logwatch_text("scan", "--json", str(log)).stdout)
    assert [g["template"] for g in before["unrecognised"]] == ["KeyError: <str>"]

    done = logwatch_text("signatures", "draft", str(log), "--group", "1", "--out", str(extra))
    assert done.returncode == 0, done.stderr
    [drafted] = list(extra.glob("*.toml"))
    body = tomllib.loads(drafted.read_text())
    assert body["examples"][0]["text"].endswith("KeyError: 'zorblax_slot_12'")
    for action in ("test", "lint"):
        checked = logwatch_text("signatures", "--signatures", str(extra), action)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    after = json.loads(logwatch_text("scan", "--json", "--signatures", str(extra),
                                     str(log)).stdout)
    root = after["incidents"][after["root_cause"]]
    assert root["signature"] == body["id"] and after["verdict"] == "failed"
    assert after["unrecognised"] == []  # the line is known now

    edited = drafted.read_text() + "# reviewed by the operator\n"
    drafted.write_text(edited)  # drafting the same group again never replaces it
    again = logwatch_text("signatures", "draft", str(log), "--group", "1", "--out", str(extra))
    assert again.returncode == 1 and "exists and is kept" in again.stderr
    assert drafted.read_text() == edited and list(extra.glob("*.toml")) == [drafted]


@pytest.mark.slow
def test_a_draft_from_a_line_longer_than_its_evidence_passes_its_own_test(tmp_path: Path
                                                                          ) -> None:
    """The example of a long line is cut (findings.MAX_EVIDENCE_CHARS): the pattern asks for
    no more than the example shows."""
    log, extra = tmp_path / "vllm.log", tmp_path / "site-signatures"
    detail = " ".join(f"shard {i} of zorblax table {i * 7} lost" for i in range(60))
    log.write_text(HEAD + f"Zorblax planner failed: {detail}\n")
    done = logwatch_text("signatures", "draft", str(log), "--out", str(extra))
    assert done.returncode == 0, done.stderr
    [drafted] = list(extra.glob("*.toml"))
    body = tomllib.loads(drafted.read_text())
    assert body["examples"][0]["text"].endswith("…[cut]")
    checked = logwatch_text("signatures", "--signatures", str(extra), "test")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_draft_masks_secrets_in_its_example(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    secret = "hf_" + "Zq8" * 12
    log.write_text(HEAD + f"Zorblax auth failed for token={secret} on port 8443\n")
    done = logwatch_text("signatures", "draft", str(log))
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout and "token=***" in done.stdout
    tomllib.loads(done.stdout)


@pytest.mark.slow
def test_draft_from_the_history(tmp_path: Path) -> None:
    log, db, extra = tmp_path / "vllm.log", tmp_path / "h.duckdb", tmp_path / "sigs"
    log.write_text("".join(HEAD + f"Zorblax handshake failed on port {9000 + i}\n"
                           for i in range(20)))
    assert logwatch_text("scan", "--db", str(db), str(log)).returncode == 1
    done = logwatch_text("signatures", "draft", "--db", str(db), "--out", str(extra))
    assert done.returncode == 0, done.stderr
    body = tomllib.loads(next(extra.glob("*.toml")).read_text())
    # the lines' logger tag (core.py) places them in the engine (core.signatures.placed)
    assert "20 line(s) of engine.unrecognised_error_line" in body["explanation"]
    assert body["patterns"][0]["literals"] == ["Zorblax handshake failed on port"]
    assert logwatch_text("signatures", "--signatures", str(extra), "test").returncode == 0
    missing = tmp_path / "missing.duckdb"  # a typo: said, and no empty history made there
    done = logwatch_text("signatures", "draft", "--db", str(missing))
    assert done.returncode == 2 and "no database yet" in done.stderr, done.stderr
    assert not missing.exists()


def test_draft_says_what_is_wrong(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(HEAD + "Zorblax handshake failed on port 9000\n")
    assert logwatch_text("signatures", "draft").returncode == 2
    wrong = logwatch_text("signatures", "draft", str(log), "--group", "5")
    assert wrong.returncode == 2 and "there are 1 group(s)" in wrong.stderr
    empty = tmp_path / "healthy.log"
    empty.write_text("")
    assert logwatch_text("signatures", "draft", str(empty)).returncode == 1


@pytest.mark.slow
def test_the_draft_examples_in_the_docs_run(tmp_path: Path) -> None:
    import shlex

    from tests.conftest import ROOT

    log, db = tmp_path / "vllm.log", tmp_path / "history.duckdb"
    log.write_text(KEYERROR_LOG + HEAD.replace("08:00:12", "08:00:13")
                   + "Zorblax handshake failed on port 9000\n")
    assert logwatch_text("scan", "--db", str(db), str(log)).returncode == 1
    names = {"vllm.log": str(log), "history.duckdb": str(db),
             "./site-signatures": str(tmp_path / "site-signatures")}
    commands = [line.split("#")[0] for doc in ("README.md", "docs/signatures.md")
                for line in (ROOT / doc).read_text().splitlines()
                if line.startswith("logwatch signatures draft")]
    assert len(commands) >= 5
    for command in commands:
        argv = [names.get(word, word) for word in shlex.split(command)[1:]]
        done = logwatch_text(*argv)
        assert done.returncode == 0, (command, done.stderr)
    assert len(list((tmp_path / "site-signatures").glob("*.toml"))) == 2
