"""`bert8 bench --roofline --json`: the INT8 roofline names every op, the LayerNorm and the
per-token requantization that INT8 products run on their rows among them, with its share of the
pass's time and of its ceiling."""
import json
import subprocess
import sys

import pytest

from conftest import CLI, REPO, require

SST2 = REPO / "models" / "sst2-bert-mini"


def bench_model(model, *args, batch=4, seq=32):
    r = subprocess.run([str(require(CLI)), "bench", str(model), "--batch", str(batch), "--seq", str(seq), "--threads",
                        "1", "--iters", "3", "--roofline", "--json", *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def bench(*args):
    return bench_model(SST2, *args)


def test_roofline_shows_attention_and_row_operations():
    d = bench()
    ops = d["int8_roofline"]
    assert set(ops) == {"embed", "qkv", "attention", "attn_out", "ffn_in", "ffn_out", "layernorm", "quantize", "head"}
    assert abs(sum(v["pct_time"] for v in ops.values()) - 100.0) < 0.01
    # the default static scheme quantizes FFN-out's input per token: a pass of its own, timed
    for name in ("attention", "layernorm", "quantize", "qkv", "ffn_in"):
        assert ops[name]["ms"] > 0 and ops[name]["gop"] > 0 and 0 < ops[name]["pct_peak"], name
    # the share of the time agrees with the op share the report prints beside it
    for name, v in ops.items():
        assert abs(v["pct_time"] - 100 * d["int8_op_share"][name]) < 0.01, name


def test_static_ffn_out_has_no_quantize_pass():
    ops = bench("--ffn-out", "static")["int8_roofline"]
    assert ops["quantize"]["gop"] == 0 and ops["quantize"]["ms"] == 0
    assert ops["layernorm"]["ms"] > 0


def test_gated_ffn_and_sliding_windows_counted(tmp_path):
    """A gated FFN-in (ModernBERT's GeGLU) gives gate and up, 2 x intermediate_size outputs: the
    roofline counts twice FFN-out's operations for it, as many as FFN-out's for a plain FFN. Its
    sliding-window layers' attention counts only the keys each query sees."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    gen = REPO / "scripts" / "make_arch_checkpoints.py"
    subprocess.run([sys.executable, str(gen), str(tmp_path), "--arch", "modernbert", "--quick"], check=True,
                   capture_output=True)
    gated = tmp_path / "modernbert_m_base"
    info = json.loads(subprocess.run([str(require(CLI)), "info", str(gated), "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    cfg = json.loads((gated / "config.json").read_text())
    w, every = cfg["local_attention"] // 2, cfg["global_attn_every_n_layers"]
    assert info["ffn_gated"] is True and info["attention_window"] == w
    assert info["sliding_layers"] == sum(layer % every != 0 for layer in range(cfg["num_hidden_layers"])) > 0
    B, T = 32, 120
    ops = bench_model(gated, batch=B, seq=T)["int8_roofline"]
    assert ops["ffn_in"]["gop"] == pytest.approx(2 * ops["ffn_out"]["gop"], abs=2e-4)  # GOP to 4 decimals
    window_pairs = sum(min(i, w) + min(T - 1 - i, w) + 1 for i in range(T))
    pairs = sum(T * T if layer % every == 0 else window_pairs for layer in range(cfg["num_hidden_layers"]))
    assert 0 < window_pairs < T * T
    assert ops["attention"]["gop"] == pytest.approx(4 * cfg["hidden_size"] * B * pairs / 1e9, abs=2e-4)
    plain = bench()["int8_roofline"]
    assert plain["ffn_in"]["gop"] == pytest.approx(plain["ffn_out"]["gop"], rel=1e-3)
    bert8 = pytest.importorskip("bert8")  # the binding gives the same fields
    py_info = bert8.Model(gated).info
    assert {k: py_info[k] for k in ("ffn_gated", "sliding_layers", "attention_window")} == {
        k: info[k] for k in ("ffn_gated", "sliding_layers", "attention_window")}
