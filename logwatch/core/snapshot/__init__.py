"""The configuration in force: the snapshot model (model), a `vllm serve` command line parsed and
rendered back (argv), the flags and VLLM_* variables each release knows (vllm_cli, over the
extracted data/vllm_cli.json), and the shells' raw facts (nvidia-smi, `systemctl show`, /proc,
what vLLM logs of itself) parsed into snapshot parts (host_facts). Leans on `quant` and
`safe_text`."""
