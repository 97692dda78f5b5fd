#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a cycle.

    scripts/import_cycles.py src client/src

Each argument is a crate's source root. A file's module path comes from where it lives
(src/store/mod.rs and src/store.rs are both `store`); an edge A -> B is any `crate::B...` path in
A, or `super::`/`self::` paths that resolve to B. A file that names `crate::b::c` depends on the
most specific file that exists (`b/c.rs`, else `b.rs` or `b/mod.rs`). Imports of a file's own
children (a parent declaring `mod child`) are not counted as edges back from the child, but a
child that reaches up into its parent is. Prints every cycle found (strongly connected
components of two or more files, and self-loops are ignored) and exits 1 if there is one.
"""

import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\};", re.S)
# Comments, raw strings, strings and char literals, found in one left-to-right pass, so that a
# `//` inside a string or a quote inside a comment is read as what it is. `re.S` lets `\\.` take
# a backslash-newline (a string continued on the next line): without it the match failed there
# and restarted at the string's closing quote, turning the code up to the next string into
# "string" and hiding its paths (how watchdog -> lossevents went unseen).
LITERAL = re.compile(
    r"""//[^\n]*|/\*.*?\*/|\bb?r(#*)".*?"\1|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])'""",
    re.S,
)


def strip_literals(text: str) -> str:
    """`text` without comments, and with every string and char literal emptied."""
    return LITERAL.sub(lambda m: "" if m.group(0).startswith("/") else '""', text)


def module_of(root: pathlib.Path, file: pathlib.Path) -> tuple:
    parts = list(file.relative_to(root).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def resolve(modules: set, base: tuple, names: list) -> tuple | None:
    """The most specific existing module for base + names."""
    path = list(base) + names
    while path:
        if tuple(path) in modules:
            return tuple(path)
        path.pop()
    return () if () in modules else None


def edges_of(root: pathlib.Path, file: pathlib.Path, modules: set) -> set:
    me = module_of(root, file)
    # A mod.rs/lib.rs file's `self` is its own module; a plain file's too.
    text = strip_literals(file.read_text())
    targets = set()

    def add(anchor: str, rest: list):
        if anchor == "crate":
            base = ()
        elif anchor == "self":
            base = me
        else:
            base = me[:-1]
            while rest and rest[0] == "super":
                rest = rest[1:]
                base = base[:-1]
        target = resolve(modules, base, rest)
        if target is not None:
            targets.add(target)

    for anchor, group in USE_GROUP.findall(text):
        for item in re.split(r",(?![^{]*\})", group):
            item = item.strip()
            if not item:
                continue
            head = re.split(r"::\{|\s+as\s+", item)[0]
            names = [n for n in head.split("::") if n and n != "self" and n != "*"]
            add(anchor, names)
    for anchor, rest in PATH.findall(text):
        if rest == "::{":
            continue
        add(anchor, [n for n in rest.split("::") if n])
    targets.discard(me)
    # A parent names its children (`mod x; pub use x::Y`); that is not an upward import.
    return {t for t in targets if not (len(t) > len(me) and t[: len(me)] == me)}


def cycles(graph: dict) -> list:
    """Tarjan's strongly connected components of size two or more."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def name(module: tuple) -> str:
    return "::".join(module) or "crate root"


def check(root: pathlib.Path) -> list:
    files = sorted(root.rglob("*.rs"))
    modules = {module_of(root, f) for f in files}
    graph = {module_of(root, f): edges_of(root, f, modules) for f in files}
    problems = []
    for component in cycles(graph):
        members = set(component)
        lines = [f"{root}: import cycle between {len(component)} files:"]
        for m in component:
            into = sorted(name(t) for t in graph[m] if t in members)
            lines.append(f"  {name(m)} -> {', '.join(into)}")
        problems.append("\n".join(lines))
    return problems


def self_test() -> int:
    """The check finds a planted cycle and passes a tree without one."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "store").mkdir()
        (root / "lib.rs").write_text("mod store; mod handoff; use crate::handoff::serve;\n")
        (root / "handoff.rs").write_text("use crate::store::lock::LockKey; // crate::events\n")
        (root / "store" / "mod.rs").write_text("pub mod lock;\n")
        (root / "store" / "lock.rs").write_text('use super::super::config; const S: &str = "crate::handoff";\n')
        (root / "config.rs").write_text("\n")
        clean = check(root)
        (root / "store" / "lock.rs").write_text("use crate::{config, handoff::serve};\n")
        cyclic = check(root)
        # The same cycle, its path after a string continued with a backslash-newline and
        # before another string: the edge must still be seen.
        (root / "store" / "lock.rs").write_text("pub fn x() {}\n")
        (root / "handoff.rs").write_text(
            'const M: &str = "a \\\n b";\nfn f() { crate::store::lock::x(); }\n'
            "const N: &str = \"n\"; const C: char = '\"'; // \"crate::config\n"
        )
        clean_again = check(root)
        (root / "store" / "lock.rs").write_text("use crate::handoff;\npub fn x() {}\n")
        continued = check(root)
    ok = (
        clean == []
        and len(cyclic) == 1
        and "handoff -> store::lock" in cyclic[0]
        and clean_again == []
        and len(continued) == 1
        and "handoff -> store::lock" in continued[0]
    )
    print(f"import cycle check self-test: {1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


def main(roots: list) -> int:
    if roots == ["--self-test"]:
        return self_test()
    problems = []
    for root in roots:
        problems += check(pathlib.Path(root))
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"no import cycles in {', '.join(roots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["src"]))
