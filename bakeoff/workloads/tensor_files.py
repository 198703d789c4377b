"""Tensors in files, for inputs a config fills from a file: .npy (NumPy) and .safetensors.

`read_header` gives a file's shape and dtype without reading its data (the config loader checks them
against the workload); `load_tensor` reads the tensor as torch, after checking the file's SHA-256 against
the one the config loader recorded, so a file changed between planning and running fails its case instead
of giving numbers for other data. The safetensors format is read by its specification (an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, the data), so
no package is needed on the machine that runs the case.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMATS = {".npy": "npy", ".safetensors": "safetensors"}
# safetensors dtype codes -> (torch dtype name, bytes per element)
SAFETENSORS_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
                      "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1),
                      "U8": ("uint8", 1), "BOOL": ("bool", 1)}
NPY_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
MAX_HEADER_BYTES = 100 * 2**20  # the safetensors library's own limit


class TensorFileError(ValueError):
    """A file that cannot serve as an input tensor; the text says why."""


@dataclass(frozen=True)
class TensorHeader:
    """What a file holds, without its data: format, shape, dtype (a torch dtype name), the tensor's key
    (safetensors), and for safetensors the data's byte range in the file."""

    format: str
    shape: tuple[int, ...]
    dtype: str
    key: str | None = None
    offset: int = 0
    nbytes: int = 0


def file_format(path: str | Path) -> str:
    """'npy' or 'safetensors' by the file's suffix; TensorFileError otherwise."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise TensorFileError(f"{Path(path).name}: unknown tensor file type; use {' or '.join(FORMATS)}")
    return fmt


def safetensors_table(path: str | Path) -> tuple[int, dict[str, dict]]:
    """(header length in bytes, tensor table key -> {dtype, shape, data_offsets}) of a .safetensors file."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise TensorFileError(f"{Path(path).name}: too short for a .safetensors file")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES:
            raise TensorFileError(f"{Path(path).name}: header of {n} bytes: not a .safetensors file")
        try:
            table = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TensorFileError(f"{Path(path).name}: unreadable .safetensors header ({exc})") from None
    if not isinstance(table, dict):
        raise TensorFileError(f"{Path(path).name}: the .safetensors header is not a table")
    table.pop("__metadata__", None)
    return n, table


def read_header(path: str | Path, key: str | None = None) -> TensorHeader:
    """Shape and dtype of the tensor in `path` (for .safetensors, the one named `key`, or the only one)."""
    name = Path(path).name
    fmt = file_format(path)
    if fmt == "npy":
        if key is not None:
            raise TensorFileError(f"{name}: a .npy file holds one array; `key` is for .safetensors files")
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise TensorFileError(f"{name}: not a readable .npy array ({exc})") from None
        if arr.dtype.name not in NPY_DTYPES:
            raise TensorFileError(f"{name}: dtype {arr.dtype.str} is not supported in .npy (bfloat16 has no "
                                  f"NumPy dtype: use .safetensors); supported: {', '.join(NPY_DTYPES)}")
        return TensorHeader("npy", tuple(int(d) for d in arr.shape), arr.dtype.name)
    n, table = safetensors_table(path)
    if key is None:
        if len(table) != 1:
            raise TensorFileError(f"{name} holds {len(table)} tensors ({', '.join(sorted(table)[:8])}): name one "
                                  "with `key`")
        key = next(iter(table))
    if key not in table:
        raise TensorFileError(f"{name} has no tensor {key!r}; it has {', '.join(sorted(table)[:8]) or 'none'}")
    entry = table[key]
    code = entry.get("dtype")
    if code not in SAFETENSORS_DTYPES:
        raise TensorFileError(f"{name}[{key}]: dtype {code} is not supported; supported: "
                              f"{', '.join(SAFETENSORS_DTYPES)}")
    dtype, size = SAFETENSORS_DTYPES[code]
    shape = tuple(int(d) for d in entry.get("shape", ()))
    begin, end = (int(x) for x in entry.get("data_offsets", (0, -1)))
    if end - begin != math.prod(shape) * size:
        raise TensorFileError(f"{name}[{key}]: its byte range ({end - begin} bytes) does not hold shape "
                              f"{list(shape)} of {dtype}")
    if Path(path).stat().st_size < 8 + n + end:
        raise TensorFileError(f"{name}[{key}]: the file is truncated")
    return TensorHeader("safetensors", shape, dtype, key, 8 + n + begin, end - begin)


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of the whole file, hex (what `sha256sum` prints)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def load_tensor(path: str | Path, key: str | None, sha256: str | None = None):
    """The tensor in `path` as a CPU torch tensor of the file's dtype. With `sha256`, the file must still
    have that digest (TensorFileError otherwise)."""
    import torch

    if sha256 is not None and file_sha256(path) != sha256:
        raise TensorFileError(f"{path} changed since the config was loaded (its SHA-256 is no longer {sha256})")
    header = read_header(path, key)
    if header.format == "npy":
        arr = np.load(path, allow_pickle=False)
        return torch.from_numpy(np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("="), copy=False)))
    with open(path, "rb") as f:
        f.seek(header.offset)
        data = bytearray(f.read(header.nbytes))
    return torch.frombuffer(data, dtype=getattr(torch, header.dtype)).reshape(header.shape)
