/* verify.c — structural checks of a canonical graph: every node's operands, dtypes and
 * shape agree with its op. The parser runs it on everything it reads (so a hand-edited dump
 * cannot crash the compiler) and the pass pipeline between passes in debug builds. */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

static bool fail(const ljg_graph *g, int i, const char *what) {
  int op = g->nodes[i].op;
  ljb_error(LJ_ERR_ARG, "graph: node %%%d (%s): %s", i, op < LJG_NUM_OPS ? ljg_ops[op].name : "?", what);
  return false;
}

static bool same_shape(const ljg_gnode *a, const ljg_gnode *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* Whether dt is a dtype node i's values may have (ops.def's operand dtypes): the frontend
 * casts integers and bool to f32 for the float functions, and takes no bools for negation,
 * subtraction, products or the sums of col2im and scatter_add. */
static bool check_types(const ljg_graph *g, int i, lj_dtype dt) {
  ljg_types t = ljg_ops[g->nodes[i].op].types;
  if ((t != LJG_T_FLOAT || ljg_dtype_is_float(dt)) && (t != LJG_T_NUMBER || dt != LJ_BOOL)) return true;
  char what[80];
  snprintf(what, sizeof what, "operands of dtype %s (it takes %s only)", lj_dtype_name(dt),
           t == LJG_T_FLOAT ? "floats" : "numbers");
  return fail(g, i, what);
}

static bool check_elemwise(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  const int32_t *in = ljg_in(g, n);
  for (int k = 0; k < n->nin; k++)
    if (!same_shape(&g->nodes[in[k]], n)) return fail(g, i, "operand shape differs from result");
  int first = n->op == LJG_OP_WHERE ? 1 : 0;
  lj_dtype odt = g->nodes[in[first]].dtype;
  for (int k = first; k < n->nin; k++)
    if (g->nodes[in[k]].dtype != odt) return fail(g, i, "operands of different dtypes");
  if (n->op == LJG_OP_WHERE && g->nodes[in[0]].dtype != LJ_BOOL)
    return fail(g, i, "condition is not bool");
  if (n->op == LJG_OP_CAST) return true;
  if (n->op == LJG_OP_INDEX_CHECK &&
      (odt != LJ_I64 || n->attr.a[0] < 0 || n->attr.a[1] < 0 || n->attr.a[1] >= LJG_NUM_OPS))
    return fail(g, i, "index_check needs i64, a bound >= 0 and an op or none");
  if (ljg_op_gives_bool(n->op) && n->dtype != LJ_BOOL) return fail(g, i, "result is not bool");
  if (!ljg_op_gives_bool(n->op) && n->dtype != odt) return fail(g, i, "result dtype differs from operands");
  return check_types(g, i, odt);
}

static bool check_view(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  const ljg_gnode *x = &g->nodes[ljg_in(g, n)[0]];
  if (x->dtype != n->dtype) return fail(g, i, "dtype differs from operand");
  switch (n->op) {
  case LJG_OP_RESHAPE:
    return ljg_gnumel(x) == ljg_gnumel(n) ? true : fail(g, i, "element count differs");
  case LJG_OP_PERMUTE: {
    if (x->ndim != n->ndim) return fail(g, i, "rank differs");
    unsigned seen = 0;
    for (int d = 0; d < n->ndim; d++) {
      int64_t p = n->attr.a[d];
      if (p < 0 || p >= n->ndim || (seen >> p & 1)) return fail(g, i, "not a permutation");
      seen |= 1u << p;
      if (n->shape[d] != x->shape[p]) return fail(g, i, "shape is not the permuted shape");
    }
    return true;
  }
  case LJG_OP_EXPAND:
    if (x->ndim != n->ndim) return fail(g, i, "rank differs");
    for (int d = 0; d < n->ndim; d++)
      if (x->shape[d] != n->shape[d] && x->shape[d] != 1) return fail(g, i, "expands a dim > 1");
    return true;
  case LJG_OP_SLICE: {
    int64_t dim = n->attr.a[0], start = n->attr.a[1], step = n->attr.a[2];
    if (x->ndim != n->ndim || dim < 0 || dim >= n->ndim) return fail(g, i, "bad dim");
    if (step <= 0 || start < 0) return fail(g, i, "bad start or step");
    for (int d = 0; d < n->ndim; d++)
      if (d != dim && x->shape[d] != n->shape[d]) return fail(g, i, "shape differs off dim");
    int64_t len = n->shape[dim];
    if (len > 0 && start + (len - 1) * step >= x->shape[dim]) return fail(g, i, "out of range");
    return true;
  }
  default: return true;
  }
}

static bool check_reduce(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  const ljg_gnode *x = &g->nodes[ljg_in(g, n)[0]];
  uint64_t mask = (uint64_t)n->attr.a[0];
  if (x->ndim != n->ndim || (mask >> n->ndim) != 0) return fail(g, i, "bad reduced dims");
  for (int d = 0; d < n->ndim; d++) {
    int64_t want = (mask >> d & 1) ? 1 : x->shape[d];
    if (n->shape[d] != want) return fail(g, i, "shape is not the reduced shape");
  }
  bool intlike = !ljg_dtype_is_float(x->dtype);
  bool has_identity = n->op == LJG_OP_SUM || n->op == LJG_OP_MEAN || n->op == LJG_OP_PROD;
  for (int d = 0; d < n->ndim; d++)
    if ((mask >> d & 1) && x->shape[d] == 0 && !has_identity)
      return fail(g, i, "reduces a dim of size 0, which it has no value for");
  switch (n->op) {
  case LJG_OP_SUM:
  case LJG_OP_PROD:
    if (intlike && n->dtype != LJ_I64) return fail(g, i, "integer sum/prod must be i64");
    if (!intlike && n->dtype != x->dtype) return fail(g, i, "dtype differs from operand");
    return true;
  case LJG_OP_MEAN:
    if (intlike || n->dtype != x->dtype) return fail(g, i, "mean needs a float operand");
    return true;
  case LJG_OP_ARGMAX:
  case LJG_OP_ARGMIN:
    if (!ljg_dtype_is_index(n->dtype) || __builtin_popcountll(mask) != 1 || x->dtype == LJ_BOOL)
      return fail(g, i, "argmax/argmin: one dim, i64, i32 or i8 result, non-bool operand");
    return true;
  default:
    return n->dtype == x->dtype ? true : fail(g, i, "dtype differs from operand");
  }
}

bool ljg_window_out(const int64_t *a, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
  for (int k = 0; k < 8; k++)
    if (k >= 4 && k < 6 ? a[k] < 0 : a[k] < 1) return false;
  *oh = (h + 2 * a[4] - a[6] * (a[0] - 1) - 1) / a[2] + 1;
  *ow = (w + 2 * a[5] - a[7] * (a[1] - 1) - 1) / a[3] + 1;
  return h + 2 * a[4] - a[6] * (a[0] - 1) - 1 >= 0 && w + 2 * a[5] - a[7] * (a[1] - 1) - 1 >= 0;
}

static bool check_window(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  const ljg_gnode *x = &g->nodes[ljg_in(g, n)[0]];
  const ljg_gnode *img = n->op == LJG_OP_IM2COL ? x : n, *cols = n->op == LJG_OP_IM2COL ? n : x;
  int64_t oh, ow, k = n->attr.a[0] * n->attr.a[1];
  if (x->dtype != n->dtype || img->ndim != 4 || cols->ndim != 3) return fail(g, i, "ranks or dtypes");
  if (!ljg_window_out(n->attr.a, img->shape[2], img->shape[3], &oh, &ow)) return fail(g, i, "bad window");
  if (cols->shape[0] != img->shape[0] || cols->shape[1] != img->shape[1] * k || cols->shape[2] != oh * ow)
    return fail(g, i, "window shapes do not match");
  return true;
}

static bool check_index(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  const int32_t *in = ljg_in(g, n);
  const ljg_gnode *x = &g->nodes[in[0]], *idx = &g->nodes[in[1]];
  int64_t dim = n->attr.a[0];
  if (dim < 0 || dim >= x->ndim || idx->ndim != x->ndim || !ljg_dtype_is_index(idx->dtype))
    return fail(g, i, "bad dim or index");
  if (n->dtype != x->dtype) return fail(g, i, "dtype differs from the operand");
  if (n->op == LJG_OP_GATHER) {
    if (n->ndim != idx->ndim || memcmp(n->shape, idx->shape, (size_t)n->ndim * sizeof *n->shape) != 0)
      return fail(g, i, "result shape is not the index shape");
  } else {
    const ljg_gnode *src = &g->nodes[in[2]];
    if (!same_shape(n, x) || !same_shape(src, idx) || src->dtype != n->dtype) return fail(g, i, "src and index");
  }
  for (int d = 0; d < x->ndim; d++)
    if (d != dim && idx->shape[d] > x->shape[d]) return fail(g, i, "index larger than the operand off dim");
  return true;
}

static bool check_node(const ljg_graph *g, int i) {
  const ljg_gnode *n = &g->nodes[i];
  if (n->op >= LJG_NUM_OPS) return fail(g, i, "unknown op");
  const ljg_opinfo *info = &ljg_ops[n->op];
  if (!ljg_dtype_valid(n->dtype)) return fail(g, i, "bad dtype");
  if (n->ndim > LJ_MAX_DIMS) return fail(g, i, "too many dims");
  for (int d = 0; d < n->ndim; d++)
    if (n->shape[d] < 0) return fail(g, i, "negative size");
  if (info->arity >= 0 ? n->nin != info->arity : n->nin < 1) return fail(g, i, "wrong arity");
  const int32_t *in = ljg_in(g, n);
  for (int k = 0; k < n->nin; k++)
    if (in[k] < 0 || in[k] >= i) return fail(g, i, "operand is not an earlier node");
  if (info->kind != LJG_ELEMWISE && !check_types(g, i, n->dtype)) return false;
  switch (info->kind) {
  case LJG_LEAF:
    if (n->op != LJG_OP_DATA && n->ndim != 0) return fail(g, i, "scalar is not 0-d");
    return true;
  case LJG_INDEXED:
    if (n->op == LJG_OP_IOTA)
      return n->ndim == 1 && n->dtype == LJ_I64 ? true : fail(g, i, "iota must be 1-D i64");
    if (!ljg_dtype_is_float(n->dtype)) return fail(g, i, "random values must be floats");
    for (int k = 0; k < 2; k++)
      if (g->nodes[in[k]].ndim != 0 || g->nodes[in[k]].dtype != LJ_I64)
        return fail(g, i, "seed and offset must be 0-d i64");
    return true;
  case LJG_ELEMWISE: return check_elemwise(g, i);
  case LJG_VIEW: return check_view(g, i);
  case LJG_REDUCE: return check_reduce(g, i);
  case LJG_CAT: {
    int64_t dim = n->attr.a[0], total = 0;
    if (dim < 0 || dim >= n->ndim) return fail(g, i, "bad dim");
    for (int k = 0; k < n->nin; k++) {
      const ljg_gnode *x = &g->nodes[in[k]];
      if (x->ndim != n->ndim || x->dtype != n->dtype) return fail(g, i, "operand rank or dtype");
      for (int d = 0; d < n->ndim; d++)
        if (d != dim && x->shape[d] != n->shape[d]) return fail(g, i, "operand shape");
      total += x->shape[dim];
    }
    return total == n->shape[dim] ? true : fail(g, i, "sizes do not add up");
  }
  case LJG_WINDOW: return check_window(g, i);
  case LJG_INDEX: return check_index(g, i);
  case LJG_MATMUL: {
    const ljg_gnode *a = &g->nodes[in[0]], *b = &g->nodes[in[1]];
    if (a->ndim != 3 || b->ndim != 3 || n->ndim != 3) return fail(g, i, "operands must be 3-D");
    if (a->dtype != n->dtype || b->dtype != n->dtype) return fail(g, i, "dtypes differ");
    int64_t batch = n->op == LJG_OP_MATMUL_SUM ? a->shape[0] : n->shape[0];
    if (n->op == LJG_OP_MATMUL_SUM && (n->shape[0] < 1 || batch % n->shape[0]))
      return fail(g, i, "a batch sum's matrices must divide the batch");
    if (a->shape[0] != batch || b->shape[0] != batch || a->shape[2] != b->shape[1] ||
        a->shape[1] != n->shape[1] || b->shape[2] != n->shape[2])
      return fail(g, i, "shapes do not chain");
    return true;
  }
  }
  return true;
}

bool ljg_graph_verify(const ljg_graph *g) {
  for (int i = 0; i < g->n; i++)
    if (!check_node(g, i)) return false;
  for (int r = 0; r < g->nroots; r++) {
    if (g->roots[r] < 0 || g->roots[r] >= g->n) {
      ljb_error(LJ_ERR_ARG, "graph: root %d is not a node", r);
      return false;
    }
    int32_t d = g->donors[r];
    if (d < 0) continue;
    const ljg_gnode *root = &g->nodes[g->roots[r]], *p = d < g->nparams ? &g->nodes[g->params[d]] : NULL;
    if (!p || p->op != LJG_OP_DATA || p->dtype != root->dtype || ljg_gnumel(p) != ljg_gnumel(root)) {
      ljb_error(LJ_ERR_ARG, "graph: the donor of root %d (parameter %d) is not data of the root's dtype and size", r, d);
      return false;
    }
  }
  int p = 0;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].param >= 0 && g->nodes[i].param != p++) {
      ljb_error(LJ_ERR_ARG, "graph: parameters out of order at node %%%d", i);
      return false;
    }
  return true;
}
