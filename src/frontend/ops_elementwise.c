/* ops_elementwise.c — unary, binary, scalar, where, clamp and cast ops. Each validates,
 * computes PyTorch's result dtype, casts and broadcasts its operands to one dtype and shape,
 * and records one elementwise node. */
#include "frontend/frontend.h"

#include <math.h>

/* How a unary op treats dtypes. */
typedef enum unary_rule {
  KEEP,       /* same dtype out as in */
  TO_FLOAT,   /* integers and bool compute in f32 (torch's "floating" unary ops) */
  FLOAT_ONLY, /* float dtypes only */
  TO_BOOL     /* any dtype in, bool out */
} unary_rule;

static lj_tensor *unary(const char *name, ljg_op op, lj_tensor *t, unary_rule rule, bool bool_ok) {
  if (!ljf_arg(name, "t", t)) return NULL;
  struct lj_device *d = t->dev;
  bool isfloat = ljg_dtype_is_float(t->dtype);
  if ((t->dtype == LJ_BOOL && !bool_ok) || (rule == FLOAT_ONLY && !isfloat)) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype %s is not supported", name, lj_dtype_name(t->dtype));
    return NULL;
  }
  ljg_node *x = ljf_node(t);
  lj_dtype out = t->dtype;
  if (rule == TO_FLOAT && !isfloat) {
    x = ljf_cast(d, x, LJ_F32);
    out = LJ_F32;
  }
  if (rule == TO_BOOL) out = LJ_BOOL;
  return ljf_tensor_from_node(d, ljg_node_make(&d->trace, op, out, x->ndim, x->shape, 1, &x, NULL));
}

lj_tensor *lj_neg(lj_tensor *t) { return unary("lj_neg", LJG_OP_NEG, t, KEEP, false); }
lj_tensor *lj_abs(lj_tensor *t) { return unary("lj_abs", LJG_OP_ABS, t, KEEP, false); }
lj_tensor *lj_exp(lj_tensor *t) { return unary("lj_exp", LJG_OP_EXP, t, TO_FLOAT, true); }
lj_tensor *lj_log(lj_tensor *t) { return unary("lj_log", LJG_OP_LOG, t, TO_FLOAT, true); }
lj_tensor *lj_log1p(lj_tensor *t) { return unary("lj_log1p", LJG_OP_LOG1P, t, TO_FLOAT, true); }
lj_tensor *lj_expm1(lj_tensor *t) { return unary("lj_expm1", LJG_OP_EXPM1, t, TO_FLOAT, true); }
lj_tensor *lj_sqrt(lj_tensor *t) { return unary("lj_sqrt", LJG_OP_SQRT, t, TO_FLOAT, true); }
lj_tensor *lj_rsqrt(lj_tensor *t) { return unary("lj_rsqrt", LJG_OP_RSQRT, t, TO_FLOAT, true); }
lj_tensor *lj_sin(lj_tensor *t) { return unary("lj_sin", LJG_OP_SIN, t, TO_FLOAT, true); }
lj_tensor *lj_cos(lj_tensor *t) { return unary("lj_cos", LJG_OP_COS, t, TO_FLOAT, true); }
lj_tensor *lj_tanh(lj_tensor *t) { return unary("lj_tanh", LJG_OP_TANH, t, TO_FLOAT, true); }
lj_tensor *lj_sigmoid(lj_tensor *t) { return unary("lj_sigmoid", LJG_OP_SIGMOID, t, TO_FLOAT, true); }
lj_tensor *lj_relu(lj_tensor *t) { return unary("lj_relu", LJG_OP_RELU, t, KEEP, false); }
lj_tensor *lj_gelu(lj_tensor *t, bool tanh_approx) {
  return unary("lj_gelu", tanh_approx ? LJG_OP_GELU_TANH : LJG_OP_GELU, t, FLOAT_ONLY, false);
}
lj_tensor *lj_silu(lj_tensor *t) { return unary("lj_silu", LJG_OP_SILU, t, FLOAT_ONLY, false); }
lj_tensor *lj_erf(lj_tensor *t) { return unary("lj_erf", LJG_OP_ERF, t, TO_FLOAT, true); }
lj_tensor *lj_floor(lj_tensor *t) { return unary("lj_floor", LJG_OP_FLOOR, t, KEEP, false); }
lj_tensor *lj_ceil(lj_tensor *t) { return unary("lj_ceil", LJG_OP_CEIL, t, KEEP, false); }
lj_tensor *lj_round(lj_tensor *t) { return unary("lj_round", LJG_OP_ROUND, t, KEEP, false); }
lj_tensor *lj_sign(lj_tensor *t) { return unary("lj_sign", LJG_OP_SIGN, t, KEEP, true); }
lj_tensor *lj_reciprocal(lj_tensor *t) {
  return unary("lj_reciprocal", LJG_OP_RECIPROCAL, t, TO_FLOAT, true);
}
lj_tensor *lj_logical_not(lj_tensor *t) {
  return unary("lj_logical_not", LJG_OP_LOGICAL_NOT, t, TO_BOOL, true);
}
lj_tensor *lj_isnan(lj_tensor *t) { return unary("lj_isnan", LJG_OP_ISNAN, t, TO_BOOL, true); }

/* ---- binary ------------------------------------------------------------------------------ */

static bool is_comparison(ljg_op op) {
  return op == LJG_OP_EQ || op == LJG_OP_NE || op == LJG_OP_LT || op == LJG_OP_LE ||
         op == LJG_OP_GT || op == LJG_OP_GE || op == LJG_OP_LOGICAL_AND || op == LJG_OP_LOGICAL_OR;
}

/* The compute dtype of op for promoted dtype dt (*out: the result's dtype); false with the
 * error set when PyTorch rejects the combination. */
static bool binary_types(const char *name, ljg_op op, lj_dtype dt, lj_dtype *compute, lj_dtype *out) {
  *compute = *out = dt;
  if (is_comparison(op)) *out = LJ_BOOL;
  if (op == LJG_OP_DIV && !ljg_dtype_is_float(dt)) *compute = *out = LJ_F32;
  if (dt == LJ_BOOL && (op == LJG_OP_SUB || op == LJG_OP_DIV_TRUNC || op == LJG_OP_DIV_FLOOR ||
                        op == LJG_OP_REMAINDER || op == LJG_OP_POW)) {
    ljb_error(LJ_ERR_DTYPE, "%s: not supported for two bool operands%s", name,
              op == LJG_OP_SUB ? " (use lj_ne or lj_logical_not)" : "");
    return false;
  }
  return true;
}

static lj_tensor *record_binary(struct lj_device *d, ljg_op op, lj_dtype compute, lj_dtype out,
                                ljg_node *a, ljg_node *b, int ndim, const int64_t *shape) {
  ljg_node *in[2] = {ljf_expand_node(d, ljf_cast(d, a, compute), ndim, shape),
                     ljf_expand_node(d, ljf_cast(d, b, compute), ndim, shape)};
  return ljf_tensor_from_node(d, ljg_node_make(&d->trace, op, out, ndim, shape, 2, in, NULL));
}

lj_tensor *ljf_binary(const char *name, ljg_op op, lj_tensor *a, lj_tensor *b) {
  if (!ljf_arg(name, "a", a) || !ljf_arg(name, "b", b)) return NULL;
  if (!ljf_same_device(name, a, b)) return NULL;
  ljf_typed ts[2] = {ljf_typed_tensor(a), ljf_typed_tensor(b)};
  lj_dtype compute, out;
  if (!binary_types(name, op, ljf_result_type(2, ts), &compute, &out)) return NULL;
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  if (!ljf_broadcast(name, a->ndim, a->shape, b->ndim, b->shape, &ndim, shape)) return NULL;
  return record_binary(a->dev, op, compute, out, ljf_node(a), ljf_node(b), ndim, shape);
}

lj_tensor *ljf_binary_scalar(const char *name, ljg_op op, lj_tensor *a, double s, bool reversed) {
  if (!ljf_arg(name, "a", a)) return NULL;
  ljf_typed ts[2] = {ljf_typed_tensor(a), ljf_typed_scalar(s)};
  lj_dtype compute, out;
  if (!binary_types(name, op, ljf_result_type(2, ts), &compute, &out)) return NULL;
  if (op == LJG_OP_POW && !reversed && !ljg_dtype_is_float(compute) && s < 0) {
    ljb_error(LJ_ERR_ARG, "%s: integers to negative integer powers are not allowed (%s ** %g)",
              name, lj_dtype_name(a->dtype), s);
    return NULL;
  }
  struct lj_device *d = a->dev;
  ljg_node *x = ljf_node(a), *c = ljf_scalar(d, compute, s);
  return reversed ? record_binary(d, op, compute, out, c, x, a->ndim, a->shape)
                  : record_binary(d, op, compute, out, x, c, a->ndim, a->shape);
}

#define BINARY(fn, OP)                                                                    \
  lj_tensor *lj_##fn(lj_tensor *a, lj_tensor *b) { return ljf_binary("lj_" #fn, OP, a, b); }
BINARY(add, LJG_OP_ADD)
BINARY(sub, LJG_OP_SUB)
BINARY(mul, LJG_OP_MUL)
BINARY(div, LJG_OP_DIV)
BINARY(pow, LJG_OP_POW)
BINARY(maximum, LJG_OP_MAXIMUM)
BINARY(minimum, LJG_OP_MINIMUM)
BINARY(remainder, LJG_OP_REMAINDER)
BINARY(floor_divide, LJG_OP_DIV_FLOOR)
BINARY(eq, LJG_OP_EQ)
BINARY(ne, LJG_OP_NE)
BINARY(lt, LJG_OP_LT)
BINARY(le, LJG_OP_LE)
BINARY(gt, LJG_OP_GT)
BINARY(ge, LJG_OP_GE)
BINARY(logical_and, LJG_OP_LOGICAL_AND)
BINARY(logical_or, LJG_OP_LOGICAL_OR)

#define BINARY_SCALAR(fn, OP, rev)                                                        \
  lj_tensor *lj_##fn(lj_tensor *a, double s) {                                            \
    return ljf_binary_scalar("lj_" #fn, OP, a, s, rev);                                   \
  }
BINARY_SCALAR(add_scalar, LJG_OP_ADD, false)
BINARY_SCALAR(sub_scalar, LJG_OP_SUB, false)
BINARY_SCALAR(rsub_scalar, LJG_OP_SUB, true)
BINARY_SCALAR(mul_scalar, LJG_OP_MUL, false)
BINARY_SCALAR(div_scalar, LJG_OP_DIV, false)
BINARY_SCALAR(remainder_scalar, LJG_OP_REMAINDER, false)
BINARY_SCALAR(eq_scalar, LJG_OP_EQ, false)
BINARY_SCALAR(ne_scalar, LJG_OP_NE, false)
BINARY_SCALAR(lt_scalar, LJG_OP_LT, false)
BINARY_SCALAR(le_scalar, LJG_OP_LE, false)
BINARY_SCALAR(gt_scalar, LJG_OP_GT, false)
BINARY_SCALAR(ge_scalar, LJG_OP_GE, false)

/* a ** s. The exponents ATen computes f32 and f64 powers of without pow (pow_tensor_scalar)
 * are the ops it computes them as: x·x, x·x·x, sqrt, rsqrt, 1/x and 1/(x·x), with the same
 * values and special cases (sqrt(-0) is -0, rsqrt(-inf) NaN) and no exp(s·log|x|) in f64
 * (16M floats squared, one thread: 42 -> 3.1 ms). Other exponents and dtypes, and every exponent
 * under LJ_NO_SPECIAL_SCALARS, are a pow whose exponent is a scalar parameter. */
lj_tensor *lj_pow_scalar(lj_tensor *a, double s) {
  if (!a || (a->dtype != LJ_F32 && a->dtype != LJ_F64) || ljr_current()->cfg.pub.no_special_scalars ||
      (s != 2 && s != 3 && s != 0.5 && s != -0.5 && s != -1 && s != -2))
    return ljf_binary_scalar("lj_pow_scalar", LJG_OP_POW, a, s, false);
  lj_scope_begin();
  lj_tensor *y = s == 0.5 ? lj_sqrt(a) : s == -0.5 ? lj_rsqrt(a) : s == -1 ? lj_reciprocal(a) : lj_mul(a, a);
  if (s == 3) y = lj_mul(y, a);
  if (s == -2) y = lj_reciprocal(y);
  lj_keep(y);
  lj_scope_end();
  return y;
}

lj_tensor *lj_rpow_scalar(double s, lj_tensor *a) {
  return ljf_binary_scalar("lj_rpow_scalar", LJG_OP_POW, a, s, true);
}

lj_tensor *lj_div_rounding(lj_tensor *a, lj_tensor *b, lj_rounding mode) {
  switch (mode) {
  case LJ_ROUND_NONE: return ljf_binary("lj_div_rounding", LJG_OP_DIV, a, b);
  case LJ_ROUND_TRUNC: return ljf_binary("lj_div_rounding", LJG_OP_DIV_TRUNC, a, b);
  case LJ_ROUND_FLOOR: return ljf_binary("lj_div_rounding", LJG_OP_DIV_FLOOR, a, b);
  }
  ljb_error(LJ_ERR_ARG, "lj_div_rounding: mode %d is not an lj_rounding", (int)mode);
  return NULL;
}

/* ---- where, clamp, cast ---------------------------------------------------------------- */

lj_tensor *lj_where(lj_tensor *cond, lj_tensor *a, lj_tensor *b) {
  static const char *name = "lj_where";
  if (!ljf_arg(name, "cond", cond) || !ljf_arg(name, "a", a) || !ljf_arg(name, "b", b)) return NULL;
  if (!ljf_same_device(name, cond, a) || !ljf_same_device(name, cond, b)) return NULL;
  if (cond->dtype != LJ_BOOL) {
    ljb_error(LJ_ERR_DTYPE, "%s: cond must be bool, not %s", name, lj_dtype_name(cond->dtype));
    return NULL;
  }
  ljf_typed ts[2] = {ljf_typed_tensor(a), ljf_typed_tensor(b)};
  lj_dtype dt = ljf_result_type(2, ts);
  int n1, n2;
  int64_t s1[LJ_MAX_DIMS], s2[LJ_MAX_DIMS];
  if (!ljf_broadcast(name, a->ndim, a->shape, b->ndim, b->shape, &n1, s1) ||
      !ljf_broadcast(name, cond->ndim, cond->shape, n1, s1, &n2, s2))
    return NULL;
  struct lj_device *d = a->dev;
  ljg_node *in[3] = {ljf_expand_node(d, ljf_node(cond), n2, s2),
                     ljf_expand_node(d, ljf_cast(d, ljf_node(a), dt), n2, s2),
                     ljf_expand_node(d, ljf_cast(d, ljf_node(b), dt), n2, s2)};
  return ljf_tensor_from_node(d, ljg_node_make(&d->trace, LJG_OP_WHERE, dt, n2, s2, 3, in, NULL));
}

/* A clamp of x to a bound (a scalar parameter): where(x <cmp> bound, bound, x). NaN stays
 * NaN, and x equal to the bound keeps its gradient, as PyTorch's clamp. */
static ljg_node *clamp_to(struct lj_device *d, ljg_node *x, ljg_op cmp, lj_dtype dt, double bound) {
  ljg_node *b = ljf_expand_node(d, ljf_scalar(d, dt, bound), x->ndim, x->shape);
  ljg_node *beyond = ljf_elemwise(d, cmp, LJ_BOOL, 2, (ljg_node *[]){x, b});
  return ljf_elemwise(d, LJG_OP_WHERE, dt, 3, (ljg_node *[]){beyond, b, x});
}

/* The lower bound first, then the upper: with lo > hi every element becomes hi (PyTorch). */
static lj_tensor *clamp(const char *name, lj_tensor *t, const double *lo, const double *hi) {
  if (!ljf_arg(name, "t", t)) return NULL;
  ljf_typed ts[3] = {ljf_typed_tensor(t)};
  int n = 1;
  if (lo) ts[n++] = ljf_typed_scalar(*lo);
  if (hi) ts[n++] = ljf_typed_scalar(*hi);
  lj_dtype dt = ljf_result_type(n, ts); /* never bool: a bound promotes a bool tensor */
  struct lj_device *d = t->dev;
  ljg_node *x = ljf_cast(d, ljf_node(t), dt);
  if (lo) x = clamp_to(d, x, LJG_OP_LT, dt, *lo);
  if (hi) x = clamp_to(d, x, LJG_OP_GT, dt, *hi);
  return ljf_tensor_from_node(d, x);
}

lj_tensor *lj_clamp(lj_tensor *t, double lo, double hi) { return clamp("lj_clamp", t, &lo, &hi); }
lj_tensor *lj_clamp_min(lj_tensor *t, double lo) { return clamp("lj_clamp_min", t, &lo, NULL); }
lj_tensor *lj_clamp_max(lj_tensor *t, double hi) { return clamp("lj_clamp_max", t, NULL, &hi); }

lj_tensor *lj_cast(lj_tensor *t, lj_dtype dt) {
  if (!ljf_arg("lj_cast", "t", t)) return NULL;
  if (!ljg_dtype_valid((int)dt)) {
    ljb_error(LJ_ERR_DTYPE, "lj_cast: dtype %d is not an lj_dtype", (int)dt);
    return NULL;
  }
  return ljf_tensor_from_node(t->dev, ljf_cast(t->dev, ljf_node(t), dt));
}
