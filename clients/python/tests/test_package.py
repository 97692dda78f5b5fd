"""C22 the package: the wheel and sdist (``python -m build``, or those in ``RLOCK_DIST``, the
``dist/`` of ``make dist``) pass ``twine check --strict``, and the wheel installed into a fresh
venv (redis from PyPI, through pip's cache) is imported there and takes and gives back a lock
on each server, reporting the version of pyproject.toml.

Needs ``build`` and ``twine`` (scripts/dist/requirements.txt) in the running Python, and PyPI
(or pip's cache) for the fresh venv's dependencies."""

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def project_version() -> str:
    m = re.search(r'(?m)^version\s*=\s*"([^"]+)"', (PROJECT / "pyproject.toml").read_text())
    assert m, "pyproject.toml names no version"
    return m.group(1)


VERSION = project_version()
WHEEL = f"rlock_client-{VERSION}-py3-none-any.whl"
SDIST = f"rlock_client-{VERSION}.tar.gz"


def needs(module: str) -> None:
    """A tool this case runs: missing is a failure that says how to get it, not a skip."""
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    if probe.returncode != 0:
        pytest.fail(f"{module} is not installed in {sys.executable}: "
                    f"pip install -r scripts/dist/requirements.txt (C22 needs it)")


def run(cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="rlock-py-package-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def dist(workdir) -> Path:
    """The directory holding the wheel and the sdist: RLOCK_DIST's, or built here."""
    given = os.environ.get("RLOCK_DIST")
    if given:
        d = Path(given)
        assert (d / WHEEL).is_file(), f"RLOCK_DIST={given} holds no {WHEEL}: run make dist"
        return d
    needs("build")
    d = workdir / "dist"
    # The sdist first, then the wheel built from the sdist: what is left out of the sdist
    # breaks the wheel.
    run([sys.executable, "-m", "build", "-q", "--outdir", str(d), str(PROJECT)], timeout=600)
    return d


@pytest.fixture(scope="module")
def venv(workdir, dist) -> Path:
    """A fresh venv with the wheel installed as a user would, and nothing of the tree."""
    v = workdir / "venv"
    run([sys.executable, "-m", "venv", str(v)], timeout=300)
    # pip's cache is the user's default one: redis comes from it once it was fetched.
    run([str(v / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         str(dist / WHEEL)], timeout=600)
    return v


def test_c22_wheel_and_sdist_pass_twine_check_strict(dist):
    needs("twine")
    files = [str(dist / WHEEL)] + ([str(dist / SDIST)] if (dist / SDIST).is_file() else [])
    if not os.environ.get("RLOCK_DIST"):
        assert len(files) == 2, f"python -m build made no {SDIST}"
    out = run([sys.executable, "-m", "twine", "check", "--strict", *files], timeout=300)
    assert out.stdout.count("PASSED") == len(files), out.stdout


def test_c22_the_wheel_holds_the_package_typed_and_nothing_else(dist):
    with zipfile.ZipFile(dist / WHEEL) as z:
        names = z.namelist()
        metadata = z.read(f"rlock_client-{VERSION}.dist-info/METADATA").decode()
    assert "rlock_client/py.typed" in names  # mypy users get the types
    for module in ("__init__", "_core", "_handles", "_sync", "_conn", "asyncio", "errors"):
        assert f"rlock_client/{module}.py" in names
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n or n.endswith(".pyc")]
    assert re.search(r"(?m)^Name: rlock-client$", metadata)
    assert re.search(rf"(?m)^Version: {re.escape(VERSION)}$", metadata)
    assert re.search(r"(?m)^Requires-Dist: redis", metadata)
    assert "Description-Content-Type: text/markdown" in metadata  # the README renders on PyPI


def test_c22_the_sdist_builds_from_its_own_files(dist):
    if not (dist / SDIST).is_file():
        pytest.fail(f"no {SDIST} in {dist}")
    with tarfile.open(dist / SDIST) as t:
        names = t.getnames()
    top = f"rlock_client-{VERSION}"
    for f in ("pyproject.toml", "README.md", "src/rlock_client/__init__.py", "src/rlock_client/py.typed"):
        assert f"{top}/{f}" in names, f"{f} missing from {SDIST}"


PROGRAM = textwrap.dedent("""
    import importlib.metadata, json, sys
    import rlock_client
    import rlock_client.asyncio
    from rlock_client import Locks

    locks = Locks.from_url(sys.argv[1])
    hold = locks.lock(sys.argv[2], fenced=True).acquire()
    print(json.dumps({
        "file": rlock_client.__file__,
        "version": rlock_client.__version__,
        "distribution": importlib.metadata.version("rlock-client"),
        "owner": hold.owner,
        "token": hold.token,
    }), flush=True)
    sys.stdin.readline()  # the test looks at the server meanwhile
    print(json.dumps({"freed": hold.release()}), flush=True)
""")


def test_c22_installed_into_a_fresh_venv_it_imports_takes_and_releases_a_lock(venv, server, r, key, workdir):
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    # Run outside the tree (cwd: the temp dir), so only the installed package can be imported.
    proc = subprocess.Popen([str(python), "-c", PROGRAM, server.url, key], cwd=workdir, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        got = json.loads(line)
        assert Path(got["file"]).resolve().is_relative_to(venv.resolve()), got["file"]
        assert got["version"] == VERSION
        assert got["distribution"] == VERSION
        assert got["token"] >= 1
        assert r.hget(key, got["owner"]) == b"1"  # the server holds the lock for it
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"freed": True}
        assert proc.wait(30) == 0, proc.stderr.read()
        assert not r.exists(key)
    finally:
        proc.kill()
        proc.wait()
