"""Whether vLLM quantizes a layer, as a function of the quantization method and the release.

How a layer escapes quantization changed many times (verified against each release's sources
and, in the tests, against vLLM's own functions run on the same cases):
- compressed-tensors: an entry matches exactly or, with `re:`, by `regex.match`; a fused
  layer (qkv_proj) is ignored when its exact name is listed, else when all its shards are
  (some but not all: an error); from 0.30 a `re:` entry matching the fused name counts too.
  MoE layers: before 0.12 the ignore list is not read for them; from 0.12 expert 0's
  projections decide (all ignored: unquantized; some: an error).
- Quark: the same matching, but a fused name counts only from 0.30; an exclude entry naming
  the MoE layer itself fails the load before 0.26 (an unquantized *linear* method on an MoE
  layer), entries naming its children (`...experts.*.down_proj`) count only from 0.26.
- ModelOpt never reads `re:` entries: exact names (with fused shards and, from 0.11, an
  experts rule), then substrings, then glob (fnmatch from 0.12, a `.`/`*` glob for NVFP4
  before); its MoE layers honour the exclude list only from 0.11.1 (NVFP4) / 0.12 (FP8).
- GPTQ: `dynamic` keys `-:regex` exclude by `re.match` (first matching key wins), and from
  0.11 `modules_in_block_to_quantize` lists the quantized modules by substring (absent, the
  checkpoint's quantized modules). AWQ: `modules_to_not_convert` by substring. FP8:
  `ignored_layers` exactly (fused shards, the experts rule), MoE layers from 0.11.0.
Outcomes: "quantized", "unquantized", "error" (vLLM refuses to load the model).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping, Sequence

import regex

Release = tuple[int, int, int]
QUANTIZED, UNQUANTIZED, ERROR = "quantized", "unquantized", "error"
# The releases whose sources the rules were checked against (tests/test_ignore_rules_oracle.py).
MATRIX_TEXT = ("0.8.5", "0.9.2", "0.10.0", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0",
               "0.13.0", "0.14.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0",
               "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0",
               "0.30.0", "0.31.0", "0.32.0", "0.33.0")
# Checkpoint shards of the layers vLLM fuses (packed_modules_mapping of the models in scope).
FUSED: Mapping[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
    "fused_qkv_a_proj": ("q_a_proj", "kv_a_proj_with_mqa"),
    "in_proj_qkvz": ("in_proj_qkv", "in_proj_z"), "in_proj_ba": ("in_proj_b", "in_proj_a")}
SHARD_TO_FUSED = {shard: fused for fused, shards in FUSED.items() for shard in shards}
MODELOPT = ("modelopt", "modelopt_fp4", "modelopt_mixed")
PATTERN_TIMEOUT_S = 0.05


class MixedShards(ValueError):
    """Some but not all shards of a fused layer are ignored: vLLM refuses the model."""


def parse_release(text: str | None) -> Release | None:
    """`0.20.2`, `v0.20.2rc1`, `0.20.2+cu128` -> (0, 20, 2); None when absent or unreadable."""
    # at most 6 digits a part: a version that long is no release, and `int` of thousands of
    # digits (a version line in a hostile log) is refused by Python itself
    found = re.search(r"(?<!\d)(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?!\d)", text or "")
    if not found:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


def one_version(logged: str | None, installed: str | None) -> str | None:
    """The one version a snapshot records when vLLM's log and its installed package both say
    one: the installed string when it is the same release (`0.32.0+cpu` for a log's `0.32.0`:
    the local build tag kept as seen), else what the log says (what ran). Releases are
    compared without the tag (parse_release)."""
    if not logged or not installed:
        return logged or installed

    def public(text: str) -> str:
        return text.strip().lstrip("vV").split("+", 1)[0]

    return installed if public(installed) == public(logged) else logged


def _matrix() -> tuple[Release, ...]:
    releases = [parse_release(text) for text in MATRIX_TEXT]
    return tuple(r for r in releases if r is not None)


def release_text(release: Release) -> str:
    return ".".join(map(str, release))


MATRIX = _matrix()


def release_ranges(chosen: Sequence[Release], among: Sequence[Release]) -> list[str]:
    """`chosen` as runs of consecutive releases of `among`: ["0.16.0-0.25.1", "0.33.0"]."""
    runs: list[list[Release]] = []
    previous = -2
    for index, release in enumerate(among):
        if release in chosen:
            if index == previous + 1 and runs:
                runs[-1].append(release)
            else:
                runs.append([release])
            previous = index
    return [release_text(r[0]) if len(r) == 1 else f"{release_text(r[0])}-{release_text(r[-1])}"
            for r in runs]


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> regex.Pattern[str] | None:
    try:
        return regex.compile(pattern)
    except regex.error:
        return None  # vLLM raises on a broken pattern; here it simply ignores nothing


def _rx(pattern: str, name: str) -> bool:
    compiled = _compiled(pattern)
    try:
        return compiled is not None and compiled.match(name, timeout=PATTERN_TIMEOUT_S) \
            is not None
    except TimeoutError:
        return False  # a pathological entry ignores nothing


def _eq_or_re(name: str, entry: str) -> bool:
    return _rx(entry[3:], name) if entry.startswith("re:") else entry == name


def _shards(layer: str) -> list[str] | None:
    leaf = layer.rsplit(".", 1)[-1]
    if leaf not in FUSED:
        return None
    return [layer.replace(leaf, shard) for shard in FUSED[leaf]]


def _all_or_none(layer: str, flags: Sequence[bool]) -> bool:
    if any(flags) and not all(flags):
        raise MixedShards(f"some but not all shards of {layer} are ignored")
    return all(flags)


def ct_quark_layer_ignored(method: str, release: Release, layer: str,
                           entries: Sequence[str], moe_children: bool = False) -> bool:
    """compressed-tensors' / Quark's `should_ignore_layer` for a vLLM layer name."""
    if method == "quark" and moe_children and release >= (0, 26, 0) and any(
            e == layer or e.startswith(layer + ".") for e in entries if not e.startswith("re:")):
        return True
    direct = any(_eq_or_re(layer, e) for e in entries)
    shards = _shards(layer)
    if release >= (0, 30, 0) and direct:
        return True
    if shards is None:
        return direct
    if method == "compressed-tensors" and layer in entries:
        return True
    return _all_or_none(layer, [any(_eq_or_re(s, e) for e in entries) for s in shards])


def modelopt_layer_skipped(release: Release, layer: str, entries: Sequence[str],
                           fused: bool = True) -> bool:
    """`is_layer_skipped` (quant_utils) in its default exact mode; `fused`: whether the
    caller passes the fused-layer table (without it a shard entry never matches)."""
    shards = _shards(layer) if fused else None
    if shards is not None and release >= (0, 24, 0) and layer in entries:
        return True
    if shards is not None:
        return _all_or_none(layer, [s in entries for s in shards])
    if "experts" in layer and release >= (0, 11, 0):
        return any(layer in e for e in entries if "experts" in e)
    return layer in entries


def _substring(layer: str, entries: Sequence[str]) -> bool:
    stripped = layer.removeprefix("language_model.")
    return any(e != layer and (e in layer or (layer.startswith("language_model.")
                                              and e in stripped)) for e in entries)


def _dot_star_glob(layer: str, entries: Sequence[str], need_wildcard: bool) -> bool:
    for entry in entries:
        if need_wildcard and "*" not in entry and "." not in entry:
            continue
        pattern = entry.replace(".", r"\.").replace("*", ".*")
        if _rx(rf"(?:{pattern})\Z", layer):
            return True
    return False


def modelopt_layer_excluded(method: str, release: Release, layer: str,
                            entries: Sequence[str]) -> bool:
    """ModelOpt's `is_layer_excluded` (FP8 `modelopt`, NVFP4 `modelopt_fp4`)."""
    if not entries:
        return False
    if release >= (0, 12, 0):
        return (modelopt_layer_skipped(release, layer, entries) or _substring(layer, entries)
                or any(fnmatch.fnmatchcase(layer, e) for e in entries))
    if method == "modelopt":  # FP8
        if release < (0, 10, 0):
            return False
        substring = _substring(layer, entries)
        if release < (0, 11, 0):  # a plain substring test, the layer's own name included
            substring = substring or layer in entries
        if release < (0, 10, 2):
            return substring
        return modelopt_layer_skipped(release, layer, entries) or substring
    skipped = modelopt_layer_skipped(release, layer, entries, fused=release >= (0, 10, 2))
    if release < (0, 9, 0):
        return skipped
    return skipped or _dot_star_glob(layer, entries, need_wildcard=release >= (0, 11, 0))


def gptq_layer_quantized(release: Release, layer: str, dynamic: Mapping[str, object],
                         in_block: Sequence[object] = ()) -> bool:
    """GPTQ: `dynamic` (first matching key decides; `-:` excludes) and, from 0.11,
    `modules_in_block_to_quantize` (substrings; an empty list quantizes everything)."""
    for key in dynamic:
        if key.startswith("-:"):
            if _rx(key[2:], layer):
                return False
        elif _rx(key.removeprefix("+:"), layer):
            break
    if release < (0, 11, 0):
        return True
    flat = [str(x) for x in _flatten(in_block)]
    if not flat:
        return True
    shards = _shards(layer)
    if shards is None:
        return any(m in layer for m in flat)
    return not _all_or_none(layer, [not any(m in s for m in flat) for s in shards])


def _flatten(items: Sequence[object]) -> list[object]:
    out: list[object] = []
    for item in items:
        out.extend(_flatten(item) if isinstance(item, list) else [item])
    return out


def awq_layer_skipped(release: Release, layer: str, entries: Sequence[str]) -> bool:
    """AWQ's `modules_to_not_convert`: an entry contained in the layer name."""
    shards = _shards(layer)
    if shards is None or release < (0, 11, 1):
        return any(e in layer for e in entries)
    if release >= (0, 24, 0) and any(e in layer for e in entries):
        return True
    return _all_or_none(layer, [any(e in s for e in entries) for s in shards])
