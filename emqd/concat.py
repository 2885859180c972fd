"""Bytes built from pieces: `joined` (without `b"".join`'s cost a piece), and the length
prefix that a small hash's Row (store/hash.py) and a small set's listpack
(store/listpack.py) both write."""

from __future__ import annotations

from typing import Final

LONG: Final = 255  # a length byte that says: 4 bytes follow
_BYTE: Final = [bytes((i,)) for i in range(LONG)]  # each short length's byte, shared


def length_prefix(n: int) -> bytes:
    """`n` as a Row or a listpack writes a length or a count: 1 byte below 255, else 0xFF
    and 4 bytes big-endian."""
    return _BYTE[n] if n < LONG else b"\xff" + n.to_bytes(4, "big")


def joined(p: list[bytes]) -> bytes:
    """`b"".join(p)`, for the few pieces a value or a reply is written from.

    Compiled, a `%b` format of a fixed number of bytes objects is one allocation and
    a copy a piece (mypyc's CPyBytes_Build), where `join` takes and releases each
    piece's buffer: ~100 instructions a piece more. A job cycle writes three rows of
    6-10 pieces, a CLAIM after a FAIL one of 11-14 (split in two, it cost ~800
    instructions more); up to 32, sixteen then the rest; past that (a long reply),
    `join`, whose cost a piece is then small beside the copies.
    """
    n = len(p)
    if n == 2:
        return b"%b%b" % (p[0], p[1])
    if n == 3:
        return b"%b%b%b" % (p[0], p[1], p[2])
    if n == 4:
        return b"%b%b%b%b" % (p[0], p[1], p[2], p[3])
    if n == 5:
        return b"%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4])
    if n == 6:
        return b"%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5])
    if n == 7:
        return b"%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6])
    if n == 8:
        return b"%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
    if n == 9:
        return b"%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8])
    if n == 10:
        return b"%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8],
                                          p[9])
    if n == 11:
        return b"%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8],
                                            p[9], p[10])
    if n == 12:
        return b"%b%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8],
                                              p[9], p[10], p[11])
    if n == 13:
        return b"%b%b%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                                p[8], p[9], p[10], p[11], p[12])
    if n == 14:
        return b"%b%b%b%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                                  p[8], p[9], p[10], p[11], p[12], p[13])
    if n == 15:
        return b"%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                                    p[8], p[9], p[10], p[11], p[12], p[13], p[14])
    if n == 16:
        return b"%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b%b" % (p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                                      p[7], p[8], p[9], p[10], p[11], p[12], p[13],
                                                      p[14], p[15])
    if 16 < n <= 32:
        return b"%b%b" % (joined(p[:16]), joined(p[16:]))
    return b"".join(p)
