"""`bert8 bench --roofline --json`: the INT8 roofline names every op, the LayerNorm and the
per-token requantization that INT8 products run on their rows among them, with its share of the
pass's time and of its ceiling."""
import json
import subprocess

from conftest import CLI, REPO, require

SST2 = REPO / "models" / "sst2-bert-mini"


def bench(*args):
    r = subprocess.run([str(require(CLI)), "bench", str(SST2), "--batch", "4", "--seq", "32", "--threads", "1",
                        "--iters", "3", "--roofline", "--json", *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


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
