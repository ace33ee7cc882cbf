"""Why a launch failed, and what will fail before it does: the diagnosis model (model), the
rules that join incidents and a snapshot into causes (diagnose, marlin_rules, mtp_rules,
mtp_coverage), latent problems the snapshot shows before the log does (latent), the one analysis
of a launch for the scan and the daemon (analysis), and pre-flight predictions (preflight).
Leans on `launches`, `signatures`, `snapshot` and `quant`."""
