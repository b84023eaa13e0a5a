/* record.c — what every op needs before it records: argument checks with messages that
 * name the op, the argument and the values; PyTorch's type promotion and broadcasting; and
 * helpers that record casts, reshapes, broadcasts and scalars so graph-level elementwise ops
 * always see operands of one shape and dtype. */
#include "frontend/frontend.h"

#include <math.h>
#include <string.h>

bool ljf_arg(const char *op, const char *name, const lj_tensor *t) {
  if (t) return true;
  ljb_null_arg(op, name);
  return false;
}

bool ljf_same_device(const char *op, const lj_tensor *a, const lj_tensor *b) {
  if (a->dev == b->dev) return true;
  ljb_error(LJ_ERR_DEVICE, "%s: tensors are on different devices (%s and %s)", op,
            a->dev->name, b->dev->name);
  return false;
}

bool ljf_dim(const char *op, int ndim, int dim, int *out) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) {
    ljb_error(LJ_ERR_ARG, "%s: dim %d is out of range for a %d-d tensor (expected %d..%d)", op,
              dim, ndim, -n, n - 1);
    return false;
  }
  *out = dim < 0 ? dim + n : dim;
  return true;
}

bool ljf_shape_valid(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > LJ_MAX_DIMS) {
    ljb_error(LJ_ERR_ARG, "%s: ndim is %d, must be 0..%d", op, ndim, LJ_MAX_DIMS);
    return false;
  }
  if (ndim > 0 && !shape) {
    ljb_error(LJ_ERR_ARG, "%s: argument shape is NULL", op);
    return false;
  }
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0) {
      char s[LJB_SHAPE_STR_MAX];
      ljb_error(LJ_ERR_ARG, "%s: shape %s has a negative size at dim %d", op,
                ljb_shape_str(s, ndim, shape), d);
      return false;
    }
  return true;
}

bool ljf_broadcast(const char *op, int an, const int64_t *as, int bn, const int64_t *bs,
                   int *on, int64_t *os) {
  int n = an > bn ? an : bn;
  for (int i = 0; i < n; i++) {
    int ai = an - n + i, bi = bn - n + i;
    int64_t x = ai >= 0 ? as[ai] : 1, y = bi >= 0 ? bs[bi] : 1;
    if (x != y && x != 1 && y != 1) {
      char sa[LJB_SHAPE_STR_MAX], sb[LJB_SHAPE_STR_MAX];
      ljb_error(LJ_ERR_SHAPE, "%s: shapes %s and %s are not broadcastable (dim %d: %lld vs %lld)",
                op, ljb_shape_str(sa, an, as), ljb_shape_str(sb, bn, bs), i, (long long)x,
                (long long)y);
      return false;
    }
    os[i] = x == 1 ? y : x;
  }
  *on = n;
  return true;
}

/* ---- type promotion ------------------------------------------------------------------ */

lj_dtype ljf_promote_types(lj_dtype a, lj_dtype b) {
  if (a == b) return a;
  if (a == LJ_BOOL) return b;
  if (b == LJ_BOOL) return a;
  bool fa = ljg_dtype_is_float(a), fb = ljg_dtype_is_float(b);
  if (fa && fb) {
    if (a == LJ_F64 || b == LJ_F64) return LJ_F64;
    return LJ_F32; /* f32 with a 16-bit float, or f16 with bf16 */
  }
  if (fa) return a;
  if (fb) return b;
  /* two different integer types */
  bool sa = ljg_dtype_is_signed(a), sb = ljg_dtype_is_signed(b);
  int na = ljg_dtype_bits(a), nb = ljg_dtype_bits(b);
  if (sa == sb) return na > nb ? a : b;
  /* u8 with a signed type: the signed one if wider, else i16 */
  lj_dtype s = sa ? a : b;
  return ljg_dtype_bits(s) > 8 ? s : LJ_I16;
}

ljf_typed ljf_typed_scalar(double v) {
  bool integral = isfinite(v) && v == floor(v) && fabs(v) < 0x1p63;
  return (ljf_typed){integral ? LJ_I64 : LJ_F32, 0, true};
}

/* PyTorch's combine_categories: the higher-priority class wins unless a lower one brings a
 * higher category (bool < integer < float). */
static int combine(int higher, int lower) {
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (ljg_dtype_is_float((lj_dtype)higher)) return higher;
  if (higher == LJ_BOOL || ljg_dtype_is_float((lj_dtype)lower))
    return ljf_promote_types((lj_dtype)higher, (lj_dtype)lower);
  return higher;
}

lj_dtype ljf_result_type(int n, const ljf_typed *ops) {
  int dim = -1, zero = -1, wrapped = -1;
  for (int i = 0; i < n; i++) {
    int *slot = ops[i].is_scalar ? &wrapped : ops[i].ndim == 0 ? &zero : &dim;
    *slot = *slot < 0 ? (int)ops[i].dtype : (int)ljf_promote_types((lj_dtype)*slot, ops[i].dtype);
  }
  return (lj_dtype)combine(dim, combine(zero, wrapped));
}

/* ---- node helpers ------------------------------------------------------------------------ */

ljg_node *ljf_cast(struct lj_device *d, ljg_node *n, lj_dtype dt) {
  if (n->dtype == dt) return n;
  return ljg_node_make(&d->trace, LJG_OP_CAST, dt, n->ndim, n->shape, 1, &n, NULL);
}

ljg_node *ljf_reshape_node(struct lj_device *d, ljg_node *n, int ndim, const int64_t *shape) {
  if (n->ndim == ndim && (ndim == 0 || memcmp(n->shape, shape, (size_t)ndim * sizeof *shape) == 0))
    return n;
  return ljg_node_make(&d->trace, LJG_OP_RESHAPE, n->dtype, ndim, shape, 1, &n, NULL);
}

ljg_node *ljf_expand_node(struct lj_device *d, ljg_node *n, int ndim, const int64_t *shape) {
  if (n->ndim == ndim && (ndim == 0 || memcmp(n->shape, shape, (size_t)ndim * sizeof *shape) == 0))
    return n;
  int64_t padded[LJ_MAX_DIMS];
  int lead = ndim - n->ndim;
  LJ_ASSERT(lead >= 0);
  for (int i = 0; i < ndim; i++) padded[i] = i < lead ? 1 : n->shape[i - lead];
  n = ljf_reshape_node(d, n, ndim, padded);
  if (memcmp(padded, shape, (size_t)ndim * sizeof *shape) == 0) return n;
  return ljg_node_make(&d->trace, LJG_OP_EXPAND, n->dtype, ndim, shape, 1, &n, NULL);
}

ljg_node *ljf_scalar(struct lj_device *d, lj_dtype dt, double v) {
  bool isfloat = ljg_dtype_is_float(dt);
  int64_t i = isfloat ? 0 : ljg_float_to_int(dt, v);
  double stored = isfloat ? v : (double)i;
  if (!ljr_current()->cfg.pub.no_special_scalars && (stored == 0 || stored == 1 || stored == -1)) {
    ljg_attr a = {0};
    a.f = stored;
    return ljg_node_make(&d->trace, LJG_OP_CONST, dt, 0, NULL, 0, NULL, &a);
  }
  return ljg_node_scalar(&d->trace, dt, v, i);
}

ljg_node *ljf_elemwise(struct lj_device *d, ljg_op op, lj_dtype dt, int nin, ljg_node *const *in) {
  return ljg_node_make(&d->trace, op, dt, in[nin - 1]->ndim, in[nin - 1]->shape, nin, in, NULL);
}
