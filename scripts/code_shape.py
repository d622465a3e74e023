#!/usr/bin/env python3
"""The shape of the Rust sources: lines of code per file (inline `#[cfg(test)]` blocks, comments and
blank lines apart; a test-only file counts whole)
and the import circles between files (`use crate::...` / `use super::...` edges, a file being its
module). Prints a table and the circles; `--check MAX` exits 1 when a file has more than MAX
lines of code or any circle exists (tests/infra/test_code_shape.py runs it).

Run: python3 scripts/code_shape.py [--check 500] [--root DIR]"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if "--root" in sys.argv:
    ROOT = pathlib.Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
CRATES = {"crate": ROOT / "src", "core": ROOT / "src" / "core"}


def module_of(path: pathlib.Path, crate_root: pathlib.Path) -> tuple[str, ...]:
    rel = path.relative_to(crate_root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text: str) -> str:
    """Drops `#[cfg(test)]` items (a `mod tests { ... }` block, or a `mod x;` line)."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]":
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith(";"):
                i = j + 1
                continue
            depth, started = 0, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                started = started or "{" in lines[j]
                j += 1
                if started and depth <= 0:
                    break
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def code_lines(text: str) -> int:
    return sum(1 for l in strip_tests(text).split("\n") if l.strip() and not l.strip().startswith("//"))


def is_test(path: pathlib.Path) -> bool:
    """A test-only file: `x_tests.rs`, `tests.rs`, or anything in a `x_tests/` folder."""
    names = [path.name, *(p.name for p in path.parents)]
    return path.name == "tests.rs" or any(n.endswith("_tests") or n.endswith("_tests.rs") for n in names)


def files():
    """(path, crate name, module path, test-only) of every source file under src/."""
    for path in sorted((ROOT / "src").rglob("*.rs")):
        in_core = CRATES["core"] in path.parents
        crate_root = CRATES["core"] if in_core else CRATES["crate"]
        yield path, ("core" if in_core else "crate"), module_of(path, crate_root), is_test(path)


def edges(text: str, crate: str, module: tuple[str, ...], known: set):
    """Modules this file's `use` lines name (the longest known prefix of each path)."""
    body = strip_tests(text)
    uses = re.findall(r"\buse\s+([^;]+);", body) + re.findall(r"\b((?:crate|super)(?:::\w+)+)", body)
    for u in uses:
        for path in expand(u):
            segs = path.split("::")
            if segs[0] == "crate":
                base, segs = (), segs[1:]
                if crate == "crate" and segs[:1] == ["core"]:
                    crate_t, segs = "core", segs[1:]
                else:
                    crate_t = crate
            elif segs[0] == "super":
                base = module
                while segs and segs[0] == "super":
                    base, segs = base[:-1], segs[1:]
                crate_t = crate
            elif (crate, module + (segs[0],)) in known:
                # A path relative to this module names one of its children (`pub use child::*`).
                base, crate_t = module, crate
            else:
                continue
            full = base + tuple(s for s in segs if s != "*")
            target = full
            while target and (crate_t, target) not in known:
                target = target[:-1]
            item = full[len(target)] if len(full) > len(target) else ("*" if segs[-1:] == ["*"] else None)
            if (crate_t, target) in known and (crate_t, target) != (crate, module) and target:
                yield (crate_t, target, item)


def expand(use: str):
    """`a::{b, c::{d}}` -> a::b, a::c::d (self kept as the parent)."""
    use = re.sub(r"\s+", "", use)
    m = re.match(r"^(.*?)::\{(.*)\}$", use)
    if not m:
        yield re.sub(r"::self$", "", re.sub(r"\bas\w+$", "", use))
        return
    head, inner = m.groups()
    depth, cur, parts = 0, "", []
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    for p in parts:
        if p and p != "self":
            yield from expand(f"{head}::{p}")
        elif p == "self":
            yield head


def circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    limit = int(sys.argv[sys.argv.index("--check") + 1]) if "--check" in sys.argv else None
    every_file = list(files())
    # Test files count towards the size rule (one reason to change holds for them too) but are
    # no part of the module graph: they import their module's whole scope by design.
    sizes = sorted(((code_lines(p.read_text()), p.relative_to(ROOT)) for p, *_ in every_file), reverse=True)
    all_files = [(p, c, m) for p, c, m, test in every_file if not test]
    known = {(c, m) for _, c, m in all_files}
    graph = {}
    # `pub use child::Item` in a folder's mod.rs makes `crate::folder::Item` an import of the
    # child: resolve each imported item through re-exports, or a circle through a facade hides.
    reexports, defines = {}, {}
    for path, crate, module in all_files:
        text = strip_tests(path.read_text())
        defines[(crate, module)] = set(re.findall(
            r"\bpub(?:\([^)]*\))?\s+(?:async\s+)?(?:fn|struct|enum|const|static|type|trait|mod)\s+(\w+)", text))
        table = {}
        for u in re.findall(r"\bpub\s+use\s+([^;]+);", text):
            for crate_t, target, item in edges(f"use {u};", crate, module, known):
                name = item if item is not None else target[-1]
                table.setdefault(name, set()).add((crate_t, target))
        reexports[(crate, module)] = table

    def resolve(node, item, depth=0):
        table = reexports.get(node, {})
        if depth > 10 or item is None:
            return {node}
        if item in table:
            return set().union(*(resolve(t, item, depth + 1) for t in table[item]))
        if item in defines.get(node, ()) or "*" not in table:
            return {node}
        found = {t for t in table["*"] if item in defines.get(t, ()) or item in reexports.get(t, {})}
        return set().union(*(resolve(t, item, depth + 1) for t in found)) if found else {node}

    for path, crate, module in all_files:
        node = (crate, module)
        targets = set()
        for crate_t, target, item in edges(path.read_text(), crate, module, known):
            if crate_t == crate and target[: len(module)] == module and module:
                continue  # a folder module naming its own children declares, not imports
            if item == "*":
                targets.add((crate_t, target))
                continue
            targets |= resolve((crate_t, target), item)
        graph[node] = {t for t in targets if t != node}
    for n, p in sizes[:25]:
        print(f"{n:5d}  {p}")
    found = circles(graph)
    for comp in found:
        print("circle:", " <-> ".join(("core::" if c == "core" else "") + "::".join(m) for c, m in comp))
    if not found:
        print("no import circles")
    if limit is not None:
        over = [(n, p) for n, p in sizes if n > limit]
        for n, p in over:
            print(f"over {limit} lines of code: {p} ({n})")
        sys.exit(1 if over or found else 0)


if __name__ == "__main__":
    main()
