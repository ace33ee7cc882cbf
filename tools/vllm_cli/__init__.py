"""Extract the `vllm serve` flags and VLLM_* environment variables each vLLM release knows."""
