"""tools/vllm_vocab's extractor: small Python and C++ snippets written here, the merge across
releases, the per-release cache, the areas, and the sdists the sources test unpacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.vllm_vocab import cpp_source, python_source
from tools.vllm_vocab.areas import area_of
from tools.vllm_vocab.template import fill, shape
from tools.vllm_vocab.vocabulary import merge, release_messages, vocabulary

PYTHON = '''
class Config:
    def check(self, size_n, quant_method):
        raise ValueError(
            f"Weight output_size_per_partition = {size_n} is not divisible by "
            "min_thread_n = 64. Consider reducing tensor_parallel_size."
        )

    def bare(self, quant_method):
        assert isinstance(quant_method, FusedMoEMethodBase)
        assert size > 0, "size must be positive, got %d" % size

def free(requested, free_gib):
    msg = (f"Free memory on device ({free_gib}/{requested} GiB) on startup "
           "is less than desired")
    msg += " GPU memory utilization."
    raise ValueError(msg)

def logs(name, a):
    logger.warning_once("Using %s for %s", name, a.kind)
    self.logger.error("Unknown vLLM environment variable detected: {}".format(name))
    other.error("not a logger")
    raise RuntimeError("literal {braces} stay literal")
    raise KeyError
'''

CPP = '''
// TORCH_CHECK(false, "a commented-out check");
torch::Tensor gptq_marlin_repack(torch::Tensor& b_q_weight, int64_t size_k,
                                 int64_t size_n, int64_t num_bits) {
  TORCH_CHECK(size_n % marlin::tile_n_size == 0, "size_n = ", size_n,
              " is not divisible by tile_n_size = ", marlin::tile_n_size);
  /* a block comment, (unbalanced */
  STD_TORCH_CHECK(num_bits == 4 || num_bits == 8,
                  "num_bits must be 4 or 8. Got = ", num_bits);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "No compiled nvfp4 quantization kernel for SM ",
                              get_sm_version_num(), ". Recompile with \\"the\\" arch.");
  TORCH_CHECK(a.is_cuda());
}
'''


def test_python_sites_become_templates() -> None:
    found = {(m.kind, m.label, m.template, m.function)
             for m in python_source.messages(PYTHON, "vllm/x.py")}
    assert ("raise", "ValueError", "Weight output_size_per_partition = {size_n} is not "
            "divisible by min_thread_n = 64. Consider reducing tensor_parallel_size.",
            "Config.check") in found
    assert ("assert", "AssertionError", "assert isinstance(quant_method, FusedMoEMethodBase)",
            "Config.bare") in found
    assert ("assert", "AssertionError", "size must be positive, got {size}",
            "Config.bare") in found
    assert ("raise", "ValueError", "Free memory on device ({free_gib}/{requested} GiB) on "
            "startup is less than desired GPU memory utilization.", "free") in found
    assert ("log", "WARNING", "Using {name} for {a.kind}", "logs") in found
    assert ("log", "ERROR", "Unknown vLLM environment variable detected: {name}",
            "logs") in found
    assert ("raise", "RuntimeError", "literal {{braces}} stay literal", "logs") in found
    assert not any("not a logger" in t for _, _, t, _ in found)
    assert len(found) == 7  # `raise KeyError` has no message


def test_a_file_that_does_not_parse_gives_nothing() -> None:
    assert python_source.messages("def broken(:\n", "vllm/bad.py") == []


def test_torch_checks_join_strings_and_expressions() -> None:
    found = cpp_source.messages(CPP, "csrc/quantization/marlin/gptq_marlin_repack.cu")
    assert [(m.label, m.template, m.function, m.line) for m in found] == [
        ("TORCH_CHECK", "size_n = {size_n} is not divisible by tile_n_size = "
         "{marlin::tile_n_size}", "gptq_marlin_repack", 5),
        ("STD_TORCH_CHECK", "num_bits must be 4 or 8. Got = {num_bits}",
         "gptq_marlin_repack", 8),
        ("TORCH_CHECK_NOT_IMPLEMENTED", 'No compiled nvfp4 quantization kernel for SM '
         '{get_sm_version_num()}. Recompile with "the" arch.', "gptq_marlin_repack", 10),
    ]


def test_an_unclosed_check_is_skipped() -> None:
    assert cpp_source.messages('TORCH_CHECK(x, "never closed"', "csrc/a.cu") == []


def test_templates_fill_and_compare_by_wording() -> None:
    template = "size_n = {size_n} is not divisible by {{literal}} {tile}"
    assert fill(template, {"size_n": "2880"}, default="64") == (
        "size_n = 2880 is not divisible by {literal} 64")
    assert shape(template) == shape("size_n = {n} is not divisible by {{literal}} {t}")
    assert shape(template) != shape("size_n = {n} is not divisible by {t}")


def test_merge_keeps_one_wording_with_its_releases() -> None:
    old = python_source.messages('def f(n):\n    raise ValueError(f"bad {n} here")\n',
                                 "vllm/config.py")
    new = python_source.messages('def f(size):\n    raise ValueError(f"bad {size} here")\n',
                                 "vllm/config/model.py")
    changed = python_source.messages('def f(n):\n    raise ValueError(f"worse {n}")\n',
                                     "vllm/config/model.py")
    merged = merge([("0.11.0", new + changed), ("0.9.2", old)])
    assert [(w.template, w.releases, w.files) for w in merged] == [
        ("bad {size} here", ["0.9.2", "0.11.0"], ["vllm/config.py", "vllm/config/model.py"]),
        ("worse {n}", ["0.11.0"], ["vllm/config/model.py"]),
    ]


def test_a_release_tree_is_read_once_then_cached(tmp_path: Path) -> None:
    tree = tmp_path / "0.25.1"
    for relative, text in {
        "vllm/layer.py": 'raise ValueError("from vllm")\n',
        "vllm/tests/test_x.py": 'raise ValueError("from a test")\n',
        "benchmarks/b.py": 'raise ValueError("from a benchmark")\n',
        "csrc/k.cu": 'void k() { TORCH_CHECK(ok, "from csrc"); }\n',
    }.items():
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text(text, encoding="utf-8")
    cache = tmp_path / "cache"
    first = release_messages(tree, cache)
    assert sorted(m.template for m in first) == ["from csrc", "from vllm"]
    (tree / "vllm" / "layer.py").write_text('raise ValueError("changed")\n', encoding="utf-8")
    assert release_messages(tree, cache) == first  # the tree's own mtime is the key
    assert len(list(cache.iterdir())) == 1


def test_releases_read_in_parallel_merge_the_same(tmp_path: Path) -> None:
    for release, wording in (("0.9.2", "old wording"), ("0.10.0", "new wording")):
        layer = tmp_path / "src" / release / "vllm" / "layer.py"
        layer.parent.mkdir(parents=True)
        layer.write_text(f'raise ValueError("{wording}")\nraise ValueError("kept")\n',
                         encoding="utf-8")
    serial = vocabulary(tmp_path / "src", ["0.9.2", "0.10.0"], cache=tmp_path / "a")
    parallel = vocabulary(tmp_path / "src", ["0.9.2", "0.10.0"], jobs=2, cache=tmp_path / "b")
    assert serial == parallel
    assert sorted((w.template, w.releases) for w in serial) == [
        ("kept", ["0.9.2", "0.10.0"]), ("new wording", ["0.10.0"]),
        ("old wording", ["0.9.2"])]


@pytest.mark.parametrize(("path", "text", "area"), [
    ("csrc/quantization/marlin/marlin.cu", "size_n = {} is not divisible", "marlin"),
    ("vllm/model_executor/layers/quantization/modelopt.py", "NVFP4 weight_scale was never "
     "loaded", "quantization configs"),
    ("csrc/quantization/fp4/nvfp4_quant_entry.cu", "No compiled nvfp4 kernel",
     "nvfp4/mxfp4 backends"),
    ("vllm/config/speculative.py", "draft model vocab", "speculative decoding/MTP"),
    ("vllm/config/model.py", "max_model_len too large", "config validation"),
    ("vllm/v1/worker/gpu_worker.py", "Free memory on device", "worker/engine/memory"),
    ("vllm/platforms/interface.py", "the NCCL library failed", "distributed"),
])
def test_areas_by_path_then_wording(path: str, text: str, area: str) -> None:
    assert area_of(path, text) == area


def test_sdists_are_unpacked_once_for_the_sources_test(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import tarfile

    from tests import vllm_sources

    sources = tmp_path / "sdists"
    sources.mkdir()
    with tarfile.open(sources / "vllm-0.25.1.tar.gz", "w:gz") as archive:
        for name, text in (("vllm-0.25.1/vllm/layer.py", b'raise ValueError("x")\n'),
                           ("vllm-0.25.1/docs/index.md", b"left out\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))
    monkeypatch.setattr(vllm_sources, "SOURCES", sources)
    monkeypatch.setattr(vllm_sources, "UNPACKED", tmp_path / "unpacked")
    root, releases = vllm_sources.release_trees({"0.25.1", "0.33.0"})
    assert (root, releases) == (tmp_path / "unpacked", ["0.25.1"])
    assert [m.template for m in release_messages(root / "0.25.1", tmp_path / "c")] == ["x"]
    assert not (root / "0.25.1" / "docs").exists()


def test_extract_prints_candidates_the_curated_loader_accepts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.vllm_vocab.__main__ import main
    from tools.vllm_vocab.curated import load

    layer = tmp_path / "src" / "0.25.1" / "vllm" / "config" / "model.py"
    layer.parent.mkdir(parents=True)
    layer.write_text("class ModelConfig:\n    def __post_init__(self, n):\n"
                     "        raise ValueError(f\"max_model_len {n} is 'too' large\")\n",
                     encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["extract", "--sources", str(tmp_path / "src"), "--toml", "--jobs", "1"]) == 0
    stubs = capsys.readouterr().out
    (tmp_path / "curated.toml").write_text(stubs, encoding="utf-8")
    [entry] = load(tmp_path / "curated.toml")
    assert (entry.template, entry.releases, entry.process, entry.fatal) == (
        "max_model_len {n} is 'too' large", ("0.25.1",), "api", True)
