"""Message sites in C++/CUDA source: TORCH_CHECK and friends, their string/expression
arguments concatenated into one template."""

from __future__ import annotations

import bisect
import re

from tools.vllm_vocab.template import Message, escape, field

MACROS = ("TORCH_CHECK_NOT_IMPLEMENTED", "STD_TORCH_CHECK", "TORCH_CHECK")
_MACRO = re.compile(r"\b(" + "|".join(MACROS) + r")\s*\(")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_STRING = re.compile(r'(?:u8|[uUL])?"((?:\\.|[^"\\\n])*)"')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "0": ""}
_FUNCTION = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{")
_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof"})


def strip_comments(source: str) -> str:
    """Comments blanked (newlines kept, so line numbers hold); strings left alone."""
    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return text if text[0] in "\"'" else re.sub(r"[^\n]", " ", text)
    return _COMMENT.sub(blank, source)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def arguments(source: str, start: int) -> tuple[list[str], int] | None:
    """The top-level comma-separated arguments of the call whose `(` is at `start`, and the
    index after its `)`; None when the parentheses never close."""
    depth, current, args = 0, [], []
    index = start
    while index < len(source):
        char = source[index]
        if char in "\"'":
            end = index + 1
            while end < len(source) and source[end] != char:
                end += 2 if source[end] == "\\" else 1
            current.append(source[index:end + 1])
            index = end + 1
            continue
        if char in "([{":
            depth += 1
            if depth == 1:
                index += 1
                continue
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args, index + 1
        elif char == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            index += 1
            continue
        current.append(char)
        index += 1
    return None


def template_of(parts: list[str]) -> str:
    """The message TORCH_CHECK builds from its arguments after the condition: string literals
    (adjacent ones joined) as text, anything else as a placeholder."""
    out = []
    for part in parts:
        literals = list(_STRING.finditer(part))
        rest = _STRING.sub("", part).strip()
        if literals and not rest:
            out.append(escape("".join(_unescape(m.group(1)) for m in literals)))
        elif part:
            out.append(field(" ".join(part.split())))
    return "".join(out)


def _function_starts(source: str) -> tuple[list[int], list[str]]:
    """Where each function definition's body opens, and its name (a heuristic: enough to say
    which kernel entry point a check sits in)."""
    starts, names = [], []
    for match in _FUNCTION.finditer(source):
        if match.group(1) not in _NOT_FUNCTIONS:
            starts.append(match.end())
            names.append(match.group(1))
    return starts, names


def messages(source: str, path: str) -> list[Message]:
    """Every TORCH_CHECK-family message in one C++/CUDA file."""
    if "TORCH_CHECK" not in source:
        return []
    code = strip_comments(source)
    starts, names = _function_starts(code)
    found = []
    for match in _MACRO.finditer(code):
        parsed = arguments(code, match.end() - 1)
        if parsed is None:
            continue
        args, _ = parsed
        template = template_of(args[1:])
        if template.strip():
            line = code.count("\n", 0, match.start()) + 1
            index = bisect.bisect_right(starts, match.start()) - 1
            function = names[index] if index >= 0 else "<file>"
            found.append(Message("torch_check", match.group(1), template, path,
                                 function, line))
    return found
