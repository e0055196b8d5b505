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
    "llamacpp-f32": ("llamacpp", "fp32", "llama.cpp (llama-cpp-python) GGUF F32, embedding API, mean pooling"),
    "llamacpp-q8": ("llamacpp", "int8", "llama.cpp (llama-cpp-python) GGUF Q8_0, embedding API, mean pooling"),
    "ct2-fp32": ("ct2", "fp32", "CTranslate2 Encoder, float32"),
    "ct2-int8": ("ct2", "int8", "CTranslate2 Encoder, int8 weights, compute_type int8"),
    "ct2-int8-sq": ("ct2", "int8", "CTranslate2 Encoder, int8 with SmoothQuant activation scales"),
    "fastembed-fp32": ("fastembed", "fp32", "fastembed TextEmbedding (text in, mean pooled), FP32 ONNX export"),
    "fastembed-int8": ("fastembed", "int8",
                       "fastembed TextEmbedding (text in, mean pooled), dynamic-int8 ONNX (ONNX Runtime)"),
}

# the preparation step whose artifact each system needs
NEEDS = {
    "ort-fp32": "ort-opt", "ort-int8-dynamic": "ort-dyn", "ort-int8-static": "ort-static",
    "ov-fp32": "ov", "ov-int8-nncf": "nncf",
    "torchao-sq-static": "torchao-sq-static", "torchao-sq-dynamic": "torchao-sq-dynamic",
    "llamacpp-f32": "gguf-f32", "llamacpp-q8": "gguf-q8", "ct2-fp32": "ct2-fp32", "ct2-int8": "ct2-int8",
    "ct2-int8-sq": "ct2-int8-sq", "fastembed-fp32": "fastembed", "fastembed-int8": "fastembed",
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


def _rows(feeds):
    """A padded feed dict as lists of real ids per row (and token types), for the id-list APIs."""
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    return [[int(t) for t, m in zip(r, mr) if m] for r, mr in zip(ids, mask)]


def make_llamacpp(a, spec, art):
    """llama.cpp through llama-cpp-python's context, fed token ids (the same ids as every other
    system) the way Llama.embed feeds its tokenized texts: one sequence id per row, rows packed into
    decodes of at most n_batch tokens (512, the binding's default, or the longest row). Every row
    of one decode attends within its own sequence, but llama.cpp computes the attention scores over
    the whole decode under a mask, so larger decodes cost more."""
    import llama_cpp
    import numpy as np

    path = {"llamacpp-f32": "model.f32.gguf", "llamacpp-q8": "model.q8_0.gguf"}[a.system]
    pooling = "none" if a.dump else "mean"
    n = max(512, a.longest)
    pt = {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "none": llama_cpp.LLAMA_POOLING_TYPE_NONE}[pooling]
    llm = llama_cpp.Llama(model_path=os.path.join(art, path), embedding=True, n_ctx=n, n_batch=n, n_ubatch=n,
                          n_threads=a.threads, n_threads_batch=a.threads, pooling_type=pt, verbose=False)
    n_embd = llm.n_embd()
    n_seq_max = llm.context_params.n_seq_max

    def decode(rows, out):
        llm._batch.reset()
        for i, r in enumerate(rows):
            llm._batch.add_sequence(r, i, True)
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        if pooling == "none":
            total = sum(len(r) for r in rows)
            ptr = llama_cpp.llama_get_embeddings(llm._ctx.ctx)
            flat = np.ctypeslib.as_array(ptr, shape=(total * n_embd,)).reshape(total, n_embd).copy()
            pos = 0
            for r in rows:
                out.append(flat[pos : pos + len(r)])
                pos += len(r)
        else:
            out += [np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, i), shape=(n_embd,)).copy()
                    for i in range(len(rows))]

    def run(feeds):
        out, chunk, used = [], [], 0
        for r in _rows(feeds):
            if chunk and (used + len(r) > n or len(chunk) >= n_seq_max):
                decode(chunk, out)
                chunk, used = [], 0
            chunk.append(r)
            used += len(r)
        if chunk:
            decode(chunk, out)
        return out

    return run, {"llama_cpp_python": llama_cpp.__version__, "file": path, "pooling": pooling, "n_batch": n,
                 "system_info": llama_cpp.llama_print_system_info().decode()[:300]}


def make_ct2(a, spec, art):
    import ctranslate2
    import numpy as np

    kind = {"ct2-fp32": "fp32", "ct2-int8": "int8", "ct2-int8-sq": "int8-sq"}[a.system]
    compute = "float32" if kind == "fp32" else "int8"
    enc = ctranslate2.Encoder(os.path.join(art, f"ct2.{kind}"), device="cpu", compute_type=compute,
                              inter_threads=1, intra_threads=a.threads)

    def run(feeds):
        ids = feeds["input_ids"].astype(np.int32)
        lengths = feeds["attention_mask"].sum(1).astype(np.int32)
        types = feeds.get("token_type_ids")
        out = enc.forward_batch(ctranslate2.StorageView.from_array(ids), ctranslate2.StorageView.from_array(lengths),
                                token_type_ids=None if types is None else types.tolist())
        return np.array(out.last_hidden_state)

    return run, {"ctranslate2": ctranslate2.__version__, "model": f"ct2.{kind}", "compute_type": compute,
                 "intra_threads": a.threads}


def fastembed_model(art, spec, threads, int8=True):
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = f"bert8-peers/{'int8' if int8 else 'fp32'}-{spec['hidden']}"
    TextEmbedding.add_custom_model(model=name, pooling=PoolingType.MEAN, normalization=True,
                                   sources=ModelSource(hf=name), dim=spec["hidden"],
                                   model_file="model.int8.onnx" if int8 else "model.onnx")
    return TextEmbedding(model_name=name, specific_model_path=os.path.join(art, "fastembed"), threads=threads)


def make_fastembed(a, spec, art):
    """fastembed takes text: each row is a text that its tokenizer turns into exactly the row's
    length ("hello" repeated: one WordPiece token each, plus [CLS] and [SEP])."""
    import fastembed

    int8 = a.system == "fastembed-int8"
    model = fastembed_model(art, spec, a.threads, int8=int8)
    texts_of = {}

    def run(feeds):
        key = feeds["attention_mask"].sum(1).tobytes()
        if key not in texts_of:
            texts_of[key] = [" ".join(["hello"] * (int(n) - 2)) for n in feeds["attention_mask"].sum(1)]
        texts = texts_of[key]
        return list(model.embed(texts, batch_size=len(texts)))

    return run, {"fastembed": fastembed.__version__, "file": f"fastembed/model{'.int8' if int8 else ''}.onnx", "threads": a.threads,
                 "input": "text ('hello' x (length - 2)), tokenized by fastembed, mean pooled, normalized"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--system", required=True, choices=sorted(SYSTEMS))
    p.add_argument("--model", required=True, type=common.check_model, help="a random model's name or a folder")
    p.add_argument("--shape", required=True, help="batch size, or 'mix'")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--mix-batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calib-n", type=int, default=256)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--budget", type=float, default=10.0, help="seconds of timed calls (after min-iters)")
    p.add_argument("--min-iters", type=int, default=5)
    p.add_argument("--max-iters", type=int, default=200)
    p.add_argument("--dump", help="no timing: write the outputs of check_outputs.py's batches to this .npz "
                                  "(per-token rows padded with zeros; fastembed: its pooled vectors)")
    a = p.parse_args()
    shape = common.parse_shape(a.shape, a.seq)
    a.longest = shape[1] if shape else 512
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
        spec = common.spec_of(a.model)
        art = common.artifacts_dir(a.model, a.seq, a.calib_n)
        make = {"ort": make_ort, "ov": make_ov, "torch": make_torch, "llamacpp": make_llamacpp, "ct2": make_ct2,
                "fastembed": make_fastembed}[family]
        run, info = make(a, spec, art)
        out["info"] = info
        out["setup_s"] = round(time.time() - t_start, 2)
        if a.dump:
            import numpy as np

            arrays = {}
            for i, f in enumerate(common.check_batches(spec)):
                y = run(f)
                if isinstance(y, list) and y and getattr(y[0], "ndim", 1) == 2:  # per-token rows
                    pad = np.zeros(f["input_ids"].shape + (y[0].shape[1],), dtype=np.float32)
                    for k, r in enumerate(y):
                        pad[k, : len(r)] = r
                    y = pad
                elif isinstance(y, list) and y and hasattr(y[0], "ndim"):
                    y = np.stack(y)
                elif isinstance(y, list):
                    y = y[0]
                arrays[f"b{i}"] = np.asarray(y, dtype=np.float32)
            np.savez(a.dump, **arrays)
            out["ok"] = True
            print(json.dumps(out))
            return
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
            B, S = shape
            feeds = common.fixed_inputs(spec, B, S)
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
