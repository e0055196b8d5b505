#!/usr/bin/env bash
# Reproduces the README's performance figures. Needs a Release build in build/ and ~3 GB of
# disk for the random BERT-base checkpoint. Run on an otherwise idle machine: figures drift
# from run to run, so compare the ratios each program measures side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${BERT8_SHARED:-../shared}
CKPT=${BERT8_BENCH_CKPT:-build/bert-base-random}
[ -f "$CKPT/model.safetensors" ] || build/bench/make_checkpoint "$CKPT" --arch bert --layers 12 --hidden 768 \
  --heads 12 --inter 3072 --vocab 30522 --maxpos 512
echo "== FP32 end-to-end vs GEMM shapes alone (oneDNN), batch 8 x 128"
build/bench/bench_fp32 "$CKPT" --threads 1,2
for scheme in static dynamic; do
  echo "== bert8 bench, $scheme INT8 vs FP32, batch 8 x 128, 2 threads"
  build/bert8 bench "$CKPT" --batch 8 --seq 128 --threads 2 --scheme "$scheme" --json | tail -12
done
echo "== INT8 GEMM kernels on the BERT-base shapes, M = 1024"
build/bench_qgemm --threads 1,2
echo "== which float instructions take the INT8 product's issue slots on this CPU"
build/bench_ports
echo "== LayerNorm -> int8 rows, M = 1024, 1 and 2 threads, by the core that wrote the rows"
build/bench_layernorm
echo "== packed INT8 weights on huge pages or not, batch 1 x 128, alternated in one process"
build/bench_hugepages "$CKPT" --batch 1 --seq 128 --rounds 30
echo "== tokenizers"
build/bench/bench_tokenizer --shared "$SHARED"
