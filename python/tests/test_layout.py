"""The ctypes mirrors of moefuse.h's structs and enums against what the C compiler makes of
the header: a small C program, written from the mirrors' own field lists, prints sizeof and
every offsetof, and the value of every enum constant. Skipped without a C compiler."""

import ctypes
import os
import shutil
import subprocess

import pytest

import moefuse
from moefuse import _lib

HERE = os.path.dirname(os.path.abspath(__file__))


def header_dir():
    root = os.environ.get("MOEFUSE_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
    return os.path.join(root, "include")


def compiler():
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


# (enum class, prefix of its C constants)
ENUMS = [
    (moefuse.Status, "MOE_STATUS_"), (moefuse.Backend, "MOE_BACKEND_"), (moefuse.DType, "MOE_DTYPE_"),
    (moefuse.Memory, "MOE_MEMORY_"), (moefuse.Format, "MOE_FORMAT_"), (moefuse.Score, "MOE_SCORE_"),
    (moefuse.Activation, "MOE_ACT_"), (moefuse.Layout, "MOE_LAYOUT_"),
]
# The enum's count constant in the header (each mirror must cover every value), by prefix.
COUNTS = {"MOE_STATUS_": "MOE_STATUS_COUNT_", "MOE_DTYPE_": "MOE_DTYPE_COUNT_", "MOE_FORMAT_": "MOE_FORMAT_COUNT_"}
MACROS = {"MOE_MAX_DIMS": _lib.MAX_DIMS, "MOE_MAX_LAYERS": _lib.MAX_LAYERS, "MOE_NAME_MAX": _lib.NAME_MAX}


def c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "moefuse.h"', "int main(void) {"]
    for cname, cls in _lib.STRUCTS.items():
        lines.append(f'    printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _ in cls._fields_:
            lines.append(f'    printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    for cls, prefix in ENUMS:
        for member in cls:
            lines.append(f'    printf("{prefix}{member.name} %d\\n", (int){prefix}{member.name});')
    for macro in list(COUNTS.values()) + list(MACROS):
        lines.append(f'    printf("{macro} %d\\n", (int){macro});')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_facts(tmp_path_factory):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    work = tmp_path_factory.mktemp("layout")
    src, exe = work / "layout.c", work / "layout"
    src.write_text(c_program())
    build = subprocess.run([cc, "-std=c11", "-I", header_dir(), str(src), "-o", str(exe)], capture_output=True,
                           text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    facts = {}
    for line in out.splitlines():
        key, value = line.rsplit(" ", 1)
        facts[key] = int(value)
    return facts


@pytest.mark.parametrize("cname", list(_lib.STRUCTS))
def test_struct_layout(c_facts, cname):
    cls = _lib.STRUCTS[cname]
    assert ctypes.sizeof(cls) == c_facts[cname], f"sizeof({cname})"
    for field, _ in cls._fields_:
        assert getattr(cls, field).offset == c_facts[f"{cname}.{field}"], f"offsetof({cname}, {field})"


def test_struct_fields_cover_the_whole_struct(c_facts):
    """No C field is missing from a mirror: the last mirrored field plus its size (rounded up
    to the struct's alignment) ends where sizeof says the struct ends."""
    for cname, cls in _lib.STRUCTS.items():
        name, ctype = cls._fields_[-1]
        end = getattr(cls, name).offset + ctypes.sizeof(ctype)
        align = ctypes.alignment(cls)
        assert -(-end // align) * align == c_facts[cname], cname


def test_enums_and_macros(c_facts):
    for cls, prefix in ENUMS:
        for member in cls:
            assert int(member) == c_facts[prefix + member.name], prefix + member.name
        if prefix in COUNTS:
            assert len(cls) == c_facts[COUNTS[prefix]], f"{cls.__name__} misses values of {COUNTS[prefix]}"
    for macro, value in MACROS.items():
        assert value == c_facts[macro], macro
