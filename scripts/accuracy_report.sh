#!/usr/bin/env bash
# FP32 vs INT8 accuracy of every trained model under models/: builds the INT8 variants with
# `bert8 quantize` (calibrated on each task's TRAIN rows, never its eval rows), scores them with
# `bert8 eval`, and writes docs/accuracy.json and the generated part of docs/accuracy.md (text
# outside the generated markers is kept). Also records the numbers tests/test_accuracy.c checks.
#
#   bash scripts/accuracy_report.sh [MODEL_DIR ...]     (default: every models/*/)
# Environment: BERT8 (default build/bert8), BERT8_SHARED (default ../shared), THREADS (default 1,
# so numbers do not depend on the machine's core count), SAMPLES (calibration rows, default 512),
# ONLY (space-separated variant ids to run, e.g. "fp32 naive_static"; default all),
# PARTS ("budget": only the accuracy-budget section, "variants": all but it; default both),
# BUDGET_DROP (the budget of that section in points, default 0.5).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BERT8=${BERT8:-build/bert8}
SHARED=${BERT8_SHARED:-../shared}
DATA=$SHARED/data
THREADS=${THREADS:-1}
SAMPLES=${SAMPLES:-512}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
[ -x "$BERT8" ] || { echo "accuracy_report: $BERT8 not found (build it, or set BERT8=path)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "accuracy_report: no data folder $DATA (set BERT8_SHARED)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/bert8-accuracy.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
JSON_OUT=docs/accuracy.json
MD_OUT=docs/accuracy.md

if [ $# -gt 0 ]; then MODELS=("$@"); else MODELS=(); for d in models/*/; do [ -f "$d/config.json" ] && MODELS+=("${d%/}"); done; fi

# The regression test's fixed setting (tests/test_accuracy.c reads what this records).
REG_MODEL=models/sst2-bert-mini
REG_CALIB=glue/SST-2.train10.tsv
REG_CALIB_ROWS=256
REG_LIMIT=200

# ---- calibration files ------------------------------------------------------------------------
# sample_tsv FILE "COL1[,COL2]" FILTER N: N data rows spread evenly over the rows FILTER keeps
# ("all", or "stsb-train": row i with i % 3 != 2), as a TSV with header text[<TAB>text_pair].
sample_tsv() {
  awk -F'\t' -v cols="$2" -v filter="$3" -v want="$4" '
    NR == 1 {
      sub(/^\xef\xbb\xbf/, "")
      nc = split(cols, c, ",")
      for (k = 1; k <= nc; k++) { idx[k] = 0; for (i = 1; i <= NF; i++) if ($i == c[k]) idx[k] = i
        if (!idx[k]) { print "no column " c[k] > "/dev/stderr"; exit 2 } }
      next
    }
    $0 == "" { next }
    { r = NR - 2; if (filter == "stsb-train" && r % 3 == 2) next
      line = $(idx[1]); if (nc > 1) line = line "\t" $(idx[2]); rows[n++] = line }
    END {
      if (n == 0) exit 3
      print (nc > 1 ? "text\ttext_pair" : "text")
      step = n / want; if (step < 1) step = 1
      for (k = 0; k < want && int(k * step) < n; k++) print rows[int(k * step)]
    }' "$1"
}

# SQuAD: {"text": question, "text_pair": context} for questions of the split's TRAIN articles.
squad_calib() {
  "$PY" - "$1" "$2" "$3" <<'PY'
import json, sys
data, split, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
train = set(json.load(open(split, encoding="utf-8"))["train_articles"])
qs = [(q["question"], p["context"]) for a in json.load(open(data, encoding="utf-8"))["data"]
      if a["title"] in train for p in a["paragraphs"] for q in p["qas"]]
step = max(1.0, len(qs) / want)
for k in range(min(want, len(qs))):
    q, c = qs[int(k * step)]
    print(json.dumps({"text": q, "text_pair": c}, ensure_ascii=False))
PY
}

# task_setup MODEL: sets TASK, EVAL_ARGS (array), CALIB, CALIB_ARGS (array), CALIB_DESC, EVAL_DESC.
task_setup() {
  local m=$1 name
  name=$(basename "$m")
  CALIB=$TMP/calib-$name
  EVAL_ARGS=() CALIB_ARGS=()
  case "$name" in
  sst2-*)
    TASK=sst2
    sample_tsv "$DATA/glue/SST-2.train90.tsv" sentence all "$SAMPLES" > "$CALIB.tsv" || return 1
    CALIB_DESC="$SAMPLES rows spread over glue/SST-2.train90.tsv (sentence)"
    EVAL_ARGS=(--data "$DATA/glue/SST-2.dev.tsv"); EVAL_DESC="glue/SST-2.dev.tsv, all rows";;
  mrpc-*)
    TASK=mrpc
    sample_tsv "$DATA/glue/MRPC.msr_paraphrase_train.txt" "#1 String,#2 String" all "$SAMPLES" > "$CALIB.tsv" || return 1
    CALIB_DESC="$SAMPLES pairs spread over glue/MRPC.msr_paraphrase_train.txt"
    EVAL_ARGS=(--data "$DATA/glue/MRPC.msr_paraphrase_test.txt"); EVAL_DESC="glue/MRPC.msr_paraphrase_test.txt, all pairs";;
  stsb-*)
    TASK=stsb
    sample_tsv "$DATA/glue/STS-B.dev.tsv" "sentence1,sentence2" stsb-train "$SAMPLES" > "$CALIB.tsv" || return 1
    CALIB_DESC="$SAMPLES pairs spread over the train rows (i % 3 != 2) of glue/STS-B.dev.tsv"
    EVAL_ARGS=(--data "$DATA/glue/STS-B.dev.tsv" --split "$m/split.json"); EVAL_DESC="glue/STS-B.dev.tsv, the eval_index rows of split.json";;
  xnli-*)
    TASK=xnli
    sample_tsv "$DATA/xnli/xnli.my.test.tsv" "sentence1_en,sentence2_en" all "$SAMPLES" > "$CALIB.tsv" || return 1
    CALIB_DESC="$SAMPLES English pairs spread over xnli/xnli.my.test.tsv (the trainer's train file)"
    EVAL_ARGS=(--data "$DATA/xnli/xnli.my.dev.tsv" --split "$m/split.json"); EVAL_DESC="xnli/xnli.my.dev.tsv, English columns";;
  squad-*)
    TASK=squad
    squad_calib "$DATA/squad/dev-v1.1.rebuilt.json" "$m/split.json" "$SAMPLES" > "$CALIB.jsonl" || return 1
    CALIB=$CALIB.jsonl
    CALIB_ARGS=(--max-length 256)
    CALIB_DESC="$SAMPLES (question, context) pairs spread over the split's train articles, 256 tokens"
    EVAL_ARGS=(--data "$DATA/squad/dev-v1.1.rebuilt.json" --split "$m/split.json"); EVAL_DESC="squad/dev-v1.1.rebuilt.json, the split's eval articles";;
  *) return 2;;
  esac
  [ "$TASK" = squad ] || { CALIB=$CALIB.tsv; CALIB_ARGS=(--column "$(head -1 "$CALIB" | tr '\t' ,)"); }
}

# ---- INT8 to an accuracy budget: `quantize --max-drop` on the outlier variants -----------------
# Naive W8A8, SmoothQuant (alpha 0.5), and SmoothQuant with INT8 attention, static, on every model
# with an outlier.json; tuned on a fixed-seed half of the eval set, reported on the other half. Written between its own markers of
# docs/accuracy.md and into docs/accuracy_budget.json, so PARTS=budget reruns only this.
PARTS=${PARTS:-variants budget}
BUDGET_DROP=${BUDGET_DROP:-0.5}
BUDGET_JSON_OUT=docs/accuracy_budget.json
budget_section() {
  local m name a att v tag reps=() eargs
  for m in "${MODELS[@]}"; do
    m=${m%/}
    [ -f "$m/outlier.json" ] || continue
    name=$(basename "$m")
    task_setup "$m" || { echo "accuracy_report: budget: $name: no task or calibration set; skipped" >&2; continue; }
    eargs=("${EVAL_ARGS[@]/#--data/--eval-data}")
    eargs=("${eargs[@]/#--split/--eval-split}")
    for v in none:fp32 0.5:fp32 0.5:int8; do
      a=${v%:*} att=${v#*:}
      tag=$name-$a-$att
      echo "== budget: $name, alpha $a, $att attention, --max-drop $BUDGET_DROP" >&2
      if "$BERT8" quantize "$m" -o "$TMP/budget-$tag" --calib "$CALIB" "${CALIB_ARGS[@]}" --samples "$SAMPLES" \
           --scheme static --alpha "$a" --attention "$att" --threads "$THREADS" --max-drop "$BUDGET_DROP" --eval-task "$TASK" \
           "${eargs[@]}" --report "$TMP/budget-$tag.json" --quiet > "$TMP/budget-$tag.txt" 2> "$TMP/err"; then
        reps+=("$TMP/budget-$tag.json")
        sed 's/^/  /' "$TMP/budget-$tag.txt" >&2
      else
        echo "  quantize --max-drop failed: $(cat "$TMP/err")" >&2
      fi
      rm -rf "$TMP/budget-$tag"
    done
  done
  [ ${#reps[@]} -gt 0 ] || { echo "accuracy_report: budget: no outlier variant was run" >&2; return 1; }
  "$PY" - "$BUDGET_JSON_OUT" "$TMP/budget.md" "$BUDGET_DROP" "$THREADS" "$SAMPLES" "$("$BERT8" --version 2>/dev/null | head -1)" "${reps[@]}" <<'PY'
import json, os, sys, time
json_out, md_out, drop, threads, samples, version = sys.argv[1:7]
reps = [json.load(open(p)) for p in sys.argv[7:]]
def k_of(r):
    try: return "%g" % json.load(open(os.path.join(r["model"], "outlier.json")))["k"]
    except Exception: return "?"
def d(x, base): return "%+.2f" % (x - base) if x is not None and base is not None else "n/a"
def unit(s): l, k = s.split(" ", 2)[1:]; return "L%s %s" % (l, k)
def form(r): return ("naive" if r["alpha"] == "none" else "SmoothQuant α %s" % r["alpha"]) + (
    ", INT8 attention" if r.get("attention") == "int8" else "")
now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
out = ["<!-- accuracy_report.sh budget: generated from here -->", "",
       "Generated %s by `scripts/accuracy_report.sh` (%s, %s thread(s), %s calibration rows); the reports are in "
       "`docs/accuracy_budget.json`." % (now, version, threads, samples), "",
       "`bert8 quantize --scheme static [--attention int8] --max-drop %s --eval-task sst2 --eval-data glue/SST-2.dev.tsv`: the search "
       "scores a fixed-seed half of SST-2 dev (%d rows, conservative score: an example counts at most what it scores in "
       "FP32) and the other half (%d rows) is scored only at the end. Δ are points against FP32 on the same slice. "
       "Speed: the result against the all-INT8 model, timed as `bert8 bench` times (batch 8 x 128 tokens, %s thread(s), "
       "interleaved, median of up to 50 passes) on a shared 2-core machine, where such ratios move by about ±5 %% from "
       "run to run." % (drop, reps[0]["tune_examples"], reps[0]["held_out_examples"], threads), "",
       "| model | W8A8 | all INT8 Δ tune / held-out | result Δ searched / tune / held-out | held-out within %s | "
       "units kept out of int8_static (output error; Δ alone) | ranking used | evaluations | speed vs all INT8 |" % drop,
       "|---|---|---:|---:|---|---|---|---:|---:|"]
for r in reps:
    f, a, res = r["fp32"], r["all_int8"], r["result"]
    kept = ["%s → %s (%.2g; %s)" % ("L%d %s" % (u["layer"], u["kind"]), u["mode"], u.get("output_error", float("nan")),
            "%+.2f" % -u["metric_drop"] if "metric_drop" in u else "n/a")
            for u in r["units"] if u["mode"] != "int8_static" and not (u["kind"] == "attention" and u.get("fixed"))]
    within = res.get("held_out") is not None and f["held_out"] - res["held_out"] <= float(drop) + 1e-9
    sp = r.get("speed")
    out.append("| %s (K = %s) | %s | %s / %s | %s / %s / %s | %s | %s | %s | %d | %s |" % (
        os.path.basename(r["model"]), k_of(r), form(r),
        d(a["tune"], f["tune"]), d(a["held_out"], f["held_out"]),
        d(res["searched"], f["searched"]), d(res["tune"], f["tune"]), d(res["held_out"], f["held_out"]),
        "yes" if within else "**no**", "; ".join(kept) if kept else "none (all INT8 is within the budget)",
        r["ranking_used"] if r["ranking_used"] != "none" else "no search", r["evaluations"],
        "%.3fx" % sp["result_over_all_int8"] if sp else "n/a"))
out += ["", "Each ranking the search followed (moves down the ladder until within the budget, then trims back up):", "",
        "| model | W8A8 | ranking | first units in its order | moves | trims | int8_dynamic | fp32 | Δ searched / held-out |",
        "|---|---|---|---|---:|---:|---:|---:|---:|"]
for r in reps:
    for t in r["trials"]:
        out.append("| %s | %s | %s%s | %s | %d | %d | %d | %d | %s / %s |" % (
            os.path.basename(r["model"]), form(r),
            t["ranking"], " (used)" if t["ranking"] == r["ranking_used"] else "",
            ", ".join(unit(u) for u in t["order"][:4]), t["moves"], t["trims"], t["int8_dynamic"], t["fp32"],
            d(t.get("searched"), r["fp32"]["searched"]), d(t.get("held_out"), r["fp32"]["held_out"])))
    if not r["trials"]:
        out.append("| %s | %s | (none: all INT8 within the budget) | | | | | | |" % (
            os.path.basename(r["model"]), form(r)))
out += ["", "<!-- accuracy_report.sh budget: generated up to here -->"]
open(md_out, "w").write("\n".join(out) + "\n")
json.dump({"generated": now, "bert8": version, "threads": int(threads), "calibration_samples": int(samples),
           "max_drop": float(drop), "reports": reps}, open(json_out, "w"), indent=1)
PY
  local begin='<!-- accuracy_report.sh budget: generated from here -->' end='<!-- accuracy_report.sh budget: generated up to here -->'
  if grep -qF "$begin" "$MD_OUT" && grep -qF "$end" "$MD_OUT"; then
    awk -v b="$begin" -v e="$end" -v gen="$TMP/budget.md" '
      $0 == b { while ((getline l < gen) > 0) print l; skip = 1; next }
      $0 == e { skip = 0; next }
      !skip' "$MD_OUT" > "$TMP/accuracy-budget.md" && cp "$TMP/accuracy-budget.md" "$MD_OUT"
  else
    { echo; cat "$TMP/budget.md"; } >> "$MD_OUT"
  fi
  echo "wrote $BUDGET_JSON_OUT and the budget section of $MD_OUT" >&2
}
if [[ " $PARTS " == *" budget "* ]]; then budget_section; fi
[[ " $PARTS " == *" variants "* ]] || exit 0

# Metrics of a task, as eval --json names them.
metrics_of() {
  case "$1" in sst2|xnli) echo accuracy;; mrpc) echo "accuracy f1";; stsb) echo "spearman pearson";; squad) echo "exact_match f1";; esac
}
jget() { sed -n "s/.*\"$2\":\(-\{0,1\}[0-9.eE+-]*\).*/\1/p" <<<"$1"; }

# variants: id, label, quantize arguments ("" = the FP32 folder itself)
VARIANTS=("fp32|FP32|"
          "default|static, alpha auto, FFN-in and FFN-out inputs per token, INT8 attention (the default)|--scheme static"
          "static_zp|static, alpha auto, FFN-in and FFN-out static (FFN-out with a zero point), INT8 attention|--scheme static --ffn-out static --ffn-in static"
          "dynamic_auto_att8|dynamic, alpha auto, INT8 attention|--scheme dynamic"
          "static_a0.5|static, SmoothQuant alpha 0.5, FFN-out static, FP32 attention|--scheme static --alpha 0.5 --ffn-out static --ffn-in static --attention fp32"
          "static_auto|static, SmoothQuant alpha auto, FFN-out static, FP32 attention|--scheme static --alpha auto --ffn-out static --ffn-in static --attention fp32"
          "dynamic_a0.5|dynamic, SmoothQuant alpha 0.5, FP32 attention|--scheme dynamic --alpha 0.5 --attention fp32"
          "dynamic_auto|dynamic, SmoothQuant alpha auto, FP32 attention|--scheme dynamic --alpha auto --attention fp32"
          "static_a0.5_att8|static, alpha 0.5, FFN-out static, INT8 attention (the default until 2026-12-03, now with a zero point)|--scheme static --alpha 0.5 --ffn-out static --ffn-in static --attention int8"
          "dynamic_a0.5_att8|dynamic, alpha 0.5, INT8 attention|--scheme dynamic --alpha 0.5 --attention int8"
          "default_w7|the default with 7-bit weights|--scheme static --weight-bits 7"
          "dynamic_auto_att8_w7|dynamic, alpha auto, INT8 attention, 7-bit weights|--scheme dynamic --weight-bits 7"
          "naive_static|naive W8A8 static (no smoothing, FFN-out static, FP32 attention)|--scheme static --alpha none --ffn-out static --ffn-in static --attention fp32"
          "naive_dynamic|naive W8A8 dynamic (no smoothing, FP32 attention)|--scheme dynamic --alpha none --attention fp32")

MODELS_JSON=()
MD_TABLES=""
SUMMARY_ROWS=""
for m in "${MODELS[@]}"; do
  m=${m%/}
  name=$(basename "$m")
  task_setup "$m"; rc=$?
  if [ $rc = 2 ]; then echo "accuracy_report: $name: no task known for this folder name; skipped" >&2; continue; fi
  if [ $rc != 0 ]; then echo "accuracy_report: $name: could not build the calibration set; skipped" >&2; continue; fi
  echo "== $name ($TASK)" >&2
  mets=$(metrics_of "$TASK")
  rows_json=() fp32_line=""
  hdr="| variant |" sep="|---|"
  for k in $mets; do hdr="$hdr $k | Δ pts |"; sep="$sep---:|---:|"; done
  table="$hdr target |"$'\n'"$sep---|"$'\n'
  worst_static="" worst_dynamic=""
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r vid vlabel vargs <<<"$v"
    [ -z "${ONLY:-}" ] || [ "$vid" = fp32 ] || [[ " $ONLY " == *" $vid "* ]] || continue
    dir=$m
    if [ -n "$vargs" ]; then
      dir=$TMP/$name-$vid
      # shellcheck disable=SC2086
      if ! "$BERT8" quantize "$m" -o "$dir" --calib "$CALIB" "${CALIB_ARGS[@]}" --samples "$SAMPLES" $vargs \
           --threads "$THREADS" --quiet 2> "$TMP/err"; then
        echo "  $vid: quantize failed: $(cat "$TMP/err")" >&2
        rows_json+=("{\"variant\":\"$vid\",\"error\":\"quantize failed\"}"); continue
      fi
    fi
    line=$("$BERT8" eval "$dir" --task "$TASK" "${EVAL_ARGS[@]}" --json --quiet --threads "$THREADS" 2> "$TMP/err" | tail -1)
    if [ -z "$line" ]; then
      echo "  $vid: eval failed: $(cat "$TMP/err")" >&2
      rows_json+=("{\"variant\":\"$vid\",\"error\":\"eval failed\"}"); continue
    fi
    [ -n "$vargs" ] && rm -rf "$dir"
    echo "  $vid: $line" >&2
    [ "$vid" = fp32 ] && fp32_line=$line
    deltas="" cells="" worst=""
    for k in $mets; do
      val=$(jget "$line" "$k") base=$(jget "$fp32_line" "$k")
      d=$(awk -v a="$val" -v b="$base" 'BEGIN { printf "%+.2f", 100 * (a - b) }')
      cells="$cells $(awk -v a="$val" 'BEGIN { printf "%.2f", 100 * a }') |"
      if [ "$vid" = fp32 ]; then cells="$cells |"; else cells="$cells $d |"; deltas="$deltas,\"$k\":${d#+}"; fi
      worst=$(awk -v w="${worst:-1e9}" -v d="$d" 'BEGIN { print (d < w ? d : w) }')
    done
    target=""
    case "$vid" in
      static_*|default*) target=$(awk -v w="$worst" 'BEGIN { print (w >= -0.5 ? "holds (≥ -0.5)" : "**missed** (≥ -0.5)") }')
                worst_static=$(awk -v a="${worst_static:-1e9}" -v b="$worst" 'BEGIN { print (b < a ? b : a) }');;
      dynamic_*) target=$(awk -v w="$worst" 'BEGIN { print (w >= -0.3 ? "holds (≥ -0.3)" : "**missed** (≥ -0.3)") }')
                worst_dynamic=$(awk -v a="${worst_dynamic:-1e9}" -v b="$worst" 'BEGIN { print (b < a ? b : a) }');;
    esac
    table="$table| $vlabel |$cells $target |"$'\n'
    rows_json+=("{\"variant\":\"$vid\",\"quantize_args\":\"$vargs\",\"delta_points\":{${deltas#,}},\"eval\":$line}")
  done
  n=$(jget "$fp32_line" n)
  outl=""; [ -f "$m/outlier.json" ] && outl=" Outlier variant: see $m/README.md."
  # The trainer's own FP32 score (torch maths on the stored weights), as a check of bert8's FP32 row.
  torch_m=""
  [ -f "$m/metrics.json" ] && torch_m=$(awk '/"metrics": *\{/ { f = 1; next } f && /\}/ { f = 0 } f' "$m/metrics.json" | tr -d ' \n')
  torch_txt=""; [ -n "$torch_m" ] && torch_txt=" Trainer's torch FP32 (metrics.json): $(sed 's/,/, /g; s/"//g; s/:/ /g' <<<"$torch_m")."
  MD_TABLES="$MD_TABLES### $name ($TASK, n = $n)"$'\n\n'"Eval: $EVAL_DESC. Calibration: $CALIB_DESC.$outl$torch_txt"$'\n\n'"$table"$'\n'
  SUMMARY_ROWS="$SUMMARY_ROWS| $name | $TASK | ${worst_static:-n/a} | ${worst_dynamic:-n/a} |"$'\n'
  joined=$(IFS=,; echo "${rows_json[*]}")
  MODELS_JSON+=("{\"model\":\"$name\",\"task\":\"$TASK\",\"torch_fp32\":{$torch_m},\"eval\":\"$EVAL_DESC\",\"calibration\":\"$CALIB_DESC\",\"rows\":[$joined]}")
done

# ---- regression numbers (the same setting as tests/test_accuracy.c) ------------------------------
echo "== regression: $REG_MODEL, first $REG_LIMIT rows of glue/SST-2.dev.tsv" >&2
REG_JSON=null
if "$BERT8" quantize "$REG_MODEL" -o "$TMP/reg-int8" --calib "$DATA/$REG_CALIB" --column sentence \
     --samples "$REG_CALIB_ROWS" --scheme static --alpha 0.5 --threads 1 --quiet; then
  rf=$("$BERT8" eval "$REG_MODEL" --task sst2 --data "$DATA/glue/SST-2.dev.tsv" --limit "$REG_LIMIT" --json --quiet --threads 1 | tail -1)
  ri=$("$BERT8" eval "$TMP/reg-int8" --task sst2 --data "$DATA/glue/SST-2.dev.tsv" --limit "$REG_LIMIT" --json --quiet --threads 1 | tail -1)
  if [ -n "$rf" ] && [ -n "$ri" ]; then
    REG_JSON="{\"model\":\"$REG_MODEL\",\"data\":\"glue/SST-2.dev.tsv\",\"limit\":$REG_LIMIT,\"calibration\":\"$REG_CALIB\",\"calibration_rows\":$REG_CALIB_ROWS,\"column\":\"sentence\",\"scheme\":\"static\",\"alpha\":\"0.5\",\"threads\":1,\"fp32\":$rf,\"int8\":$ri}"
    echo "  fp32: $rf"$'\n'"  int8: $ri" >&2
  fi
fi
[ "$REG_JSON" != null ] || echo "accuracy_report: the regression numbers could not be computed" >&2

# ---- outlier ratios (needs torch; skipped without it) -------------------------------------------
# Measured on SST-2 train sentences for every model, so the trained models' (absent) outliers
# can be compared with the outlier variant's.
OUTLIERS_JSON=null
if [ ${#MODELS[@]} -gt 0 ] && "$PY" -c "import torch" 2>/dev/null; then
  echo "== outlier ratios" >&2
  OB=/usr/lib/x86_64-linux-gnu/openblas-serial
  if LD_LIBRARY_PATH=$OB "$PY" train/outliers.py "${MODELS[@]}" --keep-going --json > "$TMP/outliers.json" 2> "$TMP/err"; then
    OUTLIERS_JSON=$(cat "$TMP/outliers.json")
    OUTLIERS_TXT=$(LD_LIBRARY_PATH=$OB "$PY" train/outliers.py "${MODELS[@]}" --keep-going 2>/dev/null)
  else
    echo "accuracy_report: train/outliers.py failed: $(cat "$TMP/err")" >&2
  fi
elif [ ${#MODELS[@]} -gt 0 ]; then
  echo "accuracy_report: $PY has no torch: outlier ratios not measured" >&2
fi

# ---- write --------------------------------------------------------------------------------------
VERSION=$("$BERT8" --version 2>/dev/null | head -1)
NOW=$(date -u '+%Y-%m-%d %H:%M UTC')
{
  printf '{"generated":"%s","bert8":"%s","threads":%s,"calibration_samples":%s,\n"models":[\n' \
    "$NOW" "$VERSION" "$THREADS" "$SAMPLES"
  first=1
  for j in "${MODELS_JSON[@]}"; do [ $first = 1 ] || printf ',\n'; printf '%s' "$j"; first=0; done
  printf '\n],\n"regression":%s,\n"outliers":%s}\n' "$REG_JSON" "$OUTLIERS_JSON"
} > "$TMP/accuracy.json"
# Checked when a Python is at hand (the pieces are bert8's own JSON lines, so it should be valid).
if command -v "$PY" >/dev/null && ! "$PY" -c "import json,sys; json.load(open(sys.argv[1]))" "$TMP/accuracy.json"; then
  echo "accuracy_report: the JSON assembled is not valid; left in $JSON_OUT.bad" >&2
  cp "$TMP/accuracy.json" "$JSON_OUT.bad"
else
  cp "$TMP/accuracy.json" "$JSON_OUT"
fi

BEGIN='<!-- accuracy_report.sh: generated from here -->'
END='<!-- accuracy_report.sh: generated up to here -->'
{
  echo "$BEGIN"
  echo
  echo "Generated $NOW by \`scripts/accuracy_report.sh\` ($VERSION, $THREADS thread(s), $SAMPLES calibration rows);"
  echo "the same numbers are in \`docs/accuracy.json\`. Metrics in points (percent); Δ is INT8 minus FP32."
  echo
  echo "#### Worst Δ per model (points, over the task's metrics)"
  echo
  echo "| model | task | static SmoothQuant (target ≥ -0.5) | dynamic SmoothQuant (target ≥ -0.3) |"
  echo "|---|---|---:|---:|"
  printf '%s\n' "$SUMMARY_ROWS"
  printf '%s' "$MD_TABLES"
  if [ "$REG_JSON" != null ]; then
    echo "#### Regression numbers (checked by \`tests/test_accuracy.c\`)"
    echo
    echo "\`$REG_MODEL\` on the first $REG_LIMIT rows of \`glue/SST-2.dev.tsv\`; INT8 = static, alpha 0.5,"
    echo "calibrated on the first $REG_CALIB_ROWS rows of \`$REG_CALIB\`, one thread:"
    echo "FP32 $(jget "$rf" correct)/$REG_LIMIT, INT8 $(jget "$ri" correct)/$REG_LIMIT."
    echo
  fi
  if [ "$OUTLIERS_JSON" != null ]; then
    echo "#### Outlier ratios (\`train/outliers.py\`)"
    echo
    echo '```'
    echo "$OUTLIERS_TXT"
    echo '```'
    echo
  fi
  echo "$END"
} > "$TMP/generated.md"

if [ -f "$MD_OUT" ] && grep -qF "$BEGIN" "$MD_OUT" && grep -qF "$END" "$MD_OUT"; then
  awk -v b="$BEGIN" -v e="$END" -v gen="$TMP/generated.md" '
    $0 == b { while ((getline l < gen) > 0) print l; skip = 1; next }
    $0 == e { skip = 0; next }
    !skip' "$MD_OUT" > "$TMP/accuracy.md"
else
  { echo "# FP32 vs INT8 accuracy"; echo; cat "$TMP/generated.md"; } > "$TMP/accuracy.md"
fi
cp "$TMP/accuracy.md" "$MD_OUT"
echo "wrote $JSON_OUT and $MD_OUT" >&2
