"""The demo's parts: a vLLM stand-in (`python -m logwatch.demo.standin serve MODEL_DIR ...`)
that prints a real release's lines and fails or serves as that release would, so the whole
loop (failure, diagnosis, relaunch, verification) runs without a GPU."""
