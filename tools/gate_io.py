"""What the gate tools (issue3_gates.py, issue4_gates.py) share: reading their JSON inputs and
writing their results.

A run's JSON that cannot be read counts as empty (its gates are then reported missing, never
passed), with the reason on stderr; the results go to --out as JSON, to --md and stdout as markdown.
"""
import json
import sys


def load(tool, path, absent):
    """The JSON document at path, or {} with `tool: path: reason (absent)` on stderr."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as e:
        print(f"{tool}: {path}: {e} ({absent})", file=sys.stderr)
        return {}


def write(doc, out, text, md=None):
    """doc as JSON to out; the markdown text to md (when given) and to stdout."""
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
    if md:
        with open(md, "w") as fh:
            fh.write(text)
    sys.stdout.write(text)
