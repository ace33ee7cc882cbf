"""vLLM's own decision on whether it quantizes a layer, for one release, run from its sources:
the quantization configs' `get_quant_method` with the matching functions it calls
(compressed-tensors' and Quark's `should_ignore_layer`, compressed-tensors' `find_matched_target`
and MoE `get_moe_method`, ModelOpt's `is_layer_excluded` over `is_layer_skipped`), loaded in
isolation by tests/vllm_functions.py. Layers are stand-ins of the classes the dispatch tests with
isinstance; what it returns is classified the way vLLM's layers treat it."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

import regex

from logwatch.core.quant.ignore_rules import ERROR, FUSED, QUANTIZED, UNQUANTIZED, Release
from logwatch.core.quant.layer_outcome import vllm_layer
from tests import vllm_functions as vs

QDIR = "vllm/model_executor/layers/quantization/"
FUSED_MAPPING = {k: list(v) for k, v in FUSED.items()}


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


def _should_ignore(release: str, method: str, label: str) -> Callable[..., Any]:
    """`should_ignore_layer` of compressed-tensors or Quark (their utils.py share its shape),
    with the matching helpers it calls."""
    ns = _common(release)
    _config_utils(release, ns)
    found = _load(release, QDIR + f"{method}/utils.py",
                  ["should_ignore_layer", "check_equal_or_regex_match",
                   "_is_equal_or_regex_match"], ns)
    function = found["should_ignore_layer"]
    assert function is not None, f"{release}: {label} has no should_ignore_layer"
    return function


def ct_should_ignore(release: str) -> Callable[..., Any]:
    return _should_ignore(release, "compressed_tensors", "compressed-tensors")


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
    return _should_ignore(release, "quark", "Quark")


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


class CudaPlatform:
    """vLLM's current_platform on a CUDA machine: not XPU, ROCm, CPU or TPU."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("is_"):
            return lambda *a, **k: name == "is_cuda"
        raise AttributeError(name)


def _dispatch_ns(release: str) -> dict[str, Any]:
    ns = _common(release)
    ns.update(LinearBase=LinearBase, FusedMoE=FusedMoE, RoutedExperts=RoutedExperts,
              Attention=Attention, MLAAttention=vs.stub("MLAAttention"),
              ParallelLMHead=PARALLEL_LM_HEAD, cast=lambda _t, value: value,
              UnquantizedLinearMethod=vs.stub("UnquantizedLinearMethod"),
              UnquantizedFusedMoEMethod=vs.stub("UnquantizedFusedMoEMethod"),
              get_linear_transform_schemes=lambda *a, **k: (None, None),
              current_platform=CudaPlatform())
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
    rel = as_release(release)

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
    rel = as_release(release)

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

def as_release(text: str) -> Release:
    major, minor, patch = (int(p) for p in text.split("."))
    return major, minor, patch


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
    rel = as_release(release)

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


def fp8_oracle(release: str) -> Callable[[str, tuple[str, ...]], str]:
    """Fp8Config.get_quant_method (`ignored_layers`, quant_utils' is_layer_skipped)."""
    ns = _dispatch_ns(release)
    _load(release, QDIR + "utils/quant_utils.py", ["is_layer_skipped"], ns, stand_ins=True)
    get_quant_method = _load(release, QDIR + "fp8.py", ["Fp8Config.get_quant_method"], ns,
                             stand_ins=True)["Fp8Config.get_quant_method"]
    assert get_quant_method is not None
    rel = as_release(release)

    def run(module: str, entries: tuple[str, ...]) -> str:
        layer_name, moe = vllm_layer(module)
        config = vs.stub("Fp8Config")()
        config.ignored_layers = list(entries)
        config.packed_modules_mapping = FUSED_MAPPING
        config.ignored_layers_match_mode = "exact"
        config.is_checkpoint_fp8_serialized = True
        return _run(lambda: get_quant_method(config, _layer(layer_name, moe), layer_name),
                    moe, rel)
    return run


def mixed_oracle(release: str, listed: tuple[str, ...]
                 ) -> Callable[[str, tuple[str, ...]], str] | None:
    """ModelOptMixedPrecisionConfig.get_quant_method (0.17.1 on; None before) with a
    `quantized_layers` naming `listed`, each NVFP4."""
    ns = _dispatch_ns(release)
    source = vs.read_source(release, QDIR + "modelopt.py") or ""
    for constant in ("LINEAR_ALGOS", "_BLOCK_FP8_MOE_ALGOS"):
        if (value := vs.load_constant(source, constant)) is not None:
            ns[constant] = value
    # imported from vllm/utils/b12x.py (0.32 on): block codecs, none of them NVFP4
    codecs = vs.load_constant(vs.read_source(release, "vllm/utils/b12x.py") or "",
                              "B12X_BLOCK_CODECS")
    ns["B12X_BLOCK_CODECS"] = codecs if isinstance(codecs, dict) else {}
    _load(release, QDIR + "utils/quant_utils.py", ["is_layer_skipped"], ns, stand_ins=True)
    owner = "ModelOptMixedPrecisionConfig"
    found = _load(release, QDIR + "modelopt.py",
                  [f"{owner}.get_quant_method", f"{owner}._resolve_quant_algo",
                   f"{owner}._quantized_layer_prefix_candidates",
                   "ModelOptQuantConfigBase.is_layer_excluded"], ns, stand_ins=True)
    get_quant_method = found[f"{owner}.get_quant_method"]
    if get_quant_method is None:
        return None
    resolve, candidates = found[f"{owner}._resolve_quant_algo"], found[
        f"{owner}._quantized_layer_prefix_candidates"]
    excluded = found["ModelOptQuantConfigBase.is_layer_excluded"]
    assert resolve is not None and excluded is not None
    rel = as_release(release)

    def run(module: str, entries: tuple[str, ...]) -> str:
        layer_name, moe = vllm_layer(module)
        config = vs.stub(owner)()
        config.exclude_modules = list(entries)
        config.packed_modules_mapping = FUSED_MAPPING
        config.quantized_layers = {name: {"quant_algo": "NVFP4"} for name in listed}
        config.kv_cache_quant_method = None
        config.is_layer_excluded = lambda prefix: excluded(config, prefix)
        config._resolve_quant_algo = lambda prefix: resolve(config, prefix)
        if candidates is not None:  # a staticmethod in vLLM: called unbound
            config._quantized_layer_prefix_candidates = candidates
        return _run(lambda: get_quant_method(config, _layer(layer_name, moe), layer_name),
                    moe, rel)
    return run


def oracle_for(method: str, release: str) -> Callable[[str, tuple[str, ...]], str]:
    if method == "compressed-tensors":
        return ct_oracle(release)
    if method == "quark":
        return quark_oracle(release)
    if method == "fp8":
        return fp8_oracle(release)
    return modelopt_oracle(release, method)
