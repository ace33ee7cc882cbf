"""The area of vLLM a traceback's frames name (core/signatures/frame_areas.py): the innermost
vLLM frame that belongs to an area decides, its file before its function's name, and a C++
check's `csrc/` file before any Python frame."""

from __future__ import annotations

import pytest

from logwatch.core.signatures.frame_areas import area_of, area_of_path

SITE = "/usr/lib/python3.12/site-packages/"


def frame(path: str, func: str) -> str:
    return f'  File "{SITE}{path}", line 12, in {func}'


@pytest.mark.parametrize(("frames", "area"), [
    # the innermost vLLM frame in an area decides; a helper outside every area does not
    ([frame("vllm/v1/worker/gpu_worker.py", "load_model"),
      frame("vllm/model_executor/layers/quantization/utils/marlin_utils.py", "check_shape"),
      frame("vllm/utils/__init__.py", "cdiv")], "marlin"),
    # a file's area before its function's name: a connector registering KV caches
    ([frame("vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py",
            "register_kv_caches")], "distributed"),
    # an op called through vllm/_custom_ops.py: its name says where
    ([frame("vllm/_custom_ops.py", "gptq_marlin_gemm"), frame("torch/_ops.py", "__call__")],
     "marlin"),
    ([frame("vllm/_custom_ops.py", "cutlass_scaled_mm")], "quantization"),
    # the models' new home (vllm/models/, 0.33) and an MTP module under it
    ([frame("vllm/models/glm5next/common/mtp.py", "load_weights")], "speculative"),
    ([frame("vllm/models/llama/llama.py", "forward")], "model"),
    # no vLLM frame at all
    ([frame("torch/nn/modules/module.py", "_call_impl")], None),
])
def test_the_innermost_vllm_frame_with_an_area_decides(frames: list[str], area: str | None
                                                       ) -> None:
    found = area_of(frames)
    assert (found.id if found else None) == area


def test_a_cpp_check_names_its_file() -> None:
    lines = [frame("vllm/v1/engine/core.py", "run_engine_core"),
             "RuntimeError: Invalid MNK = [1, 40, 64]",
             "Exception raised from marlin_gemm at /src/csrc/quantization/marlin/marlin.cu:88"]
    found = area_of(lines)
    assert found is not None and found.id == "marlin"


def test_a_windows_path_is_read_too() -> None:
    line = ('  File "C:\\\\venv\\\\Lib\\\\site-packages\\\\vllm\\\\model_executor\\\\model_loader'
            '\\\\weight_utils.py", line 3, in load')
    found = area_of([line])
    assert found is not None and found.id == "weight_loading"
    assert area_of_path("vllm/engine/arg_utils.py").id == "config"  # type: ignore[union-attr]
