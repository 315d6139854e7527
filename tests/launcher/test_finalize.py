"""The finalize decision: every rule on its own, then properties over every combination of facts."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.core.finalize import (
    CANCELLED_TASK_REASON,
    PARENT_ENDED_REASON,
    UNKNOWN_REASON,
    Decision,
    Existing,
    Facts,
    decide,
    wants_own_session_end,
)
from roost.core.jobs import Delivery, StopReason, state_for_status
from roost.services.completionfile import OPERATOR_CANCEL_DETAIL, TERMINATED_DETAIL, deadline_detail

UNKNOWN = "exit status unknown: the process ended while the daemon was not running"
STATUSES = ("ok", "error", "crashed", "terminated")


def facts(**over: object) -> Facts:
    base = Facts(
        delegated=True,
        parent_running=True,
        stop_reason=None,
        existing=None,
        own_end=None,
        exit_status="exit status 1",
        addressed=True,
        delivery="none",
        deadline_secs=600.0,
        has_session=True,
    )
    return replace(base, **over)  # type: ignore[arg-type]


def child_record(
    status: str = "ok", *, delivered: bool = False, by: str = "child", detail: str | None = None
) -> Existing:
    return Existing(status=status, delivered=delivered, reported_by=by, detail=detail)


# -- rule 1: the parent is gone -----------------------------------------------------------------


def test_parent_ended_first_means_no_completion() -> None:
    d = decide(facts(stop_reason="parent_ended", parent_running=False))
    assert d == Decision(
        write="none",
        send=False,
        attempts=0,
        outcome="terminated",
        reason=PARENT_ENDED_REASON,
        state="terminated",
        trace_line=False,
    )


def test_parent_ended_keeps_the_record_the_child_wrote() -> None:
    d = decide(facts(stop_reason="parent_ended", existing=child_record("ok")))
    assert (d.write, d.send, d.outcome, d.state, d.reason) == ("none", False, "ok", "complete", PARENT_ENDED_REASON)
    d = decide(facts(stop_reason="parent_ended", existing=child_record("error")))
    assert (d.outcome, d.state) == ("error", "failed")


@pytest.mark.parametrize("why", [None, "shutdown"])
def test_a_vanished_parent_with_no_earlier_stop_means_no_completion(why: StopReason | None) -> None:
    d = decide(facts(stop_reason=why, parent_running=False))
    assert (d.write, d.reason, d.trace_line) == ("none", PARENT_ENDED_REASON, False)


@pytest.mark.parametrize(
    ("why", "detail", "reason"),
    [
        ("cancel", TERMINATED_DETAIL, CANCELLED_TASK_REASON),
        ("operator_cancel", OPERATOR_CANCEL_DETAIL, OPERATOR_CANCEL_DETAIL),
        ("deadline", deadline_detail(600.0), deadline_detail(600.0)),
    ],
)
def test_the_first_stop_reason_wins_over_a_later_parent_end(why: StopReason, detail: str, reason: str) -> None:
    """Cancelled (or past its deadline) before the parent ended: the launcher's terminated
    record, to nobody, and no line in the ended parent's trace."""
    d = decide(facts(stop_reason=why, parent_running=False))
    assert d == Decision(
        write="launcher",
        send=True,
        attempts=0,
        outcome="terminated",
        reason=reason,
        state="terminated",
        trace_line=False,
        status="terminated",
        detail=detail,
    )


def test_a_delivered_child_record_outlives_a_cancel_after_the_parent_ended() -> None:
    d = decide(facts(stop_reason="cancel", parent_running=False, existing=child_record("ok", delivered=True)))
    assert (d.write, d.send, d.attempts, d.outcome, d.state) == ("existing", False, 0, "ok", "complete")


# -- rule 2: stopped by us ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("why", "detail", "reason", "attempts"),
    [
        ("cancel", TERMINATED_DETAIL, CANCELLED_TASK_REASON, 0),
        ("operator_cancel", OPERATOR_CANCEL_DETAIL, OPERATOR_CANCEL_DETAIL, 0),
        ("shutdown", TERMINATED_DETAIL, TERMINATED_DETAIL, 0),
        ("deadline", deadline_detail(600.0), deadline_detail(600.0), 2),
    ],
)
def test_stopped_by_us(why: StopReason, detail: str, reason: str, attempts: int) -> None:
    """Seed 000: a delegated sub-capsule the parent (or its deadline) ended is ``terminated``;
    a cancel by the parent reads "the delegating task was cancelled", the record's detail stays
    "the parent ended this delegation"."""
    d = decide(facts(stop_reason=why, existing=child_record("ok")))
    assert d == Decision(
        write="launcher",
        send=True,
        attempts=attempts,
        outcome="terminated",
        reason=reason,
        state="terminated",
        trace_line=True,
        status="terminated",
        detail=detail,
    )


def test_a_finished_child_with_no_readable_record_is_unknown() -> None:
    """Seed 000's sub-capsule vocabulary::

        | `"unknown"` | A completion arrived, and the parent found no readable `completion.json`
        behind it. The parent's own word, and reachable on no other path |

    The child ended its own session (it said it finished) to a parent it should have reported
    to, and no readable record is there: ``unknown``, posted as the launcher's ``error`` record."""
    d = decide(facts(existing=None, own_end="complete", self_ended=True, exit_status="exit status 0"))
    assert (d.write, d.send, d.attempts, d.trace_line) == ("launcher", True, 2, True)
    assert (d.outcome, d.reason, d.state) == ("unknown", UNKNOWN_REASON, "failed")
    assert (d.status, d.detail, d.detail_from_stderr) == ("error", UNKNOWN_REASON, False)
    # Reachable on no other path: a session ended by something else, a crash, nobody to tell.
    assert decide(facts(existing=None, own_end="failed", self_ended=False)).outcome != "unknown"
    assert decide(facts(existing=None, own_end=None)).outcome == "crashed"
    unaddressed = facts(
        existing=None, own_end="complete", self_ended=True, addressed=False, exit_status="exit status 0"
    )
    assert decide(unaddressed).outcome == "ok"


def test_a_deadline_to_an_unaddressed_parent_is_recorded_not_posted() -> None:
    assert decide(facts(stop_reason="deadline", addressed=False)).attempts == 0


def test_the_deadline_detail_names_the_deadline() -> None:
    assert decide(facts(stop_reason="deadline", deadline_secs=5)).detail == deadline_detail(5)


def test_a_top_level_job_stopped_is_terminated_with_no_trace_line() -> None:
    d = decide(facts(delegated=False, parent_running=False, addressed=False, stop_reason="cancel"))
    assert (d.write, d.status, d.attempts, d.trace_line) == ("launcher", "terminated", 0, False)


# -- rule 3: the child's own record -------------------------------------------------------------------


@pytest.mark.parametrize(("by", "attempts"), [("child", 1), ("launcher", 2)])
def test_an_undelivered_record_is_posted(by: str, attempts: int) -> None:
    d = decide(facts(existing=child_record("ok", by=by)))
    assert (d.write, d.send, d.attempts, d.outcome, d.reason, d.state) == (
        "existing",
        True,
        attempts,
        "ok",
        None,
        "complete",
    )


@pytest.mark.parametrize("delivery", ["posting", "delivered", "failed"])
def test_a_post_once_begun_is_never_repeated(delivery: Delivery) -> None:
    d = decide(facts(existing=child_record("ok"), delivery=delivery))
    assert (d.write, d.send, d.attempts) == ("existing", False, 0)


def test_a_delivered_record_is_left_alone() -> None:
    d = decide(facts(existing=child_record("error", delivered=True)))
    assert (d.write, d.send, d.attempts, d.outcome, d.state) == ("existing", False, 0, "error", "failed")


def test_an_unaddressed_record_is_rewritten_for_nobody() -> None:
    d = decide(facts(existing=child_record("ok"), addressed=False))
    assert (d.write, d.send, d.attempts) == ("existing", True, 0)


@pytest.mark.parametrize("status", ["crashed", "terminated"])
def test_a_crashed_or_terminated_record_gives_its_detail_as_the_reason(status: str) -> None:
    d = decide(facts(existing=child_record(status, by="launcher", detail="why")))
    assert (d.reason, d.state) == ("why", status)
    assert decide(facts(existing=child_record("error", detail="why"))).reason is None


# -- rule 4: the child ended its own session -----------------------------------------------------------


@pytest.mark.parametrize(
    ("own_end", "exit_status", "status"),
    [
        ("complete", "exit status 0", "ok"),
        ("complete", "exit status 3", "error"),
        ("failed", "exit status 0", "error"),
        ("complete", "killed by SIGKILL", "error"),
    ],
)
def test_an_unaddressed_child_that_ended_its_session(own_end: str, exit_status: str, status: str) -> None:
    d = decide(facts(own_end=own_end, exit_status=exit_status, addressed=False))
    assert d == Decision(
        write="launcher",
        send=True,
        attempts=0,
        outcome=status,
        reason=None,
        state=state_for_status(status),
        trace_line=True,
        status=status,
    )


@pytest.mark.parametrize(
    ("told", "status"),
    [("ok", "ok"), ("error", "error"), ("failed", "error"), (None, None)],
)
def test_a_readopted_child_is_judged_by_its_own_session_end(told: str | None, status: str | None) -> None:
    f = facts(exit_status=UNKNOWN, addressed=False, told=told)
    assert wants_own_session_end(f)
    d = decide(f)
    if status is None:  # it said nothing: it crashed
        assert (d.status, d.detail_from_stderr) == ("crashed", True)
    else:
        assert (d.write, d.status, d.outcome) == ("launcher", status, status)


def test_a_readopted_child_whose_session_ended_in_the_table_and_said_nothing_is_ok() -> None:
    d = decide(facts(exit_status=UNKNOWN, addressed=False, own_end="complete"))
    assert d.status == "ok"


def test_the_own_session_end_is_wanted_only_when_nothing_else_says() -> None:
    assert not wants_own_session_end(facts(exit_status="exit status 0"))
    assert not wants_own_session_end(facts(exit_status=UNKNOWN, existing=child_record()))
    assert not wants_own_session_end(facts(exit_status=UNKNOWN, has_session=False))


def test_an_addressed_child_that_ended_its_session_without_a_record_crashed() -> None:
    """It had somewhere to post, so it must have written a record; without one it crashed."""
    d = decide(facts(own_end="complete", exit_status="exit status 0"))
    assert (d.status, d.attempts, d.detail_from_stderr) == ("crashed", 2, True)


# -- rule 5: it crashed -------------------------------------------------------------------------------


def test_a_crash() -> None:
    d = decide(facts())
    assert d == Decision(
        write="launcher",
        send=True,
        attempts=2,
        outcome="crashed",
        reason=None,
        state="crashed",
        trace_line=True,
        status="crashed",
        detail_from_stderr=True,
    )


def test_a_top_level_crash_is_recorded_for_nobody() -> None:
    d = decide(facts(delegated=False, parent_running=False, addressed=False))
    assert (d.status, d.attempts, d.trace_line) == ("crashed", 0, False)


def test_the_trace_line_is_written_once() -> None:
    assert not decide(facts(end_written=True)).trace_line


RECORDS = [child_record(s, delivered=dv, by=b) for s in STATUSES for dv in (True, False) for b in ("child", "launcher")]

# -- every combination ------------------------------------------------------------------------------

existing_st = st.one_of(
    st.none(),
    st.builds(
        Existing,
        status=st.sampled_from(STATUSES),
        delivered=st.booleans(),
        reported_by=st.sampled_from(["child", "launcher"]),
        detail=st.one_of(st.none(), st.text(max_size=5)),
    ),
)
facts_st = st.builds(
    Facts,
    delegated=st.booleans(),
    parent_running=st.booleans(),
    stop_reason=st.sampled_from([None, *get_args(StopReason)]),
    existing=existing_st,
    own_end=st.sampled_from([None, "complete", "failed", "expired"]),
    exit_status=st.sampled_from(["exit status 0", "exit status 2", "killed by SIGTERM", UNKNOWN]),
    addressed=st.booleans(),
    delivery=st.sampled_from(get_args(Delivery)),
    deadline_secs=st.sampled_from([1.0, 600.0]),
    has_session=st.booleans(),
    told=st.sampled_from([None, "ok", "error"]),
    end_written=st.booleans(),
)


@given(facts_st)
def test_every_decision_is_consistent(f: Facts) -> None:
    d = decide(f)
    # One record at most, and the state is the one its status gives.
    if d.write == "launcher":
        assert d.status in STATUSES and d.send
        assert d.state == state_for_status(d.status or "")
        assert d.detail_from_stderr == (d.status == "crashed")
        if d.detail_from_stderr:
            assert d.detail is None and d.reason is None
    elif d.write == "existing":
        assert f.existing is not None and d.status is None
        assert d.state == state_for_status(f.existing.status) and d.outcome == f.existing.status
    else:
        assert not d.send and d.attempts == 0 and d.reason == PARENT_ENDED_REASON
    # Posting: only to an addressed, running parent; never twice across a crash; never a
    # record already delivered.
    assert 0 <= d.attempts <= 2
    if d.attempts:
        assert d.send and f.addressed and (f.parent_running or not f.delegated)
    if d.write == "existing" and d.send:
        assert f.existing is not None and not f.existing.delivered and f.delivery == "none"
    # No completion only when the parent's end came first (or with no stop of ours before it).
    if d.write == "none":
        assert f.delegated and (
            f.stop_reason == "parent_ended" or (not f.parent_running and f.stop_reason in (None, "shutdown"))
        )
    # The parent's line: only into a running parent's trace, once.
    assert d.trace_line == (f.delegated and f.parent_running and not f.end_written and d.write != "none")
    # A stop of ours shows in the outcome unless the child's record was already delivered.
    ours = f.stop_reason in ("cancel", "operator_cancel", "shutdown", "deadline") and d.write != "none"
    if ours and (f.existing is None or not f.existing.delivered):
        assert d.outcome == "terminated"
        assert d.state == "terminated"


def test_every_combination_decides() -> None:
    """The whole (finite) space, not a sample: every combination gets a decision of a known shape."""
    seen: set[tuple[str, str, int]] = set()
    for combo in itertools.product(
        (True, False),
        (True, False),
        (None, *get_args(StopReason)),
        (None, *RECORDS),
        (None, "complete", "failed"),
        ("exit status 0", "exit status 2", UNKNOWN),
        (True, False),
        get_args(Delivery),
        (None, "ok", "error"),
        (True, False),
    ):
        delegated, running, why, existing, own_end, exit_status, addressed, delivery, told, self_ended = combo
        d = decide(
            Facts(
                delegated=delegated,
                parent_running=running,
                stop_reason=why,
                existing=existing,
                own_end=own_end,
                exit_status=exit_status,
                addressed=addressed,
                delivery=delivery,
                deadline_secs=60.0,
                has_session=True,
                told=told,
                self_ended=self_ended and own_end is not None,
            )
        )
        seen.add((d.write, d.outcome, d.attempts))
    # Every kind of ending is reachable.
    assert {w for w, _, _ in seen} == {"none", "existing", "launcher"}
    assert {o for _, o, _ in seen} >= {"ok", "error", "crashed", "terminated", "unknown"}
    assert "timed_out" not in {o for _, o, _ in seen}  # the plan capsule step's word, never a job's
    assert {a for _, _, a in seen} == {0, 1, 2}
