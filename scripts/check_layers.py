#!/usr/bin/env python3
"""Checks that bert8's source tree depends one way, between layers and between modules.

1. Layers. Every `#include "..."` of a C file under src/ names a header by its path under src/
   ("base/common.h") or a public header of include/ ("bert8.h"). A folder may include only from
   the folders its row of ALLOWED lists; the front ends (tools/, server/, python/, examples/) may
   include only public headers and their own files.
2. Modules. A module is a file stem of src/: io/names.c and io/names.h are the module io/names.
   The files of one kernel's ISA variants belong to the kernel's module (qgemm_avx2.c,
   qgemm_scalar.c and the family's private qgemm_impl.h are kernels/gemm_s8/qgemm): twins of one
   kernel, not modules of their own. Module A depends on module B when a file of A includes a
   header of B, or when a file of A uses (calls, or takes the address of) a function or global
   variable that a .c file of B defines. Declarations are not uses, so a header that declares
   another file's functions adds no edge of its own. The dependencies between modules must have
   no cycle: each cycle is named with the include or the use behind each of its edges.

   A cycle listed in KNOWN_CYCLES (its modules exactly) is reported as known, with the reason it
   stays, and does not fail the check; a listed cycle that no longer exists fails it (take it off
   the list), so the list only shrinks.

Exit status 1 with one line per violation; 0 when clean.

    scripts/check_layers.py [--root DIR]    check the tree at DIR (default: this checkout)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# layer -> layers it may include (itself included). Lower layers first.
ALLOWED = {
    "base": {"base"},
    "io": {"base", "io"},
    "kernels": {"base", "kernels"},
    "quant": {"base", "io", "kernels", "quant"},
    "model": {"base", "io", "kernels", "quant", "model"},
    "calibrate": {"base", "io", "kernels", "quant", "model", "calibrate"},
    "tokenizer": {"base", "tokenizer"},
    "pipeline": {"base", "io", "pipeline"},
}
# public headers and which layers may use them ("*" = every layer)
PUBLIC = {"bert8.h": "*", "bert8_pipeline.h": {"pipeline"}}
FRONT_ENDS = ("tools", "server", "python", "examples")

# Module cycles that stay for now, each with why; keyed by the cycle's modules, exactly. None at
# present: every layer's modules depend one way.
KNOWN_CYCLES = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TOKEN = re.compile(r"[A-Za-z_]\w*|->|\S")
IDENT = re.compile(r"[A-Za-z_]\w*$")
ISA_SUFFIX = re.compile(r"_(scalar|avx2|avx512|avx512vnni|amx|dnnl|impl)$")


def sources(root, top):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def module_of(src, rel):
    """io/names.c -> io/names; kernels/gemm_s8/qgemm_avx2.c -> kernels/gemm_s8/qgemm."""
    stem = rel.rsplit(".", 1)[0].replace(os.sep, "/")
    base = ISA_SUFFIX.sub("", stem)
    if base != stem and any(os.path.exists(os.path.join(src, base + e)) for e in (".c", ".h")):
        return base
    return stem


def clean(text):
    """Comments, line continuations and string and character literals out."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = text.replace("\\\n", " ")
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def scan(text):
    """(global definitions, every definition, uses) of one C file. A definition is a function with
    a body or a variable at file scope (global unless static); a use is an identifier inside a
    function body, an initializer or a macro, not after `.` or `->`."""
    lines = clean(text).split("\n")
    macros = [l.split(None, 2)[2] for l in lines if re.match(r"\s*#\s*define\b", l) and len(l.split(None, 2)) > 2]
    code = "\n".join("" if re.match(r"\s*#", l) else l for l in lines)
    gdefs, defs, uses = set(), set(), set()

    def use(prev, tok):
        if prev not in (".", "->") and IDENT.match(tok):
            uses.add(tok)

    depth, stmt, prev, func = 0, [], "", False
    for tok in TOKEN.findall(code):
        if depth > 0:
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0 and func:
                    stmt = []
            else:
                use(prev, tok)
        elif tok == "{":
            head = stmt[: stmt.index("=")] if "=" in stmt else stmt
            func = "=" not in stmt and "(" in head
            if func:
                j = head.index("(")
                if j > 0 and IDENT.match(head[j - 1]):
                    defs.add(head[j - 1])
                    if "static" not in head:
                        gdefs.add(head[j - 1])
            depth = 1
        elif tok == ";":
            head = stmt[: stmt.index("=")] if "=" in stmt else stmt
            if stmt and stmt[0] not in ("typedef", "extern") and "(" not in head:
                if "[" in head:
                    head = head[: head.index("[")]
                ids = [x for x in head if IDENT.match(x)]
                if ids and (ids[0] not in ("struct", "enum", "union") or len(ids) > 2):
                    defs.add(ids[-1])
                    if "static" not in stmt:
                        gdefs.add(ids[-1])
            if "=" in stmt:
                init = stmt[stmt.index("=") + 1:]
                for a, b in zip(["="] + init, init):
                    use(a, b)
            stmt = []
        else:
            stmt.append(tok)
        prev = tok
    mtoks = TOKEN.findall(" ".join(macros))
    for a, b in zip([""] + mtoks, mtoks):
        use(a, b)
    return gdefs, defs, uses


def module_graph(src, texts):
    """{module: {module it depends on: why}} over the files of src/ (texts: rel path -> text)."""
    scans = {rel: scan(t) for rel, t in texts.items()}
    owner = {}
    for rel in sorted(scans):
        if rel.endswith(".c"):
            for name in scans[rel][0]:
                owner.setdefault(name, module_of(src, rel))
    graph = {}
    for rel in sorted(texts):
        m = module_of(src, rel)
        edges = graph.setdefault(m, {})
        for inc in INCLUDE.findall(texts[rel]):
            if os.path.exists(os.path.join(src, inc)):
                t = module_of(src, os.path.normpath(inc))
                if t != m:
                    edges.setdefault(t, f"{rel} includes {inc}")
        _, defs, uses = scans[rel]
        for name in sorted(uses - defs):
            t = owner.get(name)
            if t and t != m:
                edges.setdefault(t, f"{rel} uses {name}")
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    sys.setrecursionlimit(max(1000, 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def one_cycle(graph, comp):
    """A shortest cycle through the component's first module, as a list of modules."""
    members, start = set(comp), comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


def main(argv):
    root = ROOT
    if len(argv) == 2 and argv[0] == "--root":
        root = os.path.abspath(argv[1])
    elif argv:
        print(__doc__, file=sys.stderr)
        return 2
    errors, notes = [], []
    src = os.path.join(root, "src")
    texts = {}
    for path in sources(root, "src"):
        rel = os.path.relpath(path, src)
        layer = rel.split(os.sep)[0]
        if layer not in ALLOWED:
            errors.append(f"src/{rel}: folder '{layer}' has no row in the layer table")
            continue
        text = texts[rel] = open(path, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            if inc in PUBLIC:
                if not (PUBLIC[inc] == "*" or layer in PUBLIC[inc]):
                    errors.append(f"src/{rel}: includes public {inc}, which layer '{layer}' may not use")
                continue
            target = os.path.normpath(inc)
            if not os.path.exists(os.path.join(src, target)):
                errors.append(f"src/{rel}: includes \"{inc}\", not a header under src/ (name it by its path under src/)")
                continue
            tl = target.split(os.sep)[0]
            if tl not in ALLOWED[layer]:
                errors.append(f"src/{rel}: layer '{layer}' includes {inc} from layer '{tl}' (a back-edge)")
    for fe in FRONT_ENDS:
        top = os.path.join(root, fe)
        for path in sources(root, fe):
            rel = os.path.relpath(path, root)
            for inc in INCLUDE.findall(open(path, encoding="utf-8", errors="replace").read()):
                if inc in PUBLIC:
                    continue
                local = os.path.join(os.path.dirname(path), inc)
                if os.path.exists(local) and os.path.commonpath([os.path.abspath(local), top]) == top:
                    continue
                errors.append(f"{rel}: front end includes \"{inc}\"; it may use only the public headers and its own files")
    graph = module_graph(src, texts)
    found = set()
    for comp in cycles(graph):
        key = frozenset(comp)
        path = one_cycle(graph, comp)
        why = "; ".join(graph[a][b] for a, b in zip(path, path[1:]))
        line = f"module cycle: {' -> '.join(path)} ({why})"
        if len(comp) > len(path) - 1:
            line += f"; {len(comp)} modules in all: {', '.join(comp)}"
        if key in KNOWN_CYCLES:
            found.add(key)
            notes.append(f"known {line}\n    why it stays: {KNOWN_CYCLES[key]}")
        else:
            errors.append(line)
    for key in KNOWN_CYCLES:
        if key not in found:
            errors.append("KNOWN_CYCLES lists a cycle that no longer exists (take it off the list): "
                          + ", ".join(sorted(key)))
    for n in notes:
        print(n)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {len(texts)} files, {len(graph)} modules under src/, front ends {', '.join(FRONT_ENDS)}: "
          f"dependencies run one way ({len(notes)} known module cycle(s) above)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
