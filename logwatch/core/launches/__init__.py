"""Findings become incidents and launches: findings of one signature and key captures grouped
into incidents with a root cause (incidents), one start of vLLM with its incidents and how it
ended (lifecycle), and the generic fallback applied to a whole launch (unrecognised). Leans on
`signatures` and `lines`."""
