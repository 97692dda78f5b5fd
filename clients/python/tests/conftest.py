import itertools
import os
import sys

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

sys.path.insert(0, os.path.dirname(__file__))
from servers import Server, flavors  # noqa: E402

try:
    import rlock_client  # noqa: E402
except ImportError:  # run from a checkout without installing: the tree's own package
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
    import rlock_client  # noqa: E402


@pytest.fixture(scope="session", params=flavors())
def flavor(request):
    return request.param


@pytest.fixture(scope="session")
def server(flavor):
    s = Server(flavor).start()
    yield s
    s.close()


@pytest.fixture
def r(server):
    # Retries off: this connection kills clients, and redis-py 6+ would resend a command
    # after a timeout.
    c = redis.Redis(port=server.port, socket_timeout=10, retry=Retry(NoBackoff(), 0))
    yield c
    c.close()


@pytest.fixture
def locks(server):
    return rlock_client.Locks.from_url(server.url)


_seq = itertools.count()


@pytest.fixture
def key(request):
    return f"{request.node.name}:{next(_seq)}"
