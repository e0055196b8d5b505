#!/usr/bin/env bash
# Before/after load comparison of two `bert8 serve` binaries on the real all-MiniLM-L6-v2 (INT8,
# static, calibrated on SST-2 sentences): /embed at 1, 8 and 64 connections on two mixes, short
# (one SST-2 dev sentence per request, ~12 tokens) and long (SST-2 sentences joined to about 256
# tokens, the model's max_seq_length). Runs alternate A, B, A, B, ... per configuration, each
# with a fresh server, so that a machine shared with other jobs loads both sides alike. Prints
# one Markdown row per (mix, connections, binary, round): requests/s, p50, p99, errors, and the
# server's CPU time per request (user + system, from /proc; the figure a busy shared machine
# disturbs least).
#   tests/server/load/ab.sh BIN_A BIN_B [MODEL_DIR]
#   env: DURATION=10 (s per run) ROUNDS=2 THREADS=2 (server --threads) CONNS="1 8 64"
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
A="$1"; B="$2"
model="${3:-$(bash "$root/scripts/fetch-models.sh" --path all-minilm-l6-v2)}"
shared="${BERT8_SHARED_DIR:-$root/../shared}"
D="${DURATION:-10}"; R="${ROUNDS:-2}"; T="${THREADS:-2}"; CONNS="${CONNS:-1 8 64}"
command -v wrk >/dev/null || { echo "wrk is missing: bash scripts/server-test-deps.sh" >&2; exit 1; }
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$B" quantize "$model" -o "$work/m8" --calib "$shared/data/glue/SST-2.train10.tsv" --column sentence --samples 512 \
  2>/dev/null
python3 - "$shared/data/glue/SST-2.dev.tsv" "$work" <<'PY'
import csv, json, random, sys
rows = [r["sentence"].strip() for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]
with open(sys.argv[2] + "/short.jsonl", "w") as f:
    for s in rows:
        f.write(json.dumps({"inputs": s}) + "\n")
rng = random.Random(0)
with open(sys.argv[2] + "/long.jsonl", "w") as f:
    for _ in range(400):
        parts = []
        while sum(len(p.split()) for p in parts) < 210:  # ~256 WordPiece tokens
            parts.append(rng.choice(rows))
        f.write(json.dumps({"inputs": " ".join(parts)}) + "\n")
PY
port=18331
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }  # utime + stime, clock ticks
hz=$(getconf CLK_TCK)
echo "| mix | connections | binary | round | requests/s | p50 | p99 | errors | server CPU ms/request | route tokenization ms/request |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for mix in short long; do
  for c in $CONNS; do
    for round in $(seq "$R"); do
      for side in A B; do
        bin=$([ "$side" = A ] && echo "$A" || echo "$B")
        port=$((port + 1))
        "$bin" serve "$work/m8" --hostname 127.0.0.1 --port "$port" --threads "$T" --max-concurrent-requests 4096 --quiet &
        pid=$!
        for _ in $(seq 400); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.05; done
        url="http://127.0.0.1:$port"
        wrk -t1 -c"$c" --timeout 10s -d2s -s "$here/post.lua" "$url" -- /embed "$work/$mix.jsonl" >/dev/null
        t0=$(cpu "$pid")
        out="$(wrk -t1 -c"$c" --timeout 10s -d"${D}s" --latency -s "$here/post.lua" "$url" -- /embed "$work/$mix.jsonl")"
        t1=$(cpu "$pid")
        tok=$(curl -sf "$url/metrics" | awk '/^te_request_tokenization_duration_sum/ { s = $2 } /^te_request_tokenization_duration_count/ { n = $2 } END { printf "%.3f", (n > 0 ? s * 1000 / n : 0) }')
        kill -TERM "$pid"; wait "$pid" || true; pid=""
        n=$(awk '/requests in/ { print $1 }' <<<"$out")
        cpums=$(awk -v a="$t0" -v b="$t1" -v n="$n" -v hz="$hz" 'BEGIN { printf "%.2f", (n > 0 ? (b - a) * 1000 / hz / n : 0) }')
        rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
        p50=$(awk '$1 == "50%" { print $2 }' <<<"$out"); p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
        errs=$(awk '/Non-2xx/ { n += $NF } /Socket errors/ { gsub(",", ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' <<<"$out")
        echo "| $mix | $c | $side | $round | $rps | $p50 | $p99 | $errs | $cpums | $tok |"
      done
    done
  done
done
