/* ops_shape.c — reshape, permute, transpose, expand, squeeze, unsqueeze, flatten, slice and
 * cat. All but cat record view nodes, which fusion folds into load indices. */
#include "frontend/frontend.h"

#include <stdlib.h>
#include <string.h>

static lj_tensor *view_result(lj_tensor *t, ljg_node *n) { return ljf_tensor_from_node(t->dev, n); }

lj_tensor *lj_reshape(lj_tensor *t, int ndim, const int64_t *shape) {
  static const char *name = "lj_reshape";
  if (!ljf_arg(name, "t", t)) return NULL;
  if (ndim < 0 || ndim > LJ_MAX_DIMS || (ndim > 0 && !shape)) {
    ljb_error(LJ_ERR_ARG, "%s: bad shape (ndim = %d)", name, ndim);
    return NULL;
  }
  int64_t out[LJ_MAX_DIMS];
  int infer = -1;
  int64_t known = 1;
  for (int d = 0; d < ndim; d++) {
    out[d] = shape[d];
    if (shape[d] == -1) {
      if (infer >= 0) {
        ljb_error(LJ_ERR_ARG, "%s: only one dimension can be -1 (dims %d and %d)", name, infer, d);
        return NULL;
      }
      infer = d;
    } else if (shape[d] < 0) {
      ljb_error(LJ_ERR_ARG, "%s: invalid size %lld at dim %d", name, (long long)shape[d], d);
      return NULL;
    } else {
      known *= shape[d];
    }
  }
  int64_t numel = lj_tensor_numel(t);
  char a[LJB_SHAPE_STR_MAX], b[LJB_SHAPE_STR_MAX];
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      ljb_error(LJ_ERR_SHAPE, "%s: cannot infer the -1 in %s for %lld elements", name,
                ljb_shape_str(b, ndim, shape), (long long)numel);
      return NULL;
    }
    out[infer] = numel / known;
  } else if (known != numel) {
    ljb_error(LJ_ERR_SHAPE, "%s: shape %s is invalid for input of shape %s (%lld elements)", name,
              ljb_shape_str(b, ndim, shape), ljb_shape_str(a, t->ndim, t->shape), (long long)numel);
    return NULL;
  }
  return view_result(t, ljf_reshape_node(t->dev, ljf_node(t), ndim, out));
}

lj_tensor *lj_permute(lj_tensor *t, int ndim, const int *perm) {
  static const char *name = "lj_permute";
  if (!ljf_arg(name, "t", t)) return NULL;
  if (ndim != t->ndim || (ndim > 0 && !perm)) {
    ljb_error(LJ_ERR_ARG, "%s: %d dims given for a %d-d tensor", name, ndim, t->ndim);
    return NULL;
  }
  int64_t p[LJ_MAX_DIMS];
  unsigned seen = 0;
  for (int i = 0; i < ndim; i++) {
    int d;
    if (!ljf_dim(name, ndim, perm[i], &d)) return NULL;
    if (seen >> d & 1) {
      ljb_error(LJ_ERR_ARG, "%s: dim %d appears more than once", name, d);
      return NULL;
    }
    seen |= 1u << d;
    p[i] = d;
  }
  return view_result(t, ljf_permute_node(t->dev, ljf_node(t), p));
}

ljg_node *ljf_permute_node(struct lj_device *d, ljg_node *x, const int64_t *perm) {
  ljg_attr a = {0};
  int64_t shape[LJ_MAX_DIMS];
  bool identity = true;
  for (int i = 0; i < x->ndim; i++) {
    a.a[i] = perm[i];
    shape[i] = x->shape[perm[i]];
    identity &= perm[i] == i;
  }
  if (identity) return x;
  return ljg_node_make(&d->trace, LJG_OP_PERMUTE, x->dtype, x->ndim, shape, 1, &x, &a);
}

lj_tensor *lj_transpose(lj_tensor *t, int dim0, int dim1) {
  static const char *name = "lj_transpose";
  if (!ljf_arg(name, "t", t)) return NULL;
  int d0, d1;
  if (!ljf_dim(name, t->ndim, dim0, &d0) || !ljf_dim(name, t->ndim, dim1, &d1)) return NULL;
  int perm[LJ_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) perm[i] = i;
  if (t->ndim > 0) {
    perm[d0] = d1;
    perm[d1] = d0;
  }
  return lj_permute(t, t->ndim, perm);
}

lj_tensor *lj_expand(lj_tensor *t, int ndim, const int64_t *shape) {
  static const char *name = "lj_expand";
  if (!ljf_arg(name, "t", t)) return NULL;
  if (ndim < t->ndim || ndim > LJ_MAX_DIMS || (ndim > 0 && !shape)) {
    ljb_error(LJ_ERR_ARG, "%s: %d dims given for a %d-d tensor (need at least as many)", name,
              ndim, t->ndim);
    return NULL;
  }
  int64_t out[LJ_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t have = i < lead ? 1 : t->shape[i - lead];
    int64_t want = shape[i];
    if (want == -1 && i >= lead) want = have;
    char a[LJB_SHAPE_STR_MAX], b[LJB_SHAPE_STR_MAX];
    if (want < 0 || (have != want && have != 1)) {
      ljb_error(LJ_ERR_SHAPE, "%s: cannot expand %s to %s (dim %d: %lld to %lld)", name,
                ljb_shape_str(a, t->ndim, t->shape), ljb_shape_str(b, ndim, shape), i,
                (long long)have, (long long)shape[i]);
      return NULL;
    }
    out[i] = want;
  }
  return view_result(t, ljf_expand_node(t->dev, ljf_node(t), ndim, out));
}

lj_tensor *lj_squeeze(lj_tensor *t, int ndims, const int *dims) {
  static const char *name = "lj_squeeze";
  if (!ljf_arg(name, "t", t)) return NULL;
  if (ndims < 0 || (ndims > 0 && !dims)) {
    ljb_error(LJ_ERR_ARG, "%s: bad dim list (ndims = %d)", name, ndims);
    return NULL;
  }
  unsigned drop = 0;
  for (int i = 0; i < ndims; i++) {
    int d;
    if (!ljf_dim(name, t->ndim, dims[i], &d)) return NULL;
    if (t->ndim && t->shape[d] == 1) drop |= 1u << d;
  }
  if (ndims == 0)
    for (int d = 0; d < t->ndim; d++)
      if (t->shape[d] == 1) drop |= 1u << d;
  int64_t shape[LJ_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++)
    if (!(drop >> d & 1)) shape[n++] = t->shape[d];
  return view_result(t, ljf_reshape_node(t->dev, ljf_node(t), n, shape));
}

lj_tensor *lj_unsqueeze(lj_tensor *t, int dim) {
  static const char *name = "lj_unsqueeze";
  if (!ljf_arg(name, "t", t)) return NULL;
  int d;
  if (!ljf_dim(name, t->ndim + 1, dim, &d)) return NULL;
  if (t->ndim == LJ_MAX_DIMS) {
    ljb_error(LJ_ERR_ARG, "%s: a tensor has at most %d dims", name, LJ_MAX_DIMS);
    return NULL;
  }
  int64_t shape[LJ_MAX_DIMS];
  for (int i = 0, k = 0; i <= t->ndim; i++) shape[i] = i == d ? 1 : t->shape[k++];
  return view_result(t, ljf_reshape_node(t->dev, ljf_node(t), t->ndim + 1, shape));
}

lj_tensor *lj_flatten(lj_tensor *t, int start_dim, int end_dim) {
  static const char *name = "lj_flatten";
  if (!ljf_arg(name, "t", t)) return NULL;
  int s, e;
  if (!ljf_dim(name, t->ndim, start_dim, &s) || !ljf_dim(name, t->ndim, end_dim, &e)) return NULL;
  if (t->ndim == 0) return view_result(t, ljf_reshape_node(t->dev, ljf_node(t), 1, (const int64_t[]){1}));
  if (s > e) {
    ljb_error(LJ_ERR_ARG, "%s: start_dim %d comes after end_dim %d", name, s, e);
    return NULL;
  }
  int64_t shape[LJ_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < s; d++) shape[n++] = t->shape[d];
  shape[n] = 1;
  for (int d = s; d <= e; d++) shape[n] *= t->shape[d];
  n++;
  for (int d = e + 1; d < t->ndim; d++) shape[n++] = t->shape[d];
  return view_result(t, ljf_reshape_node(t->dev, ljf_node(t), n, shape));
}

lj_tensor *lj_slice(lj_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  static const char *name = "lj_slice";
  if (!ljf_arg(name, "t", t)) return NULL;
  if (t->ndim == 0) {
    ljb_error(LJ_ERR_ARG, "%s: cannot slice a 0-d tensor", name);
    return NULL;
  }
  int d;
  if (!ljf_dim(name, t->ndim, dim, &d)) return NULL;
  if (step <= 0) {
    ljb_error(LJ_ERR_ARG, "%s: step must be positive, got %lld", name, (long long)step);
    return NULL;
  }
  int64_t size = t->shape[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : start > size ? size : start;
  end = end < start ? start : end > size ? size : end;
  int64_t len = (end - start + step - 1) / step;
  return view_result(t, ljf_slice_node(t->dev, ljf_node(t), d, start, len, step));
}

ljg_node *ljf_slice_node(struct lj_device *d, ljg_node *x, int dim, int64_t start, int64_t len, int64_t step) {
  if (len == x->shape[dim]) return x; /* in range, so the whole dim */
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[dim] = len;
  ljg_attr a = {0};
  a.a[0] = dim;
  a.a[1] = len ? start : 0;
  a.a[2] = step;
  return ljg_node_make(&d->trace, LJG_OP_SLICE, x->dtype, x->ndim, shape, 1, &x, &a);
}

lj_tensor *lj_cat(int n, lj_tensor *const *ts, int dim) {
  static const char *name = "lj_cat";
  if (n <= 0 || !ts) {
    ljb_error(LJ_ERR_ARG, "%s: no tensors given (n = %d)", name, n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!ljf_arg(name, "ts[i]", ts[i])) return NULL;
    if (!ljf_same_device(name, ts[0], ts[i])) return NULL;
  }
  /* 1-D empty tensors are skipped, as PyTorch does for legacy reasons */
  LJB_VEC(lj_tensor *) parts = {0};
  ljf_typed *types = ljb_xalloc((size_t)n * sizeof *types);
  int ntypes = 0;
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim == 1 && ts[i]->shape[0] == 0) continue;
    ljb_vec_push(&parts, ts[i]);
    types[ntypes++] = ljf_typed_tensor(ts[i]);
  }
  lj_tensor *result = NULL;
  if (parts.n == 0) {
    result = view_result(ts[0], ljf_node(ts[0]));
    goto done;
  }
  lj_tensor *first = parts.a[0];
  if (first->ndim == 0) {
    ljb_error(LJ_ERR_ARG, "%s: zero-dimensional tensor (at position 0) cannot be concatenated", name);
    goto done;
  }
  int d;
  if (!ljf_dim(name, first->ndim, dim, &d)) goto done;
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, first->shape, sizeof shape);
  shape[d] = 0;
  for (int i = 0; i < parts.n; i++) {
    lj_tensor *x = parts.a[i];
    bool ok = x->ndim == first->ndim;
    for (int k = 0; ok && k < x->ndim; k++) ok = k == d || x->shape[k] == first->shape[k];
    if (!ok) {
      char a[LJB_SHAPE_STR_MAX], b[LJB_SHAPE_STR_MAX];
      ljb_error(LJ_ERR_SHAPE, "%s: tensor %d has shape %s, which does not match %s off dim %d",
                name, i, ljb_shape_str(a, x->ndim, x->shape),
                ljb_shape_str(b, first->ndim, first->shape), d);
      goto done;
    }
    shape[d] += x->shape[d];
  }
  lj_dtype dt = ljf_result_type(ntypes, types);
  struct lj_device *dev = first->dev;
  ljg_node **in = ljb_xalloc((size_t)parts.n * sizeof *in);
  for (int i = 0; i < parts.n; i++) in[i] = ljf_cast(dev, ljf_node(parts.a[i]), dt);
  if (parts.n == 1) {
    result = view_result(first, in[0]);
  } else {
    ljg_attr a = {0};
    a.a[0] = d;
    result = view_result(first, ljg_node_make(&dev->trace, LJG_OP_CAT, dt, first->ndim, shape,
                                              parts.n, in, &a));
  }
  free(in);
done:
  ljb_vec_free(&parts);
  free(types);
  return result;
}
