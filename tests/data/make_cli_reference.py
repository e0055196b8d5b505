#!/usr/bin/env python3
"""Writes tests/data/cli_reference/*.json: what the bert8 CLI printed, before the task logic
moved into the library (commit 08fd953), on inputs read from ../shared. test_pipeline checks
that the library pipelines give the same numbers. Only numbers, labels and offsets are kept:
no text of ../shared is stored.

    python3 tests/data/make_cli_reference.py PATH/TO/OLD/bert8   (from the repository root)
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("BERT8_SHARED", os.path.join(ROOT, "..", "shared"))
OUT = os.path.join(ROOT, "tests", "data", "cli_reference")
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]  # id2label given to the golden token classifier


def tsv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def run(binary, args, lines):
    p = subprocess.run([binary] + args, input="".join(json.dumps(l) + "\n" for l in lines),
                       capture_output=True, text=True, check=True)
    return [json.loads(l) for l in p.stdout.splitlines()]


def main(binary):
    os.makedirs(OUT, exist_ok=True)
    sst = tsv(os.path.join(SHARED, "data/glue/SST-2.dev.tsv"))
    rows = list(range(0, 240, 10))
    out = run(binary, ["classify", "models/sst2-bert-mini", "--logits"], [{"text": sst[i]["sentence"]} for i in rows])
    json.dump({"model": "models/sst2-bert-mini", "data": "data/glue/SST-2.dev.tsv", "column": "sentence",
               "rows": rows, "logits": [o["logits"] for o in out], "labels": [o["label"] for o in out]},
              open(os.path.join(OUT, "classify_sst2.json"), "w"))
    xnli = tsv(os.path.join(SHARED, "data/xnli/xnli.my.dev.tsv"))
    rows = list(range(0, 120, 10))
    out = run(binary, ["classify", "models/xnli-xlmr-mini", "--logits"],
              [{"text": xnli[i]["sentence1_en"], "text_pair": xnli[i]["sentence2_en"]} for i in rows])
    json.dump({"model": "models/xnli-xlmr-mini", "data": "data/xnli/xnli.my.dev.tsv",
               "column": "sentence1_en", "pair_column": "sentence2_en", "rows": rows,
               "logits": [o["logits"] for o in out], "labels": [o["label"] for o in out]},
              open(os.path.join(OUT, "classify_xnli.json"), "w"))
    rows = list(range(3, 163, 10))
    for name, flags in (("embed_stsb_mean", []), ("embed_stsb_cls_norm", ["--pooling", "cls", "--normalize"])):
        out = run(binary, ["embed", "models/stsb-bert-mini"] + flags, [{"text": sst[i]["sentence"]} for i in rows])
        json.dump({"model": "models/stsb-bert-mini", "data": "data/glue/SST-2.dev.tsv", "column": "sentence",
                   "rows": rows, "flags": flags, "embeddings": [o["embedding"] for o in out]},
                  open(os.path.join(OUT, name + ".json"), "w"))
    squad = json.load(open(os.path.join(SHARED, "data/squad/dev-v1.1.rebuilt.json")))["data"]
    picks, lines = [], []
    for a, art in enumerate(squad[:4]):
        for p, par in enumerate(art["paragraphs"][:2]):
            for q, qa in enumerate(par["qas"][:2]):
                picks.append([a, p, q])
                lines.append({"question": qa["question"], "context": par["context"]})
    out = run(binary, ["qa", "models/squad-bert-mini"], lines)
    long_ctx = [" ".join(par["context"] for par in squad[0]["paragraphs"][:6])]
    out_long = run(binary, ["qa", "models/squad-bert-mini", "--max-length", "96", "--stride", "24"],
                   [{"question": squad[0]["paragraphs"][5]["qas"][0]["question"], "context": long_ctx[0]}])
    json.dump({"model": "models/squad-bert-mini", "data": "data/squad/dev-v1.1.rebuilt.json",
               "picks": picks, "answers": [[o["start_byte"], o["end_byte"], o["score"]] for o in out],
               "long": {"paragraphs": 6, "question": [0, 5, 0], "max_length": 96, "stride": 24,
                        "answer": [out_long[0]["start_byte"], out_long[0]["end_byte"], out_long[0]["score"]]}},
              open(os.path.join(OUT, "qa_squad.json"), "w"))
    # ner: the golden token classifier with the bert_e2e tokenizer (as test_cli builds it)
    tmp = tempfile.mkdtemp()
    g = os.path.join(SHARED, "golden/models")
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(g, "bert_tokcls", f), tmp)
    for f in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(g, "bert_e2e", f), tmp)
    cfg = json.load(open(os.path.join(tmp, "config.json")))
    cfg["id2label"] = {str(i): l for i, l in enumerate(NER_LABELS)}
    cfg.pop("label2id", None)
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
    rows = list(range(1, 41, 5))
    res = {}
    for name, flags in (("default", []), ("windows", ["--max-length", "24", "--stride", "6"])):
        out = run(binary, ["ner", tmp] + flags, [{"text": sst[i]["sentence"]} for i in rows])
        res[name] = {"flags": flags,
                     "words": [[[w["entity"], w["score"], w["start_byte"], w["end_byte"]] for w in o["words"]] for o in out],
                     "entities": [[[x["entity_group"], x["score"], x["start_byte"], x["end_byte"]] for x in o["entities"]]
                                  for o in out]}
    shutil.rmtree(tmp)
    json.dump({"model": "golden bert_tokcls + bert_e2e tokenizer", "labels": NER_LABELS, "data": "data/glue/SST-2.dev.tsv",
               "column": "sentence", "rows": rows, "runs": res}, open(os.path.join(OUT, "ner.json"), "w"))
    print("wrote", OUT)


if __name__ == "__main__":
    main(sys.argv[1])
