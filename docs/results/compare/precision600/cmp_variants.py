import re,sys,collections
# usage (repository root): python3 docs/results/compare/precision600/cmp_variants.py VARIANT_LINES...
# variant lines LAB@100 SPACE @10 .. @100 -> cells @50 and @100 against the five strategies (recorded, 600 seeds)
# and means on generated spaces against 'base'
rows=collections.defaultdict(dict)
def load(path, both):
    for line in open(path):
        m=re.match(r'(\S+)@(\d+)\s+(\S+)\s+(.*)',line.strip())
        if not m: continue
        lab,b,sp,rest=m.groups()
        bs=(50,100) if both else (int(b),)
        for bb in bs:
            v=re.findall(r'@'+str(bb)+r' ([\d.]+)',rest)
            if v: rows[(sp,bb)][lab]=float(v[-1])
load('docs/results/compare/precision600/five_strategies_600.txt', False)
for p in sys.argv[1:]: load(p, True)
others=['anneal','rules','genetic','surrogate']
rec=sorted({k for k in rows if 'anneal' in rows[k]})
labs=sorted({l for k in rec for l in rows[k] if l not in others})
print('space budget', ' '.join(f'{l:>6s}' for l in labs), '| best other')
cnt=collections.Counter(); mean=collections.defaultdict(float)
for (sp,b) in rec:
    d=rows[(sp,b)]
    bo=max((d[o],o) for o in others if o in d)
    print(f'{sp:28s} {b:4d}', ' '.join(f'{d.get(l,float("nan")):6.3f}' for l in labs), f'| {bo[1]} {bo[0]:.3f}')
    for l in labs:
        if l in d:
            mean[(l,b)]+=d[l]/12
            if d[l] < bo[0]-0.005: cnt[(l,b)]+=1
for l in labs:
    print(l, ' '.join(f'@{b}: {mean[(l,b)]:.4f} behind {cnt[(l,b)]}' for b in (50,100)))
gen=[k for k in rows if k not in rec]
for kind,pre in (('rough','genr_'),('plain','gen_')):
    for b in (50,100):
        ks=[k for k in gen if k[1]==b and k[0].startswith(pre)]
        labs2=sorted({l for k in ks for l in rows[k]})
        print(kind,b,len(ks),' '.join(f'{l} {sum(rows[k].get(l,0) for k in ks)/len(ks):.4f}' for l in labs2))
