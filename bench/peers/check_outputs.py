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


class NotPrepared(Exception):
    """A peer's model file this run did not prepare."""


def masked_maxdiff(a, b, mask):
    m = mask.astype(bool)
    return float(np.abs(a[m] - b[m]).max())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, type=common.check_model, help="a random model's name or a folder")
    p.add_argument("--bert8", default=os.path.join(common.REPO, "build", "bert8"))
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--calib-n", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--systems", default="", help="also check these of the new peers (llama.cpp, CTranslate2, "
                                                  "fastembed), through runner.py --dump in their own Python")
    a = p.parse_args()
    spec = common.spec_of(a.model)
    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    import torch

    torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import prepare

    model = prepare.load_torch_model(a, attn="sdpa")
    feeds_list = common.check_batches(spec)
    with torch.inference_mode():
        ref = [model(**{k: torch.from_numpy(v) for k, v in f.items()}).last_hidden_state.numpy() for f in feeds_list]
    out = {"reference": "PyTorch eager FP32", "batches": [list(f["input_ids"].shape) for f in feeds_list],
           "max_abs_ref": float(max(np.abs(r).max() for r in ref)), "max_abs_diff": {}}

    def record(name, fn):
        try:
            diffs = [masked_maxdiff(fn(f), r, f["attention_mask"]) for f, r in zip(feeds_list, ref)]
            out["max_abs_diff"][name] = max(diffs)
        except NotPrepared as e:
            out["max_abs_diff"][name] = f"not checked: {e}"
        except Exception as e:  # noqa: BLE001
            out["max_abs_diff"][name] = f"not checked: {type(e).__name__}: {str(e)[:200]}"

    def prepared(name, what):
        path = os.path.join(art, name)
        if not os.path.exists(path):  # prepare.py makes only what --systems asks for
            raise NotPrepared(f"{name} was not prepared (--systems named no {what} system)")
        return path

    def ort_fp32(f):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        s = ort.InferenceSession(prepared("model.opt.onnx", "ONNX Runtime"), so, providers=["CPUExecutionProvider"])
        names = {i.name for i in s.get_inputs()}
        return s.run(None, {k: v for k, v in f.items() if k in names})[0]

    def ov_fp32(f):
        import openvino as ov

        core = ov.Core()
        cm = core.compile_model(core.read_model(prepared("ov.fp32.xml", "OpenVINO")), "CPU",
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

    # the new peers run in their own venvs: runner.py --dump writes their outputs of the same batches
    from runner import NEEDS, SYSTEMS

    def dumped(system):
        py = common.family_python(SYSTEMS[system][0], sys.executable)
        if py is None:
            raise RuntimeError(f"{common.FAMILY_VENV[SYSTEMS[system][0]]} not installed")
        if not os.path.exists(os.path.join(art, "status.json")):
            raise RuntimeError("not prepared")
        with open(os.path.join(art, "status.json")) as f:
            st = json.load(f).get(NEEDS[system], {})
        if not st.get("ok"):
            raise RuntimeError(f"preparation '{NEEDS[system]}' failed: {st.get('reason', 'not run')}")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "out.npz")
            r = subprocess.run([py, os.path.join(common.HERE, "runner.py"), "--system", system, "--model", a.model,
                                "--shape", "1", "--seq", str(a.seq), "--threads", str(a.threads), "--calib-n",
                                str(a.calib_n), "--dump", path], capture_output=True, text=True, timeout=1800)
            if not os.path.exists(path):
                lines = [ln for ln in (r.stdout + r.stderr).strip().splitlines() if ln.strip()]
                raise RuntimeError(lines[-1][-300:] if lines else f"exit code {r.returncode}")
            z = np.load(path)
            return [z[f"b{i}"] for i in range(len(feeds_list))]

    def mean_pool(h, mask):
        m = mask[..., None].astype(np.float32)
        return (h * m).sum(1) / m.sum(1)

    def min_cos(x, y):
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        y = y / np.linalg.norm(y, axis=-1, keepdims=True)
        return float((x * y).sum(-1).min())

    wanted = [u for u in a.systems.split(",") if u in SYSTEMS and SYSTEMS[u][0] in ("llamacpp", "ct2", "fastembed")]
    text_ref = None
    for u in wanted:
        prec = SYSTEMS[u][1]
        try:
            if SYSTEMS[u][0] == "fastembed":
                # text in: the texts the runner builds from each row's length, through PyTorch with the
                # checkpoint's tokenizer, mean pooled and normalized as fastembed is told to
                if text_ref is None:
                    tok = prepare.load_tokenizer(spec, common.model_dir(a.model))
                    text_ref = []
                    for f in feeds_list:
                        texts = [" ".join(["hello"] * (int(n) - 2)) for n in f["attention_mask"].sum(1)]
                        enc = tok(texts, padding=True, return_tensors="np")
                        fd = {k: torch.from_numpy(enc[k].astype(np.int64)) for k in ("input_ids", "attention_mask")}
                        if common.has_token_types(spec):
                            fd["token_type_ids"] = torch.zeros_like(fd["input_ids"])
                        with torch.inference_mode():
                            h = model(**fd).last_hidden_state.numpy()
                        v = mean_pool(h, enc["attention_mask"])
                        text_ref.append(v / np.linalg.norm(v, axis=-1, keepdims=True))
                got = dumped(u)
                if prec == "fp32":
                    out["max_abs_diff"][u] = max(float(np.abs(g - r).max()) for g, r in zip(got, text_ref))
                else:
                    out.setdefault("int8_min_cosine", {})[u] = min(min_cos(g, r) for g, r in zip(got, text_ref))
                continue
            got = dumped(u)
            if prec == "fp32":
                out["max_abs_diff"][u] = max(masked_maxdiff(g, r, f["attention_mask"])
                                             for g, r, f in zip(got, ref, feeds_list))
            else:
                out.setdefault("int8_min_cosine", {})[u] = min(
                    min_cos(mean_pool(g, f["attention_mask"]), mean_pool(r, f["attention_mask"]))
                    for g, r, f in zip(got, ref, feeds_list))
        except Exception as e:  # noqa: BLE001
            key = "max_abs_diff" if prec == "fp32" else "int8_min_cosine"
            out.setdefault(key, {})[u] = f"not checked: {type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
