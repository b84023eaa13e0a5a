#!/usr/bin/python3
"""Prints the polynomial of f32 exp in src/codegen_llvm/vmath.c (exp_f32_poly).

After the reduction x = n ln2 + r, |r| <= ln2/2, exp(r) is computed as 1 + r q(r) with q of
degree 5 (the constant term stays exactly 1, so exp(0) = 1). q is fitted for the least
maximum relative error of exp(r) by iteratively reweighted least squares on Chebyshev nodes;
the script prints that error, measured on a dense grid in double precision. Run with
Debian's python3 (needs python3-numpy):  /usr/bin/python3 tools/gen_exp_coeffs.py
"""
import numpy as np

DEGREE = 5
H = np.log(2) / 2


def fit(degree):
    n = 4000
    x = np.cos(np.pi * (np.arange(n) + 0.5) / n) * H
    e = np.exp(x)
    a = x[:, None] * np.vander(x, degree + 1, increasing=True) / e[:, None]
    b = (e - 1) / e
    w = np.ones(n)
    for _ in range(80):
        c, *_ = np.linalg.lstsq(a * w[:, None], w * b, rcond=None)
        err = np.abs(a @ c - b)
        w = w * (1 + err / err.max()) ** 2
        w /= w.max()
    return c


q = fit(DEGREE)
grid = np.linspace(-H, H, 200001)
worst = np.abs((1 + grid * np.polyval(q[::-1], grid)) / np.exp(grid) - 1).max()
print("/* max relative error %.3g */" % worst)
print("{1, " + ", ".join(repr(float(v)) for v in q) + "}")
