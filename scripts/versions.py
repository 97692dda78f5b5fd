#!/usr/bin/env python3
"""One version everywhere: the module and the crate (the workspace), the `rlock` tool, the Python
package, the npm package, the Java jars and the Go module carry the same version.

Usage: scripts/versions.py           check; print each artifact's version; exit 1 on a drift
       scripts/versions.py --print   print the workspace version only
       scripts/versions.py --self-test
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _match(path: Path, pattern: str) -> str | None:
    if not path.exists():
        return None
    m = re.search(pattern, path.read_text(), re.M)
    if not m:
        raise SystemExit(f"versions: no version found in {path} (pattern {pattern!r})")
    return m.group(1)


def _pom(path: Path) -> str | None:
    if not path.exists():
        return None
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(path).getroot()
    v = root.find("m:version", ns)
    if v is None:
        v = root.find("m:parent/m:version", ns)
    if v is None or not v.text:
        raise SystemExit(f"versions: no <version> in {path}")
    return v.text.strip()


def found(root: Path) -> dict[str, str]:
    """Each artifact's declared version, by where it is declared; absent artifacts are left out."""
    versions: dict[str, str | None] = {
        "Cargo.toml (module, crate, tool)": _match(
            root / "Cargo.toml", r'^\[workspace\.package\][^\[]*?^version = "([^"]+)"'),
        "clients/python/pyproject.toml": _match(
            root / "clients/python/pyproject.toml", r'^version = "([^"]+)"'),
        "clients/python/src/rlock_client/__init__.py": _match(
            root / "clients/python/src/rlock_client/__init__.py", r'^__version__ = "([^"]+)"'),
        "clients/node/src/index.ts": _match(
            root / "clients/node/src/index.ts", r'^export const VERSION = "([^"]+)"'),
    }
    for go in sorted((root / "clients/go").glob("*.go")) if (root / "clients/go").exists() else []:
        if not go.name.endswith("_test.go") and re.search(r'^\s*(const )?Version = "', go.read_text(), re.M):
            versions[str(go.relative_to(root))] = _match(go, r'^\s*(?:const )?Version = "([^"]+)"')
    pkg = root / "clients/node/package.json"
    if pkg.exists():
        versions["clients/node/package.json"] = json.loads(pkg.read_text())["version"]
        lock = root / "clients/node/package-lock.json"
        if lock.exists():
            versions["clients/node/package-lock.json"] = json.loads(lock.read_text())["version"]
    for pom in sorted((root / "clients/java").glob("**/pom.xml")) if (root / "clients/java").exists() else []:
        if "target" not in pom.parts:
            versions[str(pom.relative_to(root))] = _pom(pom)
    return {k: v for k, v in versions.items() if v is not None}


def drift(versions: dict[str, str]) -> list[str]:
    want = versions.get("Cargo.toml (module, crate, tool)")
    return [f"{where}: {v} (the workspace has {want})" for where, v in versions.items() if v != want]


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "Cargo.toml").write_text('[workspace]\n\n[workspace.package]\nversion = "9.1.0"\n')
        (root / "clients/node/src").mkdir(parents=True)
        (root / "clients/node/package.json").write_text('{"version": "9.1.0"}')
        (root / "clients/node/src/index.ts").write_text('export const VERSION = "9.0.0";\n')
        got = drift(found(root))
        if len(got) != 1 or "index.ts: 9.0.0" not in got[0]:
            print(f"versions self-test: a drifted index.ts was not caught: {got}")
            return 1
        (root / "clients/node/src/index.ts").write_text('export const VERSION = "9.1.0";\n')
        if drift(found(root)):
            print("versions self-test: agreeing versions reported as a drift")
            return 1
    print("versions self-test: 2 passed, 0 failed")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    versions = found(ROOT)
    if sys.argv[1:] == ["--print"]:
        print(versions["Cargo.toml (module, crate, tool)"])
        return 0
    for where, v in versions.items():
        print(f"versions: {v}  {where}")
    bad = drift(versions)
    for line in bad:
        print(f"versions: DRIFT {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
