"""What happens to a job once its child has exited: the decision, with no I/O.

Exactly one ``completion.json`` per job, written by the child or by the launcher, delivered to
the parent's door at most once across a crash, or — when the parent is gone — to nobody, or not
written at all. Which of those is a function of a handful of facts the launcher gathers after
the exit (:class:`Facts`); :func:`decide` turns them into a :class:`Decision` that the launcher
carries out. The rules, in the order they are tried:

1. **Parent gone.** A delegated job whose parent ended first (the lifeline was closed:
   ``parent_ended``), or whose parent is no longer running and nobody had asked it to stop, has
   nobody to report to: no completion is written; a record the child already wrote is kept.
   The first stop reason wins: a job already being cancelled, or past its deadline, when its
   parent ended falls through to rule 2 (its record goes to nobody).
2. **Stopped by us** (``cancel``, ``operator_cancel``, ``shutdown``, ``deadline``), unless the
   child's own record was already delivered: the launcher's ``terminated`` record with the
   reason's detail. Only a deadline's is posted to the parent (twice at most): a cancel came
   from the parent or the operator, who already know, and a shutdown posts to nobody. The
   parent's ``delegation`` line says ``terminated`` for all of them (seed 000: a delegated
   sub-capsule stopped at its deadline is ``terminated``; ``timed_out`` belongs to a plan's
   ``capsule`` step), with the reason of seed 000's cancel case — "the delegating task was
   cancelled" — for a cancel by the parent, and the record's detail otherwise.
3. **The child wrote its record.** Kept; posted if it was never posted and no post was in
   flight when a previous daemon died (``delivery == "none"``): once when the child itself
   reported (its own post already failed once), else twice.
4. **The child ended its own session, had a parent to report to, and left no readable record**
   (missing, or not a completion record): the delegation's outcome is ``unknown`` — seed 000's
   "a completion arrived, and the parent found no readable completion.json behind it", the
   parent's own word. The launcher's ``error`` record says so and is posted.
5. **The child ended its own session but wrote no record** (it had nobody to report to): the
   launcher's ``ok``/``error`` record from how the session ended and the exit status.
6. **Otherwise it crashed:** the launcher's ``crashed`` record, its detail built from the exit
   status and the child's last stderr lines, posted twice at most.

The parent's ``delegation`` trace line is written after the record and before the job reads
final, whenever the parent is still running and the line was not written yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from roost.core.completion import OPERATOR_CANCEL_DETAIL, TERMINATED_DETAIL, Status, deadline_detail
from roost.core.jobs import Delivery, JobState, StopReason, state_for_status

__all__ = [
    "CANCELLED_TASK_REASON",
    "PARENT_ENDED_REASON",
    "UNKNOWN_REASON",
    "Decision",
    "Existing",
    "Facts",
    "decide",
    "wants_own_session_end",
]

PARENT_ENDED_REASON = "the session that delegated to this one ended, so its lifeline was closed"
# Seed 000's reason for a delegation ended because the task that made it was cancelled.
CANCELLED_TASK_REASON = "the delegating task was cancelled"
UNKNOWN_REASON = "the child ended its session, but no readable completion.json was found behind it"
UNKNOWN_PREFIX = "exit status unknown"
_STOPPED_BY_US: frozenset[str] = frozenset({"cancel", "operator_cancel", "shutdown", "deadline"})
# Stop reasons that outrank a parent's end that came after them.
_FIRST_WINS: frozenset[str] = frozenset({"cancel", "operator_cancel", "deadline"})


@dataclass(frozen=True, slots=True)
class Existing:
    """What the job's ``completion.json`` already says, when there is one."""

    status: str
    delivered: bool
    reported_by: str
    detail: str | None


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything :func:`decide` looks at.

    ``own_end`` is the status of the child's session when it ended that session itself before
    exiting (``"complete"``, ``"failed"``…), else None. ``told`` is the ``exit_status`` of the
    child's own ``session_end`` trace line, read only when :func:`wants_own_session_end` says
    so (else None). ``addressed``: the job's spawner handle names a door to post to.
    ``delivery`` is the job record's delivery marker (``posting`` = a post may have been in
    flight when a daemon died: never post again). ``self_ended``: the child's session was ended by
    its own deregistration (not a lease lapse or an operator).
    """

    delegated: bool
    parent_running: bool
    stop_reason: StopReason | None
    existing: Existing | None
    own_end: str | None
    exit_status: str
    addressed: bool
    delivery: Delivery
    deadline_secs: float
    has_session: bool = False
    told: str | None = None
    end_written: bool = False
    self_ended: bool = False


Write = Literal["none", "existing", "launcher"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the launcher does.

    * ``write`` — ``none``: touch no record; ``existing``: keep the one there; ``launcher``:
      write the launcher's record with ``status`` and ``detail`` (when ``detail_from_stderr``,
      the detail is the crash detail built from ``exit_status`` and the child's stderr tail,
      and it is the ``reason`` too).
    * ``send`` — pass the record through the report step (write ``delivered: false``, post,
      rewrite); ``attempts`` posts to the parent's door at most (0: to nobody).
    * ``outcome``, ``reason``, ``state`` — what the job record and the parent's trace say.
    * ``trace_line`` — write the parent's ``delegation`` line (before the state turns final).
    """

    write: Write
    send: bool
    attempts: int
    outcome: str
    reason: str | None
    state: JobState
    trace_line: bool
    status: Status | None = None
    detail: str | None = None
    detail_from_stderr: bool = False


def wants_own_session_end(facts: Facts) -> bool:
    """Whether :func:`decide` needs ``told``: the exit status is not ours to read (a re-adopted
    child), the child wrote no record, and it had a session whose trace may say how it ended."""
    return facts.exit_status.startswith(UNKNOWN_PREFIX) and facts.existing is None and facts.has_session


def decide(facts: Facts) -> Decision:
    """The one decision for a job whose child has exited: the first rule that applies (the rules
    in the module docstring, one function each, tried in their order)."""
    trace_line = facts.delegated and facts.parent_running and not facts.end_written
    return (
        _parent_gone(facts)
        or _stopped_by_us(facts, trace_line)
        or _childs_record(facts, trace_line)
        or _unreadable_record(facts, trace_line)
        or _own_session_end(facts, trace_line)
        or _crashed(facts, trace_line)
    )


def _posts(facts: Facts) -> bool:
    """Whether a record may be posted to the parent's door: addressed, and (delegated) the
    parent still running. Past rule 1 a delegated job's parent is running, or it ended after we
    stopped the job."""
    return facts.addressed and (not facts.delegated or facts.parent_running)


def _parent_gone(facts: Facts) -> Decision | None:
    """Rule 1: nobody to report to; no record written, the child's own kept."""
    parent_gone = facts.delegated and (
        facts.stop_reason == "parent_ended" or (not facts.parent_running and facts.stop_reason not in _FIRST_WINS)
    )
    if not parent_gone:
        return None
    existing = facts.existing
    return Decision(
        write="none",
        send=False,
        attempts=0,
        outcome=existing.status if existing else "terminated",
        reason=PARENT_ENDED_REASON,
        state=state_for_status(existing.status) if existing else "terminated",
        trace_line=False,
    )


def _stopped_by_us(facts: Facts, trace_line: bool) -> Decision | None:
    """Rule 2: the launcher's ``terminated`` record, posted only for a deadline."""
    existing = facts.existing
    if facts.stop_reason not in _STOPPED_BY_US or (existing and existing.delivered):
        return None
    if facts.stop_reason == "deadline":
        detail = deadline_detail(facts.deadline_secs)
    elif facts.stop_reason == "operator_cancel":
        detail = OPERATOR_CANCEL_DETAIL
    else:
        detail = TERMINATED_DETAIL
    deadline = facts.stop_reason == "deadline"
    return Decision(
        write="launcher",
        send=True,
        attempts=2 if deadline and _posts(facts) else 0,
        outcome="terminated",
        reason=CANCELLED_TASK_REASON if facts.stop_reason == "cancel" else detail,
        state="terminated",
        trace_line=trace_line,
        status="terminated",
        detail=detail,
    )


def _childs_record(facts: Facts, trace_line: bool) -> Decision | None:
    """Rule 3: the child's own record, kept; posted unless it was, or a post may have been."""
    existing = facts.existing
    if existing is None:
        return None
    send = not existing.delivered and facts.delivery == "none"
    return Decision(
        write="existing",
        send=send,
        attempts=(1 if existing.reported_by == "child" else 2) if send and _posts(facts) else 0,
        outcome=existing.status,
        reason=existing.detail if existing.status in ("crashed", "terminated") else None,
        state=state_for_status(existing.status),
        trace_line=trace_line,
    )


def _unreadable_record(facts: Facts, trace_line: bool) -> Decision | None:
    """Rule 4: the child said it finished (ended its own session) to a parent it should have
    reported to, and no readable record is behind it: ``unknown``."""
    if facts.existing is not None or not facts.self_ended or not facts.addressed or not facts.delegated:
        return None
    attempts = 2 if _posts(facts) else 0
    return _launchers("error", attempts, trace_line, outcome="unknown", reason=UNKNOWN_REASON, detail=UNKNOWN_REASON)


def _own_session_end(facts: Facts, trace_line: bool) -> Decision | None:
    """Rule 5: no record, but the child ended its own session (it had nobody to report to)."""
    unknown = facts.exit_status.startswith(UNKNOWN_PREFIX)
    own_end = facts.own_end
    if own_end is None and facts.told is not None and wants_own_session_end(facts):
        own_end = "complete" if facts.told == "ok" else "failed"
    if own_end is None or facts.addressed:
        return None
    # Nobody to report to, so the child wrote no completion; it ended its own session, so it
    # did not crash: record how it ended.
    exited_ok = facts.exit_status == "exit status 0" or (unknown and facts.told in ("ok", None))
    status: Status = "ok" if own_end == "complete" and exited_ok else "error"
    return _launchers(status, 0, trace_line)


def _crashed(facts: Facts, trace_line: bool) -> Decision:
    """Rule 6: the launcher's ``crashed`` record, its detail from the exit status and stderr."""
    return _launchers("crashed", 2 if _posts(facts) else 0, trace_line, from_stderr=True)


def _launchers(
    status: Status,
    attempts: int,
    trace_line: bool,
    *,
    outcome: str | None = None,
    reason: str | None = None,
    detail: str | None = None,
    from_stderr: bool = False,
) -> Decision:
    """The launcher's own record of ``status``, sent (posted ``attempts`` times at most); the
    outcome is the status unless the rule names another word."""
    return Decision(
        write="launcher",
        send=True,
        attempts=attempts,
        outcome=outcome or status,
        reason=reason,
        state=state_for_status(status),
        trace_line=trace_line,
        status=status,
        detail=detail,
        detail_from_stderr=from_stderr,
    )
