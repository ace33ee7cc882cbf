# Two entry points on a fresh machine: `make demo` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	@echo "== logwatch scan on the annotated sample of a failed NVFP4 + MTP launch =="
	-$(BIN)/logwatch scan samples/logs/demo_marlin_and_mtp.log
	@echo
	@echo "== the same scan as JSON (first lines) =="
	-$(BIN)/logwatch scan --json samples/logs/demo_marlin_and_mtp.log | head -25

lint: $(STAMP)
	$(BIN)/ruff check logwatch tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy logwatch

unit: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran"; exit 0; fi; exit $$rc

test: lint typecheck unit
	$(BIN)/logwatch signatures test > /dev/null
	$(BIN)/logwatch signatures lint

bench: $(STAMP)
	$(BIN)/python benchmarks/scan_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
