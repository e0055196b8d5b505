"""Driver of the peer benchmark: prepares the models, runs every system in a fresh process,
interleaved over rounds, and writes the raw JSON, the Markdown table and the plot.

Normally started by run.sh (which makes the venv first); see README.md.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import report  # noqa: E402
from runner import NEEDS, SYSTEMS  # noqa: E402

PY = sys.executable
HERE = common.HERE

BERT8_UNITS = {  # run unit -> scheme of the CLI run (--attention int8 for "-att8", --weight-bits 7 for "-w7")
    "bert8-static": "static",
    "bert8-dynamic": "dynamic",
    "bert8-static-att8": "static",
    "bert8-dynamic-att8": "dynamic",
    "bert8-static-att8-w7": "static",
    "bert8-dynamic-att8-w7": "dynamic",
}
ALL_UNITS = list(SYSTEMS) + list(BERT8_UNITS)

# preparation step -> (files it makes, relative to the artifacts dir; steps it needs)
STEPS = {
    "calib": (["calib.npz", "calib.txt"], []),
    "onnx": (["model.onnx"], []),
    "ort-opt": (["model.opt.onnx"], ["onnx"]),
    "ort-dyn": (["ort.int8dyn.onnx"], ["ort-opt"]),
    "ort-static": (["ort.int8qdq.onnx"], ["onnx", "calib"]),
    "ov": (["ov.fp32.xml"], ["onnx"]),
    "nncf": (["ov.int8.xml"], ["ov", "calib"]),
    "torchao-sq-static": (["torchao.sq-static.pt"], ["calib"]),
    "torchao-sq-dynamic": (["torchao.sq-dynamic.pt"], ["calib"]),
    "gguf-f32": (["model.f32.gguf"], []),
    "gguf-q8": (["model.q8_0.gguf"], []),
    "ct2-fp32": (["ct2.fp32/model.bin"], []),
    "ct2-int8": (["ct2.int8/model.bin"], []),
    "ct2-int8-sq": (["ct2.int8-sq/model.bin"], ["calib"]),
    "fastembed": (["fastembed/model.int8.onnx"], ["onnx"]),
    "bert8-int8": (["bert8.int8/quantization_config.json"], ["calib"]),
}
# the bert8 unit whose latency columns (BxS) run `bench_latency` on the folder `bert8 quantize` writes
LATENCY_UNIT = "bert8-static-att8"

DOCUMENTED_PEAKS = {"fp32_gflops_per_core": 117.0, "int8_gops_per_core": 468.0}


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, flush=True)


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def run_proc(cmd, timeout, env=None):
    """Runs cmd; returns (rc, stdout, stderr, seconds). rc None on timeout."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err, time.time() - t0


def tail_reason(stderr, n=2):
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and "_pytree.py" not in ln
             and not ln.startswith("Failed to load")]
    return " / ".join(lines[-n:])[:400] if lines else "no output"


def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    return env


# ---- machine and versions ------------------------------------------------------------------------

def machine_info(bert8):
    info = {"platform": platform.platform(), "python": platform.python_version(), "nproc": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
                             "L2 cache", "L3 cache", "CPU max MHz"):
                info[k.strip()] = v.strip()
            if k.strip() == "Flags":
                flags = v.split()
                interest = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                            "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"]
                info["flags_of_interest"] = {f: (f in flags) for f in interest}
    except OSError as e:
        info["lscpu"] = f"not available: {e}"
    try:
        info["load_average_at_start"] = os.getloadavg()
    except OSError:
        pass
    try:
        info["repo_commit"] = subprocess.run(["git", "-C", common.REPO, "rev-parse", "HEAD"], capture_output=True,
                                             text=True).stdout.strip()
        info["repo_dirty"] = bool(subprocess.run(["git", "-C", common.REPO, "status", "--porcelain",
                                                  "--untracked-files=no"], capture_output=True,
                                                 text=True).stdout.strip())
    except OSError:
        pass
    info["bert8_binary"] = bert8
    return info


def package_versions():
    def of(py, pkgs):
        code = ("import importlib.metadata as m, json\n"
                "out = {}\n"
                f"for p in {pkgs!r}:\n"
                "    try: out[p] = m.version(p)\n"
                "    except Exception as e: out[p] = 'not installed'\n"
                "print(json.dumps(out))\n")
        rc, out, err, _ = run_proc([py, "-c", code], 120)
        return last_json_line(out) or {"error": tail_reason(err)}

    v = of(PY, ['torch', 'torchao', 'transformers', 'onnx', 'onnxruntime', 'onnxscript', 'openvino', 'nncf',
                'ctranslate2', 'numpy', 'matplotlib', 'tokenizers', 'sentencepiece'])
    for fam, pkgs in (("llamacpp", ["llama_cpp_python"]), ("fastembed", ["fastembed", "onnxruntime"])):
        py = common.family_python(fam, PY)
        for k, x in (of(py, pkgs) if py else {p: "not installed" for p in pkgs}).items():
            v[f"{k} ({common.FAMILY_VENV[fam]})"] = x
    return v


def _install_failures():
    path = os.path.join(common.WORK, "install-failures.txt")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip()]


def peaks(bert8, peaks_file, threads):
    """Per-core peaks: --peaks FILE, else `bert8 bench --roofline --json`, else the documented values."""
    if peaks_file:
        with open(peaks_file) as f:
            d = json.load(f)
        out = {"fp32_gflops_per_core": float(d["fp32_gflops_per_core"]),
               "int8_gops_per_core": float(d["int8_gops_per_core"]), "source": f"--peaks {peaks_file}"}
        if d.get("int8_instruction"):  # vpdpbusd, vpmaddwd (AVX2 without VNNI) or AMX tdpbssd
            out["int8_instruction"] = d["int8_instruction"]
        return out
    why = "bert8 binary not found"
    if bert8 and os.path.exists(bert8):
        rc, out, err, _ = run_proc([bert8, "bench", "--roofline", "--json", "--threads", str(threads)], 300,
                                   env=thread_env(threads))
        d = last_json_line(out) if rc == 0 else None
        if d:
            # the agreed keys first, then any per-core key that names the precision
            f = "fp32_gflops_per_core" if "fp32_gflops_per_core" in d else _find_key(d, ("fp32",), ("per_core",))
            q = "int8_gops_per_core" if "int8_gops_per_core" in d else \
                _find_key(d, ("int8", "vnni", "vpdpbusd"), ("per_core",))
            if f and q:
                return {"fp32_gflops_per_core": float(d[f]), "int8_gops_per_core": float(d[q]),
                        "source": f"measured by `bert8 bench --roofline --json` ({f}, {q})", "raw": d}
            why = f"`bert8 bench --roofline --json` printed no per-core peak keys: {json.dumps(d)[:200]}"
        else:
            why = f"`bert8 bench --roofline --json` not available in this build ({tail_reason(err + out, 1)})"
    return dict(DOCUMENTED_PEAKS, source=f"documented, not measured in this run ({why})")


def _find_key(d, any_of, all_of):
    for k, v in d.items():
        kl = k.lower()
        if isinstance(v, (int, float)) and any(s in kl for s in any_of) and all(s in kl for s in all_of):
            return k
    return None


# ---- preparation ---------------------------------------------------------------------------------

def prepare_model(a, model, units, want_mix):
    """Makes the checkpoint and every artifact the selected units need. Returns {step: status}."""
    art = common.artifacts_dir(model, a.seq, a.calib_n)
    os.makedirs(art, exist_ok=True)
    status_path = os.path.join(art, "status.json")
    old = {}
    if os.path.exists(status_path):
        with open(status_path) as f:
            old = json.load(f)
    status = {}

    def run_step(step, files, needs):
        for n in needs:
            if not status.get(n, {}).get("ok"):
                status[step] = {"ok": False, "reason": f"needs step '{n}', which failed: "
                                                       f"{status.get(n, {}).get('reason', 'not run')}"}
                return
        if files and all(os.path.exists(os.path.join(art, f)) for f in files) and not a.rebuild \
                and old.get(step, {}).get("ok"):
            status[step] = dict(old[step], cached=True)
            return
        log(f"prepare {model}: {step}")
        cmd = [PY, os.path.join(HERE, "prepare.py"), step, "--model", model, "--seq", str(a.seq),
               "--calib-n", str(a.calib_n), "--threads", str(a.threads)]
        env = thread_env(a.threads)
        env["BERT8"] = a.bert8 or ""
        rc, out, err, secs = run_proc(cmd, a.prepare_timeout, env=env)
        r = last_json_line(out)
        if rc is None:
            r = {"ok": False, "reason": f"timed out after {a.prepare_timeout} s"}
        elif not r:
            r = {"ok": False, "reason": f"exit code {rc}: {tail_reason(err)}"}
        r["seconds"] = round(secs, 1)
        status[step] = r
        if not r["ok"]:
            log(f"  FAILED: {r['reason']}")

    run_step("checkpoint", None, [])
    if not status["checkpoint"]["ok"]:
        return status
    if want_mix and not os.path.exists(common.lengthmix_path()):
        run_step("lengthmix", None, ["checkpoint"])
    else:
        status["lengthmix"] = {"ok": os.path.exists(common.lengthmix_path()) or not want_mix, "cached": True}
    wanted = set()

    def want(step):
        for n in STEPS[step][1]:
            want(n)
        wanted.add(step)

    want("calib")
    for u in units:
        if u in NEEDS:
            want(NEEDS[u])
    if LATENCY_UNIT in units and any(common.parse_shape(s, a.seq)[1] != a.seq for s in a.shapes if s != "mix"):
        want("bert8-int8")
    for step in STEPS:  # dict order is a valid dependency order
        if step in wanted:
            run_step(step, *STEPS[step])
    with open(status_path, "w") as f:  # keeps the entries of steps this run did not need
        json.dump({**old, **status}, f, indent=1)
    return status


# ---- one timed run -------------------------------------------------------------------------------

def run_peer(a, model, unit, shape, status):
    need = NEEDS.get(unit)
    if need and not status.get(need, {}).get("ok"):
        return [{"system": unit, "ok": False,
                 "reason": f"preparation '{need}' failed: {status.get(need, {}).get('reason', 'not run')}"}]
    if shape == "mix" and not status.get("lengthmix", {}).get("ok"):
        return [{"system": unit, "ok": False, "reason": "length mix data missing"}]
    family = SYSTEMS[unit][0]
    py = common.family_python(family, PY)
    if py is None:
        why = [f for f in _install_failures() if family in f.lower() or family.replace("cpp", "-cpp") in f.lower()]
        return [{"system": unit, "ok": False, "reason": f"{common.FAMILY_VENV[family]} not installed"
                 + (f": {why[0]}" if why else " (run.sh makes it)")}]
    cmd = [py, os.path.join(HERE, "runner.py"), "--system", unit, "--model", model, "--shape", str(shape),
           "--seq", str(a.seq), "--threads", str(a.threads), "--calib-n", str(a.calib_n),
           "--warmup", str(a.warmup), "--budget", str(a.budget), "--min-iters", str(a.min_iters),
           "--mix-batch", str(a.mix_batch)]
    if is_latency(a, shape):
        cmd += ["--max-iters", str(a.latency_iters)]
    rc, out, err, secs = run_proc(cmd, a.run_timeout, env=thread_env(a.threads))
    r = last_json_line(out)
    if rc is None:
        r = {"ok": False, "reason": f"timed out after {a.run_timeout} s"}
    elif not r:
        r = {"ok": False, "reason": f"exit code {rc}: {tail_reason(err)}"}
    r["system"] = unit
    r["process_s"] = round(secs, 1)
    r["command"] = " ".join(shlex.quote(c) for c in cmd)
    return [r]


def is_latency(a, shape):
    """A BxS column (not at --seq): a short-query column with p50/p99 latency."""
    return shape != "mix" and common.parse_shape(shape, a.seq)[1] != a.seq


def run_bert8_latency(a, model, unit, shape, status):
    """The latency columns: `bench_latency` (the runners' timing rule, every call time kept) on the
    FP32 checkpoint and on the folder `bert8 quantize` wrote with its defaults (static, INT8 attention)."""
    B, S = common.parse_shape(shape, a.seq)
    exe = os.path.join(os.path.dirname(a.bert8 or ""), "bench_latency")
    art = common.artifacts_dir(model, a.seq, a.calib_n)
    recs = []
    # the INT8 folder twice: as it runs by default, and with OMP_WAIT_POLICY=passive (GOMP's default
    # spin-then-sleep wait can stall a 2-thread call for hundreds of ms when another process holds a core)
    for name, d, need in (("bert8-fp32@static-att8", common.model_dir(model), None),
                          ("bert8-int8-static-att8", os.path.join(art, "bert8.int8"), "bert8-int8"),
                          ("bert8-int8-static-att8-passive", os.path.join(art, "bert8.int8"), "bert8-int8")):
        if not os.path.exists(exe):
            recs.append({"system": name, "ok": False, "reason": f"{exe} not built (cmake --build build)"})
            continue
        if need and not status.get(need, {}).get("ok"):
            recs.append({"system": name, "ok": False, "reason": f"preparation '{need}' failed: "
                                                                 f"{status.get(need, {}).get('reason', 'not run')}"})
            continue
        cmd = [exe, d, "--batch", str(B), "--seq", str(S), "--threads", str(a.threads), "--warmup", str(a.warmup),
               "--budget", str(a.budget), "--min-iters", str(a.min_iters), "--max-iters", str(a.latency_iters),
               "--json"]
        env = thread_env(a.threads)
        if name.endswith("-passive"):
            env["OMP_WAIT_POLICY"] = "passive"
        rc, out, err, secs = run_proc(cmd, a.run_timeout, env=env)
        d = last_json_line(out) if rc == 0 else None
        r = dict(d, ok=True) if d else {"ok": False, "reason": f"exit code {rc}: {tail_reason(err + out)}"}
        if d and d.get("times_s"):
            # the peers' rule (common.summarize: nearest rank over every call kept); bench_latency
            # itself gives a p99 only from 10,000 calls and null below
            r["p99_s"] = common.percentile(d["times_s"], 99)
        r.update(system=name, process_s=round(secs, 1), command=" ".join(shlex.quote(c) for c in cmd))
        recs.append(r)
    return recs


def run_bert8(a, model, unit, shape, status):
    if unit == LATENCY_UNIT and is_latency(a, shape):
        return run_bert8_latency(a, model, unit, shape, status)
    scheme = BERT8_UNITS[unit]
    w7 = unit.endswith("-w7")
    att8 = unit.endswith("-att8") or unit.endswith("-att8-w7")
    tag = scheme + ("-att8" if att8 else "") + ("-w7" if w7 else "")
    names = {"fp32": f"bert8-fp32@{tag}", "int8": f"bert8-int8-{tag}"}
    if unit == "bert8-static":
        names["fp32"] = "bert8-fp32"

    def fail(reason):
        return [{"system": n, "ok": False, "reason": reason} for n in names.values()]

    if not a.bert8 or not os.path.exists(a.bert8):
        return fail(f"bert8 binary not found at {a.bert8} (build: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "
                    f"&& cmake --build build -j)")
    if not status.get("calib", {}).get("ok"):
        return fail(f"calibration text missing: {status.get('calib', {}).get('reason')}")
    art = common.artifacts_dir(model, a.seq, a.calib_n)
    cmd = [a.bert8, "bench", common.model_dir(model)]
    if shape == "mix":
        cmd += ["--lengths", common.lengthmix_path().replace(".json", ".lengths.txt"), "--batch", str(a.mix_batch)]
    else:
        B, S = common.parse_shape(shape, a.seq)
        cmd += ["--batch", str(B), "--seq", str(S)]
    cmd += ["--threads", str(a.threads), "--scheme", scheme, "--json", "--calib", os.path.join(art, "calib.txt"),
            "--samples", str(a.calib_n)]
    # explicit either way: bert8's default attention changed (FP32 until 2026-12-01, INT8 since)
    cmd += ["--attention", "int8" if att8 else "fp32"]
    if w7:
        cmd += ["--weight-bits", "7"]
    if a.bert8_iters:
        cmd += ["--iters", str(a.bert8_iters)]
    rc, out, err, secs = run_proc(cmd, a.run_timeout, env=thread_env(a.threads))
    command = " ".join(shlex.quote(c) for c in cmd)
    if rc is None:
        return fail(f"timed out after {a.run_timeout} s")
    d = last_json_line(out) if rc == 0 else None
    if not d:
        said = err + out
        if shape == "mix" and re.search(r"(unknown|unrecognized|invalid) (argument|option)", said) and (
                "--lengths" in said or os.path.basename(cmd[4]) in said):
            return fail("bert8 --lengths not available in this build")
        return fail(f"exit code {rc}: {tail_reason(err + out)}")
    recs = []
    for prec, name in names.items():
        key = f"{prec}_seq_per_s"
        r = {"system": name, "ok": key in d, "seq_per_s": d.get(key), "process_s": round(secs, 1),
             "command": command, "bert8_json": d}
        if not r["ok"]:
            r["reason"] = f"bert8 JSON has no {key}"
        recs.append(r)
        if shape == "mix":
            pk = f"{prec}_padded_seq_per_s"
            recs.append({"system": name + "-padded", "ok": pk in d, "seq_per_s": d.get(pk),
                         "reason": None if pk in d else f"bert8 JSON has no {pk}", "command": command})
    return recs


# ---- main ----------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default="bert-base,distilbert-base,xlmr-base")
    p.add_argument("--batches", default="1,8,32",
                   help="columns: B (batch B at --seq) or BxS (batch B at S tokens, with p50/p99 latency), "
                        "e.g. 1x16,1,8,32")
    p.add_argument("--latency-iters", type=int, default=2000,
                   help="most calls per process in the BxS columns (more calls, a steadier p99)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--systems", default=",".join(ALL_UNITS), help="comma list of " + ", ".join(ALL_UNITS))
    p.add_argument("--no-mix", action="store_true", help="skip the SST-2 length-mix column")
    p.add_argument("--mix-batch", type=int, default=8)
    p.add_argument("--calib-n", type=int, default=256, help="calibration sentences (SST-2 train90, first N)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--budget", type=float, default=10.0, help="timed seconds per process (after --min-iters)")
    p.add_argument("--min-iters", type=int, default=5)
    p.add_argument("--bert8", default=os.path.join(common.REPO, "build", "bert8"))
    p.add_argument("--bert8-iters", type=int, default=0, help="pass --iters to bert8 bench (0: its default)")
    p.add_argument("--peaks", help='JSON {"fp32_gflops_per_core":..., "int8_gops_per_core":...}')
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="", help="file name tag (default: date and time)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: tiny 2-layer models, batches 1,8, 1 round, short timing")
    p.add_argument("--rebuild", action="store_true", help="redo the preparation steps even if cached")
    p.add_argument("--no-check", action="store_true",
                   help="skip the check that the FP32 systems give the same last_hidden_state as PyTorch")
    p.add_argument("--prepare-only", action="store_true",
                   help="make the checkpoints and every peer's converted/quantized model, time nothing")
    p.add_argument("--prepare-timeout", type=int, default=3600)
    p.add_argument("--run-timeout", type=int, default=3600)
    p.add_argument("--command-line", default="", help="the command as typed (run.sh passes it)")
    a = p.parse_args()
    if a.quick:
        a.models = ",".join("tiny-" + m.replace("-base", "") if not m.startswith("tiny-") else m
                            for m in a.models.split(","))
        if a.batches == "1,8,32":
            a.batches = "1,8"
        a.rounds = 1 if a.rounds == 3 else a.rounds
        a.calib_n = min(a.calib_n, 32)
        a.warmup, a.budget, a.min_iters = 1, 0.5, 2
        a.bert8_iters = a.bert8_iters or 3
        a.run_timeout = min(a.run_timeout, 900)
    models = []
    for m in (m for m in a.models.split(",") if m):
        try:
            models.append(common.check_model(m))
        except ValueError as e:
            p.error(str(e))
    units = [u for u in a.systems.split(",") if u]
    for u in units:
        if u not in ALL_UNITS:
            p.error(f"unknown system {u}; known: {', '.join(ALL_UNITS)}")
    shapes = [b for b in a.batches.split(",") if b] + ([] if a.no_mix else ["mix"])
    for b in shapes:
        try:
            common.parse_shape(b, a.seq)
        except ValueError:
            p.error(f"--batches: {b} is neither B nor BxS")
    a.shapes = shapes
    a.bert8 = os.path.abspath(a.bert8) if a.bert8 else a.bert8
    tag = a.tag or datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if a.quick else "")
    os.makedirs(a.out, exist_ok=True)

    res = {
        "tag": tag,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": a.command_line or " ".join(shlex.quote(c) for c in sys.argv),
        "argv": sys.argv,
        "settings": {k: v for k, v in vars(a).items() if k != "command_line"},
        "machine": machine_info(a.bert8),
        "versions": package_versions(),
        "install_failures": _install_failures(),
        "peaks": peaks(a.bert8, a.peaks, a.threads),
        "models": {},
        "systems": {u: {"family": SYSTEMS[u][0], "precision": SYSTEMS[u][1], "description": SYSTEMS[u][2]}
                    for u in SYSTEMS},
        "runs": [],
    }
    log(f"peaks: {res['peaks']['fp32_gflops_per_core']} GFLOP/s, {res['peaks']['int8_gops_per_core']} GOP/s "
        f"per core ({res['peaks']['source']})")
    json_path = os.path.join(a.out, f"peers-{tag}.json")

    def save():
        with open(json_path, "w") as f:
            json.dump(res, f, indent=1)

    for m in models:
        status = prepare_model(a, m, units, "mix" in shapes)
        spec = common.spec_of(m)
        name = common.model_name(m)
        res["models"][name] = {"spec": spec, "dir": common.model_dir(m), "prepare": status,
                            "gop_per_seq": common.gop_per_seq(spec, a.seq)}
        if not a.no_check and status.get("checkpoint", {}).get("ok"):
            cmd = [PY, os.path.join(HERE, "check_outputs.py"), "--model", m, "--bert8", a.bert8 or "",
                   "--seq", str(a.seq), "--calib-n", str(a.calib_n), "--threads", str(a.threads),
                   "--systems", ",".join(units)]
            rc, out, err, _ = run_proc(cmd, a.prepare_timeout, env=thread_env(a.threads))
            chk = last_json_line(out) or {"error": f"exit code {rc}: {tail_reason(err)}"}
            res["models"][name]["fp32_check"] = chk
            log(f"{name}: FP32 outputs vs PyTorch, max abs diff: {chk.get('max_abs_diff', chk)}; "
                f"INT8 pooled, min cosine: {chk.get('int8_min_cosine')}")
        if os.path.exists(common.lengthmix_path()):
            with open(common.lengthmix_path()) as f:
                lengths = json.load(f)["lengths"]
            res["models"][name]["mix"] = {
                "sentences": len(lengths), "batch": a.mix_batch,
                "mean_length": sum(lengths) / len(lengths), "max_length": max(lengths),
                "gop_padded": common.lengthmix_gop(spec, lengths, a.mix_batch, True),
                "gop_packed": common.lengthmix_gop(spec, lengths, a.mix_batch, False)}
    save()
    if a.prepare_only:
        for m in map(common.model_name, models):
            for step, s in res["models"][m]["prepare"].items():
                log(f"{m} / {step}: " + ("ok" if s.get("ok") else "FAILED: " + str(s.get("reason"))) +
                    (f" ({s['seconds']} s)" if "seconds" in s else " (cached)" if s.get("cached") else ""))
        log(f"prepared only; wrote {json_path}")
        return
    for r in range(1, a.rounds + 1):
        for m in models:
            name = common.model_name(m)
            status = res["models"][name]["prepare"]
            for shape in shapes:
                for u in units:
                    t0 = time.time()
                    recs = (run_bert8 if u in BERT8_UNITS else run_peer)(a, m, u, shape, status)
                    load = os.getloadavg()
                    for rec in recs:
                        rec.update(round=r, model=name, shape=str(shape), load_average_after=load)
                        res["runs"].append(rec)
                    summary = ", ".join(f"{x['system']} {x['seq_per_s']:.2f} seq/s" if x.get("ok")
                                        else f"{x['system']} FAILED ({x.get('reason')})" for x in recs)
                    log(f"round {r}/{a.rounds} {name} shape {shape}: {summary} [{time.time() - t0:.0f} s]")
                    save()
    res["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    # the finished record compressed (report.py reads both forms; the plain file, rewritten after
    # every round, is what an interrupted run leaves)
    report.dump(res, json_path + ".gz")
    os.remove(json_path)
    json_path += ".gz"
    md_path, png_path = report.write(res, json_path)
    log(f"wrote {json_path}")
    log(f"wrote {md_path}")
    log(f"wrote {png_path}" if png_path else "no plot (matplotlib failed; see the Markdown)")
    print()
    with open(md_path) as f:
        print(f.read())


if __name__ == "__main__":
    main()
