#!/usr/bin/env python3
"""Checks the PDL contract of src/cuda/pdl.cuh on CUDA sources.

1. Every __global__ function defined in the files calls pdl_wait() in its body: a kernel launched
   with programmatic dependent launch that does not wait could read its predecessor's output
   before it is written.
2. No <<<...>>> launch outside the files named by --allow-chevrons: the backend's launches go through
   cudaLaunchKernelEx (launch_kernel in pdl.cuh, or persistent_launch_config), so that MOEFUSE_PDL=1 reaches
   every kernel of the forward.
3. Every cudaLaunchKernelEx call is the argument of launched(), which clears the runtime's last
   error when the launch failed (as cudaGetLastError() after <<<>>> did).

Usage: pdl_check.py [--allow-chevrons NAME,...] FILE_OR_DIR...  (exit 0: clean, 1: violations listed)
"""
import os
import re
import sys


def strip_comments(text):
    """Comments and string literals blanked out, newlines kept (line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('"' + " " * (min(j, n) - i - 1) + '"')
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def kernels(text):
    """(name, line, body) of each __global__ function definition in comment-free text."""
    found = []
    for m in re.finditer(r"\b__global__\b", text):
        i, depth, name = m.end(), 0, None
        # The parameter list: the first '(' at depth 0 after the name, to its match.
        while i < len(text):
            c = text[i]
            if c == "(":
                if depth == 0 and name is None:
                    words = re.findall(r"[A-Za-z_]\w*", text[m.end():i])
                    name = words[-1] if words else "?"
                depth += 1
            elif c == ")":
                depth -= 1
            elif depth == 0 and c in ";{":
                break
            i += 1
        if i >= len(text) or text[i] == ";":
            continue  # a declaration
        start, depth = i, 0
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        found.append((name, text.count("\n", 0, m.start()) + 1, text[start:i + 1]))
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith((".cu", ".cuh")):
                        yield os.path.join(root, f)
        else:
            yield p


def main(argv):
    allow = set()
    if len(argv) > 2 and argv[1] == "--allow-chevrons":
        allow = set(argv[2].split(","))
        argv = argv[:1] + argv[3:]
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    bad, count = [], 0
    for path in sources(argv[1:]):
        text = strip_comments(open(path, encoding="utf-8").read())
        for name, line, body in kernels(text):
            count += 1
            if not re.search(r"\bpdl_wait\s*\(\s*\)", body):
                bad.append(f"{path}:{line}: kernel {name} does not call pdl_wait()")
        for m in re.finditer(r"\bcudaLaunchKernelEx\s*\(", text):
            if not re.search(r"\blaunched\s*\(\s*$", text[:m.start()]):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: cudaLaunchKernelEx outside launched() (its error would stay set)")
        if os.path.basename(path) not in allow:
            for m in re.finditer(r"<<<", text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: <<<...>>> launch (use launch_kernel: pdl.cuh)")
    for b in bad:
        print(b)
    print(f"pdl_check: {count} kernels, {len(bad)} violations")
    return 1 if bad or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
