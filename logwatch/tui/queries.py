"""The SQL the TUI asks the history, through the daemon's socket or (no daemon) a read-only
file. Fixed text: nothing read from a log is ever part of it; a value chosen on screen (an
incident or an action id) travels as a JSON string literal checked to be printable
(`literal`), because the socket's `sql` request takes no parameters."""

from __future__ import annotations

import json
import re

# the newest launch of each source (by its number: never by log time, which can go back),
# with its configuration's facts
TARGETS = """
SELECT l.source, l.id, l.number, l.outcome, l.started, l.updated, l.root_signature,
       l.failed_before, l.snapshot_hash, s.gpu_name, s.gpu_capability,
       -- the installed release the snapshot found, else the one the launch's log announced
       coalesce(s.vllm_version, (SELECT json_extract_string(i.captures, '$.version')
                                 FROM incidents i WHERE i.launch_id = l.id
                                   AND i.signature = 'lifecycle.version' LIMIT 1))
         AS vllm_version,
       s.quant_scheme, s.uses_mtp, s.mtp_covered,
       json_extract_string(s.body, '$.model.quant.marlin_on_this_gpu') AS marlin,
       json_extract_string(s.body, '$.model.mtp.modules') AS mtp_modules,
       json_array_length(json_extract(s.body, '$.model.mtp.uncovered_bf16')) AS mtp_uncovered
FROM launches l LEFT JOIN snapshots s ON s.hash = l.snapshot_hash
QUALIFY row_number() OVER (PARTITION BY l.source
                           ORDER BY l.number DESC, l.seq DESC NULLS LAST) = 1
ORDER BY l.source"""

# incidents of each source's newest launch: root cause first, then by severity; an info
# incident only with a diagnosis (a latent problem: the kernel vLLM chose, FP4 on Marlin)
OPEN_INCIDENTS = """
WITH newest AS (
  SELECT id FROM launches
  QUALIFY row_number() OVER (PARTITION BY source
                             ORDER BY number DESC, seq DESC NULLS LAST) = 1)
SELECT i.id, i.severity, i.fatal, i.root_cause, i.signature, i.title, i.count,
       i.first_time, l.source, d.title AS diagnosis
FROM incidents i JOIN newest n ON n.id = i.launch_id JOIN launches l ON l.id = i.launch_id
LEFT JOIN (SELECT * FROM diagnoses QUALIFY row_number() OVER (
             PARTITION BY incident_id ORDER BY confidence DESC, recorded DESC) = 1
          ) d ON d.incident_id = i.id
WHERE i.severity IN ('critical', 'error', 'warning') OR d.title IS NOT NULL
ORDER BY i.root_cause DESC, CASE i.severity WHEN 'critical' THEN 0 WHEN 'error' THEN 1
         WHEN 'warning' THEN 2 ELSE 3 END, i.first_time
LIMIT 50"""

# what happened lately, from the history: the activity a TUI shows when it connects
RECENT = """
SELECT * FROM (
  SELECT l.updated AS time, 'launch' AS kind, l.source AS who, l.outcome AS what,
         coalesce(l.root_signature, '') AS why FROM launches l
  UNION ALL
  SELECT t.time, 'action', a.target, t.to_state, t.actor || ': ' || t.reason
  FROM action_transitions t JOIN actions a ON a.id = t.action_id
  UNION ALL
  SELECT d.recorded, 'diagnosis', coalesce(l.source, ''), d.title, ''
  FROM diagnoses d LEFT JOIN launches l ON l.id = d.launch_id
) ORDER BY time DESC NULLS LAST LIMIT 12"""

# actions not finished (no daemon to ask: what the history says)
OPEN_ACTIONS = """
SELECT id, target, state, (SELECT reason FROM action_transitions t WHERE t.action_id = a.id
                           ORDER BY seq DESC LIMIT 1) AS reason
FROM actions a
WHERE state IN ('proposed', 'awaiting_approval', 'approved', 'blocked', 'applying',
                'restarting', 'verifying', 'rolling_back')
ORDER BY created"""

# the newest actions of each target, for a target's state after a relaunch ended
LAST_ACTIONS = """
SELECT target, id, state, updated FROM actions
QUALIFY row_number() OVER (PARTITION BY target ORDER BY updated DESC) = 1"""

# hits per signature (the signatures screen), and per hour over the last day (history)
SIGNATURE_HITS = """
SELECT signature, count(*) AS hits, max(time) AS last FROM findings GROUP BY signature"""
# (with each hour's worst severity and whether a root cause was among them: the chart
# ranks by those before counts)
TIMELINE = """
SELECT signature, date_trunc('hour', first_time) AS hour, count(*) AS incidents,
       min(CASE severity WHEN 'critical' THEN 0 WHEN 'error' THEN 1 WHEN 'warning' THEN 2
           ELSE 3 END) AS severity_rank,
       bool_or(coalesce(root_cause, false)) AS root_cause
FROM incidents WHERE first_time IS NOT NULL
  AND first_time >= (SELECT max(first_time) FROM incidents) - INTERVAL 2 DAY
GROUP BY ALL ORDER BY signature, hour"""

PRESETS = {
    "failures_by_config": "SELECT * FROM failures_by_config ORDER BY last_seen DESC",
    "incident_timeline": "SELECT * FROM incident_timeline ORDER BY first_time DESC "
                         "NULLS LAST LIMIT 200",
    "launch_history": "SELECT * FROM launch_history LIMIT 200",
    "problems": "SELECT * FROM problems",
}


def literal(value: str) -> str:
    """An id or a name as an SQL string expression: printable ASCII runs quoted (quotes
    doubled), every other character as `chr(N)`, joined with `||`; the text sent holds no
    control character whatever the value (ValueError past 1,000 characters: no id is that
    long)."""
    if len(value) > 1000:
        raise ValueError(f"not an id: {value[:40]!r}…")
    parts = ["''"]
    for run in re.findall(r"[ -~]+|[^ -~]", value):
        parts.append("'" + run.replace("'", "''") + "'" if " " <= run[0] <= "~"
                     else f"chr({ord(run)})")
    return parts[-1] if len(parts) == 2 and parts[-1].startswith("'") else " || ".join(parts)


def incident(incident_id: str) -> str:
    return f"""
SELECT i.id, i.signature, i.signature_version, i.severity, i.fatal, i.root_cause, i.count,
       coalesce((SELECT s.label FROM sources s WHERE s.id = i.first_source), i.first_source)
         AS first_source, i.first_line, i.first_time, i.last_time, i.processes, i.ranks,
       i.captures, i.title, i.explanation, i.launch_id, i.snapshot_hash
FROM incidents i WHERE i.id = {literal(incident_id)}"""


def incident_findings(incident_id: str) -> str:
    return f"""
SELECT line, time, process, rank, text FROM findings WHERE incident_id = {literal(incident_id)}
ORDER BY line LIMIT 20"""


def diagnoses(incident_id: str) -> str:
    return f"""
SELECT cause, title, summary, confidence, body->'config' AS config, body->'details' AS details
FROM diagnoses
WHERE incident_id = {literal(incident_id)} ORDER BY confidence DESC"""


def snapshot_body(digest: str) -> str:
    return f"SELECT body FROM snapshots WHERE hash = {literal(digest)}"


def last_healthy_before(launch_id: str) -> str:
    """The configuration of the newest launch of the same source that served (and stopped,
    or crashed later), before it."""
    return f"""
SELECT h.snapshot_hash FROM launches h JOIN launches l ON l.id = {literal(launch_id)}
WHERE h.source = l.source AND h.outcome IN ('serving', 'stopped', 'crashed') AND h.id <> l.id
  AND h.snapshot_hash IS NOT NULL AND h.snapshot_hash <> l.snapshot_hash
ORDER BY h.number DESC, h.seq DESC NULLS LAST LIMIT 1"""


def launch_actions(target: str, number: int) -> str:
    """The actions proposed for launch `number` of a target (their ids are
    `TARGET-NUMBER-PLAN`), with every move."""
    return f"""
SELECT a.id, a.state, a.plan, t.seq, t.to_state, t.time, t.actor, t.reason
FROM actions a JOIN action_transitions t ON t.action_id = a.id
WHERE a.target = {literal(target)} AND starts_with(a.id, {literal(f"{target}-{int(number)}-")})
ORDER BY a.created, t.seq"""


def action_plan(action_id: str) -> str:
    return f"SELECT target, state, plan FROM actions WHERE id = {literal(action_id)}"


def json_value(cell: object) -> object:
    """A JSON column as the socket or DuckDB gives it (text either way)."""
    if isinstance(cell, str):
        try:
            return json.loads(cell)
        except ValueError:
            return cell
    return cell
