#!/usr/bin/python3
"""Writes tests/data/torch_fixtures.txt: inputs and PyTorch's outputs for the ops whose
semantics are subtle (integer division, remainder signs, rounding half to even, NaN in
max/min and arg-reductions, type promotion, casts of special values, integer pow, 16-bit
float rounding). tests/test_ops_torch.c replays every case through lazyjit. The format is
fixture_format.py's.

Run with Debian's python3-torch:  /usr/bin/python3 tests/data/gen_torch_fixtures.py
"""
import os

import torch

from fixture_format import NAMES, Fixtures

torch.manual_seed(0)
T = torch.tensor
NAN, INF = float("nan"), float("inf")
fixtures = Fixtures()
case = fixtures.case


ints = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]

# integer division, floor division, remainder: every sign combination
a = T([7, -7, 7, -7, 0, 1, -1, 13, -13, 5])
b = T([2, 2, -2, -2, 3, -3, 3, 4, 4, -5])
for dt in [torch.int8, torch.int16, torch.int32, torch.int64]:
    x, y = a.to(dt), b.to(dt)
    case(f"floor_divide_{NAMES[dt]}", "div_floor", lambda p, q: torch.div(p, q, rounding_mode="floor"), [x, y])
    case(f"trunc_divide_{NAMES[dt]}", "div_trunc", lambda p, q: torch.div(p, q, rounding_mode="trunc"), [x, y])
    case(f"remainder_{NAMES[dt]}", "remainder", torch.remainder, [x, y])
    case(f"true_div_{NAMES[dt]}", "div", torch.div, [x, y], tol=0)
ua, ub = T([7, 200, 0, 255], dtype=torch.uint8), T([2, 7, 5, 16], dtype=torch.uint8)
case("floor_divide_u8", "div_floor", lambda p, q: torch.div(p, q, rounding_mode="floor"), [ua, ub])
case("remainder_u8", "remainder", torch.remainder, [ua, ub])
fa = T([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 5.0, -1e-30, 3.0, INF, NAN, 1.0])
fb = T([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 2.0, INF, 2.0, 1.0, -0.0])
for dt in [torch.float32, torch.float64]:
    case(f"floor_divide_{NAMES[dt]}", "div_floor", lambda p, q: torch.div(p, q, rounding_mode="floor"),
         [fa.to(dt), fb.to(dt)])
    case(f"trunc_divide_{NAMES[dt]}", "div_trunc", lambda p, q: torch.div(p, q, rounding_mode="trunc"),
         [fa.to(dt), fb.to(dt)])
    case(f"remainder_{NAMES[dt]}", "remainder", torch.remainder, [fa.to(dt), fb.to(dt)])
    case(f"fmod_like_div_{NAMES[dt]}", "div", torch.div, [fa.to(dt), fb.to(dt)])

# rounding: half to even, and the other rounding ops
r = T([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e20, -0.0, NAN, INF, 3.7, -3.7, 2.5000002])
for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16]:
    for op in ["round", "floor", "ceil", "sign", "abs", "neg", "relu"]:
        case(f"{op}_{NAMES[dt]}", op, getattr(torch, op), [r.to(dt)])

# NaN in max/min and reductions
m1 = T([1.0, NAN, 3.0, -INF, NAN, 0.0, -0.0])
m2 = T([NAN, 2.0, 1.0, 5.0, NAN, -0.0, 0.0])
for dt in [torch.float32, torch.float64, torch.bfloat16]:
    case(f"maximum_{NAMES[dt]}", "maximum", torch.maximum, [m1.to(dt), m2.to(dt)])
    case(f"minimum_{NAMES[dt]}", "minimum", torch.minimum, [m1.to(dt), m2.to(dt)])
    for op in ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"]:
        case(f"{op}_{NAMES[dt]}", op, getattr(torch, op), [m1.to(dt), m2.to(dt)])
grid = T([[1.0, NAN, 3.0], [2.0, 5.0, 5.0], [-1.0, -1.0, NAN], [INF, 0.0, -INF]])
case("amax_rows", "amax1", lambda t: torch.amax(t, 1), [grid])
case("amin_rows", "amin1", lambda t: torch.amin(t, 1), [grid])
case("argmax_rows", "argmax1", lambda t: torch.argmax(t, 1), [grid])
case("argmin_rows", "argmin1", lambda t: torch.argmin(t, 1), [grid])
case("argmax_cols", "argmax0", lambda t: torch.argmax(t, 0), [grid])
case("sum_nan", "sum", torch.sum, [grid])
case("mean_empty", "mean", torch.mean, [torch.zeros(0)])
case("sum_empty_i32", "sum", torch.sum, [torch.zeros(0, dtype=torch.int32)])
case("prod_i8", "prod", torch.prod, [T([3, -4, 5, 7], dtype=torch.int8)])
case("sum_bool", "sum", torch.sum, [T([True, False, True, True])])
case("sum_u8_wide", "sum", torch.sum, [T([200, 200, 200], dtype=torch.uint8)])
case("clamp_nan", "clamp", lambda t: torch.clamp(t, -1.0, 2.0), [m1], scalars=(-1.0, 2.0))
case("clamp_inverted", "clamp", lambda t: torch.clamp(t, 3.0, 1.0), [T([0.0, 2.0, 5.0])], scalars=(3.0, 1.0))
case("clamp_int_float_bound", "clamp", lambda t: torch.clamp(t, 2.5, 10.0), [T([1, 5, 20])], scalars=(2.5, 10.0))

# type promotion (result dtype and values)
promo = [
    (T([1, 2], dtype=torch.uint8), T([-1, 3], dtype=torch.int8)),
    (T([True, False]), T([3, 4], dtype=torch.int32)),
    (T([True, True]), T([True, False])),
    (T([1, 2], dtype=torch.int32), T([0.5, 1.5], dtype=torch.float16)),
    (T([1.0, 2.0], dtype=torch.bfloat16), T([0.5, 1.5], dtype=torch.float16)),
    (T([1.0, 2.0], dtype=torch.float16), T(0.25, dtype=torch.float64)),
    (T([1, 2], dtype=torch.int32), T(0.25, dtype=torch.float64)),
    (T([1, 2], dtype=torch.int16), T(7, dtype=torch.int64)),
    (T(3, dtype=torch.int8), T(100, dtype=torch.int8)),
    (T([100, 27], dtype=torch.int8), T([100, 100], dtype=torch.int8)),
]
for i, (x, y) in enumerate(promo):
    case(f"promote_add_{i}", "add", torch.add, [x, y])
    case(f"promote_mul_{i}", "mul", torch.mul, [x, y])
    case(f"promote_div_{i}", "div", torch.div, [x, y], tol=2e-7)
for i, s in enumerate([2, 2.5, -1, 0, 1]):
    for dt in [torch.int32, torch.uint8, torch.bool, torch.float16, torch.float32]:
        x = T([1, 0, 3], dtype=dt)
        if dt == torch.bool:
            x = T([True, False, True])
        case(f"scalar_add_{NAMES[dt]}_{i}", "add_scalar", lambda t: torch.add(t, s), [x], scalars=(s,))
        case(f"scalar_mul_{NAMES[dt]}_{i}", "mul_scalar", lambda t: torch.mul(t, s), [x], scalars=(s,))
        case(f"scalar_gt_{NAMES[dt]}_{i}", "gt_scalar", lambda t: torch.gt(t, s), [x], scalars=(s,))
        if dt != torch.bool:
            case(f"scalar_rsub_{NAMES[dt]}_{i}", "rsub_scalar", lambda t: torch.sub(s, t), [x], scalars=(s,))

# integer pow, float pow special cases
case("pow_int_neg", "pow", torch.pow, [T([2, 1, -1, -1, 0, 3, -2]), T([-1, -5, -3, -4, 2, 3, 5])])
case("pow_int_wrap", "pow", torch.pow, [T([3, -3, 2], dtype=torch.int32), T([30, 21, 31], dtype=torch.int32)])
case("pow_int_scalar", "pow_scalar", lambda t: torch.pow(t, 3), [T([2, -5, 7], dtype=torch.int16)], scalars=(3,))
case("pow_int_scalar_neg", "pow_scalar", lambda t: torch.pow(t, -2), [T([2, 3])], scalars=(-2,))
px = T([-8.0, 0.0, -0.0, -0.0, 0.0, -2.0, 1.0, NAN, NAN, -1.0, 0.5, 2.0, INF, -INF, -INF])
py = T([1 / 3, -1.0, -1.0, -2.0, 0.0, 3.0, NAN, 0.0, 1.0, INF, -INF, INF, -0.5, 3.0, 2.0])
for dt in [torch.float32, torch.float64]:
    case(f"pow_special_{NAMES[dt]}", "pow", torch.pow, [px.to(dt), py.to(dt)], tol=4e-7)
case("rpow", "rpow_scalar", lambda t: torch.pow(2.0, t), [T([0.0, 0.5, -3.0, 10.0])], scalars=(2.0,), tol=4e-7)

# casts of special values
cv = T([NAN, INF, -INF, 3e9, -3e9, 1e19, -1e19, 300.7, -300.7, 255.9, -0.5, 0.5, 65504.0, 70000.0,
        1.00390625, 1.01171875, -1.5], dtype=torch.float64)
for src in [torch.float64, torch.float32]:
    for dst in [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
                torch.float16, torch.bfloat16, torch.float32]:
        if src == dst:
            continue
        case(f"cast_{NAMES[src]}_{NAMES[dst]}", f"cast_{NAMES[dst]}", lambda t: t.to(dst), [cv.to(src)])
iv = T([-129, 128, 255, 256, -1, 70000, -70000, 2**31 + 5, 2**40 + 1, 2**60 + 12345], dtype=torch.int64)
for dst in [torch.int8, torch.uint8, torch.int16, torch.int32, torch.bool, torch.float32, torch.bfloat16,
            torch.float16, torch.float64]:
    case(f"cast_i64_{NAMES[dst]}", f"cast_{NAMES[dst]}", lambda t: t.to(dst), [iv])

# 16-bit float arithmetic rounds after every op
h1 = torch.randn(64) * 10
h2 = torch.randn(64) * 10
for dt in [torch.bfloat16, torch.float16]:
    for op in ["add", "sub", "mul", "div"]:
        case(f"{op}_{NAMES[dt]}_rounding", op, getattr(torch, op), [h1.to(dt), h2.to(dt)])
    case(f"chain_{NAMES[dt]}", "chain", lambda p, q: (p * q + p) / q - q, [h1.to(dt), h2.to(dt)])

# transcendentals at tricky points
tx = T([1e-30, -1e-10, 1e-5, 0.3, -0.6, 1.0, -2.0, 5.0, -9.0, 20.0, -30.0, 88.0, -100.0, NAN, INF, -INF])
for dt in [torch.float32, torch.float64]:
    for op in ["exp", "expm1", "tanh", "sigmoid", "erf", "sin", "cos"]:
        case(f"{op}_{NAMES[dt]}_tricky", op, getattr(torch, op), [tx.to(dt)], tol=4e-7 if dt == torch.float32 else 4e-15)
    # PyTorch computes gelu as x/2 (1 + erf(..)) and (1 + tanh(..)), which cancel for x < 0 (gelu(-9) is
    # -0 in f64, 4e-6 off at -2 in f32); lazyjit does not cancel, so these compare with an absolute
    # tolerance of PyTorch's error, about |x| ulp(1).
    f32 = dt == torch.float32
    case(f"gelu_{NAMES[dt]}_tricky", "gelu", torch.nn.functional.gelu, [tx.to(dt)],
         tol=4e-7 if f32 else 4e-15, atol=1e-6 if f32 else 2e-15)
    case(f"gelu_tanh_{NAMES[dt]}_tricky", "gelu_tanh", lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
         [tx.to(dt)], tol=6e-7 if f32 else 4e-15, atol=1e-6 if f32 else 2e-15)
    case(f"silu_{NAMES[dt]}_tricky", "silu", torch.nn.functional.silu, [tx.to(dt)],
         tol=4e-7 if dt == torch.float32 else 4e-15)
    lx = T([1e-30, 1e-10, 1e-5, 0.5, 1.0, 2.0, 1e10, 1e30, 0.0, -1.0, NAN, INF])
    for op in ["log", "log1p", "sqrt", "rsqrt", "reciprocal"]:
        case(f"{op}_{NAMES[dt]}_tricky", op, getattr(torch, op), [lx.to(dt)], tol=4e-7 if dt == torch.float32 else 4e-15)

# integer unary behaviour and logical ops on numbers
ix = T([-128, -1, 0, 1, 127], dtype=torch.int8)
for op in ["abs", "neg", "sign", "relu", "logical_not"]:
    case(f"{op}_i8", op, getattr(torch, op), [ix])
case("exp_int_promotes", "exp", torch.exp, [T([0, 1, 2])], tol=4e-7)
case("isnan_int", "isnan", torch.isnan, [T([1, 2])])
case("matmul_i32", "matmul", torch.matmul, [T([[1, -2], [3, 4]], dtype=torch.int32), T([[5], [-6]], dtype=torch.int32)])
case("where_promote", "where", torch.where, [T([True, False, True]), T([1, 2, 3]), T([0.5, 1.5, 2.5])])

fixtures.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_fixtures.txt"),
               "gen_torch_fixtures.py")
