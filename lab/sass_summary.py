#!/usr/bin/env python3
"""Per kernel of a `cuobjdump --dump-sass` listing: code size and counts of key opcodes.

    cuobjdump --dump-sass binary | python3 lab/sass_summary.py [OPCODE ...]

Code size is the offset of the kernel's last instruction + 16 bytes (the part an instruction
cache has to hold); counts are of the opcode's first dot-separated word, predicated or not.
"""
import re
import sys

KEY = sys.argv[1:] or ["HGMMA", "WARPGROUP", "BAR", "MUFU", "BRX", "CALL", "STG", "STS", "LDS", "LDG", "LDL",
                       "STL", "UTMALDG", "SYNCS", "WARPSYNC"]
insn = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
kernels = {}
name = None
for line in sys.stdin:
    if "Function :" in line:
        name = line.split("Function :")[1].strip()
        kernels[name] = {"bytes": 0, "insns": 0, "ops": {}}
        continue
    m = insn.search(line)
    if not m or name is None:
        continue
    k = kernels[name]
    k["bytes"] = int(m.group(1), 16) + 16
    k["insns"] += 1
    op = m.group(3)
    if op in KEY:
        k["ops"][op] = k["ops"].get(op, 0) + 1


def short(n):
    # grouped_gemm_kernel<MODE, EPI, ACT> reads better than the mangled name
    m = re.search(r"grouped_gemm_kernelILi(\d+)ELi(\d+)ELi(-?\d+)E", n)
    if m:
        return "grouped<mode %s, epi %s, act %s>" % m.groups()
    m = re.search(r"\d+([a-z_]+kernel)", n)
    return m.group(1) if m else n[:60]


print("%-34s %8s %6s  %s" % ("kernel", "bytes", "insns", "  ".join("%s" % o for o in KEY)))
for n, k in kernels.items():
    print("%-34s %8d %6d  %s" % (short(n), k["bytes"], k["insns"],
                                 "  ".join("%*d" % (len(o), k["ops"].get(o, 0)) for o in KEY)))
