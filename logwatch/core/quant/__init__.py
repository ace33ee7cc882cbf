"""What a checkpoint's quantization means to each vLLM release: the scheme vLLM derives
(scheme), which layers each release keeps unquantized (ignore_rules, layer_outcome, ignore for
`--hf-overrides`), which releases can run a model (releases), the MTP draft's layout and the
ignore entries that would cover it (mtp_layout, mtp_entries), and the layers Marlin cannot tile
at a tensor-parallel size (marlin_split). Facts over config dicts; leans on nothing else."""
