/* pass_simplify.c — algebraic identities and view folding.
 * Requires: a verified graph. Guarantees: the same values at every root (up to rounding
 * where a sum's factor moves out of it, docs/semantics.md), with identity
 * views (reshape to the same shape, identity permute, full slice, expand to the same shape,
 * cast to the same dtype) and stop_gradient removed, chains of reshapes / permutes / expands merged,
 * permutes moved below reshapes that only add or drop size-1 dims (so they merge with a
 * permute there, and a matmul read transposed shows as such to the matmul pass), double
 * negation removed, x*1, x/1, x-0 (and x+0 on integers: on floats -0+0 is +0) reduced
 * to x, a gather of a float elementwise node made the node's op on its operands'
 * gathers, a scatter-add of one value per line a where of a one-hot compare, a sum of
 * such a one-hot line along it the line's value, a float sum of products with factors the
 * same along its dims those factors times sums of the other factors' products
 * (sum_of_scaled), and
 * an im2col or col2im of 1×1 windows of stride 1 without padding (a 1×1 convolution's) a
 * reshape: the matmul then reads the image as a plain operand, and the cost rule of
 * pass_matmul.c orients its weight gradient (the implicit GEMM's packing of such an A is a
 * copy, and it always turned the product so that the larger operand, dY, was packed by
 * transposes; [8, 64, 56, 56] to 256 channels forward and weight gradient, one thread:
 * 10.3-10.5 -> 8.6-8.9 ms). */
#include "graph/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_const(const ljg_graph *g, int idx, double want) {
  double v;
  return ljg_uniform_const(g, idx, &v) && v == want;
}

static bool same_shape(const ljg_gnode *a, const ljg_gnode *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

static int simplify(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in);

/* permute n of reshape xi: a reshape of its operand permuted alike, so the permute meets (and
 * merges with) one below the reshape. The reshape's dims of size > 1 and its operand's fall
 * into groups of equal sizes (a dim split in several, several merged in one, or one kept);
 * the permute must keep each group's dims together and in order (a batch split in two and
 * its matrices transposed: autograd's gradient of a multi-head attention's Kᵀ). Its
 * operand's groups are then permuted as the reshape's are, size-1 dims staying where they
 * are. -1 otherwise. */
static int permute_below_reshape(ljg_rewriter *rw, const ljg_gnode *n, int32_t xi) {
  const ljg_graph *g = &rw->out;
  const ljg_gnode *x = &g->nodes[xi];
  int32_t yi = ljg_in(g, x)[0];
  const ljg_gnode *y = &g->nodes[yi];
  int xpos[LJ_MAX_DIMS], ypos[LJ_MAX_DIMS], nx = 0, ny = 0;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != 1) xpos[nx++] = d;
  for (int d = 0; d < y->ndim; d++)
    if (y->shape[d] != 1) ypos[ny++] = d;
  /* xgroup[d]: the group of x's dim d (size > 1); group i spans y's ypos[yfirst[i] ..
   * yfirst[i + 1]) and x's xpos[xfirst[i] .. xfirst[i + 1]) */
  int xgroup[LJ_MAX_DIMS], xfirst[LJ_MAX_DIMS + 1], yfirst[LJ_MAX_DIMS + 1], ngroups = 0, i = 0, j = 0;
  while (i < nx && j < ny) {
    xfirst[ngroups] = i, yfirst[ngroups] = j;
    int64_t px = x->shape[xpos[i]], py = y->shape[ypos[j]];
    xgroup[xpos[i++]] = ngroups, j++;
    while (px != py) {
      if (px < py) {
        if (i == nx) return -1;
        xgroup[xpos[i]] = ngroups, px *= x->shape[xpos[i++]];
      } else {
        if (j == ny) return -1;
        py *= y->shape[ypos[j++]];
      }
    }
    ngroups++;
  }
  if (i != nx || j != ny) return -1;
  xfirst[ngroups] = nx, yfirst[ngroups] = ny;
  /* the groups in the permute's order, each whole and in order */
  int order[LJ_MAX_DIMS], norder = 0, at = 0; /* at: xpos index of the current group's next dim */
  for (int d = 0; d < n->ndim; d++) {
    int src = (int)n->attr.a[d];
    if (x->shape[src] == 1) continue;
    if (norder > 0 && at < xfirst[order[norder - 1] + 1]) {
      if (xpos[at++] != src) return -1;
      continue;
    }
    int gi = xgroup[src];
    if (xpos[xfirst[gi]] != src) return -1;
    order[norder++] = gi;
    at = xfirst[gi] + 1;
  }
  ljg_gnode p = *n;
  memset(&p.attr, 0, sizeof p.attr);
  p.ndim = y->ndim;
  for (int d = 0; d < y->ndim; d++) p.attr.a[d] = d;
  int k = 0;
  for (int o = 0; o < norder; o++)
    for (int t = yfirst[order[o]]; t < yfirst[order[o] + 1]; t++) p.attr.a[ypos[k++]] = ypos[t];
  for (int d = 0; d < y->ndim; d++) p.shape[d] = y->shape[p.attr.a[d]];
  int32_t pi = simplify(rw, &p, &yi);
  ljg_gnode r = *n;
  memset(&r.attr, 0, sizeof r.attr);
  r.op = LJG_OP_RESHAPE;
  return simplify(rw, &r, &pi);
}

/* gather n of an elementwise float node x: the op of its operands' gathers (nll_loss of
 * log_softmax picks one class a row of x - max - log(sum), which then is never stored whole:
 * a pass over the logits fewer, 128 KB a row for 32000 classes). An operand of x's shape is
 * gathered too; one broadcast along the gathered dim (an expand of a size-1 dim: the row's
 * max) is the same at every index, expanded to n's shape. The same float ops on the same
 * values. -1 when x's operands are of another dtype (a where's condition, a cast's input). */
static int gather_below_op(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out; /* its nodes move as simplify adds some: copied first */
  const ljg_gnode x = g->nodes[in[0]], *idx = &g->nodes[in[1]];
  int dim = (int)n->attr.a[0];
  if (ljg_ops[x.op].kind != LJG_ELEMWISE || !ljg_dtype_is_float(x.dtype) || x.nin > 8) return -1;
  for (int d = 0; d < x.ndim; d++)
    if (d != dim && idx->shape[d] != x.shape[d]) return -1;
  int32_t xin[8], picked[8];
  memcpy(xin, ljg_in(g, &x), (size_t)x.nin * sizeof *xin);
  for (int k = 0; k < x.nin; k++)
    if (g->nodes[xin[k]].dtype != x.dtype) return -1;
  for (int k = 0; k < x.nin; k++) {
    const ljg_gnode *a = &g->nodes[xin[k]];
    ljg_gnode m = *n;
    int32_t pin[2] = {xin[k], in[1]};
    if (a->op == LJG_OP_EXPAND) {
      int32_t src = ljg_in(g, a)[0];
      if (g->nodes[src].ndim == a->ndim && g->nodes[src].shape[dim] == 1) {
        memset(&m.attr, 0, sizeof m.attr);
        m.op = LJG_OP_EXPAND;
        m.nin = 1;
        pin[0] = src;
      }
    }
    m.dtype = x.dtype;
    picked[k] = simplify(rw, &m, pin);
  }
  ljg_gnode op = x;
  op.ndim = n->ndim;
  memcpy(op.shape, n->shape, sizeof op.shape);
  return simplify(rw, &op, picked);
}

/* scatter_add n of one value per line along its dim (an index of size 1 there, the size of n
 * elsewhere: the gradient of a gather of one class a row, as in cross-entropy): where(iota ==
 * index, base + src, base), elementwise, so no pass zeroes a [rows, classes] buffer, adds the
 * values at their indices and reads it back; the index keeps its range check. Only i64
 * indices, as lj_scatter_add takes: max-pool's gradient scatters its narrower argmax positions
 * for fuse_unpool.c to read where they are pooled. -1 otherwise. */
static int scatter_as_select(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out;
  const ljg_gnode idx = g->nodes[in[1]];
  int dim = (int)n->attr.a[0];
  if (idx.shape[dim] != 1 || idx.dtype != LJ_I64) return -1;
  for (int d = 0; d < n->ndim; d++)
    if (d != dim && idx.shape[d] != n->shape[d]) return -1;
  /* the position along dim: iota, shaped and expanded to n's shape */
  ljg_gnode m = {.op = LJG_OP_IOTA, .dtype = LJ_I64, .ndim = 1, .param = -1, .loc = n->loc};
  m.shape[0] = n->shape[dim];
  int32_t line = ljg_rw_add(rw, &m, NULL);
  m.nin = 1;
  m.op = LJG_OP_RESHAPE;
  m.ndim = n->ndim;
  for (int d = 0; d < n->ndim; d++) m.shape[d] = d == dim ? n->shape[dim] : 1;
  line = simplify(rw, &m, &line);
  m.op = LJG_OP_EXPAND;
  memcpy(m.shape, n->shape, sizeof m.shape);
  line = simplify(rw, &m, &line);
  /* the index, checked against dim's size, expanded */
  int32_t at = in[1];
  memcpy(m.shape, idx.shape, sizeof m.shape);
  m.op = LJG_OP_INDEX_CHECK;
  m.attr.a[0] = n->shape[dim];
  m.attr.a[1] = LJG_OP_SCATTER_ADD; /* a bad index is scatter_add's */
  at = simplify(rw, &m, &at);
  memset(&m.attr, 0, sizeof m.attr);
  m.op = LJG_OP_EXPAND;
  memcpy(m.shape, n->shape, sizeof m.shape);
  at = simplify(rw, &m, &at);
  m.op = LJG_OP_EQ;
  m.dtype = LJ_BOOL;
  m.nin = 2;
  int32_t hit = simplify(rw, &m, (int32_t[]){line, at});
  /* base + src; at the index's shape where base is a constant, so that the value is one
   * along dim, expanded (a sum along dim then folds: sum_of_one_hot) */
  m.dtype = n->dtype;
  double c;
  int32_t sum;
  if (ljg_uniform_const(g, in[0], &c)) {
    m.op = LJG_OP_ADD;
    memcpy(m.shape, idx.shape, sizeof m.shape);
    sum = simplify(rw, &m, (int32_t[]){ljg_rw_const(rw, (lj_dtype)n->dtype, c, idx.ndim, idx.shape), in[2]});
    m.op = LJG_OP_EXPAND;
    m.nin = 1;
    memcpy(m.shape, n->shape, sizeof m.shape);
    sum = simplify(rw, &m, &sum);
  } else {
    m.op = LJG_OP_EXPAND;
    m.nin = 1;
    int32_t src = simplify(rw, &m, &in[2]);
    m.op = LJG_OP_ADD;
    m.nin = 2;
    sum = simplify(rw, &m, (int32_t[]){in[0], src});
  }
  m.op = LJG_OP_WHERE;
  m.nin = 3;
  return simplify(rw, &m, (int32_t[]){hit, sum, in[0]});
}

/* v, the same at every position along dim d, at n's shape (n: v reduced along d): the node v
 * expands, or a uniform constant; -1 when v is neither. */
static int32_t along_one(ljg_rewriter *rw, const ljg_gnode *n, int32_t v) {
  const ljg_graph *g = &rw->out;
  double c;
  if (ljg_uniform_const(g, v, &c)) return ljg_rw_const(rw, (lj_dtype)g->nodes[v].dtype, c, n->ndim, n->shape);
  if (g->nodes[v].op != LJG_OP_EXPAND) return -1;
  int32_t src = ljg_in(g, &g->nodes[v])[0];
  return same_shape(&g->nodes[src], n) ? src : -1;
}

/* Whether v is the position along dim d: an iota of d's size, reshaped to d and expanded. */
static bool is_position(const ljg_graph *g, int32_t v, int d) {
  const ljg_gnode *x = &g->nodes[v];
  if (x->op != LJG_OP_EXPAND) return false;
  const ljg_gnode *r = &g->nodes[ljg_in(g, x)[0]];
  if (r->op != LJG_OP_RESHAPE || r->ndim != x->ndim) return false;
  for (int k = 0; k < r->ndim; k++)
    if (r->shape[k] != (k == d ? x->shape[d] : 1)) return false;
  const ljg_gnode *i = &g->nodes[ljg_in(g, r)[0]];
  return i->op == LJG_OP_IOTA && i->shape[0] == x->shape[d];
}

/* sum n along one dim d of [-]where(position == q, a, +0), q and a the same along d (a one-hot
 * row, as scatter_as_select writes it): where(0 <= q < size, [-]a + 0, +0), computed per line
 * instead of at every position. A sum of one value [-]a and (negated) zeros is [-]a + 0 (a
 * zero of either sign gives +0, as the sum from +0 does). -1 otherwise. */
static int sum_of_one_hot(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out;
  int64_t mask = n->attr.a[0];
  if (!ljg_dtype_is_float(n->dtype) || mask == 0 || (mask & (mask - 1))) return -1;
  int d = 0;
  while (!(mask >> d & 1)) d++;
  int32_t x = in[0];
  bool neg = g->nodes[x].op == LJG_OP_NEG;
  if (neg) x = ljg_in(g, &g->nodes[x])[0];
  const ljg_gnode *w = &g->nodes[x];
  double zero;
  if (w->op != LJG_OP_WHERE || !ljg_uniform_const(g, ljg_in(g, w)[2], &zero) || zero != 0 || signbit(zero)) return -1;
  const ljg_gnode *hit = &g->nodes[ljg_in(g, w)[0]];
  if (hit->op != LJG_OP_EQ) return -1;
  int32_t p = ljg_in(g, hit)[0], q = ljg_in(g, hit)[1], a = ljg_in(g, w)[1];
  if (!is_position(g, p, d)) {
    int32_t t = p;
    p = q;
    q = t;
  }
  int64_t size = w->shape[d];
  if (!is_position(g, p, d) || g->nodes[q].dtype != LJ_I64) return -1;
  if ((q = along_one(rw, n, q)) < 0 || (a = along_one(rw, n, a)) < 0) return -1;
  ljg_gnode m = *n;
  memset(&m.attr, 0, sizeof m.attr);
  m.nin = 2;
  m.dtype = LJ_BOOL;
  m.op = LJG_OP_GE;
  int32_t lo = simplify(rw, &m, (int32_t[]){q, ljg_rw_const(rw, LJ_I64, 0, n->ndim, n->shape)});
  m.op = LJG_OP_LT;
  int32_t hi = simplify(rw, &m, (int32_t[]){q, ljg_rw_const(rw, LJ_I64, (double)size, n->ndim, n->shape)});
  m.op = LJG_OP_LOGICAL_AND;
  int32_t inside = simplify(rw, &m, (int32_t[]){lo, hi});
  m.dtype = n->dtype;
  if (neg) {
    m.op = LJG_OP_NEG;
    m.nin = 1;
    a = simplify(rw, &m, &a);
  }
  m.op = LJG_OP_ADD;
  m.nin = 2;
  int32_t z = ljg_rw_const(rw, (lj_dtype)n->dtype, 0, n->ndim, n->shape);
  int32_t v = simplify(rw, &m, (int32_t[]){a, z});
  m.op = LJG_OP_WHERE;
  m.nin = 3;
  return simplify(rw, &m, (int32_t[]){inside, v, z});
}

/* The most products sum_of_scaled takes apart, and the most factors a product may have on
 * either side (the same along the reduced dims or not). */
enum { SCALED_TERMS_MAX = 8, SCALED_FACTORS_MAX = 8 };

/* A product of a sum's operand, added (or, neg, subtracted): its factors a[] and f[], each f
 * the same along every reduced dim, both in the order of their nodes. */
typedef struct scaled_term {
  int32_t a[SCALED_FACTORS_MAX], f[SCALED_FACTORS_MAX];
  int na, nf;
  bool neg;
} scaled_term;

/* Whether v expands a value the same along every dim of mask. */
static bool along_reduced(const ljg_graph *g, int32_t v, int64_t mask) {
  const ljg_gnode *x = &g->nodes[v];
  if (x->op != LJG_OP_EXPAND) return false;
  const ljg_gnode *src = &g->nodes[ljg_in(g, x)[0]];
  if (src->ndim != x->ndim) return false;
  for (int d = 0; d < x->ndim; d++)
    if (mask >> d & 1 && src->shape[d] != 1) return false;
  return true;
}

/* Adds the factors of the product tree at x (depth products down) to t, in order of their
 * nodes: into f those along_reduced, into a the others. False past SCALED_FACTORS_MAX on either
 * side, or deeper than two sides' worth of products (a long chain of them is not walked to its
 * end). */
static bool product_factors(const ljg_graph *g, int32_t x, int64_t mask, scaled_term *t, int depth) {
  const ljg_gnode *v = &g->nodes[x];
  if (v->op == LJG_OP_MUL)
    return depth < 2 * SCALED_FACTORS_MAX && product_factors(g, ljg_in(g, v)[0], mask, t, depth + 1) &&
           product_factors(g, ljg_in(g, v)[1], mask, t, depth + 1);
  bool along = along_reduced(g, x, mask);
  int32_t *side = along ? t->f : t->a;
  int *n = along ? &t->nf : &t->na;
  if (*n == SCALED_FACTORS_MAX) return false;
  int i = (*n)++;
  for (; i > 0 && side[i - 1] > x; i--) side[i] = side[i - 1];
  side[i] = x;
  return true;
}

/* Appends the terms of x (negated with neg; depth sums and negations down) to t: x a sum,
 * difference or negation of products each with a factor along_reduced and one not. False when
 * x is not one, has more than SCALED_TERMS_MAX products, or nests deeper than twice that. */
static bool scaled_terms(const ljg_graph *g, int32_t x, int64_t mask, bool neg, scaled_term *t, int *nt, int depth) {
  const ljg_gnode *v = &g->nodes[x];
  const int32_t *in = ljg_in(g, v);
  if (depth > 2 * SCALED_TERMS_MAX) return false;
  switch (v->op) {
  case LJG_OP_NEG: return scaled_terms(g, in[0], mask, !neg, t, nt, depth + 1);
  case LJG_OP_ADD:
  case LJG_OP_SUB:
    return scaled_terms(g, in[0], mask, neg, t, nt, depth + 1) &&
           scaled_terms(g, in[1], mask, v->op == LJG_OP_SUB ? !neg : neg, t, nt, depth + 1);
  case LJG_OP_MUL:
    if (*nt == SCALED_TERMS_MAX) return false;
    t[*nt] = (scaled_term){.neg = neg};
    if (!product_factors(g, x, mask, &t[*nt], 0) || !t[*nt].na || !t[*nt].nf) return false;
    (*nt)++;
    return true;
  default: return false;
  }
}

/* The product of the n nodes at v (each of proto's shape), multiplied in their order. */
static int32_t product_of(ljg_rewriter *rw, ljg_gnode proto, const int32_t *v, int n) {
  memset(&proto.attr, 0, sizeof proto.attr);
  proto.op = LJG_OP_MUL;
  proto.nin = 2;
  int32_t acc = v[0];
  for (int i = 1; i < n; i++) acc = simplify(rw, &proto, (int32_t[]){acc, v[i]});
  return acc;
}

/* A float sum n of ±a_i·f_i, each f_i (a product of factors) the same along the reduced dims
 * (a batch norm's per-channel scales): ±sum(a_i)·f_i, each f_i taken at the sum's shape, and
 * each sum(a_i) simplified in turn; -1 otherwise. The gradient autograd writes for a batch
 * norm's input sums such products, one of them scaled by another sum over the same rows: taken
 * apart, every sum it takes reads only what the forward's kernel wrote, so they run in one
 * kernel, and the products they summed, stored for that, are computed in the input gradient's
 * kernel. With a_i's factors in the order of their nodes, the weight's gradient, sum(dY·x̂)
 * with x̂ = (x - mean)·rstd, and the input gradient's sum(dY·w·(x - mean)) are the per-channel
 * factors times one sum, sum(dY·(x - mean)): it is taken once, beside the others. */
static int sum_of_scaled(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out;
  scaled_term t[SCALED_TERMS_MAX];
  int nt = 0;
  if (!ljg_dtype_is_float(n->dtype) || g->nodes[in[0]].dtype != n->dtype ||
      !scaled_terms(g, in[0], n->attr.a[0], false, t, &nt, 0))
    return -1;
  ljg_gnode operand = g->nodes[in[0]]; /* read before the graph grows */
  int32_t acc = -1;
  for (int i = 0; i < nt; i++) {
    ljg_gnode m = *n;
    int32_t a = product_of(rw, operand, t[i].a, t[i].na);
    int32_t sum = simplify(rw, &m, &a);
    int32_t f[SCALED_FACTORS_MAX];
    memset(&m.attr, 0, sizeof m.attr);
    m.op = LJG_OP_EXPAND;
    for (int k = 0; k < t[i].nf; k++) {
      int32_t src = ljg_in(g, &g->nodes[t[i].f[k]])[0];
      f[k] = simplify(rw, &m, &src);
    }
    int32_t term = product_of(rw, *n, (int32_t[]){sum, product_of(rw, *n, f, t[i].nf)}, 2);
    m.nin = 1;
    if (acc < 0 && t[i].neg) {
      m.op = LJG_OP_NEG;
      acc = simplify(rw, &m, &term);
    } else if (acc < 0) {
      acc = term;
    } else {
      m.op = t[i].neg ? LJG_OP_SUB : LJG_OP_ADD;
      m.nin = 2;
      acc = simplify(rw, &m, (int32_t[]){acc, term});
    }
  }
  return acc;
}

/* The most parts two cats that add_of_cats joins may have together. */
enum { ADDED_CATS_MAX_PARTS = 64 };

/* add n of two cats along the same dim: the cat of the sums of their parts, each part cut
 * (sliced) where one of the other cat's begins. Autograd sums the gradients of slices of one
 * tensor, each a cat of it and zeros (a fused projection split into a transformer's q, k and
 * v; an LSTM's gates): one kernel then writes the sum, instead of one for each cat and one
 * for the adds, each through memory. The same adds of the same values. -1 when n's operands
 * are not two such cats, or are empty along their dim (no part to sum: a cat needs one). */
static int add_of_cats(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out; /* its nodes move as simplify adds some: read first */
  const ljg_gnode *a = &g->nodes[in[0]], *b = &g->nodes[in[1]];
  if (a->op != LJG_OP_CAT || b->op != LJG_OP_CAT || a->attr.a[0] != b->attr.a[0] ||
      a->nin + b->nin > ADDED_CATS_MAX_PARTS || n->shape[a->attr.a[0]] == 0)
    return -1;
  int dim = (int)a->attr.a[0], nparts[2] = {a->nin, b->nin};
  int32_t part[2][ADDED_CATS_MAX_PARTS];
  int64_t end[2][ADDED_CATS_MAX_PARTS]; /* where each part ends along dim */
  for (int c = 0; c < 2; c++) {
    const ljg_gnode *cat = c ? b : a;
    int64_t at = 0;
    for (int i = 0; i < nparts[c]; i++) {
      part[c][i] = ljg_in(g, cat)[i];
      end[c][i] = at += g->nodes[part[c][i]].shape[dim];
    }
  }
  int32_t sums[ADDED_CATS_MAX_PARTS];
  int nsums = 0, next[2] = {0, 0};
  int64_t lo = 0;
  while (next[0] < nparts[0] && next[1] < nparts[1]) {
    int64_t hi = end[0][next[0]] < end[1][next[1]] ? end[0][next[0]] : end[1][next[1]];
    if (hi > lo) {
      int32_t piece[2];
      for (int c = 0; c < 2; c++) {
        ljg_gnode sl = rw->out.nodes[part[c][next[c]]];
        int64_t size = sl.shape[dim];
        memset(&sl.attr, 0, sizeof sl.attr);
        sl.op = LJG_OP_SLICE;
        sl.nin = 1;
        sl.param = -1;
        sl.attr.a[0] = dim;
        sl.attr.a[1] = lo - (end[c][next[c]] - size);
        sl.attr.a[2] = 1;
        sl.shape[dim] = hi - lo;
        piece[c] = simplify(rw, &sl, &part[c][next[c]]);
      }
      ljg_gnode sum = *n;
      sum.shape[dim] = hi - lo;
      sums[nsums++] = simplify(rw, &sum, piece);
    }
    lo = hi;
    for (int c = 0; c < 2; c++)
      if (end[c][next[c]] == hi) next[c]++;
  }
  ljg_gnode cat = *n;
  memset(&cat.attr, 0, sizeof cat.attr);
  cat.op = LJG_OP_CAT;
  cat.nin = nsums;
  cat.attr.a[0] = dim;
  return ljg_rw_add(rw, &cat, sums);
}

/* Whether window node n's windows are single pixels, one at every pixel: its im2col or
 * col2im only reshapes ([N, C, H, W] <-> [N, C, H·W]). */
static bool one_by_one(const ljg_gnode *n) {
  const int64_t *a = n->attr.a;
  return a[0] == 1 && a[1] == 1 && a[2] == 1 && a[3] == 1 && a[4] == 0 && a[5] == 0;
}

/* Whether permute n taking its dims from perm leaves its elements in their order: the dims
 * of size > 1 keep theirs (only size-1 dims move; no dim moves: the identity). */
static bool keeps_order(const ljg_gnode *n, const int64_t *perm) {
  int64_t last = -1;
  for (int d = 0; d < n->ndim; d++) {
    if (n->shape[d] == 1) continue;
    if (perm[d] < last) return false;
    last = perm[d];
  }
  return true;
}

/* Node n of shape n->shape as a reshape of node src (simplified: merged with a reshape below,
 * or src itself when the shapes match). */
static int as_reshape(ljg_rewriter *rw, const ljg_gnode *n, int32_t src) {
  ljg_gnode r = *n;
  memset(&r.attr, 0, sizeof r.attr);
  r.op = LJG_OP_RESHAPE;
  return simplify(rw, &r, &src);
}

static int simplify(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_graph *g = &rw->out;
  const ljg_gnode *x = n->nin ? &g->nodes[in[0]] : NULL;
  bool isint = !ljg_dtype_is_float(n->dtype);
  switch (n->op) {
  case LJG_OP_RESHAPE:
  case LJG_OP_EXPAND:
    if (same_shape(x, n)) return in[0];
    if (x->op == n->op) {
      int32_t src = ljg_in(g, x)[0];
      if (same_shape(&g->nodes[src], n)) return src;
      ljg_gnode m = *n;
      return ljg_rw_add(rw, &m, &src);
    }
    break;
  case LJG_OP_PERMUTE: {
    if (keeps_order(n, n->attr.a)) return as_reshape(rw, n, in[0]);
    if (x->op == LJG_OP_RESHAPE) {
      int r = permute_below_reshape(rw, n, in[0]);
      if (r >= 0) return r;
    }
    if (x->op != LJG_OP_PERMUTE) break;
    ljg_gnode m = *n;
    for (int d = 0; d < n->ndim; d++) m.attr.a[d] = x->attr.a[n->attr.a[d]];
    int32_t src = ljg_in(g, x)[0];
    return keeps_order(n, m.attr.a) ? as_reshape(rw, n, src) : ljg_rw_add(rw, &m, &src);
  }
  case LJG_OP_SLICE: {
    int dim = (int)n->attr.a[0];
    if (n->attr.a[1] == 0 && n->attr.a[2] == 1 && n->shape[dim] == x->shape[dim]) return in[0];
    int32_t src = x->op == LJG_OP_EXPAND ? ljg_in(g, x)[0] : -1;
    if (src >= 0 && g->nodes[src].shape[dim] == 1) { /* a slice of a broadcast dim */
      ljg_gnode m = *n;
      memset(&m.attr, 0, sizeof m.attr);
      m.op = LJG_OP_EXPAND;
      return simplify(rw, &m, &src);
    }
    break;
  }
  case LJG_OP_CAST:
    if (x->dtype == n->dtype) return in[0];
    break;
  case LJG_OP_STOP_GRADIENT: return in[0]; /* only autograd reads it */
  case LJG_OP_GATHER: {
    int r = gather_below_op(rw, n, in);
    if (r >= 0) return r;
    break;
  }
  case LJG_OP_SUM: {
    int r = sum_of_one_hot(rw, n, in);
    if (r < 0) r = sum_of_scaled(rw, n, in);
    if (r >= 0) return r;
    break;
  }
  case LJG_OP_SCATTER_ADD: {
    int r = scatter_as_select(rw, n, in);
    if (r >= 0) return r;
    break;
  }
  case LJG_OP_IM2COL:
  case LJG_OP_COL2IM:
    if (one_by_one(n)) {
      ljg_gnode m = *n;
      memset(&m.attr, 0, sizeof m.attr);
      m.op = LJG_OP_RESHAPE;
      return ljg_rw_add(rw, &m, in);
    }
    break;
  case LJG_OP_NEG:
    if (x->op == LJG_OP_NEG) return ljg_in(g, x)[0];
    break;
  case LJG_OP_MUL:
    if (is_const(g, in[1], 1)) return in[0];
    if (is_const(g, in[0], 1)) return in[1];
    break;
  case LJG_OP_DIV:
    if (is_const(g, in[1], 1)) return in[0];
    break;
  case LJG_OP_SUB:
    if (is_const(g, in[1], 0)) return in[0];
    break;
  case LJG_OP_ADD: {
    if (isint && is_const(g, in[1], 0)) return in[0];
    if (isint && is_const(g, in[0], 0)) return in[1];
    int r = add_of_cats(rw, n, in);
    if (r >= 0) return r;
    break;
  }
  default: break;
  }
  return ljg_rw_add(rw, n, in);
}

void ljg_pass_simplify(ljg_graph *g) {
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  int32_t small[8];
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    int32_t *in = n->nin <= 8 ? small : ljb_xalloc((size_t)n->nin * sizeof *in);
    const int32_t *oin = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) in[k] = rw.map[oin[k]];
    rw.map[i] = simplify(&rw, n, in);
    if (in != small) free(in);
  }
  ljg_rw_finish(&rw, g);
}
