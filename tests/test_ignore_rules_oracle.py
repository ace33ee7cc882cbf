"""logwatch's release-aware ignore rules against vLLM's own functions, release by release.

For every release of core.ignore_rules.MATRIX whose sources are at hand (LOGWATCH_VLLM_SOURCES),
vLLM's matching functions (compressed-tensors' and Quark's `should_ignore_layer`, ModelOpt's
`is_layer_excluded` over `is_layer_skipped`, GPTQ's `get_dynamic_override` and
`is_layer_gptq_quantized`) and the quantization configs' `get_quant_method` dispatch (the
part that decides what an MoE layer gets) are run in isolation (tests/vllm_sources.py) on a
table of cases, and their answer is compared with logwatch's model."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
import regex

from logwatch.core.ignore_rules import (
    ERROR,
    FUSED,
    MATRIX,
    QUANTIZED,
    UNQUANTIZED,
    Release,
    release_text,
)
from logwatch.core.layer_outcome import FC_FORCED_UNQUANTIZED, IgnoreRules, outcome, vllm_layer
from logwatch.core.mtp import collapse_experts
from logwatch.core.mtp_coverage import suggest_mtp_entries, uncovered_mtp_modules
from logwatch.core.snapshot import build_snapshot
from logwatch.host.model_dir import read_model_dir
from tests import vllm_sources as vs
from tests.conftest import ROOT

# Each test loads and runs a release's sources: seconds on a busy machine.
pytestmark = pytest.mark.slow
QDIR = "vllm/model_executor/layers/quantization/"
FUSED_MAPPING = {k: list(v) for k, v in FUSED.items()}
RELEASES = [release_text(r) for r in MATRIX]
AVAILABLE = [r for r in RELEASES if vs.has_release(r)]
NO_SOURCES = f"no vLLM sources under {vs.SOURCES} (set LOGWATCH_VLLM_SOURCES)"

MTP_Q = "mtp.layers.0.self_attn"
MTP_MOE = "mtp.layers.0.mlp.experts"
DS_MTP = "model.layers.61"
CHILDREN = [f"{MTP_MOE}.{e}.{p}" for e in range(2) for p in ("gate_proj", "up_proj",
                                                               "down_proj")]
GLM_CHILDREN = [f"{MTP_MOE}.*.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
# (checkpoint module, ignore entries): the discrepancy cases of issue 10 and their neighbours
CASES: list[tuple[str, tuple[str, ...]]] = [
    (name, tuple(entries)) for name, entries in [
        ("mtp.fc", []), ("mtp.fc", ["mtp.fc"]), ("mtp.fc", [r"re:^mtp\."]),
        ("mtp.fc", ["mtp.*"]), ("mtp.fc", ["mtp."]), ("mtp.fc", ["mtp"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.q_proj", f"{MTP_Q}.k_proj", f"{MTP_Q}.v_proj"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.qkv_proj"]), (f"{MTP_Q}.q_proj", ["re:.*qkv_proj"]),
        (f"{MTP_Q}.q_proj", [f"{MTP_Q}.q_proj"]), (f"{MTP_Q}.q_proj", [r"re:^mtp\."]),
        (f"{MTP_Q}.q_proj", ["mtp.*"]), (f"{MTP_Q}.o_proj", ["mtp.layers.0"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.self_attn.q_a_proj",
                                          f"{DS_MTP}.self_attn.kv_a_proj_with_mqa"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.self_attn.fused_qkv_a_proj"]),
        (f"{DS_MTP}.self_attn.q_a_proj", [r"re:^model\.layers\.61\."]),
        (f"{DS_MTP}.self_attn.q_a_proj", [f"{DS_MTP}.*"]),
        (f"{DS_MTP}.mlp.shared_experts.down_proj", [f"{DS_MTP}.mlp.shared_experts"]),
        ("language_model.model.layers.0.mlp.down_proj", ["model.layers.0.mlp.down_proj"]),
        (f"{MTP_MOE}.0.down_proj", []), (f"{MTP_MOE}.0.down_proj", CHILDREN),
        (f"{MTP_MOE}.0.down_proj", GLM_CHILDREN), (f"{MTP_MOE}.0.down_proj", [MTP_MOE]),
        (f"{MTP_MOE}.0.down_proj", [r"re:^mtp\."]), (f"{MTP_MOE}.0.down_proj", ["mtp.*"]),
        (f"{MTP_MOE}.0.down_proj", [f"{MTP_MOE}.0.gate_proj"]),
        (f"{MTP_MOE}.0.down_proj", [r"re:.*experts\.0\.(gate|up)_proj"]),
        (f"{MTP_MOE}.3.down_proj", [f"{MTP_MOE}.0.gate_proj", f"{MTP_MOE}.0.up_proj",
                                    f"{MTP_MOE}.0.down_proj"]),
    ]]
# LM heads (a ParallelLMHead, not a LinearBase)
HEAD_CASES = [(f"{DS_MTP}.shared_head.head", ()), (f"{DS_MTP}.shared_head.head",
                                                    (f"{DS_MTP}.shared_head*",))]


def _common(release: str) -> dict[str, Any]:
    return {"re": regex, "fnmatch": fnmatch.fnmatch, "MappingProxyType": MappingProxyType}


def _load(release: str, path: str, names: list[str], ns: dict[str, Any],
          stand_ins: bool = False, cut: tuple[str, str] | None = None
          ) -> dict[str, Callable[..., Any] | None]:
    source = vs.read_source(release, path)
    if not source:
        return {}
    return {name: vs.load_function(source, name, ns, stand_ins, cut) for name in names}


def _config_utils(release: str, ns: dict[str, Any]) -> None:
    _load(release, QDIR + "utils/config_utils.py",
          ["find_matching_patterns", "is_equal_or_regex_match"], ns)


def ct_should_ignore(release: str) -> Callable[..., Any]:
    ns = _common(release)
    _config_utils(release, ns)
    found = _load(release, QDIR + "compressed_tensors/utils.py",
                  ["should_ignore_layer", "check_equal_or_regex_match",
                   "_is_equal_or_regex_match"], ns)
    function = found["should_ignore_layer"]
    assert function is not None, f"{release}: compressed-tensors has no should_ignore_layer"
    return function


TARGETS = ["Linear", "FusedMoE"]  # a config group targeting Linear; vLLM adds FusedMoE


def ct_find_matched_target(release: str) -> Callable[..., Any]:
    ns = _common(release)
    _config_utils(release, ns)
    found = _load(release, QDIR + "compressed_tensors/utils.py",
                  ["find_matched_target", "_find_first_match", "_match_fused_layer",
                   "_is_equal_or_regex_match"], ns)
    function = found["find_matched_target"]
    assert function is not None
    return function


def quark_should_ignore(release: str) -> Callable[..., Any]:
    ns = _common(release)
    _config_utils(release, ns)
    found = _load(release, QDIR + "quark/utils.py",
                  ["should_ignore_layer", "check_equal_or_regex_match",
                   "_is_equal_or_regex_match"], ns)
    function = found["should_ignore_layer"]
    assert function is not None, f"{release}: Quark has no should_ignore_layer"
    return function


# Layer classes the dispatch code tests with isinstance; an MoE layer is both of vLLM's names.
class LinearBase:
    pass


class FusedMoE:
    moe_config = None


class RoutedExperts(FusedMoE):
    pass


class Attention:
    pass


class FusedMoELayer(RoutedExperts, vs.Stub):
    ckpt_gate_proj_name, ckpt_up_proj_name, ckpt_down_proj_name = MOE = (
        "gate_proj", "up_proj", "down_proj")


class LinearLayer(LinearBase, vs.Stub):
    pass


PARALLEL_LM_HEAD = vs.stub("ParallelLMHead")


class HeadLayer(PARALLEL_LM_HEAD):  # type: ignore[misc, valid-type]
    pass


def _layer(name: str, moe: bool) -> Any:
    return FusedMoELayer() if moe else HeadLayer() if name.endswith("head") else LinearLayer()


def _dispatch_ns(release: str) -> dict[str, Any]:
    ns = _common(release)
    ns.update(LinearBase=LinearBase, FusedMoE=FusedMoE, RoutedExperts=RoutedExperts,
              Attention=Attention, MLAAttention=vs.stub("MLAAttention"),
              ParallelLMHead=PARALLEL_LM_HEAD, cast=lambda _t, value: value,
              UnquantizedLinearMethod=vs.stub("UnquantizedLinearMethod"),
              UnquantizedFusedMoEMethod=vs.stub("UnquantizedFusedMoEMethod"),
              get_linear_transform_schemes=lambda *a, **k: (None, None))
    return ns


def classify(result: Any, moe: bool, release: Release) -> str:
    """What vLLM makes of the method `get_quant_method` returned for a layer."""
    if result is None:
        # FusedMoE turns None into its unquantized method from 0.11.1; before, it asserted
        return UNQUANTIZED if not moe or release >= (0, 11, 1) else ERROR
    name = type(result).__name__
    if name == "UnquantizedFusedMoEMethod":
        return UNQUANTIZED
    if name == "UnquantizedLinearMethod":
        return ERROR if moe else UNQUANTIZED  # an MoE layer asserts on a linear method
    return QUANTIZED


def _run(get: Callable[[], Any], moe: bool, release: Release) -> str:
    try:
        return classify(get(), moe, release)
    except ValueError:
        return ERROR  # mixed shards, "All MoE projections need to have same ..."
    except AssertionError:
        return ERROR


def quark_oracle(release: str) -> Callable[[str, tuple[str, ...]], str]:
    ns = _dispatch_ns(release)
    ns["should_ignore_layer"] = quark_should_ignore(release)
    moe_method = ns["QuarkMoEMethod"] = vs.stub("QuarkMoEMethod")
    moe_method.get_moe_method_target = staticmethod(  # type: ignore[attr-defined]
        lambda *a, **k: (None, None, type("QuarkW4A4MXFp4MoEMethod", (moe_method,), {})))
    found = _load(release, QDIR + "quark/quark.py",
                  ["QuarkConfig.get_quant_method", "QuarkConfig.get_quant_method_target"],
                  ns, stand_ins=True)
    get_quant_method, target = found["QuarkConfig.get_quant_method"], found.get(
        "QuarkConfig.get_quant_method_target")
    assert get_quant_method is not None
    rel = _release(release)

    def run(module: str, entries: tuple[str, ...]) -> str:
        layer_name, moe = vllm_layer(module)
        config = vs.stub("QuarkConfig")()
        config.quant_config = {"exclude": list(entries)}
        config.packed_modules_mapping = FUSED_MAPPING
        config.dynamic_mxfp4_quant = False
        config.get_scheme_cls = lambda *a, **k: (None, None, vs.stub("QuarkScheme"))
        if target is not None:
            config.get_quant_method_target = lambda p, t: target(config, p, t)
        layer = _layer(layer_name, moe)
        return _run(lambda: get_quant_method(config, layer, layer_name), moe, rel)
    return run


def ct_oracle(release: str) -> Callable[[str, tuple[str, ...]], str]:
    ns = _dispatch_ns(release)
    should_ignore = ns["should_ignore_layer"] = ct_should_ignore(release)
    find_target = ct_find_matched_target(release)
    moe_ns = _dispatch_ns(release)
    moe_file = next(p for p in (QDIR + "compressed_tensors/compressed_tensors_moe/"
                                "compressed_tensors_moe.py",
                                QDIR + "compressed_tensors/compressed_tensors_moe.py")
                    if vs.read_source(release, p))
    moe_name = "CompressedTensorsMoEMethod.get_moe_method"
    get_moe_method = _load(release, moe_file, [moe_name], moe_ns, stand_ins=True,
                           cut=("UnquantizedFusedMoEMethod", "QuantizedMoEMethod"))[moe_name]
    ns["CompressedTensorsMoEMethod"] = SimpleNamespace(get_moe_method=get_moe_method)
    get_quant_method = _load(release, QDIR + "compressed_tensors/compressed_tensors.py",
                             ["CompressedTensorsConfig.get_quant_method"], ns,
                             stand_ins=True)["CompressedTensorsConfig.get_quant_method"]
    assert get_quant_method is not None and get_moe_method is not None
    rel = _release(release)

    def run(module: str, entries: tuple[str, ...]) -> str:
        layer_name, moe = vllm_layer(module)
        config = vs.stub("CompressedTensorsConfig")()
        config.ignore = list(entries)
        config.packed_modules_mapping = FUSED_MAPPING
        config.target_scheme_map = {"Linear": {"weights": vs.stub("QuantizationArgs")(),
                                               "input_activations": None}}

        # stand-in for the scheme lookup: should_ignore_layer, then the target, as vLLM's
        # get_scheme / get_scheme_dict do (the scheme object itself is off the pure path)
        def scheme(layer: Any = None, layer_name: str | None = None, *a: Any) -> Any:
            ignored = should_ignore(layer_name, ignore=config.ignore,
                                    fused_mapping=config.packed_modules_mapping)
            if ignored:
                return None
            target = find_target(layer_name, layer, TARGETS, config.packed_modules_mapping)
            return None if target is None else config.target_scheme_map["Linear"]
        config.get_scheme = config.get_scheme_dict = scheme
        layer = _layer(layer_name, moe)
        return _run(lambda: get_quant_method(config, layer, layer_name), moe, rel)
    return run


def _release(text: str) -> Release:
    major, minor, patch = (int(p) for p in text.split("."))
    return major, minor, patch


@pytest.mark.parametrize("release", RELEASES)
def test_compressed_tensors_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = ct_oracle(release)
    rules = lambda entries: IgnoreRules("compressed-tensors", entries)  # noqa: E731
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(rules(e), _release(release), m)) != (want := oracle(m, e))]
    assert wrong == []


@pytest.mark.parametrize("release", RELEASES)
def test_quark_matches_vllm(release: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = quark_oracle(release)
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(IgnoreRules("quark", e), _release(release), m))
             != (want := oracle(m, e))]
    assert wrong == []


MODELOPT_CLASSES = {"modelopt": "ModelOptFp8Config", "modelopt_fp4": "ModelOptNvFp4Config"}


def modelopt_oracle(release: str, method: str) -> Callable[[str, tuple[str, ...]], str]:
    ns = _dispatch_ns(release)
    _load(release, QDIR + "utils/quant_utils.py", ["is_layer_skipped"], ns, stand_ins=True)
    path = QDIR + "modelopt.py"
    functions = {}
    for name in ("get_quant_method", "is_layer_excluded"):
        for owner in (MODELOPT_CLASSES[method], "ModelOptQuantConfigBase"):
            found = _load(release, path, [f"{owner}.{name}"], ns, stand_ins=True)
            if found.get(f"{owner}.{name}") is not None:
                functions[name] = found[f"{owner}.{name}"]
                break
    get_quant_method, excluded = functions["get_quant_method"], functions.get(
        "is_layer_excluded")
    rel = _release(release)

    def run(module: str, entries: tuple[str, ...]) -> str:
        layer_name, moe = vllm_layer(module)
        config = vs.stub(MODELOPT_CLASSES[method])()
        config.exclude_modules = list(entries)
        config.packed_modules_mapping = FUSED_MAPPING
        config.quant_method = method
        if excluded is not None:
            config.is_layer_excluded = lambda prefix, *rest: excluded(config, prefix, *rest)
        layer = _layer(layer_name, moe)
        return _run(lambda: get_quant_method(config, layer, layer_name), moe, rel)
    return run


@pytest.mark.parametrize("method", sorted(MODELOPT_CLASSES))
@pytest.mark.parametrize("release", RELEASES)
def test_modelopt_matches_vllm(release: str, method: str) -> None:
    if release not in AVAILABLE:
        pytest.skip(NO_SOURCES)
    oracle = modelopt_oracle(release, method)
    wrong = [(m, e, got, want) for m, e in CASES + HEAD_CASES
             if (got := outcome(IgnoreRules(method, e), _release(release), m))
             != (want := oracle(m, e))]
    assert wrong == []


class PlainLinear(vs.Stub):
    """torch's nn.Linear: no LinearBase, so no quantization config is asked about it."""


def _oracle_for(method: str, release: str) -> Callable[[str, tuple[str, ...]], str]:
    if method == "compressed-tensors":
        return ct_oracle(release)
    if method == "quark":
        return quark_oracle(release)
    return modelopt_oracle(release, method)


SAMPLES = ROOT / "samples" / "models"
MTP_SAMPLES = ["qwen3.6-35b-a3b-nvfp4-mtp-uncovered", "qwen3.6-35b-a3b-nvfp4-mtp-covered",
               "glm-5.2-quark-mxfp4", "deepseek-v3-modelopt-nvfp4-legacy"]


@pytest.mark.parametrize("sample", MTP_SAMPLES)
def test_sample_snapshots_agree_with_vllm_on_every_release(sample: str) -> None:
    """`snapshot show` and the diagnosis read uncovered_mtp_modules: for each release that runs
    the sample's architecture, it names exactly the BF16 MTP modules vLLM's own dispatch
    builds quantized (or fails on); the ignore-list remedy it offers covers them there."""
    if not AVAILABLE:
        pytest.skip(NO_SOURCES)
    facts, problems = read_model_dir(SAMPLES / sample)
    assert facts is not None and facts.mtp is not None and problems == []
    method, entries = facts.quant.method, facts.quant.ignore
    assert method is not None
    checked = 0
    for release in (r for r in facts.mtp.releases if release_text(r) in AVAILABLE):
        oracle = _oracle_for(method, release_text(release))
        bf16 = [m.name for m in facts.mtp.modules if m.stored == "bf16"]
        want = collapse_experts(m for m in bf16 if _sample_outcome(
            oracle, method, release, m, entries, facts.model_type) != UNQUANTIZED)
        snapshot = build_snapshot(model=facts, vllm_version=release_text(release))
        assert uncovered_mtp_modules(snapshot) == want, release
        suggestion = suggest_mtp_entries(snapshot, facts.quant.ignore_key or "ignore")
        if suggestion is not None and suggestion.covers:
            more = entries + suggestion.entries
            assert all(_sample_outcome(oracle, method, release, m, more, facts.model_type)
                       == UNQUANTIZED for m in bf16), (release, suggestion.entries)
            assert not any(e.startswith("re:") for e in suggestion.entries) or \
                not method.startswith("modelopt")
        checked += 1
    assert checked


def _sample_outcome(oracle: Callable[[str, tuple[str, ...]], str], method: str,
                    release: Release, module: str, entries: tuple[str, ...],
                    model_type: str | None) -> str:
    """vLLM's answer for one sample module: the model file decides first (an nn.Linear
    `eh_proj`; `mtp.fc` built without a quant config, tests/test_ignore_rules_sources.py),
    then the quantization config's dispatch."""
    if module.endswith(".eh_proj"):
        return classify(None, False, release)  # PlainLinear: never asked
    forced = [first for prefix, first in FC_FORCED_UNQUANTIZED
              if (model_type or "").startswith(prefix)]
    if module == "mtp.fc" and method == "modelopt_fp4" and forced and release >= forced[0]:
        return UNQUANTIZED
    return oracle(module, entries)
