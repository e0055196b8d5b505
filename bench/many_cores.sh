#!/usr/bin/env bash
# many_cores.sh: bert8's INT8 throughput at 1 to N threads on one machine (issue 39's many-core
# table), made to run on a machine that can fetch nothing and lacks bert8's build dependencies
# (the `device` tool's 16-core machine). Two steps:
#
#   bench/many_cores.sh pack [DIR]        here, after a Release build in build/: the CLI, the
#       bench programs, the shared libraries they load beyond the C library, the SST-2 dev set
#       (calibration) and the bert-base-uncased vocabulary from ../shared, into DIR/pack.tar.xz
#       (DIR default .device, an ignored folder: name it in the device call's `carry`); refuses
#       when the pack and the tracked files together pass the 64 MiB a device call carries
#   bench/many_cores.sh run [DIR] OUT [--threads "1 2 4 8 16"] [--batches "1 8 32"] [--budget S]
#                                     [--op-batches "32"]
#       there: unpacks, prints lscpu, writes random BERT-base and all-MiniLM-L6-v2-shaped
#       checkpoints (make_checkpoint), quantizes each with the defaults (static INT8, INT8
#       attention, 256 calibration sentences), measures the INT8 peak (`bert8 bench --roofline`)
#       and `bench_latency` at every thread count and batch (sequence 128), again with
#       BERT8_SEQ_PARALLEL=0 (every op on all threads, not a group of sequences per thread) at
#       the --op-batches sizes and more than one thread, and writes
#       OUT/many_cores.md (the table: seq/s, parallel efficiency against 1 thread, % of the
#       vpdpbusd/AMX peak at that thread count), OUT/lscpu.txt and OUT/raw.tar.gz (every raw
#       output: the device tool returns at most 8 files). The op count is bench/peers/common.py's.
#
# Only bert8 runs there: OpenVINO's wheel (59 MB) does not travel beside the 50 MB working tree
# (64 MiB per call). Weights are random (speed does not depend on them); the figures are
# throughput, not accuracy.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
shift || true

pack() {
    local dir=${1:-$HERE/.device} shared=$HERE/../shared
    local stage
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/lib" "$stage/data" "$dir"
    for b in bert8 bench_latency bench/make_checkpoint; do
        [ -x "$HERE/build/$b" ] || { echo "many_cores: build/$b missing: build Release first" >&2; exit 1; }
        cp "$HERE/build/$b" "$stage/bin/"
    done
    # every library the programs load, but the C library's own (the loader, libc, libm, ...)
    ldd "$stage"/bin/* | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
        case $(basename "$lib") in
        # the C library's own, and the C++ runtime (every such machine has a newer one: torch needs it)
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.*) ;;
        *) cp -L "$lib" "$stage/lib/" ;;
        esac
    done
    cp "$shared/data/glue/SST-2.dev.tsv" "$stage/data/calib.tsv"
    cp "$shared/tokenizers/bert-base-uncased.vocab.txt" "$stage/data/vocab.txt"
    git -C "$HERE" rev-parse --short HEAD >"$stage/commit"
    tar -C "$stage" -cf - . | xz -T0 -6 >"$dir/pack.tar.xz"
    rm -rf "$stage"
    local packed tracked limit=$((64 * 1024 * 1024))
    packed=$(stat -c %s "$dir/pack.tar.xz")
    tracked=$(cd "$HERE" && git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
    echo "many_cores: $dir/pack.tar.xz, $((packed / 1024)) KiB (bert8 at $(git -C "$HERE" rev-parse --short HEAD));" \
        "with the $tracked bytes of tracked files: $((packed + tracked)) of the $limit a device call carries"
    if [ $((packed + tracked)) -gt "$limit" ]; then
        echo "many_cores: too large to travel by $((packed + tracked - limit)) bytes" >&2
        exit 1
    fi
}

run() {
    local dir=$HERE/.device
    if [ $# -ge 2 ] && [ "${2#--}" = "$2" ]; then dir=$1; shift; fi
    local out=${1:?usage: many_cores.sh run [DIR] OUT [--threads LIST] [--batches LIST] [--budget S] [--op-batches LIST]}
    shift
    local threads="1 2 4 8 16" batches="1 8 32" budget=3 op_batches="32"
    while [ $# -gt 0 ]; do
        case $1 in
        --threads) threads=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --op-batches) op_batches=$2; shift 2 ;;
        *) echo "many_cores: unknown argument $1" >&2; exit 2 ;;
        esac
    done
    local final=$out w
    w=$(mktemp -d)
    out=$w/raw # every raw output; OUT gets the table, lscpu and one archive of these (the device
    mkdir -p "$out" "$final" # tool returns at most 8 files)
    # Python's tarfile, not xz(1): the machine may have no xz
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' "$dir/pack.tar.xz" "$w"
    export LD_LIBRARY_PATH=$w/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    local B8=$w/bin/bert8 BL=$w/bin/bench_latency MK=$w/bin/make_checkpoint
    { lscpu; echo; nproc; } >"$out/lscpu.txt" 2>&1
    grep -E "Model name|^CPU\(s\)|Flags" "$out/lscpu.txt" | sed 's/Flags:.*\(amx_tile\).*/Flags: ... amx_tile .../' || true
    echo "bert8 at $(cat "$w/commit")" | tee "$out/commit.txt"

    # the two models: BERT-base, and all-MiniLM-L6-v2's shape (layers hidden heads FFN, also the
    # operation count below)
    local -A shape=([bert-base]="12 768 12 3072" [minilm]="6 384 12 1536")
    local m L H A I
    for m in bert-base minilm; do
        read -r L H A I <<<"${shape[$m]}"
        "$MK" "$w/$m" --layers "$L" --hidden "$H" --heads "$A" --inter "$I" >/dev/null
    done
    for m in bert-base minilm; do
        cp "$w/data/vocab.txt" "$w/$m/vocab.txt"
        local t0=$SECONDS
        "$B8" quantize "$w/$m" -o "$w/$m-int8" --calib "$w/data/calib.tsv" --samples 256 >"$out/quantize-$m.log" 2>&1
        echo "quantized $m in $((SECONDS - t0)) s"
    done

    local t b
    # each peak twice (the better one counts): a core the host takes during one reads low
    for t in $threads; do
        for k in 1 2; do
            "$B8" bench --roofline --threads "$t" --json >"$out/peaks-t$t-$k.json" 2>>"$out/errors.log" ||
                echo "peaks at $t threads failed" >>"$out/errors.log"
        done
    done
    for m in bert-base minilm; do
        for b in $batches; do
            for t in $threads; do
                "$BL" "$w/$m-int8" --batch "$b" --seq 128 --threads "$t" --budget "$budget" --json \
                    >"$out/lat-$m-b$b-t$t.json" 2>>"$out/errors.log" || echo "bench_latency $m b=$b t=$t failed" >>"$out/errors.log"
                echo "$m b=$b t=$t: $(grep -o '"seq_per_s":[0-9.]*' "$out/lat-$m-b$b-t$t.json" || echo failed)"
                case " $op_batches " in *" $b "*) ;; *) continue ;; esac
                [ "$t" -gt 1 ] || continue
                BERT8_SEQ_PARALLEL=0 "$BL" "$w/$m-int8" --batch "$b" --seq 128 --threads "$t" --budget "$budget" --json \
                    >"$out/lat-op-$m-b$b-t$t.json" 2>>"$out/errors.log" || echo "bench_latency (op by op) $m b=$b t=$t failed" >>"$out/errors.log"
                echo "$m b=$b t=$t op by op: $(grep -o '"seq_per_s":[0-9.]*' "$out/lat-op-$m-b$b-t$t.json" || echo failed)"
            done
        done
    done
    LD_LIBRARY_PATH= PYTHONPATH="$HERE/bench/peers" python3 - "$out" "$threads" "$batches" \
        "${shape[bert-base]}" "${shape[minilm]}" <<'EOF'
import json, os, sys
import common  # bench/peers: the operation count the peers' tables use (bert8 bench --roofline's)
out, threads, batches = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def spec(s):
    L, H, A, I = map(int, s.split())
    return {"layers": L, "hidden": H, "inter": I}
gop = {m: common.gop_per_seq(spec(s), 128) for m, s in (("bert-base", sys.argv[4]), ("minilm", sys.argv[5]))}
def load(p):
    try:
        with open(os.path.join(out, p)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
peak = {}
for t in threads:
    got = [j["peaks"]["int8_gops"] for j in (load(f"peaks-t{t}-{k}.json") for k in (1, 2)) if j]
    if got:
        peak[t] = max(got)  # the best INT8 unit's (AMX where present, else vpdpbusd)
# a peak under 0.8 x (threads x the one-thread peak) is flagged: the host held a core, or the
# cores share their units (SMT siblings)
one = peak.get(threads[0], 0) / int(threads[0]) if threads else 0
low = {t for t in peak if one and peak[t] < 0.8 * one * int(t)}
lines = ["| model | batch | threads | INT8 seq/s | efficiency vs 1 thread | % of the INT8 peak (GOP/s at that thread count) | op by op (BERT8_SEQ_PARALLEL=0) seq/s: default / op by op |",
         "|---|---:|---:|---:|---:|---:|---:|"]
for m in gop:
    for b in batches:
        base = None
        for t in threads:
            j = load(f"lat-{m}-b{b}-t{t}.json")
            if not j:
                lines.append(f"| {m} | {b} | {t} | failed | | | |")
                continue
            sps = j["seq_per_s"]
            if base is None and t == threads[0]:
                base = sps / int(t)
            eff = sps / (base * int(t)) if base else float("nan")
            pk = peak.get(t)
            share = f"{100 * sps * gop[m] / pk:.1f}% ({pk:.0f}{', low peak' if t in low else ''})" if pk else "n/a"
            op = load(f"lat-op-{m}-b{b}-t{t}.json")
            ops = f"{op['seq_per_s']:.1f}: {sps / op['seq_per_s']:.2f}x" if op and op.get("seq_per_s") else ""
            lines.append(f"| {m} | {b} | {t} | {sps:.1f} | {eff:.2f} | {share} | {ops} |")
if low:
    lines.append("")
    lines.append(f"low peak: under 0.8 x threads x the one-thread peak ({one:.0f} GOP/s) in both measurements")
text = "\n".join(lines) + "\n"
with open(os.path.join(out, "many_cores.md"), "w") as f:
    f.write(text)
print(text)
EOF
    cp "$out/many_cores.md" "$out/lscpu.txt" "$final/"
    tar -C "$w" -czf "$final/raw.tar.gz" raw
    rm -rf "$w"
    echo "many_cores: $final/many_cores.md, $final/lscpu.txt, $final/raw.tar.gz"
}

case $cmd in
pack) pack "$@" ;;
run) run "$@" ;;
*) sed -n '2,22p' "$0"; exit 2 ;;
esac
