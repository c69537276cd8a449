"""A wanted entry's envelope turned into Python values: the envelope's JSON object
(:func:`decode_envelope`), its rank (:func:`envelope_rank`) and compile id
(:func:`compile_id`), and its payload checked against the envelope's MD5
(:func:`check_payload`). What is wrong is an :class:`EntryError` carrying a diagnostics kind (a
string), never another exception. The lines themselves are split by
:mod:`tracekit.read.envelopes`.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from tracekit.model.rankset import MAX_RANK

try:  # CPython's own MD5: no OpenSSL start-up (~3 ms) for the few small payloads checked
    from _md5 import md5 as _md5
except ImportError:  # pragma: no cover - a build without it
    from hashlib import md5 as _md5


class EntryError(Exception):
    """A wanted entry that cannot be used; ``kind`` is a stable diagnostics kind."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def decode_envelope(json_bytes: bytes) -> dict[str, Any]:
    """The envelope object; raises :class:`EntryError` ``bad_utf8``/``bad_json``/``not_an_object``."""
    try:
        obj = orjson.loads(json_bytes)
    except orjson.JSONDecodeError as e:
        try:
            json_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise EntryError("bad_utf8", "envelope is not UTF-8") from None
        raise EntryError("bad_json", str(e)[:120]) from None
    if not isinstance(obj, dict):
        raise EntryError("not_an_object", f"envelope is a {type(obj).__name__}")
    return obj


def _opt_int(env: dict[str, Any], key: str) -> int | None:
    v = env.get(key)
    if v is None:
        return None
    if type(v) is not int:
        raise EntryError("bad_field_type", f"{key} is {type(v).__name__}, not int")
    return v


def envelope_rank(env: dict[str, Any]) -> int | None:
    """The ``rank`` of an envelope (None when absent); ``bad_field_type`` when not an int, or
    not a rank (negative, or a million or more: :data:`tracekit.model.rankset.MAX_RANK`)."""
    r = _opt_int(env, "rank")
    if r is not None and not 0 <= r < MAX_RANK:
        raise EntryError("bad_field_type", f"rank {r} is not a rank")
    return r


def compile_id(env: dict[str, Any]) -> str | None:
    """``[!{compiled_autograd_id}/]{frame_id}/{frame_compile_id}[_{attempt}]``, None when absent."""
    get = env.get
    frame, fcid, attempt = get("frame_id"), get("frame_compile_id"), get("attempt")
    if (
        type(frame) is int
        and type(fcid) is int
        and "compiled_autograd_id" not in env
        and (attempt is None or type(attempt) is int)
    ):  # torch's usual keys: a known id
        cid = _COMPILE_IDS.get((frame, fcid, attempt))
        if cid is not None:
            return cid
        cid = _compile_id(env)
        if len(_COMPILE_IDS) >= 1 << 16:
            _COMPILE_IDS.clear()
        _COMPILE_IDS[(frame, fcid, attempt)] = cid
        return cid
    return _compile_id(env)


#: (frame_id, frame_compile_id, attempt) -> compile id (ints only: True is not 1 here).
_COMPILE_IDS: dict[tuple[int, int, int | None], str | None] = {}


def _compile_id(env: dict[str, Any]) -> str | None:
    frame = _opt_int(env, "frame_id")
    fcid = _opt_int(env, "frame_compile_id")
    ca = _opt_int(env, "compiled_autograd_id")
    attempt = _opt_int(env, "attempt")
    if frame is not None and fcid is not None:
        cid = f"{frame}/{fcid}"
        if ca is not None:
            cid = f"!{ca}/{cid}"
    elif ca is not None:
        cid = f"!{ca}"
    else:
        return None
    if attempt:
        cid = f"{cid}_{attempt}"
    return sys.intern(cid)  # one string per compile id, however many ranks and entries name it


def check_payload(env: dict[str, Any], payload: bytes | None) -> str:
    """The payload as text after checking it against ``has_payload``.

    Raises :class:`EntryError` ``missing_payload`` (declared, absent), ``md5_mismatch``,
    ``bad_field_type`` (``has_payload`` not a string) or ``bad_utf8``.
    """
    want = env.get("has_payload")
    if want is None:
        return ""
    if not isinstance(want, str):
        raise EntryError("bad_field_type", "has_payload is not a string")
    if payload is None:
        raise EntryError("missing_payload", "has_payload set but no payload lines follow")
    got = _md5(payload, usedforsecurity=False).hexdigest()
    if got != want:
        raise EntryError("md5_mismatch", f"expected {want}, got {got}")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EntryError("bad_utf8", f"payload byte {e.start}") from None
