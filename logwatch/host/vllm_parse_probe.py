"""Run with a real vLLM's interpreter (never imported by logwatch; logwatch/host/
vllm_parser.py runs it): does that release's own `vllm serve` parser accept a command line,
and does the release know every VLLM_* variable of an environment?

    /path/to/vllm-venv/bin/python -I logwatch/host/vllm_parse_probe.py ARGV_JSON ENV_JSON

ARGV_JSON is the command line from `serve` on (["serve", MODEL, "--flag", ...]); ENV_JSON the
variables the launch sets. Prints one JSON object: {"accepted": bool, "error": str,
"unknown_env": [...]}. Nothing is started: vLLM's parser and its own validation of the
parsed arguments are called, and its table of environment variables read. Exit 0 whatever
the answer (argparse's exit is caught); 1 only when vLLM cannot be imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def main(argv_json: str, env_json: str) -> int:
    try:
        import vllm.entrypoints.cli.serve as serve
        import vllm.envs as envs
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:
        print(json.dumps({"accepted": False, "error": f"cannot import vLLM: {exc}"}))
        return 1
    words = json.loads(argv_json)
    env = json.loads(env_json)
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    commands = {}
    for command in serve.cmd_init():
        command.subparser_init(subparsers)
        commands[command.name] = command
    error = io.StringIO()
    accepted = True
    reason = ""
    try:
        with contextlib.redirect_stderr(error):
            args = parser.parse_args(words)
            commands[args.subparser].validate(args)
    except SystemExit:
        accepted = False
        said = error.getvalue().strip().splitlines()
        reason = said[-1] if said else "argparse refused it"
    except Exception as exc:  # the release's own validation of the parsed arguments
        accepted = False
        reason = f"{type(exc).__name__}: {exc}"
    known = set(getattr(envs, "environment_variables", {}))
    unknown = sorted(k for k in env if k.startswith("VLLM_") and known and k not in known)
    try:
        from importlib.metadata import version
        release = version("vllm")
    except Exception:  # a build without metadata
        release = getattr(__import__("vllm"), "__version__", "?")
    print(json.dumps({"accepted": accepted, "error": reason, "unknown_env": unknown,
                      "release": release}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
