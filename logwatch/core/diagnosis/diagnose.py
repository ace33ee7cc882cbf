"""Join incidents and the snapshot in force into causes, with the evidence and the config
fields that prove them, a confidence, and the remedies that apply on this GPU.

Rules are small functions `(incident, context) -> Diagnosis | None`, tried in order (the
Marlin tile in core.diagnosis.marlin_rules, the MTP draft in core.diagnosis.mtp_rules, the
others here); an incident no rule explains still gets its signature's own explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from logwatch.core.diagnosis.marlin_rules import rule_marlin_tile, w4a4_remedy
from logwatch.core.diagnosis.model import Context, Diagnosis, Remedy
from logwatch.core.diagnosis.mtp_rules import rule_mtp_ignore
from logwatch.core.launches.incidents import Incident
from logwatch.core.quant.scheme import NATIVE_FP4_CAPABILITY, NATIVE_FP8_CAPABILITY
from logwatch.core.signatures.signature import CONSEQUENCE_CATEGORIES, parse_number
from logwatch.core.snapshot.model import Snapshot

HIGH_ACCEPTANCE_PERCENT = 95.0


def rule_native_fp4_fallback(incident: Incident, ctx: Context) -> Diagnosis | None:
    if incident.signature.id != "nvfp4.marlin_fallback" or incident.captures.get(
            "dtype") != "FP4":
        return None
    cap = ctx.capability
    if cap is None or cap < NATIVE_FP4_CAPABILITY:
        return None
    snap = ctx.snapshot
    forced = [f"--linear-backend {snap.launch['linear_backend']}"
              for _ in [0] if snap.launch.get("linear_backend") == "marlin"]
    forced += [f"--moe-backend {snap.launch['moe_backend']}"
               for _ in [0] if snap.launch.get("moe_backend") == "marlin"]
    forced += [f"{k}={v}" for k, v in snap.env.items()
               if k in ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_DISABLED_KERNELS")]
    summary = (f"This GPU has native FP4 (compute capability {cap / 10:.1f}) yet vLLM chose "
               "weight-only Marlin: " + ("forced by " + ", ".join(forced) if forced else
                                         "no native kernel was usable (FlashInfer missing, or a "
                                         "build without SM100 kernels)") + ".")
    return Diagnosis(
        "marlin_on_native_fp4", "Marlin fallback on a GPU with native FP4",
        incident.signature.id, summary, (), tuple(incident.evidence[-2:]),
        {"gpu_capability": cap, "forced_by": forced}, 0.9 if forced else 0.7,
        (Remedy("change_backend", "Remove the forcing flag or variable, or install "
                "FlashInfer with SM100 kernels.", True, "native W4A4 is faster and never "
                "repacks through Marlin"),))


# The start-up lines that name the kernel an NVFP4 layer runs on (captured as `backend`), and
# the one for the other quantized linear kernels (`kernel` for `method`: FP8, MXFP4, ...)
FP4_KERNEL_SIGNATURES = ("nvfp4.gemm_backend", "nvfp4.moe_backend")
LINEAR_KERNEL = "quant.linear_kernel"


def _fp8_on_marlin(incident: Incident, ctx: Context, kernel: str) -> Diagnosis:
    """FP8 weights served weight-only through Marlin (a GPU without native FP8, or forced)."""
    cap = ctx.capability
    native = cap is not None and cap >= NATIVE_FP8_CAPABILITY
    return Diagnosis(
        "fp8_on_marlin", "FP8 checkpoint served through weight-only Marlin",
        incident.signature.id,
        f"vLLM chose {kernel}: the FP8 weights run weight-only (W8A16) against 16-bit "
        "activations, repacked for Marlin"
        + ("" if cap is None else f" (compute capability {cap / 10:.1f}: "
           + ("native FP8, so something forces Marlin" if native else
              "no native FP8 below 8.9") + ")") + ".",
        ("Marlin needs every layer's width, split by the tensor-parallel size, to fit its "
         "tiles; W8A16 is slower than native FP8 where the GPU has it.",),
        tuple(incident.evidence[-2:]), {"kernel": kernel, "gpu_capability": cap}, 0.8,
        (Remedy("change_backend", "Serve on a GPU with native FP8 (compute capability 8.9 or "
                "newer), with no setting that forces Marlin.", None if cap is None else
                not native, "native FP8 kernels never repack through Marlin"),), latent=True)


def rule_fp4_on_marlin(incident: Incident, ctx: Context) -> Diagnosis | None:
    """An FP4 checkpoint whose start-up chose a Marlin kernel: it serves, but weight-only
    (FP4 weights dequantized for 16-bit activations), repacked through Marlin, whose tiles
    the next layer width or tensor-parallel size may not fit. Latent: nothing failed yet.
    The runbook's remedy is the W4A4 variant through CUTLASS/FlashInfer where the GPU has
    native FP4; where it has not, that remedy is refused and says why."""
    backend = incident.captures.get("backend") or incident.captures.get("kernel", "")
    if "marlin" not in backend.lower():
        return None
    method = incident.captures.get("method", "")
    if incident.signature.id == LINEAR_KERNEL and "fp8" in (method + backend).lower():
        return _fp8_on_marlin(incident, ctx, backend)
    if incident.signature.id not in FP4_KERNEL_SIGNATURES and not (
            incident.signature.id == LINEAR_KERNEL and method.upper() == "MXFP4"):
        return None
    cap = ctx.capability
    if cap is not None and cap >= NATIVE_FP4_CAPABILITY and ctx.has("nvfp4.marlin_fallback"):
        return None  # rule_native_fp4_fallback's: Marlin although the GPU has native FP4
    if any(i.signature.fatal and i.signature.id.startswith("marlin.") for i in ctx.incidents):
        return None  # Marlin's failure is in the log: its diagnosis has the W4A4 remedy
    model = ctx.snapshot.model
    scheme = model.quant.scheme if model is not None and model.quant is not None else "unknown"
    layer = "MoE experts" if incident.signature.id == "nvfp4.moe_backend" else "linear layers"
    where = ("GPU not identified" if cap is None else
             f"compute capability {cap / 10:.1f}: " + (
                 "native FP4, so W4A4 runs through CUTLASS/FlashInfer" if
                 cap >= NATIVE_FP4_CAPABILITY else "no native FP4, Marlin is the only path"))
    return Diagnosis(
        "fp4_on_marlin", "FP4 checkpoint served through weight-only Marlin", incident.signature.id,
        f"vLLM chose {backend} for the NVFP4 {layer}: the FP4 weights are repacked for Marlin "
        f"and run weight-only against 16-bit activations ({where}).",
        (f"Checkpoint scheme: {scheme}.",
         "Marlin needs every layer's width, split by the tensor-parallel size, to fit its "
         "tiles: a change of size or model can fail at start-up (size_n/size_k not divisible "
         "by the tile), and W4A16 is slower than native W4A4 where the GPU has it."),
        tuple(incident.evidence[-2:]), {"backend": backend, "scheme": scheme,
                                        "gpu_capability": cap}, 0.8,
        (w4a4_remedy(ctx, scheme),), latent=True)


def rule_high_acceptance(incident: Incident, ctx: Context) -> Diagnosis | None:
    if incident.signature.id != "spec_decode.acceptance":
        return None
    rates = [parse_number(f.captures.get("rate_percent", "")) for f in
             (incident.first, incident.last)]
    fractions = [parse_number(f.captures.get("rate_fraction", "")) for f in
                 (incident.first, incident.last)]
    high = [r for r in rates if r is not None and r >= HIGH_ACCEPTANCE_PERCENT]
    high += [f * 100 for f in fractions if f is not None and f * 100 >= HIGH_ACCEPTANCE_PERCENT]
    if not high:
        return None
    return Diagnosis(
        "implausible_acceptance", "Implausibly high draft acceptance",
        incident.signature.id,
        f"The draft is accepted {max(high):.1f}% of the time: a broken target that emits "
        "trivially predictable tokens (e.g. repeated padding) looks like this.",
        ("Check the target's output quality directly (a short eval or a known prompt).",),
        tuple(incident.evidence[-2:]), {"acceptance_percent": max(high)}, 0.6)


def rule_cause_on_stdout(incident: Incident, ctx: Context) -> Diagnosis | None:
    """The launch failed, only reports of it failing were read (the engine core's or a
    worker's wrapper), and no line of vLLM's logger at all: what was read is its stderr. vLLM's
    logger, the worker's traceback with the cause included, writes to stdout (seen on a real
    0.32.0: docs/real-vllm.md)."""
    sig = incident.signature
    if not sig.fatal or sig.category not in CONSEQUENCE_CATEGORIES:
        return None
    if any(i.signature.fatal and i.signature.category not in CONSEQUENCE_CATEGORIES
           for i in ctx.incidents):
        return None  # a cause was read
    if any(i.first.kind == "vllm" or i.last.kind == "vllm" for i in ctx.incidents):
        return None  # the logger's lines were read: the cause was not printed at all
    return Diagnosis(
        "cause_on_stdout", "The cause was printed on vLLM's stdout, which was not read",
        sig.id,
        "Only the failure's wrappers were read (" + sig.title + "), and no line of vLLM's "
        "own logger: this is its stderr. vLLM's logger writes to stdout, the worker's "
        "traceback that names the cause included.",
        ("Read both streams: `journalctl -u UNIT` and `docker logs` hold both; a run "
         "written by `vllm serve ... > out 2> err` has the cause in `out`: `logwatch scan "
         "--one-run out err` reads the two as one launch (or `2>&1` next time).",),
        tuple(incident.evidence[-2:]), {}, 0.7,
        (Remedy("investigate", "Scan vLLM's stdout (or both streams together) to see the "
                "cause.", None, "the cause is not in what was read"),))


RULES: tuple[Callable[[Incident, Context], Diagnosis | None], ...] = (
    rule_marlin_tile, rule_mtp_ignore, rule_native_fp4_fallback, rule_high_acceptance,
    rule_cause_on_stdout, rule_fp4_on_marlin)


def config_findings(snapshot: Snapshot) -> list[Diagnosis]:
    """Configuration problems worth reporting whatever the log says."""
    model = snapshot.model
    if model is None or not model.ignore_replaced:
        return []
    return [Diagnosis(
        "ignore_list_replaced", "--hf-overrides replaced the checkpoint's ignore list", None,
        f"The override dropped {len(model.ignore_replaced)} entries the checkpoint had: "
        + ", ".join(model.ignore_replaced) + ".",
        ("Lists in --hf-overrides replace, they do not merge: layers the checkpoint kept "
         "unquantized are now built quantized.",), (),
        {"dropped": list(model.ignore_replaced), "effective_ignore": list(model.effective_ignore)},
        0.9, (Remedy("fix_ignore_list", "Repeat the checkpoint's entries in the override, "
                     "plus the new ones.", True, "keeps both"),))]


def diagnose(incidents: Sequence[Incident],
             snapshot_of: Callable[[Incident], Snapshot]) -> list[Diagnosis]:
    """One diagnosis per incident a rule explains (in incident order, so the root cause
    comes first), each judged against the snapshot in force when it occurred; then
    configuration findings of every snapshot involved. Unexplained incidents keep their
    signature's explanation and get a plain diagnosis only when fatal."""
    out: list[Diagnosis] = []
    involved: dict[int, Snapshot] = {}  # by identity: a launch's incidents share one object
    for index, incident in enumerate(incidents):
        snapshot = snapshot_of(incident)
        involved.setdefault(id(snapshot), snapshot)
        ctx = Context(snapshot, incidents)
        for rule in RULES:
            found = rule(incident, ctx)
            if found is not None:
                out.append(replace(found, incident=index))
                break
        else:
            if incident.signature.fatal and incident.signature.category not in (
                    "engine_core_failed", "worker_failed"):
                out.append(Diagnosis(
                    incident.signature.id, incident.signature.title, incident.signature.id,
                    incident.signature.explain(incident.captures),
                    evidence=tuple(incident.evidence[-2:]), confidence=0.5, incident=index))
    seen: dict[str, Snapshot] = {}  # hashed once per object (it serialises the snapshot)
    for snapshot in involved.values():
        seen.setdefault(snapshot.content_hash(), snapshot)
    for snapshot in seen.values():
        out.extend(config_findings(snapshot))
    return out
