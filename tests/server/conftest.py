"""Fixtures of the `bert8 serve` tests: a server started on a free port of 127.0.0.1 and stopped
with SIGTERM (which must exit 0), the CLI for reference outputs, and INT8 folders made in a temp
dir. BERT8_BIN names the binary (the Release or the ASan build)."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("BERT8_BIN", os.path.join(ROOT, "build", "bert8"))
SHARED = os.environ.get("BERT8_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
EMB = os.path.join(SHARED, "golden", "models", "bert_e2e")       # BertModel: embeddings
XLMR = os.path.join(SHARED, "golden", "models", "xlmr_e2e")      # XLM-R classifier, 3 labels
CLS = os.path.join(ROOT, "models", "sst2-bert-mini")              # classifier, 2 labels
RERANK = os.path.join(ROOT, "models", "stsb-bert-mini")           # one label: a reranker
SLOW = float(os.environ.get("BERT8_TEST_SLOW", "1"))              # time factor (ASan)

SENTENCES = [
    "the movie was great",
    "a dull, lifeless film that never finds its footing",
    "hello world",
    "an unexpectedly moving story about two brothers and the town they grew up in, told with care",
    "bad",
    "it is neither good nor bad , just long",
    "Ünïcödé text, with accents: café, naïve, 東京",
    "the acting is superb but the script lets everyone down in the second half of the film",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model, *args, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        e = dict(os.environ)
        e.update(env or {})
        self.log = tempfile.TemporaryFile()
        cmd = [BIN, "serve", model, "--hostname", "127.0.0.1", "--port", str(self.port), "--threads", "1", *args]
        self.proc = subprocess.Popen(cmd, env=e, stdout=self.log, stderr=self.log)
        deadline = time.time() + 60 * SLOW
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.output()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("server did not become healthy: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def post(self, path, body, **kw):
        return requests.post(self.url + path, json=body, timeout=60 * SLOW, **kw)

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=60 * SLOW, **kw)

    def metrics(self):
        out = {}
        for line in self.get("/metrics").text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self):
        """SIGTERM; the server must finish and exit 0 (under ASan: with no leak reports)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("server did not stop on SIGTERM: " + self.output())
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}: {self.output()[-4000:]}"


@pytest.fixture(scope="session")
def serve():
    """serve(model, *args, env=...) -> a running Server, stopped (and checked) at the end."""
    started = []

    def start(model, *args, env=None):
        s = Server(model, *args, env=env)
        started.append(s)
        return s

    yield start
    errors = []
    for s in started:
        try:
            s.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


def cli(cmd, model, lines, *args):
    """Runs `bert8 CMD MODEL` on JSON lines; returns the parsed output lines."""
    inp = "".join(json.dumps(x) + "\n" for x in lines)
    p = subprocess.run([BIN, cmd, model, "--threads", "1", *args], input=inp.encode(), capture_output=True,
                       timeout=300 * SLOW)
    assert p.returncode == 0, p.stderr.decode()
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


@pytest.fixture(scope="session")
def int8_dirs(tmp_path_factory):
    """INT8 (static) folders of the embedding model and the SST-2 classifier."""
    d = tmp_path_factory.mktemp("int8")
    calib = d / "calib.txt"
    calib.write_text("\n".join(SENTENCES * 4) + "\n")
    out = {}
    for name, model in (("emb", EMB), ("cls", CLS)):
        o = d / name
        p = subprocess.run([BIN, "quantize", model, "-o", str(o), "--calib", str(calib)], capture_output=True,
                           timeout=300 * SLOW)
        assert p.returncode == 0, p.stderr.decode()
        out[name] = str(o)
    return out
