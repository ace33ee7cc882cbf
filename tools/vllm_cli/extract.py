"""What one vLLM release's `vllm serve` parser and environment table accept, read statically
(with `ast`, nothing of vLLM is imported or run) from its sources:

- flags: every option string literal given to an `add_argument(...)` call in the engine
  arguments (`vllm/engine/arg_utils.py`: the flags derived from the config dataclasses are
  spelled out there one by one), the server's `make_arg_parser` module and `vllm serve`'s own
  module; plus one `--field-name` per field of the frontend's `FrontendArgs` dataclass (and its
  bases in the same module), which vLLM adds in a loop as `--{field with dashes}`;
- environment variables: the keys of the `environment_variables` table in `vllm/envs.py`.

`--no-x` (BooleanOptionalAction), argparse's unique-prefix abbreviations and underscore
spellings are not stored: they are derived from these names when a command line is checked.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

ENGINE_ARGS = "vllm/engine/arg_utils.py"
ENVS = "vllm/envs.py"
SERVE = "vllm/entrypoints/cli/serve.py"
# The module with make_arg_parser and FrontendArgs: openai/ up to 0.28, launchers/ in 0.29-0.30,
# common/ from 0.31 (the first of these found is read).
FRONTEND = ("vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
            "vllm/entrypoints/common/cli_args.py")
PATHS = frozenset({ENGINE_ARGS, ENVS, SERVE, *FRONTEND})
FRONTEND_CLASS = "FrontendArgs"


@dataclass(frozen=True, slots=True)
class CliFacts:
    flags: frozenset[str]
    env: frozenset[str]


class SourceMissing(ValueError):
    """A file the extraction needs is not in the release's sources."""


def extract(files: Mapping[str, str]) -> CliFacts:
    """The flags and environment variables of one release, from its files by relative path."""
    for needed in (ENGINE_ARGS, ENVS):
        if needed not in files:
            raise SourceMissing(f"{needed} not in the sources")
    frontend = [p for p in FRONTEND if "def make_arg_parser" in files.get(p, "")][:1]
    if not frontend:
        raise SourceMissing(f"none of {', '.join(FRONTEND)} in the sources")
    flags: set[str] = set()
    for path in (ENGINE_ARGS, SERVE, *frontend):
        if path in files:
            flags |= option_strings(ast.parse(files[path]))
    for path in frontend:
        flags |= dataclass_flags(ast.parse(files[path]), FRONTEND_CLASS)
    return CliFacts(frozenset(flags), env_names(ast.parse(files[ENVS])))


def option_strings(tree: ast.AST) -> set[str]:
    """The literal option strings (`--x`, `-x`) of every `add_argument` call."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "add_argument":
            found |= {arg.value for arg in node.args if isinstance(arg, ast.Constant)
                      and isinstance(arg.value, str) and arg.value.startswith("-")}
    return found


def dataclass_flags(tree: ast.Module, name: str) -> set[str]:
    """`--field-name` for each annotated field of class `name` and its bases in the module."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    found: set[str] = set()
    pending, seen = [name], set()
    while pending:
        current = pending.pop()
        if current in seen or current not in classes:
            continue
        seen.add(current)
        cls = classes[current]
        pending += [b.id for b in cls.bases if isinstance(b, ast.Name)]
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                    and not item.target.id.startswith("_") \
                    and "ClassVar" not in ast.unparse(item.annotation):
                found.add("--" + item.target.id.replace("_", "-"))
    return found


def env_names(tree: ast.Module) -> frozenset[str]:
    """The string keys of the module-level `environment_variables` dict."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
            else None)
        value = node.value if isinstance(node, ast.AnnAssign | ast.Assign) else None
        if isinstance(target, ast.Name) and target.id == "environment_variables" \
                and isinstance(value, ast.Dict):
            return frozenset(k.value for k in value.keys
                             if isinstance(k, ast.Constant) and isinstance(k.value, str))
    raise SourceMissing(f"no environment_variables table in {ENVS}")
