"""What one vLLM release's `vllm serve` parser and environment table accept, read statically
(with `ast`, nothing of vLLM is imported or run) from its sources:

- flags: every option string literal given to an `add_argument(...)` call in the engine
  arguments (`vllm/engine/arg_utils.py`: the flags derived from the config dataclasses are
  spelled out there one by one), the server's `make_arg_parser` module and `vllm serve`'s own
  module; plus one `--field-name` per field of the frontend's `FrontendArgs` dataclass (and its
  bases in the same module), which vLLM adds in a loop as `--{field with dashes}`;
- environment variables: the keys of the `environment_variables` table in `vllm/envs.py`;
- architectures: the keys of the model registry's tables (`vllm/model_executor/models/
  registry.py`) that `_VLLM_MODELS` merges (every `_*_MODELS` table of the module but the
  previously and out-of-tree supported ones where a release has no `_VLLM_MODELS`): the
  `architectures` of a config.json that vLLM serves natively or through its own Transformers
  backend entries.

`--no-x` (BooleanOptionalAction), argparse's unique-prefix abbreviations and underscore
spellings are not stored: they are derived from these names when a command line is checked.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

ENGINE_ARGS = "vllm/engine/arg_utils.py"
ENVS = "vllm/envs.py"
SERVE = "vllm/entrypoints/cli/serve.py"
# The module with make_arg_parser and FrontendArgs: openai/ up to 0.28, launchers/ in 0.29-0.30,
# common/ from 0.31 (the first of these found is read).
FRONTEND = ("vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
            "vllm/entrypoints/common/cli_args.py")
REGISTRY = "vllm/model_executor/models/registry.py"
# where `SpeculativeMethod = Literal[...]` is: config/speculative.py from 0.11, config/__init__.py
# in 0.10.2, config.py before
SPECULATIVE = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")
PATHS = frozenset({ENGINE_ARGS, ENVS, SERVE, REGISTRY, *FRONTEND, *SPECULATIVE})
NOT_SERVED_TABLES = frozenset({"_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"})
FRONTEND_CLASS = "FrontendArgs"


@dataclass(frozen=True, slots=True)
class CliFacts:
    flags: frozenset[str]
    env: frozenset[str]
    architectures: frozenset[str] = frozenset()
    speculative_methods: frozenset[str] = frozenset()  # --speculative-config's `method`


class SourceMissing(ValueError):
    """A file the extraction needs is not in the release's sources."""


def extract(files: Mapping[str, str]) -> CliFacts:
    """The flags and environment variables of one release, from its files by relative path."""
    for needed in (ENGINE_ARGS, ENVS, REGISTRY):
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
    methods = next((found for path in SPECULATIVE if path in files
                    for found in [literal_values(ast.parse(files[path]), "SpeculativeMethod")]
                    if found), frozenset())
    return CliFacts(frozenset(flags), env_names(ast.parse(files[ENVS])),
                    architectures(ast.parse(files[REGISTRY])), methods)


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


def assignments(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) of each module-level assignment to one name (`x = ...`, `x: T = ...`),
    in order."""
    for node in tree.body:
        target: ast.expr
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name):
            yield target.id, value


def env_names(tree: ast.Module) -> frozenset[str]:
    """The string keys of the module-level `environment_variables` dict."""
    for name, value in assignments(tree):
        if name == "environment_variables" and isinstance(value, ast.Dict):
            return frozenset(k.value for k in value.keys
                             if isinstance(k, ast.Constant) and isinstance(k.value, str))
    raise SourceMissing(f"no environment_variables table in {ENVS}")


def architectures(tree: ast.Module) -> frozenset[str]:
    """The architecture names the registry serves: the string keys of the tables
    `_VLLM_MODELS` spreads (`**_TEXT_GENERATION_MODELS, ...`), or of every `_*_MODELS` table
    but those of models no longer served in tree."""
    tables = {name: value for name, value in assignments(tree) if isinstance(value, ast.Dict)}
    merged = tables.get("_VLLM_MODELS")
    if merged is not None:
        names = [v.id for k, v in zip(merged.keys, merged.values, strict=True)
                 if k is None and isinstance(v, ast.Name)]
    else:
        names = [n for n in tables if n.startswith("_") and n.endswith("_MODELS")
                 and n not in NOT_SERVED_TABLES]
    found = frozenset(k.value for name in names if name in tables for k in tables[name].keys
                      if isinstance(k, ast.Constant) and isinstance(k.value, str))
    if not found:
        raise SourceMissing(f"no model registry tables in {REGISTRY}")
    return found


def literal_values(tree: ast.Module, name: str) -> frozenset[str]:
    """The strings of the module-level `name = Literal[...]`, the Literal aliases it names
    (of the same module) followed; empty when the module has none."""
    aliases = dict(assignments(tree))

    def values(alias: str, seen: frozenset[str]) -> set[str]:
        node = aliases.get(alias)
        if alias in seen or not (isinstance(node, ast.Subscript)
                                 and ast.unparse(node.value) in ("Literal", "typing.Literal")):
            return set()
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        found: set[str] = set()
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.add(item.value)
            elif isinstance(item, ast.Name):
                found |= values(item.id, seen | {alias})
        return found

    return frozenset(values(name, frozenset()))
