#!/usr/bin/env bash
# The main job: build bert8, quantize the embedded SST-2 model with SmoothQuant (static W8A8),
# then compare FP32 and INT8 on example sentences, on the SST-2 dev set and in speed.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${BERT8_SHARED:-../shared}
MODEL=models/sst2-bert-mini
OUT=build/demo/sst2-bert-mini-int8
BERT8=build/bert8

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "== built $BERT8 ($($BERT8 --version))"
$BERT8 info "$MODEL"

# Calibration text: the SST-2 training split (never the dev set we evaluate on).
CALIB="$SHARED/data/glue/SST-2.train10.tsv"
if [ -f "$CALIB" ]; then
  CALIB_ARGS=(--calib "$CALIB" --column sentence --samples 512)
else
  echo "(no $CALIB: calibrating on the example sentences below)"
  CALIB="build/demo/calib.txt"
fi
mkdir -p build/demo
cat > build/demo/examples.txt <<'TXT'
a gripping, beautifully acted film that stays with you long after the credits
the plot is thin and the jokes fall flat
an uneven but ultimately rewarding experience
i have rarely been so bored in a cinema
the performances are wonderful , the script less so
a masterpiece of tension and restraint
TXT
[ -f "$SHARED/data/glue/SST-2.train10.tsv" ] || { cp build/demo/examples.txt build/demo/calib.txt; CALIB_ARGS=(--calib build/demo/calib.txt); }

echo
echo "== quantizing $MODEL -> $OUT (SmoothQuant alpha 0.5, static int8 activations)"
$BERT8 quantize "$MODEL" -o "$OUT" "${CALIB_ARGS[@]}" --alpha 0.5 --scheme static

echo
echo "== example sentences"
$BERT8 classify "$MODEL" < build/demo/examples.txt > build/demo/fp32.jsonl
$BERT8 classify "$OUT" < build/demo/examples.txt > build/demo/int8.jsonl
label() { sed -n 's/.*"label":"\([^"]*\)".*"score":\([0-9.eE+-]*\).*/\1 (\2)/p'; }
paste -d'\t' <(label < build/demo/fp32.jsonl) <(label < build/demo/int8.jsonl) build/demo/examples.txt |
  awk -F'\t' 'BEGIN { printf "%-26s %-26s %s\n", "FP32", "INT8", "sentence" } { printf "%-26s %-26s %s\n", $1, $2, $3 }'

DEV="$SHARED/data/glue/SST-2.dev.tsv"
if [ -f "$DEV" ]; then
  echo
  echo "== SST-2 dev accuracy (872 sentences)"
  printf "FP32: "; $BERT8 eval "$MODEL" --task sst2 --data "$DEV" 2>/dev/null | tail -1
  printf "INT8: "; $BERT8 eval "$OUT" --task sst2 --data "$DEV" 2>/dev/null | tail -1
else
  echo "(no $DEV: skipping the dev-set accuracy)"
fi

echo
echo "== speed (FP32 vs INT8 in one process, batch 8, sequence 128)"
$BERT8 bench "$MODEL" --batch 8 --seq 128 "${CALIB_ARGS[@]}" 2>/dev/null
