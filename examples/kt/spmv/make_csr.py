#!/usr/bin/env python3
"""Writes the CSR structure of spmv.json as .npy files (no NumPy needed):
row_ptr.npy (int32, rows + 1) and col_idx.npy (int32, nnz), with row
lengths from 1 to 31 (seeded), so the kernel meets uneven rows."""
import random
import struct

ROWS, NNZ = 2048, 32768


def save_npy(path, descr, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(values))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


rng = random.Random(7)
lengths = [rng.randint(1, 31) for _ in range(ROWS)]
scale = NNZ / sum(lengths)
lengths = [max(1, int(l * scale)) for l in lengths]
lengths[-1] += NNZ - sum(lengths)
row_ptr = [0]
for l in lengths:
    row_ptr.append(row_ptr[-1] + l)
col_idx = []
for l in lengths:
    col_idx.extend(sorted(rng.sample(range(ROWS), l)))
assert row_ptr[-1] == NNZ == len(col_idx)
save_npy("row_ptr.npy", "<i4", "i", row_ptr)
save_npy("col_idx.npy", "<i4", "i", col_idx)
