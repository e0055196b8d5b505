#!/usr/bin/env bash
# Load test of `bert8 serve` with wrk: /embed and /predict, FP32 and INT8, each for a bounded
# time, on 127.0.0.1 only. Prints one Markdown table row per configuration: requests/s, p50/p99
# latency (of the last run), errors (non-2xx + socket errors, over all runs; must be 0) and the
# server's RSS after each of RUNS back-to-back runs (it must level off) and its peak.
#   tests/server/load/run.sh [BERT8_BIN]
#   env: DURATION=20 (s per run) RUNS=2 CONNECTIONS=32 WRK_THREADS=1 THREADS=2 (server --threads)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="${1:-$root/build/bert8}"
shared="${BERT8_SHARED_DIR:-$root/../shared}"
D="${DURATION:-20}"; C="${CONNECTIONS:-32}"; WT="${WRK_THREADS:-1}"; T="${THREADS:-2}"; RUNS="${RUNS:-2}"
command -v wrk >/dev/null || { echo "wrk is missing: bash scripts/server-test-deps.sh" >&2; exit 1; }
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# Models: the SST-2 classifier, and its encoder alone as an embedding model (config: BertModel).
cp -r "$root/models/sst2-bert-mini" "$work/cls"
cp -r "$root/models/sst2-bert-mini" "$work/emb"
python3 - "$work/emb/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["architectures"] = ["BertModel"]
c.pop("id2label", None); c.pop("label2id", None)
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
calib="$shared/data/glue/SST-2.train10.tsv"
for m in cls emb; do
  "$bin" quantize "$work/$m" -o "$work/${m}8" --calib "$calib" --column sentence --samples 512 2>/dev/null
done
# Bodies: the SST-2 dev sentences, one {"inputs": "..."} per line (valid for /embed and /predict).
python3 - "$shared/data/glue/SST-2.dev.tsv" "$work/bodies.jsonl" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
with open(sys.argv[2], "w") as f:
    for r in rows:
        f.write(json.dumps({"inputs": r["sentence"].strip()}) + "\n")
PY

rss() { awk -v k="$2:" '$1 == k { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
port=18231
total_errs=0
echo "| route | model | requests/s | p50 | p99 | errors | RSS after each run (MiB) | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|"
for route in /embed /predict; do
  for dtype in fp32 int8; do
    m=$([ "$route" = /embed ] && echo emb || echo cls); [ "$dtype" = int8 ] && m="${m}8"
    port=$((port + 1))
    nice -n 5 "$bin" serve "$work/$m" --hostname 127.0.0.1 --port "$port" --threads "$T" --quiet &
    pid=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.05; done
    url="http://127.0.0.1:$port"
    wrk -t"$WT" -c"$C" --timeout 10s -d3s -s "$here/post.lua" "$url" -- "$route" "$work/bodies.jsonl" >/dev/null  # warm-up
    all=""; rsses=""
    for run in $(seq "$RUNS"); do
      out="$(wrk -t"$WT" -c"$C" --timeout 10s -d"${D}s" --latency -s "$here/post.lua" "$url" -- "$route" "$work/bodies.jsonl")"
      all="$all$out"$'\n'
      rsses="$rsses${rsses:+ / }$(rss "$pid" VmRSS)"
    done
    peak=$(rss "$pid" VmHWM)
    [ -n "${VERBOSE:-}" ] && printf '%s\n' "$all" >&2
    rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
    p50=$(awk '$1 == "50%" { print $2 }' <<<"$out"); p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
    errs=$(awk '/Non-2xx/ { n += $NF } /Socket errors/ { gsub(",", ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' <<<"$all")
    kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
    [ "$rc" = 0 ] || { echo "server exited $rc" >&2; exit 1; }
    echo "| $route | $dtype | $rps | $p50 | $p99 | $errs | $rsses | $peak |"
    total_errs=$((total_errs + errs))
  done
done
[ "$total_errs" = 0 ] || { echo "load test: $total_errs failed requests" >&2; exit 1; }
