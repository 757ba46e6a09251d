"""moefuse.Checkpoint (moe_checkpoint_*) against the safetensors format as its reference reader
(the `safetensors` crate, 0.8) reads it. Files are written here by hand, numpy only, following
the format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (padded with spaces),
then the tensor bytes, which the tensors must cover exactly. Each case encodes what the real
library did with the same bytes (compared outside CI, with safetensors 0.8 and torch 2.15):

  - files it writes or reads are opened, listed and read byte for byte; the dtypes moefuse has
    no enum for (BOOL, I8, I16, U16, U32, U64, C64, F4, F6_*, F8_*FNUZ) and tensors of more
    than MOE_MAX_DIMS dimensions open with the rest and are refused by info/read as
    UNSUPPORTED, naming the dtype or the rank;
  - files it refuses are refused with PARSE_ERROR (or IO_ERROR) and a message, never a crash.
    moefuse is stricter in three places, on files no writer makes: an unknown key in a tensor
    entry, a \\u0000 escape (a C string cannot hold the name), a dimension of 2^53 or more."""

import json
import os
import struct

import numpy as np
import pytest

import moefuse
from moefuse import MoeError
from moefuse._lib import MAX_DIMS

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "U16": 16, "I16": 16, "F16": 16, "BF16": 16, "U32": 32, "I32": 32,
        "F32": 32, "U64": 64, "I64": 64, "F64": 64, "C64": 64, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
        "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
SUPPORTED = {"F32": "f32", "F16": "f16", "BF16": "bf16", "F64": "f64", "F8_E4M3": "e4m3", "F8_E5M2": "e5m2",
             "F8_E8M0": "e8m0", "I32": "i32", "I64": "i64", "U8": "u8"}


def nbytes(dtype, shape):
    return int(np.prod(shape, dtype=np.int64)) * BITS[dtype] // 8


def header_bytes(header):
    text = header if isinstance(header, bytes) else json.dumps(header, ensure_ascii=False).encode()
    return text + b" " * (-len(text) % 8)


def file_bytes(header, data=b"", length=None):
    """header: a dict (serialised as the reference does: UTF-8, padded to 8 with spaces) or raw
    bytes (used as they are, padded); length: the header length field, if not the true one."""
    text = header_bytes(header)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def packed(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes), packed back to back in this order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return file_bytes(header, data)


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)
    return str(path)


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def check_reads(ck, tensors):
    """Names, info and bytes of every tensor against what was written."""
    assert ck.names() == sorted(tensors)
    for name, (dtype, shape, raw) in tensors.items():
        if dtype not in SUPPORTED or len(shape) > MAX_DIMS:
            with pytest.raises(MoeError) as e:
                ck.info(name)
            assert e.value.name == "MOE_STATUS_UNSUPPORTED"
            assert (dtype in e.value.message) if dtype not in SUPPORTED else ("dimensions" in e.value.message)
            with pytest.raises(MoeError) as e:
                ck.read(name)
            assert e.value.name == "MOE_STATUS_UNSUPPORTED"
            continue
        info = ck.info(name)
        assert (info.dtype, info.shape, info.nbytes) == (SUPPORTED[dtype], tuple(shape), len(raw)), name
        assert ck.read(name).tobytes() == raw, name


# ---- what the library writes --------------------------------------------------------------

# safetensors.torch.save(t, metadata={"format": "pt", "ü": "ß"}) of
#   i.i64 = tensor(7), f.f32 = [1.5, -0.0], w.bf16 = [[1, -2.5, 3]], e.f16 = zeros(0, 2),
#   s.e8m0 = [1, 2^-3], x.f8 (e4m3fn) = [0.5, -448], u.u8 = [1, 2, 3]
# byte for byte as safetensors 0.8 wrote it (tensors by alignment then name, header padded).
GOLDEN = bytes.fromhex(
    "d0010000000000007b225f5f6d657461646174615f5f223a7b22c3bc223a22c39f222c22666f726d6174223a227074227d2c"
    "22692e693634223a7b226474797065223a22493634222c227368617065223a5b5d2c22646174615f6f666673657473223a5b"
    "302c385d7d2c22662e663332223a7b226474797065223a22463332222c227368617065223a5b325d2c22646174615f6f6666"
    "73657473223a5b382c31365d7d2c22772e62663136223a7b226474797065223a2242463136222c227368617065223a5b312c"
    "335d2c22646174615f6f666673657473223a5b31362c32325d7d2c22652e663136223a7b226474797065223a22463136222c"
    "227368617065223a5b302c325d2c22646174615f6f666673657473223a5b32322c32325d7d2c22732e65386d30223a7b2264"
    "74797065223a2246385f45384d30222c227368617065223a5b325d2c22646174615f6f666673657473223a5b32322c32345d"
    "7d2c22782e6638223a7b226474797065223a2246385f45344d33222c227368617065223a5b325d2c22646174615f6f666673"
    "657473223a5b32342c32365d7d2c22752e7538223a7b226474797065223a225538222c227368617065223a5b335d2c226461"
    "74615f6f666673657473223a5b32362c32395d7d7d2007000000000000000000c03f00000080803f20c040407f7c30fe0102"
    "03")


def test_golden_file_from_the_library(tmp_path):
    with moefuse.Checkpoint(write(tmp_path / "g.safetensors", GOLDEN)) as ck:
        assert ck.names() == ["e.f16", "f.f32", "i.i64", "s.e8m0", "u.u8", "w.bf16", "x.f8"]
        want = {"i.i64": ("i64", (), struct.pack("<q", 7)),
                "f.f32": ("f32", (2,), struct.pack("<2f", 1.5, -0.0)),
                "w.bf16": ("bf16", (1, 3), bytes.fromhex("803f20c04040")),
                "e.f16": ("f16", (0, 2), b""),
                "s.e8m0": ("e8m0", (2,), bytes([127, 124])),
                "x.f8": ("e4m3", (2,), bytes([0x30, 0xFE])),
                "u.u8": ("u8", (3,), bytes([1, 2, 3]))}
        for name, (dt, shape, raw) in want.items():
            info = ck.info(name)
            assert (info.dtype, info.shape, info.nbytes) == (dt, shape, len(raw)), name
            assert ck.read(name).tobytes() == raw, name
        assert ck.read("i.i64") == 7 and ck.read("i.i64").shape == ()


@pytest.mark.parametrize("dtype", sorted(BITS))
def test_every_dtype(tmp_path, rng, dtype):
    """Every dtype of the format: a 2-D tensor, a 0-d scalar (sub-byte dtypes: none, the
    reference refuses a tensor ending inside a byte) and zero-element tensors. The FNUZ dtypes
    used to make the whole file fail to open (unknown dtype)."""
    tensors = {}
    cols = 8 if BITS[dtype] < 8 else 3  # 8 elements of 4 or 6 bits end on a byte
    for name, shape in (("m", (2, cols)), ("s", ()), ("e", (0, 5)), ("e2", (3, 0, 2))):
        if BITS[dtype] < 8 and shape == ():
            continue
        tensors[f"{dtype}.{name}"] = (dtype, shape, rng.integers(0, 256, nbytes(dtype, shape), np.uint8).tobytes())
    with moefuse.Checkpoint(write(tmp_path / "d.safetensors", packed(tensors, {"format": "pt"}))) as ck:
        check_reads(ck, tensors)


def test_ranks_zero_to_eight(tmp_path):
    tensors = {f"nd{d}": ("F32", (2,) * d, np.arange(2 ** d, dtype=np.float32).tobytes()) for d in range(9)}
    tensors["nd5_zero"] = ("F32", (2, 3, 0, 1, 2), b"")
    with moefuse.Checkpoint(write(tmp_path / "nd.safetensors", packed(tensors))) as ck:
        check_reads(ck, tensors)
        with pytest.raises(MoeError, match="5 dimensions, at most 4"):
            ck.info("nd5")


def test_names_many_long_unicode_escaped_empty(tmp_path, rng):
    """2000 tensors; a 5000-byte name; UTF-8 and escaped names (json.dumps with and without
    ensure_ascii: the reference writes raw UTF-8); the empty name, which the library writes and
    reads (moefuse refused it); an empty metadata key."""
    tensors = {f"model.layers.{i}.mlp.experts.{i % 64}.w": ("F32", (i % 3 + 1,),
                                                               rng.standard_normal(i % 3 + 1).astype(np.float32)
                                                               .tobytes()) for i in range(2000)}
    tensors.update({"x" * 5000: ("BF16", (2,), b"\x80\x3f\x00\x40"),
                    "模型.层.0/ß∑😀": ("F16", (1,), b"\x00\x3c"),
                    'with "quotes" \\ tab\t newline\n': ("U8", (1,), b"\x07"),
                    "": ("I32", (1,), struct.pack("<i", -3)),
                    "__metadata": ("U8", (1,), b"\x01")})
    blob = packed(tensors, {"": "empty key", "k" * 1000: "v" * 10000, "ü": "ß"})
    with moefuse.Checkpoint(write(tmp_path / "many.safetensors", blob)) as ck:
        check_reads(ck, tensors)
    # The same header written with \uXXXX escapes (ensure_ascii=True) names the same tensors.
    n = struct.unpack("<Q", blob[:8])[0]
    ascii_header = json.dumps(json.loads(blob[8:8 + n])).encode()
    assert ascii_header != blob[8:8 + n].rstrip()
    with moefuse.Checkpoint(write(tmp_path / "ascii.safetensors", file_bytes(ascii_header, blob[8 + n:]))) as ck:
        check_reads(ck, tensors)


@pytest.mark.parametrize("label, blob, names", [
    ("no tensors", file_bytes({}), []),
    ("only metadata", file_bytes({"__metadata__": {"format": "pt"}}), []),
    ("__metadata__ null (the reference reads none)", file_bytes({"__metadata__": None}), []),
    ("only zero-byte tensors", file_bytes({"a": entry("F32", [0], 0, 0), "b": entry("U8", [2, 0], 0, 0)}), ["a", "b"]),
    ("zero-byte tensor first and last", file_bytes({"z0": entry("F32", [0], 0, 0), "a": entry("F32", [1], 0, 4),
                                                    "z1": entry("I64", [0, 3], 4, 4)}, bytes(4)), ["a", "z0", "z1"]),
    ("offsets listed out of order", file_bytes({"b": entry("F32", [1], 4, 8), "a": entry("F32", [1], 0, 4)},
                                               bytes(8)), ["a", "b"]),
    ("header unpadded", struct.pack("<Q", 2) + b"{}", []),
    ("whitespace padding: tab, newline, CR", file_bytes(b"\n{}\t\r\n "), []),
    ("F4 and F6 ending on a byte", file_bytes({"f4": entry("F4", [2, 2], 0, 2), "f6": entry("F6_E2M3", [4], 2, 5)},
                                              bytes(5)), ["f4", "f6"]),
    ("a dimension just below 2^53", file_bytes({"a": entry("U8", [0, 2 ** 53 - 1], 0, 0)}), ["a"]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_accepted_as_the_reference_does(tmp_path, label, blob, names):
    with moefuse.Checkpoint(write(tmp_path / "ok.safetensors", blob)) as ck:
        assert ck.names() == names, label


# ---- what the library refuses -------------------------------------------------------------

def raw_entry(name=b"a", dtype=b'"F32"', shape=b"[1]", offsets=b"[0,4]"):
    return b'{"' + name + b'":{"dtype":' + dtype + b',"shape":' + shape + b',"data_offsets":' + offsets + b"}}"


F32_1 = struct.pack("<f", 1.0)
HOSTILE = [
    # (label, file bytes, needle in the message); all PARSE_ERROR
    ("file shorter than 8 bytes", b"\x10\x00\x00", "too short"),
    ("header length past the end", file_bytes(b"{}", length=64), "runs past the end of the file"),
    ("header length 2^63", file_bytes(b"{}", length=2 ** 63), "exceeds the limit"),
    ("header length above 100 MB", file_bytes(b"{}", length=100_000_001), "exceeds the limit"),
    ("header length 0", struct.pack("<Q", 0), "not valid JSON"),
    ("header not JSON", file_bytes(b"{not json"), "not valid JSON"),
    ("header a JSON array", file_bytes(b"[]"), "not an object"),
    ("header a JSON string", file_bytes(b'"x"'), "not an object"),
    ("header nested 100000 deep", file_bytes(b"[" * 100000), "not valid JSON"),
    ("trailing bytes after the JSON", file_bytes(b"{} x"), "trailing"),
    ("a second JSON value", file_bytes(b"{}{}"), "trailing"),
    ("NUL padding", struct.pack("<Q", 8) + b"{}" + bytes(6), "control byte"),
    ("raw control byte in a name", file_bytes(raw_entry(b"a\x01"), F32_1), "control byte"),
    # serde_json refuses raw control characters in strings, tab and newline too; cJSON took them
    ("raw tab in a name", file_bytes(raw_entry(b"a\tb"), F32_1), "raw tab, newline or carriage return"),
    ("raw newline in metadata", file_bytes(b'{"__metadata__":{"k":"a\nb"}}'), "raw tab, newline or carriage"),
    # not UTF-8 (the reference runs from_utf8 over the header first); moefuse let these through
    ("UTF-8 byte order mark", file_bytes(b"\xef\xbb\xbf{}"), "byte order mark"),
    ("invalid byte in a name", file_bytes(raw_entry(b"a\xff"), F32_1), "not UTF-8"),
    ("overlong UTF-8 in a name", file_bytes(raw_entry(b"a\xc0\xaf"), F32_1), "not UTF-8"),
    ("UTF-8-encoded surrogate in a name", file_bytes(raw_entry(b"a\xed\xa0\x80"), F32_1), "not UTF-8"),
    ("above U+10FFFF in a name", file_bytes(raw_entry(b"a\xf4\x90\x80\x80"), F32_1), "not UTF-8"),
    ("truncated sequence at the end", file_bytes(raw_entry() + b"\xe6\xa8"), "not UTF-8"),
    ("invalid byte in metadata", file_bytes(b'{"__metadata__":{"k":"\xfe"}}'), "not UTF-8"),
    ("lone surrogate escape", file_bytes(raw_entry(b"a\\ud800"), F32_1), "not valid JSON"),
    # \u0000: the reference reads the name "a\0b"; moefuse cut it to "a" (now refused)
    ("\\u0000 escape in a name (moefuse only)", file_bytes(raw_entry(b"a\\u0000b"), F32_1), "\\u0000"),
    # entries
    ("duplicate tensor name", file_bytes(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                         b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
     "appears twice"),
    ("duplicate key in an entry", file_bytes(b'{"a":{"dtype":"F32","dtype":"F32","shape":[1],'
                                             b'"data_offsets":[0,4]}}', F32_1), "'dtype' appears twice"),
    ("unknown key in an entry (moefuse only)", file_bytes({"a": {**entry("F32", [1], 0, 4), "x": 1}}, F32_1),
     "unexpected key 'x'"),
    ("missing shape", file_bytes({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, F32_1), "missing key 'shape'"),
    ("entry not an object", file_bytes({"a": [1, 2]}), "not a JSON object"),
    ("unknown dtype", file_bytes({"a": entry("F17", [1], 0, 4)}, F32_1), 'unknown dtype "F17"'),
    ("lower-case dtype", file_bytes({"a": entry("f32", [1], 0, 4)}, F32_1), 'unknown dtype "f32"'),
    ("dtype not a string", file_bytes({"a": entry(7, [1], 0, 4)}, F32_1), "dtype is not a string"),
    ("__metadata__ a string", file_bytes({"__metadata__": "x"}), "__metadata__"),
    ("__metadata__ value an int", file_bytes({"__metadata__": {"a": 1}}), "__metadata__"),
    ("__metadata__ value null", file_bytes({"__metadata__": {"a": None}}), "__metadata__"),
    ("__metadata__ twice", file_bytes(b'{"__metadata__":{},"__metadata__":{}}'), "__metadata__ appears twice"),
    # shapes
    ("negative shape", file_bytes({"a": entry("F32", [-1], 0, 0)}), "shape[0] is negative"),
    ("shape 1.5", file_bytes(raw_entry(shape=b"[1.5]"), F32_1), "not an integer"),
    ("shape a string", file_bytes({"a": entry("F32", ["1"], 0, 4)}, F32_1), "not a number"),
    ("shape null", file_bytes({"a": entry("F32", None, 0, 4)}, F32_1), "shape is not an array"),
    # serde wants a usize: moefuse took these as the integers they round to
    ("shape 1.0", file_bytes(raw_entry(shape=b"[1.0]"), F32_1), "not written as a plain integer"),
    ("shape 1e0", file_bytes(raw_entry(shape=b"[1e0]"), F32_1), "not written as a plain integer"),
    ("shape 1E0", file_bytes(raw_entry(shape=b"[1E0]"), F32_1), "not written as a plain integer"),
    ("shape -0", file_bytes(raw_entry(shape=b"[-0]", offsets=b"[0,0]")), "not written as a plain integer"),
    ("data_offsets 4.0", file_bytes(raw_entry(offsets=b"[0,4.0]"), F32_1), "not written as a plain integer"),
    ("data_offsets -0", file_bytes(raw_entry(shape=b"[0]", offsets=b"[-0,0]")), "not written as a plain integer"),
    # 2^53 + 1 arrives as the double 2^53: moefuse reported shape 2^53 (the reference, which
    # reads it, 2^53 + 1); now a dimension of 2^53 or more is refused
    ("dimension 2^53 + 1 (moefuse only)", file_bytes(raw_entry(shape=b"[0,9007199254740993]", offsets=b"[0,0]")), "too large"),
    ("dimension 2^53 (moefuse only)", file_bytes(raw_entry(shape=b"[0,9007199254740992]", offsets=b"[0,0]")), "too large"),
    ("dimension 1e300", file_bytes(raw_entry(shape=b"[1e300]")), "too large"),
    ("element count overflows", file_bytes({"a": entry("F32", [2 ** 32, 2 ** 32, 0], 0, 0)}), "overflows"),
    ("byte count overflows", file_bytes({"a": entry("F64", [2 ** 52, 2 ** 10], 0, 0)}), "overflows"),
    # a tensor ending inside a byte (the reference: MisalignedSlice); moefuse rounded up
    ("F4 of 3 elements", file_bytes({"a": entry("F4", [3], 0, 2)}, bytes(2)), "not a whole number of bytes"),
    ("F6 of 2 elements", file_bytes({"a": entry("F6_E3M2", [2], 0, 2)}, bytes(2)), "not a whole number of bytes"),
    # data_offsets
    ("data_offsets of 3 values", file_bytes({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}},
                                            F32_1), "array of 2"),
    ("negative data_offsets", file_bytes({"a": entry("F32", [0], -4, -4)}), "negative"),
    ("begin > end", file_bytes({"a": entry("F32", [0], 4, 0)}, F32_1), "begin > end"),
    ("offsets past the end", file_bytes({"a": entry("F32", [2], 0, 8)}, F32_1), "run past the end"),
    ("offsets inconsistent with the shape", file_bytes({"a": entry("F32", [3], 0, 8)}, bytes(8)), "need 12"),
    ("offsets inconsistent with the dtype", file_bytes({"a": entry("F16", [4], 0, 4)}, F32_1), "need 8"),
    ("overlapping tensors", file_bytes({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}, bytes(8)),
     "overlaps"),
    ("same offsets twice", file_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 0, 4)}, F32_1),
     "overlaps"),
    # the data must be covered exactly, no holes (moefuse accepted all five)
    ("zero-byte tensor inside another", file_bytes({"a": entry("F32", [2], 0, 8), "z": entry("F32", [0], 4, 4)},
                                                   bytes(8)), "overlaps"),
    ("gap between tensors", file_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12)),
     "data bytes 4..8, before tensor 'b', belong to no tensor"),
    ("gap at the start", file_bytes({"a": entry("F32", [1], 4, 8)}, bytes(8)), "data bytes 0..4, before tensor 'a'"),
    ("bytes after the last tensor", file_bytes({"a": entry("F32", [1], 0, 4)}, bytes(5)), "data bytes 4..5, at the end"),
    ("data and no tensors", file_bytes({}, bytes(4)), "data bytes 0..4, at the end"),
    ("zero-byte tensor past the data", file_bytes({"a": entry("F32", [1], 0, 4), "z": entry("F32", [0], 8, 8)},
                                                  F32_1), "run past the end"),
]


@pytest.mark.parametrize("label, blob, needle", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_refused_as_the_reference_does(tmp_path, label, blob, needle):
    path = write(tmp_path / "bad.safetensors", blob)
    with pytest.raises(MoeError) as e:
        moefuse.Checkpoint(path)
    assert e.value.name == "MOE_STATUS_PARSE_ERROR", (label, str(e.value))
    assert needle in e.value.message and path in e.value.message, (label, e.value.message)


# ---- sharded checkpoints and directories ----------------------------------------------------

def save_sharded(root, rng, shards=3):
    """A save_pretrained-style directory: model-0000k-of-0000n.safetensors and an index with
    metadata and weight_map, every tensor in exactly one shard."""
    root.mkdir()
    tensors, weight_map, total = {}, {}, 0
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {}
        for i in range(4):
            name = f"model.layers.{s}.mlp.experts.{i}.down_proj.weight"
            raw = rng.integers(0, 256, 2 * 6 * 2, np.uint8).tobytes()
            part[name] = tensors[name] = ("BF16", (2, 6), raw)
            weight_map[name] = fname
            total += len(raw)
        write(root / fname, packed(part, {"format": "pt"}))
    index = {"metadata": {"total_parameters": total // 2, "total_size": total}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return tensors


def test_sharded_index_and_directory(tmp_path, rng):
    tensors = save_sharded(tmp_path / "m", rng)
    for path in (tmp_path / "m", tmp_path / "m" / "model.safetensors.index.json"):
        with moefuse.Checkpoint(path) as ck:
            check_reads(ck, tensors)


def test_directories_of_one_file(tmp_path, rng):
    tensors = {"w": ("F32", (2, 2), rng.standard_normal(4).astype(np.float32).tobytes())}
    for fname in ("model.safetensors", "weights.safetensors"):
        d = tmp_path / fname.split(".")[0]
        d.mkdir()
        write(d / fname, packed(tensors))
        with moefuse.Checkpoint(d) as ck:
            check_reads(ck, tensors)


@pytest.mark.parametrize("label, weight_map, shard_extra, status, needle", [
    ("missing shard", {"a": "gone.safetensors"}, b"", "MOE_STATUS_IO_ERROR", "gone.safetensors: No such file"),
    ("tensor absent from its shard", {"a": "s.safetensors", "b": "s.safetensors"}, b"", "MOE_STATUS_PARSE_ERROR",
     "no such tensor"),
    ("shard path with ..", {"a": "../s.safetensors"}, b"", "MOE_STATUS_PARSE_ERROR", "'..' component"),
    ("shard path ../ inside", {"a": "sub/../../s.safetensors"}, b"", "MOE_STATUS_PARSE_ERROR", "'..' component"),
    ("absolute shard path", {"a": "/etc/passwd"}, b"", "MOE_STATUS_PARSE_ERROR", "absolute path"),
    ("shard not a string", {"a": 3}, b"", "MOE_STATUS_PARSE_ERROR", "not a string"),
    ("shard with bytes after its last tensor", {"a": "s.safetensors"}, b"\x00", "MOE_STATUS_PARSE_ERROR",
     "belong to no tensor"),
    ("shard name with \\u0000", {"a": "s.safetensors\u0000x"}, b"", "MOE_STATUS_PARSE_ERROR", "\\u0000"),
], ids=lambda v: v if isinstance(v, str) and not v.startswith("MOE_") else "")
def test_hostile_indexes(tmp_path, label, weight_map, shard_extra, status, needle):
    write(tmp_path / "s.safetensors", file_bytes({"a": entry("F32", [1], 0, 4)}, F32_1 + shard_extra))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 4}, "weight_map": weight_map}))
    with pytest.raises(MoeError) as e:
        moefuse.Checkpoint(tmp_path)
    assert e.value.name == status and needle in e.value.message, (label, str(e.value))


def test_index_text_not_utf8(tmp_path):
    write(tmp_path / "s.safetensors", file_bytes({"a": entry("F32", [1], 0, 4)}, F32_1))
    write(tmp_path / "model.safetensors.index.json", b'{"weight_map": {"a\xff": "s.safetensors"}}')
    with pytest.raises(MoeError, match="not UTF-8"):
        moefuse.Checkpoint(tmp_path)


def test_empty_name_in_an_index(tmp_path):
    write(tmp_path / "s.safetensors", file_bytes({"": entry("F32", [1], 0, 4)}, F32_1))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"": "s.safetensors"}}))
    with moefuse.Checkpoint(tmp_path) as ck:
        assert ck.names() == [""] and ck.read("").tobytes() == F32_1


def test_refusals_do_not_leak_open_files(tmp_path):
    """A thousand refused opens leave no descriptor behind (each open reads and closes)."""
    path = write(tmp_path / "bad.safetensors", file_bytes({"a": entry("F32", [2], 0, 8)}, F32_1))
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for _ in range(1000):
        with pytest.raises(MoeError):
            moefuse.Checkpoint(path)
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds + 1
