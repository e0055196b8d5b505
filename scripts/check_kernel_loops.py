#!/usr/bin/env python3
"""Checks the compiled SIMD kernels for register copies in their hot loops.

GCC 12 can keep a block of accumulators alive across a loop by copying every one of them to
another register on each iteration (it did in the INT8 GEMM's register-fused tiles, the INT8
attention's P.V loop and the peak loops). Zen 4 eliminates such moves; Ice Lake runs them on
the ports of vpdpbusd and FMA, and the kernels lost half their rate there. This script
disassembles the kernel objects of a Release build (objdump -d), finds every innermost loop
(a backward jump that encloses no other) with at least 4 product instructions (vpdpbusd, the
AVX2 kernels' vpmaddwd and vpmaddubsw, FMA), and fails when such a loop holds more
register-to-register vector moves than half its product count, or stores a vector register to
the stack (a spill). The AVX2 INT8 attention's loops had both until 7828527, unseen while only
vpdpbusd and FMA counted. The copying loops had two moves per
vpdpbusd; the epilogue loops (GELU polynomials, a few moves per row) stay far under half.

  scripts/check_kernel_loops.py [BUILD_DIR]      (default: build)
"""
import pathlib
import re
import shutil
import subprocess
import sys

ARITH = re.compile(r"(vpdpbusds?|vpmaddwd|vpmaddubsw|vfn?m(add|sub)\d+[ps]s)\b")
REGMOVE = re.compile(r"vmov(dqa|dqu|aps|ups|apd|upd)(32|64)?\s+%[xyz]mm\d+,%[xyz]mm\d+$")
SPILL = re.compile(r"vmov\w*\s+%[xyz]mm\d+,-?(0x[0-9a-f]+)?\(%r[sb]p\)")
JUMP = re.compile(r"j\w+\s+([0-9a-f]+)\b")


def functions(obj):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], check=True,
                         capture_output=True, text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*?)\s*$", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2)))
    return funcs


def innermost_loops(ins):
    loops = []
    for addr, txt in ins:
        m = JUMP.match(txt)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    for lo, hi in loops:
        if not any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in loops):
            yield lo, hi, [t for a, t in ins if lo <= a <= hi]


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build")
    if not shutil.which("objdump"):
        print("check_kernel_loops: objdump not found (binutils)", file=sys.stderr)
        return 2
    objs = sorted(build.glob("CMakeFiles/bert8_objects.dir/src/kernels/**/*.o"))
    if not objs:
        print(f"check_kernel_loops: no kernel objects under {build}", file=sys.stderr)
        return 2
    bad, checked = [], 0
    for obj in objs:
        for name, ins in functions(obj).items():
            for lo, hi, body in innermost_loops(ins):
                arith = sum(1 for t in body if ARITH.match(t))
                if arith < 4:
                    continue
                checked += 1
                moves = sum(1 for t in body if REGMOVE.match(t))
                spills = sum(1 for t in body if SPILL.match(t))
                if moves * 2 > arith or spills:
                    bad.append(f"{obj.name}: {name}, loop at {lo:#x}: {arith} products, "
                               f"{moves} register moves, {spills} vector stores to the stack")
    for b in bad:
        print("check_kernel_loops:", b, file=sys.stderr)
    if bad:
        return 1
    print(f"check_kernel_loops: {checked} hot loops in {len(objs)} kernel objects, "
          "no register copies or spills")
    return 0


if __name__ == "__main__":
    sys.exit(main())
