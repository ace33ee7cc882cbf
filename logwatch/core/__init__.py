"""The pure core: everything that decides, as functions over plain dataclasses.

No files, sockets, processes, threads or wall clock, and no shell library
(tests/test_architecture.py
checks every module's imports). It is a few domain packages, each leaning only on those listed
for it in that test: `safe_text` (secrets masked, controls shown) and `lines` (vLLM's line
grammar and record assembly) at the bottom; `signatures` (the library, lint, prefilter, matcher)
over them; `launches` (incidents, launches, the fallback on a launch) over those; `quant` (what
a checkpoint's quantization means to each vLLM release) and `snapshot` (the configuration in
force) beside them; `diagnosis` (causes, latent problems, pre-flight) over all of these;
`settings` (the daemon's configuration model); `remedy` (the corrected launch, its guardrails
and verification) and `report` (the triage report) at the top. `problems` and `write_health`
are leaves any package may use."""
