"""Turns the raw JSON of a run into the Markdown table and the PNG plot.

  python report.py results/peers-TAG.json.gz   # rewrites results/peers-TAG.md and .png

A finished run's raw JSON is stored gzip-compressed (bench.py writes peers-TAG.json.gz at its end:
the records travel with every copy of the working tree, device calls included); a plain .json, as
an interrupted run leaves it, is read too.
"""
import gzip
import json
import os
import statistics
import sys

# table rows in order: (system key in the raw runs, label, precision)
ROWS = [
    ("ort-fp32", "ONNX Runtime FP32", "fp32"),
    ("ort-int8-dynamic", "ONNX Runtime INT8 dynamic", "int8"),
    ("ort-int8-static", "ONNX Runtime INT8 static QDQ", "int8"),
    ("ov-fp32", "OpenVINO FP32", "fp32"),
    ("ov-int8-nncf", "OpenVINO INT8 (NNCF PTQ)", "int8"),
    ("torch-fp32", "PyTorch FP32 eager", "fp32"),
    ("torch-fp32-compile", "PyTorch FP32 compiled", "fp32"),
    ("torch-int8-dynamic", "PyTorch INT8 dynamic (torch.ao, eager)", "int8"),
    ("torchao-sq-static", "torchao SmoothQuant W8A8 static (compiled)", "int8"),
    ("torchao-sq-dynamic", "torchao SmoothQuant W8A8 dynamic (compiled)", "int8"),
    ("torchao-w8a8-dynamic", "torchao W8A8 dynamic, no SmoothQuant (compiled)", "int8"),
    ("llamacpp-f32", "llama.cpp GGUF F32", "fp32"),
    ("llamacpp-q8", "llama.cpp GGUF Q8_0", "int8"),
    ("ct2-fp32", "CTranslate2 FP32", "fp32"),
    ("ct2-int8", "CTranslate2 int8", "int8"),
    ("ct2-int8-sq", "CTranslate2 int8, SmoothQuant scales", "int8"),
    ("fastembed-fp32", "fastembed FP32 ONNX (text in, pooled)", "fp32"),
    ("fastembed-int8", "fastembed dynamic-int8 ONNX (text in, pooled)", "int8"),
    ("bert8-fp32", "**bert8 FP32**", "fp32"),
    ("bert8-fp32@static-att8", "**bert8 FP32** (latency columns: `bench_latency`)", "fp32"),
    ("bert8-int8-static", "**bert8 INT8 static**", "int8"),
    ("bert8-int8-static-att8", "**bert8 INT8 static, INT8 attention**", "int8"),
    ("bert8-int8-static-att8-passive", "**bert8 INT8 static, INT8 attention, OMP_WAIT_POLICY=passive**", "int8"),
    ("bert8-int8-dynamic", "**bert8 INT8 dynamic**", "int8"),
    ("bert8-int8-dynamic-att8", "**bert8 INT8 dynamic, INT8 attention**", "int8"),
    ("bert8-int8-static-att8-w7", "**bert8 INT8 static, INT8 attention, 7-bit weights**", "int8"),
    ("bert8-int8-dynamic-att8-w7", "**bert8 INT8 dynamic, INT8 attention, 7-bit weights**", "int8"),
]
BERT8 = {"bert8-fp32", "bert8-fp32@static-att8", "bert8-int8-static", "bert8-int8-static-att8-passive", "bert8-int8-static-att8", "bert8-int8-dynamic", "bert8-int8-dynamic-att8",
         "bert8-int8-static-att8-w7", "bert8-int8-dynamic-att8-w7"}


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def parse_shape(shape, seq):
    """(batch, seq) of a column "B" or "BxS"; None for the mix."""
    if shape == "mix":
        return None
    if "x" in shape:
        b, t = shape.split("x")
        return int(b), int(t)
    return int(shape), seq


def is_latency(res, shape):
    return shape != "mix" and parse_shape(shape, res["settings"]["seq"])[1] != res["settings"]["seq"]


def aggregate(res):
    """{(model, shape, system): {"median", "values", "reasons", "p50_ms", "p99_ms"}} over rounds
    (p50 and p99: the median over rounds of each process's own p50 and p99 call time)."""
    agg = {}
    for r in res["runs"]:
        k = (r["model"], r["shape"], r["system"])
        e = agg.setdefault(k, {"values": [], "reasons": [], "p50": [], "p99": []})
        if r.get("ok") and r.get("seq_per_s") is not None:
            e["values"].append(r["seq_per_s"])
            if r.get("p50_s") is not None and r.get("p99_s") is not None:
                e["p50"].append(1e3 * r["p50_s"])
                e["p99"].append(1e3 * r["p99_s"])
        else:
            e["reasons"].append(r.get("reason") or "failed")
    for e in agg.values():
        e["median"] = statistics.median(e["values"]) if e["values"] else None
        e["p50_ms"] = statistics.median(e["p50"]) if e["p50"] else None
        e["p99_ms"] = statistics.median(e["p99"]) if e["p99"] else None
    return agg


def gop_at(spec, seq):
    H, I, L = spec["hidden"], spec["inter"], spec["layers"]
    return L * (2.0 * seq * (4.0 * H * H + 2.0 * H * I) + 4.0 * seq * seq * H) / 1e9


def ceilings(res, model, shape, packed=False):
    """(fp32, int8) roofline ceilings in seq/s for one model and column."""
    pk = res["peaks"]
    th = res["settings"]["threads"]
    m = res["models"][model]
    if shape == "mix":
        mix = m.get("mix")
        if not mix:
            return None, None
        gop = (mix["gop_packed"] if packed else mix["gop_padded"]) / mix["sentences"]
    else:
        gop = gop_at(m["spec"], parse_shape(shape, res["settings"]["seq"])[1])
    return pk["fp32_gflops_per_core"] * th / gop, pk["int8_gops_per_core"] * th / gop


def stem(json_path):
    """results/peers-TAG.json.gz or .json -> results/peers-TAG"""
    p = json_path[:-3] if json_path.endswith(".gz") else json_path
    return os.path.splitext(p)[0]


def load(json_path):
    """A run's raw JSON, gzip-compressed (.json.gz) or plain."""
    with (gzip.open if json_path.endswith(".gz") else open)(json_path, "rt") as f:
        return json.load(f)


def dump(res, json_path):
    """Writes a run's raw JSON, gzip-compressed when the name ends in .gz."""
    with (gzip.open if json_path.endswith(".gz") else open)(json_path, "wt") as f:
        json.dump(res, f, indent=1)


def write(res, json_path):
    base = stem(json_path)
    md_path = base + ".md"
    agg = aggregate(res)
    st = res["settings"]
    models = list(res["models"])
    shapes = []
    for r in res["runs"]:
        if r["shape"] not in shapes:
            shapes.append(r["shape"])
    shapes.sort(key=lambda s: (s == "mix", not is_latency(res, s),
                               parse_shape(s, st["seq"]) if s != "mix" else (0, 0)))
    present = {r["system"] for r in res["runs"]}
    rows = [row for row in ROWS if row[0] in present]
    L = []
    L.append(f"# bert8 and its peers, side by side ({res['tag']})\n")
    done = max((r.get("round", 0) for r in res["runs"]), default=0)
    if done == st["rounds"] and res.get("finished"):
        over = f"median over {done} round(s)"
    else:
        over = (f"median over the rounds each cell got (the run was stopped in round {done} of {st['rounds']}; "
                f"the JSON has every value)")
    L.append(f"Sequences per second, {over}, each system in a fresh process per "
             f"round, {st['threads']} thread(s), sequence length {st['seq']} (columns b=N: batch N of bert8's "
             f"timing ids; columns b=NxS: batch N at S tokens, with the median over rounds of each process's "
             f"p50 and p99 call time). In parentheses: % of the roofline ceiling of the row's precision. "
             f"The `SST-2 mix` column: the {next(iter(res['models'].values())).get('mix', {}).get('sentences', '?')} "
             f"SST-2 dev sentences in batches of {st['mix_batch']}, each batch padded to its longest "
             f"(bert8: padding-free packed batches, padded batches in brackets).\n")
    notes = []

    def note(text):
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    for model in models:
        m = res["models"][model]
        spec = m["spec"]
        L.append(f"\n## {model} ({spec['layers']} layers, hidden {spec['hidden']}, vocab {spec['vocab']}; "
                 f"{m['gop_per_seq']:.2f} GOP per sequence of {st['seq']})\n")
        head = ["system"] + [("SST-2 mix" if s == "mix" else f"b={s}") for s in shapes]
        L.append(f"CPU: {res['machine'].get('Model name', '?')}, {st['threads']} thread(s).\n")
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        for key, label, prec in rows:
            cells = [label]
            for s in shapes:
                e = agg.get((model, s, key))
                if e is None:
                    cells.append("-")
                    continue
                if e["median"] is None:
                    cells.append(f"n/a [{note(f'{key}: ' + e['reasons'][0])}]")
                    continue
                cf, cq = ceilings(res, model, s, packed=(s == "mix" and key in BERT8))
                ceil = cf if prec == "fp32" else cq
                c = fmt(e["median"]) + (f" ({100 * e['median'] / ceil:.0f}%)" if ceil else "")
                if is_latency(res, s) and e["p50_ms"] is not None:
                    c += f"; p50 {e['p50_ms']:.2f} ms, p99 {e['p99_ms']:.2f} ms"
                if e["reasons"]:
                    c += f" [{note(f'{key}: some rounds failed: ' + e['reasons'][0])}]"
                if s == "mix" and key in BERT8:
                    pe = agg.get((model, s, key + "-padded"))
                    if pe and pe["median"] is not None:
                        c += f" [padded {fmt(pe['median'])}]"
                    elif pe:
                        c += f" [padded n/a {note(f'{key}-padded: ' + pe['reasons'][0])}]"
                cells.append(c)
            L.append("| " + " | ".join(cells) + " |")
        # ratios
        for b8, prec, label in (("bert8-int8-static", "int8", "bert8 INT8 static / fastest peer INT8"),
                                ("bert8-int8-static-att8", "int8",
                                 "bert8 INT8 static, INT8 attention / fastest peer INT8"),
                                ("bert8-int8-static-att8-passive", "int8",
                                 "bert8 INT8 static, INT8 attention, OMP_WAIT_POLICY=passive / fastest peer INT8"),
                                ("bert8-int8-dynamic", "int8", "bert8 INT8 dynamic / fastest peer INT8"),
                                ("bert8-int8-dynamic-att8", "int8",
                                 "bert8 INT8 dynamic, INT8 attention / fastest peer INT8"),
                                ("bert8-int8-static-att8-w7", "int8",
                                 "bert8 INT8 static, INT8 attention, 7-bit weights / fastest peer INT8"),
                                ("bert8-int8-dynamic-att8-w7", "int8",
                                 "bert8 INT8 dynamic, INT8 attention, 7-bit weights / fastest peer INT8"),
                                ("bert8-fp32", "fp32", "bert8 FP32 / fastest peer FP32")):
            if not any((model, s, b8) in agg for s in shapes):
                continue
            cells = [f"*{label}*"]
            for s in shapes:
                peers = [(agg[(model, s, k)]["median"], k) for k, _, p in rows
                         if p == prec and k not in BERT8 and (model, s, k) in agg
                         and agg[(model, s, k)]["median"] is not None]
                e = agg.get((model, s, b8))
                if not peers or not e or e["median"] is None:
                    cells.append("-")
                    continue
                best, who = max(peers)
                c = f"{e['median'] / best:.2f}x vs {who}"
                if s == "mix":
                    pe = agg.get((model, s, b8 + "-padded"))
                    if pe and pe["median"] is not None:
                        c = f"{e['median'] / best:.2f}x packed, {pe['median'] / best:.2f}x padded, vs {who}"
                cells.append(c)
            L.append("| " + " | ".join(cells) + " |")
        # latency columns: bert8's p50 against the lowest p50 of any peer, and its own p99 / p50
        lat = [s for s in shapes if is_latency(res, s)]
        for b8, what in (("bert8-int8-static-att8", ""), ("bert8-int8-static-att8-passive", ", OMP_WAIT_POLICY=passive")):
            if not (lat and any((model, s, b8) in agg for s in lat)):
                continue
            c1 = [f"*p50: bert8 INT8 static, INT8 attention{what} / lowest peer p50*"]
            c2 = [f"*bert8 INT8{what} p99 / p50*"]
            for s in shapes:
                e = agg.get((model, s, b8))
                peers = [(agg[(model, s, k)]["p50_ms"], k) for k, _, p in rows if k not in BERT8
                         and (model, s, k) in agg and agg[(model, s, k)]["p50_ms"] is not None]
                if s not in lat or not e or e["p50_ms"] is None:
                    c1.append("-")
                    c2.append("-")
                    continue
                c1.append(f"{e['p50_ms'] / min(peers)[0]:.2f}x vs {min(peers)[1]}" if peers else "-")
                c2.append(f"{e['p99_ms'] / e['p50_ms']:.2f}x")
            L.append("| " + " | ".join(c1) + " |")
            L.append("| " + " | ".join(c2) + " |")
        # INT8 over bert8's own FP32, timed interleaved in the same processes
        for b8, f32, label in (("bert8-int8-static", "bert8-fp32", "bert8 INT8 static / own FP32"),
                               ("bert8-int8-static-att8", "bert8-fp32@static-att8",
                                "bert8 INT8 static, INT8 attention / own FP32"),
                               ("bert8-int8-dynamic", "bert8-fp32@dynamic", "bert8 INT8 dynamic / own FP32"),
                               ("bert8-int8-dynamic-att8", "bert8-fp32@dynamic-att8",
                                "bert8 INT8 dynamic, INT8 attention / own FP32"),
                               ("bert8-int8-static-att8-w7", "bert8-fp32@static-att8-w7",
                                "bert8 INT8 static, INT8 attention, 7-bit weights / own FP32"),
                               ("bert8-int8-dynamic-att8-w7", "bert8-fp32@dynamic-att8-w7",
                                "bert8 INT8 dynamic, INT8 attention, 7-bit weights / own FP32")):
            if not any((model, s, b8) in agg for s in shapes):
                continue
            cells = [f"*{label}*"]
            for s in shapes:
                e, f = agg.get((model, s, b8)), agg.get((model, s, f32))
                ok = e and f and e["median"] is not None and f["median"]
                cells.append(f"{e['median'] / f['median']:.2f}x" if ok else "-")
            L.append("| " + " | ".join(cells) + " |")
        cf_cells, cq_cells = ["*FP32 roofline ceiling*"], ["*INT8 roofline ceiling*"]
        for s in shapes:
            cf, cq = ceilings(res, model, s)
            if s == "mix" and cf:
                pf, pq = ceilings(res, model, s, packed=True)
                cf_cells.append(f"{fmt(cf)} padded, {fmt(pf)} packed")
                cq_cells.append(f"{fmt(cq)} padded, {fmt(pq)} packed")
            else:
                cf_cells.append(fmt(cf))
                cq_cells.append(fmt(cq))
        L.append("| " + " | ".join(cf_cells) + " |")
        L.append("| " + " | ".join(cq_cells) + " |")
        chk = m.get("fp32_check")
        if chk:
            if "max_abs_diff" in chk:
                d = ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in chk["max_abs_diff"].items())
                L.append(f"\nSame function check (FP32 last_hidden_state vs PyTorch eager, batches "
                         f"{chk.get('batches')}, |values| up to {chk.get('max_abs_ref', 0):.1f}; fastembed: its "
                         f"normalized mean-pooled vectors): max abs diff {d}.")
                if chk.get("int8_min_cosine"):
                    d = ", ".join(f"{k} {v:.5f}" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in chk["int8_min_cosine"].items())
                    L.append(f"INT8 peers, mean-pooled output against PyTorch FP32's, lowest cosine over the rows "
                             f"of the same batches: {d}.")
            else:
                L.append(f"\nSame function check failed: {chk.get('error')}")
        if "mix" in shapes and m.get("mix"):
            mx = m["mix"]
            L.append(f"\nSST-2 mix: {mx['sentences']} sentences, mean {mx['mean_length']:.1f} tokens, max "
                     f"{mx['max_length']}; {mx['gop_padded']:.1f} GOP padded, {mx['gop_packed']:.1f} GOP packed.")
    if notes:
        L.append("\n## Not available / failures\n")
        for i, n in enumerate(notes, 1):
            L.append(f"{i}. {n}")
    pk = res["peaks"]
    L.append("\n## Roofline\n")
    raw = pk.get("raw", {}).get("peaks", {})
    amx = raw.get("int8_amx_gops", 0) > 0
    int8_name = int8_instruction(res)
    vnni_note = (f" (vpdpbusd {raw['int8_vnni_gops'] / raw['threads']:g} GOP/s per core)"
                 if amx and raw.get("threads") else "")
    if res.get("peaks_at_start"):
        p0 = res["peaks_at_start"]
        L.append(f"(Replaced: the peaks measured when the run started, FP32 {p0['fp32_gflops_per_core']:g} "
                 f"GFLOP/s and INT8 {p0['int8_gops_per_core']:g} GOP/s per core, {p0.get('source', '')}.)")
    L.append(f"Peaks per core: FP32 FMA {pk['fp32_gflops_per_core']:g} GFLOP/s, INT8 {int8_name} "
             f"{pk['int8_gops_per_core']:g} GOP/s{vnni_note}; source: {pk['source']}. Ceiling in seq/s = peak x "
             f"{st['threads']} thread(s) / GOP per sequence, GOP per sequence = layers x (2 S (4 H^2 + 2 H I) + "
             f"4 S^2 H) / 1e9 (embeddings, LayerNorm, softmax and GELU not counted).")
    mc = res["machine"]
    L.append("\n## Machine, versions, command\n")
    L.append(f"- CPU: {mc.get('Model name', '?')}, {mc.get('CPU(s)', '?')} CPU(s), "
             f"{mc.get('Thread(s) per core', '?')} thread(s) per core; flags: "
             + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in mc.get("flags_of_interest", {}).items()))
    L.append(f"- load average at start: {mc.get('load_average_at_start')}; {mc.get('platform')}; "
             f"Python {mc.get('python')}")
    L.append(f"- repo commit {mc.get('repo_commit', '?')}{' (with local changes)' if mc.get('repo_dirty') else ''}"
             f"; bert8 binary {mc.get('bert8_binary')}")
    L.append("- packages: " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()))
    for fail in res.get("install_failures", []):
        L.append(f"- not installed: {fail}")
    L.append(f"- command: `{res['command']}`")
    L.append(f"- started {res['started']}, finished {res.get('finished', '(incomplete)')}")
    L.append(f"- timing per process: {st['warmup']} warm-up call(s), then calls until {st['min_iters']} calls and "
             f"{st['budget']} s; median call time. bert8: its own `bench` loop"
             f"{' with --iters ' + str(st['bert8_iters']) if st.get('bert8_iters') else ''}.")
    L.append("\n## How each peer was prepared\n")
    for model in models:
        for step, s in res["models"][model]["prepare"].items():
            if s.get("notes") or not s.get("ok"):
                L.append(f"- {model} / {step}: " + (s.get("notes") or "") +
                         ("" if s.get("ok") else f"FAILED: {s.get('reason')}"))
    with open(md_path, "w") as f:
        f.write("\n".join(L) + "\n")
    png = None
    try:
        png = plot(res, agg, base + ".png", models, [s for s in shapes if s != "mix" and "x" not in s], rows)
    except Exception as e:  # noqa: BLE001
        with open(md_path, "a") as f:
            f.write(f"\n(plot failed: {type(e).__name__}: {e})\n")
    return md_path, png


def plot(res, agg, path, models, batches, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not batches:
        return None
    xs = [int(b) for b in batches]
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models) + 3.4, 5.2), squeeze=False)
    cmap = plt.get_cmap("tab20")
    b8_style = {"bert8-fp32": ("black", "--", "o"), "bert8-int8-static": ("black", "-", "s"),
                "bert8-int8-static-att8": ("black", ":", "D"),
                "bert8-int8-dynamic": ("dimgray", "-", "^"),
                "bert8-int8-dynamic-att8": ("dimgray", ":", "v"),
                "bert8-int8-static-att8-w7": ("firebrick", "-", "s"),
                "bert8-int8-dynamic-att8-w7": ("firebrick", ":", "v")}
    for ax, model in zip(axes[0], models):
        for i, (key, label, prec) in enumerate(rows):
            pts = [(x, agg[(model, str(x), key)]["median"]) for x in xs
                   if (model, str(x), key) in agg and agg[(model, str(x), key)]["median"] is not None]
            if not pts:
                continue
            if key in b8_style:
                color, ls, mk = b8_style[key]
                lw, ms = 2.6, 6
            else:
                color, ls, mk = cmap(i % 20), ("-" if prec == "int8" else "--"), "o"
                lw, ms = 1.3, 3.5
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=mk, label=label.replace("**", ""),
                    color=color, linestyle=ls, linewidth=lw, markersize=ms)
        cf, cq = ceilings(res, model, batches[0])
        ax.axhline(cq, color="red", linestyle=":", linewidth=1.5, label=f"INT8 roofline ({int8_instruction(res)} peak)")
        ax.axhline(cf, color="blue", linestyle=":", linewidth=1.5, label="FP32 roofline (FMA peak)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_xlabel(f"batch (sequence length {res['settings']['seq']})")
        ax.set_ylabel("sequences / s (median over rounds)")
        ax.set_title(f"{model}, {res['settings']['threads']} thread(s)")
        ax.grid(True, which="both", alpha=0.3)
    h, lab = axes[0][0].get_legend_handles_labels()
    w = fig.get_size_inches()[0]
    fig.legend(h, lab, loc="center right", fontsize=7.5, frameon=False)
    fig.suptitle("FP32 dashed, INT8 solid; dotted: roofline ceilings", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1 - 3.4 / w, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def int8_instruction(res):
    """The instruction of the INT8 peak: AMX, vpdpbusd (VNNI), or vpmaddwd (AVX2 without VNNI), from
    the peaks `bert8 bench --roofline --json` printed (a --peaks file may say it with int8_instruction)."""
    pk = res["peaks"]
    raw = pk.get("raw", {}).get("peaks", {})
    if pk.get("int8_instruction"):
        return pk["int8_instruction"]
    if raw.get("int8_amx_gops", 0) > 0:
        return "AMX tdpbssd"
    if raw.get("int8_avx2_gops", 0) > 0 and not raw.get("int8_vnni_gops", 0) > 0:
        return "vpmaddwd"
    return "vpdpbusd"

if __name__ == "__main__":
    # python report.py RESULTS.json[.gz] [--peaks PEAKS.json]: --peaks replaces the peaks the run measured
    # when it started (kept as "peaks_at_start"), e.g. by the best of several quiet measurements, in
    # the JSON too, so that the table, the plot and the raw file agree.
    r = load(sys.argv[1])
    if len(sys.argv) == 4 and sys.argv[2] == "--peaks":
        with open(sys.argv[3]) as f:
            d = json.load(f)
        r.setdefault("peaks_at_start", r["peaks"])
        r["peaks"] = {"fp32_gflops_per_core": float(d["fp32_gflops_per_core"]),
                      "int8_gops_per_core": float(d["int8_gops_per_core"]),
                      "source": d.get("source", f"--peaks {sys.argv[3]}")}
        if d.get("int8_instruction"):
            r["peaks"]["int8_instruction"] = d["int8_instruction"]
        dump(r, sys.argv[1])
    elif len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS.json[.gz] [--peaks PEAKS.json]")
    print("\n".join(p for p in write(r, sys.argv[1]) if p))
