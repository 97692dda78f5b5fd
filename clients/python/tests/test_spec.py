"""C21: every case of the shared vectors (clients/spec/*.json) read through rlock_client._core,
the layer both faces call for every decision. A case _core cannot express fails; none is skipped."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable

import pytest
from redis.exceptions import ResponseError

from rlock_client import _core as core
from rlock_client.errors import Deadlock, Lost, NotAcknowledged, NotAcquired, NotHeld, RlockError, Unexpected

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "spec")
FORMAT = 1
WATCHDOG_LEASE_MS = 30000


def load(name: str) -> dict:
    with open(os.path.join(SPEC, name)) as f:
        doc = json.load(f)
    assert doc["format"] == FORMAT, f"{name}: format {doc['format']} is not one this test knows"
    ids = [c["id"] for c in doc["cases"]]
    assert len(ids) == len(set(ids)), f"{name}: an id is used twice"
    return doc


def expand(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"repeat", "times"}:
        return v["repeat"] * v["times"]
    return v


def seconds(v: Any) -> Any:
    """A vector's milliseconds as the Python API's seconds; a value of the wrong type is passed
    on unchanged, for the client's own check to refuse."""
    if v == "forever":
        return math.inf
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v / 1000
    return v


def reply(v: Any) -> Any:
    """A vector's JSON reply as redis-py gives it (RESP2 bytes; a RESP3 map as a dict)."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, list):
        return [reply(x) for x in v]
    if isinstance(v, dict) and "error" in v:
        return ResponseError(v["error"])
    if isinstance(v, dict) and "map" in v:
        return {reply(k): reply(x) for k, x in v["map"]}
    return v


def wire(cmds: list) -> list:
    return [[a.decode() if isinstance(a, bytes) else str(a) for a in cmd] for cmd in cmds]


class Bindings:
    """The ``{req}`` placeholders of one case: bound at first use, then checked."""

    def __init__(self) -> None:
        self.ids: dict = {}

    def match(self, expected: list, got: list, where: str) -> None:
        assert len(expected) == len(got), f"{where}: {got} is not {expected}"
        for e, g in zip(expected, got):
            assert len(e) == len(g), f"{where}: {g} is not {e}"
            for x, y in zip(e, g):
                if x.startswith("{req") and x.endswith("}"):
                    assert 1 <= len(y) <= 64 and "{" not in y and "}" not in y, f"{where}: bad REQ id {y!r}"
                    if x in self.ids:
                        assert self.ids[x] == y, f"{where}: {x} was {self.ids[x]!r}, now {y!r}"
                    else:
                        assert y not in self.ids.values(), f"{where}: {x} is not a new id"
                        self.ids[x] = y
                else:
                    assert x == y, f"{where}: {g} is not {e}"


class Case:
    """One case as _core's calls: ``cmds`` what is sent, ``read(replies)`` what it means."""

    def __init__(self, c: dict):
        self.id = c["id"]
        self.call = c["call"]
        self.args = {k: expand(v) for k, v in c.get("args", {}).items()}
        self.attached = (c.get("context") or {}).get("attached_replicas", 0)
        self.cmds: list = []
        self.read: Callable[[list], Any] = lambda replies: None
        self.then_sends: Callable[[list], list] = lambda replies: []
        build = BUILDERS.get(self.call)
        assert build is not None, f"{self.id}: _core has no call {self.call!r}"
        build(self, self.args)

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    def one(self, call: core.Call) -> None:
        self.cmds, self.read = call.cmds, call.read


def _spec(case: Case, a: dict, scoped: bool) -> core.AcquireSpec:
    sync = a.get("sync_replicas")
    side = {"read": core.READ, "write": core.WRITE, None: None}[a.get("side")]
    spec = core.lock_spec(a["key"], side, seconds(a["lease_ms"]) if "lease_ms" in a else None,
                          seconds(a["wait_ms"]) if "wait_ms" in a else None, a.get("fair", False),
                          a.get("fenced", False), a.get("session", False), None if sync is None else sync["n"],
                          1.0 if sync is None else seconds(sync["timeout_ms"]), WATCHDOG_LEASE_MS)
    if scoped:
        wait = seconds(a["wait_ms"]) if "wait_ms" in a else None
        spec = core.AcquireSpec(**{**spec.__dict__, "wait_ms": core.wait_ms(core.scoped_wait(wait))})
    return spec


def _acquire(case: Case, a: dict, scoped: bool = False, spec: Any = None, owner: Any = None) -> None:
    spec = spec or _spec(case, a, scoped)
    who = core.check_owner(a["owner"] if owner is None else owner)
    replicas = core.acknowledgements(spec, case.attached)
    plan = core.lock_plan(spec, who, spec.wait_ms, replicas)
    case.cmds = plan.cmds

    def read(replies: list) -> Any:
        g = core.read_grant(spec, replies, replicas)
        if g is not None and g.short:
            case.then_sends = lambda _: plan.give_back(replies[0])
            raise NotAcknowledged("short", g.acked or 0)
        if scoped:
            core.scoped(g, "lock")
        if g is None:
            return {"granted": False}
        return {"granted": True, "hold_count": g.count, "token": g.token, "replicas_acked": g.acked}

    case.read = read


def _owner(a: dict) -> bytes:
    return core.check_owner(a["owner"])


def _side(a: dict) -> Any:
    return {"read": core.READ, "write": core.WRITE, None: None}[a.get("side")]


def _multi(case: Case, a: dict, scoped: bool) -> None:
    m = core.multi_spec(a["keys"], seconds(a["lease_ms"]) if "lease_ms" in a else None,
                        seconds(a["wait_ms"]) if "wait_ms" in a else None, a.get("session", False), a["owner"],
                        WATCHDOG_LEASE_MS, False)
    block = core.wait_ms(m.scoped_wait) if scoped else m.wait_ms
    plan = core.multi_plan(m.keys, m.owner, m.lease_ms, block, m.session)
    case.cmds = plan.cmds

    def read(replies: list) -> Any:
        taken = core.read_taken(replies[0])
        if scoped:
            core.scoped(taken or None, "the locks")
        return {"granted": taken}

    case.read = read


def _leased(case: Case, a: dict) -> None:
    lease = core.lease_ms(seconds(a["lease_ms"])) if "lease_ms" in a else WATCHDOG_LEASE_MS
    plan = core.lease_plan(core.check_name(a["key"]), lease, a["permits"], core.wait_ms(seconds(a.get("wait_ms"))))
    case.cmds = plan.cmds

    def read(replies: list) -> Any:
        ids = core.read_leased(replies[0])
        return {"granted": False} if ids is None else {"granted": True, "ids": ids}

    case.read = read


def _renewal(case: Case, a: dict) -> None:
    key = core.check_name(a["key"])
    permit = a.get("permit", False)
    who = core.check_name(a["id"]) if permit else _owner(a)
    r = core.Renewal(key, who, _side(a), core.lease_ms(seconds(a["lease_ms"])), True, basis=0.0,
                     kind="permit" if permit else "lock")
    case.cmds = [core.renew_args(r, core.new_req_id())]
    outcome = {core.RENEWED: "renewed", core.AGAIN: "retry"}
    case.read = lambda replies: {"outcome": outcome.get(core.renewal_outcome(replies[0], r, 0.0), "lost")}


def _keyed(make: Callable, shape: Callable[[Any], dict]) -> Callable[[Case, dict], None]:
    def build(case: Case, a: dict) -> None:
        call = make(a)
        case.cmds = call.cmds
        case.read = lambda replies: shape(call.read(replies))

    return build


def _plan(make: Callable, shape: Callable[[Any], dict]) -> Callable[[Case, dict], None]:
    def build(case: Case, a: dict) -> None:
        plan = make(a)
        case.cmds = plan.cmds
        case.read = lambda replies: shape(replies[0])

    return build


def _key(a: dict) -> bytes:
    return core.check_name(a["key"])


def _wait(a: dict) -> Any:
    return core.wait_ms(seconds(a["wait_ms"])) if "wait_ms" in a else None


def _leader(v: Any) -> dict:
    return {"leader": None if v is None else {"value": v.value, "term": v.term}}


def _campaign(case: Case, a: dict) -> None:
    wait = seconds(a["wait_ms"]) if "wait_ms" in a else math.inf
    # As Election.campaign makes its Lock: the watchdog's lease, fenced, waiting forever by default.
    spec = core.lock_spec(a["key"], None, None, wait, False, True, False, None, 1.0, WATCHDOG_LEASE_MS)
    _acquire(case, a, spec=spec, owner=core.check_value(a["value"]).decode())


def _scan(case: Case, a: dict) -> None:
    case.cmds = [core.scan_cmd(0, a.get("match"), a.get("type"))]
    case.read = lambda replies: core.parse_scan(core.raise_if_error(replies[0]))


def _top(case: Case, a: dict) -> None:
    case.cmds = [core.top_cmd(a["count"])]
    case.read = lambda replies: core.parse_top(core.raise_if_error(replies[0]))


def _stats(case: Case, a: dict) -> None:
    case.cmds = [list(core.STATS_CMD)]
    case.read = lambda replies: core.parse_stats(core.raise_if_error(replies[0]))


BUILDERS: dict = {
    "lock.acquire": lambda c, a: _acquire(c, a),
    "lock.scoped": lambda c, a: _acquire(c, a, scoped=True),
    "lock.release": _keyed(lambda a: core.lock_release(_key(a), _owner(a), _side(a)), lambda v: {"freed": v}),
    "lock.renew": _keyed(lambda a: core.lock_renew(_key(a), _owner(a), _side(a), core.lease_ms(seconds(a["lease_ms"]))),
                         lambda v: {"renewed": v}),
    "watchdog.renewal": _renewal,
    "lock.is_locked": _keyed(lambda a: core.lock_is_locked(_key(a)), lambda v: {"locked": v}),
    "lock.is_held_by": _keyed(lambda a: core.lock_is_held_by(_key(a), _owner(a), _side(a)), lambda v: {"held": v}),
    "lock.hold_count": _keyed(lambda a: core.lock_hold_count(_key(a), _owner(a), _side(a)),
                              lambda v: {"hold_count": v}),
    "lock.remaining_lease": _keyed(lambda a: core.lock_remaining_lease(_key(a)), lambda v: {"remaining_ms": v}),
    "lock.force_release": _keyed(lambda a: core.lock_force_release(_key(a)), lambda v: {"removed": v}),
    "lock.info": _keyed(lambda a: core.lock_info(_key(a)), lambda v: {"info": v}),
    "multi.acquire": lambda c, a: _multi(c, a, False),
    "multi.scoped": lambda c, a: _multi(c, a, True),
    "multi.release": _keyed(lambda a: core.multi_release(_owner(a), core.check_names(a["keys"])),
                            lambda v: {"freed": v}),
    "semaphore.try_set_permits": _keyed(lambda a: core.semaphore_try_set_permits(_key(a), a["permits"]),
                                        lambda v: {"set": v}),
    "semaphore.add_permits": _keyed(lambda a: core.semaphore_add_permits(_key(a), a["permits"]),
                                    lambda v: {"available": v}),
    "semaphore.available": _keyed(lambda a: core.semaphore_available(_key(a)), lambda v: {"available": v}),
    "semaphore.acquire": _plan(lambda a: core.semaphore_plan(_key(a), a["permits"], _wait(a)),
                               lambda v: {"granted": core.read_taken(v)}),
    "semaphore.release": _keyed(lambda a: core.semaphore_release(_key(a), a["permits"]), lambda v: {"available": v}),
    "permits.try_set_permits": _keyed(lambda a: core.semaphore_try_set_permits(_key(a), a["permits"]),
                                      lambda v: {"set": v}),
    "permits.acquire": _leased,
    "permits.release": _keyed(lambda a: core.permit_return(_key(a), a["id"]), lambda v: {"returned": v}),
    "permits.renew": _keyed(lambda a: core.permit_renew(_key(a), core.check_name(a["id"]),
                                                        core.lease_ms(seconds(a["lease_ms"]))),
                            lambda v: {"renewed": v}),
    "latch.try_set_count": _keyed(lambda a: core.latch_try_set_count(_key(a), a["count"]), lambda v: {"set": v}),
    "latch.count_down": _keyed(lambda a: core.latch_count_down(_key(a)), lambda v: {"count": v}),
    "latch.count": _keyed(lambda a: core.latch_count(_key(a)), lambda v: {"count": v}),
    "latch.await_zero": _plan(lambda a: core.latch_plan(_key(a), _wait(a)), lambda v: {"open": core.read_latch(v)}),
    "election.campaign": _campaign,
    "election.leader": _keyed(lambda a: core.election_leader(_key(a)), _leader),
    "election.resign": _keyed(lambda a: core.lock_release(_key(a), core.check_value(a["value"]), None),
                              lambda v: {"resigned": v}),
    "queries.waiters": _keyed(lambda a: core.waiters_call(_key(a)), lambda v: {"waiters": v}),
    "queries.scan": _scan,
    "queries.stats": _stats,
    "queries.top": _top,
}

CLASSES = [
    (NotAcquired, "NotAcquired"),
    (NotHeld, "NotHeld"),
    (Lost, "Lost"),
    (Deadlock, "Deadlock"),
    (NotAcknowledged, "NotAcknowledged"),
    (Unexpected, "Unexpected"),
    (RlockError, "Unexpected"),
    (ResponseError, "ServerError"),
    ((ValueError, TypeError), "InvalidArgument"),
]


def class_of(e: BaseException) -> str:
    for kind, name in CLASSES:
        if isinstance(e, kind):  # type: ignore[arg-type]
            return name
    raise e


def ids(doc: dict) -> list:
    return [c["id"] for c in doc["cases"]]


COMMANDS, REPLIES, ERRORS = load("commands.json"), load("replies.json"), load("errors.json")
KEYSPACE, REFUSALS = load("keyspace.json"), load("refusals.json")


@pytest.mark.parametrize("c", COMMANDS["cases"], ids=ids(COMMANDS))
def test_c21_commands(c):
    Bindings().match(c["expect"], wire(Case(c).cmds), c["id"])


@pytest.mark.parametrize("c", REPLIES["cases"], ids=ids(REPLIES))
def test_c21_replies(c):
    case = Case(c)
    replies = [reply(v) for v in c["replies"]]
    assert len(replies) == len(case.cmds), f"{c['id']}: {len(replies)} replies for {wire(case.cmds)}"
    expect = c["expect"]
    try:
        got = case.read(replies)
    except Exception as e:
        assert "error" in expect, f"{c['id']}: raised {e!r}, expected {expect}"
        assert class_of(e) == expect["error"], f"{c['id']}: raised {e!r}, expected {expect}"
        if "then_sends" in expect:
            b = Bindings()
            b.ids["{req}"] = wire(case.cmds[:1])[0][-1]  # the acquire's REQ id
            b.match(expect["then_sends"], wire(case.then_sends(replies)), c["id"])
        return
    assert "error" not in expect, f"{c['id']}: returned {got}, expected {expect}"
    assert got == expect, f"{c['id']}: {got} is not {expect}"


@pytest.mark.parametrize("c", ERRORS["cases"], ids=ids(ERRORS))
def test_c21_errors(c):
    case = Case(c)
    replies = [ResponseError(c["error"])] + [None] * (len(case.cmds) - 1)
    with pytest.raises(Exception) as raised:
        case.read(replies)
    e, expect = raised.value, c["expect"]
    assert class_of(e) == expect["class"], f"{c['id']}: {e!r} is not {expect['class']}"
    if expect["class"] == "NotHeld":
        assert (e.key, e.owner) == (expect["key"], expect["owner"]), c["id"]
    if expect["class"] == "Deadlock":
        got = [{"owner": w.owner, "key": w.key, "holder": w.holder, "kept": w.kept} for w in e.cycle]
        assert got == expect["cycle"], c["id"]
    if expect["class"] == "ServerError":
        assert str(e).split(" ", 1)[0] == expect["code"], c["id"]


@pytest.mark.parametrize("c", KEYSPACE["cases"], ids=ids(KEYSPACE))
def test_c21_keyspace(c):
    a, call = c["args"], c["call"]
    if call == "keyspace.mode":
        got: Any = core.events_on(a["flags"])
    elif call == "keyspace.channels":
        got = [ch.decode() for ch in core.event_channels(a["mode"], a["db"], [k.encode() for k in a["keys"]])]
    elif call == "keyspace.lost_key":
        key = core.lost_key([b"message", a["channel"].encode(), a["message"].encode()], a["db"])
        got = None if key is None else key.decode()
    else:
        raise AssertionError(f"{c['id']}: _core has no call {call!r}")
    assert got == c["expect"], f"{c['id']}: {got!r} is not {c['expect']!r}"


def test_c21_keyspace_the_one_list_of_loss_events():
    assert [e.decode() for e in core.LOSS_EVENTS] == KEYSPACE["loss_events"]


@pytest.mark.parametrize("c", REFUSALS["cases"], ids=ids(REFUSALS))
def test_c21_refusals(c):
    with pytest.raises((ValueError, TypeError)):
        Case(c)  # checked and refused by _core before any command exists
