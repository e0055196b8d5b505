"""Check that hf_models.py reproduces the transformers goldens and safetensors_io the file bytes.

Run: /usr/bin/python3 train/test_parity.py   (exit status 0 when every check passes)
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_models  # noqa: E402
import safetensors_io  # noqa: E402

GOLDEN = os.path.join(HERE, "..", "..", "shared", "golden", "models")
FOLDERS = ["bert_seqcls", "bert_qa", "distilbert_seqcls", "distilbert_qa", "xlmr_seqcls",
           "xlmr_qa", "xlmr_e2e"]
TOL = 1e-4


def load_golden(name):
    d = os.path.join(GOLDEN, name)
    cfg = json.load(open(os.path.join(d, "config.json")))
    tensors, _, _ = safetensors_io.read(os.path.join(d, "model.safetensors"))
    model = hf_models.build(cfg)
    sd = {k: torch.from_numpy(v) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    # The only keys transformers leaves out of task checkpoints are ones it does not use.
    missing = [k for k in missing if not k.endswith("pooler.dense.weight") and not k.endswith("pooler.dense.bias")]
    return model.eval(), cfg, missing, unexpected, json.load(open(os.path.join(d, "cases.json")))


def check_folder(name):
    model, cfg, missing, unexpected, cases = load_golden(name)
    fails = []
    if missing or unexpected:
        fails.append("%s: state_dict mismatch missing=%s unexpected=%s" % (name, missing, unexpected))
    worst = 0.0
    ncmp = 0
    with torch.no_grad():
        for c in cases["cases"]:
            ids = torch.tensor(c["input_ids"])
            mask = torch.tensor(c["attention_mask"])
            tt = torch.tensor(c["token_type_ids"]) if "token_type_ids" in c else None
            out = model(ids, mask, tt)
            got = {}
            if isinstance(out, tuple):
                got["start_logits"], got["end_logits"] = out
            else:
                got["logits"] = out
            for key, ref in c["outputs"].items():
                if key not in got:
                    continue
                want = torch.tensor(ref["data"], dtype=torch.float32).view(ref["shape"])
                g = got[key]
                if g.dim() == 2 and key != "logits":  # [B,T]: compare valid positions only
                    sel = mask.bool()
                    g, want = g[sel], want[sel]
                worst = max(worst, (g - want).abs().max().item())
                if not bool(((g - want).abs() <= TOL + TOL * want.abs()).all()):
                    fails.append("%s/%s/%s: outside |a-b| <= %g + %g|b|" % (name, c["name"], key, TOL, TOL))
                ncmp += 1
    if ncmp == 0:
        fails.append("%s: no outputs compared" % name)
    print("%-18s cases=%d outputs=%d max_abs_err=%.2e %s" % (name, len(cases["cases"]), ncmp, worst,
                                                        "FAIL" if fails else "ok"))
    return fails


def check_state_dict_names(name):
    """The names our modules produce must equal the golden file's tensor names."""
    model, cfg, _, _, cases = load_golden(name)
    ours = set(model.state_dict().keys())
    theirs = set(cases["safetensors_tensors"].keys())
    extra = sorted(ours - theirs)
    # transformers drops the unused pooler from QA/XLM-R task models; our classes do too.
    if extra or (theirs - ours):
        return ["%s: names differ: ours-only %s, golden-only %s" % (name, extra, sorted(theirs - ours))]
    return []


def check_safetensors_bytes():
    fails = []
    for name in sorted(os.listdir(GOLDEN)):
        p = os.path.join(GOLDEN, name, "model.safetensors")
        t, meta, order = safetensors_io.read(p)
        b = safetensors_io.serialize(t, meta)
        if b != open(p, "rb").read():
            fails.append("%s: re-serialized safetensors differs" % name)
    print("safetensors byte-exact rewrite of %d golden files: %s" % (len(os.listdir(GOLDEN)),
                                                                   "FAIL" if fails else "ok"))
    return fails


def main():
    torch.set_num_threads(1)
    fails = check_safetensors_bytes()
    for f in FOLDERS:
        fails += check_folder(f)
        fails += check_state_dict_names(f)
    for f in fails:
        print("FAIL:", f)
    print("parity: %s" % ("FAILED" if fails else "all ok"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
