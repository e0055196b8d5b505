"""Merges the BERT-base peers runs of 2026-12-01 into one results file (docs/benchmarks.md says how)."""
import gzip, json, sys
R = ''  # run from bench/peers/results/: python3 raw-20261201/merge.py PEAKS_JSON
a = json.load(open('raw-20261201/peers-bert-base-2t-round1.json'))            # round 1, fixed shapes (its mix column was stopped)
b = json.load(open('raw-20261201/peers-bert-base-r23.json'))      # rounds 2-3, fixed shapes
b1 = json.load(open('raw-20261201/peers-bert-base-b1.json'))      # rounds 2-3 of b=1 again, on a quiet machine
m1 = json.load(open('raw-20261201/peers-bert-base-mix-round1.json'))       # mix, round 1 (stopped after it: too slow)
m23 = json.load(open('raw-20261201/peers-bert-base-mix.json'))    # mix, rounds 2-3, the fastest INT8 peers and bert8
peaks = json.loads(sys.argv[1])
def shift(runs, by, keep):
    out = []
    for r in runs:
        if keep(r):
            r = dict(r); r['round'] = r['round'] + by; out.append(r)
    return out
runs = shift(a['runs'], 0, lambda r: r['shape'] != 'mix')
runs += shift(b['runs'], 1, lambda r: r['shape'] in ('8', '32'))
runs += shift(b1['runs'], 1, lambda r: r['shape'] == '1')
runs += shift(m1['runs'], 0, lambda r: r['shape'] == 'mix')
runs += shift(m23['runs'], 1, lambda r: r['shape'] == 'mix')
out = dict(a)
out['tag'] = 'bert-base-20261201'
out['runs'] = runs
out['command'] = ' ; '.join([
    a['command'] + '  [round 1 of b=1,8,32; stopped in its mix column]',
    b['command'] + '  [its rounds 1-2 give rounds 2-3 of b=8,32; its b=1 had background jobs and was replaced]',
    b1['command'] + '  [rounds 2-3 of b=1, quiet]',
    m1['command'] + '  [round 1 of the mix column; stopped after it]',
    m23['command'] + '  [rounds 2-3 of the mix column]'])
out['finished'] = b1.get('finished')
out['settings'] = dict(a['settings'], rounds=3, tag=out['tag'])
out['peaks'] = peaks
out['models']['bert-base']['mix'] = m23['models']['bert-base'].get('mix') or m1['models']['bert-base'].get('mix')
with gzip.open(R + 'peers-bert-base-20261201.json.gz', 'wt') as f:  # compressed as every finished record
    json.dump(out, f, indent=1)
print(len(runs), 'runs')
