"""The spawn envelope: the capabilities a capsule holds, and the "child within parent" check.

Both envelopes are lowered from *registry* manifests (never from a request) and compared once per
delegation at ``POST /spawn``. The rule is refuse, never narrow: the first failing axis (in
upstream's fixed order, the order of :func:`violation`) produces one sentence naming the first offending
child entry, byte-identical to upstream's templates.

Lists keep their declaration order (tuples) so "the first offending entry" is well defined; the
state-store set has no declaration order (it is gathered across artifacts) so it is reported in
sorted order, which keeps the sentence deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, cast

from roost.core.allownames import DEFAULT_REGISTRY_NAME, normalise, normalised
from roost.core.manifest import CONTAINMENT_ORDER, Containment, Manifest
from roost.core.netrule import NetworkAllowRule

__all__ = [
    "Envelope",
    "install_covers",
    "normalise_scope",
    "scope_covers",
    "violation",
]

_TAIL: Final = "a spawned capsule can never hold more capability than the capsule that spawned it"


def _list_refusal(key: str, entry: str) -> str:
    return f"{key}: the child declares '{entry}', which its parent does not hold — {_TAIL}"


@dataclass(frozen=True, slots=True)
class Envelope:
    """The twelve compared axes of one capsule, lowered from its manifest."""

    network_allow: tuple[str, ...] = ()
    unix_sockets: bool = False
    peer_fetch_allow: tuple[str, ...] = ()
    shell_allow: tuple[str, ...] = ()
    spawn_allow: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()
    fs_scope: str | None = None
    workdir_exec: bool = False
    state_stores: frozenset[str] = frozenset()
    install_skill: tuple[str, ...] = ()
    install_tool: tuple[str, ...] = ()
    containment: Containment = "advisory"

    @classmethod
    def from_manifest(cls, m: Manifest) -> Envelope:
        """Lower a manifest; the capsule-wide ``capabilities.state`` and resources are not axes."""
        caps = m.capabilities
        return cls(
            network_allow=tuple(caps.network.allow),
            unix_sockets=caps.network.unix_sockets,
            peer_fetch_allow=tuple(caps.peer_fetch.allow),
            shell_allow=tuple(caps.shell.allow),
            spawn_allow=tuple(caps.spawn.allow),
            env_allow=tuple(caps.env.allow),
            fs_scope=caps.filesystem.scope,
            workdir_exec=caps.filesystem.workdir_exec,
            state_stores=m.state_stores(),
            install_skill=tuple(caps.install.skill),
            install_tool=tuple(caps.install.tool),
            containment=caps.containment,
        )

    def to_json(self) -> str:
        """Stable compact JSON (fixed key order, sorted store set) for SQLite storage."""
        return json.dumps(
            {
                "network_allow": list(self.network_allow),
                "unix_sockets": self.unix_sockets,
                "peer_fetch_allow": list(self.peer_fetch_allow),
                "shell_allow": list(self.shell_allow),
                "spawn_allow": list(self.spawn_allow),
                "env_allow": list(self.env_allow),
                "fs_scope": self.fs_scope,
                "workdir_exec": self.workdir_exec,
                "state_stores": sorted(self.state_stores),
                "install_skill": list(self.install_skill),
                "install_tool": list(self.install_tool),
                "containment": self.containment,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Inverse of :meth:`to_json`; strict about types (``ValueError`` on anything else)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("an envelope record must be a JSON object")

        def strs(key: str) -> tuple[str, ...]:
            value = data.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"envelope field {key!r} must be a list of strings")
            return tuple(cast("list[str]", value))

        def flag(key: str) -> bool:
            value = data.get(key)
            if not isinstance(value, bool):
                raise ValueError(f"envelope field {key!r} must be a boolean")
            return value

        scope = data.get("fs_scope")
        if scope is not None and not isinstance(scope, str):
            raise ValueError("envelope field 'fs_scope' must be a string or null")
        containment = data.get("containment")
        if containment not in CONTAINMENT_ORDER:
            raise ValueError("envelope field 'containment' must be advisory, scoped or sealed")
        return cls(
            network_allow=strs("network_allow"),
            unix_sockets=flag("unix_sockets"),
            peer_fetch_allow=strs("peer_fetch_allow"),
            shell_allow=strs("shell_allow"),
            spawn_allow=strs("spawn_allow"),
            env_allow=strs("env_allow"),
            fs_scope=scope,
            workdir_exec=flag("workdir_exec"),
            state_stores=frozenset(strs("state_stores")),
            install_skill=strs("install_skill"),
            install_tool=strs("install_tool"),
            containment=cast("Containment", containment),
        )


# --------------------------------------------------------------------------------------------
# Per-axis coverage predicates


def normalise_scope(path: str) -> tuple[str, ...]:
    """Lexical components of a scope: ``.`` dropped, ``..`` pops (never past ``/``), no I/O.

    An absolute path starts with the component ``"/"``, so ``/data`` and ``data`` differ. A
    relative path that climbs above its start keeps its leading ``..`` components.
    """
    out: list[str] = ["/"] if path.startswith("/") else []
    floor = len(out)
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if len(out) > floor and out[-1] != "..":
                out.pop()
            elif not out or out[0] != "/":
                out.append("..")
            continue
        out.append(comp)
    return tuple(out)


def _leading_parents(comps: tuple[str, ...]) -> int:
    n = 0
    while n < len(comps) and comps[n] == "..":
        n += 1
    return n


def scope_covers(parent: str, child: str) -> bool:
    """Whether ``child``'s normalised components start with ``parent``'s.

    A child that climbs further above the workdir than its parent (``../x`` under ``.``) is not
    covered, even though the empty parent prefix would otherwise match everything.
    """
    p, c = normalise_scope(parent), normalise_scope(child)
    return c[: len(p)] == p and _leading_parents(c) == _leading_parents(p)


def install_covers(parent: str, child: str) -> bool:
    """``*`` covers all; ``p*`` covers names/patterns beginning with ``p``; exact covers itself."""
    if parent.endswith("*"):
        return child.startswith(parent[:-1])
    return parent == child


def _first_uncovered(
    parent: Sequence[str], child: Iterable[str], covered: Callable[[Sequence[str], str], bool]
) -> str | None:
    for entry in child:
        if not covered(parent, entry):
            return entry
    return None


def _net_uncovered(parent: Sequence[str], child: Iterable[str]) -> str | None:
    rules = [r for r in map(NetworkAllowRule.parse, parent) if r is not None]  # parsed once
    for entry in child:
        c = NetworkAllowRule.parse(entry)
        if c is None or not any(r.covers(c) for r in rules):
            return entry
    return None


def _names_uncovered(parent: Sequence[str], child: Iterable[str]) -> str | None:
    held = set(parent)
    for entry in child:
        if entry not in held:
            return entry
    return None


def _install_uncovered(parent: Sequence[str], child: Iterable[str]) -> str | None:
    return _first_uncovered(parent, child, lambda ps, c: any(install_covers(p, c) for p in ps))


def violation(parent: Envelope, child: Envelope, registry: str = DEFAULT_REGISTRY_NAME) -> str | None:
    """The refusal sentence for the first axis on which ``child`` exceeds ``parent``, else ``None``.

    ``capabilities.spawn.allow`` entries are compared after the allow lists' normalisation
    (:mod:`roost.core.allownames`: ``<registry>/<name>`` of the daemon's ``registry`` is ``<name>``);
    the sentence quotes the child's entry as declared."""
    entry = _net_uncovered(parent.network_allow, child.network_allow)
    if entry is not None:
        return _list_refusal("capabilities.network.allow", entry)
    if child.unix_sockets and not parent.unix_sockets:
        return _list_refusal("capabilities.network.unix_sockets", "true")
    entry = _net_uncovered(parent.peer_fetch_allow, child.peer_fetch_allow)
    if entry is not None:
        return _list_refusal("capabilities.peer_fetch.allow", entry)
    entry = _names_uncovered(parent.shell_allow, child.shell_allow)
    if entry is not None:
        return _list_refusal("capabilities.shell.allow", entry)
    held = set(normalised(parent.spawn_allow, registry))
    entry = next((e for e in child.spawn_allow if normalise(e, registry) not in held), None)
    if entry is not None:
        return _list_refusal("capabilities.spawn.allow", entry)
    entry = _names_uncovered(parent.env_allow, child.env_allow)
    if entry is not None:
        return _list_refusal("capabilities.env.allow", entry)
    if parent.fs_scope is not None:
        if child.fs_scope is None:
            return (
                "capabilities.filesystem.scope: the child declares no scope and would reach the "
                f"whole workdir, which its parent's scope '{parent.fs_scope}' does not cover — {_TAIL}"
            )
        if not scope_covers(parent.fs_scope, child.fs_scope):
            return (
                f"capabilities.filesystem.scope: the child declares '{child.fs_scope}', which its "
                f"parent's scope '{parent.fs_scope}' does not cover — {_TAIL}"
            )
    if child.workdir_exec and not parent.workdir_exec:
        return _list_refusal("capabilities.filesystem.workdir_exec", "true")
    extra = child.state_stores - parent.state_stores
    if extra:
        return _list_refusal("capabilities.state.store", min(extra))
    for key, p_list, c_list in (
        ("capabilities.install.skill", parent.install_skill, child.install_skill),
        ("capabilities.install.tool", parent.install_tool, child.install_tool),
    ):
        entry = _install_uncovered(p_list, c_list)
        if entry is not None:
            return _list_refusal(key, entry)
    if CONTAINMENT_ORDER[child.containment] < CONTAINMENT_ORDER[parent.containment]:
        return (
            f"capabilities.containment: the child declares containment '{child.containment}', "
            f"below its parent's floor '{parent.containment}' — a spawned capsule's containment "
            "floor may only rise"
        )
    return None
