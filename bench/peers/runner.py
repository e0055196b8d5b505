"""Times one system on one model and one shape, in this (fresh) process.

  python runner.py --system ort-int8-static --model bert-base --shape 8 --seq 128 --threads 2
  python runner.py --system torch-fp32 --model bert-base --shape mix

--shape is a batch size (fixed B x seq batch of bert8's timing ids, mask of ones, types of zeros)
or "mix" (the SST-2 dev length mix: batches of 8 consecutive sentences, each padded to its
longest; one timed iteration is one pass over the whole set). The last stdout line is one JSON
object: {"ok": true, "seq_per_s", "median_s", "times_s", ...} or {"ok": false, "reason"}.
bert8 is not run here: the driver calls its CLI directly.
"""
import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# system -> (family, precision, description)
SYSTEMS = {
    "ort-fp32": ("ort", "fp32", "ONNX Runtime FP32 (transformer-optimized graph)"),
    "ort-int8-dynamic": ("ort", "int8", "ONNX Runtime quantize_dynamic INT8, per-channel"),
    "ort-int8-static": ("ort", "int8", "ONNX Runtime quantize_static QDQ INT8, per-channel, SST-2 calibrated"),
    "ov-fp32": ("ov", "fp32", "OpenVINO FP32 (inference precision f32)"),
    "ov-int8-nncf": ("ov", "int8", "OpenVINO INT8, NNCF post-training quantization, SST-2 calibrated"),
    "torch-fp32": ("torch", "fp32", "PyTorch eager FP32 (SDPA attention)"),
    "torch-fp32-compile": ("torch", "fp32", "PyTorch FP32, torch.compile Inductor, freezing"),
    "torch-int8-dynamic": ("torch", "int8", "PyTorch eager torch.ao quantize_dynamic INT8 (Linear)"),
    "torchao-sq-static": ("torch", "int8", "torchao SmoothQuant W8A8 static, torch.compile Inductor, freezing"),
    "torchao-sq-dynamic": ("torch", "int8", "torchao SmoothQuant W8A8 dynamic, torch.compile Inductor, freezing"),
    "torchao-w8a8-dynamic": ("torch", "int8",
                             "torchao int8 dynamic act + int8 weight (no SmoothQuant), torch.compile, freezing"),
}

# the preparation step whose artifact each system needs
NEEDS = {
    "ort-fp32": "ort-opt", "ort-int8-dynamic": "ort-dyn", "ort-int8-static": "ort-static",
    "ov-fp32": "ov", "ov-int8-nncf": "nncf",
    "torchao-sq-static": "torchao-sq-static", "torchao-sq-dynamic": "torchao-sq-dynamic",
}


def make_ort(a, spec, art):
    import onnxruntime as ort

    path = {"ort-fp32": "model.opt.onnx", "ort-int8-dynamic": "ort.int8dyn.onnx",
            "ort-int8-static": "ort.int8qdq.onnx"}[a.system]
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(os.path.join(art, path), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}

    def run(feeds):
        return sess.run(None, {k: v for k, v in feeds.items() if k in names})

    return run, {"onnxruntime": ort.__version__, "file": path}


def make_ov(a, spec, art):
    import openvino as ov

    path = {"ov-fp32": "ov.fp32.xml", "ov-int8-nncf": "ov.int8.xml"}[a.system]
    core = ov.Core()
    cfg = {"INFERENCE_NUM_THREADS": a.threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
           "INFERENCE_PRECISION_HINT": "f32"}
    cm = core.compile_model(core.read_model(os.path.join(art, path)), "CPU", cfg)
    req = cm.create_infer_request()
    names = {p.get_any_name() for p in cm.inputs}

    def run(feeds):
        req.infer({k: v for k, v in feeds.items() if k in names})
        return req

    props = {}
    for k in ("INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT", "NUM_STREAMS", "PERFORMANCE_HINT"):
        try:
            props[k] = str(cm.get_property(k))
        except Exception:  # noqa: BLE001
            pass
    return run, {"openvino": ov.__version__, "file": path, "compiled_properties": props}


def make_torch(a, spec, art):
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import prepare

    info = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if a.system in ("torch-fp32", "torch-fp32-compile"):
        model = prepare.load_torch_model(a, attn="sdpa")
    elif a.system == "torch-int8-dynamic":
        model = prepare.load_torch_model(a, attn="sdpa")
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        info["engine"] = torch.backends.quantized.engine
    elif a.system == "torchao-w8a8-dynamic":
        import torchao

        model, desc = prepare.torchao_quantize(a, spec, "w8a8-dynamic")
        info.update(torchao=torchao.__version__, config=desc)
    else:
        import torchao

        kind = a.system.replace("torchao-", "")
        model = torch.load(os.path.join(art, f"torchao.{kind}.pt"), weights_only=False)
        info["torchao"] = torchao.__version__
    model.eval()
    fwd = model
    if a.system.startswith("torchao") or a.system == "torch-fp32-compile":
        import torch._inductor.config as icfg

        icfg.freezing = True
        # fixed shapes compile once per shape; the length mix needs one dynamic-shape graph
        # (a static one per distinct padded length would spend minutes in compilation)
        fwd = torch.compile(model, dynamic=(a.shape == "mix"))
        info["compile"] = f"torch.compile(inductor, freezing=True, dynamic={a.shape == 'mix'})"

    def run(feeds):
        with torch.inference_mode():
            return fwd(**{k: torch.from_numpy(v) for k, v in feeds.items()})

    return run, info


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    p.add_argument("--model", required=True, choices=sorted(common.MODELS))
    p.add_argument("--shape", required=True, help="batch size, or 'mix'")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--mix-batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calib-n", type=int, default=256)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--budget", type=float, default=10.0, help="seconds of timed calls (after min-iters)")
    p.add_argument("--min-iters", type=int, default=5)
    p.add_argument("--max-iters", type=int, default=200)
    a = p.parse_args()
    out = {"system": a.system, "model": a.model, "shape": a.shape, "seq": a.seq, "threads": a.threads,
           "pid": os.getpid()}
    t_start = time.time()
    try:
        family = SYSTEMS[a.system][0]
        if family == "torch":  # only there: ORT and OpenVINO run their own thread pools
            import torch

            torch.set_num_threads(a.threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass
        spec = common.MODELS[a.model]
        art = common.artifacts_dir(a.model, a.seq, a.calib_n)
        make = {"ort": make_ort, "ov": make_ov, "torch": make_torch}[family]
        run, info = make(a, spec, art)
        out["info"] = info
        out["setup_s"] = round(time.time() - t_start, 2)
        if a.shape == "mix":
            batches, n = common.lengthmix_batches(spec, a.mix_batch)

            def fn():
                for f in batches:
                    run(f)
            seqs = n
            out["mix"] = {"sentences": n, "batch": a.mix_batch, "batches": len(batches)}
            # the warm-up pass also compiles every distinct shape (torch.compile) before timing
            t0 = time.perf_counter()
            fn()
            out["first_pass_s"] = round(time.perf_counter() - t0, 2)
            times = common.time_fn(fn, max(a.warmup - 1, 0), a.budget, max(1, min(a.min_iters, 3)), a.max_iters)
        else:
            B = int(a.shape)
            feeds = common.fixed_inputs(spec, B, a.seq)
            t0 = time.perf_counter()
            run(feeds)
            out["first_call_s"] = round(time.perf_counter() - t0, 2)
            times = common.time_fn(lambda: run(feeds), max(a.warmup - 1, 0), a.budget, a.min_iters, a.max_iters)
            seqs = B
        out.update(common.summarize(times, seqs))
        out["ok"] = True
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        out["ok"] = False
        out["reason"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:400] if str(e).strip() else ''}"
    out["wall_s"] = round(time.time() - t_start, 2)
    sys.stdout.flush()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
