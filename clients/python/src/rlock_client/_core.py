"""Decisions without sockets: argument checks, command arguments, reply parsing, error
mapping. The sync face (``rlock_client``) and the asyncio face (``rlock_client.asyncio``)
both call these, so they cannot disagree."""

from __future__ import annotations

import math
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from redis.crc import key_slot
from redis.exceptions import ResponseError

from .errors import Deadlock, DeadlockWait, Lost, NotAcquired, NotHeld, RlockError, StaleToken, Unexpected

Name = Union[str, bytes]

DEFAULT_LEASE = 30.0
MAX_MS = 1 << 40
# How long past a wait the wait's socket may stay silent before the client gives up on it.
WAIT_MARGIN = 5.0
# A release or renewal whose connection broke is sent once more, with its REQ id, this much later.
RESEND_AFTER = 0.1
# Replicas: how long a default acquire waits for one replica's acknowledgement.
DEFAULT_SYNC_TIMEOUT = 1.0
READ = "READ"
WRITE = "WRITE"


def new_client_id() -> str:
    return str(uuid.uuid4())


def new_req_id() -> str:
    """A fresh id for one logical call, sent again unchanged on every resend."""
    return os.urandom(16).hex()


# ---------------------------------------------------------------- argument checks


def check_name(name: Any, what: str = "name") -> bytes:
    if isinstance(name, str):
        b = name.encode()
    elif isinstance(name, bytes):
        b = name
    else:
        raise TypeError(f"{what} must be str or bytes, not {type(name).__name__}")
    if not b:
        raise ValueError(f"{what} must not be empty")
    return b


def check_owner(owner: Any) -> bytes:
    b = check_name(owner, "owner")
    if len(b) > 1024:
        raise ValueError("owner must be at most 1024 bytes")
    return b


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(v).__name__}")
    if math.isnan(v):
        raise ValueError(f"{what} must not be NaN")
    return float(v)


def lease_ms(lease: Any) -> int:
    """A lease in seconds (> 0) as the server's milliseconds."""
    s = _number(lease, "lease")
    if s <= 0 or math.isinf(s):
        raise ValueError(f"lease must be > 0 seconds, got {lease!r}")
    ms = max(1, int(round(s * 1000)))
    if ms > MAX_MS:
        raise ValueError("lease is too long (at most 2^40 ms)")
    return ms


def wait_ms(wait: Any) -> Optional[int]:
    """``None``: no wait; ``math.inf``: forever (``BLOCK 0``); else seconds ≥ 0."""
    if wait is None:
        return None
    s = _number(wait, "wait")
    if s < 0:
        raise ValueError(f"wait must be >= 0 seconds, got {wait!r}")
    if math.isinf(s):
        return 0
    if s == 0:
        return None
    ms = max(1, int(math.ceil(s * 1000)))
    if ms > MAX_MS:
        raise ValueError("wait is too long (at most 2^40 ms); use math.inf to wait forever")
    return ms


def check_count(n: Any, what: str, low: int = 1, high: int = 2147483647) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what} must be an int, not {type(n).__name__}")
    if not low <= n <= high:
        raise ValueError(f"{what} must be from {low} to {high}, got {n}")
    return n


def check_replicas(n: Any) -> Optional[int]:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"sync_replicas must be an int or None, not {type(n).__name__}")
    if n < 0:
        raise ValueError("sync_replicas must be >= 0")
    return n


def check_flag(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{what} must be True or False, not {type(v).__name__}")
    return v


def check_names(names: Any) -> list[bytes]:
    """The names of a multi-key lock, sorted bytewise and each named once: 1 to 1024."""
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise TypeError("names must be a list or tuple of names")
    keys = sorted({check_name(n) for n in names})
    if not 1 <= len(keys) <= 1024:
        raise ValueError("a multi-key lock takes 1 to 1024 names")
    return keys


def scoped_wait(wait: Any) -> Any:
    """How long a scoped call (``with lock:``) waits: the handle's ``wait`` when it set one,
    else until granted, as ``with threading.Lock():`` does. ``acquire()`` without a wait
    tries once."""
    return math.inf if wait is None else wait


def slot_of(key: bytes) -> int:
    return key_slot(key)


def check_same_slot(keys: Sequence[bytes]) -> None:
    slots = {slot_of(k) for k in keys}
    if len(slots) > 1:
        raise ValueError(
            "multi-key names span several cluster slots; give them one hash tag, "
            "e.g. {order:7}:stock and {order:7}:payment"
        )


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class AcquireSpec:
    """Everything a lock acquire sends, fixed when the handle is made."""

    key: bytes
    side: Optional[str] = None  # READ, WRITE or None
    lease_ms: int = int(DEFAULT_LEASE * 1000)
    renew: bool = True  # no lease given: the watchdog renews
    wait_ms: Optional[int] = None
    fair: bool = False
    fenced: bool = False
    session: bool = False
    sync_replicas: Optional[int] = None  # None: 1 if a replica is attached
    sync_timeout_ms: int = int(DEFAULT_SYNC_TIMEOUT * 1000)


def lock_spec(name: Any, side: Optional[str], lease: Any, wait: Any, fair: Any, fenced: Any, session: Any,
              sync_replicas: Any, sync_timeout: Any, watchdog_lease_ms: int) -> AcquireSpec:
    """A lock handle's options, checked (before anything is sent) and fixed. ``lease`` None:
    the watchdog's lease, renewed."""
    spec = AcquireSpec(
        key=check_name(name),
        side=side,
        lease_ms=watchdog_lease_ms if lease is None else lease_ms(lease),
        renew=lease is None,
        wait_ms=wait_ms(wait),
        fair=check_flag(fair, "fair"),
        fenced=check_flag(fenced, "fenced"),
        session=check_flag(session, "session"),
        sync_replicas=check_replicas(sync_replicas),
        sync_timeout_ms=lease_ms(sync_timeout),
    )
    if spec.fair and side:
        raise ValueError("fair does not apply to a read-write lock")
    return spec


def acknowledgements(spec: AcquireSpec, attached_replicas: int) -> int:
    """How many replicas must acknowledge a grant (``WAIT``): as asked, else one when the key's
    primary has a replica attached (C15)."""
    return spec.sync_replicas if spec.sync_replicas is not None else min(1, attached_replicas)


@dataclass(frozen=True)
class MultiSpec:
    keys: list
    lease_ms: int
    renew: bool
    wait_ms: Optional[int]
    scoped_wait: Any
    session: bool
    owner: Optional[bytes]


def multi_spec(names: Any, lease: Any, wait: Any, session: Any, owner: Any, watchdog_lease_ms: int,
               cluster: bool) -> MultiSpec:
    keys = check_names(names)
    if cluster:
        check_same_slot(keys)
    return MultiSpec(keys, watchdog_lease_ms if lease is None else lease_ms(lease), lease is None, wait_ms(wait),
                     scoped_wait(wait), check_flag(session, "session"), None if owner is None else check_owner(owner))


def scoped(got: Any, what: str) -> Any:
    """A scoped call's grant, or NotAcquired: its body never runs."""
    if got is None:
        raise NotAcquired(f"{what} was not acquired within the wait")
    return got


STATS_CMD = ["INFO", "rlock"]


def field_of(owner: bytes, side: Optional[str]) -> bytes:
    """The lock hash's field that counts this owner's holds."""
    return owner + b":write" if side == WRITE else owner


def acquire_cmd(spec: AcquireSpec, owner: bytes, req: str, block_ms: Optional[int]) -> list:
    args: list = ["RLOCK.ACQUIRE", spec.key, owner]
    if spec.side:
        args.append(spec.side)
    args += ["LEASE", spec.lease_ms]
    if block_ms is not None:
        args += ["BLOCK", block_ms]
    if spec.fair:
        args.append("FAIR")
    if spec.fenced:
        args.append("TOKEN")
    if spec.session:
        args.append("SESSION")
    args += ["REQ", req]
    return args


def release_cmd(key: bytes, owner: bytes, side: Optional[str], req: str) -> list:
    args: list = ["RLOCK.RELEASE", key, owner]
    if side:
        args.append(side)
    return args + ["REQ", req]


def renew_cmd(key: bytes, owner: bytes, side: Optional[str], lease: int, req: str) -> list:
    args: list = ["RLOCK.RENEW", key, owner]
    if side:
        args.append(side)
    return args + ["LEASE", lease, "REQ", req]


def wait_cmd(n: int, timeout_ms: int) -> list:
    return ["WAIT", n, timeout_ms]


def give_back_req(req: str, n: int = 0) -> str:
    """The REQ id of the ``n``-th release that gives back what the acquire ``req`` was granted,
    when the caller never got it: one id however often it is tried, so it is applied once."""
    return ("g" if n == 0 else f"g{n}.") + req


def with_block(cmd: Sequence[Any], block: int) -> list:
    """``cmd`` with its ``BLOCK`` argument set to ``block`` ms."""
    out = list(cmd)
    for i, a in enumerate(out):
        if a == "BLOCK":
            out[i + 1] = block
    return out


def pack(cmds: Sequence[Sequence[Any]]) -> Optional[bytes]:
    """``cmds`` in RESP, for one write; None when an argument is of a kind left to the driver's
    own packer. Ours: the driver's generic one cost more than the rest of a lock call."""
    out = []
    for cmd in cmds:
        out.append(b"*%d\r\n" % len(cmd))
        for a in cmd:
            if type(a) is bytes:
                b = a
            elif type(a) is str:
                b = a.encode()
            elif type(a) is int:
                b = b"%d" % a
            else:
                return None
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


# ---------------------------------------------------------------- one call's plan


@dataclass(frozen=True)
class Plan:
    """What one acquiring call sends, and how a grant it may leave unclaimed is given back.

    ``cmds`` go in one write; ``cmds[0]`` is the call itself (it may block in the server),
    carrying ``req`` when it takes something. ``waits``: it goes on a wait connection (a
    ``BLOCK`` or a ``SESSION``) and may be abandoned. ``give_back(reply)``: the commands that
    return what ``cmds[0]`` replied, each with a REQ id derived from ``req`` (so every path
    that gives one grant back is applied once); empty when nothing was granted."""

    key: bytes
    cmds: list
    block: Optional[int]
    req: str
    waits: bool
    give_back: Any  # Callable[[Any], list[list]]

    def again(self) -> list:
        """``cmds[0]`` sent again after the caller left: the same REQ id and a 1 ms wait. The
        server replays a grant the first call got, or runs it anew, so what it replies is
        what to give back."""
        return with_block(self.cmds[0], 1) if "BLOCK" in self.cmds[0] else list(self.cmds[0])


def granted(v: Any) -> bool:
    """Whether the reply of an acquiring call grants something."""
    return v is not None and not isinstance(v, BaseException)


def lock_plan(spec: AcquireSpec, owner: bytes, block: Optional[int], replicas: int,
              req: Optional[str] = None) -> Plan:
    """A lock's acquire: RLOCK.ACQUIRE, then ``HGET`` of the hold count (fenced: the reply is
    the token) and ``WAIT`` (``replicas``), in one pipeline."""
    req = req or new_req_id()
    key = spec.key
    cmds = [acquire_cmd(spec, owner, req, block)]
    if spec.fenced:
        cmds.append(["HGET", key, field_of(owner, spec.side)])
    if replicas:
        cmds.append(wait_cmd(replicas, spec.sync_timeout_ms))
    back = release_cmd(key, owner, spec.side, give_back_req(req))
    return Plan(key, cmds, block, req, block is not None or spec.session,
                lambda v: [back] if granted(v) else [])


@dataclass(frozen=True)
class Grant:
    """A lock's grant read from its pipeline's replies."""

    token: Optional[int]
    count: Optional[int]
    acked: Optional[int]
    short: bool  # fewer replicas than asked acknowledged it: give it back, raise NotAcknowledged


def read_grant(spec: AcquireSpec, replies: list, replicas: int) -> Optional[Grant]:
    """None when not granted; raises the server's error as the package's."""
    n = as_int(raise_if_error(replies[0]))
    if n is None:
        return None
    if n < 1:
        raise Unexpected(f"an acquire replied {n}")
    count = as_int(raise_if_error(replies[1])) if spec.fenced else n
    acked = as_int(raise_if_error(replies[-1])) if replicas else None
    return Grant(n if spec.fenced else None, count, acked, bool(replicas) and (acked or 0) < replicas)


def grant_basis(sent: float, now: float, block: Optional[int], spec: AcquireSpec, replicas: int) -> float:
    """When a grant's lease is known to start: at the send for a call that did not wait; after a
    wait, at its reply, less the ``WAIT`` that followed the grant."""
    if block is None:
        return sent
    return max(sent, now - (spec.sync_timeout_ms / 1000 if replicas else 0))


def mrelease_cmd(owner: bytes, keys: Sequence[bytes], req: str) -> list:
    return ["RLOCK.MRELEASE", owner, len(keys), *keys, "REQ", req]


def multi_plan(keys: Sequence[bytes], owner: bytes, lease: int, block: Optional[int], session: bool,
               req: Optional[str] = None) -> Plan:
    """RLOCK.MACQUIRE, all or none, with ``REQ``: a given-up wait is recovered as a lock's is."""
    req = req or new_req_id()
    cmd: list = ["RLOCK.MACQUIRE", owner, len(keys), *keys, "LEASE", lease]
    if block is not None:
        cmd += ["BLOCK", block]
    if session:
        cmd.append("SESSION")
    cmd += ["REQ", req]
    back = mrelease_cmd(owner, keys, give_back_req(req))
    return Plan(keys[0], [cmd], block, req, block is not None or session,
                lambda v: [back] if granted(v) else [])


def semaphore_plan(key: bytes, permits: Any, block: Optional[int], req: Optional[str] = None) -> Plan:
    check_count(permits, "permits")
    req = req or new_req_id()
    cmd: list = ["RSEM.ACQUIRE", key, "PERMITS", permits]
    if block is not None:
        cmd += ["BLOCK", block]
    cmd += ["REQ", req]
    back = ["RSEM.RELEASE", key, "PERMITS", permits, "REQ", give_back_req(req)]
    return Plan(key, [cmd], block, req, block is not None, lambda v: [back] if granted(v) else [])


def lease_plan(key: bytes, lease: int, permits: Any, block: Optional[int], req: Optional[str] = None) -> Plan:
    """RSEM.LEASE; what it leased is given back one permit id at a time (RSEM.RETURN)."""
    check_count(permits, "permits", 1, 1024)
    req = req or new_req_id()
    cmd: list = ["RSEM.LEASE", key, "LEASE", lease, "PERMITS", permits]
    if block is not None:
        cmd += ["BLOCK", block]
    cmd += ["REQ", req]

    def back(v: Any) -> list:
        ids = v if granted(v) else []
        return [["RSEM.RETURN", key, i, "REQ", give_back_req(req, n + 1)] for n, i in enumerate(ids)]

    return Plan(key, [cmd], block, req, block is not None, back)


def latch_plan(key: bytes, block: Optional[int]) -> Plan:
    """RLATCH.AWAIT: nothing is taken, so nothing is given back."""
    cmd: list = ["RLATCH.AWAIT", key]
    if block is not None:
        cmd += ["BLOCK", block]
    return Plan(key, [cmd], block, "", block is not None, lambda v: [])


def raise_if_error(v: Any, key: Optional[bytes] = None, owner: Optional[bytes] = None) -> Any:
    """A reply as a value, or its error raised (the server's as the package's)."""
    if isinstance(v, ResponseError):
        raise server_error(v, key, owner)
    if isinstance(v, BaseException):
        raise v
    return v


# ---------------------------------------------------------------- calls that do not wait


@dataclass(frozen=True)
class Call:
    """One call's commands (one round trip, on the server of ``key``) and the reading of their
    replies (server errors come as values and are raised as the package's). ``resend``: its
    commands carry REQ ids or change nothing, so a broken link may send them again."""

    key: bytes
    cmds: list
    read: Any  # Callable[[list], Any]
    resend: bool = True


def _one(key: bytes, cmd: list, read: Any, resend: bool = True, owner: Optional[bytes] = None) -> Call:
    return Call(key, [cmd], lambda replies: read(raise_if_error(replies[0], key, owner)), resend)


def _flag(v: Any) -> bool:
    n = as_int(v)
    if n not in (0, 1):
        raise Unexpected(f"expected 0 or 1, got {v!r}")
    return n == 1


def _count(v: Any) -> int:
    return as_int(v) or 0


def lock_release(key: bytes, owner: bytes, side: Optional[str]) -> Call:
    """RLOCK.RELEASE: True when the lock is free now, False when a re-entry was undone."""
    return _one(key, release_cmd(key, owner, side, new_req_id()), _flag, owner=owner)


def read_renewal(v: Any) -> bool:
    """An explicit renewal's reply: True, or Lost (refused: 0 or WRONGTYPE)."""
    if renewal_outcome(v, None, 0.0) == RENEWED:
        return True
    if isinstance(v, ResponseError) and "WRONGTYPE" not in str(v):
        raise_if_error(v)
    raise Lost("the renewal was refused: the lock is no longer held")


def lock_renew(key: bytes, owner: bytes, side: Optional[str], lease: int) -> Call:
    return Call(key, [renew_cmd(key, owner, side, lease, new_req_id())], lambda r: read_renewal(r[0]))


def lock_is_locked(key: bytes) -> Call:
    return _one(key, ["EXISTS", key], _flag)


def lock_is_held_by(key: bytes, owner: bytes, side: Optional[str]) -> Call:
    return _one(key, ["HEXISTS", key, field_of(owner, side)], _flag)


def lock_hold_count(key: bytes, owner: bytes, side: Optional[str]) -> Call:
    return _one(key, ["HGET", key, field_of(owner, side)], _count)


def lock_remaining_lease(key: bytes) -> Call:
    """PTTL: the lease left in ms, or None (no key, or no expiry)."""
    return _one(key, ["PTTL", key], _lease_left)


def _lease_left(v: Any) -> Optional[int]:
    n = as_int(v)
    return None if n is None or n < 0 else n


def lock_force_release(key: bytes) -> Call:
    return _one(key, ["RLOCK.FORCERELEASE", key], _flag)


def lock_info(key: bytes) -> Call:
    return _one(key, ["RLOCK.INFO", key], lambda v: parse_info(v))


def guard_words(command: Sequence[Any]) -> list:
    """A guarded command's words, checked before anything is sent: a name (non-empty str or
    bytes), then arguments redis-py sends as they are (str, bytes, int, float). ``None``,
    ``bool`` and containers are refused here, since a refusal by redis-py would come after
    the call began."""
    if not command:
        raise TypeError("guard needs a command to run, e.g. hold.guard('SET', '{orders}:total', '5')")
    name = command[0]
    if not isinstance(name, (str, bytes)):
        raise TypeError(f"a guarded command's name must be str or bytes, not {type(name).__name__}")
    if not name:
        raise ValueError("a guarded command's name must not be empty")
    for word in command[1:]:
        if isinstance(word, bool) or not isinstance(word, (str, bytes, int, float)):
            raise TypeError(f"a guarded command's arguments must be str, bytes, int or float, "
                            f"not {type(word).__name__}")
    return list(command)


def guard_cmd(key: bytes, owner: bytes, side: Optional[str], token: Optional[int], command: Sequence[Any]) -> list:
    """``RLOCK.GUARD key owner [READ|WRITE] [TOKEN n] CALL command [arg ...]``."""
    cmd: list = ["RLOCK.GUARD", key, owner]
    if side is not None:
        cmd.append(side)
    if token is not None:
        cmd += ["TOKEN", token]
    return cmd + ["CALL", *guard_words(command)]


def token_now(msg: str) -> Optional[int]:
    """The lock's token in ``STALETOKEN``'s text: "the lock's fencing token is now 8, not 7" -> 8."""
    m = re.search(r"is now (\d+)", msg)
    return int(m.group(1)) if m else None


def read_guard(v: Any, key: bytes, owner: bytes, token: Optional[int]) -> Any:
    """A guarded command's reply: the inner command's, or the refusal of the hold (``NOTHELD``
    as NotHeld, ``STALETOKEN`` as StaleToken); any other error (the inner command's own, a
    command a guard cannot run) as redis-py's."""
    if isinstance(v, ResponseError) and str(v).startswith("STALETOKEN"):
        raise StaleToken(str(v), text(key), text(owner), token, token_now(str(v)))
    return raise_if_error(v, key, owner)


def hold_guard(key: bytes, owner: bytes, side: Optional[str], token: Optional[int], command: Sequence[Any],
               released: bool = False) -> Call:
    """RLOCK.GUARD for a hold: ``command`` runs in the server only while ``owner`` holds ``key``
    (on ``side``, and with ``token``, still as the hold that got it). A hold given back sends
    nothing. Never resent: a broken link leaves unknown whether the inner command ran."""
    cmd = guard_cmd(key, owner, side, token, command)
    if released:
        raise RlockError(f"lock {text(key)!r}: this hold was released")
    return Call(key, [cmd], lambda replies: read_guard(replies[0], key, owner, token), resend=False)


def multi_release(owner: bytes, keys: Sequence[bytes]) -> Call:
    """RLOCK.MRELEASE: how many of the locks are free now."""
    return _one(keys[0], mrelease_cmd(owner, keys, new_req_id()), _count, owner=owner)


def read_taken(v: Any) -> bool:
    """Whether a multi-key acquire or a semaphore's acquire took what it asked for."""
    return granted(raise_if_error(v))


def read_leased(v: Any) -> Optional[list[str]]:
    """RSEM.LEASE: the ids of the permits leased, or None."""
    ids = raise_if_error(v)
    return None if ids is None else [text(i) for i in ids]


def semaphore_try_set_permits(key: bytes, n: Any) -> Call:
    return _one(key, ["RSEM.TRYSETPERMITS", key, check_count(n, "permits", 0)], _flag)


def semaphore_add_permits(key: bytes, n: Any) -> Call:
    return _one(key, ["RSEM.ADDPERMITS", key, check_count(n, "permits", -2147483647)], _count)


def semaphore_available(key: bytes) -> Call:
    return _one(key, ["RSEM.AVAILABLE", key], _count)


def semaphore_release(key: bytes, permits: Any) -> Call:
    """RSEM.RELEASE: the permits available now."""
    cmd = ["RSEM.RELEASE", key, "PERMITS", check_count(permits, "permits"), "REQ", new_req_id()]
    return _one(key, cmd, _count)


def permit_return(key: bytes, permit_id: Any) -> Call:
    """RSEM.RETURN: True when the permit was leased and is back."""
    pid = check_name(permit_id, "permit id")
    return _one(key, ["RSEM.RETURN", key, pid, "REQ", new_req_id()], _flag)


def permit_renew(key: bytes, permit_id: bytes, lease: int) -> Call:
    return Call(key, [["RSEM.RENEW", key, permit_id, "LEASE", lease]], lambda r: read_renewal(r[0]))


def latch_try_set_count(key: bytes, n: Any) -> Call:
    return _one(key, ["RLATCH.TRYSETCOUNT", key, check_count(n, "count")], _flag)


def latch_count_down(key: bytes) -> Call:
    return _one(key, ["RLATCH.COUNTDOWN", key], _count)


def latch_count(key: bytes) -> Call:
    return _one(key, ["RLATCH.COUNT", key], _count)


def read_latch(v: Any) -> bool:
    return as_int(raise_if_error(v)) == 1


def election_leader(key: bytes) -> Call:
    return _one(key, ["RLOCK.INFO", key], lambda v: leader_of(parse_info(v)))


def check_value(value: Any) -> bytes:
    """An election candidate's value: its owner id."""
    if not isinstance(value, str):
        raise TypeError("value must be a str")
    return check_owner(value)


SCAN_COUNT = 500


def scan_cmd(cursor: int, match: Optional[str], type: Optional[str], count: Any = SCAN_COUNT) -> list:
    if type is not None and type.lower() not in ("lock", "rwlock"):
        raise ValueError("type must be 'lock', 'rwlock' or None")
    args: list = ["RLOCK.SCAN", cursor, "COUNT", check_count(count, "count")]
    if match is not None:
        args += ["MATCH", match]
    if type is not None:
        args += ["TYPE", type.upper()]
    return args


def top_cmd(count: Any) -> list:
    return ["RLOCK.TOP", "COUNT", check_count(count, "count", 1, 1000)]


def waiters_call(key: bytes) -> Call:
    return _one(key, ["RLOCK.WAITERS", key], parse_waiters)


# ---------------------------------------------------------------- waits


def wait_deadline(started: float, block: Optional[int]) -> Optional[float]:
    """When a wait of ``block`` ms (0: forever; None: no BLOCK, replies at once) must have
    ended in the server; past it plus WAIT_MARGIN a silent socket is given up."""
    return None if block == 0 else started + (block or 0) / 1000


def resend_wait(cmd: list, tries: int, timed_out: bool, block: Optional[int], deadline: Optional[float],
                now: float) -> Optional[list]:
    """The retry rule of a wait whose link broke before any reply was read, ``tries`` breaks so
    far: None to give up, else ``cmd`` to send again (same REQ id) with the wait that is left.
    A timeout is not retried: the server did not answer within the wait and its margin."""
    if tries > 3 or timed_out:
        return None
    if deadline is None or not block:
        return cmd
    left = deadline - now
    if left <= 0:
        return None
    return with_block(cmd, max(1, int(left * 1000)))


# ---------------------------------------------------------------- the watchdog's decisions

RENEWED, REFUSED, RAN_OUT, AGAIN = "renewed", "refused", "ran out", "again"


def renewal_outcome(v: Any, r: Optional["Renewal"], now: float) -> str:
    """What a renewal's reply ``v`` (None: no reply, the link broke) means for ``r``: renewed;
    refused (0, or WRONGTYPE: the key is no longer this lock), the hold is lost; no answer and
    the lease ran out meanwhile, lost; else tried again at its next turn."""
    if v == 1:
        return RENEWED
    if v == 0 or (isinstance(v, ResponseError) and "WRONGTYPE" in str(v)):
        return REFUSED
    if r is not None and now >= r.expires_at():
        return RAN_OUT
    return AGAIN


LOST_REASONS = {
    REFUSED: "the renewal was refused: the lock is no longer held",
    RAN_OUT: "the lease ran out while renewals failed",
}


def renewal_timeout(leases_ms: Sequence[int]) -> float:
    """How long one server's renewal pipeline may take: a hung server must not hold the
    watchdog past a lease (loss is told at its end)."""
    return max(0.05, min(leases_ms) / 3000)


def due_now(entries: Sequence[tuple], now: float) -> list:
    """The watchdog's entries ``(n, (Renewal, event))`` whose turn has come, as ``(n, r, event)``."""
    return [(n, r, ev) for n, (r, ev) in entries if r.due_at() <= now]


def next_look(entries: Sequence[tuple], now: float) -> float:
    """How long the watchdog sleeps: until the next hold falls due, at most a second."""
    nxt = min((r.due_at() for _, (r, _) in entries), default=now + 1.0)
    return max(0.0, min(nxt - now, 1.0))


# ---------------------------------------------------------------- replies


def as_int(v: Any) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, (bytes, str)):
        return int(v)
    raise TypeError(f"expected an integer reply, got {v!r}")


def text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def pairs(v: Any) -> dict:
    """A RESP2 flat array of field, value pairs (or a RESP3 map) as a dict with str keys."""
    if isinstance(v, dict):
        return {text(k): val for k, val in v.items()}
    it = iter(v or [])
    return {text(k): val for k, val in zip(it, it)}


def server_error(e: ResponseError, key: Optional[bytes] = None, owner: Optional[bytes] = None) -> Exception:
    """The package's error for a server error it knows (``NOTHELD`` naming ``key`` and
    ``owner``, a ``DEADLOCK`` cycle); ``e`` itself otherwise (a ``DEADLOCK`` whose text is
    not a cycle too)."""
    msg = str(e)
    if msg.startswith("NOTHELD"):
        return NotHeld(msg, None if key is None else text(key), None if owner is None else text(owner))
    if msg.startswith("DEADLOCK"):
        cycle = parse_cycle(msg)
        if cycle:
            return Deadlock(msg, cycle)
    return e


_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_WAIT = re.compile(_QUOTED + r" waits for " + _QUOTED + r" (held by|kept for) " + _QUOTED)


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x" and i + 3 < len(s):
                out.append(chr(int(s[i + 2 : i + 4], 16)))
                i += 4
                continue
            out.append(n)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_cycle(msg: str) -> list[DeadlockWait]:
    """``DEADLOCK "b" waits for "k1" held by "a"; ...`` as a list of waits."""
    return [
        DeadlockWait(_unescape(o), _unescape(k), _unescape(h), kind == "kept for")
        for o, k, kind, h in _WAIT.findall(msg)
    ]


def keyspace_channel(db: int, key: bytes) -> bytes:
    return b"__keyspace@" + str(db).encode() + b"__:" + key


KEYSPACE, KEYEVENT = "keyspace", "keyevent"


def events_on(flags: str) -> Optional[str]:
    """How ``notify-keyspace-events`` publishes the module's events (class ``d``, in ``A``):
    ``"keyspace"`` on each key's channel (``K``, preferred: it hears only the keys held),
    ``"keyevent"`` on each event's channel only (``E``), None not at all."""
    if "d" not in flags and "A" not in flags:
        return None
    return KEYSPACE if "K" in flags else KEYEVENT if "E" in flags else None


def event_channels(mode: str, db: int, keys: Sequence[bytes]) -> list[bytes]:
    """The channels to hear held keys' losses on, in order: each key's (keyspace), or each
    loss event's (keyevent)."""
    if mode == KEYSPACE:
        return [keyspace_channel(db, k) for k in keys]
    return [b"__keyevent@" + str(db).encode() + b"__:" + e for e in LOSS_EVENTS]


def lost_key(msg: Any, db: int) -> Optional[bytes]:
    """The key a pub/sub message of database ``db`` says may have been lost, or None."""
    if not (isinstance(msg, list) and len(msg) == 3 and msg[0] == b"message"):
        return None
    channel, data = msg[1], msg[2]
    space, event = b"__keyspace@%d__:" % db, b"__keyevent@%d__:" % db
    if channel.startswith(space):
        return channel[len(space):] if data in _LOSS else None
    if channel.startswith(event):
        return data if channel[len(event):] in _LOSS else None
    return None


# The one list of loss events: ``loss_events`` of clients/spec/keyspace.json, in its order (the
# C21 test fails when they differ). Every event that can end a hold, none that a client's own
# work sends for a hold that stands (not ``expire``: every renewal sends one; not ``hset``).
LOSS_EVENTS: tuple[bytes, ...] = tuple(e.encode() for e in (
    "rlock.release", "rlock.expire", "rlock.forcerelease", "rlock.sessionend", "rsem.return",
    "rsem.reclaim", "del", "expired", "evicted", "rename_from", "move_from", "hdel", "hexpired", "set",
    "restore", "rename_to", "copy_to", "sortstore", "sunionstore", "sinterstore", "sdiffstore",
    "zunionstore", "zinterstore", "zdiffstore", "zrangestore", "georadiusstore", "geosearchstore",
    "overwritten", "type_changed",
))
_LOSS = frozenset(LOSS_EVENTS)


# ---------------------------------------------------------------- query results


@dataclass(frozen=True)
class LockInfo:
    """``RLOCK.INFO``: holders (owner -> count), lease left (None when free), fair queue,
    fencing counter, mode (read-write locks), clients blocked here."""

    holders: dict
    pttl: Optional[int]
    queue: list
    token: Optional[int]
    blocked: int
    mode: Optional[str] = None

    @property
    def locked(self) -> bool:
        return bool(self.holders)


def parse_info(v: Any) -> LockInfo:
    d = pairs(v)
    holders = {text(k): as_int(c) for k, c in pairs(d.get("holders") or []).items()}
    pttl = as_int(d.get("pttl"))
    tok = d.get("token")
    try:
        token = as_int(tok)
    except ValueError:
        token = None
    mode = d.get("mode")
    return LockInfo(
        holders=holders,
        pttl=None if pttl is None or pttl < 0 else pttl,
        queue=[text(q) for q in d.get("queue") or []],
        token=token,
        blocked=as_int(d.get("blocked")) or 0,
        mode=None if mode is None else text(mode),
    )


@dataclass(frozen=True)
class Waiter:
    client_id: int
    client_name: str
    kind: str
    owner: Optional[str]
    permits: Optional[int]
    session: bool
    timeout_ms: int
    waited_ms: int


def parse_waiters(v: Any) -> list[Waiter]:
    out = []
    for e in v or []:
        d = pairs(e)
        out.append(
            Waiter(
                client_id=as_int(d["client-id"]) or 0,
                client_name=text(d.get("client-name") or b""),
                kind=text(d["kind"]),
                owner=None if d.get("owner") is None else text(d["owner"]),
                permits=as_int(d.get("permits")),
                session=bool(as_int(d.get("session"))),
                timeout_ms=as_int(d.get("timeout-ms")) or 0,
                waited_ms=as_int(d.get("waited-ms")) or 0,
            )
        )
    return out


@dataclass(frozen=True)
class ScannedLock:
    key: str
    type: str
    mode: Optional[str]
    holders: dict
    pttl: int
    waiters: int


def parse_scan(v: Any) -> tuple[int, list[ScannedLock]]:
    cursor, entries = v
    out = []
    for e in entries:
        d = pairs(e)
        out.append(
            ScannedLock(
                key=text(d["key"]),
                type=text(d["type"]),
                mode=None if d.get("mode") is None else text(d["mode"]),
                holders={text(k): as_int(c) for k, c in pairs(d.get("holders") or []).items()},
                pttl=as_int(d.get("pttl")) or 0,
                waiters=as_int(d.get("waiters")) or 0,
            )
        )
    return int(cursor), out


def parse_top(v: Any) -> list[dict]:
    out = []
    for e in v or []:
        d = pairs(e)
        out.append({k: (text(x) if isinstance(x, bytes) else x) for k, x in d.items()})
    return out


def parse_stats(v: Any) -> dict:
    """``INFO rlock`` as a dict: numbers as int or float, the rest as str."""
    s = text(v)
    out: dict = {}
    for line in s.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, val = line.split(":", 1)
        try:
            out[k] = int(val)
        except ValueError:
            try:
                out[k] = float(val)
            except ValueError:
                out[k] = val
    return out


@dataclass(frozen=True)
class Leader:
    value: str
    term: int


def leader_of(info: LockInfo) -> Optional[Leader]:
    if not info.holders:
        return None
    value = next(iter(info.holders))
    return Leader(value, info.token or 0)


@dataclass
class Renewal:
    """What the watchdog knows of one renewable (or fixed-lease) hold."""

    key: bytes
    owner: bytes  # for a leased permit: its id
    side: Optional[str]
    lease_ms: int
    renew: bool
    basis: float  # monotonic time the lease was last known to start from
    kind: str = "lock"  # lock | permit
    lost_reason: Optional[str] = None
    next_due: float = field(default=0.0)

    def due_at(self) -> float:
        return self.next_due if self.renew else self.basis + self.lease_ms / 1000

    def schedule(self, anchor: float, now: float) -> None:
        """The next renewal: the first point after ``now`` on a grid of a third of the lease
        from ``anchor`` (the watchdog's start), so that holds with one lease fall due
        together and are renewed in one pipeline, once a third of a lease each."""
        period = self.lease_ms / 3000
        self.next_due = anchor + (math.floor((now - anchor) / period) + 1) * period

    def expires_at(self) -> float:
        return self.basis + self.lease_ms / 1000


def after_renewal(r: Renewal, v: Any, sent: float, now: float, anchor: float) -> Optional[str]:
    """Applies a renewal's reply ``v`` (None: no reply) to ``r``: the reason it is lost, or None
    (renewed from ``sent``, or tried again at its next turn)."""
    outcome = renewal_outcome(v, r, now)
    if outcome in LOST_REASONS:
        return LOST_REASONS[outcome]
    if outcome == RENEWED:
        r.basis = sent
    r.schedule(anchor, now)
    return None


def split_due(due: Sequence[tuple]) -> tuple[list, list]:
    """The watchdog's due entries ``(n, r, event)``: (fixed leases that ran out, holds to renew)."""
    return [d for d in due if not d[1].renew], [d for d in due if d[1].renew]


def hit_by_events(entries: Sequence[tuple], keys: set) -> tuple[list, list]:
    """Entries ``(n, (r, event))`` whose keys an event named: (renewed at once, checked with
    ``held_cmd``: a fixed lease is not renewed)."""
    hit = [(n, r, ev) for n, (r, ev) in entries if r.key in keys]
    return [h for h in hit if h[1].renew], [h for h in hit if not h[1].renew]


def held_cmd(r: Renewal) -> list:
    return ["HEXISTS", r.key, field_of(r.owner, r.side)]


RAN_OUT_FIXED = "the lease ran out"
LOST_BY_OTHERS = "the lock was released or deleted by someone else"


def attached_replicas(info: Any) -> int:
    """``connected_slaves`` of ``INFO replication``."""
    for line in text(info).splitlines():
        if line.startswith("connected_slaves:"):
            return int(line.split(":", 1)[1])
    return 0


def server_name(kwargs: dict) -> str:
    """How ``stats()`` names a server: ``host:port`` (a unix socket: its path)."""
    return f"{kwargs.get('host', kwargs.get('path'))}:{kwargs.get('port', '')}"


def merge_top(entries: list, count: int) -> list:
    """``RLOCK.TOP`` of every primary as one list: the most waiters first, then the most waits."""
    return sorted(entries, key=lambda e: (-(e.get("waiters") or 0), -(e.get("waits") or 0)))[:count]


def owner_id(client_id: str, seq: int) -> str:
    """A default owner (a thread's, a task's): ``<client-uuid>:<n>``, as Redisson's ``<uuid>:<thread>``."""
    return f"{client_id}:{seq}"


def renew_args(r: Renewal, req: str) -> list:
    if r.kind == "permit":
        return ["RSEM.RENEW", r.key, r.owner, "LEASE", r.lease_ms]
    return renew_cmd(r.key, r.owner, r.side, r.lease_ms, req)
