"""Registration approvals of top-level jobs on other nodes (roost/services/launcher/tickets.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.core import ids
from roost.services.launcher.tickets import RegistrationTickets, is_ticket


def test_a_ticket_names_its_job_once() -> None:
    tickets = RegistrationTickets()
    job_id = ids.job_id()
    ticket = tickets.mint(job_id)
    assert is_ticket(ticket) and job_id in ticket
    assert tickets.redeem(ticket) == job_id
    assert tickets.redeem(ticket) is None  # spent


def test_a_dropped_or_altered_ticket_names_nothing() -> None:
    tickets = RegistrationTickets()
    a, b = ids.job_id(), ids.job_id()
    ta, tb = tickets.mint(a), tickets.mint(b)
    secret_b = tb.rsplit(".", 1)[1]
    assert tickets.redeem(f"mra1.{a}.{secret_b}") is None  # another job's secret
    tickets.drop(a)
    assert tickets.redeem(ta) is None
    assert tickets.redeem(tb) == b


@given(st.text(max_size=80))
def test_no_forged_ticket_is_taken(forged: str) -> None:
    tickets = RegistrationTickets()
    tickets.mint(ids.job_id())
    assert tickets.redeem(forged) is None
