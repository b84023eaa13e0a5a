#!/usr/bin/python3
"""Prints the constants of f32 exp in src/codegen_llvm/vmath.c.

exp_f32_poly (the generic code): after the reduction x = n ln2 + r, |r| <= ln2/2, exp(r) is
computed as 1 + r q(r) with q of degree 5 (the constant term stays exactly 1, so exp(0) = 1).

exp_f32_table and exp_f32_table_poly (AVX-512): x = (n + j/16) ln2 + r with |r| <= ln2/32 and
j in 0..15, exp(x) = 2^n T[j] (1 + p(r)) where T[j] = 2^((j + c)/16) rounded to f32 and p(r)
approximates exp(r - c ln2/16) - 1 with a cubic. The shift c is the one in [0, 0.3] (on a
grid of 10^6 points) whose table is closest to exact: each T[j] is then within ~0.2 ulp of
its value, against up to 0.5 for c = 0.

Polynomials are fitted for the least maximum relative error by iteratively reweighted least
squares on Chebyshev nodes; the script prints that error, measured on a dense grid in double
precision. Run with Debian's python3 (needs python3-numpy):  /usr/bin/python3 tools/gen_exp_coeffs.py
"""
import numpy as np

H = np.log(2) / 2
H_TABLE = np.log(2) / 32


def fit(a_of, target, h, terms):
    """Coefficients c of a_of(x) @ c ~ target(x) on [-h, h], relative to exp(r - shift)."""
    n = 4000
    x = np.cos(np.pi * (np.arange(n) + 0.5) / n) * h
    a, b = a_of(x, terms), target(x)
    w = np.ones(n)
    for _ in range(80):
        c, *_ = np.linalg.lstsq(a * w[:, None], w * b, rcond=None)
        err = np.abs(a @ c - b)
        w = w * (1 + err / err.max()) ** 2
        w /= w.max()
    return c


def table_shift():
    j = np.arange(16)
    best = (np.inf, 0.0)
    for cs in np.array_split(np.linspace(0, 0.3, 1000001), 100):
        exact = 2.0 ** ((j[None, :] + cs[:, None]) / 16)
        err = np.abs(exact.astype(np.float32) - exact) / 2.0 ** -23
        i = err.max(axis=1).argmin()
        best = min(best, (err[i].max(), cs[i]))
    return best


# 1 + r q(r): rows r x^i / e, target (e - 1) / e
q = fit(lambda x, t: x[:, None] * np.vander(x, t, increasing=True) / np.exp(x)[:, None],
        lambda x: (np.exp(x) - 1) / np.exp(x), H, 6)
grid = np.linspace(-H, H, 200001)
worst = np.abs((1 + grid * np.polyval(q[::-1], grid)) / np.exp(grid) - 1).max()
print("/* max relative error %.3g */" % worst)
print("exp_f32_poly = {1, " + ", ".join(repr(float(v)) for v in q) + "}")

table_err, c = table_shift()
s = c * np.log(2) / 16
p = fit(lambda x, t: np.vander(x, t, increasing=True) / np.exp(x - s)[:, None],
        lambda x: (np.exp(x - s) - 1) / np.exp(x - s), H_TABLE, 4)
grid = np.linspace(-H_TABLE, H_TABLE, 200001)
worst = np.abs((1 + np.polyval(p[::-1], grid)) / np.exp(grid - s) - 1).max()
table = (2.0 ** ((np.arange(16) + c) / 16)).astype(np.float32)
print("/* shift %r: table within %.3f ulp; max relative error of the cubic %.3g */" % (float(c), table_err, worst))
print("exp_f32_table = {" + ", ".join(float(v).hex() for v in table) + "}")
print("exp_f32_table_poly = {" + ", ".join(repr(float(v)) for v in p) + "}")
