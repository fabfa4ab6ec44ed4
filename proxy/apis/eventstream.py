"""The AWS event stream encoding (application/vnd.amazon.eventstream), which Amazon Bedrock's
streaming answers use: a message is its total length and its headers' length (4 bytes each, big
endian), a CRC32 of those 8 bytes, the headers (a name of 1-byte length, a type byte, a value),
the payload, and a CRC32 of everything before it.

Written here, in 60 lines of struct and zlib's crc32, because the one Python encoder AWS keeps
(smithy-aws-event-stream) needs Python 3.12 and botocore only decodes; tests/unit/apis read what
this writes with botocore's own decoder, and the real Claude Code reads it through the AWS SDK's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from zlib import crc32

from proxy.errors import ProxyError

_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")
_STRING = 7
# the size of each header value type's value (None: 2-byte length, then the value); 7 is text
_SIZES: dict[int, int | None] = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: None, 7: None, 8: 8, 9: 16}


class BadFrame(ProxyError):
    status = 502
    type = "upstream_error"
    code = "bad_event_stream"


def message(headers: Iterable[tuple[str, str]], payload: bytes) -> bytes:
    """One message with text headers."""
    head = b"".join(_header(name, value) for name, value in headers)
    prelude = _PRELUDE.pack(16 + len(head) + len(payload), len(head))
    framed = prelude + _CRC.pack(crc32(prelude)) + head + payload
    return framed + _CRC.pack(crc32(framed))


def _header(name: str, value: str) -> bytes:
    key, text = name.encode(), value.encode()
    return bytes((len(key),)) + key + bytes((_STRING,)) + len(text).to_bytes(2, "big") + text


def messages(raw: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Every message of a body, each as its text headers and its payload; a BadFrame for a body
    that is cut or whose checksums do not match (nothing read wrongly is passed on)."""
    out = []
    at = 0
    while at < len(raw):
        if len(raw) - at < 16:
            raise BadFrame(f"event stream cut at byte {at}: {len(raw) - at} bytes left")
        total, length = _PRELUDE.unpack_from(raw, at)
        if _CRC.unpack_from(raw, at + 8)[0] != crc32(raw[at : at + 8]):
            raise BadFrame(f"event stream message at byte {at}: its prelude checksum is wrong")
        end = at + total
        if total < 16 + length or end > len(raw):
            raise BadFrame(f"event stream message at byte {at} says {total} bytes: cut short")
        if _CRC.unpack_from(raw, end - 4)[0] != crc32(raw[at : end - 4]):
            raise BadFrame(f"event stream message at byte {at}: its checksum is wrong")
        start = at + 12
        out.append((_headers(raw[start : start + length], at), raw[start + length : end - 4]))
        at = end
    return out


def _headers(head: bytes, at: int) -> dict[str, str]:
    out = {}
    i = 0
    try:
        while i < len(head):
            size = head[i]
            name = head[i + 1 : i + 1 + size].decode()
            kind = head[i + 1 + size]
            i += 2 + size
            width = _SIZES[kind]
            if width is None:
                width = int.from_bytes(head[i : i + 2], "big")
                i += 2
            if kind == _STRING:
                out[name] = head[i : i + width].decode()
            i += width
    except (IndexError, KeyError, UnicodeDecodeError):
        raise BadFrame(f"event stream message at byte {at}: its headers cannot be read") from None
    return out
