#!/usr/bin/env python3
"""Prints the 2^(k/128) table of ExpF64 (src/anvil/kernels/cpu/exp_sums_internal.h).

For k in [0, 128): H = 2^(k/128) rounded to the nearest double and
T = 2^(k/128) / H - 1 rounded to the nearest double (so 2^(k/128) ~= H (1 + T)),
both from 60-digit decimal arithmetic. The table holds, per k, the bits of T
and the bits of H less k << 45 (the exponent step the caller adds back).
"""
import struct
from decimal import Decimal, getcontext

getcontext().prec = 60
N = 128


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


ln2 = Decimal(2).ln()
words = []
for k in range(N):
    exact = (ln2 * k / N).exp()
    h = float(exact)  # Decimal -> float rounds to nearest
    t = float(exact / Decimal(h) - 1)
    words += [bits(t), (bits(h) - (k << 45)) % 2**64]
for i in range(0, len(words), 4):
    print("    " + " ".join(f"0x{w:016x}," for w in words[i:i + 4]))
