"""Load, test and lint signature directories in a child process with a hard deadline.

Signatures are data, and site directories hold the operator's own: a pattern that backtracks
catastrophically, or one that takes minutes and gigabytes to compile, must cost a refusal
naming its file and the step that ran over, never a hung command or a stalled daemon. The
match budget already bounds each example; the deadline (and a memory ceiling) here is the
backstop for what no regex timeout covers, compiling above all. The child is forked where
this process has a single thread (the command line: it costs next to nothing) and spawned
where it has more (the daemon), since forking a threaded process is not safe. Texts that
passed before load in this process (library.vetted), as fast as an unbounded load.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from logwatch.core.problems import Problem
from logwatch.core.signatures.library import (
    Library,
    LibraryError,
    Progress,
    Step,
    check_examples,
    load_library,
)
from logwatch.library.files import Texts, load_signature_dirs, read_library, with_vocabulary
from logwatch.library.vetted import VettedCache, library_digest

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from logwatch.core.signatures.lint import LintIssue

# The shipped library loads and checks in ~0.1 s; a site with hundreds of signatures in ~1 s.
LOAD_DEADLINE_S = 10.0
# How much the child may grow past its size at start; compiling a hostile pattern fills
# gigabytes within seconds.
MEMORY_HEADROOM_BYTES = 1 << 30
OVERRUN_HINT = ("a pattern that backtracks catastrophically, or one too large to compile; "
                "the signature is refused")

T = TypeVar("T")
ExampleResults = list[tuple[str, int, list[Problem]]]  # (signature id, examples, problems)


def load_bounded(extra: Sequence[Path] = (), base: Path | None = None, check: bool = True,
                 deadline: float = LOAD_DEADLINE_S, cache: VettedCache | None = None
                 ) -> Library:
    """`load_signature_dirs`, parsed and checked in a child that is killed at the deadline;
    texts that passed that way before (the cache) load in this process."""
    texts = read_library(extra, base)  # read here: what is checked is what is remembered
    if not check:
        return with_vocabulary(run_bounded(_load, (texts, False), deadline))
    cache = cache or VettedCache()
    digest = library_digest(texts)
    if cache.holds(digest):
        return with_vocabulary(load_library(*texts, check=False, vetted=True))
    library = run_bounded(_load, (texts, True), deadline)
    cache.add(digest)
    return with_vocabulary(library)


def run_examples_bounded(extra: Sequence[Path] = (), base: Path | None = None,
                 deadline: float = LOAD_DEADLINE_S) -> ExampleResults:
    """Every signature's example results (the library loaded without the built-in check)."""
    return run_bounded(_examples, (list(extra), base), deadline)


def lint_bounded(extra: Sequence[Path] = (), base: Path | None = None,
                 deadline: float = LOAD_DEADLINE_S, traffic: bytes = b""
                 ) -> tuple[int, list[LintIssue]]:
    """(signatures linted, issues) of the checked library; its literals measured on
    `traffic` (healthy vLLM output) where given."""
    return run_bounded(_lint, (list(extra), base, traffic), deadline)


def _load(progress: Progress, texts: Texts, check: bool) -> Library:
    return load_library(*texts, check=check, progress=progress)


def _examples(progress: Progress, extra: list[Path], base: Path | None) -> ExampleResults:
    library = load_signature_dirs(extra, base=base, check=False, progress=progress)
    return [(sig.id, len(sig.examples) + len(sig.counter_examples),
             check_examples(sig, library.texts[sig.id], progress))
            for sig in sorted(library.signatures, key=lambda s: s.id)]


def _lint(progress: Progress, extra: list[Path], base: Path | None, traffic: bytes
          ) -> tuple[int, list[LintIssue]]:
    from logwatch.core.signatures.lint import lint_library

    library = load_signature_dirs(extra, base=base, progress=progress)
    return len(library.signatures), lint_library(library, progress, traffic)


def run_bounded(job: Callable[..., T], args: tuple[Any, ...], deadline: float,
                headroom: int = MEMORY_HEADROOM_BYTES) -> T:
    """`job(progress, *args)` in a child process; its result, or LibraryError naming the step
    that ran past the deadline or the memory ceiling (the child is killed)."""
    import multiprocessing  # 20 ms to import: only when a child is needed

    context = (multiprocessing.get_context("fork") if _single_threaded()
               else multiprocessing.get_context("spawn"))
    receiver, sender = context.Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):  # a forked child must not write them again
        if stream is not None:
            stream.flush()
    child = context.Process(target=_child, args=(sender, job, args, headroom), daemon=True,
                            name="logwatch-signatures")
    ends = time.monotonic() + deadline
    child.start()
    sender.close()
    step = Step("the signature library", None, "starting the checking process")
    try:
        while True:
            left = ends - time.monotonic()
            if left <= 0 or not receiver.poll(left):
                raise LibraryError([Problem(step.path, step.line, f"{step.what} did not "
                                            f"finish within {deadline:g} s", OVERRUN_HINT)])
            try:
                kind, value = receiver.recv()
            except EOFError:
                child.join(timeout=5)
                raise LibraryError([Problem(step.path, step.line, f"{step.what}: the "
                                            f"checking process died (exit status "
                                            f"{child.exitcode})")]) from None
            if kind == "step":
                step = value
            elif kind == "done":
                return cast(T, value)
            elif kind == "problems":
                raise LibraryError(value)
            elif kind == "memory":
                raise LibraryError([Problem(step.path, step.line, f"{step.what} needed more "
                                            f"than {headroom >> 20} MiB of memory",
                                            OVERRUN_HINT)])
            else:
                raise value
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join()


def _child(sender: Connection, job: Callable[..., Any], args: tuple[Any, ...],
           headroom: int) -> None:
    """The child's side: every step and then the outcome go to the parent."""
    _limit_memory(headroom)
    try:
        result = job(lambda step: sender.send(("step", step)), *args)
    except LibraryError as exc:
        sender.send(("problems", exc.problems))
    except MemoryError:
        sender.send(("memory", None))
    except Exception as exc:  # a bug or an unreadable file: the parent raises it
        try:
            sender.send(("error", exc))
        except Exception:  # it does not pickle
            sender.send(("error", RuntimeError(repr(exc))))
    else:
        sender.send(("done", result))
    sender.close()


def _limit_memory(headroom: int) -> None:
    try:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # no procfs: the deadline alone bounds the child
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _single_threaded() -> bool:
    """Whether this process has one thread (native ones included: DuckDB's, watchdog's)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return threading.active_count() == 1
