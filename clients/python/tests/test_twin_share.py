"""The twin share of the two faces (issue 38): scripts/twin_share.py, checked on small sources,
then on the package."""

import os
import subprocess
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from twin_share import code_lines, twin_share  # noqa: E402

SYNC = '''
def take(self, key):
    """A docstring is not code."""
    cmd = plan(key)  # a comment is not code
    return self.call(cmd)


def only_here():
    return 1
'''

ASYNC = '''
async def take(self, key):
    """Neither here."""
    cmd = plan(key)
    return await self.call(cmd)


async def mine():
    x = await other()
    return x
'''


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    assert code_lines(SYNC) == ["def take(self, key):", "cmd = plan(key)", "return self.call(cmd)",
                                "def only_here():", "return 1"]


def test_twins_are_counted_with_async_and_await_stripped_each_sync_line_once():
    assert twin_share(SYNC, ASYNC) == (3, 6)
    assert twin_share(SYNC, ASYNC + "\ncmd = plan(key)\ncmd = plan(key)\n") == (3, 8)
    assert twin_share("", ASYNC) == (0, 6)


def test_the_script_fails_above_its_bound():
    script = os.path.join(HERE, "..", "scripts", "twin_share.py")
    ok = subprocess.run([sys.executable, script, "--max", "100"], capture_output=True, text=True)
    assert ok.returncode == 0 and "twin share:" in ok.stdout
    assert subprocess.run([sys.executable, script, "--max", "0"], capture_output=True).returncode == 1


def test_the_faces_twin_share_is_at_most_20_percent():
    pkg = os.path.join(HERE, "..", "src", "rlock_client")
    with open(os.path.join(pkg, "_sync.py")) as f, open(os.path.join(pkg, "asyncio.py")) as g:
        twins, total = twin_share(f.read(), g.read())
    assert twins / total <= 0.20, f"{twins} of {total} lines"
