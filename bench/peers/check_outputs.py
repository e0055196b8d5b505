"""Sanity check before timing: do the FP32 systems compute the same function of the same ids?

  python check_outputs.py --model tiny-bert --bert8 build/bert8

Runs a 2 x 16 batch of bert8's timing ids (and a padded SST-2 batch, to exercise the mask) through
PyTorch eager FP32 (the reference), the ONNX Runtime FP32 graph, the OpenVINO FP32 IR and
`bert8 forward`, and prints one JSON line: the largest absolute difference of last_hidden_state
from PyTorch's, per system (over the rows' real tokens only), or the reason a system could not run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def batches(spec):
    out = [common.fixed_inputs(spec, 2, 16)]
    if os.path.exists(common.lengthmix_path()):
        with open(common.lengthmix_path()) as f:
            rows = json.load(f)["ids"][:3]
        out.append(common.pad_batch(spec, rows))
    return out


def masked_maxdiff(a, b, mask):
    m = mask.astype(bool)
    return float(np.abs(a[m] - b[m]).max())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, choices=sorted(common.MODELS))
    p.add_argument("--bert8", default=os.path.join(common.REPO, "build", "bert8"))
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--calib-n", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    spec = common.MODELS[a.model]
    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    import torch

    torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import prepare

    model = prepare.load_torch_model(a, attn="sdpa")
    feeds_list = batches(spec)
    with torch.inference_mode():
        ref = [model(**{k: torch.from_numpy(v) for k, v in f.items()}).last_hidden_state.numpy() for f in feeds_list]
    out = {"reference": "PyTorch eager FP32", "batches": [list(f["input_ids"].shape) for f in feeds_list],
           "max_abs_ref": float(max(np.abs(r).max() for r in ref)), "max_abs_diff": {}}

    def record(name, fn):
        try:
            diffs = [masked_maxdiff(fn(f), r, f["attention_mask"]) for f, r in zip(feeds_list, ref)]
            out["max_abs_diff"][name] = max(diffs)
        except Exception as e:  # noqa: BLE001
            out["max_abs_diff"][name] = f"not checked: {type(e).__name__}: {str(e)[:200]}"

    def ort_fp32(f):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        s = ort.InferenceSession(os.path.join(art, "model.opt.onnx"), so, providers=["CPUExecutionProvider"])
        names = {i.name for i in s.get_inputs()}
        return s.run(None, {k: v for k, v in f.items() if k in names})[0]

    def ov_fp32(f):
        import openvino as ov

        core = ov.Core()
        cm = core.compile_model(core.read_model(os.path.join(art, "ov.fp32.xml")), "CPU",
                                {"INFERENCE_NUM_THREADS": a.threads, "INFERENCE_PRECISION_HINT": "f32"})
        names = {q.get_any_name() for q in cm.inputs}
        return cm({k: v for k, v in f.items() if k in names})[0]

    def bert8_fp32(f):
        if not os.path.exists(a.bert8):
            raise FileNotFoundError(a.bert8)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as t:
            json.dump({k: v.tolist() for k, v in f.items()}, t)
        try:
            r = subprocess.run([a.bert8, "forward", common.model_dir(a.model), "--input", t.name, "--threads",
                                str(a.threads)], capture_output=True, text=True, timeout=600)
        finally:
            os.unlink(t.name)
        if r.returncode:
            raise RuntimeError(r.stderr.strip()[-200:])
        return np.array(json.loads(r.stdout)["last_hidden_state"], dtype=np.float32)

    record("ort-fp32", ort_fp32)
    record("ov-fp32", ov_fp32)
    record("bert8-fp32", bert8_fp32)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
