"""The stand-in's `vllm serve` command line, parsed as vLLM's argparse parser does: the flags a
demo or test launch uses, `-tp`-style short forms, JSON-valued flags, the flags a release does
not have refused, and any unknown flag refused with argparse's usage error (exit 2).

`--linear-backend` / `--moe-backend` are absent from arg_utils.py in 0.11.2-0.20.2 and present
from 0.23.0 (sdists read); a release before 0.23.0 is treated as lacking them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, NoReturn

from logwatch.core.quant.ignore_rules import Release
from logwatch.demo.standin_outcome import Launch

USAGE = "vllm serve [model_tag] [options]"
BACKEND_FLAGS_FROM: Release = (0, 23, 0)
SECRET_KEYS = ("api_key",)


class UsageError(Exception):
    """What argparse would print after the usage line, as `vllm serve: error: ...`."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def build_parser(release: Release) -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm serve", usage=USAGE, add_help=False, allow_abbrev=False)
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+")
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parser.add_argument("--speculative-config", "-sc", type=_json_dict)
    parser.add_argument("--hf-overrides", type=_json_dict)
    parser.add_argument("--quantization", "-q")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--kv-cache-dtype")
    parser.add_argument("--dtype")
    parser.add_argument("--api-key")
    parser.add_argument("--generation-config")
    for flag in ("--trust-remote-code", "--enforce-eager", "--disable-log-stats",
                 "--disable-uvicorn-access-log", "--enable-expert-parallel"):
        parser.add_argument(flag, action="store_true")
    if release >= BACKEND_FLAGS_FROM:
        parser.add_argument("--linear-backend")
        parser.add_argument("--moe-backend")
    return parser


def parse_serve(argv: list[str], release: Release) -> tuple[Launch, argparse.Namespace]:
    """The launch an argv after `serve` asks for; UsageError as vLLM's parser would raise it."""
    parser = build_parser(release)
    args = parser.parse_args(argv)
    model = args.model_tag or args.model
    if not model:
        raise UsageError("the following arguments are required: model_tag")
    defaults = vars(parser.parse_args([model]))
    non_default = {("model_tag" if k == "model" else k): ("***" if k in SECRET_KEYS else v)
                   for k, v in vars(args).items() if v != defaults.get(k)
                   or (k == "model_tag" and v)}
    if "model_tag" not in non_default:
        non_default = {"model_tag": model, **non_default}
    launch = Launch(
        model=model, served_model_names=tuple(args.served_model_name or ()),
        host=args.host or "127.0.0.1", port=args.port,
        tensor_parallel_size=args.tensor_parallel_size, quantization=args.quantization,
        speculative_config=args.speculative_config, hf_overrides=args.hf_overrides,
        max_model_len=args.max_model_len,
        linear_backend=getattr(args, "linear_backend", None),
        moe_backend=getattr(args, "moe_backend", None), non_default=non_default)
    return launch, args
