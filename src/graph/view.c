/* view.c — strided views and how view ops transform them.
 *
 * Fusion folds view ops (reshape, permute, expand, slice) into the loads that read through
 * them. Starting from a buffer's contiguous view, each view op between the buffer and the
 * kernel rewrites the view: permute reorders strides, expand sets stride 0, slice moves the
 * offset and scales a stride, and reshape recomputes strides when the dims it merges or splits
 * are laid out compatibly (the rule torch.view uses). A reshape that cannot be expressed in
 * strides (e.g. flattening a transposed view) pushes a new level: the new shape indexes the
 * old one through its row-major linear index, which costs a division per dim at run time.
 * One level means the load's address is affine in the loop indices, which is what the
 * vectorizer wants. */
#include "graph/graph.h"

#include <string.h>

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    stride[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
}

void ljg_view_contiguous(ljg_view *v, int ndim, const int64_t *shape) {
  memset(v, 0, sizeof *v);
  v->n = 1;
  v->v[0].ndim = ndim;
  memcpy(v->v[0].shape, shape, (size_t)ndim * sizeof *shape);
  contiguous_strides(ndim, shape, v->v[0].stride);
}

const ljg_view1 *ljg_view_top(const ljg_view *v) { return &v->v[v->n - 1]; }

bool ljg_view1_walks(const ljg_view1 *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (t->shape[d] != shape[d] || (shape[d] != 1 && t->stride[d] != step)) return false;
    step *= shape[d];
  }
  return true;
}

bool ljg_view_row_major(const ljg_view *v) {
  const ljg_view1 *t = &v->v[0];
  return v->n == 1 && t->offset == 0 && ljg_view1_walks(t, t->ndim, t->shape);
}

int ljg_view_transposed_dim(const ljg_view *v, int64_t min) {
  const ljg_view1 *t = &v->v[0];
  int j = t->ndim - 1;
  if (v->n != 1 || j < 1 || t->shape[j] < min || t->stride[j] == 0 || t->stride[j] == 1) return -1;
  for (int d = 0; d < j; d++)
    if (t->stride[d] == 1 && t->shape[d] >= min) return d;
  return -1;
}

bool ljg_view_equal(const ljg_view *a, const ljg_view *b) {
  if (a->n != b->n) return false;
  for (int l = 0; l < a->n; l++) {
    const ljg_view1 *x = &a->v[l], *y = &b->v[l];
    if (x->ndim != y->ndim || x->offset != y->offset) return false;
    for (int d = 0; d < x->ndim; d++)
      if (x->shape[d] != y->shape[d] || x->stride[d] != y->stride[d]) return false;
  }
  return true;
}

void ljg_view_permute(ljg_view *v, const int64_t *perm) {
  ljg_view1 *t = &v->v[v->n - 1], old = *t;
  for (int d = 0; d < t->ndim; d++) {
    t->shape[d] = old.shape[perm[d]];
    t->stride[d] = old.stride[perm[d]];
  }
}

void ljg_view_expand(ljg_view *v, const int64_t *shape) {
  ljg_view1 *t = &v->v[v->n - 1];
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] != shape[d]) {
      t->shape[d] = shape[d];
      t->stride[d] = 0;
    }
}

void ljg_view_slice(ljg_view *v, int dim, int64_t start, int64_t step, int64_t len) {
  ljg_view1 *t = &v->v[v->n - 1];
  t->offset += start * t->stride[dim];
  t->stride[dim] *= step;
  t->shape[dim] = len;
}

/* Strides for viewing (shape, stride) as new_shape without moving data, or false. Dims are
 * grouped into chunks that are contiguous with each other; each chunk must map onto whole
 * dims of the new shape. */
static bool restride(int ndim, const int64_t *shape, const int64_t *stride, int new_ndim,
                     const int64_t *new_shape, int64_t *new_stride) {
  if (ljg_numel(ndim, shape) == 0 || ndim == 0) {
    contiguous_strides(new_ndim, new_shape, new_stride);
    if (ndim == 0)
      for (int d = 0; d < new_ndim; d++) new_stride[d] = 0;
    return true;
  }
  int view_d = new_ndim - 1;
  int64_t chunk_base = stride[ndim - 1], tensor_numel = 1, view_numel = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    tensor_numel *= shape[d];
    bool chunk_end = d == 0 || (shape[d - 1] != 1 && stride[d - 1] != tensor_numel * chunk_base);
    if (!chunk_end) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_stride[view_d] = view_numel * chunk_base;
      view_numel *= new_shape[view_d];
      view_d--;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) {
      chunk_base = stride[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  return view_d == -1;
}

bool ljg_view_reshape(ljg_view *v, int ndim, const int64_t *shape) {
  ljg_view1 *t = &v->v[v->n - 1];
  int64_t stride[LJ_MAX_DIMS];
  if (restride(t->ndim, t->shape, t->stride, ndim, shape, stride)) {
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    return true;
  }
  if (v->n == LJG_MAX_VIEWS) return false;
  ljg_view1 *top = &v->v[v->n++];
  memset(top, 0, sizeof *top);
  top->ndim = ndim;
  memcpy(top->shape, shape, (size_t)ndim * sizeof *shape);
  contiguous_strides(ndim, shape, top->stride);
  return true;
}

bool ljg_view_apply(ljg_view *v, const ljg_gnode *op) {
  switch (op->op) {
  case LJG_OP_RESHAPE: return ljg_view_reshape(v, op->ndim, op->shape);
  case LJG_OP_PERMUTE: ljg_view_permute(v, op->attr.a); return true;
  case LJG_OP_EXPAND: ljg_view_expand(v, op->shape); return true;
  case LJG_OP_SLICE: {
    int dim = (int)op->attr.a[0];
    ljg_view_slice(v, dim, op->attr.a[1], op->attr.a[2], op->shape[dim]);
    return true;
  }
  default: LJ_UNREACHABLE("not a view op");
  }
}

int32_t ljg_strip_views(const ljg_graph *g, int32_t i) {
  while (ljg_ops[g->nodes[i].op].kind == LJG_VIEW) i = ljg_in(g, &g->nodes[i])[0];
  return i;
}

bool ljg_chain_view(const ljg_graph *g, int32_t top, int32_t src, ljg_view *v) {
  return ljg_chain_view_past(g, top, src, -1, v);
}

bool ljg_chain_view_past(const ljg_graph *g, int32_t top, int32_t src, int32_t past, ljg_view *v) {
  int32_t chain[256];
  int nc = 0;
  for (int32_t i = top; i != src && nc < 256; i = ljg_in(g, &g->nodes[i])[0])
    if (i != past) chain[nc++] = i;
  if (nc == 256) return false;
  ljg_view_contiguous(v, g->nodes[src].ndim, g->nodes[src].shape);
  for (int k = nc - 1; k >= 0; k--)
    if (!ljg_view_apply(v, &g->nodes[chain[k]])) return false;
  return true;
}

int64_t ljg_view_offset(const ljg_view *v, const int64_t *idx) {
  int64_t cur[LJ_MAX_DIMS];
  memcpy(cur, idx, sizeof cur);
  int64_t off = 0;
  for (int l = v->n - 1; l >= 0; l--) {
    const ljg_view1 *t = &v->v[l];
    off = t->offset;
    for (int d = 0; d < t->ndim; d++) off += cur[d] * t->stride[d];
    if (l > 0) {
      const ljg_view1 *below = &v->v[l - 1];
      int64_t rem = off;
      for (int d = below->ndim - 1; d >= 0; d--) {
        int64_t sz = below->shape[d] ? below->shape[d] : 1;
        cur[d] = rem % sz;
        rem /= sz;
      }
    }
  }
  return off;
}

int32_t ljg_cols_operand(const ljg_graph *g, int32_t x, bool transposed) {
  int32_t src = ljg_strip_views(g, x);
  const ljg_gnode *cols = &g->nodes[src];
  if (cols->op != LJG_OP_IM2COL || cols->attr.f != 0 || cols->ndim != 3) return -1;
  ljg_view v, whole;
  ljg_view_contiguous(&whole, 3, cols->shape);
  if (!ljg_chain_view(g, x, src, &v) || v.n != 1 || v.v[0].ndim != 3 || v.v[0].offset != 0) return -1;
  for (int d = 0; d < 3; d++) {
    int from = transposed && d ? 3 - d : d; /* the im2col's dim that x's dim d is */
    if (v.v[0].shape[d] != cols->shape[from] || v.v[0].stride[d] != whole.v[0].stride[from]) return -1;
  }
  return src;
}
