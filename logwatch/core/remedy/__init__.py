"""The corrected launch and the rules around carrying it out: the plan (plan, over fp4_backend
for each release's W4A4 backend switches), the systemd drop-in that carries it (dropin), the
action state machine (actions), the relaunch guardrails (policy) and whether a relaunch worked
(verify). Leans on `diagnosis`, `launches`, `snapshot`, `quant`, `settings` and `signatures`."""
