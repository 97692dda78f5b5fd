"""Clusters, replicas, TLS: C14, C15, C19."""

import asyncio
import os
import signal
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster

from rlock_client import Locks, NotAcknowledged
from proxy import TlsFront
from servers import Cluster, Server


@pytest.fixture(scope="module")
def cluster(flavor):
    c = Cluster(flavor).start()
    yield c
    c.close()


def cluster_locks(cluster):
    return Locks(RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port))


def raw(cluster):
    return RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)


def test_c14_cluster_acquire_reenter_release(cluster):
    locks = cluster_locks(cluster)
    rc = raw(cluster)
    names = [f"c14-{i}" for i in range(6)]  # spread over the three primaries
    assert len({rc.keyslot(n) // 5461 for n in names}) > 1
    for name in names:
        lock = locks.lock(name)
        h1 = lock.acquire()
        h2 = lock.acquire()
        assert h2.count == 2
        assert locks.lock(name, owner="other").acquire() is None
        assert h2.release() is False and h1.release() is True
        assert rc.exists(name) == 0


def test_c14_cluster_wait_in_server(cluster):
    locks = cluster_locks(cluster)
    name = "c14-wait"
    holder = locks.lock(name, owner="holder").acquire()
    got = {}
    t = threading.Thread(target=lambda: got.update(h=locks.lock(name, wait=5).acquire(), at=time.monotonic()))
    t.start()
    end = time.monotonic() + 5
    while not locks.waiters(name) and time.monotonic() < end:
        time.sleep(0.01)
    released = time.monotonic()
    holder.release()
    t.join(5)
    assert got["h"] is not None and got["at"] - released < 0.05
    got["h"].release()


def test_c14_cluster_synchronizers(cluster):
    locks = cluster_locks(cluster)
    with locks.multi(["{c14}:a", "{c14}:b"]) as held:
        assert len(held.keys) == 2
    sem = locks.semaphore("c14-sem")
    sem.try_set_permits(1)
    p = sem.acquire()
    assert sem.acquire(wait=0.1) is None
    p.release()
    rw = locks.read_write("c14-rw", owner="r1")
    h = rw.read().acquire()
    assert locks.read_write("c14-rw", owner="w").write().acquire() is None
    h.release()
    latch = locks.latch("c14-latch")
    latch.try_set_count(1)
    latch.count_down()
    assert latch.await_zero(wait=1)


def test_c14_multi_key_over_slots_refused_before_sending(cluster):
    locks = cluster_locks(cluster)
    rc = raw(cluster)
    before = sum(
        n.client().info("commandstats").get("cmdstat_rlock.macquire", {}).get("calls", 0) for n in cluster.nodes
    )
    with pytest.raises(ValueError):
        locks.multi(["c14-x", "c14-y", "c14-z"])
    after = sum(
        n.client().info("commandstats").get("cmdstat_rlock.macquire", {}).get("calls", 0) for n in cluster.nodes
    )
    assert before == after
    assert rc.keyslot("c14-x") != rc.keyslot("c14-y")


@pytest.fixture(scope="module")
def replicated(flavor):
    primary = Server(flavor).start()
    replica = Server(flavor, {"replicaof": f"127.0.0.1 {primary.port}"}).start()
    end = time.time() + 20
    while time.time() < end:
        if replica.client().info("replication").get("master_link_status") == "up":
            break
        time.sleep(0.05)
    yield primary, replica
    os.kill(replica.proc.pid, signal.SIGCONT)
    replica.close()
    primary.close()


def counted(primary):
    """Locks on ``primary``, and a client of it whose command statistics start from zero."""
    r = primary.client()
    r.execute_command("CONFIG", "RESETSTAT")
    return Locks.from_url(primary.url), r


def test_c15_default_acquire_waits_for_a_replica(replicated):
    primary, replica = replicated
    locks, r = counted(primary)
    hold = locks.lock("c15").acquire()
    assert hold.replicas_acked >= 1
    assert r.info("commandstats")["cmdstat_wait"]["calls"] == 1
    assert replica.client().hexists("c15", hold.owner)  # the replica has it already
    hold.release()
    waited = locks.lock("c15-wait", wait=1).acquire()
    assert waited.replicas_acked >= 1
    waited.release()


def test_c15_sync_replicas_zero_sends_no_wait(replicated):
    locks, r = counted(replicated[0])
    hold = locks.lock("c15-none", sync_replicas=0).acquire()
    assert hold.replicas_acked is None
    hold.release()
    assert "cmdstat_wait" not in r.info("commandstats")


def test_c15_unacknowledged_grant_is_released(replicated):
    primary, replica = replicated
    locks = Locks.from_url(primary.url)
    locks.lock("warm", sync_replicas=0).acquire().release()
    locks._replicas_for(b"c15-nack")  # seen attached before the replica stops
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(NotAcknowledged) as e:
            locks.lock("c15-nack", sync_timeout=0.2).acquire()
        assert e.value.acked == 0
        assert not primary.client().exists("c15-nack")
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def tls_server(flavor, tmp_path_factory):
    trustme = pytest.importorskip("trustme")
    d = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(d / "server.crt"))
    client = ca.issue_cert("rlock-test-client")
    client.private_key_pem.write_to_path(str(d / "client.key"))
    client.cert_chain_pems[0].write_to_path(str(d / "client.crt"))
    other = trustme.CA()
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    if flavor == "redis":  # Debian's Redis 7.0 is built with TLS
        s = Server(
            flavor,
            {
                "tls-port": "0",
                "tls-cert-file": str(d / "server.crt"),
                "tls-key-file": str(d / "server.key"),
                "tls-ca-cert-file": str(d / "ca.pem"),
                "tls-auth-clients": "yes",
            },
        ).start()
        front = None
    else:  # the PyPI builds have no TLS: a TLS front checks what the server would
        s = Server(flavor).start()
        front = TlsFront(s.port, str(d / "server.crt"), str(d / "server.key"), str(d / "ca.pem"))
        s.tls_port = front.port
    yield s, d
    if front:
        front.close()
    s.close()


def tls_locks(s, d, ca):
    """Locks over TLS to the test server, trusting ``ca``, with the client's certificate."""
    return Locks.from_url(
        f"rediss://127.0.0.1:{s.tls_port}/0",
        ssl_ca_certs=str(d / ca),
        ssl_certfile=str(d / "client.crt"),
        ssl_keyfile=str(d / "client.key"),
    )


def test_c19_tls_with_ca_and_client_certificate(tls_server):
    s, d = tls_server
    locks = tls_locks(s, d, "ca.pem")
    lock = locks.lock("c19", wait=1, fenced=True)
    with lock as hold:
        assert hold.token >= 1
        assert locks.info("c19").holders == {hold.owner: 1}
    assert not s.client().exists("c19")


def test_c19_wrong_ca_is_refused(tls_server):
    s, d = tls_server
    locks = tls_locks(s, d, "other-ca.pem")
    with pytest.raises(redis.ConnectionError):
        locks.lock("c19-wrong").acquire()
    assert not s.client().exists("c19-wrong")


async def test_c14_cluster_asyncio(cluster):
    from redis.asyncio.cluster import RedisCluster as AsyncCluster

    from rlock_client import asyncio as rl

    locks = rl.Locks(AsyncCluster(host="127.0.0.1", port=cluster.nodes[0].port))
    rc = raw(cluster)
    for name in ("c14a-1", "c14a-2", "c14a-3", "c14a-4"):
        h = await locks.lock(name).acquire()
        assert await locks.lock(name, owner="other").acquire() is None
        assert await h.release() is True
        assert rc.exists(name) == 0
    holder = await locks.lock("c14a-wait", owner="holder").acquire()

    async def later():
        await asyncio.sleep(0.2)
        await holder.release()

    asyncio.ensure_future(later())
    got = await locks.lock("c14a-wait", wait=5).acquire()
    assert got is not None
    await got.release()
    with pytest.raises(ValueError):
        locks.multi(["c14a-x", "c14a-y", "c14a-z"])
