"""Which `vllm serve` flags and VLLM_* environment variables a vLLM release knows, and whether a
command line's flags are among them, spelled the ways vLLM's parser accepts; and which model
architectures its registry serves.

The names per release are data (`data/vllm_cli.json`, extracted from vLLM's sources by
`python -m tools.vllm_cli`; tests/test_vllm_cli_oracle.py re-extracts and compares). A release
outside the extracted ones is not judged: nothing here guesses a release's vocabulary.

How vLLM reads a flag (FlexibleArgumentParser.parse_args, checked in 0.11.2-0.33.0): in the
name between `--` and the first `.`, underscores become dashes; `--name=value` is split at the
first `=`; `--a.b value` sets key `b` of the dict flag `--a`. argparse itself then accepts
`--no-x` for boolean flags (BooleanOptionalAction), from 0.33 `--disable-x` for `--enable-x`
and back (EnableDisableAction, registered in place of BooleanOptionalAction), and any
unambiguous prefix of a long flag (allow_abbrev is left on). From 0.33 `-O<n>` becomes
`--optimization-level <n>`. Which flags are booleans is not stored, so `--no-x` is accepted
whenever `--x` is known (an ambiguous prefix too): a missed warning, never a false one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.core.problems import did_you_mean
from logwatch.core.quant.ignore_rules import Release, parse_release, release_ranges, release_text

# in logwatch/core/snapshot/data/, read by the shells (cli/preflight.py)
DATA_NAME = "vllm_cli.json"
ARGPARSE_BUILTINS = frozenset({"-h", "--help"})
ENABLE_DISABLE_FROM: Release = (0, 33, 0)  # EnableDisableAction (none in 0.30.0-0.32.0)


class VocabularyError(ValueError):
    """The data file is not what tools.vllm_cli writes."""


@dataclass(frozen=True, slots=True)
class CliVocabulary:
    releases: tuple[Release, ...]  # the extracted ones, oldest first
    flags: Mapping[str, frozenset[Release]]
    env: Mapping[str, frozenset[Release]]
    # config.json `architectures` the release's model registry serves
    architectures: Mapping[str, frozenset[Release]] = field(default_factory=dict)
    # the model classes of the transformers release vLLM's newest extracted one pins (its
    # Transformers backend serves an architecture vLLM lacks when transformers has it)
    transformers_version: str | None = None
    transformers_architectures: frozenset[str] = frozenset()
    # --speculative-config `method` values each release's SpeculativeMethod takes
    speculative_methods: Mapping[str, frozenset[Release]] = field(default_factory=dict)

    def covers(self, release: Release | None) -> bool:
        return release is not None and release in self.releases

    def flags_at(self, release: Release) -> frozenset[str]:
        return frozenset(f for f, known in self.flags.items() if release in known)

    def env_at(self, release: Release) -> frozenset[str]:
        return frozenset(e for e, known in self.env.items() if release in known)

    def architectures_at(self, release: Release) -> frozenset[str]:
        return frozenset(a for a, known in self.architectures.items() if release in known)

    def speculative_methods_at(self, release: Release) -> frozenset[str]:
        return frozenset(m for m, known in self.speculative_methods.items() if release in known)

    def where_architecture(self, name: str) -> list[str]:
        return release_ranges(sorted(self.architectures.get(name, ())), self.releases)

    def where(self, name: str) -> list[str]:
        """The extracted releases that know a flag or variable, as ranges."""
        known = self.flags.get(name) or self.env.get(name) or frozenset()
        return release_ranges(sorted(known), self.releases)


def vocabulary(data: Mapping[str, Any]) -> CliVocabulary:
    """The data file's content (parsed JSON), its release ranges expanded."""
    try:
        releases = tuple(r for r in (parse_release(str(t)) for t in data["releases"])
                         if r is not None)

        def expand(ranges: Sequence[str]) -> frozenset[Release]:
            out: set[Release] = set()
            for text in ranges:
                first, _, last = str(text).partition("-")
                low, high = parse_release(first), parse_release(last or first)
                if low is None or high is None:
                    raise VocabularyError(f"unreadable release range {text!r}")
                out |= {r for r in releases if low <= r <= high}
            return frozenset(out)

        return CliVocabulary(releases, {k: expand(v) for k, v in data["flags"].items()},
                             {k: expand(v) for k, v in data["env"].items()},
                             {k: expand(v) for k, v in data.get("architectures", {}).items()},
                             *_transformers(data.get("transformers")),
                             {k: expand(v) for k, v in
                              data.get("speculative_methods", {}).items()})
    except (KeyError, TypeError, AttributeError) as exc:
        raise VocabularyError(f"not a vLLM CLI vocabulary: {exc}") from exc


def _transformers(data: Any) -> tuple[str | None, frozenset[str]]:
    if data is None:
        return None, frozenset()
    return str(data["version"]), frozenset(str(a) for a in data["architectures"])


def normalised_flag(token: str) -> str:
    """A flag as vLLM's parser sees it: the name before `=`, underscores made dashes up to
    the first `.`."""
    name = token.split("=", 1)[0]
    if not name.startswith("--"):
        return name
    head, dot, rest = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


def flag_accepted(token: str, known: frozenset[str], enable_disable: bool = False) -> bool:
    """Whether a release whose parser declares `known` accepts this flag as written;
    `enable_disable`: it pairs `--enable-x` with `--disable-x` (ENABLE_DISABLE_FROM)."""
    flag = normalised_flag(token)
    if flag in known or flag in ARGPARSE_BUILTINS:
        return True
    if flag.startswith("-O") and not flag.startswith("--"):
        return bool({"-O", "--optimization-level", "--compilation-config"} & known)
    if not flag.startswith("--"):
        return False
    base = flag.split(".", 1)[0]  # --compilation-config.level: a key of a dict flag
    if base != flag:
        return flag_accepted(base, known, enable_disable)
    inverses = [("--no-", "--")]
    if enable_disable:
        inverses += [("--disable-", "--enable-"), ("--enable-", "--disable-")]
    for prefix, inverse in inverses:
        if flag.startswith(prefix) and inverse + flag[len(prefix):] in known:
            return True
    return any(k.startswith(flag) for k in known if k.startswith("--"))  # an abbreviation


def canonical_flag(token: str, known: frozenset[str]) -> str:
    """The flag vLLM's parser takes `token` for: underscores made dashes, and a unique prefix
    of one of `known`'s long flags completed (`--max-model` is `--max-model-len`); as
    normalised where it is none of those (an unknown flag, `--a.b`, a short flag)."""
    flag = normalised_flag(token)
    if flag in known or not flag.startswith("--") or "." in flag:
        return flag
    matches = [k for k in known if k.startswith(flag) and k.startswith("--")]
    return matches[0] if len(matches) == 1 else flag


@dataclass(frozen=True, slots=True)
class UnknownName:
    name: str  # as written
    kind: str  # "flag" or "env"
    known_in: tuple[str, ...]  # extracted releases that do know it
    hint: str  # "did you mean '--x'?" or ""

    def reason(self, release: Release) -> str:
        what = "a flag" if self.kind == "flag" else "an environment variable"
        where = (f" (known in {', '.join(self.known_in)})" if self.known_in
                 else " (in no extracted release)")
        effect = ("vLLM exits with an argument error" if self.kind == "flag"
                  else "vLLM does not read it, so it has no effect")
        return (f"{self.name}: not {what} of vLLM {release_text(release)}{where}: "
                f"{effect}.")


def unknown_names(vocab: CliVocabulary, release: Release, flags: Sequence[str],
                  env_names: Sequence[str]) -> list[UnknownName]:
    """The flags and VLLM_* variables the release does not know (it must be `covered`)."""
    known_flags, known_env = vocab.flags_at(release), vocab.env_at(release)
    pairs = release >= ENABLE_DISABLE_FROM
    out = [_unknown(normalised_flag(f), f, "flag", vocab, known_flags)
           for f in dict.fromkeys(flags) if not flag_accepted(f, known_flags, pairs)]
    out += [_unknown(e, e, "env", vocab, known_env)
            for e in dict.fromkeys(env_names) if e.startswith("VLLM_") and e not in known_env]
    return out


def _unknown(name: str, written: str, kind: str, vocab: CliVocabulary,
             known: frozenset[str]) -> UnknownName:
    """A name other releases know says so; only a name no release knows (a typo, most
    likely) gets a "did you mean" among this release's names."""
    where = tuple(vocab.where(name))
    return UnknownName(written, kind, where, "" if where else did_you_mean(name, known))
