/* ops_reduce.c — sum, mean, prod, amax, amin over a list of dims, and argmax / argmin over
 * one. The graph's reduction keeps reduced dims as size 1; without keepdim a reshape drops
 * them. */
#include "frontend/frontend.h"

#include <string.h>

/* Parses dims into a bit mask for tensor t (0 dims: all); false with the error set. */
static bool reduce_mask(const char *name, const lj_tensor *t, int ndims, const int *dims,
                        uint32_t *mask) {
  *mask = 0;
  if (ndims < 0 || (ndims > 0 && !dims)) {
    ljb_error(LJ_ERR_ARG, "%s: bad dim list (ndims = %d)", name, ndims);
    return false;
  }
  if (ndims == 0) {
    *mask = t->ndim ? (1u << t->ndim) - 1 : 0;
    return true;
  }
  for (int i = 0; i < ndims; i++) {
    int d;
    if (!ljf_dim(name, t->ndim, dims[i], &d)) return false;
    if (t->ndim == 0) continue;
    if (*mask >> d & 1) {
      ljb_error(LJ_ERR_ARG, "%s: dim %d appears more than once", name, d);
      return false;
    }
    *mask |= 1u << d;
  }
  return true;
}

static lj_tensor *finish(struct lj_device *d, ljg_node *r, const lj_tensor *t, uint32_t mask,
                         bool keepdim) {
  if (!keepdim) {
    int64_t shape[LJ_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
      if (!(mask >> i & 1)) shape[n++] = t->shape[i];
    r = ljf_reshape_node(d, r, n, shape);
  }
  return ljf_tensor_from_node(d, r);
}

static lj_tensor *reduce(const char *name, ljg_op op, lj_tensor *t, int ndims, const int *dims,
                         bool keepdim) {
  if (!ljf_arg(name, "t", t)) return NULL;
  uint32_t mask;
  if (!reduce_mask(name, t, ndims, dims, &mask)) return NULL;
  bool isfloat = ljg_dtype_is_float(t->dtype);
  lj_dtype out = t->dtype;
  if ((op == LJG_OP_SUM || op == LJG_OP_PROD) && !isfloat) out = LJ_I64;
  if (op == LJG_OP_MEAN && !isfloat) {
    ljb_error(LJ_ERR_DTYPE, "%s: mean needs a float dtype, not %s (cast first)", name,
              lj_dtype_name(t->dtype));
    return NULL;
  }
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  for (int i = 0; i < t->ndim; i++)
    if (mask >> i & 1) {
      if (t->shape[i] == 0 && (op == LJG_OP_AMAX || op == LJG_OP_AMIN)) {
        ljb_error(LJ_ERR_SHAPE, "%s: cannot reduce over dim %d of size 0 (no identity)", name, i);
        return NULL;
      }
      shape[i] = 1;
    }
  struct lj_device *d = t->dev;
  ljg_node *x = ljf_node(t);
  ljg_attr a = {0};
  a.a[0] = mask;
  ljg_node *r = ljg_node_make(&d->trace, op, out, t->ndim, shape, 1, &x, &a);
  return finish(d, r, t, mask, keepdim);
}

lj_tensor *lj_sum(lj_tensor *t, int ndims, const int *dims, bool keepdim) {
  return reduce("lj_sum", LJG_OP_SUM, t, ndims, dims, keepdim);
}
lj_tensor *lj_mean(lj_tensor *t, int ndims, const int *dims, bool keepdim) {
  return reduce("lj_mean", LJG_OP_MEAN, t, ndims, dims, keepdim);
}
lj_tensor *lj_prod(lj_tensor *t, int ndims, const int *dims, bool keepdim) {
  return reduce("lj_prod", LJG_OP_PROD, t, ndims, dims, keepdim);
}
lj_tensor *lj_amax(lj_tensor *t, int ndims, const int *dims, bool keepdim) {
  return reduce("lj_amax", LJG_OP_AMAX, t, ndims, dims, keepdim);
}
lj_tensor *lj_amin(lj_tensor *t, int ndims, const int *dims, bool keepdim) {
  return reduce("lj_amin", LJG_OP_AMIN, t, ndims, dims, keepdim);
}

static lj_tensor *arg_reduce(const char *name, ljg_op op, lj_tensor *t, int dim, bool keepdim) {
  if (!ljf_arg(name, "t", t)) return NULL;
  int d;
  if (!ljf_dim(name, t->ndim, dim, &d)) return NULL;
  if (t->dtype == LJ_BOOL) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype bool is not supported", name);
    return NULL;
  }
  if (t->ndim > 0 && t->shape[d] == 0) {
    ljb_error(LJ_ERR_SHAPE, "%s: dim %d has size 0", name, d);
    return NULL;
  }
  struct lj_device *dev = t->dev;
  ljg_node *x = ljf_node(t);
  if (t->ndim == 0) {
    /* the index of the only element */
    x = ljf_reshape_node(dev, x, 1, (const int64_t[]){1});
    ljg_attr a = {0};
    a.a[0] = 1;
    ljg_node *r = ljg_node_make(&dev->trace, op, LJ_I64, 1, (const int64_t[]){1}, 1, &x, &a);
    return ljf_tensor_from_node(dev, ljf_reshape_node(dev, r, 0, NULL));
  }
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[d] = 1;
  ljg_attr a = {0};
  a.a[0] = 1 << d;
  ljg_node *r = ljg_node_make(&dev->trace, op, LJ_I64, t->ndim, shape, 1, &x, &a);
  return finish(dev, r, t, 1u << d, keepdim);
}

lj_tensor *lj_argmax(lj_tensor *t, int dim, bool keepdim) {
  return arg_reduce("lj_argmax", LJG_OP_ARGMAX, t, dim, keepdim);
}
lj_tensor *lj_argmin(lj_tensor *t, int dim, bool keepdim) {
  return arg_reduce("lj_argmin", LJG_OP_ARGMIN, t, dim, keepdim);
}
