#!/bin/sh
# Reproduce every model in models/: vocabulary + MLM pre-training, then each task in priority
# order (mrpc starts from the exported stsb model), one job at a time on one core (logs in train/work/). Run from anywhere.
set -e
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p work
if [ "${SKIP_MLM:-0}" != 1 ]; then
    /usr/bin/python3 pretrain_mlm.py > work/pretrain_mlm.log 2>&1
    /usr/bin/python3 pretrain_pairs.py > work/pretrain_pairs.log 2>&1
fi
for t in ${TASKS:-sst2 stsb mrpc xnli squad}; do
    /usr/bin/python3 finetune.py "$t" > "work/finetune_$t.log" 2>&1
done
