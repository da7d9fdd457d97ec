"""Issue 16's bar at 200 and 400 evaluations from tools/early_curve.lua lines.

Usage: python3 bar_200_400.py rough_bar_200_400.txt [--spaces]

Each line is "STRATEGY@RUN_BUDGET SPACE @10 f ... @RUN_BUDGET f". Anneal plans
with its budget, so its @200 and @400 come from runs of 200 and of 400; the
others' from their runs of 400. A cell is behind when a strategy trails the
best of the other four by more than 0.005.
"""
import sys, re, collections
vals = collections.defaultdict(dict)  # (strategy) -> {(space,budget): v}
for line in open(sys.argv[1]):
    if '@' not in line or line.startswith('done'): continue
    head, rest = line.split(None, 1)
    strat, run_b = head.split('@')
    parts = rest.split()
    space = parts[0]
    cur = {}
    for i in range(1, len(parts) - 1, 2):
        cur[int(parts[i][1:])] = float(parts[i + 1])
    for b in (200, 400):
        if strat == 'anneal' and int(run_b) != b: continue
        if b in cur: vals[strat][(space, b)] = cur[b]
strats = ['mcgs', 'anneal', 'rules', 'genetic', 'surrogate']
spaces = sorted({s for st in vals for (s, _) in vals[st]})
print('| strategy | mean @200 | mean @400 | cells behind @200 (worst) | @400 (worst) |')
print('|---|---:|---:|---:|---:|')
for st in strats:
    row = [st]
    means, behind = [], []
    for b in (200, 400):
        xs = [vals[st][(s, b)] for s in spaces if (s, b) in vals[st]]
        means.append('%.3f' % (sum(xs) / len(xs)) if xs else '-')
        n, worst = 0, 0.0
        for s in spaces:
            if (s, b) not in vals[st]: continue
            others = [vals[o][(s, b)] for o in strats if o != st and (s, b) in vals[o]]
            gap = vals[st][(s, b)] - max(others)
            if gap < -0.005: n += 1
            worst = min(worst, gap)
        behind.append('%d (%+.3f)' % (n, worst))
    print('| %s | %s | %s | %s | %s |' % (st, means[0], means[1], behind[0], behind[1]))
print()
print('spaces: %d' % len(spaces))
if "--spaces" in sys.argv[2:]:
    for s in spaces:
        print(s, ' '.join('%s=%.3f/%.3f' % (st, vals[st].get((s, 200), -1), vals[st].get((s, 400), -1)) for st in strats))
