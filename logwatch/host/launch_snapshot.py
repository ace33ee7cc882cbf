"""The snapshot of a launch the daemon follows: what the operator configured for its source
(a target's unit, argv and model directory, or exactly what `logwatch run` started) when
there is one, else what vLLM said about itself as it started (its start lines), read with
this host's GPU. Built on the daemon's database thread; cached per launch state."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from logwatch.core.snapshot.host_facts import launch_from_log
from logwatch.core.snapshot.model import GpuFacts, Snapshot
from logwatch.host.capture import capture_gpu, take_snapshot

CACHED = 256  # launch states kept (a launch has at most three: one per start line)


class LaunchSnapshots:
    def __init__(self, gpu: GpuFacts | None = None) -> None:
        self._gpu = gpu
        self._configured: dict[str, Snapshot] = {}  # source or target name -> snapshot
        self._cache: dict[tuple[str, str], Snapshot] = {}
        self._lock = threading.Lock()

    def configure(self, name: str, snapshot: Snapshot) -> None:
        """What `name` (a source, or a target whose sources are `name:...`) runs with now."""
        with self._lock:
            self._configured[name] = snapshot

    def configured(self, source: str) -> Snapshot | None:
        with self._lock:
            found = self._configured.get(source)
            return found if found is not None else self._configured.get(
                source.split(":", 1)[0])

    def for_launch(self, source: str, captures: Mapping[str, Mapping[str, str]]) -> Snapshot:
        configured = self.configured(source)
        if configured is not None and (configured.launch or not captures):
            return configured  # a vLLM command line: what runs (else what vLLM said)
        key = (source, repr(sorted((k, sorted(v.items())) for k, v in captures.items())))
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        model_dir = None
        if configured is not None:
            gpu = configured.gpu
            # a target given only its model directory: the model read with what vLLM said
            model_dir = configured.model.path if configured.model is not None else None
        else:
            gpu = self._gpu = self._gpu or capture_gpu()
        facts = launch_from_log({k: dict(v) for k, v in captures.items()})
        snapshot = take_snapshot(log_facts=facts, gpu=gpu, model_dir=model_dir)
        with self._lock:
            if len(self._cache) >= CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = snapshot
        return snapshot
