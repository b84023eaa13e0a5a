/* autograd.c — reverse-mode differentiation of the pending graph.
 *
 * Tensors only carry a requires_grad flag; there is no tape. lj_backward(loss) walks the
 * pending graph below the loss, stopping at the nodes of tensors that require grad (the
 * leaves), at device data, at stop_gradient and at random/iota leaves. A node needs a
 * gradient when a leaf lies below it. Walking back in reverse post-order, each node's
 * gradient is turned into its operands' gradients by the op's vector-Jacobian product (vjp()
 * below), written with the same graph nodes ops record — so the backward pass is more nodes
 * in the same pending graph, and forward, backward and optimizer update compile into one
 * executable at the next sync. Composite ops (matmul's reshapes and expands, softmax, batch
 * norm, conv's im2col + matmul) need no rules of their own.
 *
 * Adding a differentiable op: a case in vjp() giving each operand's gradient from n (the
 * node: its operands and its value) and g (the gradient of n). Broadcasting needs no care:
 * elementwise operands have the node's shape, and expand's vjp sums. */
#include "frontend/frontend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- node helpers ------------------------------------------------------------------------ */

static ljg_node *mk(struct lj_device *d, ljg_op op, lj_dtype dt, const ljg_node *shape_of, int nin,
                    ljg_node *const *in, const ljg_attr *a) {
  return ljg_node_make(&d->trace, op, dt, shape_of->ndim, shape_of->shape, nin, in, a);
}

/* A constant v of dtype dt broadcast to the shape of `like`. */
static ljg_node *constant(struct lj_device *d, lj_dtype dt, double v, const ljg_node *like) {
  ljg_attr a = {0};
  a.f = v;
  ljg_node *c = ljg_node_make(&d->trace, LJG_OP_CONST, dt, 0, NULL, 0, NULL, &a);
  return ljf_expand_node(d, c, like->ndim, like->shape);
}

static ljg_node *zeros_like(struct lj_device *d, const ljg_node *n) { return constant(d, n->dtype, 0, n); }

static ljg_node *un(struct lj_device *d, ljg_op op, ljg_node *a) { return mk(d, op, a->dtype, a, 1, &a, NULL); }

static ljg_node *bin(struct lj_device *d, ljg_op op, ljg_node *a, ljg_node *b) {
  ljg_node *in[2] = {a, b};
  return mk(d, op, a->dtype, a, 2, in, NULL);
}

static ljg_node *cmp(struct lj_device *d, ljg_op op, ljg_node *a, ljg_node *b) {
  ljg_node *in[2] = {a, b};
  return mk(d, op, LJ_BOOL, a, 2, in, NULL);
}

static ljg_node *where(struct lj_device *d, ljg_node *c, ljg_node *a, ljg_node *b) {
  ljg_node *in[3] = {c, a, b};
  return mk(d, LJG_OP_WHERE, a->dtype, a, 3, in, NULL);
}

static ljg_node *mul_c(struct lj_device *d, ljg_node *a, double v) {
  return bin(d, LJG_OP_MUL, a, constant(d, a->dtype, v, a));
}

static ljg_node *add_c(struct lj_device *d, ljg_node *a, double v) {
  return bin(d, LJG_OP_ADD, a, constant(d, a->dtype, v, a));
}

static ljg_node *reduce(struct lj_device *d, ljg_op op, ljg_node *x, uint64_t mask) {
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  for (int i = 0; i < x->ndim; i++)
    if (mask >> i & 1) shape[i] = 1;
  ljg_attr a = {0};
  a.a[0] = (int64_t)mask;
  return ljg_node_make(&d->trace, op, x->dtype, x->ndim, shape, 1, &x, &a);
}

/* Concatenates the non-empty parts along dim. */
static ljg_node *cat(struct lj_device *d, int n, ljg_node **parts, int dim) {
  ljg_node *keep[8];
  int k = 0;
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, parts[0]->shape, sizeof shape);
  shape[dim] = 0;
  for (int i = 0; i < n; i++) {
    shape[dim] += parts[i]->shape[dim];
    if (parts[i]->shape[dim] > 0) keep[k++] = parts[i];
  }
  if (k == 1) return keep[0];
  ljg_attr a = {0};
  a.a[0] = dim;
  return ljg_node_make(&d->trace, LJG_OP_CAT, parts[0]->dtype, parts[0]->ndim, shape, k, keep, &a);
}

/* zeros of x's shape with size `len` along dim */
static ljg_node *zeros_along(struct lj_device *d, const ljg_node *x, int dim, int64_t len) {
  ljg_node like = *x;
  like.shape[dim] = len;
  return constant(d, x->dtype, 0, &like);
}

/* ---- vector-Jacobian products ---------------------------------------------------------------- */

/* The gradient of slice(x) placed back into x's shape: zeros elsewhere. */
static ljg_node *unslice(struct lj_device *d, const ljg_node *x, const ljg_node *n, ljg_node *g) {
  int dim = (int)n->attr.a[0];
  int64_t start = n->attr.a[1], step = n->attr.a[2], len = n->shape[dim], size = x->shape[dim];
  ljg_node *body = g;
  int64_t span = len;
  if (step > 1 && len > 0) {
    /* interleave step-1 zeros after each element: [.., len, ..] -> [.., len, step, ..] */
    LJ_ASSERT(g->ndim < LJ_MAX_DIMS);
    int64_t shape[LJ_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < g->ndim; i++) {
      shape[nd++] = g->shape[i];
      if (i == dim) shape[nd++] = 1;
    }
    ljg_node *col = ljf_reshape_node(d, g, nd, shape);
    ljg_node *parts[2] = {col, zeros_along(d, col, dim + 1, step - 1)};
    ljg_node *wide = cat(d, 2, parts, dim + 1);
    int64_t flat[LJ_MAX_DIMS];
    memcpy(flat, g->shape, sizeof flat);
    flat[dim] = len * step;
    span = len * step < size - start ? len * step : size - start;
    body = ljf_slice_node(d, ljf_reshape_node(d, wide, g->ndim, flat), dim, 0, span, 1);
  }
  ljg_node *parts[3] = {zeros_along(d, body, dim, start), body, zeros_along(d, body, dim, size - start - span)};
  return cat(d, 3, parts, dim);
}

/* Gradient of prod: g * (product of the others), exact when some inputs are zero. */
static ljg_node *prod_vjp(struct lj_device *d, ljg_node *x, ljg_node *n, ljg_node *g) {
  uint64_t mask = (uint64_t)n->attr.a[0];
  ljg_node *zero = zeros_like(d, x), *one = constant(d, x->dtype, 1, x);
  ljg_node *iszero = cmp(d, LJG_OP_EQ, x, zero);
  ljg_node *nonzero = where(d, iszero, one, x);
  ljg_node *pnz = ljf_expand_node(d, reduce(d, LJG_OP_PROD, nonzero, mask), x->ndim, x->shape);
  ljg_node *count = reduce(d, LJG_OP_SUM, ljf_cast(d, iszero, x->dtype), mask);
  count = ljf_expand_node(d, count, x->ndim, x->shape);
  ljg_node *no_zero = cmp(d, LJG_OP_EQ, count, zero);
  ljg_node *one_zero = cmp(d, LJG_OP_EQ, count, one);
  ljg_node *others = where(d, no_zero, bin(d, LJG_OP_DIV, pnz, nonzero),
                           where(d, iszero, where(d, one_zero, pnz, zero), zero));
  return bin(d, LJG_OP_MUL, ljf_expand_node(d, g, x->ndim, x->shape), others);
}

static ljg_node *matmul(struct lj_device *d, ljg_node *a, ljg_node *b) {
  ljg_node *in[2] = {a, b};
  int64_t shape[3] = {a->shape[0], a->shape[1], b->shape[2]};
  return ljg_node_make(&d->trace, LJG_OP_MATMUL, a->dtype, 3, shape, 2, in, NULL);
}

static ljg_node *window(struct lj_device *d, ljg_op op, ljg_node *x, const ljg_node *like, const ljg_attr *a) {
  return ljg_node_make(&d->trace, op, x->dtype, like->ndim, like->shape, 1, &x, a);
}

static ljg_node *gelu_tanh_vjp(struct lj_device *d, ljg_node *x, ljg_node *g) {
  const double beta = 0.7978845608028654, kappa = 0.044715;
  ljg_node *x2 = bin(d, LJG_OP_MUL, x, x);
  ljg_node *inner = mul_c(d, bin(d, LJG_OP_ADD, x, mul_c(d, bin(d, LJG_OP_MUL, x2, x), kappa)), beta);
  ljg_node *t = un(d, LJG_OP_TANH, inner);
  ljg_node *left = mul_c(d, x, 0.5), *right = add_c(d, t, 1);
  ljg_node *dright = mul_c(d, add_c(d, mul_c(d, x2, 3 * kappa), 1), beta);
  dright = bin(d, LJG_OP_MUL, bin(d, LJG_OP_MUL, left, bin(d, LJG_OP_SUB, constant(d, x->dtype, 1, x), bin(d, LJG_OP_MUL, t, t))), dright);
  return bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_ADD, mul_c(d, right, 0.5), dright));
}

/* The gradient of relu node n when g, all of its output's gradient, is a max-pool's over that
 * output (lj_max_pool2d's vjp: col2im of the pooled gradient scattered to each window's
 * argmax); NULL otherwise. Every element g gets comes from windows whose maximum is that
 * element, so it is positive exactly where those windows' maxima are: the relu's mask goes on
 * the pooled gradient, before the scatter, where it reads the pool's output (the forward's
 * node) instead of a pass of its own over the whole image (ResNet's stem at batch 8, 6.4M
 * elements). The same sums in the same order; a window whose maximum is NaN or 0 passes
 * nothing, as the mask passed nothing at its element. */
static ljg_node *relu_of_max_pool(struct lj_device *d, ljg_node *n, ljg_node *g) {
  if (g->op != LJG_OP_COL2IM || g->in[0]->op != LJG_OP_RESHAPE) return NULL;
  ljg_node *s = g->in[0]->in[0];
  if (s->op != LJG_OP_SCATTER_ADD || s->attr.a[0] != 2) return NULL;
  ljg_node *at = s->in[1];
  if (at->op != LJG_OP_ARGMAX) return NULL;
  ljg_node *cols = at->in[0];
  if (cols->op != LJG_OP_RESHAPE || cols->in[0]->op != LJG_OP_IM2COL) return NULL;
  const ljg_node *im = cols->in[0];
  if (im->in[0] != n || memcmp(im->attr.a, g->attr.a, sizeof g->attr.a) != 0) return NULL;
  ljg_node *pick[2] = {cols, at};
  ljg_node *y = mk(d, LJG_OP_GATHER, n->dtype, at, 2, pick, &s->attr); /* the pool's output */
  ljg_node *gp = s->in[2];
  ljg_node *in[3] = {s->in[0], at, where(d, cmp(d, LJG_OP_GT, y, zeros_like(d, y)), gp, zeros_like(d, gp))};
  ljg_node *masked = mk(d, LJG_OP_SCATTER_ADD, s->dtype, s, 3, in, &s->attr);
  return window(d, LJG_OP_COL2IM, ljf_reshape_node(d, masked, g->in[0]->ndim, g->in[0]->shape), g, &g->attr);
}

/* gin[k] = the gradient of operand k of n, given g = the gradient of n (NULL: none). */
static void vjp(struct lj_device *d, ljg_node *n, ljg_node *g, ljg_node **gin) {
  ljg_node *x = n->nin > 0 ? n->in[0] : NULL, *y = n->nin > 1 ? n->in[1] : NULL;
  switch ((ljg_op)n->op) {
  /* unary */
  case LJG_OP_NEG: gin[0] = un(d, LJG_OP_NEG, g); break;
  case LJG_OP_ABS: gin[0] = bin(d, LJG_OP_MUL, g, un(d, LJG_OP_SIGN, x)); break;
  case LJG_OP_EXP: gin[0] = bin(d, LJG_OP_MUL, g, n); break;
  case LJG_OP_LOG: gin[0] = bin(d, LJG_OP_DIV, g, x); break;
  case LJG_OP_LOG1P: gin[0] = bin(d, LJG_OP_DIV, g, add_c(d, x, 1)); break;
  case LJG_OP_EXPM1: gin[0] = bin(d, LJG_OP_MUL, g, add_c(d, n, 1)); break;
  case LJG_OP_SQRT: gin[0] = bin(d, LJG_OP_DIV, g, mul_c(d, n, 2)); break;
  case LJG_OP_RSQRT:
    gin[0] = bin(d, LJG_OP_MUL, g, mul_c(d, bin(d, LJG_OP_MUL, n, bin(d, LJG_OP_MUL, n, n)), -0.5));
    break;
  case LJG_OP_SIN: gin[0] = bin(d, LJG_OP_MUL, g, un(d, LJG_OP_COS, x)); break;
  case LJG_OP_COS: gin[0] = un(d, LJG_OP_NEG, bin(d, LJG_OP_MUL, g, un(d, LJG_OP_SIN, x))); break;
  case LJG_OP_TANH:
    gin[0] = bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_SUB, constant(d, n->dtype, 1, n), bin(d, LJG_OP_MUL, n, n)));
    break;
  case LJG_OP_SIGMOID:
    gin[0] = bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_MUL, n, bin(d, LJG_OP_SUB, constant(d, n->dtype, 1, n), n)));
    break;
  case LJG_OP_RELU:
    gin[0] = relu_of_max_pool(d, n, g);
    if (!gin[0]) gin[0] = where(d, cmp(d, LJG_OP_GT, n, zeros_like(d, n)), g, zeros_like(d, g));
    break;
  case LJG_OP_GELU: {
    /* Phi(x) + x phi(x) */
    ljg_node *cdf = mul_c(d, add_c(d, un(d, LJG_OP_ERF, mul_c(d, x, M_SQRT1_2)), 1), 0.5);
    ljg_node *pdf = mul_c(d, un(d, LJG_OP_EXP, mul_c(d, bin(d, LJG_OP_MUL, x, x), -0.5)), 0.3989422804014327);
    gin[0] = bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_ADD, cdf, bin(d, LJG_OP_MUL, x, pdf)));
    break;
  }
  case LJG_OP_GELU_TANH: gin[0] = gelu_tanh_vjp(d, x, g); break;
  case LJG_OP_SILU: {
    ljg_node *s = un(d, LJG_OP_SIGMOID, x);
    ljg_node *t = add_c(d, bin(d, LJG_OP_MUL, x, bin(d, LJG_OP_SUB, constant(d, x->dtype, 1, x), s)), 1);
    gin[0] = bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_MUL, s, t));
    break;
  }
  case LJG_OP_ERF:
    gin[0] = bin(d, LJG_OP_MUL, g, mul_c(d, un(d, LJG_OP_EXP, un(d, LJG_OP_NEG, bin(d, LJG_OP_MUL, x, x))), 1.1283791670955126));
    break;
  case LJG_OP_RECIPROCAL: gin[0] = un(d, LJG_OP_NEG, bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_MUL, n, n))); break;
  case LJG_OP_FLOOR:
  case LJG_OP_CEIL:
  case LJG_OP_ROUND:
  case LJG_OP_SIGN: gin[0] = zeros_like(d, x); break;
  case LJG_OP_CAST:
    if (ljg_dtype_is_float(x->dtype) && ljg_dtype_is_float(n->dtype)) gin[0] = ljf_cast(d, g, x->dtype);
    break;
  /* binary */
  case LJG_OP_ADD: gin[0] = g, gin[1] = g; break;
  case LJG_OP_SUB: gin[0] = g, gin[1] = un(d, LJG_OP_NEG, g); break;
  case LJG_OP_MUL: gin[0] = bin(d, LJG_OP_MUL, g, y), gin[1] = bin(d, LJG_OP_MUL, g, x); break;
  case LJG_OP_DIV:
    gin[0] = bin(d, LJG_OP_DIV, g, y);
    gin[1] = un(d, LJG_OP_NEG, bin(d, LJG_OP_DIV, bin(d, LJG_OP_MUL, g, n), y));
    break;
  case LJG_OP_POW: {
    ljg_node *zero = zeros_like(d, x);
    ljg_node *da = bin(d, LJG_OP_MUL, y, bin(d, LJG_OP_POW, x, add_c(d, y, -1)));
    gin[0] = bin(d, LJG_OP_MUL, g, where(d, cmp(d, LJG_OP_EQ, y, zero), zero, da));
    ljg_node *in2[2] = {cmp(d, LJG_OP_EQ, x, zero), cmp(d, LJG_OP_GE, y, zero)};
    ljg_node *at_zero = mk(d, LJG_OP_LOGICAL_AND, LJ_BOOL, x, 2, in2, NULL);
    gin[1] = bin(d, LJG_OP_MUL, g, where(d, at_zero, zero, bin(d, LJG_OP_MUL, n, un(d, LJG_OP_LOG, x))));
    break;
  }
  case LJG_OP_MAXIMUM:
  case LJG_OP_MINIMUM: {
    /* ties split the gradient, as PyTorch does */
    ljg_node *zero = zeros_like(d, g), *half = mul_c(d, g, 0.5);
    ljg_node *tie = where(d, cmp(d, LJG_OP_EQ, x, y), half, g);
    ljg_op lose0 = n->op == LJG_OP_MAXIMUM ? LJG_OP_LT : LJG_OP_GT;
    ljg_op lose1 = n->op == LJG_OP_MAXIMUM ? LJG_OP_GT : LJG_OP_LT;
    gin[0] = where(d, cmp(d, lose0, x, y), zero, tie);
    gin[1] = where(d, cmp(d, lose1, x, y), zero, tie);
    break;
  }
  case LJG_OP_REMAINDER:
    gin[0] = g;
    gin[1] = un(d, LJG_OP_NEG, bin(d, LJG_OP_MUL, g, bin(d, LJG_OP_DIV_FLOOR, x, y)));
    break;
  case LJG_OP_DIV_TRUNC:
  case LJG_OP_DIV_FLOOR:
    if (ljg_dtype_is_float(n->dtype)) gin[0] = zeros_like(d, x), gin[1] = zeros_like(d, y);
    break;
  case LJG_OP_WHERE: {
    ljg_node *c = n->in[0], *zero = zeros_like(d, g);
    gin[1] = where(d, c, g, zero);
    gin[2] = where(d, c, zero, g);
    break;
  }
  /* views */
  case LJG_OP_RESHAPE: gin[0] = ljf_reshape_node(d, g, x->ndim, x->shape); break;
  case LJG_OP_PERMUTE: {
    int64_t inv[LJ_MAX_DIMS];
    for (int i = 0; i < n->ndim; i++) inv[n->attr.a[i]] = i;
    gin[0] = ljf_permute_node(d, g, inv);
    break;
  }
  case LJG_OP_EXPAND: {
    uint64_t mask = 0;
    for (int i = 0; i < n->ndim; i++)
      if (x->shape[i] == 1 && n->shape[i] != 1) mask |= 1ULL << i;
    gin[0] = mask ? reduce(d, LJG_OP_SUM, g, mask) : g;
    break;
  }
  case LJG_OP_SLICE: gin[0] = unslice(d, x, n, g); break;
  case LJG_OP_CAT: {
    int dim = (int)n->attr.a[0];
    int64_t off = 0;
    for (int k = 0; k < n->nin; k++) {
      gin[k] = ljf_slice_node(d, g, dim, off, n->in[k]->shape[dim], 1);
      off += n->in[k]->shape[dim];
    }
    break;
  }
  /* reductions */
  case LJG_OP_SUM: gin[0] = ljf_expand_node(d, g, x->ndim, x->shape); break;
  case LJG_OP_MEAN: {
    double count = (double)ljg_numel(x->ndim, x->shape) / (double)ljg_numel(n->ndim, n->shape);
    gin[0] = ljf_expand_node(d, mul_c(d, g, 1.0 / count), x->ndim, x->shape);
    break;
  }
  case LJG_OP_PROD: gin[0] = prod_vjp(d, x, n, g); break;
  case LJG_OP_AMAX:
  case LJG_OP_AMIN: {
    /* split evenly among the elements equal to the extreme */
    ljg_node *hit = ljf_cast(d, cmp(d, LJG_OP_EQ, x, ljf_expand_node(d, n, x->ndim, x->shape)), x->dtype);
    ljg_node *count = reduce(d, LJG_OP_SUM, hit, (uint64_t)n->attr.a[0]);
    ljg_node *share = bin(d, LJG_OP_DIV, g, count);
    gin[0] = bin(d, LJG_OP_MUL, hit, ljf_expand_node(d, share, x->ndim, x->shape));
    break;
  }
  case LJG_OP_MATMUL: {
    static const int64_t swap[3] = {0, 2, 1};
    gin[0] = matmul(d, g, ljf_permute_node(d, y, swap));
    gin[1] = matmul(d, ljf_permute_node(d, x, swap), g);
    break;
  }
  case LJG_OP_IM2COL: {
    /* col2im accumulates: 16-bit floats add in f32 */
    lj_dtype acc = x->dtype == LJ_BF16 || x->dtype == LJ_F16 ? LJ_F32 : x->dtype;
    ljg_attr a = n->attr;
    a.f = 0;
    ljg_node *gc = ljf_cast(d, g, acc);
    ljg_node like = *x;
    like.dtype = (uint8_t)acc;
    gin[0] = ljf_cast(d, window(d, LJG_OP_COL2IM, gc, &like, &a), x->dtype);
    break;
  }
  case LJG_OP_COL2IM: {
    ljg_attr a = n->attr;
    a.f = 0;
    gin[0] = window(d, LJG_OP_IM2COL, g, x, &a);
    break;
  }
  case LJG_OP_GATHER: {
    ljg_node *in[3] = {zeros_like(d, x), y, g};
    gin[0] = mk(d, LJG_OP_SCATTER_ADD, x->dtype, x, 3, in, &n->attr);
    break;
  }
  case LJG_OP_SCATTER_ADD: {
    ljg_node *in[2] = {g, y};
    gin[0] = g;
    gin[2] = mk(d, LJG_OP_GATHER, g->dtype, y, 2, in, &n->attr);
    break;
  }
  default: break; /* leaves, comparisons, logic, argmax, index checks, stop_gradient */
  }
}

/* ---- the backward walk ------------------------------------------------------------------------ */

/* Pointer set (open addressing) of the nodes of tensors that require grad. */
typedef struct leaf_set {
  ljg_node **slots;
  int cap;
} leaf_set;

static int leaf_slot(const leaf_set *s, const ljg_node *n) {
  int i = (int)(ljb_mix64((uint64_t)(uintptr_t)n) & (uint64_t)(s->cap - 1));
  while (s->slots[i] && s->slots[i] != n) i = (i + 1) & (s->cap - 1);
  return i;
}

static bool is_leaf(const leaf_set *s, const ljg_node *n) { return s->slots[leaf_slot(s, n)] == n; }

/* Whether the walk stops at n: it is constant for autograd. */
static bool stops(const leaf_set *leaves, const ljg_node *n) {
  return is_leaf(leaves, n) || n->data || ljg_op_blocks_grad(n->op, (lj_dtype)n->dtype);
}

typedef struct frame {
  ljg_node *node;
  int next;
} frame;

lj_status lj_backward(lj_tensor *loss) {
  static const char *name = "lj_backward";
  if (!ljf_arg(name, "loss", loss)) return lj_last_status();
  if (!ljg_dtype_is_float(loss->dtype)) {
    ljb_error(LJ_ERR_DTYPE, "%s: the loss must be a float tensor, not %s", name, lj_dtype_name(loss->dtype));
    return LJ_ERR_DTYPE;
  }
  if (lj_tensor_numel(loss) != 1) {
    char s[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: the loss must have one element (it has shape %s)", name,
              ljb_shape_str(s, loss->ndim, loss->shape));
    return LJ_ERR_SHAPE;
  }
  struct lj_device *d = loss->dev;
  /* the leaves: every live tensor that requires grad */
  leaf_set leaves = {NULL, 64};
  int nleaf = 0;
  for (lj_tensor *t = d->live_head; t; t = t->next) nleaf += t->requires_grad;
  while (leaves.cap < 4 * nleaf + 4) leaves.cap *= 2;
  leaves.slots = ljb_xcalloc((size_t)leaves.cap, sizeof *leaves.slots);
  for (lj_tensor *t = d->live_head; t; t = t->next)
    if (t->requires_grad) {
      ljg_node *n = ljf_node(t);
      leaves.slots[leaf_slot(&leaves, n)] = n;
    }
  /* post-order walk from the loss; needs[i]: a leaf lies below node i */
  LJB_VEC(ljg_node *) order = {0};
  LJB_VEC(bool) needs = {0};
  LJB_VEC(frame) stack = {0};
  ljg_node *lost = NULL; /* a value a sync computed from the leaves, met on the way */
  uint64_t stamp = ++d->trace.walk;
  ljg_node *root = ljf_node(loss);
  ljb_vec_push(&stack, ((frame){root, 0}));
  while (stack.n) {
    frame *f = &stack.a[stack.n - 1];
    ljg_node *nd = f->node;
    if (!stops(&leaves, nd) && f->next < nd->nin) {
      ljg_node *c = nd->in[f->next++];
      if (c->walk != stamp) ljb_vec_push(&stack, ((frame){c, 0}));
      continue;
    }
    stack.n--;
    if (nd->walk == stamp) continue;
    nd->walk = stamp;
    nd->index = order.n;
    if (!lost && nd != root && nd->grad_lost && !is_leaf(&leaves, nd)) lost = nd;
    bool need = is_leaf(&leaves, nd);
    if (!stops(&leaves, nd))
      for (int k = 0; k < nd->nin; k++) need |= needs.a[nd->in[k]->index];
    ljb_vec_push(&order, nd);
    ljb_vec_push(&needs, need);
  }
  lj_status st = LJ_OK;
  if (lost) {
    /* PyTorch/XLA keeps the graph across mark_step; here a sync leaves a value only, and the
     * gradient that would flow through it is lost: an error rather than a partial gradient */
    char s[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_ARG, "%s: the loss depends on a %s%s value that a sync or read computed from tensors that "
              "require grad before lj_backward: it keeps its value only, so the gradient through it would be "
              "lost (record lj_backward before syncing or reading it, or lj_detach it to use it as a constant)",
              name, lj_dtype_name((lj_dtype)lost->dtype), ljb_shape_str(s, lost->ndim, lost->shape));
    st = LJ_ERR_ARG;
  } else if (!needs.a[root->index]) {
    /* PyTorch's "does not require grad and does not have a grad_fn"; a loss read or synced
     * before has a value and no graph left to walk back through */
    ljb_error(LJ_ERR_ARG, "%s: the loss depends on no tensor that requires grad (a loss read or synced before "
              "lj_backward keeps its value only: record lj_backward first, then read it)", name);
    st = LJ_ERR_ARG;
  }
  /* gradients in reverse post-order, recorded as constants for later backward passes (as
   * PyTorch's without create_graph) */
  ljg_node **grads = ljb_xcalloc((size_t)order.n + 1, sizeof *grads);
  if (st == LJ_OK) grads[root->index] = constant(d, root->dtype, 1, root);
  d->trace.no_grad = true;
  for (int i = order.n - 1; i >= 0; i--) {
    ljg_node *nd = order.a[i];
    if (!grads[i] || stops(&leaves, nd)) continue;
    ljg_node *small[4] = {0};
    ljg_node **gin = nd->nin <= 4 ? small : ljb_xcalloc((size_t)nd->nin, sizeof *gin);
    vjp(d, nd, grads[i], gin);
    for (int k = 0; k < nd->nin; k++) {
      ljg_node *c = nd->in[k];
      if (!gin[k] || c->walk != stamp || !needs.a[c->index]) continue;
      grads[c->index] = grads[c->index] ? bin(d, LJG_OP_ADD, grads[c->index], gin[k]) : gin[k];
    }
    if (gin != small) free(gin);
  }
  /* accumulate into the leaves' .grad */
  for (lj_tensor *t = d->live_head; t; t = t->next) {
    if (!t->requires_grad) continue;
    ljg_node *n = ljf_node(t);
    if (n->walk != stamp || !grads[n->index]) continue;
    ljg_node *g = ljf_cast(d, grads[n->index], t->dtype);
    if (t->grad) {
      ljg_node *acc = bin(d, LJG_OP_ADD, ljf_node(t->grad), g);
      lj_tensor_release(t->grad);
      g = acc;
    }
    t->grad = ljf_tensor_unscoped(d, g);
  }
  d->trace.no_grad = false;
  free(grads);
  ljb_vec_free(&order);
  ljb_vec_free(&needs);
  ljb_vec_free(&stack);
  free(leaves.slots);
  return st;
}

/* ---- tensor flags ------------------------------------------------------------------------------ */

/* Gives leaf t a node of its own. Ops are hash-consed, so two tensors made alike (two
 * lj_ones of one shape, a layer norm's weights) are one node and then share one buffer; as
 * leaves, each would get the sum of both's gradients. A pending t, or one whose buffer another
 * live tensor holds, becomes t·s for a scalar parameter s = 1 (a scalar parameter is never
 * shared, and x·1 is x for every x), which the next sync computes into a buffer of t's own. */
static void own_node(lj_tensor *t) {
  struct lj_device *d = t->dev;
  bool shared = ljf_pending(t);
  for (lj_tensor *u = d->live_head; u && !shared; u = u->next) shared = u != t && u->buf == t->buf;
  if (!shared) return;
  ljg_node *in[2] = {ljf_node(t), ljg_node_scalar(&d->trace, t->dtype, 1, 0)};
  in[1] = ljf_expand_node(d, in[1], t->ndim, t->shape);
  t->node = ljg_node_make(&d->trace, LJG_OP_MUL, t->dtype, t->ndim, t->shape, 2, in, NULL);
  t->epoch = d->trace.epoch;
  t->donor = NULL;
  ljr_buffer_release(t->buf);
  t->buf = NULL;
}

lj_status lj_tensor_set_requires_grad(lj_tensor *t, bool on) {
  if (!ljf_arg("lj_tensor_set_requires_grad", "t", t)) return lj_last_status();
  if (on && !ljg_dtype_is_float(t->dtype)) {
    ljb_error(LJ_ERR_DTYPE, "lj_tensor_set_requires_grad: only float tensors can require gradients, not %s",
              lj_dtype_name(t->dtype));
    return LJ_ERR_DTYPE;
  }
  if (on && !t->requires_grad) own_node(t);
  t->requires_grad = on;
  return LJ_OK;
}

bool lj_tensor_requires_grad(const lj_tensor *t) { return t && t->requires_grad; }

lj_tensor *lj_tensor_grad(const lj_tensor *t) { return t ? t->grad : NULL; }

void lj_tensor_zero_grad(lj_tensor *t) {
  if (!t) return;
  lj_tensor_release(t->grad);
  t->grad = NULL;
}

lj_tensor *lj_detach(lj_tensor *t) {
  if (!ljf_arg("lj_detach", "t", t)) return NULL;
  ljg_node *x = ljf_node(t);
  return ljf_tensor_from_node(t->dev, un(t->dev, LJG_OP_STOP_GRADIENT, x));
}
