/* interp.c — the reference interpreter: runs any canonical graph with plain C loops, one
 * node at a time, every value stored in its own dtype (so per-op rounding matches compiled
 * code and PyTorch), float math in double with libm, integer math exactly in 64 bits with
 * wrap-around, reductions accumulated in double / int64. It shares nothing with the code
 * generator but the op table and the Philox definition, so tests can hold compiled kernels
 * against it. Slow by design: clarity over speed. */
#include "graph/graph.h"
#include "graph/philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct ival {
  void *data;
  lj_dtype dt;
  int64_t numel;
} ival;

/* row-major strides of a shape */
static void strides_of(int ndim, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d];
  }
}

static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t sz = shape[d] ? shape[d] : 1;
    idx[d] = i % sz;
    i /= sz;
  }
}

/* ---- elementwise ----------------------------------------------------------------------- */

/* v rounded to the precision dt computes in (f32 for f32, bf16 and f16): ops made of several
 * steps round after each step, as PyTorch's CPU kernels do. */
static double rnd(lj_dtype dt, double v) { return dt == LJ_F64 ? v : (double)(float)v; }

static double f_floor_div(lj_dtype dt, double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b);
  double div = rnd(dt, rnd(dt, a - mod) / b);
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}

static double f_remainder(double a, double b) {
  double m = fmod(a, b);
  if (m != 0 && (b < 0) != (m < 0)) m += b;
  return m;
}

/* std::max / std::min with NaN propagated, as PyTorch's maximum and minimum */
static double f_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a < b ? b : a); }
static double f_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : (b < a ? b : a); }

/* Float unary and binary ops in double (dt: the operands' dtype). */
static double float_op(int op, lj_dtype dt, double a, double b) {
  switch (op) {
  case LJG_OP_NEG: return -a;
  case LJG_OP_ABS: return fabs(a);
  case LJG_OP_EXP: return exp(a);
  case LJG_OP_LOG: return log(a);
  case LJG_OP_LOG1P: return log1p(a);
  case LJG_OP_EXPM1: return expm1(a);
  case LJG_OP_SQRT: return sqrt(a);
  case LJG_OP_RSQRT: return 1.0 / rnd(dt, sqrt(a));
  case LJG_OP_SIN: return sin(a);
  case LJG_OP_COS: return cos(a);
  case LJG_OP_TANH: return tanh(a);
  case LJG_OP_SIGMOID: return 1.0 / (1.0 + exp(-a));
  case LJG_OP_RELU: return a < 0 ? 0.0 : a;
  case LJG_OP_GELU: return 0.5 * a * erfc(-a * M_SQRT1_2);
  case LJG_OP_GELU_TANH: return a / (1.0 + exp(-2 * 0.7978845608028654 * (a + 0.044715 * a * a * a)));
  case LJG_OP_SILU: return a / (1.0 + exp(-a));
  case LJG_OP_ERF: return erf(a);
  case LJG_OP_FLOOR: return floor(a);
  case LJG_OP_CEIL: return ceil(a);
  case LJG_OP_ROUND: return nearbyint(a);
  case LJG_OP_SIGN: return (double)((0 < a) - (a < 0));
  case LJG_OP_RECIPROCAL: return 1.0 / a;
  case LJG_OP_ADD: return a + b;
  case LJG_OP_SUB: return a - b;
  case LJG_OP_MUL: return a * b;
  case LJG_OP_DIV: return a / b;
  case LJG_OP_DIV_TRUNC: return trunc(rnd(dt, a / b));
  case LJG_OP_DIV_FLOOR: return f_floor_div(dt, a, b);
  case LJG_OP_REMAINDER: return f_remainder(a, b);
  case LJG_OP_POW: return pow(a, b);
  case LJG_OP_MAXIMUM: return f_max(a, b);
  case LJG_OP_MINIMUM: return f_min(a, b);
  default: LJ_UNREACHABLE("not a float op");
  }
}

static int64_t i_pow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t r = 1, x = (uint64_t)a;
  while (b) {
    if (b & 1) r *= x;
    x *= x;
    b >>= 1;
  }
  return (int64_t)r;
}

/* Integer ops with wrap-around; *divzero set for division or remainder by zero. */
static int64_t int_op(int op, int64_t a, int64_t b, bool *divzero) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case LJG_OP_NEG: return (int64_t)(0 - ua);
  case LJG_OP_ABS: return a < 0 ? (int64_t)(0 - ua) : a;
  case LJG_OP_RELU: return a > 0 ? a : 0;
  case LJG_OP_FLOOR:
  case LJG_OP_CEIL:
  case LJG_OP_ROUND: return a;
  case LJG_OP_SIGN: return (0 < a) - (a < 0);
  case LJG_OP_ADD: return (int64_t)(ua + ub);
  case LJG_OP_SUB: return (int64_t)(ua - ub);
  case LJG_OP_MUL: return (int64_t)(ua * ub);
  case LJG_OP_MAXIMUM: return a > b ? a : b;
  case LJG_OP_MINIMUM: return a < b ? a : b;
  case LJG_OP_POW: return i_pow(a, b);
  case LJG_OP_DIV_TRUNC:
  case LJG_OP_DIV_FLOOR:
  case LJG_OP_REMAINDER: {
    if (b == 0) {
      *divzero = true;
      return 0;
    }
    if (b == -1) return op == LJG_OP_REMAINDER ? 0 : (int64_t)(0 - ua);
    int64_t q = a / b, r = a % b;
    if (op == LJG_OP_DIV_TRUNC) return q;
    bool adjust = r != 0 && ((r < 0) != (b < 0));
    if (op == LJG_OP_DIV_FLOOR) return adjust ? q - 1 : q;
    return adjust ? r + b : r;
  }
  default: LJ_UNREACHABLE("not an integer op");
  }
}

/* A comparison's result from how its operands order: less, equal, or unordered (NaN). */
static bool from_order(int op, bool less, bool equal, bool unordered) {
  switch (op) {
  case LJG_OP_EQ: return equal;
  case LJG_OP_NE: return !equal;
  case LJG_OP_LT: return less;
  case LJG_OP_LE: return less || equal;
  case LJG_OP_GT: return !less && !equal && !unordered;
  case LJG_OP_GE: return !less && !unordered;
  default: LJ_UNREACHABLE("not a comparison");
  }
}

static void copy_elem(lj_dtype dt, void *dst, int64_t di, const void *src, int64_t si);

static lj_status index_error(const char *op, int64_t value, int64_t bound, int node) {
  ljb_error(LJ_ERR_RUNTIME, "%s: index %lld is out of range [0, %lld) (node %%%d)", op, (long long)value,
            (long long)bound, node);
  return LJ_ERR_RUNTIME;
}

static lj_status run_elemwise(const ljg_gnode *n, const ival *x, int nin, ival *out, int node) {
  int op = n->op;
  lj_dtype odt = nin ? x[nin == 3 ? 1 : 0].dt : n->dtype;
  bool fl = ljg_dtype_is_float(odt);
  bool divzero = false;
  for (int64_t i = 0; i < out->numel; i++) {
    switch (op) {
    case LJG_OP_STOP_GRADIENT: copy_elem(odt, out->data, i, x[0].data, i); break;
    case LJG_OP_INDEX_CHECK: {
      int64_t v = ljg_load_i64(odt, x[0].data, i);
      if (v < 0 || v >= n->attr.a[0]) return index_error("index_check", v, n->attr.a[0], node);
      ljg_store_i64(odt, out->data, i, v);
      break;
    }
    case LJG_OP_CAST:
      if (fl)
        ljg_store_f64(n->dtype, out->data, i, ljg_load_f64(odt, x[0].data, i));
      else
        ljg_store_i64(n->dtype, out->data, i, ljg_load_i64(odt, x[0].data, i));
      break;
    case LJG_OP_WHERE: {
      bool c = ljg_load_i64(LJ_BOOL, x[0].data, i) != 0;
      if (fl)
        ljg_store_f64(n->dtype, out->data, i, ljg_load_f64(odt, x[c ? 1 : 2].data, i));
      else
        ljg_store_i64(n->dtype, out->data, i, ljg_load_i64(odt, x[c ? 1 : 2].data, i));
      break;
    }
    case LJG_OP_ISNAN:
      ljg_store_i64(LJ_BOOL, out->data, i, fl && isnan(ljg_load_f64(odt, x[0].data, i)));
      break;
    case LJG_OP_LOGICAL_NOT:
      ljg_store_i64(LJ_BOOL, out->data, i, ljg_load_f64(odt, x[0].data, i) == 0);
      break;
    case LJG_OP_LOGICAL_AND:
    case LJG_OP_LOGICAL_OR: {
      bool a = ljg_load_f64(odt, x[0].data, i) != 0, b = ljg_load_f64(odt, x[1].data, i) != 0;
      ljg_store_i64(LJ_BOOL, out->data, i, op == LJG_OP_LOGICAL_AND ? (a && b) : (a || b));
      break;
    }
    case LJG_OP_EQ:
    case LJG_OP_NE:
    case LJG_OP_LT:
    case LJG_OP_LE:
    case LJG_OP_GT:
    case LJG_OP_GE: {
      bool r;
      if (fl) {
        double a = ljg_load_f64(odt, x[0].data, i), b = ljg_load_f64(odt, x[1].data, i);
        r = from_order(op, a < b, a == b, isnan(a) || isnan(b));
      } else {
        int64_t a = ljg_load_i64(odt, x[0].data, i), b = ljg_load_i64(odt, x[1].data, i);
        r = from_order(op, a < b, a == b, false);
      }
      ljg_store_i64(LJ_BOOL, out->data, i, r);
      break;
    }
    default:
      if (fl) {
        double a = ljg_load_f64(odt, x[0].data, i);
        double b = nin > 1 ? ljg_load_f64(odt, x[1].data, i) : 0;
        ljg_store_f64(n->dtype, out->data, i, float_op(op, odt, a, b));
      } else {
        int64_t a = ljg_load_i64(odt, x[0].data, i);
        int64_t b = nin > 1 ? ljg_load_i64(odt, x[1].data, i) : 0;
        ljg_store_i64(n->dtype, out->data, i, int_op(op, a, b, &divzero));
      }
      break;
    }
  }
  if (divzero) {
    ljb_error(LJ_ERR_RUNTIME, "%s: integer division by zero (node %%%d)", ljg_ops[op].name,
              node);
    return LJ_ERR_RUNTIME;
  }
  return LJ_OK;
}

/* ---- views, cat, matmul ---------------------------------------------------------------- */

static void copy_elem(lj_dtype dt, void *dst, int64_t di, const void *src, int64_t si) {
  size_t sz = lj_dtype_size(dt);
  memcpy((char *)dst + di * (int64_t)sz, (const char *)src + si * (int64_t)sz, sz);
}

static void run_view(const ljg_gnode *n, const ljg_gnode *xn, const ival *x, ival *out) {
  int64_t xst[LJ_MAX_DIMS], idx[LJ_MAX_DIMS];
  strides_of(xn->ndim, xn->shape, xst);
  for (int64_t i = 0; i < out->numel; i++) {
    int64_t src = 0;
    switch (n->op) {
    case LJG_OP_RESHAPE: src = i; break;
    case LJG_OP_PERMUTE:
      unravel(i, n->ndim, n->shape, idx);
      for (int d = 0; d < n->ndim; d++) src += idx[d] * xst[n->attr.a[d]];
      break;
    case LJG_OP_EXPAND:
      unravel(i, n->ndim, n->shape, idx);
      for (int d = 0; d < n->ndim; d++) src += (xn->shape[d] == 1 ? 0 : idx[d]) * xst[d];
      break;
    case LJG_OP_SLICE:
      unravel(i, n->ndim, n->shape, idx);
      idx[n->attr.a[0]] = n->attr.a[1] + idx[n->attr.a[0]] * n->attr.a[2];
      for (int d = 0; d < n->ndim; d++) src += idx[d] * xst[d];
      break;
    default: LJ_UNREACHABLE("not a view");
    }
    copy_elem(n->dtype, out->data, i, x->data, src);
  }
}

static void run_cat(const ljg_graph *g, const ljg_gnode *n, const ival *vals, ival *out) {
  int dim = (int)n->attr.a[0];
  int64_t ost[LJ_MAX_DIMS], idx[LJ_MAX_DIMS];
  strides_of(n->ndim, n->shape, ost);
  int64_t base = 0;
  const int32_t *in = ljg_in(g, n);
  for (int k = 0; k < n->nin; k++) {
    const ljg_gnode *xn = &g->nodes[in[k]];
    const ival *x = &vals[in[k]];
    for (int64_t i = 0; i < x->numel; i++) {
      unravel(i, xn->ndim, xn->shape, idx);
      idx[dim] += base;
      int64_t o = 0;
      for (int d = 0; d < n->ndim; d++) o += idx[d] * ost[d];
      copy_elem(n->dtype, out->data, o, x->data, i);
    }
    base += xn->shape[dim];
  }
}

/* MATMUL per matrix of the batch; MATMUL_SUM sums each of its G equal runs of the B products
 * into one matrix. */
static void run_matmul(const ljg_gnode *n, const ljg_gnode *an, const ival *a, const ival *b, ival *out) {
  int64_t M = n->shape[1], N = n->shape[2], K = an->shape[2];
  bool fl = ljg_dtype_is_float(n->dtype), sum = n->op == LJG_OP_MATMUL_SUM;
  int64_t run = sum ? an->shape[0] / n->shape[0] : 1; /* the products in each matrix */
  for (int64_t ob = 0; ob < n->shape[0]; ob++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        uint64_t iacc = 0;
        for (int64_t bb = ob * run; bb < (ob + 1) * run; bb++)
          for (int64_t k = 0; k < K; k++) {
            int64_t ai = (bb * M + m) * K + k, bi = (bb * K + k) * N + j;
            if (fl)
              acc += ljg_load_f64(a->dt, a->data, ai) * ljg_load_f64(b->dt, b->data, bi);
            else
              iacc += (uint64_t)ljg_load_i64(a->dt, a->data, ai) * (uint64_t)ljg_load_i64(b->dt, b->data, bi);
          }
        int64_t o = (ob * M + m) * N + j;
        if (fl)
          ljg_store_f64(n->dtype, out->data, o, acc);
        else
          ljg_store_i64(n->dtype, out->data, o, (int64_t)iacc);
      }
}

/* ---- windows and indexing --------------------------------------------------------------------- */

/* im2col (to_cols) or col2im between img [N,C,H,W] and cols [N, C*KH*KW, OH*OW]. */
static void run_window(const ljg_gnode *n, const ljg_gnode *img, const ival *src, ival *out, bool to_cols) {
  const int64_t *a = n->attr.a;
  int64_t N = img->shape[0], C = img->shape[1], H = img->shape[2], W = img->shape[3], oh_n, ow_n;
  ljg_window_out(a, H, W, &oh_n, &ow_n);
  double *acc = to_cols ? NULL : ljb_xcalloc((size_t)out->numel + 1, sizeof *acc);
  int64_t r = 0;
  for (int64_t b = 0; b < N; b++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t kh = 0; kh < a[0]; kh++)
        for (int64_t kw = 0; kw < a[1]; kw++)
          for (int64_t oh = 0; oh < oh_n; oh++)
            for (int64_t ow = 0; ow < ow_n; ow++, r++) {
              int64_t ih = oh * a[2] + kh * a[6] - a[4], iw = ow * a[3] + kw * a[7] - a[5];
              bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
              int64_t pix = ((b * C + c) * H + ih) * W + iw;
              if (to_cols) {
                if (inside)
                  copy_elem(n->dtype, out->data, r, src->data, pix);
                else
                  ljg_store_f64(n->dtype, out->data, r, n->attr.f);
              } else if (inside) {
                acc[pix] += ljg_load_f64(n->dtype, src->data, r);
              }
            }
  if (!to_cols) {
    for (int64_t i = 0; i < out->numel; i++) ljg_store_f64(n->dtype, out->data, i, acc[i]);
    free(acc);
  }
}

/* gather (x, index) or scatter_add (base, index, src) along dim. */
static lj_status run_index(const ljg_graph *g, const ljg_gnode *n, const ival *vals, ival *out, int node) {
  const int32_t *in = ljg_in(g, n);
  const ljg_gnode *x = &g->nodes[in[0]], *ix = &g->nodes[in[1]];
  int dim = (int)n->attr.a[0];
  int64_t xst[LJ_MAX_DIMS], idx[LJ_MAX_DIMS];
  strides_of(x->ndim, x->shape, xst);
  bool gather = n->op == LJG_OP_GATHER;
  double *acc = NULL;
  if (!gather) {
    acc = ljb_xalloc(((size_t)out->numel + 1) * sizeof *acc);
    for (int64_t i = 0; i < out->numel; i++) acc[i] = ljg_load_f64(n->dtype, vals[in[0]].data, i);
  }
  lj_status st = LJ_OK;
  for (int64_t i = 0, m = ljg_gnumel(ix); i < m && st == LJ_OK; i++) {
    unravel(i, ix->ndim, ix->shape, idx);
    int64_t k = ljg_load_i64(ix->dtype, vals[in[1]].data, i);
    if (k < 0 || k >= x->shape[dim]) {
      st = index_error(ljg_ops[n->op].name, k, x->shape[dim], node);
      break;
    }
    idx[dim] = k;
    int64_t off = 0;
    for (int d = 0; d < x->ndim; d++) off += idx[d] * xst[d];
    if (gather)
      copy_elem(n->dtype, out->data, i, vals[in[0]].data, off);
    else
      acc[off] += ljg_load_f64(n->dtype, vals[in[2]].data, i);
  }
  if (!gather) {
    for (int64_t i = 0; i < out->numel; i++) ljg_store_f64(n->dtype, out->data, i, acc[i]);
    free(acc);
  }
  return st;
}

/* ---- reductions -------------------------------------------------------------------------- */

static void run_reduce(const ljg_gnode *n, const ljg_gnode *xn, const ival *x, ival *out) {
  uint64_t mask = (uint64_t)n->attr.a[0];
  int64_t ost[LJ_MAX_DIMS], idx[LJ_MAX_DIMS];
  strides_of(n->ndim, n->shape, ost);
  int64_t on = out->numel;
  bool fl = ljg_dtype_is_float(xn->dtype);
  int op = n->op;
  double *acc = ljb_xcalloc((size_t)on, sizeof *acc);
  int64_t *iacc = ljb_xcalloc((size_t)on, sizeof *iacc);
  int64_t *arg = ljb_xcalloc((size_t)on, sizeof *arg);
  bool *seen = ljb_xcalloc((size_t)on, sizeof *seen);
  int64_t count = 1;
  int rdim = -1;
  for (int d = 0; d < n->ndim; d++)
    if (mask >> d & 1) {
      count *= xn->shape[d];
      rdim = d;
    }
  for (int64_t i = 0; i < on; i++) {
    acc[i] = op == LJG_OP_PROD ? 1.0 : 0.0;
    iacc[i] = op == LJG_OP_PROD ? 1 : 0;
  }
  for (int64_t i = 0; i < x->numel; i++) {
    unravel(i, xn->ndim, xn->shape, idx);
    int64_t o = 0;
    for (int d = 0; d < n->ndim; d++)
      if (!(mask >> d & 1)) o += idx[d] * ost[d];
    if (fl) {
      double v = ljg_load_f64(xn->dtype, x->data, i);
      switch (op) {
      case LJG_OP_SUM:
      case LJG_OP_MEAN: acc[o] += v; break;
      case LJG_OP_PROD: acc[o] *= v; break;
      case LJG_OP_AMAX: acc[o] = seen[o] ? f_max(acc[o], v) : v; break;
      case LJG_OP_AMIN: acc[o] = seen[o] ? f_min(acc[o], v) : v; break;
      case LJG_OP_ARGMAX:
      case LJG_OP_ARGMIN: {
        bool better = !seen[o] || (isnan(v) && !isnan(acc[o])) ||
                      (!isnan(acc[o]) && (op == LJG_OP_ARGMAX ? v > acc[o] : v < acc[o]));
        if (better) {
          acc[o] = v;
          arg[o] = idx[rdim];
        }
        break;
      }
      default: LJ_UNREACHABLE("not a reduction");
      }
    } else {
      int64_t v = ljg_load_i64(xn->dtype, x->data, i);
      switch (op) {
      case LJG_OP_SUM: iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)v); break;
      case LJG_OP_PROD: iacc[o] = (int64_t)((uint64_t)iacc[o] * (uint64_t)v); break;
      case LJG_OP_AMAX: iacc[o] = seen[o] && iacc[o] > v ? iacc[o] : v; break;
      case LJG_OP_AMIN: iacc[o] = seen[o] && iacc[o] < v ? iacc[o] : v; break;
      case LJG_OP_ARGMAX:
      case LJG_OP_ARGMIN:
        if (!seen[o] || (op == LJG_OP_ARGMAX ? v > iacc[o] : v < iacc[o])) {
          iacc[o] = v;
          arg[o] = idx[rdim];
        }
        break;
      default: LJ_UNREACHABLE("not a reduction");
      }
    }
    seen[o] = true;
  }
  for (int64_t o = 0; o < on; o++) {
    if (op == LJG_OP_ARGMAX || op == LJG_OP_ARGMIN)
      ljg_store_i64(n->dtype, out->data, o, arg[o]);
    else if (op == LJG_OP_MEAN)
      ljg_store_f64(n->dtype, out->data, o, acc[o] / (double)count);
    else if (fl)
      ljg_store_f64(n->dtype, out->data, o, acc[o]);
    else
      ljg_store_i64(n->dtype, out->data, o, iacc[o]);
  }
  free(acc);
  free(iacc);
  free(arg);
  free(seen);
}

/* ---- leaves -------------------------------------------------------------------------------- */

static void run_random(const ljg_gnode *n, uint64_t seed, uint64_t offset, ival *out) {
  for (int64_t i = 0; i < out->numel; i++) {
    uint32_t w[4];
    ljg_philox((uint64_t)i, offset, seed, w);
    double v;
    bool f64 = n->dtype == LJ_F64;
    if (n->op == LJG_OP_RAND_UNIFORM) {
      v = f64 ? ljg_u53(w[0], w[1]) : ljg_u24(w[0]);
    } else {
      double u1 = f64 ? ljg_u53(w[0], w[1]) + 0x1p-53 : ljg_u24(w[0]) + 0x1p-24;
      double u2 = f64 ? ljg_u53(w[2], w[3]) : ljg_u24(w[1]);
      v = ljg_box_muller(u1, u2);
    }
    ljg_store_f64(n->dtype, out->data, i, v);
  }
}

lj_status ljg_interpret(const ljg_graph *g, const void *const *inputs,
                        const ljg_binding *scalars, void *const *outputs) {
  ival *vals = ljb_xcalloc((size_t)g->n + 1, sizeof *vals);
  lj_status st = LJ_OK;
  for (int i = 0; i < g->n && st == LJ_OK; i++) {
    const ljg_gnode *n = &g->nodes[i];
    const int32_t *in = ljg_in(g, n);
    ival *out = &vals[i];
    out->dt = n->dtype;
    out->numel = ljg_gnumel(n);
    out->data = ljb_xcalloc((size_t)out->numel + 1, lj_dtype_size(n->dtype));
    ival x[3];
    for (int k = 0; k < n->nin && k < 3; k++) x[k] = vals[in[k]];
    switch (ljg_ops[n->op].kind) {
    case LJG_LEAF:
      if (n->op == LJG_OP_DATA) {
        if (out->numel) memcpy(out->data, inputs[n->param], (size_t)out->numel * lj_dtype_size(n->dtype));
      }
      else if (n->op == LJG_OP_SCALAR && ljg_dtype_is_float(n->dtype))
        ljg_store_f64(n->dtype, out->data, 0, scalars[n->param].f);
      else if (n->op == LJG_OP_SCALAR)
        ljg_store_i64(n->dtype, out->data, 0, scalars[n->param].i);
      else
        ljg_store_f64(n->dtype, out->data, 0, n->attr.f);
      break;
    case LJG_INDEXED:
      if (n->op == LJG_OP_IOTA) {
        for (int64_t k = 0; k < out->numel; k++) ljg_store_i64(LJ_I64, out->data, k, k);
      } else {
        uint64_t seed = (uint64_t)ljg_load_i64(LJ_I64, x[0].data, 0);
        uint64_t offset = (uint64_t)ljg_load_i64(LJ_I64, x[1].data, 0);
        run_random(n, seed, offset, out);
      }
      break;
    case LJG_ELEMWISE: st = run_elemwise(n, x, n->nin, out, i); break;
    case LJG_VIEW: run_view(n, &g->nodes[in[0]], &x[0], out); break;
    case LJG_REDUCE: run_reduce(n, &g->nodes[in[0]], &x[0], out); break;
    case LJG_CAT: run_cat(g, n, vals, out); break;
    case LJG_MATMUL: run_matmul(n, &g->nodes[in[0]], &x[0], &x[1], out); break;
    case LJG_WINDOW: {
      bool to_cols = n->op == LJG_OP_IM2COL;
      const ljg_gnode *xn = &g->nodes[in[0]];
      run_window(n, to_cols ? xn : n, &x[0], out, to_cols);
      break;
    }
    case LJG_INDEX: st = run_index(g, n, vals, out, i); break;
    }
  }
  if (st == LJ_OK)
    for (int r = 0; r < g->nroots; r++) {
      const ival *v = &vals[g->roots[r]];
      memcpy(outputs[r], v->data, (size_t)v->numel * lj_dtype_size(v->dt));
    }
  for (int i = 0; i < g->n; i++) free(vals[i].data);
  free(vals);
  return st;
}
