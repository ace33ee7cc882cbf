"""The database schema: a version number, forward-only migrations, and documented views.

Every finding and incident references the snapshot (configuration) active when it occurred;
ids are content-derived, so recording the same log twice adds nothing.
"""

from __future__ import annotations

SCHEMA_VERSION = 7

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
        # one row per log source (file content identity, stdin, journald, child process)
        """CREATE TABLE sources (
            id VARCHAR PRIMARY KEY, kind VARCHAR, label VARCHAR, size BIGINT,
            first_seen TIMESTAMP, last_seen TIMESTAMP)""",
        # where reading a source stopped (byte offset or journald cursor) and its fingerprint
        """CREATE TABLE checkpoints (
            source_id VARCHAR PRIMARY KEY, position BIGINT, cursor VARCHAR,
            fingerprint VARCHAR, updated TIMESTAMP)""",
        """CREATE TABLE scans (
            id VARCHAR PRIMARY KEY, started TIMESTAMP, library_version VARCHAR,
            inputs VARCHAR[], stats JSON)""",
        """CREATE TABLE snapshots (
            hash VARCHAR PRIMARY KEY, first_recorded TIMESTAMP, model VARCHAR,
            quant_method VARCHAR, quant_scheme VARCHAR, tensor_parallel_size INTEGER,
            uses_mtp BOOLEAN, mtp_covered BOOLEAN, gpu_name VARCHAR, gpu_capability INTEGER,
            vllm_version VARCHAR, body JSON)""",
        """CREATE TABLE incidents (
            id VARCHAR PRIMARY KEY, scan_id VARCHAR, snapshot_hash VARCHAR, signature VARCHAR,
            signature_version INTEGER, library_version VARCHAR, category VARCHAR,
            severity VARCHAR, fatal BOOLEAN, root_cause BOOLEAN, count INTEGER,
            first_source VARCHAR, first_line BIGINT, first_time TIMESTAMP,
            last_line BIGINT, last_time TIMESTAMP, processes VARCHAR[], ranks VARCHAR[],
            captures JSON, title VARCHAR, explanation VARCHAR)""",
        """CREATE TABLE findings (
            id VARCHAR PRIMARY KEY, incident_id VARCHAR, source_id VARCHAR, line BIGINT,
            signature VARCHAR, signature_version INTEGER, library_version VARCHAR,
            snapshot_hash VARCHAR, time TIMESTAMP, process VARCHAR, pid INTEGER, rank VARCHAR,
            captures JSON, text VARCHAR)""",
        """CREATE TABLE diagnoses (
            id VARCHAR PRIMARY KEY, incident_id VARCHAR, snapshot_hash VARCHAR,
            cause VARCHAR, title VARCHAR, summary VARCHAR, confidence DOUBLE, body JSON,
            recorded TIMESTAMP)""",
        # one execution of a relaunch plan (the relaunch work fills it)
        """CREATE TABLE actions (
            id VARCHAR PRIMARY KEY, diagnosis_id VARCHAR, snapshot_hash VARCHAR,
            state VARCHAR, plan JSON, created TIMESTAMP, updated TIMESTAMP, log JSON)""",
    ),
    # the daemon resumes a file generation at a byte offset *and* a line number
    2: (
        "ALTER TABLE checkpoints ADD COLUMN generation VARCHAR",
        "ALTER TABLE checkpoints ADD COLUMN line BIGINT",
    ),
    # launches: one start of vLLM each; incidents belong to one, and recur as problems
    3: (
        """CREATE TABLE launches (
            id VARCHAR PRIMARY KEY, source_id VARCHAR, source VARCHAR, number INTEGER,
            start_line BIGINT, last_line BIGINT, seen_start BOOLEAN, started TIMESTAMP,
            snapshot_hash VARCHAR, outcome VARCHAR, exit_code INTEGER,
            root_cause VARCHAR, root_signature VARCHAR, root_problem VARCHAR,
            fatal_incidents INTEGER, failed_before INTEGER, updated TIMESTAMP)""",
        "ALTER TABLE incidents ADD COLUMN launch_id VARCHAR",
        "ALTER TABLE incidents ADD COLUMN problem VARCHAR",
        "ALTER TABLE diagnoses ADD COLUMN launch_id VARCHAR",
    ),
    # the action lifecycle (core/remedy/actions.py): what an action is for, its audited moves, and
    # what operators did to a target outside an action (a breaker reset); `snapshot_hash` of
    # an action is the configuration in force when it was proposed, `config_hash` the one
    # its plan results in
    4: (
        "ALTER TABLE actions ADD COLUMN target VARCHAR",
        "ALTER TABLE actions ADD COLUMN plan_hash VARCHAR",
        "ALTER TABLE actions ADD COLUMN config_hash VARCHAR",
        "ALTER TABLE actions ADD COLUMN signature VARCHAR",
        "ALTER TABLE actions ADD COLUMN fingerprint VARCHAR",
        """CREATE TABLE action_transitions (
            action_id VARCHAR, seq INTEGER, from_state VARCHAR, to_state VARCHAR,
            time TIMESTAMP, actor VARCHAR, reason VARCHAR, PRIMARY KEY (action_id, seq))""",
        """CREATE TABLE operator_events (
            id VARCHAR PRIMARY KEY, kind VARCHAR, target VARCHAR, time TIMESTAMP,
            actor VARCHAR, reason VARCHAR)""",
    ),
    # a record the history refused for its content (store/quarantine.py): kept here, out of
    # the way, so the source's reading moves on past it; `text` is the record's line as
    # evidence is kept (secrets masked, cut), `error` what DuckDB said of it. Every other
    # value parsed from a log fits its column already: numbers that cannot be what they say
    # (a 23-digit pid) are read as none (core/numbers.py), the line keeping them as written.
    5: (
        """CREATE TABLE quarantined (
            id VARCHAR PRIMARY KEY, source VARCHAR, source_id VARCHAR, line BIGINT,
            kind VARCHAR, signature VARCHAR, text VARCHAR, error VARCHAR,
            recorded TIMESTAMP)""",
    ),
    # launches in the order the history first heard of them (`seq`, 1, 2, ... over every
    # source): "the newest launch" is the last one recorded, never the one whose log time is
    # the latest (a clock step, DST or a timezone change sends log time backwards); rows of
    # older versions are numbered in the order they were last written
    6: (
        "ALTER TABLE launches ADD COLUMN seq BIGINT",
        """UPDATE launches SET seq = ordered.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated NULLS FIRST, source, number) AS n
            FROM launches) ordered
        WHERE launches.id = ordered.id""",
    ),
    # what the daemon's [[notify]] decided for each failed launch (paged, or held back as part
    # of a paged crash loop or a problem paged lately), once decided: a failure recorded just
    # before the daemon died is paged at its next start, one decided on is not paged again
    7: (
        """CREATE TABLE told (
            launch_id VARCHAR PRIMARY KEY, source VARCHAR, root_cause VARCHAR,
            told TIMESTAMP)""",
    ),
}

# a launch's row: whether it is there, its stored `seq`, and the next one, which it gets
# when it is first written (or when a row is there without one)
LAUNCH_SEQ = ("SELECT EXISTS (SELECT 1 FROM launches WHERE id = $1), "
              "(SELECT seq FROM launches WHERE id = $1), "
              "(SELECT coalesce(max(seq), 0) + 1 FROM launches)")

# Recreated on every open, so they always match the code that reads them.
VIEWS: dict[str, str] = {
    # Which configurations failed, and how: one row per snapshot whose launches failed
    # (`failed`; a launch `crashed` after serving, or `replaced` while starting, is not a
    # failure of its configuration).
    "failures_by_config": """
        SELECT s.hash AS snapshot, s.model, s.quant_scheme, s.tensor_parallel_size,
               s.uses_mtp, s.mtp_covered, s.gpu_name, s.gpu_capability, s.vllm_version,
               count(DISTINCT l.id) AS failed_launches,
               count(i.id) AS fatal_incidents, sum(i.count) AS occurrences,
               list(DISTINCT i.signature ORDER BY i.signature) AS signatures,
               list(DISTINCT l.root_signature ORDER BY l.root_signature)
                   FILTER (WHERE l.root_signature IS NOT NULL) AS root_causes,
               min(coalesce(l.started, i.first_time)) AS first_seen,
               max(i.last_time) AS last_seen
        FROM launches l JOIN snapshots s ON s.hash = l.snapshot_hash
        LEFT JOIN incidents i ON i.launch_id = l.id AND i.fatal
        WHERE l.outcome = 'failed'
        GROUP BY ALL""",
    # Every start of vLLM, newest (the last recorded) first: how it ended (starting, serving,
    # stopped, failed, crashed, replaced: see core/launches/lifecycle.py), why, and in which
    # configuration.
    "launch_history": """
        SELECT l.started, l.outcome, l.exit_code, l.root_signature, r.title AS root_title,
               l.failed_before, l.fatal_incidents, s.model, s.quant_scheme,
               s.tensor_parallel_size, s.gpu_capability, s.vllm_version, l.source,
               l.start_line, l.id AS launch_id, l.snapshot_hash, l.number, l.seq
        FROM launches l
        LEFT JOIN snapshots s ON s.hash = l.snapshot_hash
        LEFT JOIN incidents r ON r.id = l.root_cause
        ORDER BY l.seq DESC NULLS LAST, l.number DESC""",
    # The same incident (signature and key captures) over launches: "crashed 6 times with
    # this Marlin error since 09:12, across two configurations".
    "problems": """
        SELECT i.problem, i.signature, any_value(i.title) AS title,
               bool_or(i.fatal) AS fatal, count(DISTINCT i.launch_id) AS launches,
               count(DISTINCT i.launch_id) FILTER (WHERE l.root_cause = i.id)
                   AS launches_failed_by_it,
               sum(i.count) AS occurrences,
               count(DISTINCT i.snapshot_hash) AS configurations,
               list(DISTINCT i.snapshot_hash) AS snapshots,
               min(i.first_time) AS first_seen, max(i.last_time) AS last_seen,
               any_value(i.captures) AS captures
        FROM incidents i LEFT JOIN launches l ON l.id = i.launch_id
        WHERE i.problem IS NOT NULL
        GROUP BY i.problem, i.signature
        ORDER BY launches DESC, last_seen DESC NULLS LAST""",
    # Incidents in time order with their configuration and the diagnosis that explains them.
    "incident_timeline": """
        SELECT i.first_time, i.last_time, i.severity, i.fatal, i.root_cause, i.signature,
               i.count, i.title, i.launch_id, i.problem, s.model, s.quant_scheme,
               s.tensor_parallel_size,
               s.gpu_capability, d.cause AS diagnosis, d.confidence, i.id AS incident_id,
               i.snapshot_hash
        FROM incidents i
        LEFT JOIN snapshots s ON s.hash = i.snapshot_hash
        LEFT JOIN (SELECT * FROM diagnoses  -- the best-supported diagnosis of each incident
                   QUALIFY row_number() OVER (PARTITION BY incident_id
                                              ORDER BY confidence DESC, recorded DESC) = 1
                  ) d ON d.incident_id = i.id
        ORDER BY i.first_time NULLS LAST, i.first_line""",
}
