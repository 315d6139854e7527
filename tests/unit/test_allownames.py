"""Registry-qualified allow-list entries (roost/core/allownames.py, roost/core/ids.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.core.admission import NotInSpawnAllow, admit_top_level
from roost.core.allownames import allows, normalise
from roost.core.envelope import Envelope, violation
from roost.core.ids import allow_entry_problem, identifier_problem

NAMES = st.text(alphabet="abcdefghij-_.0123", min_size=1, max_size=12).filter(lambda s: identifier_problem(s) is None)


def test_the_own_registrys_entry_is_the_bare_name() -> None:
    assert normalise("local/worker", "local") == "worker"
    assert normalise("other/worker", "local") == "other/worker"
    assert normalise("worker", "local") == "worker"
    assert allows(["local/worker"], "worker", "local")
    assert allows(["worker"], "worker", "local")
    assert not allows(["other/worker"], "worker", "local")
    assert allows(["other/worker"], "worker", "other")  # a daemon whose registry is named "other"


def test_the_grammar_allows_exactly_one_slash_between_two_identifiers() -> None:
    assert allow_entry_problem("worker") is None
    assert allow_entry_problem("local/worker") is None
    assert allow_entry_problem("a/b/c") is not None
    assert allow_entry_problem("/worker") is not None
    assert allow_entry_problem("local/") is not None
    assert allow_entry_problem("local/..") is not None


@given(NAMES, NAMES)
def test_a_bare_name_matches_exactly_and_qualification_matches_only_its_registry(name: str, other: str) -> None:
    assert allows([name], name, "local")
    assert allows([f"local/{name}"], name, "local")
    assert allows([f"{other}/{name}"], name, "local") == (other == "local")
    if other != name:
        assert not allows([other], name, "local")


def test_top_level_admission_and_the_envelope_normalise_the_same_way() -> None:
    assert admit_top_level("worker", draining=False, spawn_allow=("local/worker",), registry="local") is None
    assert admit_top_level("worker", draining=False, spawn_allow=("x/worker",)) == NotInSpawnAllow("worker")
    parent = Envelope(spawn_allow=("worker",))
    assert violation(parent, Envelope(spawn_allow=("local/worker",))) is None
    assert violation(Envelope(spawn_allow=("local/worker",)), Envelope(spawn_allow=("worker",))) is None
    refused = violation(parent, Envelope(spawn_allow=("other/worker",)))
    assert refused is not None and "capabilities.spawn.allow: the child declares 'other/worker'" in refused
