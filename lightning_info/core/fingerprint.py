"""Fingerprints of saved artefacts: what a file was made from, so that it is refused for
anything else.

A saved selection, a fitted scorer or a cached table is only valid for the inputs and options it
was computed from. :func:`fingerprint` hashes those (tensors and arrays by dtype, shape and bytes;
strings; numbers; options as sorted JSON; nested sequences and mappings) into a short SHA-256
hex digest that is stored beside the artefact; :func:`require_fingerprint` compares the stored
digest with the one of the current inputs and raises, naming the file and what to do, on any
difference. Two inputs equal to the last byte give the same digest on every platform (values are
written little-endian); anything else gives another.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

DIGEST_CHARS = 32


def fingerprint(*parts: Any) -> str:
    """The SHA-256 digest (first :data:`DIGEST_CHARS` hex characters) of ``parts``, in order."""
    digest = hashlib.sha256()
    for part in parts:
        _feed(digest, part)
    return digest.hexdigest()[:DIGEST_CHARS]


def require_fingerprint(saved: object, expected: str, *, what: str, where: object) -> None:
    """Raise unless ``saved`` (the digest stored with an artefact) equals ``expected`` (the
    digest of the inputs it is about to be used with)."""
    if saved is None:
        raise ValueError(
            f"{where} holds a {what} without a fingerprint of the inputs it was made from (saved "
            "by an older version, or edited); it cannot be checked against this run: delete it "
            "and let it be made again."
        )
    if saved != expected:
        raise ValueError(
            f"{where} holds a {what} made from other inputs or options than this run's "
            f"(fingerprint {saved} != {expected}); using it would silently give another answer. "
            "Delete the file, or point to one made for these inputs."
        )


def _feed(digest: Any, part: Any) -> None:
    if isinstance(part, torch.Tensor):
        array = part.detach().to("cpu").contiguous()
        if array.dtype == torch.bfloat16:
            array = array.float()
        _tagged(digest, b"T", f"{array.dtype}|{tuple(array.shape)}".encode())
        digest.update(_little_endian(array.numpy()).tobytes())
    elif isinstance(part, np.ndarray):
        array = np.ascontiguousarray(part)
        if array.dtype == object:
            _tagged(digest, b"O", str(array.shape).encode())
            for item in array.ravel():
                _feed(digest, item)
        else:
            _tagged(digest, b"A", f"{array.dtype.str}|{array.shape}".encode())
            digest.update(_little_endian(array).tobytes())
    elif isinstance(part, (str, bytes, bytearray)):
        data = part.encode() if isinstance(part, str) else bytes(part)
        _tagged(digest, b"S" if isinstance(part, str) else b"B", data)
    elif part is None or isinstance(part, (bool, numbers.Number)):
        _tagged(digest, b"N", repr(part).encode())
    elif dataclasses.is_dataclass(part) and not isinstance(part, type):
        _tagged(digest, b"D", type(part).__qualname__.encode())
        _feed(digest, {f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
    elif isinstance(part, Mapping):
        _tagged(digest, b"M", str(len(part)).encode())
        for key in sorted(part, key=str):
            _feed(digest, str(key))
            _feed(digest, part[key])
    elif isinstance(part, (list, tuple)):
        _tagged(digest, b"L", str(len(part)).encode())
        for item in part:
            _feed(digest, item)
    else:
        _tagged(digest, b"J", json.dumps(part, sort_keys=True, default=repr).encode())


def _tagged(digest: Any, tag: bytes, data: bytes) -> None:
    digest.update(tag + len(data).to_bytes(8, "little") + data)


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.byteorder == ">":
        return array.astype(array.dtype.newbyteorder("<"))
    return array
