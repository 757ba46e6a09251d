#!/usr/bin/env python3
"""Stall samples per SASS instruction from `ncu --import X.ncu-rep --page source --csv --print-source sass`
(a run with --section SourceCounters): the total, the stall reasons' shares, and the top instructions.
Usage: ncu_stalls.py FILE.csv ... (session 10 found GEMM2's unit-start plan reads with it)."""
import csv,sys,collections
def load(p):
    lines=open(p).read().splitlines()
    i=next(k for k,l in enumerate(lines) if l.startswith('"Address"'))
    rows=list(csv.DictReader(lines[i:]))
    return rows
for p in sys.argv[1:]:
    rows=load(p)
    tot=sum(float(r["Warp Stall Sampling (All Samples)"] or 0) for r in rows)
    print("==",p,"total samples",tot, "instrs",len(rows))
    reasons=collections.Counter()
    for r in rows:
        for k,v in r.items():
            if k.startswith("stall_") and "Not Issued" not in k and v: reasons[k]+=float(v)
    print(" reasons:", ", ".join(f"{k[6:]} {v/tot*100:.1f}%" for k,v in reasons.most_common(8)))
    top=sorted(rows,key=lambda r:-float(r["Warp Stall Sampling (All Samples)"] or 0))[:18]
    for r in top:
        s=float(r["Warp Stall Sampling (All Samples)"] or 0)
        rs=sorted(((float(v),k[6:]) for k,v in r.items() if k.startswith("stall_") and "Not Issued" not in k and v and float(v)>0),reverse=True)[:2]
        print(f"  {r['Address']:>6} {s/tot*100:5.1f}% ex={r['Instructions Executed']:>9} {r['Source'][:60]:60} {rs}")
