"""One preparation step per call (the driver runs each in its own process and records failures):

  checkpoint  random-init Hugging Face checkpoint + tokenizer files           -> work/models/NAME
  lengthmix   SST-2 dev ids and lengths under bert-base-uncased             -> work/lengthmix/
  calib       first N SST-2 train90 sentences: text for bert8, padded ids   -> ARTIFACTS/calib.{txt,npz}
  onnx        FP32 ONNX export (dynamic batch and sequence)                 -> ARTIFACTS/model.onnx
  ort-opt     ONNX Runtime transformer optimizer (fused attention, LN, GELU)-> ARTIFACTS/model.opt.onnx
  ort-dyn     quantize_dynamic, per-channel int8 weights                     -> ARTIFACTS/ort.int8dyn.onnx
  ort-static  quantize_static, QDQ, per-channel weights, calibrated          -> ARTIFACTS/ort.int8qdq.onnx
  ov          openvino.convert_model of the ONNX export, FP32 IR             -> ARTIFACTS/ov.fp32.xml
  nncf        NNCF post-training quantization of the IR (transformer type)   -> ARTIFACTS/ov.int8.xml
  torchao-sq-static / torchao-sq-dynamic
              torchao SmoothQuant (alpha 0.5) calibrated, pickled module     -> ARTIFACTS/torchao.*.pt
  gguf-f32 / gguf-q8
              llama.cpp convert_hf_to_gguf.py, F32 and Q8_0                  -> ARTIFACTS/model.{f32,q8_0}.gguf
  ct2-fp32 / ct2-int8 / ct2-int8-sq
              CTranslate2 TransformersConverter (int8; int8 with SmoothQuant
              activation scales)                                            -> ARTIFACTS/ct2.*/
  fastembed   model.onnx + dynamic-int8 model.int8.onnx + tokenizer files   -> ARTIFACTS/fastembed/
  bert8-int8  `bert8 quantize` with its defaults (the latency columns)      -> ARTIFACTS/bert8.int8/

Each step prints one JSON line {"step", "ok", "reason"?, "notes"?} as its last stdout line.
"""
import argparse
import json
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SEED = 20240601


# ---- checkpoint, tokenizer, data ----------------------------------------------------------------

def step_checkpoint(a, spec):
    import torch
    import transformers as tf

    out = common.model_dir(a.model)
    if spec.get("real"):
        if not any(os.path.exists(os.path.join(out, f)) for f in ("model.safetensors", "pytorch_model.bin")):
            raise FileNotFoundError(f"{out}: no model.safetensors or pytorch_model.bin")
        return {"notes": f"real checkpoint {out}"}
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return {"notes": "exists"}
    torch.manual_seed(SEED)
    H, L, heads, I, V, P = (spec[k] for k in ("hidden", "layers", "heads", "inter", "vocab", "maxpos"))
    if spec["arch"] == "bert":
        cfg = tf.BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=heads,
                            intermediate_size=I, max_position_embeddings=P, type_vocab_size=2, pad_token_id=0)
        model = tf.BertModel(cfg)
    elif spec["arch"] == "distilbert":
        cfg = tf.DistilBertConfig(vocab_size=V, dim=H, n_layers=L, n_heads=heads, hidden_dim=I,
                                  max_position_embeddings=P, pad_token_id=0)
        model = tf.DistilBertModel(cfg)
    else:
        cfg = tf.XLMRobertaConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=heads,
                                  intermediate_size=I, max_position_embeddings=P, type_vocab_size=1,
                                  pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)
        model = tf.XLMRobertaModel(cfg)
    model.eval()
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
    except TypeError:  # transformers 5 always writes safetensors and dropped the argument
        model.save_pretrained(tmp)
    if spec["arch"] == "xlmr":
        shutil.copy(os.path.join(common.SHARED, "tokenizers", "xlm-roberta.sentencepiece.rebuilt.model"),
                    os.path.join(tmp, "sentencepiece.bpe.model"))
    else:
        shutil.copy(os.path.join(common.SHARED, "tokenizers", "bert-base-uncased.vocab.txt"),
                    os.path.join(tmp, "vocab.txt"))
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer", "model_max_length": P}, f)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return {"notes": f"transformers {tf.__version__}, seed {SEED}"}


def load_tokenizer(spec, mdir):
    import transformers as tf

    if spec.get("real"):
        return tf.AutoTokenizer.from_pretrained(mdir)
    if spec["arch"] == "xlmr":
        return tf.XLMRobertaTokenizer.from_pretrained(mdir)
    return tf.BertTokenizer(vocab=os.path.join(mdir, "vocab.txt"), do_lower_case=True)


def read_tsv_sentences(path, limit=None):
    out = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col = header.index("sentence")
        for line in f:
            parts = line.rstrip("\n").split("\t")
            out.append(parts[col].strip())
            if limit and len(out) >= limit:
                break
    return out


def step_lengthmix(a, spec):
    import transformers as tf

    tok = tf.BertTokenizer(vocab=os.path.join(common.SHARED, "tokenizers", "bert-base-uncased.vocab.txt"),
                           do_lower_case=True)
    sents = read_tsv_sentences(os.path.join(common.SHARED, "data", "glue", "SST-2.dev.tsv"))
    ids = [tok(s)["input_ids"] for s in sents]
    lengths = [len(r) for r in ids]
    os.makedirs(os.path.dirname(common.lengthmix_path()), exist_ok=True)
    with open(common.lengthmix_path(), "w") as f:
        json.dump({"source": "SST-2.dev.tsv, bert-base-uncased (lowercase), with [CLS]/[SEP]",
                   "lengths": lengths, "ids": ids}, f)
    with open(common.lengthmix_path().replace(".json", ".lengths.txt"), "w") as f:
        f.write("".join(f"{n}\n" for n in lengths))
    return {"notes": f"{len(lengths)} sentences, mean length {sum(lengths) / len(lengths):.1f}, max {max(lengths)}"}


def step_calib(a, spec):
    import numpy as np

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    os.makedirs(art, exist_ok=True)
    sents = read_tsv_sentences(os.path.join(common.SHARED, "data", "glue", "SST-2.train90.tsv"), a.calib_n)
    # bert8 reads one text per line; a line starting with "{" would be parsed as JSON there
    sents = [s if not s.startswith("{") else " " + s for s in sents]
    with open(os.path.join(art, "calib.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in sents))
    tok = load_tokenizer(spec, common.model_dir(a.model))
    enc = tok(sents, padding="max_length", truncation=True, max_length=a.seq)
    ids = np.array(enc["input_ids"], dtype=np.int64)
    mask = np.array(enc["attention_mask"], dtype=np.int64)
    np.savez(os.path.join(art, "calib.npz"), input_ids=ids, attention_mask=mask,
             token_type_ids=np.zeros_like(ids))
    return {"notes": f"{len(sents)} sentences, padded to {a.seq}, mean real length {mask.sum(1).mean():.1f}"}


def calib_feeds(a, spec, rows=16):
    """The calibration set as a list of feed dicts of `rows` sequences each (int64, padded to seq)."""
    import numpy as np

    z = np.load(os.path.join(common.artifacts_dir(a.model, a.seq, a.calib_n), "calib.npz"))
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if common.has_token_types(spec) else [])
    n = z["input_ids"].shape[0]
    return [{k: z[k][i : i + rows] for k in names} for i in range(0, n, rows)]


# ---- ONNX, ONNX Runtime --------------------------------------------------------------------------

def load_torch_model(a, attn="eager"):
    import torch
    import transformers as tf

    m = tf.AutoModel.from_pretrained(common.model_dir(a.model), attn_implementation=attn, dtype=torch.float32)
    return m.eval()


def step_onnx(a, spec):
    import torch

    model = load_torch_model(a, attn="eager")
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if common.has_token_types(spec) else [])

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kw = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kw["token_type_ids"] = token_type_ids
            return self.m(**kw).last_hidden_state

    feeds = common.fixed_inputs(spec, 2, 16)
    args = tuple(torch.from_numpy(feeds[k]) for k in names)
    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    path = os.path.join(art, "model.onnx")
    errors = []
    # the TorchScript exporter gives the graph patterns that ORT's transformer fusions know best;
    # the dynamo exporter is the fallback
    for dynamo in (False, True):
        try:
            kw = dict(input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=dynamo)
            if dynamo:
                b, s = torch.export.Dim("batch"), torch.export.Dim("seq", max=spec["maxpos"] - 2)
                kw["dynamic_shapes"] = {k: {0: b, 1: s} for k in names}
                kw["opset_version"] = 18
            else:
                kw["dynamic_axes"] = {**{k: {0: "batch", 1: "seq"} for k in names},
                                      "last_hidden_state": {0: "batch", 1: "seq"}}
            with torch.no_grad():
                torch.onnx.export(Wrap(model), args, path, **kw)
            _consolidate_onnx(path)
            return {"notes": f"torch.onnx.export dynamo={dynamo}, opset {kw['opset_version']}, eager attention"}
        except Exception as e:  # noqa: BLE001
            errors.append(f"dynamo={dynamo}: {type(e).__name__}: {str(e)[:300]}")
    raise RuntimeError("ONNX export failed: " + " | ".join(errors))


def _consolidate_onnx(path):
    """Stores the weights inside the .onnx file (they fit under 2 GB) so later steps find them."""
    import onnx

    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=False)
    for f in os.listdir(os.path.dirname(path)):
        if f.startswith(os.path.basename(path)) and f != os.path.basename(path):
            os.remove(os.path.join(os.path.dirname(path), f))


def op_counts(path):
    import collections

    import onnx

    m = onnx.load(path, load_external_data=False)
    return dict(collections.Counter(n.op_type for n in m.graph.node).most_common())


def step_ort_opt(a, spec):
    from onnxruntime.transformers.optimizer import optimize_model

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    opt = optimize_model(os.path.join(art, "model.onnx"), model_type="bert", num_heads=spec["heads"],
                         hidden_size=spec["hidden"], opt_level=1, use_gpu=False, only_onnxruntime=False)
    opt.save_model_to_file(os.path.join(art, "model.opt.onnx"))
    c = op_counts(os.path.join(art, "model.opt.onnx"))
    fused = {k: v for k, v in c.items() if k in ("Attention", "MultiHeadAttention", "SkipLayerNormalization",
                                                  "EmbedLayerNormalization", "BiasGelu", "FastGelu", "Gelu",
                                                  "LayerNormalization")}
    return {"notes": f"onnxruntime.transformers optimize_model(model_type=bert, opt_level=1): fused ops {fused}"}


def step_ort_dyn(a, spec):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    src = os.path.join(art, "model.opt.onnx")
    if not os.path.exists(src):
        src = os.path.join(art, "model.onnx")
    import onnx

    # the fused graph has contrib ops (Attention, SkipLayerNormalization) that ONNX shape inference
    # cannot type; their weights are FP32, which DefaultTensorType says
    quantize_dynamic(src, os.path.join(art, "ort.int8dyn.onnx"), per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return {"notes": f"quantize_dynamic(per_channel=True, weight_type=QInt8) of {os.path.basename(src)}; "
                     f"ops {op_counts(os.path.join(art, 'ort.int8dyn.onnx'))}"}


def step_ort_static(a, spec):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    feeds = calib_feeds(a, spec)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

        def rewind(self):
            self.it = iter(feeds)

    errors = []
    # the plain export: ORT's QDQ quantizer has no rule for the fused Attention op, so on the fused
    # graph the Q/K/V projections would stay FP32; on the plain graph every MatMul gets QDQ
    # (the attention score and context MatMuls too). The fused graph is only the fallback.
    for name in ("model.onnx", "model.opt.onnx"):
        src = os.path.join(art, name)
        if not os.path.exists(src):
            continue
        pre = os.path.join(art, name.replace(".onnx", ".pre.onnx"))
        out = os.path.join(art, "ort.int8qdq.onnx")
        try:
            try:
                quant_pre_process(src, pre, skip_symbolic_shape=True)
            except Exception as e:  # noqa: BLE001
                errors.append(f"quant_pre_process({name}) failed, quantizing it as is: {type(e).__name__}: {e}")
                pre = src
            quantize_static(pre, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax)
            note = (f"quantize_static(QDQ, per_channel=True, u8 activations, s8 weights, MinMax) of {name} "
                    f"on {sum(len(f['input_ids']) for f in feeds)} sentences padded to {a.seq}; "
                    f"ops {op_counts(out)}")
            return {"notes": note + ("; " + " | ".join(errors) if errors else "")}
        except Exception as e:  # noqa: BLE001
            errors.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    raise RuntimeError(" | ".join(errors))


# ---- OpenVINO, NNCF -------------------------------------------------------------------------------

def step_ov(a, spec):
    import openvino as ov

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    m = ov.convert_model(os.path.join(art, "model.onnx"))
    ov.save_model(m, os.path.join(art, "ov.fp32.xml"), compress_to_fp16=False)
    return {"notes": f"openvino {ov.__version__}: convert_model(model.onnx), saved FP32 (compress_to_fp16=False)"}


def step_nncf(a, spec):
    import nncf
    import openvino as ov

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    core = ov.Core()
    m = core.read_model(os.path.join(art, "ov.fp32.xml"))
    feeds = calib_feeds(a, spec)
    n = sum(len(f["input_ids"]) for f in feeds)
    q = nncf.quantize(m, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds))
    ov.save_model(q, os.path.join(art, "ov.int8.xml"), compress_to_fp16=False)
    return {"notes": f"nncf {nncf.__version__} quantize(model_type=TRANSFORMER, default preset) on {n} sentences "
                     f"padded to {a.seq} ({len(feeds)} batches of 16)"}


# ---- torchao SmoothQuant -------------------------------------------------------------------------

def torchao_quantize(a, spec, kind, model=None):
    """Calibrates and converts a model with torchao. kind: sq-static | sq-dynamic | w8a8-dynamic."""
    import torch
    from torchao.quantization import quantize_
    from torchao.quantization.quant_api import (Int8DynamicActivationInt8WeightConfig,
                                                Int8StaticActivationInt8WeightConfig)

    if model is None:
        model = load_torch_model(a, attn="sdpa")
    if kind == "w8a8-dynamic":
        quantize_(model, Int8DynamicActivationInt8WeightConfig())
        return model, "quantize_(Int8DynamicActivationInt8WeightConfig()) (per-token act, per-channel weight)"
    from torchao.prototype.smoothquant import SmoothQuantConfig
    from torchao.quantization.granularity import PerRow, PerTensor
    from torchao.quantization.quantize_.common.quantization_step import QuantizationStep

    if kind == "sq-static":
        base = Int8StaticActivationInt8WeightConfig(granularity=[PerTensor(), PerRow()])
        desc = "Int8StaticActivationInt8WeightConfig(granularity=[PerTensor act, PerRow weight])"
    else:
        base = Int8DynamicActivationInt8WeightConfig()
        desc = "Int8DynamicActivationInt8WeightConfig() (per-token act, per-channel weight)"
    # The memory-light RunningAbsMaxSmoothQuantObserver fails with a static base config in torchao
    # 0.18.0 (calculate_qparams calls .get on a QuantizeTensorToInt8Kwargs object), so the static
    # variant uses torchao's default SmoothQuantObserver, which keeps every calibration input
    # (roughly 9-11 GB for BERT-base, 256 sentences x 128 tokens). For the dynamic variant only the
    # smoothing factor is used, which both observers compute the same way (per-channel abs max).
    running = kind != "sq-static"
    cfg = SmoothQuantConfig(base_config=base, step=QuantizationStep.PREPARE, alpha=0.5, use_running_absmax=running)
    quantize_(model, cfg)
    import torch as _t

    feeds = calib_feeds(a, spec)
    with _t.no_grad():
        for f in feeds:
            model(**{k: _t.from_numpy(v) for k, v in f.items()})
        if running:
            cfg.step = QuantizationStep.PREPARE_FOR_SMOOTHQUANT_SMOOTHING_FACTOR
            quantize_(model, cfg)
            for f in feeds:  # second pass: statistics of the smoothed activations
                model(**{k: _t.from_numpy(v) for k, v in f.items()})
    cfg.step = QuantizationStep.CONVERT
    quantize_(model, cfg)
    n = sum(len(f["input_ids"]) for f in feeds)
    obs = "use_running_absmax=True, two passes" if running else "default SmoothQuantObserver"
    return model, (f"torchao.prototype.smoothquant.SmoothQuantConfig(base_config={desc}, alpha=0.5, "
                   f"{obs}) calibrated on {n} sentences padded to {a.seq}")


def step_torchao(a, spec, kind):
    import torch
    import torchao

    model, desc = torchao_quantize(a, spec, kind)
    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    # torchao sets a bound-method extra_repr on each converted Linear (cosmetic: only print() uses
    # it); a bound method in a module's __dict__ does not unpickle, so it is dropped before saving
    for m in model.modules():
        m.__dict__.pop("extra_repr", None)
    torch.save(model, os.path.join(art, f"torchao.{kind}.pt"))
    return {"notes": f"torchao {torchao.__version__}: {desc}"}


# ---- llama.cpp (GGUF), CTranslate2, fastembed -----------------------------------------------------

def llamacpp_src():
    """llama.cpp's conversion script: the copy run.sh takes from the llama-cpp-python sdist."""
    d = os.environ.get("LLAMA_CPP_SRC", os.path.join(common.WORK, "src", "llama.cpp"))
    if not os.path.exists(os.path.join(d, "convert_hf_to_gguf.py")):
        raise FileNotFoundError(f"{d}/convert_hf_to_gguf.py missing (run.sh copies it from the llama-cpp-python "
                                f"sdist; set LLAMA_CPP_SRC to a llama.cpp checkout)")
    return d


def step_gguf(a, spec, outtype):
    import subprocess

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    src = llamacpp_src()
    out = os.path.join(art, f"model.{outtype}.gguf")
    # a random checkpoint has no tokenizer.json; the converter reads the vocabulary with transformers
    cmd = [sys.executable, os.path.join(src, "convert_hf_to_gguf.py"), common.model_dir(a.model), "--outtype",
           outtype, "--outfile", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode or not os.path.exists(out):
        lines = [ln for ln in (r.stderr + r.stdout).strip().splitlines() if ln.strip()]
        raise RuntimeError("convert_hf_to_gguf.py failed: " + " / ".join(lines[-3:]))
    info = [ln for ln in r.stderr.splitlines() if "pooling" in ln.lower() or "model architecture" in ln.lower()]
    return {"notes": f"llama.cpp convert_hf_to_gguf.py --outtype {outtype} ({os.path.getsize(out) / 1e6:.0f} MB)"
                     + (f"; {info[0].split(':', 2)[-1].strip()}" if info else "")}


def ct2_input_dir(a):
    """A copy of the checkpoint folder (links) whose config.json has position_embedding_type: the
    CTranslate2 4.x converter asserts on it, and transformers 5 no longer writes it."""
    src = common.model_dir(a.model)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if "position_embedding_type" in cfg:
        return src, ""
    d = os.path.join(common.artifacts_dir(a.model, a.seq, a.calib_n), "ct2.input")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(src):
        if f != "config.json" and os.path.isfile(os.path.join(src, f)):
            os.symlink(os.path.join(src, f), os.path.join(d, f))
    cfg["position_embedding_type"] = "absolute"
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return d, "config.json given position_embedding_type=absolute (missing in transformers 5 configs); "


def step_ct2(a, spec, kind):
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    src, note = ct2_input_dir(a)
    out = os.path.join(art, f"ct2.{kind}")
    quant = None if kind == "fp32" else "int8"
    scales = None
    if kind == "int8-sq":
        # the converter applies the scales through its model loader's smooth_activation, which only
        # some loaders define; ask first, so that a loader without it fails before the calibration pass
        import transformers as tf
        from ctranslate2.converters import transformers as ct2t

        cfg_name = type(tf.AutoConfig.from_pretrained(src)).__name__
        loader = ct2t._MODEL_LOADERS.get(cfg_name)
        if loader is not None and type(loader).smooth_activation is ct2t.ModelLoader.smooth_activation:
            raise NotImplementedError(f"ctranslate2 {ctranslate2.__version__}: {type(loader).__name__} "
                                      f"({cfg_name}) defines no smooth_activation: 'No activation smoothing "
                                      f"logic is defined for this model' (the converter's own error)")
        scales = smoothquant_scales(a, spec)
        note += f"activation scales (per-channel abs max of the Linear inputs over the calibration set) {scales}; "
    conv = TransformersConverter(src, activation_scales=scales, low_cpu_mem_usage=False)
    conv.convert(out, quantization=quant, force=True)
    return {"notes": f"ctranslate2 {ctranslate2.__version__}: TransformersConverter(" + note +
                     f"quantization={quant})"}


def smoothquant_scales(a, spec):
    """SmoothQuant's activation scales (mit-han-lab/smoothquant's act_scales format: Linear name ->
    per-input-channel abs max over the calibration set), computed with PyTorch."""
    import torch

    model = load_torch_model(a, attn="sdpa")
    scales = {}

    def hook(name):
        def fn(mod, inp, out):
            x = inp[0].detach().abs().reshape(-1, inp[0].shape[-1]).amax(0).float()
            scales[name] = torch.maximum(scales[name], x) if name in scales else x
        return fn

    hs = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for f in calib_feeds(a, spec):
            model(**{k: torch.from_numpy(v) for k, v in f.items()})
    for h in hs:
        h.remove()
    path = os.path.join(common.artifacts_dir(a.model, a.seq, a.calib_n), "act_scales.pt")
    torch.save(scales, path)
    return path


def step_fastembed(a, spec):
    """A folder fastembed loads with specific_model_path: the ONNX export as model.onnx (FP32, for the
    check) and model.int8.onnx, quantized the way fastembed's quantized models are (ONNX Runtime
    dynamic int8 of the plain export), plus the tokenizer files fastembed reads."""
    import onnx
    import transformers as tf
    from onnxruntime.quantization import QuantType, quantize_dynamic

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    d = os.path.join(art, "fastembed")
    os.makedirs(d, exist_ok=True)
    mdir = common.model_dir(a.model)
    if spec.get("real") and os.path.exists(os.path.join(mdir, "tokenizer.json")):
        for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
            if os.path.exists(os.path.join(mdir, f)):
                shutil.copy(os.path.join(mdir, f), os.path.join(d, f))
    elif spec["arch"] == "xlmr":
        raise RuntimeError("fastembed peer: only WordPiece (BERT-vocabulary) checkpoints are set up")
    else:
        tok = tf.BertTokenizerFast(vocab_file=os.path.join(mdir, "vocab.txt"), do_lower_case=True,
                                   model_max_length=spec["maxpos"])
        tok.save_pretrained(d)
        shutil.copy(os.path.join(mdir, "config.json"), os.path.join(d, "config.json"))
    if not os.path.exists(os.path.join(d, "special_tokens_map.json")):
        with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
            json.dump({"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
                       "mask_token": "[MASK]"}, f)
    shutil.copy(os.path.join(art, "model.onnx"), os.path.join(d, "model.onnx"))
    quantize_dynamic(os.path.join(d, "model.onnx"), os.path.join(d, "model.int8.onnx"), per_channel=True,
                     weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return {"notes": f"fastembed folder: model.onnx (the plain export) and model.int8.onnx = quantize_dynamic("
                     f"per_channel=True, QInt8) of it; ops {op_counts(os.path.join(d, 'model.int8.onnx'))}"}


def step_bert8_int8(a, spec):
    """`bert8 quantize` with its defaults (static, INT8 attention), for the latency columns."""
    import subprocess

    art = common.artifacts_dir(a.model, a.seq, a.calib_n)
    bert8 = os.environ.get("BERT8", os.path.join(common.REPO, "build", "bert8"))
    out = os.path.join(art, "bert8.int8")
    cmd = [bert8, "quantize", common.model_dir(a.model), "-o", out, "--calib", os.path.join(art, "calib.txt"),
           "--samples", str(a.calib_n)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"bert8 quantize failed: {r.stderr.strip()[-300:]}")
    said = [ln for ln in r.stdout.splitlines() if ln.startswith("wrote")]
    return {"notes": f"{' '.join(cmd[1:3])} ... : {said[-1] if said else 'done'}"}


STEPS = {
    "checkpoint": step_checkpoint,
    "lengthmix": step_lengthmix,
    "calib": step_calib,
    "onnx": step_onnx,
    "ort-opt": step_ort_opt,
    "ort-dyn": step_ort_dyn,
    "ort-static": step_ort_static,
    "ov": step_ov,
    "nncf": step_nncf,
    "torchao-sq-static": lambda a, s: step_torchao(a, s, "sq-static"),
    "torchao-sq-dynamic": lambda a, s: step_torchao(a, s, "sq-dynamic"),
    "gguf-f32": lambda a, s: step_gguf(a, s, "f32"),
    "gguf-q8": lambda a, s: step_gguf(a, s, "q8_0"),
    "ct2-fp32": lambda a, s: step_ct2(a, s, "fp32"),
    "ct2-int8": lambda a, s: step_ct2(a, s, "int8"),
    "ct2-int8-sq": lambda a, s: step_ct2(a, s, "int8-sq"),
    "fastembed": step_fastembed,
    "bert8-int8": step_bert8_int8,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=sorted(STEPS))
    p.add_argument("--model", required=True, type=common.check_model, help="a random model's name or a folder")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--calib-n", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    try:
        import torch

        torch.set_num_threads(a.threads)
    except Exception:  # noqa: BLE001
        pass
    spec = common.spec_of(a.model)
    # some tools (ORT's quant_pre_process) leave temporary files in the working directory
    scratch = os.path.join(common.WORK, "scratch")
    os.makedirs(scratch, exist_ok=True)
    os.chdir(scratch)
    t0 = time.time()
    try:
        r = STEPS[a.step](a, spec) or {}
        r.update(step=a.step, ok=True)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        r = {"step": a.step, "ok": False, "reason": f"{type(e).__name__}: {str(e)[:500]}"}
    r["seconds"] = round(time.time() - t0, 1)
    sys.stdout.flush()
    print(json.dumps(r))


if __name__ == "__main__":
    main()
