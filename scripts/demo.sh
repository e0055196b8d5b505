#!/usr/bin/env bash
# The main job: build bert8, then show FP32 against INT8 (SmoothQuant, static W8A8) on
#   1. a real pretrained model, sentence-transformers/all-MiniLM-L6-v2, when it can be fetched
#      (scripts/fetch-models.sh all-minilm-l6-v2: about 84 MB from PyPI the first time, then from
#      the cache): quantized with bert8's defaults, then its embeddings of example sentences, a
#      small query/document similarity matrix, STS-B dev Spearman and speed;
#   2. the embedded SST-2 model (models/sst2-bert-mini): quantized with alpha 0.5, then its
#      labels on example sentences, SST-2 dev accuracy and speed.
# Without network the fetch fails (one line says so) and the demo goes on with part 2.
#
# Environment:
#   BERT8_SHARED=DIR         the data folder (default ../shared); without it the demo calibrates
#                            on its example sentences and skips the STS-B and SST-2 dev scores
#   BERT8_DEMO_OFFLINE=1     skip the real model (no fetch, no network)
#   BERT8_MODEL_CACHE=DIR    where fetch-models.sh keeps the real models (its default:
#                            ~/.cache/bert8/models); a model already there is not downloaded again
#   BERT8_DEMO_FETCH_TIMEOUT=S   pip's socket timeout for the fetch (default 20 s, with one
#                            retry), so a machine without network falls back quickly
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
mkdir -p build/demo

# ------------------------------------------------------------------------------------------------
# Part 1: a real pretrained sentence encoder, sentence-transformers/all-MiniLM-L6-v2
# ------------------------------------------------------------------------------------------------
REAL=
if [ "${BERT8_DEMO_OFFLINE:-0}" = 1 ]; then
  echo
  echo "(BERT8_DEMO_OFFLINE=1: skipping the real model all-MiniLM-L6-v2; the embedded SST-2 model follows)"
else
  echo
  echo "== fetching the real model sentence-transformers/all-MiniLM-L6-v2 (scripts/fetch-models.sh; ~84 MB from PyPI the first time)"
  if fetched=$(PIP_DEFAULT_TIMEOUT=${BERT8_DEMO_FETCH_TIMEOUT:-20} PIP_RETRIES=${PIP_RETRIES:-1} \
    bash scripts/fetch-models.sh all-minilm-l6-v2 2>build/demo/fetch.log); then
    REAL=$(cut -f2 <<<"$fetched")
  else
    echo "(could not fetch the real model all-MiniLM-L6-v2, no network? details in build/demo/fetch.log; continuing with the embedded model)"
  fi
fi

if [ -n "$REAL" ]; then
  RQ=build/demo/minilm-int8
  MAXLEN=256 # sentence-transformers' max_seq_length for this model (sentence_bert_config.json)
  echo "   $REAL: 6 layers, hidden 384, 22.7M parameters, mean pooling + L2 normalisation"

  # Example sentences (their embeddings), queries and documents (a similarity matrix).
  cat > build/demo/minilm-examples.txt <<'TXT'
A man is playing a guitar on stage.
The new movie is awesome.
The cat sits outside on the mat.
How do I reset my password?
Stock markets fell sharply after the announcement.
TXT
  cat > build/demo/minilm-queries.txt <<'TXT'
how do I bake bread at home?
which planet is closest to the sun?
what are the symptoms of the flu?
TXT
  cat > build/demo/minilm-docs.txt <<'TXT'
Mercury orbits nearer to the Sun than any other planet.
Fever, cough, sore throat and aching muscles are common signs of influenza.
Mix flour, water, yeast and salt, let the dough rise, then bake it in a hot oven.
TXT

  # Calibration: 512 sentences spread evenly over the SST-2 training split (never STS-B, which
  # we score on), or the demo's own sentences when the data is absent.
  RCALIB=build/demo/minilm-calib.tsv
  if [ -f "$SHARED/data/glue/SST-2.train90.tsv" ]; then
    awk -F'\t' -v n=512 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "sentence") c = i; next }
      { s[++m] = $c } END { print "sentence"; for (i = 0; i < n && i < m; i++) print s[1 + int(i * m / n)] }' \
      "$SHARED/data/glue/SST-2.train90.tsv" > "$RCALIB"
    RCALIB_DESC="512 sentences spread over SST-2.train90.tsv"
  else
    { echo sentence; cat build/demo/minilm-examples.txt build/demo/minilm-queries.txt build/demo/minilm-docs.txt; } > "$RCALIB"
    RCALIB_DESC="the demo's 11 sentences (no $SHARED/data/glue/SST-2.train90.tsv)"
  fi
  echo
  echo "== quantizing all-MiniLM-L6-v2 -> $RQ (bert8's defaults: alpha searched per group, static INT8; calibration: $RCALIB_DESC)"
  $BERT8 quantize "$REAL" -o "$RQ" --calib "$RCALIB" --column sentence --samples 512

  # One embed run per model: examples, queries, documents, then the STS-B dev pairs if present.
  STSB="$SHARED/data/glue/STS-B.dev.tsv"
  cat build/demo/minilm-examples.txt build/demo/minilm-queries.txt build/demo/minilm-docs.txt > build/demo/minilm-input.txt
  if [ -f "$STSB" ]; then
    awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "sentence1") a = i; if ($i == "sentence2") b = i }; next }
      { print $a; print $b }' "$STSB" >> build/demo/minilm-input.txt
  fi
  echo
  n_in=$(wc -l < build/demo/minilm-input.txt)
  echo "== embedding $n_in sentences with each model, FP32 then INT8 (the demo's 11 sentences$([ "$n_in" -gt 11 ] && echo ", and the $((n_in - 11)) sentences of STS-B dev"))"
  time_embed() { # time_embed MODEL OUT
    local t0=$SECONDS
    $BERT8 embed "$1" --plain --max-length $MAXLEN < build/demo/minilm-input.txt > "$2"
    echo $((SECONDS - t0))
  }
  tf=$(time_embed "$REAL" build/demo/minilm-fp32.jsonl)
  ti=$(time_embed "$RQ" build/demo/minilm-int8.jsonl)
  echo "   wall time: FP32 ${tf} s, INT8 ${ti} s (bert8 embed, tokenizing included; see the bench below for speed)"

  python3 - build/demo/minilm-fp32.jsonl build/demo/minilm-int8.jsonl "$STSB" <<'PY'
import csv, json, math, os, sys

fp32 = [json.loads(l)["embedding"] for l in open(sys.argv[1], encoding="utf-8")]
int8 = [json.loads(l)["embedding"] for l in open(sys.argv[2], encoding="utf-8")]
read = lambda p: [l.rstrip("\n") for l in open(p, encoding="utf-8")]
examples, queries, docs = (read(f"build/demo/minilm-{k}.txt") for k in ("examples", "queries", "docs"))
dot = lambda a, b: sum(x * y for x, y in zip(a, b))
cos = lambda a, b: dot(a, b) / math.sqrt(dot(a, a) * dot(b, b))
vec = lambda v: "[" + ", ".join(f"{x:+.4f}" for x in v[:4]) + ", ...]"

print(f"\n== sentence embeddings ({len(fp32[0])} dimensions, the first 4 shown); cos = cosine(INT8, FP32), 1 is identical")
for i, s in enumerate(examples):
    print(f"  {s}\n    FP32 {vec(fp32[i])}\n    INT8 {vec(int8[i])}   cos {cos(int8[i], fp32[i]):.4f}")

q0, d0 = len(examples), len(examples) + len(queries)
print("\n== semantic search: cosine of each query (rows) to each document (columns), FP32 | INT8")
for j, d in enumerate(docs):
    print(f"  doc {j + 1}: {d}")
print(f"  {'':38s}" + " ".join(f"{'doc ' + str(j + 1):>6s}" for j in range(len(docs))) + "   |" +
      " ".join(f"{'doc ' + str(j + 1):>6s}" for j in range(len(docs))) + "   best FP32/INT8")
for i, q in enumerate(queries):
    sf = [cos(fp32[q0 + i], fp32[d0 + j]) for j in range(len(docs))]
    si = [cos(int8[q0 + i], int8[d0 + j]) for j in range(len(docs))]
    best = lambda s: "doc %d" % (1 + max(range(len(s)), key=s.__getitem__))
    print(f"  {q[:38]:38s}" + " ".join(f"{x:6.3f}" for x in sf) + "   |" + " ".join(f"{x:6.3f}" for x in si) +
          f"   {best(sf)} / {best(si)}")

stsb = sys.argv[3]
if not os.path.isfile(stsb):
    print(f"\n(no {stsb}: skipping STS-B)")
    sys.exit(0)
with open(stsb, encoding="utf-8") as f:
    gold = [float(r["score"]) for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
n0 = d0 + len(docs)
assert len(fp32) == len(int8) == n0 + 2 * len(gold), "embedding count does not match the input"


def ranks(v):  # average ranks for ties
    order = sorted(range(len(v)), key=v.__getitem__)
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


pairs = lambda e: [cos(e[n0 + 2 * i], e[n0 + 2 * i + 1]) for i in range(len(gold))]
sf, si = spearman(pairs(fp32), gold), spearman(pairs(int8), gold)
cs = sorted(cos(int8[i], fp32[i]) for i in range(n0, len(fp32)))
print(f"\n== STS-B dev ({len(gold)} sentence pairs): Spearman of cosine(sentence 1, sentence 2) against the gold score, x100")
print(f"  FP32: {sf * 100:.2f}\n  INT8: {si * 100:.2f}   (difference {100 * (si - sf):+.2f})")
print(f"  cosine(INT8, FP32) over its {len(cs)} sentences: mean {sum(cs) / len(cs):.4f}, min {cs[0]:.4f}")
PY

  echo
  echo "== speed of all-MiniLM-L6-v2 (FP32 vs INT8 in one process, batch 8, sequence 128; bench quantizes in memory, same calibration)"
  $BERT8 bench "$REAL" --batch 8 --seq 128 --calib "$RCALIB" --column sentence --samples 512 2>/dev/null |
    awk '/^bert8 bench:/ || /^ *(fp32|int8):/ || /speedup/'
fi

# ------------------------------------------------------------------------------------------------
# Part 2: the embedded SST-2 classifier (models/sst2-bert-mini, trained here)
# ------------------------------------------------------------------------------------------------
echo
echo "== the embedded SST-2 model"
$BERT8 info "$MODEL"

# Calibration text: the SST-2 training split (never the dev set we evaluate on).
CALIB="$SHARED/data/glue/SST-2.train10.tsv"
if [ -f "$CALIB" ]; then
  CALIB_ARGS=(--calib "$CALIB" --column sentence --samples 512)
else
  echo "(no $CALIB: calibrating on the example sentences below)"
  CALIB="build/demo/calib.txt"
fi
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
