#!/usr/bin/env python3
"""scripts/check_layers.py on copies of src/ with a cycle planted in them: an include cycle and a
call cycle between two modules of one layer, a back-edge between layers and a stale entry of
KNOWN_CYCLES each fail the check, which names what it found; a listed cycle is reported as known
and passes; a declaration of another file's function is no use of it; the tree as it is passes.
The KNOWN_CYCLES cases run a copy of the script with an entry planted in its list, so they hold
whatever the real list holds (it may be empty)."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check_layers.py")
failed = 0


def run(root, check=CHECK):
    p = subprocess.run([sys.executable, check, "--root", root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def script_knowing(root, modules):
    """A copy of the check under root/scripts whose KNOWN_CYCLES also lists `modules`."""
    text = open(CHECK).read()
    mark = "KNOWN_CYCLES = {"
    assert mark in text, "check_layers.py has no KNOWN_CYCLES dict"
    entry = "\n    frozenset({" + ", ".join(repr(m) for m in modules) + "}): \"planted by the test\","
    os.makedirs(os.path.join(root, "scripts"), exist_ok=True)
    path = os.path.join(root, "scripts", "check_layers.py")
    open(path, "w").write(text.replace(mark, mark + entry, 1))
    return path


def tree():
    d = tempfile.mkdtemp(prefix="b8layers_")
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(d, "src"))
    return d


def append(root, rel, text):
    with open(os.path.join(root, "src", rel), "a") as f:
        f.write(text)


def cycle_lines(out):
    return [l for l in out.splitlines() if l.startswith("module cycle:")]


def names_cycle(out, modules, why):
    """A failing cycle line holds every module of `modules` and every reason of `why`."""
    return any(all(m in l for m in modules) and all(w in l for w in why) for l in cycle_lines(out))


def check(name, cond, out):
    global failed
    print(("ok   " if cond else "FAIL ") + name)
    if not cond:
        failed += 1
        print("  output:\n" + out)


d = tree()
try:
    rc, out = run(d)
    check("the_tree_as_it_is_passes", rc == 0 and "dependencies run one way" in out, out)

    shutil.rmtree(d)
    d = tree()  # names.c includes arch.h, which includes layer.h: layer.h including names.h closes a loop
    append(d, "io/layer.h", '\n#include "io/names.h"\n')
    rc, out = run(d)
    check("an_include_cycle_between_modules_fails_and_is_named",
          rc == 1 and names_cycle(out, ["io/layer", "io/names", "io/arch"],
                                  ["io/layer.h includes io/names.h", "io/names.c includes io/arch.h"]), out)

    shutil.rmtree(d)
    d = tree()  # layer.c calls a function of names.c (declared here, no include): a call cycle
    append(d, "io/layer.c", '\nvoid b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, '
                            'char *out, size_t cap);\n'
                            'void b8_planted(char *o, size_t n) { b8_part_name(BERT8_ARCH_BERT, "", 0, B8_PART_Q, o, n); }\n')
    rc, out = run(d)
    check("a_call_cycle_between_modules_fails_and_names_the_call",
          rc == 1 and names_cycle(out, ["io/layer", "io/names"], ["io/layer.c uses b8_part_name"]), out)

    shutil.rmtree(d)
    d = tree()  # a cycle through three modules of another layer
    append(d, "calibrate/units.c", '\nvoid b8_planted(void) { b8_quant_resolve(0, 0); }\n')
    rc, out = run(d)
    check("a_longer_call_cycle_fails",
          rc == 1 and names_cycle(out, ["calibrate/units", "calibrate/smoothquant"],
                                  ["calibrate/units.c uses b8_quant_resolve"]), out)

    shutil.rmtree(d)
    d = tree()  # a declaration is not a use: no edge, no cycle
    append(d, "io/layer.h", "\nvoid b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, "
                            "char *out, size_t cap);\n")
    rc, out = run(d)
    check("a_declaration_alone_is_no_dependency", rc == 0, out)

    shutil.rmtree(d)
    d = tree()
    append(d, "io/layer.h", '\n#include "model/model.h"\n')
    rc, out = run(d)
    check("a_back_edge_between_layers_fails",
          rc == 1 and "layer 'io' includes model/model.h from layer 'model' (a back-edge)" in out, out)

    shutil.rmtree(d)
    d = tree()  # the include cycle above, listed as known: reported with its reason, and no failure
    append(d, "io/layer.h", '\n#include "io/names.h"\n')
    rc, out = run(d, script_knowing(d, ["io/arch", "io/layer", "io/names"]))
    check("a_listed_cycle_is_reported_as_known_and_passes",
          rc == 0 and "known module cycle:" in out and "why it stays: planted by the test" in out, out)

    shutil.rmtree(d)
    d = tree()  # a listed cycle that the tree does not have
    rc, out = run(d, script_knowing(d, ["io/arch", "io/layer", "io/names"]))
    check("a_known_cycle_that_is_gone_must_leave_the_list",
          rc == 1 and "KNOWN_CYCLES lists a cycle that no longer exists (take it off the list): "
          "io/arch, io/layer, io/names" in out, out)
finally:
    shutil.rmtree(d, ignore_errors=True)

print(f"{8 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
