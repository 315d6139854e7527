"""ListTasks paging and field checks (pure), with property tests over random task sets."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a.protocol import errors, listing
from a2a.protocol.models import TaskState


@dataclass
class Rec:
    updated: float
    task_id: str
    context: str
    state: TaskState

    @property
    def list_key(self) -> tuple[str, str]:
        return self.task_id, self.context


def _walk(recs: list[Rec], size: int) -> list[str]:
    seen: list[str] = []
    token = ""
    for _ in range(len(recs) + 2):
        q = listing.parse_list({"pageSize": size, "pageToken": token} if token else {"pageSize": size})
        page, total, token = listing.select(recs, q)
        assert total == len(recs)
        assert len(page) <= size
        seen += [r.task_id for r in page]
        if not token:
            return seen
    raise AssertionError("paging did not end")


recs_strategy = st.lists(
    st.builds(
        Rec,
        updated=st.floats(min_value=0, max_value=2e9, allow_nan=False),
        task_id=st.uuids().map(lambda u: f"tsk_{u.hex}"),
        context=st.sampled_from(["a", "b"]),
        state=st.sampled_from(list(TaskState)),
    ),
    max_size=40,
    unique_by=lambda r: r.task_id,
)


@given(recs_strategy, st.integers(min_value=1, max_value=100))
def test_paging_visits_every_task_once_newest_first(recs: list[Rec], size: int) -> None:
    seen = _walk(recs, size)
    expected = [r.task_id for r in sorted(recs, key=lambda r: (r.updated, r.task_id), reverse=True)]
    assert seen == expected


@given(st.floats(min_value=0, max_value=2e9, allow_nan=False), st.text(min_size=1, max_size=50))
def test_token_round_trip(updated: float, task_id: str) -> None:
    assert listing.decode_token(listing.encode_token(updated, task_id)) == (updated, task_id)


@given(recs_strategy, st.sampled_from(["a", "b"]), st.sampled_from(list(TaskState)))
def test_filters_match_exactly(recs: list[Rec], ctx: str, state: TaskState) -> None:
    name = state.v1 if state is not TaskState.UNKNOWN else "unknown"
    q = listing.parse_list({"contextId": ctx, "status": name, "pageSize": 100})
    page, total, _ = listing.select(recs, q)
    assert total == sum(1 for r in recs if r.context == ctx and r.state is state)
    assert all(r.context == ctx and r.state is state for r in page)


def test_defaults_and_bounds() -> None:
    q = listing.parse_list({})
    assert (q.page_size, q.cursor, q.history_length, q.include_artifacts, q.status) == (50, None, None, False, None)
    assert listing.parse_list({"pageSize": 1}).page_size == 1
    assert listing.parse_list({"pageSize": 100}).page_size == 100
    assert listing.parse_list({"status": "TASK_STATE_UNSPECIFIED"}).status is None
    assert listing.parse_list({"status": "UNRECOGNIZED"}).status is None  # the JS SDK's unset enum
    assert listing.parse_list({"status": "input-required"}).status is TaskState.INPUT_REQUIRED
    assert listing.parse_list({"statusTimestampAfter": "2026-01-01T00:00:00+02:00"}).status_after == 1767218400.0


@pytest.mark.parametrize(
    "params",
    [
        {"pageSize": -1},
        {"pageSize": 0},
        {"pageSize": 101},
        {"pageSize": True},
        {"pageSize": 1.5},
        {"pageToken": 3},
        {"pageToken": "%%%"},
        {"pageToken": "djI6MXx4"},  # "v2:1|x"
        {"status": "done"},
        {"historyLength": -1},
        {"historyLength": False},
        {"statusTimestampAfter": 5},
        {"statusTimestampAfter": "2026-13-01T00:00:00Z"},
        {"includeArtifacts": 1},
    ],
)
def test_bad_fields(params: dict[str, object]) -> None:
    with pytest.raises(errors.JsonRpcError) as info:
        listing.parse_list(params)
    assert info.value.code == -32602 and info.value.message.startswith("Invalid params: ")
