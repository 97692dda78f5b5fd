"""Where the package's own connections come from: the address, credentials and TLS settings
of the client the user gave (redis.Redis, redis.asyncio.Redis, RedisCluster, valkey.Valkey),
on connections of our own that never resend a command (redis-py 6+ resends after a timeout
or a reconnect), speak RESP2, return bytes, and have the socket timeout each call needs."""

from __future__ import annotations

import importlib
import os
from typing import Any, Optional

from ._core import pack

# What is copied from the user's connection settings. Everything else (retries, protocol,
# decoding, redis-py's maintenance notifications) is ours to choose.
_KEEP = {
    "host",
    "port",
    "path",
    "db",
    "username",
    "password",
    "credential_provider",
    "socket_connect_timeout",
    "socket_keepalive",
    "client_name",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_ca_path",
    "ssl_check_hostname",
    "ssl_password",
    "ssl_min_version",
    "ssl_ciphers",
}


class Settings:
    """How to open a connection to one server: tcp, ssl or unix, and its keyword arguments."""

    def __init__(self, kind: str, kwargs: dict, socket_timeout: Optional[float]):
        self.kind = kind
        self.kwargs = kwargs
        self.socket_timeout = socket_timeout

    @classmethod
    def of_pool(cls, connection_class: Any, connection_kwargs: dict) -> "Settings":
        name = getattr(connection_class, "__name__", "")
        kind = "ssl" if "SSL" in name else "unix" if "Unix" in name else "tcp"
        kwargs = {k: v for k, v in connection_kwargs.items() if k in _KEEP and v is not None}
        return cls(kind, kwargs, connection_kwargs.get("socket_timeout"))

    def at(self, host: str, port: int) -> "Settings":
        kw = dict(self.kwargs, host=host, port=port)
        kw.pop("path", None)
        return Settings(self.kind, kw, self.socket_timeout)

    @property
    def db(self) -> int:
        return int(self.kwargs.get("db") or 0)

    def connection(self, redis_module: str, socket_timeout: Optional[float]) -> Any:
        """A new connection of the face's redis-py module (``redis``, ``redis.asyncio``), which
        never resends a command behind the package's back (no retries, no health checks)."""
        from redis.backoff import NoBackoff

        face = importlib.import_module(redis_module)
        cls = {
            "tcp": face.Connection,
            "ssl": face.SSLConnection,
            "unix": face.UnixDomainSocketConnection,
        }[self.kind]
        return cls(
            **self.kwargs,
            socket_timeout=socket_timeout,
            retry=importlib.import_module(redis_module + ".retry").Retry(NoBackoff(), 0),
            protocol=2,
            decode_responses=False,
            health_check_interval=0,
        )


def describe(client: Any) -> tuple[Optional[Settings], Any]:
    """(settings of a single server, None) or (None, the cluster client)."""
    if isinstance(client, str):
        raise TypeError("pass a URL to Locks.from_url(), or a client to Locks()")
    nodes = getattr(client, "nodes_manager", None)
    if nodes is not None:  # RedisCluster, sync or asyncio
        return None, client
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        raise TypeError(
            "Locks() takes a redis.Redis, redis.asyncio.Redis, RedisCluster or valkey.Valkey "
            f"client, not {type(client).__name__}"
        )
    return Settings.of_pool(pool.connection_class, pool.connection_kwargs), None


def cluster_settings(cluster: Any) -> Settings:
    nm = cluster.nodes_manager
    kwargs = dict(getattr(nm, "connection_kwargs", {}) or {})
    cls = kwargs.pop("connection_class", None)
    if cls is None:
        cls = getattr(nm, "connection_class", None) or getattr(cluster, "connection_class", None)
    if cls is None:
        ssl = kwargs.get("ssl") or any(k.startswith("ssl_") for k in kwargs)
        cls = type("SSLConnection" if ssl else "Connection", (), {})
    s = Settings.of_pool(cls, kwargs)
    if not s.kwargs.get("host"):
        s.kwargs["host"] = "127.0.0.1"
    return s


def node_of(cluster: Any, key: bytes) -> tuple[str, int]:
    node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key))
    return node.host, int(node.port)


def primaries(cluster: Any) -> list[tuple[str, int]]:
    return sorted(
        {(n.host, int(n.port)) for n in cluster.nodes_manager.nodes_cache.values() if n.server_type == "primary"}
    )


class Pool:
    """One server's idle connections of the package's own: for short commands, for waits,
    and (the sync watchdog's) with a renewal's socket timeout. Each face opens them; a list's
    ``pop`` and ``append`` are each atomic, so threads share a Pool without a lock."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.forget()

    def idle(self, kind: str = "") -> Any:
        """An idle connection of ``kind`` ("", "waits", "timed"), or None."""
        try:
            return self._idle[kind].pop()
        except IndexError:
            return None

    def give(self, conn: Any, kind: str = "") -> None:
        if self.pid == os.getpid():  # after fork(), the parent's sockets are the parent's
            self._idle[kind].append(conn)

    @staticmethod
    def kind(waits: bool, timeout: Optional[float]) -> str:
        """The kind of connection a use takes: a wait's, one with a renewal's ``timeout``, or
        one for short commands."""
        return "waits" if waits else "" if timeout is None else "timed"

    def forget(self) -> None:
        self._idle: dict[str, list] = {"": [], "waits": [], "timed": []}
        self.pid = os.getpid()


class Router:
    """The server of each key: the one server, or a cluster's node of the key's slot. Each face
    subclasses it with its ``Pool`` kind and whatever of a cluster's node map is I/O."""

    def __init__(self, client: Any, pool: Any):
        settings, cluster = describe(client)
        self.cluster = cluster
        self._pool = pool
        self.single = pool(settings) if settings else None
        self._base = settings or cluster_settings(cluster)
        self._nodes: dict = {}

    @property
    def db(self) -> int:
        return self._base.db

    def at(self, host: str, port: int) -> Any:
        s = self._nodes.get((host, port))
        if s is None:  # two threads may make one each: setdefault keeps one
            s = self._nodes.setdefault((host, port), self._pool(self._base.at(host, port)))
        return s

    def node_for(self, key: bytes) -> Any:
        return self.single if self.single is not None else self.at(*node_of(self.cluster, key))

    def nodes(self) -> list:
        if self.single is not None:
            return [self.single]
        return [self.at(h, p) for h, p in primaries(self.cluster)]

    # The sync face's names; the asyncio face's are coroutines that first load the node map.
    server_for = node_for
    all = nodes

    def forget(self) -> None:
        for s in [self.single, *self._nodes.values()]:
            if s is not None:
                s.forget()


def packed(conn: Any, cmds: Any) -> list:
    """``cmds`` as the bytes of one write (``_core.pack``), or redis-py's packing of them."""
    p = pack(cmds)
    return [p] if p is not None else conn.pack_commands(cmds)
