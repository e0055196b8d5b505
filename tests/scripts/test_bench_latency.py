#!/usr/bin/env python3
"""build/bench_latency's p99: from fewer than 10,000 calls it gives none and says what the
nearest-rank value is (where the slowest K calls start: the ceil(0.99 n)-th of n, K = n - that + 1);
with --p99 it makes 10,000 calls and the p99 is
the nearest-rank 99th percentile of the call times it lists.

    test_bench_latency.py BENCH_LATENCY MODEL_DIR"""
import json
import math
import re
import subprocess
import sys

BIN, MODEL = sys.argv[1], sys.argv[2]
failed = 0


def run(*args):
    p = subprocess.run([BIN, MODEL, "--seq", "8", "--threads", "1", "--budget", "0", *args], capture_output=True,
                       text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global failed
    print(("ok   " if cond else "FAIL ") + name)
    if not cond:
        failed += 1
        print("  " + detail[:2000])


rc, out, err = run("--min-iters", "50", "--json")
j = json.loads(out) if rc == 0 else {}
check("fifty_calls_give_no_p99_but_name_the_tail",
      rc == 0 and j["iterations"] == 50 and j["p99_s"] is None and j["p99_min_calls"] == 10000 and
      j["tail_1pct_rank"] == 1 and abs(j["tail_1pct_s"] - max(j["times_s"])) < 1e-9,
      out + err)
rc, out, err = run("--min-iters", "300")
check("the_text_line_says_what_it_is",
      rc == 0 and "p99 n/a (300 calls, fewer than 10000: the slowest 4 start at " in out and not re.search(r"p99 [0-9]", out), out + err)
rc, out, err = run("--p99", "--json")
j = json.loads(out) if rc == 0 else {}
t = sorted(j.get("times_s", []))
check("p99_makes_ten_thousand_calls_and_gives_the_nearest_rank_p99",
      rc == 0 and j["iterations"] == 10000 and len(t) == 10000 and j["p99_s"] is not None and
      abs(j["p99_s"] - t[math.ceil(0.99 * len(t)) - 1]) < 1e-9 and j["tail_1pct_rank"] == 101, out[:500] + err)
rc, out, err = run("--min-iters", "10", "--max-iters", "5")
check("min_iters_above_max_iters_is_refused", rc == 2 and "--min-iters" in err, err)
print(f"{4 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
