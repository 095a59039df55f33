import json, collections, statistics, sys
lines=[json.loads(l) for l in open(sys.argv[1])]
phase=None; per=collections.defaultdict(list)
for l in lines:
    if l['kind']=='mark': phase=l['what']; continue
    per[phase].append(l)
for ph, ls in per.items():
    tg=[l for l in ls if l['kind']=='target']; dr=[l for l in ls if l['kind']=='draft']; al=[l for l in ls if l['kind']=='allot']
    pre_t=sum(l['ms'] for l in tg if max(l['rows'])>12); pre_d=sum(l['ms'] for l in dr if max(l['rows'])>4)
    print("==", ph, "target", len(tg), round(sum(l['ms'] for l in tg)), "prefill", round(pre_t), "| draft", len(dr), round(sum(l['ms'] for l in dr)), "catch-up", round(pre_d))
    dec=collections.Counter(sum(l['rows']) for l in tg if max(l['rows'])<=12)
    print("  decode pass rows:", sorted(dec.items()))
    dd=collections.Counter(sum(l['rows']) for l in dr if max(l['rows'])<=4)
    print("  draft step rows:", sorted(dd.items()))
    g=collections.Counter(tuple(sorted(a['gamma'].values())) for a in al); print("  allot", g.most_common(8))
