"""A vocabulary wording written as a curated.toml entry, for a person to review and keep."""

from __future__ import annotations

import re

from tools.vllm_vocab.vocabulary import Wording

# Raised while the API server builds its configuration: no engine line comes before them.
API_FILES = re.compile(r"^vllm/(config|engine/arg_utils\.py|entrypoints/|envs\.py|"
                       r"platforms/|transformers_utils/config)")
_AREA_SHORT = {"marlin": "marlin", "quantization configs": "quant",
               "nvfp4/mxfp4 backends": "fp4", "speculative decoding/MTP": "spec",
               "model loading": "model", "worker/engine/memory": "engine",
               "distributed": "dist", "config validation": "config", "other": "other"}
_STOP = frozenset({"the", "a", "an", "is", "be", "to", "of", "for", "and", "or", "in", "on",
                   "with", "by", "not", "are", "this", "that", "it", "please", "as"})


def slug(wording: Wording) -> str:
    """An id from the area and the first telling words of the wording."""
    text = re.sub(r"\{[^{}]*\}", " ", wording.template.removeprefix("assert "))
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP][:6]
    return f"{_AREA_SHORT[wording.area]}.{'_'.join(words) or wording.label.lower()}"


def _string(text: str) -> str:
    if "'''" not in text and not text.endswith("'"):
        return f"'''{text}'''" if "\n" in text else f"'{text}'" if "'" not in text else \
            f"'''{text}'''"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def stub(wording: Wording, ident: str) -> str:
    """The [[message]] table for one wording."""
    fatal = wording.kind != "log" or wording.label in ("ERROR", "CRITICAL")
    process = "api" if API_FILES.match(wording.file) else "engine"
    releases = ", ".join(f'"{r}"' for r in wording.releases)
    return "\n".join([
        "[[message]]",
        f'id = "{ident}"',
        f'area = "{wording.area}"',
        f'kind = "{wording.kind}"',
        f'label = "{wording.label}"',
        f"template = {_string(wording.template)}",
        f'file = "{wording.file}"',
        f'function = "{wording.function}"',
        f"releases = [{releases}]",
        f"fatal = {'true' if fatal else 'false'}",
        f'process = "{process}"',
        "",
    ])
