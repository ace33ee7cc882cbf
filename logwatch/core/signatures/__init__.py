"""The signature library and matching: the signature model (signature), loading and checking the
library from TOML texts (library), lint, the literal prefilter (prefilter), the matcher that
runs patterns under a time budget (matcher), the block scanner that runs it near prefilter hits
only (block_scan), findings and their evidence (findings), the generic fallback on one record
(fallback), and unrecognised lines grouped into templates and drafted into signatures
(templates, draft). Leans on `lines` and `safe_text`."""
