#!/usr/bin/env python3
"""Checks that bert8's source tree depends one way.

Every `#include "..."` of a C file under src/ names a header by its path under src/
("base/common.h") or a public header of include/ ("bert8.h"). A folder may include only
from the folders its row of ALLOWED lists; the front ends (tools/, server/, python/,
examples/) may include only public headers and their own files. The check also fails on an
include cycle between files. Exit status 1 with one line per violation; 0 when clean.
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

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(top):
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def main():
    errors = []
    graph = {}
    src = os.path.join(ROOT, "src")
    for path in sources("src"):
        rel = os.path.relpath(path, src)
        layer = rel.split(os.sep)[0]
        if layer not in ALLOWED:
            errors.append(f"src/{rel}: folder '{layer}' has no row in the layer table")
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        deps = graph.setdefault(rel, set())
        for inc in INCLUDE.findall(text):
            if inc in PUBLIC:
                ok = PUBLIC[inc] == "*" or layer in PUBLIC[inc]
                if not ok:
                    errors.append(f"src/{rel}: includes public {inc}, which layer '{layer}' may not use")
                continue
            target = os.path.normpath(inc)
            if not os.path.exists(os.path.join(src, target)):
                errors.append(f"src/{rel}: includes \"{inc}\", not a header under src/ (name it by its path under src/)")
                continue
            tl = target.split(os.sep)[0]
            if tl not in ALLOWED[layer]:
                errors.append(f"src/{rel}: layer '{layer}' includes {inc} from layer '{tl}' (a back-edge)")
            deps.add(target)
    for fe in FRONT_ENDS:
        for path in sources(fe):
            rel = os.path.relpath(path, ROOT)
            text = open(path, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                if inc in PUBLIC:
                    continue
                local = os.path.join(os.path.dirname(path), inc)
                if os.path.exists(local) and os.path.commonpath([os.path.abspath(local), os.path.join(ROOT, fe)]) == os.path.join(ROOT, fe):
                    continue
                errors.append(f"{rel}: front end includes \"{inc}\"; it may use only the public headers and its own files")
    # include cycles between files of src/
    state = {}

    def visit(n, stack):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                errors.append("include cycle: " + " -> ".join(cyc))
            elif not state.get(m):
                visit(m, stack)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n, [])
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"check_layers: {len(graph)} files under src/, front ends {', '.join(FRONT_ENDS)}: dependencies run one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
