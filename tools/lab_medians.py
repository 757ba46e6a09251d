# Medians of the FP8 lab's round logs per shape and impl, as a markdown table:
#   python3 tools/lab_medians.py cublaslt,fp8v6,fp8engine round1.log round2.log ...
import re,collections,sys,statistics as st
d=collections.defaultdict(list)
for f in sys.argv[2:]:
    for l in open(f):
        p=l.split()
        if len(p)<8 or 'FAIL' in l or not re.match(r'^[0-9.]+$',p[-5]): continue
        d[(p[0],p[-6])].append(float(p[-5]))
shapes=[]
for (s,i) in d:
    if s not in shapes: shapes.append(s)
impls=sys.argv[1].split(',')
print('| shape | '+' | '.join(impls)+' |'); print('|---'*(len(impls)+1)+'|')
for s in shapes:
    print('| '+s+' | '+' | '.join((('%.4f'%st.median(d[(s,i)])) if (s,i) in d else '-') for i in impls)+' |')
