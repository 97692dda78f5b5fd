"""The plans of ``rlock_client._handles``, run alone: each request a plan yields is answered by
hand, as a face's driver would answer it, with no server and no socket."""

import os

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MovedError

from rlock_client import _handles as h
from rlock_client._conn import Pool
from rlock_client._core import RESEND_AFTER, pack


class Cluster:
    nodes_manager = "the node map"


class Router:
    cluster = Cluster()  # a cluster: MOVED is followed
    single = None  # so each key's server is asked of the face

    def at(self, host, port):
        return Server(f"{host}:{port}")


def bare_locks():
    locks = h.Locks.__new__(h.Locks)
    locks._router = Router()
    locks._pid = os.getpid()
    return locks


class Server(Pool):
    """A server with no socket: the plan's requests name it; its pool is the real one."""

    def __init__(self, name):
        super().__init__(None)
        self.name = name


def test_sending_resends_after_a_broken_link_and_follows_moved():
    locks = bare_locks()
    cmds = [["RLOCK.ACQUIRE", "k"]]
    s1 = Server("s1")
    plan = locks._sending(b"k", cmds, resend=True)
    assert next(plan) == (locks._router, "server_for", (b"k",))
    assert plan.send(s1) == (s1, "_take", (False, None))
    assert plan.send("c1") == ("c1", "send_packed_command", ([pack(cmds)],))
    assert plan.send(None) == ("_read", ("c1", False, None))
    assert plan.throw(RedisConnectionError("cut")) == ("_close", ("c1",))  # the cut link is dropped
    assert plan.send(None) == ("_sleep", (RESEND_AFTER,))
    assert plan.send(None) == (s1, "_take", (False, None))
    plan.send("c2")
    assert plan.send(None) == ("_read", ("c2", False, None))
    moved = MovedError("3999 127.0.0.1:7001")
    assert plan.throw(moved) == ("the node map", "initialize", ())  # a refusal, read as a value
    assert s1.idle() == "c2"  # the connection that read MOVED went back to its pool
    req = plan.throw(RedisConnectionError("the map did not load"))  # the node MOVED names, all the same
    s2 = req[0]
    assert s2.name == "127.0.0.1:7001" and req[1:] == ("_take", (False, None))
    plan.send("c3")
    assert plan.send(None) == ("_read", ("c3", False, None))
    with pytest.raises(StopIteration) as done:
        plan.send(b"OK")
    assert done.value.value == [b"OK"]
    assert s2.idle() == "c3"


def test_sending_without_resend_raises_a_broken_link():
    locks = bare_locks()
    plan = locks._sending(b"k", [["PING"]])
    next(plan)
    plan.send(Server("s1"))
    plan.send("c1")
    plan.send(None)
    assert plan.throw(RedisConnectionError("cut")) == ("_close", ("c1",))
    with pytest.raises(RedisConnectionError):
        plan.send(None)


def test_a_plan_that_sends_nothing_returns_at_once():
    plan = h.returns(7)
    with pytest.raises(StopIteration) as done:
        next(plan)
    assert done.value.value == 7
