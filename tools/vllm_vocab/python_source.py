"""Message sites in Python source: raise, assert and logger calls, as templates (via `ast`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from tools.vllm_vocab.template import Message, escape, field

LOG_LEVELS = {"error": "ERROR", "exception": "ERROR", "critical": "CRITICAL",
              "warning": "WARNING", "warn": "WARNING", "fatal": "CRITICAL"}
# printf conversions as the logging module and `%` formatting accept them
_PERCENT = re.compile(
    r"%(?:\((\w+)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_FORMAT = re.compile(r"\{\{|\}\}|\{([^{}!:]*)(?:![rsa])?(?::[^{}]*)?\}")


def _is_logger(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name == "log" or name.endswith("logger")


def _level(call: ast.Call) -> str | None:
    func = call.func
    if not isinstance(func, ast.Attribute) or not _is_logger(func.value):
        return None
    return LOG_LEVELS.get(func.attr.removesuffix("_once"))


def _percent(text: str, args: list[ast.expr]) -> str:
    """`text % args` as a template; a dict argument fills `%(name)s`."""
    values = iter(args)
    out, position = [], 0
    for match in _PERCENT.finditer(text):
        out.append(escape(text[position:match.start()]))
        position = match.end()
        if match.group(2) == "%":
            out.append("%")
        elif match.group(1):
            out.append(field(match.group(1)))
        else:
            arg = next(values, None)
            out.append(field(ast.unparse(arg)) if arg is not None else "{}")
    out.append(escape(text[position:]))
    return "".join(out)


def _format(text: str, args: list[ast.expr], keywords: list[ast.keyword]) -> str:
    """`text.format(*args, **keywords)` as a template."""
    named = {k.arg: k.value for k in keywords if k.arg}
    out, position, index = [], 0, 0
    for match in _FORMAT.finditer(text):
        out.append(escape(text[position:match.start()]))
        position = match.end()
        if match.group(0) in ("{{", "}}"):
            out.append(match.group(0))
            continue
        key = match.group(1).split(".")[0].split("[")[0]
        value: ast.expr | None = None
        if key.isdigit():
            value = args[int(key)] if int(key) < len(args) else None
        elif key:
            value = named.get(key)
        else:
            value = args[index] if index < len(args) else None
            index += 1
        out.append(field(ast.unparse(value) if value is not None else key or "?"))
    out.append(escape(text[position:]))
    return "".join(out)


def template_of(node: ast.expr, known: Mapping[str, str] | None = None) -> str | None:
    """The template a message expression prints, or None when it has no literal wording.
    `known` holds the templates of local names assigned earlier (`msg = f"..."`), which an
    f-string field or a `+` naming them is replaced by."""
    known = known or {}
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return escape(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(escape(str(value.value)))
            elif isinstance(value, ast.FormattedValue):
                inner = value.value
                inlined = known.get(inner.id) if isinstance(inner, ast.Name) else None
                parts.append(inlined if inlined is not None else field(ast.unparse(inner)))
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template_of(node.left, known), template_of(node.right, known)
        if left is None and right is None:
            return None
        return (left or field(ast.unparse(node.left))) + (right or field(ast.unparse(node.right)))
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return _percent(node.left.value, list(args))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)):
        return _format(node.func.value.value, list(node.args), node.keywords)
    return None


def _raised_class(exc: ast.expr) -> tuple[str, ast.expr | None] | None:
    if isinstance(exc, ast.Call):
        func = exc.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name is None:
            return None
        return name, (exc.args[0] if exc.args else None)
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.found: list[Message] = []
        # per function: the template last assigned to each local name (`msg = f"..."`), so
        # `raise ValueError(msg)` keeps its wording
        self.assigned: list[dict[str, str]] = [{}]

    def _message(self, node: ast.expr) -> str | None:
        return template_of(node, self.assigned[-1])

    def _add(self, kind: str, label: str, template: str | None, node: ast.AST) -> None:
        if template is not None and template.strip():
            self.found.append(Message(kind, label, template, self.path,
                                      ".".join(self.scope) or "<module>",
                                      getattr(node, "lineno", 0)))

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.assigned.append({})
        self.generic_visit(node)
        self.assigned.pop()
        self.scope.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            template = template_of(node.value, self.assigned[-1])
            if template is not None:
                self.assigned[-1][node.targets[0].id] = template
            else:
                self.assigned[-1].pop(node.targets[0].id, None)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            known = self.assigned[-1].get(node.target.id)
            more = template_of(node.value, self.assigned[-1])
            if known is not None and more is not None:
                self.assigned[-1][node.target.id] = known + more
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Raise(self, node: ast.Raise) -> None:
        raised = _raised_class(node.exc) if node.exc is not None else None
        if raised is not None and raised[1] is not None:
            self._add("raise", raised[0], self._message(raised[1]), node)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is None:
            # a bare assert prints only `AssertionError`; its source line is the wording
            self._add("assert", "AssertionError", escape("assert " + ast.unparse(node.test)),
                      node)
        else:
            self._add("assert", "AssertionError", self._message(node.msg), node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        level = _level(node)
        if level is not None and node.args:
            first = node.args[0]
            template: str | None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and \
                    len(node.args) > 1:
                template = _percent(first.value, list(node.args[1:]))
            else:
                template = self._message(first)
            self._add("log", level, template, node)
        self.generic_visit(node)


def messages(source: str, path: str) -> list[Message]:
    """Every message site in one Python file; a file that does not parse gives none."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    visitor = _Visitor(path)
    visitor.visit(tree)
    return visitor.found
