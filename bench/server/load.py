"""Server load benchmark: `bert8 serve` (INT8) and Infinity (`infinity-emb`, its optimum/ONNX Runtime
engine on the dynamic-int8 ONNX model) serving the same checkpoint, under the same wrk load.

  python3 bench/server/load.py [--model DIR] [--clients 1,8,64] [--duration 20] [--rounds 3]
                               [--threads 2] [--systems bert8,infinity] [--soak 600] [--tag TAG]

Both servers run at once on 127.0.0.1 (loopback only). In each round, each concurrency level is
run on one server, then on the other (alternated, so that the ratios come from the same minutes),
for --duration seconds of `wrk -t1 -cN` posting OpenAI-style embedding requests (one SST-2 dev
sentence each, in turn) to bert8's /v1/embeddings and Infinity's /embeddings. During each run the
server's VmRSS is sampled from /proc/PID/status every 0.2 s. --soak S then runs S seconds at the
highest concurrency on each server, sampling VmRSS every 5 s (is resident memory flat?).

Needs: build/bert8 (cmake), wrk, bench/peers/work/venv (bash bench/peers/run.sh --prepare-only makes
it; its prepare.py exports the ONNX models) and bench/peers/work/venv-infinity (made here if missing:
pip install torch==2.13.0 "infinity-emb[server,optimum]"). Writes bench/server/results/server-TAG.{json,md}.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PEERS = os.path.join(REPO, "bench", "peers")
PEERS_WORK = os.environ.get("PEERS_WORK", os.path.join(PEERS, "work"))
SHARED = os.environ.get("BERT8_SHARED", os.path.abspath(os.path.join(REPO, "..", "shared")))
WORK = os.path.join(HERE, "work")
INFINITY_REQ = ["infinity-emb[server,optimum]==0.0.78"]


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, flush=True)


def sh(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def rss_kb(pid, key="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def tree_pids(pid):
    """pid and its descendants (Infinity's uvicorn may serve from a child process)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def tree_rss_kb(pid):
    vals = [rss_kb(p) for p in tree_pids(pid)]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


class Sampler(threading.Thread):
    def __init__(self, pid, every):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples, self.stop = pid, every, [], threading.Event()

    def run(self):
        t0 = time.time()
        while not self.stop.is_set():
            v = tree_rss_kb(self.pid)
            if v is not None:
                self.samples.append((round(time.time() - t0, 2), v))
            self.stop.wait(self.every)


def wait_health(url, proc, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.time() - t0
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


def post_json(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def read_sentences(path, limit=None):
    out = []
    with open(path, encoding="utf-8") as f:
        col = f.readline().rstrip("\n").split("\t").index("sentence")
        for line in f:
            out.append(line.rstrip("\n").split("\t")[col].strip())
            if limit and len(out) >= limit:
                break
    return out


# ---- preparation ---------------------------------------------------------------------------------

def prepare(a):
    os.makedirs(WORK, exist_ok=True)
    name = os.path.basename(os.path.normpath(a.model))
    calib = os.path.join(WORK, "calib.txt")
    if not os.path.exists(calib):
        sents = read_sentences(os.path.join(SHARED, "data", "glue", "SST-2.train90.tsv"), 256)
        with open(calib, "w", encoding="utf-8") as f:
            f.write("".join((" " + s if s.startswith("{") else s) + "\n" for s in sents))
    int8 = os.path.join(WORK, f"{name}.int8")
    if not os.path.exists(os.path.join(int8, "quantization_config.json")) or a.rebuild:
        sh([a.bert8, "quantize", a.model, "-o", int8, "--calib", calib, "--samples", "256"])
    bodies = os.path.join(WORK, "bodies.jsonl")
    with open(bodies, "w") as f:
        for s in read_sentences(os.path.join(SHARED, "data", "glue", "SST-2.dev.tsv")):
            f.write(json.dumps({"input": s, "model": name}) + "\n")
    out = {"name": name, "int8": int8, "bodies": bodies, "calib": calib}
    if "infinity" in a.systems:
        out["infinity_dir"] = prepare_infinity(a, name)
    return out


def prepare_infinity(a, name):
    """A folder Infinity's optimum engine loads: the checkpoint (links) plus model.onnx (the plain
    export) and model_quantized.onnx (dynamic int8, the file it prefers on a CPU): the same files
    bench/peers' fastembed rows run."""
    py = os.path.join(PEERS_WORK, "venv", "bin", "python")
    if not os.path.exists(py):
        raise RuntimeError(f"{py} missing: run `bash bench/peers/run.sh --prepare-only --models {a.model} "
                           f"--systems fastembed-int8 --batches 1` first")
    art = os.path.join(PEERS_WORK, "artifacts", f"{name}.seq128.calib256", "fastembed")
    for step in ("calib", "onnx", "fastembed"):
        if step != "calib" and os.path.exists(os.path.join(art, "model.int8.onnx")) and not a.rebuild:
            break
        sh([py, os.path.join(PEERS, "prepare.py"), step, "--model", a.model], stdout=subprocess.DEVNULL)
    d = os.path.join(WORK, f"infinity-{name}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(a.model):
        src = os.path.join(a.model, f)
        os.symlink(src, os.path.join(d, f))
    # at the top of the folder: optimum 2.1 looks for Infinity's file name there (not under onnx/)
    os.symlink(os.path.join(art, "model.onnx"), os.path.join(d, "model.onnx"))
    os.symlink(os.path.join(art, "model.int8.onnx"), os.path.join(d, "model_quantized.onnx"))
    venv = os.path.join(PEERS_WORK, "venv-infinity")
    if not os.path.exists(os.path.join(venv, "bin", "infinity_emb")):
        sh([sys.executable, "-m", "venv", venv])
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", "torch==2.13.0"])
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", *INFINITY_REQ])
    return d


# ---- servers -------------------------------------------------------------------------------------

def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    return env


def start(a, system, prep, port, logf):
    env = thread_env(a.threads)
    cwd = None
    if system.startswith("bert8"):
        if system == "bert8-passive":
            # GOMP's default wait policy spins; with another process on a core, a 2-thread call
            # can then stall for hundreds of ms (bench_latency's p99 on a loaded machine)
            env["OMP_WAIT_POLICY"] = "passive"
        cmd = [a.bert8, "serve", prep["int8"], "--hostname", "127.0.0.1", "--port", str(port), "--threads",
               str(a.threads)]
        route = "/v1/embeddings"
    else:
        # run from inside the folder with --model-id .: Infinity 0.0.78 passes a local folder's ONNX
        # file to optimum as an absolute path, which optimum 2.1 then looks for relative to the folder
        # ("Could not find any ONNX files with target file name /abs/.../onnx/model_quantized.onnx")
        cwd = prep["infinity_dir"]
        cmd = [os.path.join(PEERS_WORK, "venv-infinity", "bin", "infinity_emb"), "v2", "--model-id",
               ".", "--served-model-name", prep["name"], "--engine", "optimum", "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port), "--batch-size", str(a.infinity_batch),
               "--log-level", "warning", "--no-model-warmup"]
        env["INFINITY_ANONYMOUS_USAGE_STATS"] = "0"
        env["HF_HUB_OFFLINE"] = "1"
        route = "/embeddings"
    log("$ " + (f"(cd {cwd} && " if cwd else "") + " ".join(cmd) + (")" if cwd else ""))
    proc = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT, cwd=cwd)
    url = f"http://127.0.0.1:{port}"
    secs = wait_health(url + "/health", proc, a.start_timeout)
    # one request first: the answer must be an embedding of the model's width
    r = post_json(url + route, {"input": ["a gripping, beautifully acted film"], "model": prep["name"]})
    dim = len(r["data"][0]["embedding"])
    return {"proc": proc, "url": url, "route": route, "command": cmd, "cwd": cwd, "startup_s": round(secs, 1), "dim": dim,
            "rss_idle_kb": tree_rss_kb(proc.pid)}


def wrk(a, srv, clients, seconds, bodies, every):
    cmd = ["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--timeout", "10s", "--latency", "-s",
           os.path.join(HERE, "post.lua"), srv["url"], "--", srv["route"], bodies]
    smp = Sampler(srv["proc"].pid, every)
    smp.start()
    p = subprocess.run(cmd, capture_output=True, text=True)
    smp.stop.set()
    smp.join()
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not line:
        raise RuntimeError(f"wrk failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    r = json.loads(line[-1])
    rss = [v for _, v in smp.samples]
    r.update(clients=clients, command=" ".join(cmd), rss_max_kb=max(rss) if rss else None,
             rss_last_kb=rss[-1] if rss else None, load_average_after=os.getloadavg())
    if every >= 1:
        r["rss_series_kb"] = smp.samples
    return r


# ---- report --------------------------------------------------------------------------------------

def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def versions():
    out = {}
    try:
        out["bert8"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True).stdout.strip()
    except OSError:
        pass
    py = os.path.join(PEERS_WORK, "venv-infinity", "bin", "python")
    if os.path.exists(py):
        code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
                "['infinity_emb', 'optimum', 'onnxruntime', 'transformers', 'torch']}))")
        r = subprocess.run([py, "-c", code], capture_output=True, text=True)
        if r.returncode == 0:
            out.update(json.loads(r.stdout.strip().splitlines()[-1]))
    try:
        out["wrk"] = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0][:60]
    except OSError:
        pass
    return out


def write_md(res, path):
    L = [f"# bert8 serve and Infinity under load ({res['tag']})\n",
         f"CPU: {res['cpu']}; {res['settings']['threads']} thread(s) per server; model {res['model']}; "
         f"both servers up at once on 127.0.0.1; `wrk -t1 -cN -d{res['settings']['duration']}s` per cell, "
         f"one SST-2 dev sentence per OpenAI-style request; medians over {res['settings']['rounds']} alternated "
         f"round(s). Resident memory: the largest VmRSS sampled during the runs (MiB).\n",
         "| server | clients | requests/s | p50 ms | p99 ms | errors | max RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|"]
    med = {}
    for sysname in res["settings"]["systems"]:
        for c in (res["settings"]["clients"] if res["settings"]["rounds"] else []):
            runs = [r for r in res["runs"] if r["system"] == sysname and r["clients"] == c and "requests_per_s" in r]
            if not runs:
                fails = [r.get("reason") for r in res["runs"] if r["system"] == sysname and r["clients"] == c]
                L.append(f"| {sysname} | {c} | n/a ({fails[0] if fails else 'not run'}) | | | | |")
                continue
            m = {k: statistics.median(r[k] for r in runs) for k in ("requests_per_s", "p50_ms", "p99_ms")}
            m["errors"] = sum(sum(r["errors"].values()) for r in runs)
            m["rss"] = max(r["rss_max_kb"] or 0 for r in runs) / 1024
            med[(sysname, c)] = m
            L.append(f"| {res['labels'].get(sysname, sysname)} | {c} | {m['requests_per_s']:.1f} | {m['p50_ms']:.2f} | "
                     f"{m['p99_ms']:.2f} | {m['errors']} | {m['rss']:.0f} |")
    if "bert8" in res["settings"]["systems"] and "infinity" in res["settings"]["systems"]:
        L.append("")
        for c in res["settings"]["clients"]:
            b, i = med.get(("bert8", c)), med.get(("infinity", c))
            if b and i:
                L.append(f"- {c} client(s): bert8 / Infinity requests/s {b['requests_per_s'] / i['requests_per_s']:.2f}x; "
                         f"p99 {b['p99_ms']:.2f} ms vs {i['p99_ms']:.2f} ms")
    for sysname, s in res["servers"].items():
        L.append(f"- {sysname}: `{' '.join(s['command'])}`; healthy after {s['startup_s']} s; "
                 f"{s['dim']}-dim embeddings; RSS idle after start {s['rss_idle_kb'] / 1024:.0f} MiB")
    for sysname, soak in res.get("soak", {}).items():
        ser = soak.get("rss_series_kb") or []
        if ser:
            first = [v for t, v in ser if t <= 60]
            last = [v for t, v in ser if t >= ser[-1][0] - 60]
            L.append(f"- soak, {sysname}: {soak['clients']} clients for {soak['duration_s']:.0f} s, "
                     f"{soak['requests_per_s']:.1f} requests/s, {sum(soak['errors'].values())} errors; VmRSS first "
                     f"minute {min(first) / 1024:.0f}-{max(first) / 1024:.0f} MiB, last minute "
                     f"{min(last) / 1024:.0f}-{max(last) / 1024:.0f} MiB, max {max(v for _, v in ser) / 1024:.0f} MiB")
        elif soak.get("reason"):
            L.append(f"- soak, {sysname}: failed: {soak['reason']}")
    L.append(f"- versions: {', '.join(f'{k} {v}' for k, v in res['versions'].items())}")
    L.append(f"- load average at start {res['load_average_at_start']}; per run in the JSON")
    L.append(f"- command: `{res['command']}`; started {res['started']}, finished {res.get('finished')}")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint folder (default: all-MiniLM-L6-v2 from scripts/fetch-models.sh)")
    p.add_argument("--bert8", default=os.path.join(REPO, "build", "bert8"))
    p.add_argument("--systems", default="bert8,infinity",
                   help="bert8, bert8-passive (the same with OMP_WAIT_POLICY=passive), infinity")
    p.add_argument("--clients", default="1,8,64")
    p.add_argument("--duration", type=int, default=20, help="seconds per wrk run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="compute threads of each server")
    p.add_argument("--infinity-batch", type=int, default=32, help="Infinity --batch-size")
    p.add_argument("--soak", type=int, default=0, help="then this many seconds at the highest concurrency "
                                                      "on each server, VmRSS every 5 s (600: the 10-minute run)")
    p.add_argument("--soak-systems", default="bert8", help="servers of the soak run")
    p.add_argument("--start-timeout", type=int, default=300)
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--tag", default="")
    a = p.parse_args()
    a.systems = [s for s in a.systems.split(",") if s]
    clients = [int(c) for c in a.clients.split(",")]
    if not a.model:
        a.model = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-models.sh"), "--path",
                                  "all-minilm-l6-v2"], capture_output=True, text=True, check=True).stdout.strip()
    a.model = os.path.abspath(a.model)
    if not shutil.which("wrk"):
        sys.exit("wrk is missing (bash scripts/server-test-deps.sh installs it)")
    tag = a.tag or datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    base = os.path.join(HERE, "results", f"server-{tag}")
    prep = prepare(a)
    res = {"tag": tag, "started": datetime.datetime.now().isoformat(timespec="seconds"),
           "command": "python3 bench/server/load.py " + " ".join(sys.argv[1:]), "cpu": cpu_name(),
           "load_average_at_start": os.getloadavg(), "model": a.model, "versions": versions(),
           "settings": {"systems": a.systems, "clients": clients, "duration": a.duration, "rounds": a.rounds,
                        "threads": a.threads, "infinity_batch": a.infinity_batch},
           "labels": {"bert8": "bert8 serve, INT8 (static, INT8 attention)",
                      "bert8-passive": "bert8 serve, INT8, OMP_WAIT_POLICY=passive",
                      "infinity": "Infinity, optimum engine, dynamic-int8 ONNX"},
           "servers": {}, "runs": []}
    servers, logs = {}, {}
    try:
        for k, sysname in enumerate(a.systems):
            logs[sysname] = open(os.path.join(WORK, f"{sysname}.log"), "w")
            servers[sysname] = start(a, sysname, prep, 18400 + k, logs[sysname])
            res["servers"][sysname] = {x: v for x, v in servers[sysname].items() if x != "proc"}
            log(f"{sysname}: healthy after {servers[sysname]['startup_s']} s, RSS "
                f"{servers[sysname]['rss_idle_kb'] / 1024:.0f} MiB")
        for sysname, srv in servers.items():  # warm-up, not recorded
            wrk(a, srv, max(clients), 3, prep["bodies"], 0.5)
        for rnd in range(1, a.rounds + 1):
            for c in clients:
                for sysname, srv in servers.items():
                    try:
                        r = wrk(a, srv, c, a.duration, prep["bodies"], 0.2)
                    except RuntimeError as e:
                        r = {"reason": str(e), "clients": c}
                    r.update(system=sysname, round=rnd)
                    res["runs"].append(r)
                    log(f"round {rnd} {sysname} c={c}: " + (
                        f"{r['requests_per_s']:.1f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                        f"max RSS {r['rss_max_kb'] / 1024:.0f} MiB, load {r['load_average_after'][0]:.2f}"
                        if "requests_per_s" in r else f"FAILED {r['reason']}"))
                    with open(base + ".json", "w") as f:
                        json.dump(res, f, indent=1)
        if a.soak:
            res["soak"] = {}
            for sysname in [s for s in a.soak_systems.split(",") if s in servers]:
                log(f"soak {sysname}: {max(clients)} clients, {a.soak} s")
                try:
                    res["soak"][sysname] = wrk(a, servers[sysname], max(clients), a.soak, prep["bodies"], 5)
                except RuntimeError as e:
                    res["soak"][sysname] = {"reason": str(e)}
    finally:
        for srv in servers.values():
            srv["proc"].terminate()
            try:
                srv["proc"].wait(30)
            except subprocess.TimeoutExpired:
                srv["proc"].kill()
        for f in logs.values():
            f.close()
    res["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    write_md(res, base + ".md")
    log(f"wrote {base}.json and {base}.md")
    with open(base + ".md") as f:
        print(f.read())


if __name__ == "__main__":
    main()
