"""The pure authorization rules: decide, job visibility, launch_uids, Host and Origin, and the
privilege-dropping exec step's command line (own listeners: tests/unit/test_egress.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.backends.process.privdrop import LOCKED_SECUREBITS, Privileges, drop_argv, holds_setpcap
from roost.core.authz import (
    ADMIN_IN_JOB,
    ADMIN_REFUSED,
    CROSS_SITE,
    FOREIGN_HOST,
    LOCAL_ONLY,
    NOT_ENTRYPOINT,
    CallerFacts,
    Need,
    Policy,
    Who,
    cross_site,
    decide,
    host_allowed,
    launch_allowed,
    may_see_job,
    netloc_key,
)

NAMES = frozenset({"localhost", "127.0.0.1", "::1", "roost.example"})
ORIGINS = frozenset({"localhost:7700", "127.0.0.1:7700", "::1:7700", "roost.example:7700"})


def facts(**kw: object) -> CallerFacts:
    base: dict[str, object] = {"uid": 1000, "local": True, "daemon_uid": 0}
    base.update(kw)
    return CallerFacts(**base)  # type: ignore[arg-type]


def test_no_policy_is_denied_to_everyone() -> None:
    for f in (facts(uid=0), facts(), facts(local=False, credential=True)):
        denial = decide(None, f)
        assert denial is not None and denial.status == 403


def test_the_order_host_then_cross_site_then_remote_then_who() -> None:
    acts = Policy(Who.CREDENTIAL, Need.CREDENTIAL, acts=True)
    assert decide(acts, facts(host_ok=False, cross_site=True)).sentence == FOREIGN_HOST  # type: ignore[union-attr]
    assert decide(acts, facts(cross_site=True, local=False)).sentence == CROSS_SITE  # type: ignore[union-attr]
    reads = Policy(Who.CREDENTIAL, Need.CREDENTIAL)
    assert decide(reads, facts(cross_site=True)) is None  # a read: the same-origin policy hides it
    assert decide(Policy(Who.LOCAL), facts(local=False)).sentence == LOCAL_ONLY  # type: ignore[union-attr]
    assert decide(acts, facts(local=False)) is not None
    assert decide(acts, facts(local=False, credential=True)) is None


def test_operator_entrypoint_and_dashboard_rules() -> None:
    op = Policy(Who.OPERATOR)
    assert decide(op, facts(uid=0)) is None
    assert decide(op, facts(uid=0, in_job=True)).sentence == ADMIN_IN_JOB  # type: ignore[union-attr]
    assert decide(op, facts(uid=1000)).sentence == ADMIN_REFUSED  # type: ignore[union-attr]
    assert decide(op, facts(uid=1000, daemon_uid=1000)) is None
    assert decide(op, facts(uid=None)) is not None
    entry = Policy(Who.ENTRYPOINT)
    assert decide(entry, facts(entrypoint=True)) is None
    assert decide(entry, facts(uid=0)).sentence == NOT_ENTRYPOINT  # type: ignore[union-attr]
    dash = Policy(Who.DASHBOARD_OWNER)
    assert decide(dash, facts(uid=1000, daemon_uid=1000)) is None
    assert decide(dash, facts(uid=0, daemon_uid=1000)) is not None


@given(
    parent=st.one_of(st.none(), st.sampled_from(["ses_a", "ses_b"])),
    owner=st.one_of(st.none(), st.sampled_from([0, 1000, 65534])),
    session=st.one_of(st.none(), st.sampled_from(["ses_a", "ses_b"])),
    caller=st.one_of(st.none(), st.sampled_from([0, 1000, 65534])),
    in_job=st.booleans(),
)
def test_who_sees_a_job(
    parent: str | None, owner: int | None, session: str | None, caller: int | None, in_job: bool
) -> None:
    seen = may_see_job(parent_id=parent, owner_uid=owner, session_id=session, caller_uid=caller, caller_in_job=in_job)
    if session is not None:
        assert seen == (parent == session)  # a credential speaks for its session only
    elif caller == 0:
        assert seen == (not in_job)
    else:
        assert seen == (caller is not None and caller == owner)


def test_launch_uids() -> None:
    assert launch_allowed(0, None, 0) and not launch_allowed(65534, None, 0)
    assert launch_allowed(65534, (0, 65534), 0) and not launch_allowed(None, (0,), 0)
    assert not launch_allowed(0, (1000,), 0)


def test_host_and_origin() -> None:
    assert host_allowed(None, NAMES, any_address=True)  # HTTP/1.0: no browser
    assert host_allowed("127.0.0.1:7700", NAMES, any_address=True)
    assert host_allowed("[::1]:7700", NAMES, any_address=True)
    assert host_allowed("10.1.2.3:7700", NAMES, any_address=True)
    assert host_allowed("Roost.Example.:7700", NAMES, any_address=True)
    assert not host_allowed("evil.example:7700", NAMES, any_address=True)
    assert not host_allowed("10.1.2.3:7700", NAMES, any_address=False)
    assert not cross_site(None, None, ORIGINS)  # curl
    assert not cross_site("http://127.0.0.1:7700", None, ORIGINS)
    assert not cross_site("http://[::1]:7700", "same-origin", ORIGINS)
    for foreign in ("http://evil.example", "null", "http://127.0.0.1:9999", "file://", "http://6.6.6.6:7700", "x"):
        assert cross_site(foreign, None, ORIGINS), foreign
    assert cross_site(None, "cross-site", ORIGINS)
    assert netloc_key("[::1]:80") == "::1:80" and netloc_key("a.b:8") == "a.b:8" and netloc_key("a.b") is None


@given(st.text(max_size=60))
def test_any_origin_text_is_judged_without_raising(origin: str) -> None:
    assert isinstance(cross_site(origin, None, ORIGINS), bool)
    assert isinstance(host_allowed(origin, NAMES, any_address=True), bool)


def test_the_exec_step() -> None:
    argv = drop_argv("/usr/bin/setpriv", ["roost-capsule", "run"], Privileges(uid=65534, gid=65534), setpcap=True)
    assert argv[:4] == ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    assert "--bounding-set=-all" in argv and "--ambient-caps=-all" in argv and "--no-new-privs" in argv
    assert f"--securebits={LOCKED_SECUREBITS}" in argv and argv[-3:] == ["--", "roost-capsule", "run"]
    root_sealed = drop_argv("/usr/bin/setpriv", ["x"], Privileges(keep_setfcap=True), setpcap=True)
    assert "--bounding-set=-all,+setfcap" in root_sealed and not any(a.startswith("--reuid") for a in root_sealed)
    plain = drop_argv("/usr/bin/setpriv", ["x"], Privileges(), setpcap=False)
    assert plain == ["/usr/bin/setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--", "x"]
    assert holds_setpcap("CapEff:\t0000000000000100\n") and not holds_setpcap("CapEff:\t00000000000000c0\n")


def test_doctor_warns_when_operator_jobs_run_as_root() -> None:
    from roost.ctl.commands.doctor import operator_jobs_finding

    check, status, detail, fix = operator_jobs_finding(0, None)
    assert (check, status) == ("operator-jobs", "warn") and "uid 0" in detail and "run_as" in fix
    assert operator_jobs_finding(0, "mur-roost-jobs")[1] == "ok"
    assert operator_jobs_finding(996, None)[1] == "ok"


def test_a_plain_handlers_raw_path_finds_its_entry() -> None:
    from roost.http.authz import DOOR_ROUTES, path_policy

    def who(method: str, path: str) -> Who | None:
        policy = path_policy(DOOR_ROUTES, method, path)
        return policy.who if policy is not None else None

    assert who("GET", "/resources/peer/mh1.AAAA.BBBB") is Who.HANDLE
    assert who("HEAD", "/resources/peer") is Who.HANDLE
    assert who("GET", "/resources/peerless") is Who.DOOR_CALLER  # not under the prefix: the door's 404
    assert who("GET", "/resources/peer/") is Who.HANDLE
    assert who("GET", "/elsewhere") is Who.DOOR_CALLER
    post = path_policy(DOOR_ROUTES, "POST", "/")
    assert post is not None and post.acts
