"""The model-specific facts behind core.quant.ignore_rules / core.quant.layer_outcome, read from
each release's sources: the fused-layer table, the architectures' first releases, the MTP layers
built outside the ignore list (`eh_proj`, `mtp.fc` under ModelOpt NVFP4), and GPTQ's
`dynamic` / `modules_in_block_to_quantize` functions run against logwatch's."""

from __future__ import annotations

import ast
import re
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
import regex

from logwatch.core.quant.ignore_rules import (
    FUSED,
    MATRIX,
    awq_layer_skipped,
    gptq_layer_quantized,
    parse_release,
    release_text,
)
from logwatch.core.quant.layer_outcome import FC_FORCED_UNQUANTIZED
from logwatch.core.quant.releases import FIRST_RELEASE
from tests import vllm_functions as vs

MODELS = "vllm/model_executor/models/"
RELEASES = [release_text(r) for r in MATRIX]
AVAILABLE = [r for r in RELEASES if vs.has_release(r)]


def first_available(first: tuple[int, int, int]) -> str | None:
    """The oldest release at hand from `first` on: `first` itself with the whole matrix, a
    later one where only some releases were fetched (make test fetches a few)."""
    return next((r for r in AVAILABLE if parse_release(r) >= first), None)  # type: ignore[operator]
NO_SOURCES = f"no vLLM sources under {vs.SOURCES} (set LOGWATCH_VLLM_SOURCES)"


def _need_sources() -> None:
    if not AVAILABLE:
        pytest.skip(NO_SOURCES)


def packed_mappings(source: str) -> dict[str, list[str]]:
    """Every `packed_modules_mapping` literal of a model file, its `|` extensions and its
    item assignments (`self.packed_modules_mapping["fused_qkv_a_proj"] = [...]`)."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == "packed_modules_mapping":
                value = node.value
            elif isinstance(target, ast.Subscript) and "packed_modules_mapping" in \
                    ast.unparse(target.value):
                found[ast.literal_eval(target.slice)] = ast.literal_eval(node.value)
        if isinstance(node, ast.BinOp) and "packed_modules_mapping" in ast.unparse(node.left):
            value = node.right
        if isinstance(value, ast.Dict):
            found.update(ast.literal_eval(value))
    return found


@pytest.mark.slow
def test_fused_table_matches_the_models_mappings() -> None:
    _need_sources()
    seen: set[str] = set()
    for release in AVAILABLE:
        for model in ("deepseek_v2", "qwen3_next", "qwen3_5", "glm4_moe"):
            source = vs.read_source(release, f"{MODELS}{model}.py")
            if source is None:
                continue
            for fused, shards in packed_mappings(source).items():
                if shards == [fused] or fused == "in_proj":  # stored fused on disk
                    continue
                seen.add(fused)
                assert FUSED.get(fused) == tuple(shards), (release, model, fused, shards)
    assert seen == set(FUSED)  # fused_qkv_a_proj among them


@pytest.mark.slow
def test_first_release_of_each_architecture() -> None:
    _need_sources()
    for architecture, first in FIRST_RELEASE.items():
        registered = [r for r in AVAILABLE if f'"{architecture}"' in
                      (vs.read_source(r, f"{MODELS}registry.py") or "")]
        assert registered and registered[0] == first_available(first), architecture


@pytest.mark.slow
def test_eh_proj_is_a_plain_linear_in_every_release() -> None:
    _need_sources()
    for release in AVAILABLE:
        source = vs.read_source(release, f"{MODELS}deepseek_mtp.py")
        assert source is not None
        assert re.search(r"self\.eh_proj\s*=\s*nn\.Linear\(", source), release


def _fc_quant_is_none(source: str, method: str) -> bool | None:
    """Run the `fc_quant = ...` assignment of an MTP module with a config of `method`; None
    when the release builds `fc` with the plain quant_config."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "fc_quant":
            config = SimpleNamespace(get_name=lambda: method)
            value = eval(compile(ast.Expression(node.value), "<fc_quant>", "eval"),
                         {"quant_config": config})
            return value is None
    return None


@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "first"), FC_FORCED_UNQUANTIZED)
def test_mtp_fc_forced_unquantized_for_modelopt_nvfp4(model_type: str,
                                                     first: tuple[int, int, int]) -> None:
    _need_sources()
    forced = []
    for release in AVAILABLE:
        source = vs.read_source(release, f"{MODELS}{model_type}_mtp.py")
        if source is not None and _fc_quant_is_none(source, "modelopt_fp4"):
            assert _fc_quant_is_none(source, "compressed-tensors") is False
            forced.append(release)
    assert forced and forced[0] == first_available(first)
    assert forced == [r for r in AVAILABLE if parse_release(r) >= parse_release(forced[0])]


GPTQ_CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("mtp.fc", {}, []), ("mtp.fc", {r"-:^mtp\.": {}}, []),
    ("mtp.layers.0.self_attn.qkv_proj", {r"-:.*self_attn": {}}, []),
    ("mtp.fc", {r"+:^mtp\.": {"bits": 8}, r"-:^mtp\.": {}}, []),  # first key wins
    ("model.layers.0.mlp.down_proj", {}, [["self_attn.q_proj", "mlp.down_proj"]]),
    ("mtp.fc", {}, [["self_attn.q_proj", "mlp.down_proj"]]),
    ("model.layers.0.self_attn.qkv_proj", {}, [["self_attn.q_proj", "self_attn.k_proj",
                                                 "self_attn.v_proj"]]),
    ("model.layers.0.self_attn.qkv_proj", {}, [["self_attn.q_proj"]]),  # mixed shards
]


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_gptq_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    source = vs.read_source(release, "vllm/model_executor/layers/quantization/utils/"
                                     "gptq_utils.py")
    assert source is not None
    ns: dict[str, Any] = {"re": regex, "MappingProxyType": MappingProxyType}
    functions = vs.load_functions(source, ["get_dynamic_override", "flatten_list",
                                           "is_layer_gptq_quantized"], ns, stand_ins=False)
    override, in_block = functions["get_dynamic_override"], functions["is_layer_gptq_quantized"]
    assert override is not None
    parsed = tuple(int(p) for p in release.split("."))
    for layer, dynamic, quantized_layers in GPTQ_CASES:
        config = SimpleNamespace(dynamic=dynamic)
        # an empty list never reaches is_layer_gptq_quantized: the config fills it with the
        # checkpoint's quantized modules first (maybe_update_config)
        try:
            want = override(config, layer_name=layer) is not False and (
                in_block is None or not quantized_layers
                or in_block(layer, _flat(quantized_layers), dict(FUSED_MAPPING)))
        except ValueError:
            want = None
        try:
            got: bool | None = gptq_layer_quantized(parsed, layer, dynamic,  # type: ignore
                                                    tuple(quantized_layers))
        except ValueError:
            got = None
        if in_block is None and quantized_layers:
            continue  # no modules_in_block_to_quantize before 0.11: nothing to compare
        assert got == want, (layer, dynamic, quantized_layers)


FUSED_MAPPING = {k: list(v) for k, v in FUSED.items()}


def _flat(items: list[Any]) -> list[Any]:
    """The nested form is flattened by the config before the function sees it (older
    releases) or by the function itself (newer)."""
    return [x for item in items for x in (_flat(item) if isinstance(item, list) else [item])]


AWQ_CASES: list[tuple[str, list[str]]] = [
    ("mtp.fc", []), ("mtp.fc", ["mtp."]), ("mtp.layers.0.self_attn.qkv_proj", ["self_attn"]),
    ("mtp.layers.0.self_attn.qkv_proj", ["mtp.layers.0.self_attn.qkv_proj"]),
    ("mtp.layers.0.self_attn.qkv_proj", ["q_proj"]),  # one shard of three
    ("model.layers.3.mlp.experts", ["model.layers.3.mlp.experts.0.down_proj"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_awq_matches_vllm(release: str) -> None:
    """AWQ's `modules_to_not_convert`: is_layer_skipped_awq, later quant_utils'
    is_layer_skipped in its substring mode, as the AWQ configs call them."""
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    quant = "vllm/model_executor/layers/quantization/"
    ns: dict[str, Any] = {"MappingProxyType": MappingProxyType}
    skipped_awq = None
    for path in (quant + "awq.py", quant + "auto_awq.py"):
        source = vs.read_source(release, path)
        if source and "is_layer_skipped_awq" in source:
            skipped_awq = vs.load_function(source, "is_layer_skipped_awq", ns, False)
    utils = vs.read_source(release, quant + "utils/quant_utils.py")
    assert utils is not None
    skipped = vs.load_function(utils, "is_layer_skipped", ns, stand_ins=True)
    parsed = tuple(int(p) for p in release.split("."))
    for layer, entries in AWQ_CASES:
        try:
            if skipped_awq is not None:
                want: bool | None = skipped_awq(layer, entries)
            elif "match_mode" in (utils or ""):
                want = skipped(layer, entries, FUSED_MAPPING, match_mode="substring")
            else:
                want = skipped(layer, entries, FUSED_MAPPING, skip_with_substr=True)
        except ValueError:
            want = None
        try:
            got: bool | None = awq_layer_skipped(parsed, layer, entries)  # type: ignore
        except ValueError:
            got = None
        assert got == want, (layer, entries)
