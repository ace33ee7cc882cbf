"""The triage report: a launch's incidents, root cause and diagnoses as a JSON-ready dict
(triage), rendered for a terminal (text), and the one way a time from the history is written
(timestamps). Leans on `diagnosis`, `launches`, `snapshot`, `signatures` and `safe_text`."""
