#!/bin/bash
# sass_cmp.sh BASE_CUBIN NEW_CUBIN BASE_NAME NEW_NAME: instruction counts (NOPs excluded) and differing lines,
# raw and with register numbers and addresses masked
cuo=/tmp/cuobj/nvidia/cu13/bin/cuobjdump
ext(){ $cuo -sass $1 | awk -v f="$2" '/Function : /{p = index($0, f) > 0} p' | sed -E 's@/\*[0-9a-f]{4}\*/@@; s@ */\* 0x[0-9a-f]+ \*/@@' | grep -E "^\s+[@A-Z]" | grep -v "Function"; }
ext $1 "$3" > /tmp/sc_b; ext $2 "$4" > /tmp/sc_n
m(){ sed -E 's/0x[0-9a-f]+//g; s/\bU?R[0-9]+\b/R/g; s/\bU?P[0-9]\b/P/g' $1; }
echo "$3 -> $4: instructions (no NOP) $(grep -vc NOP /tmp/sc_b) -> $(grep -vc NOP /tmp/sc_n); lines differing raw $(diff /tmp/sc_b /tmp/sc_n | grep -c '^<'), with registers and addresses masked $(diff <(m /tmp/sc_b) <(m /tmp/sc_n) | grep -c '^<')"
