#!/usr/bin/env python3
"""INT8 against FP32 on the real pretrained checkpoints (models/real.tsv), through the CLI.

    python3 scripts/real_accuracy.py [--models a,b] [--variants default,ffn_static,...]
        [--json docs/accuracy_real.json] [--markdown OUT.md] [--no-retrieval] [--threads N]

For every supported model that scripts/fetch-models.sh has fetched, each INT8 variant is built
with `bert8 quantize` (calibration: 512 sentences spread over SST-2 train, as the issue's
targets say) and compared with the FP32 folder:
  - sentence encoders: STS-B dev Spearman, the cosine of every STS-B sentence's INT8 embedding
    to its FP32 embedding (mean, 1st percentile, min), and retrieval: SQuAD v1.1 dev questions
    against its 2,067 paragraphs (recall@1, MRR@10, overlap of the top-10 lists with FP32's),
    with corpus and queries INT8 and with INT8 queries against the FP32-indexed corpus;
  - a classifier: the share of STS-B sentences whose top label is FP32's, and the cosine of
    the INT8 logits to the FP32 logits;
  - a masked LM: the cosine of the pooled last hidden states (its encoder).
Needs only numpy (scripts/embed_fidelity.py does the measuring).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import embed_fidelity as ef  # noqa: E402

VARIANTS = {
    "default": ("static, alpha auto, FFN-in and FFN-out inputs per token, INT8 attention (the default)", []),
    "ffn_in_static": ("static, alpha auto, FFN-out input per token, INT8 attention (the default until 2026-12-04)",
                      ["--ffn-in", "static"]),
    "ffn_static": ("static, alpha auto, every input per tensor (FFN-out with a zero point)",
                   ["--ffn-out", "static", "--ffn-in", "static"]),
    "static_outliers": ("static as the default, with 4 fp32 outlier channels in FFN-in and FFN-out",
                        ["--outliers", "4"]),
    "dynamic": ("dynamic, alpha auto, INT8 attention, 4 fp32 outlier channels per group (the dynamic default)",
                ["--scheme", "dynamic"]),
    "dynamic_no_outliers": ("dynamic, alpha auto, INT8 attention, no outlier channels (the dynamic default until "
                            "2026-12-05)", ["--scheme", "dynamic", "--outliers", "0"]),
    "old_default": ("static, alpha 0.5, every input per tensor (the default until 2026-12-03, with a zero point now)",
                    ["--alpha", "0.5", "--ffn-out", "static", "--ffn-in", "static"]),
}


def manifest():
    rows = []
    with open(os.path.join(HERE, "..", "models", "real.tsv"), encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#") and line.strip()]
    for r in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        rows.append(r)
    return rows


def model_path(name):
    r = subprocess.run(["bash", os.path.join(HERE, "fetch-models.sh"), "--path", name], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def calib_file(data, tmp, n=512):
    rows = []
    with open(os.path.join(data, "glue", "SST-2.train90.tsv"), encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            rows.append(row["sentence"])
    step = len(rows) / n
    path = os.path.join(tmp, "calib.txt")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(rows[int(i * step)].strip() + "\n")
    return path


def forward_logits(bert8, model, texts, threads):
    args = [bert8, "classify", model]
    if threads:
        args += ["--threads", str(threads)]
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    r = subprocess.run(args, input=inp.encode(), capture_output=True, check=False)
    if r.returncode:
        sys.exit(f"{' '.join(args)}: {r.stderr.decode(errors='replace')}")
    out = [json.loads(x) for x in r.stdout.decode().splitlines() if x.strip()]
    labels = [o["label"] for o in out]
    keys = sorted(out[0]["scores"]) if out else []
    scores = np.asarray([[o["scores"][k] for k in keys] for o in out])
    return labels, scores


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bert8", default=os.path.join(HERE, "..", "build", "bert8"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--models", help="comma-separated names (default: every supported, fetched model)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-retrieval", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    want = set(a.models.split(",")) if a.models else None
    variants = a.variants.split(",")
    s1, s2, gold = ef.read_stsb(os.path.join(a.data, "glue", "STS-B.dev.tsv"), 0)
    sents, n = s1 + s2, len(s1)
    paras = questions = rel = None
    if not a.no_retrieval:
        paras, questions, rel = ef.read_squad(os.path.join(a.data, "squad", "dev-v1.1.rebuilt.json"))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        calib = calib_file(a.data, tmp)
        for row in manifest():
            name, kind = row["name"], row["kind"]
            if not row["status"].startswith("supported") or (want and name not in want):
                continue
            path = model_path(name)
            if not path:
                print(f"{name}: not fetched (bash scripts/fetch-models.sh {name}); skipped", file=sys.stderr)
                continue
            cfg = json.load(open(os.path.join(path, "config.json"), encoding="utf-8"))
            maxlen = 0
            sbc = os.path.join(path, "sentence_bert_config.json")
            if os.path.exists(sbc):
                maxlen = json.load(open(sbc, encoding="utf-8")).get("max_seq_length", 0)
            entry = {"model": name, "kind": kind, "architecture": cfg.get("architectures", ["?"])[0],
                     "layers": cfg.get("num_hidden_layers"), "hidden": cfg.get("hidden_size"),
                     "max_length": maxlen or None, "rows": []}
            print(f"== {name} ({kind})", file=sys.stderr)
            ref = {}
            for vid in ["fp32"] + variants:
                t0 = time.time()
                folder = path
                if vid != "fp32":
                    folder = os.path.join(tmp, f"{name}-{vid}")
                    cmd = [a.bert8, "quantize", path, "-o", folder, "--calib", calib, "--samples", "512",
                           "--quiet"] + VARIANTS[vid][1]
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode:
                        print(f"  {vid}: quantize failed: {r.stderr}", file=sys.stderr)
                        entry["rows"].append({"variant": vid, "error": r.stderr.strip()})
                        continue
                res = {"variant": vid, "label": "FP32" if vid == "fp32" else VARIANTS[vid][0]}
                if kind.startswith("classifier"):
                    labels, scores = forward_logits(a.bert8, folder, sents, a.threads)
                    if vid == "fp32":
                        ref["labels"], ref["scores"] = labels, scores
                    else:
                        res["top_label_agreement"] = float(np.mean([x == y for x, y in zip(labels, ref["labels"])]))
                        res["cosine_to_fp32"] = ef.cos_stats(scores, ref["scores"])
                else:
                    e = ef.embed(a.bert8, folder, sents, maxlen, a.threads)
                    if kind.startswith("sentence-encoder"):
                        res["stsb_spearman"] = ef.spearman((e[:n] * e[n:]).sum(axis=1), gold) * 100
                    if vid == "fp32":
                        ref["stsb"] = e
                    else:
                        res["cosine_to_fp32"] = ef.cos_stats(e, ref["stsb"])
                    if kind.startswith("sentence-encoder") and paras is not None:
                        qe = ef.embed(a.bert8, folder, questions, maxlen, a.threads)
                        ce = ef.embed(a.bert8, folder, paras, maxlen, a.threads)
                        if vid == "fp32":
                            res["retrieval"], ref["top"] = ef.retrieval(qe, ce, rel)
                            ref["corpus"] = ce
                        else:
                            res["retrieval"], _ = ef.retrieval(qe, ce, rel, ref["top"])
                            res["retrieval_mixed"], _ = ef.retrieval(qe, ref["corpus"], rel, ref["top"])
                res["seconds"] = round(time.time() - t0, 1)
                print("  " + json.dumps(res), file=sys.stderr)
                entry["rows"].append(res)
            results.append(entry)
    out = {"calibration": "512 sentences spread over glue/SST-2.train90.tsv", "stsb": "glue/STS-B.dev.tsv, 1,500 pairs",
           "retrieval": None if a.no_retrieval else "squad/dev-v1.1.rebuilt.json: 10,570 questions, 2,067 paragraphs",
           "models": results}
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    md = render(out)
    if a.markdown:
        with open(a.markdown, "w", encoding="utf-8") as f:
            f.write(md)
    else:
        print(md)


def render(out):
    lines = []
    for m in out["models"]:
        lines.append(f"#### {m['model']} ({m['kind']}, {m['architecture']}, {m['layers']} layers, hidden {m['hidden']})")
        lines.append("")
        fp = next((r for r in m["rows"] if r["variant"] == "fp32"), {})
        if m["kind"].startswith("sentence-encoder"):
            lines.append("| variant | STS-B Spearman | Δ | cos mean | cos p1 | cos min | R@1 | Δ | MRR@10 | top-10 overlap |"
                         " R@1, INT8 queries vs FP32 corpus | overlap there |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for r in m["rows"]:
                if "error" in r:
                    continue
                rt, rm = r.get("retrieval", {}), r.get("retrieval_mixed", {})
                c = r.get("cosine_to_fp32")
                cells = [r["label"], f"{r['stsb_spearman']:.2f}",
                         "" if r["variant"] == "fp32" else f"{r['stsb_spearman'] - fp['stsb_spearman']:+.2f}",
                         f"{c['mean']:.4f}" if c else "1", f"{c['p1']:.4f}" if c else "1", f"{c['min']:.4f}" if c else "1",
                         f"{rt['recall@1']:.2f}" if rt else "",
                         "" if r["variant"] == "fp32" or not rt else f"{rt['recall@1'] - fp['retrieval']['recall@1']:+.2f}",
                         f"{rt['mrr@10']:.2f}" if rt else "",
                         f"{rt['top10_overlap']:.1f}%" if rt.get("top10_overlap") is not None else ("100%" if rt else ""),
                         f"{rm['recall@1']:.2f}" if rm else "", f"{rm['top10_overlap']:.1f}%" if rm else ""]
                lines.append("| " + " | ".join(cells) + " |")
        elif m["kind"].startswith("classifier"):
            lines.append("| variant | top label = FP32's | class probabilities cos mean | cos p1 | cos min |")
            lines.append("|---|---:|---:|---:|---:|")
            for r in m["rows"]:
                if "error" in r or r["variant"] == "fp32":
                    continue
                c = r["cosine_to_fp32"]
                lines.append(f"| {r['label']} | {100 * r['top_label_agreement']:.1f}% | {c['mean']:.4f} | {c['p1']:.4f} |"
                             f" {c['min']:.4f} |")
        else:
            lines.append("| variant | pooled hidden state cos mean | cos p1 | cos min |")
            lines.append("|---|---:|---:|---:|")
            for r in m["rows"]:
                if "error" in r or r["variant"] == "fp32":
                    continue
                c = r["cosine_to_fp32"]
                lines.append(f"| {r['label']} | {c['mean']:.4f} | {c['p1']:.4f} | {c['min']:.4f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
