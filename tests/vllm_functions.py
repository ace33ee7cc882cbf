"""Running one of vLLM's pure functions from a release's sources, in isolation: its source
taken with `ast`, imports, decorators and annotations dropped, every global it does not need
replaced by a stand-in, so nothing of vLLM is copied into the repository or imported with its
dependencies. The sources themselves: tests/vllm_sources.py."""

from __future__ import annotations

import ast
import builtins
import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any

from tests.vllm_sources import SOURCES, read_sources


@functools.lru_cache(maxsize=512)
def read_source(release: str, path: str) -> str | None:
    """One file of one release (cached), None when the release or the file is absent."""
    files = read_sources(release, {path})
    return None if files is None else files.get(path)


def has_release(release: str) -> bool:
    return any((SOURCES / n).is_dir() for n in (release, f"vllm-{release}")) or (
        SOURCES / f"vllm-{release}.tar.gz").is_file()


class _StubMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return stub(f"{cls.__name__}.{name}")


class Stub(metaclass=_StubMeta):
    """Stands in for anything a function touches off its pure path: accepts any arguments,
    any attribute is another stand-in, calls return stand-ins, always truthy. Its class name
    says what it stands for (what a `get_quant_method` returned, for instance)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return stub(f"{type(self).__name__}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return stub(f"{type(self).__name__}()")()

    def __class_getitem__(cls, item: Any) -> Any:  # List[str] in a cast
        return cls


def stub(name: str) -> type[Stub]:
    return _StubMeta(name, (Stub,), {})


def _strip(node: ast.AST) -> ast.AST:
    """Drop imports (their names come from the namespace), decorators and annotations."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sub.decorator_list = []
            sub.returns = None
            sub.body = [s for s in sub.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
            if not sub.body:
                sub.body = [ast.Pass()]
            args = sub.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg,
                                                                        args.kwarg]:
                if arg is not None:
                    arg.annotation = None
        if isinstance(sub, ast.AnnAssign):
            sub.annotation = ast.Constant(None)
    return node


@functools.lru_cache(maxsize=256)
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


def find_def(source: str, qualname: str) -> ast.FunctionDef | None:
    """`name` at module level or `Class.name` (the first class defining it when Class is *);
    a copy, free to change."""
    tree = _parsed(source)
    owner, _, name = qualname.rpartition(".")
    bodies: list[list[ast.stmt]] = [tree.body] if not owner else [
        c.body for c in tree.body if isinstance(c, ast.ClassDef)
        and (owner == "*" or c.name == owner)]
    for body in bodies:
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return copy.deepcopy(node)
    return None


def free_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)} - set(dir(builtins))


def cut_after(node: ast.FunctionDef, marker: str, returns: str) -> None:
    """Keep the body up to the first top-level statement naming `marker`, then return a
    stand-in named `returns`: the rest of the body (kernel and backend choice, off the pure
    path) is what `returns` stands for. With no such statement, the whole body is."""
    body = node.body
    for index, statement in enumerate(body):
        if marker in ast.unparse(statement):
            body = body[:index + 1]
            break
    else:
        body = [s for s in body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)]
    call = ast.Call(func=ast.Call(func=ast.Name("__stub__", ast.Load()),
                                  args=[ast.Constant(returns)], keywords=[]),
                    args=[], keywords=[])
    node.body = [*body, ast.Return(value=call)]


def load_function(source: str, qualname: str, namespace: dict[str, Any],
                  stand_ins: bool = True, cut: tuple[str, str] | None = None
                  ) -> Callable[..., Any] | None:
    """vLLM's function `qualname` from `source`, defined in `namespace` (which later loads
    share, so functions can call each other); None when the release has no such function.
    Globals not in the namespace become stand-ins unless `stand_ins` is False; `cut`:
    (marker, name) for `cut_after`."""
    node = find_def(source, qualname)
    if node is None:
        return None
    node = _strip(node)  # type: ignore[assignment]
    if cut is not None:
        cut_after(node, *cut)
        namespace["__stub__"] = stub
    if stand_ins:
        for name in free_names(node):
            namespace.setdefault(name, stub(name))
    module = ast.Module(body=[node], type_ignores=[])
    exec(compile(ast.fix_missing_locations(module), f"<vllm {qualname}>", "exec"), namespace)
    function: Callable[..., Any] = namespace[node.name]
    return function


def load_functions(source: str, names: list[str], namespace: dict[str, Any],
                   stand_ins: bool = True) -> Mapping[str, Callable[..., Any] | None]:
    return {name: load_function(source, name, namespace, stand_ins) for name in names}


def load_constant(source: str, name: str) -> Any:
    """A module-level constant written as a literal (`_ALGOS = ("A", "B")`); None when the
    source has none by that name or it is not a literal."""
    for node in _parsed(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if \
            isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = getattr(node, "value", None)
            try:
                return ast.literal_eval(value) if value is not None else None
            except ValueError:
                return None
    return None
