/* fuse.c — fusion: from an optimized graph to kernels over buffer slots.
 *
 * 1. Decide which nodes are realized (computed into a buffer by a kernel of their own):
 *    roots, reductions, cat, matmul, windows (im2col/col2im), gather/scatter, and elementwise
 *    nodes used more than once (counting uses through views). A root that is a reshape of
 *    another node shares that node's buffer (storage is contiguous and immutable), so it costs
 *    no copy. Matmul, window and gather operands must be buffers read through one strided
 *    view, so their producers are realized too; so is an expensive expression that an expand
 *    would recompute for every broadcast element, and a transposed B that several products of
 *    few rows read (stored contiguous for them to read in place). Everything else is fused
 *    into its consumers. With LJ_DISABLE_FUSION every non-leaf node is realized: one kernel
 *    per op.
 * 2. Build each realized node's kernel: walk down from it, turning fused nodes into kernel
 *    expressions. View ops are not computed: they are collected along the walk and applied,
 *    bottom-up, to the view of the buffer (or index) they reach (view.c), so a transpose or a
 *    broadcast becomes strides in a load. A (node, view path) pair is built once per kernel.
 * 3. Normalize each single-nest kernel's loops: reduced dims last, size-1 dims dropped, and
 *    neighbouring dims merged when every access is contiguous across them — an elementwise
 *    kernel over contiguous buffers becomes a single loop, whatever the rank. (Gather and
 *    scatter kernels keep their dims: the indexed dim must stay a loop of its own.)
 * 4. Row fusion (fuse_rows.c) joins neighbouring kernels over the same rows.
 * Roots with a donor are then made to work in place where they can (donate.c), and the buffer
 * plan (plan.c) places intermediates in the scratch arena. */
#include "graph/graph.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct path_entry {
  int32_t node;   /* a view node */
  int32_t parent; /* the path above it (toward the kernel root); 0 is the empty path */
} path_entry;

typedef struct fuser {
  const ljg_graph *g;
  const ljg_fuse_options *opt;
  bool *realized, *is_root;
  int32_t *root_src;  /* for a root: the node below its reshapes, whose buffer it shares */
  int32_t *eff;    /* uses of each node, counting through views */
  int32_t *pslot;  /* parameter slot of DATA/SCALAR nodes */
  int32_t *oslot;  /* slot a realized node's kernel writes */
  int32_t *cols;   /* for a matmul: the im2col node it reads implicitly (implicit_cols), or -1 */
  bool *bf16;      /* for a matmul: it reads its operands' bf16 buffers (bf16_operands) */
  bool *winograd_dx; /* for a matmul: a col2im that Winograd's routine takes reads it (winograd_dx) */
  uint8_t *cols_op; /* ... as that operand (ljg_mm_cols) */
  LJB_VEC(ljg_slot) slots;
  LJB_VEC(ljg_kernel) kernels;
  /* the kernel being built */
  LJB_VEC(ljg_kexpr) exprs;
  LJB_VEC(ljg_view) views;
  LJB_VEC(ljg_nest) nests;
  LJB_VEC(path_entry) paths;
  uint64_t *mkeys; /* memo of (node, path) -> expr and of (view node, parent) -> path */
  int32_t *mvals;
  int mcap, mcount;
  int32_t overflow; /* a node to realize because a view stack overflowed, or -1 */
} fuser;

/* ---- memo -------------------------------------------------------------------------------- */

static void memo_clear(fuser *f) {
  if (f->mkeys) memset(f->mkeys, 0, (size_t)f->mcap * sizeof *f->mkeys);
  f->mcount = 0;
}

static int32_t *memo_slot(fuser *f, uint64_t key) {
  if (2 * (f->mcount + 1) > f->mcap) {
    int ocap = f->mcap;
    uint64_t *okeys = f->mkeys;
    int32_t *ovals = f->mvals;
    f->mcap = ocap ? 2 * ocap : 256;
    f->mkeys = ljb_xcalloc((size_t)f->mcap, sizeof *f->mkeys);
    f->mvals = ljb_xalloc((size_t)f->mcap * sizeof *f->mvals);
    f->mcount = 0;
    for (int i = 0; i < ocap; i++)
      if (okeys[i]) {
        *memo_slot(f, okeys[i]) = ovals[i];
      }
    free(okeys);
    free(ovals);
  }
  int b = (int)(ljb_mix64(key) & (uint64_t)(f->mcap - 1));
  while (f->mkeys[b] && f->mkeys[b] != key) b = (b + 1) & (f->mcap - 1);
  if (!f->mkeys[b]) {
    f->mkeys[b] = key;
    f->mvals[b] = -1;
    f->mcount++;
  }
  return &f->mvals[b];
}

static uint64_t expr_key(int32_t node, int32_t path) {
  return ((uint64_t)(uint32_t)node << 32 | (uint32_t)path) + 1;
}

static uint64_t path_key(int32_t node, int32_t parent) {
  return (1ULL << 63) | ((uint64_t)(uint32_t)node << 31) | (uint32_t)parent;
}

static int32_t path_push(fuser *f, int32_t parent, int32_t view_node) {
  int32_t *v = memo_slot(f, path_key(view_node, parent));
  if (*v < 0) {
    *v = f->paths.n;
    ljb_vec_push(&f->paths, ((path_entry){view_node, parent}));
  }
  return *v;
}

/* ---- views ------------------------------------------------------------------------------- */

static int32_t add_view(fuser *f, const ljg_view *v) {
  for (int i = 0; i < f->views.n; i++)
    if (ljg_view_equal(&f->views.a[i], v)) return i;
  ljb_vec_push(&f->views, *v);
  return f->views.n - 1;
}

/* The view of node n (a buffer of n's shape, or an index leaf) seen from the kernel's
 * iteration space through `path`; -1 with f->overflow set when it needs too many levels. */
static int32_t make_view(fuser *f, int32_t path, const ljg_gnode *n) {
  ljg_view v;
  ljg_view_contiguous(&v, n->ndim, n->shape);
  for (int32_t p = path; p != 0; p = f->paths.a[p].parent) {
    const ljg_gnode *vn = &f->g->nodes[f->paths.a[p].node];
    if (!ljg_view_apply(&v, vn)) {
      if (f->overflow < 0) f->overflow = ljg_in(f->g, vn)[0];
      return -1;
    }
  }
  return add_view(f, &v);
}

/* ---- expressions ------------------------------------------------------------------------- */

static int32_t push_expr(fuser *f, const ljg_kexpr *x) {
  ljb_vec_push(&f->exprs, *x);
  return f->exprs.n - 1;
}

static int32_t build(fuser *f, int32_t i, int32_t path, bool root) {
  const ljg_graph *g = f->g;
  const ljg_gnode *n = &g->nodes[i];
  const int32_t *in = ljg_in(g, n);
  int32_t found = *memo_slot(f, expr_key(i, path));
  if (found >= 0) return found;
  ljg_kexpr x = {0};
  x.node = i;
  x.dtype = n->dtype;
  x.op = n->op;
  x.slot = x.view = -1;
  if (!root && (f->realized[i] || n->op == LJG_OP_DATA)) {
    x.kind = LJG_X_LOAD;
    x.slot = f->realized[i] ? f->oslot[i] : f->pslot[i];
    x.view = make_view(f, path, n);
  } else {
    switch (ljg_ops[n->op].kind) {
    case LJG_LEAF:
      if (n->op == LJG_OP_SCALAR) {
        x.kind = LJG_X_SCALAR;
        x.slot = f->pslot[i];
      } else {
        x.kind = LJG_X_CONST;
        x.value = n->attr.f;
      }
      break;
    case LJG_INDEXED:
      x.kind = LJG_X_INDEX;
      x.view = make_view(f, path, n);
      x.nin = (int8_t)n->nin;
      for (int k = 0; k < n->nin; k++) x.in[k] = build(f, in[k], 0, false);
      break;
    case LJG_ELEMWISE:
      x.kind = LJG_X_OP;
      x.nin = (int8_t)n->nin;
      if (n->op == LJG_OP_INDEX_CHECK) x.value = (double)n->attr.a[0];
      for (int k = 0; k < n->nin; k++) x.in[k] = build(f, in[k], path, false);
      break;
    case LJG_VIEW: {
      int32_t r = build(f, in[0], path_push(f, path, i), false);
      *memo_slot(f, expr_key(i, path)) = r;
      return r;
    }
    default: LJ_UNREACHABLE("reductions, cat and matmul are always realized");
    }
  }
  int32_t r = push_expr(f, &x);
  *memo_slot(f, expr_key(i, path)) = r;
  return r;
}

/* ---- realization ------------------------------------------------------------------------- */

/* Levels of the view of `src` seen through the view chain from `top` down to it. */
static int chain_levels(const ljg_graph *g, int32_t top, int32_t src) {
  ljg_view v;
  return ljg_chain_view(g, top, src, &v) ? v.n : LJG_MAX_VIEWS + 1;
}

/* Whether view v of a matmul's A, [B, M, K], is the matrices [G, M, K] of one level expanded
 * over the batch's leading N = B / G (G > 1): row-major [B, M, K] over [N, G, M, K] whose N has
 * stride 0 and G not (the routines number a repeating A's tasks matrix by matrix, not row by
 * row of a same A: ljc_gemm_rows_outer), as a grouped convolution's weight for the N·G
 * matrices of its images' groups; *out is then that one level, [G, M, K], and *period G
 * (ljg_kernel.mm_a_period). */
static bool period_view(const ljg_view *v, ljg_view *out, int64_t *period) {
  if (v->n != 2) return false;
  const ljg_view1 *top = &v->v[1], *below = &v->v[0];
  if (top->ndim != 3 || top->offset != 0 || !ljg_view1_walks(top, 3, top->shape) || below->ndim != 4 ||
      below->stride[0] != 0 || below->stride[1] == 0 || below->shape[1] < 2 ||
      below->shape[0] * below->shape[1] != top->shape[0] ||
      below->shape[2] != top->shape[1] || below->shape[3] != top->shape[2])
    return false;
  out->n = 1;
  out->v[0] = *below;
  out->v[0].ndim = 3;
  for (int d = 0; d < 3; d++) out->v[0].shape[d] = below->shape[d + 1], out->v[0].stride[d] = below->stride[d + 1];
  *period = below->shape[1];
  return true;
}

/* Whether matmul i's A, x over the buffer src, is read as period_view says (an f32 or f64
 * product of A as it is, not a batch sum): not stored for it; *one and *period then
 * period_view's. */
static bool periodic_a(const fuser *f, int32_t i, int32_t x, int32_t src, ljg_view *one, int64_t *period) {
  const ljg_gnode *n = &f->g->nodes[i];
  ljg_view v;
  return n->op == LJG_OP_MATMUL && (n->dtype == LJ_F32 || n->dtype == LJ_F64) && !f->bf16[i] &&
         (f->cols[i] < 0 || ljg_mm_cols_operand(f->cols_op[i]) == 1) && f->g->nodes[src].dtype == n->dtype &&
         ljg_chain_view(f->g, x, src, &v) && period_view(&v, one, period);
}

/* The im2col node that matmul i reads as its operand *op (LJG_MM_COLS_B, else _A, else _BT:
 * B the im2col transposed) when the matmul routines can pack that operand straight from the
 * im2col's image (implicit GEMM): a float matmul with an operand that is a whole im2col
 * (ljg_cols_operand), B first, whose offsets within the image's buffer, padded rows and
 * columns and window positions fit in 32 bits with room to spare (the packers' lane
 * arithmetic is i32); else -1. */
static int32_t implicit_cols(const ljg_graph *g, int32_t i, uint8_t *op) {
  const ljg_gnode *n = &g->nodes[i];
  if ((n->op != LJG_OP_MATMUL && n->op != LJG_OP_MATMUL_SUM) || (n->dtype != LJ_F32 && n->dtype != LJ_F64) ||
      ljg_gnumel(n) == 0 || g->nodes[ljg_in(g, n)[0]].shape[2] == 0)
    return -1;
  *op = LJG_MM_COLS_B;
  int32_t cols = ljg_cols_operand(g, ljg_in(g, n)[1], false);
  if (cols < 0) *op = LJG_MM_COLS_A, cols = ljg_cols_operand(g, ljg_in(g, n)[0], false);
  if (cols < 0) *op = LJG_MM_COLS_BT, cols = ljg_cols_operand(g, ljg_in(g, n)[1], true);
  if (cols < 0) return -1;
  const ljg_gnode *c = &g->nodes[cols], *img = &g->nodes[ljg_in(g, c)[0]];
  const int64_t *a = c->attr.a, small = INT32_MAX / 4;
  bool fits = ljg_gnumel(&g->nodes[ljg_strip_views(g, ljg_in(g, c)[0])]) <= small && c->shape[2] <= small &&
              img->shape[2] + 2 * a[4] <= small && img->shape[3] + 2 * a[5] <= small;
  return fits ? cols : -1;
}

/* An elementwise node used more than once is stored by a kernel of its own and read back by
 * each user, unless recomputing it in each is cheaper: at most RECOMPUTE_MAX_OPS cheap ops
 * (below) over the nodes down to stored ones, reading at most one operand larger than an
 * eighth of it. Its users then read that operand instead of it, the same bytes, and the store
 * goes: batch norm's centred input, normalized output and their gradients, read by the
 * gradient's kernels, are no longer written out (with x [32, 64, 56, 56], 25.7 MB each;
 * forward + backward 9.7 -> 2.9 ms on two threads with 8 ops, 5.3 with 4). Transcendental
 * ops, divisions and random numbers stay stored: softmax's exps are computed once. An iota is
 * its reader's position, free to compute and never stored (a one-hot compare reads it
 * broadcast); an index check is cheap. */
enum { RECOMPUTE_MAX_OPS = 8 };

static bool cheap_op(int op) {
  switch (op) {
  case LJG_OP_NEG: case LJG_OP_ABS: case LJG_OP_RELU: case LJG_OP_SIGN: case LJG_OP_CAST:
  case LJG_OP_STOP_GRADIENT: case LJG_OP_LOGICAL_NOT: case LJG_OP_ADD: case LJG_OP_SUB: case LJG_OP_MUL:
  case LJG_OP_MAXIMUM: case LJG_OP_MINIMUM: case LJG_OP_EQ: case LJG_OP_NE: case LJG_OP_LT: case LJG_OP_LE:
  case LJG_OP_GT: case LJG_OP_GE: case LJG_OP_LOGICAL_AND: case LJG_OP_LOGICAL_OR: case LJG_OP_WHERE:
  case LJG_OP_INDEX_CHECK:
    return true;
  default: return false;
  }
}

typedef struct recompute_cost {
  int32_t *seen; /* stamp of the walk that last reached each node */
  int32_t stamp;
  int ops, large;
  int64_t numel; /* the node's: an operand is large above an eighth of it */
} recompute_cost;

/* Adds the cost of computing node i in a user to c; false when it is not cheap. */
static bool add_cost(const fuser *f, recompute_cost *c, int32_t i, bool top) {
  if (c->seen[i] == c->stamp) return true;
  c->seen[i] = c->stamp;
  const ljg_gnode *n = &f->g->nodes[i];
  ljg_kind k = ljg_ops[n->op].kind;
  if ((f->realized[i] && !top) || n->op == LJG_OP_DATA) {
    c->large += ljg_gnumel(n) * 8 > c->numel;
    return c->large <= 1;
  }
  if (n->op == LJG_OP_CONST || n->op == LJG_OP_SCALAR || n->op == LJG_OP_IOTA) return true;
  if (k == LJG_VIEW) return add_cost(f, c, ljg_in(f->g, n)[0], false);
  if (k != LJG_ELEMWISE || !cheap_op(n->op) || ++c->ops > RECOMPUTE_MAX_OPS) return false;
  for (int j = 0; j < n->nin; j++)
    if (!add_cost(f, c, ljg_in(f->g, n)[j], false)) return false;
  return true;
}

/* Whether matmul i is what a col2im of Winograd's window reads (a 3×3 or 5×5 convolution's
 * input gradient, Wᵀ·dY, padded by less than the window), with enough channels for Winograd's
 * input-gradient routine
 * (codegen_llvm/gemm.c, winograd_dx) unless it is off: the product and the col2im run as
 * one kernel through the transforms (its matmul f32). */
static bool winograd_dx(const fuser *f, int32_t col2im) {
  const ljg_gnode *c = &f->g->nodes[col2im];
  int32_t mm = ljg_strip_views(f->g, ljg_in(f->g, c)[0]);
  const ljg_gnode *m = &f->g->nodes[mm];
  const int64_t *w = c->attr.a;
  return !(f->opt && f->opt->no_winograd) && ljg_ops[m->op].kind == LJG_MATMUL && ljg_winograd_window(w) &&
         w[4] < w[0] && w[5] < w[1] && f->g->nodes[ljg_in(f->g, m)[0]].shape[2] >= LJG_WINOGRAD_MIN_CHANNELS &&
         c->shape[1] >= LJG_WINOGRAD_MIN_ROWS;
}

/* Whether matmul i, B an im2col it packs from the image (implicit_cols), is a convolution that
 * Winograd's forward routine takes (codegen_llvm/gemm.c, winograd) unless it is off. */
static bool winograd_forward(const fuser *f, int32_t i) {
  const ljg_gnode *c = &f->g->nodes[f->cols[i]];
  return !(f->opt && f->opt->no_winograd) && ljg_winograd_window(c->attr.a) &&
         f->g->nodes[ljg_in(f->g, c)[0]].shape[1] >= LJG_WINOGRAD_MIN_CHANNELS &&
         f->g->nodes[i].shape[1] >= LJG_WINOGRAD_MIN_ROWS;
}

/* The bf16 buffer that a matmul's operand x, cast c of bf16 values seen through views, reads
 * through one strided view past the cast: the buffer below the views under the cast, or, where
 * those views make more than one level (images permuted side by side), the bf16 values they
 * give, stored for it; -1 when there is none. */
static int32_t bf16_source(const ljg_graph *g, int32_t x, int32_t c) {
  int32_t below = ljg_in(g, &g->nodes[c])[0], src = ljg_strip_views(g, below);
  ljg_view v;
  if (ljg_chain_view_past(g, x, src, c, &v) && v.n == 1) return src;
  return below != src && ljg_chain_view_past(g, x, below, c, &v) && v.n == 1 ? below : -1;
}

/* With ljg_fuse_options.bf16_dot, an f32 matmul both of whose operands are bf16 values cast
 * to f32 (a bf16 product as the matmul pass widens it: products summed in f32) reads the
 * bf16 buffers below the casts, each through one strided view, and its routine multiplies
 * pairs of them along k with the target's bf16 dot products (codegen_llvm/gemm.c): half the
 * bytes read and twice the multiply-adds an instruction of f32's. The casts are not stored
 * for it. B may be an im2col (implicit_cols) of such values, a 16-bit convolution's, which
 * the frontend computes in f32: the routine packs pairs of its rows from the bf16 image. Not
 * a convolution or input gradient that Winograd's routines compute (winograd_forward,
 * winograd_dx), faster so (a bf16 3×3 input gradient of [32, 64, 28, 28], one Zen 4 thread:
 * 17.8 ms in pairs and a col2im, 6.2 through the transforms). src[k]: the buffer node
 * operand k reads (a leaf, or realized). */
static bool bf16_operands(const fuser *f, int32_t i, int32_t src[2]) {
  const ljg_graph *g = f->g;
  const ljg_gnode *n = &g->nodes[i];
  if (!f->opt || !f->opt->bf16_dot || f->opt->disable_fusion || ljg_ops[n->op].kind != LJG_MATMUL ||
      n->dtype != LJ_F32 || f->winograd_dx[i] ||
      (f->cols[i] >= 0 && (f->cols_op[i] != LJG_MM_COLS_B || winograd_forward(f, i))))
    return false;
  for (int k = 0; k < 2; k++) {
    int32_t x = k == 1 && f->cols[i] >= 0 ? ljg_in(g, &g->nodes[f->cols[i]])[0] : ljg_in(g, n)[k];
    int32_t c = ljg_strip_views(g, x);
    const ljg_gnode *cast = &g->nodes[c];
    if (cast->op != LJG_OP_CAST || g->nodes[ljg_in(g, cast)[0]].dtype != LJ_BF16) return false;
    src[k] = bf16_source(g, x, c);
    if (src[k] < 0) return false;
  }
  return true;
}

/* The LOAD of the bf16 buffer below the cast that operand x of a matmul that bf16_operands
 * takes is, through the views on both sides of the cast. */
static int32_t bf16_load(fuser *f, int32_t x) {
  const ljg_graph *g = f->g;
  int32_t c = ljg_strip_views(g, x), src = bf16_source(g, x, c);
  ljg_view v;
  LJ_ASSERT(src >= 0 && ljg_chain_view_past(g, x, src, c, &v) && v.n == 1);
  ljg_kexpr e = {0};
  e.kind = LJG_X_LOAD;
  e.node = src;
  e.dtype = LJ_BF16;
  e.op = g->nodes[src].op;
  e.slot = f->realized[src] ? f->oslot[src] : f->pslot[src];
  e.view = add_view(f, &v);
  return push_expr(f, &e);
}

/* The LOAD of matmul i's A, x, as the matrices that repeat along the batch (periodic_a: x
 * not stored), *period of them; -1 when x is not read so. */
static int32_t period_load(fuser *f, int32_t i, int32_t x, int64_t *period) {
  int32_t src = ljg_strip_views(f->g, x);
  ljg_view one;
  if (f->realized[x] || !periodic_a(f, i, x, src, &one, period)) return -1;
  ljg_kexpr e = {0};
  e.kind = LJG_X_LOAD;
  e.node = src;
  e.dtype = f->g->nodes[src].dtype;
  e.op = f->g->nodes[src].op;
  e.slot = f->realized[src] ? f->oslot[src] : f->pslot[src];
  e.view = add_view(f, &one);
  return push_expr(f, &e);
}

/* The view that matmul i reads as B when it is transposed (contiguous along k or strided, not
 * along n), one level over a buffer, not expanded over the batch, and the product would read
 * it in place were it contiguous (ljg_matmul_b_in_place), unless the product is of one row
 * contiguous along k (a matrix-vector product turned: it takes dot products along B's
 * columns, reading each element once where it lies): its node, else -1. */
static int32_t transposed_b(const fuser *f, int32_t i) {
  const ljg_graph *g = f->g;
  const ljg_gnode *n = &g->nodes[i];
  if ((n->op != LJG_OP_MATMUL && n->op != LJG_OP_MATMUL_SUM) || (n->dtype != LJ_F32 && n->dtype != LJ_F64) ||
      f->cols[i] >= 0 || f->bf16[i])
    return -1;
  const int32_t *in = ljg_in(g, n);
  int32_t b = in[1], src = ljg_strip_views(g, b);
  ljg_view v;
  if (b == src || !ljg_chain_view(g, b, src, &v) || v.n != 1 || v.v[0].stride[2] == 1) return -1;
  ljg_view a;
  int32_t asrc = ljg_strip_views(g, in[0]);
  if (n->shape[1] == 1 && ljg_chain_view(g, in[0], asrc, &a) && a.n == 1 && a.v[0].stride[2] == 1) return -1;
  const ljg_gnode *bn = &g->nodes[b];
  int64_t batch = bn->shape[0], k = bn->shape[1], cols = bn->shape[2];
  if (batch > 1 && v.v[0].stride[0] == 0) return -1;
  ljg_view1 stored = {.ndim = 3, .shape = {batch, k, cols}, .stride = {k * cols, cols, 1}};
  return ljg_matmul_b_in_place(&stored, batch, n->shape[1], k, cols, n->dtype) ? b : -1;
}

/* A transposed B (transposed_b) that several matmuls read is stored once, contiguous along n,
 * and each reads it where it lies instead of packing it by transposes: an RNN's h_t·W_hhᵀ at
 * every step (an LSTM of 32 steps, batch 32, 256 hidden units, one thread: 105-113 -> 87-94
 * µs a step's product, W_hhᵀ stored once in 88-121). */
static void store_shared_transposed(fuser *f) {
  const ljg_graph *g = f->g;
  int32_t *readers = ljb_xcalloc((size_t)g->n, sizeof *readers);
  for (int i = 0; i < g->n; i++) {
    int32_t b = transposed_b(f, i);
    if (b >= 0 && ++readers[b] == 2) f->realized[b] = true;
  }
  free(readers);
}

/* Whether node i is a cat along a dim but the first that only a cat along a dim but the
 * first reads (lj_pad's cat of a cat, over two dims): its parts go into the outer cat's output
 * where it would have gone, in the outer cat's kernel (cat_parts), and it is not stored (a
 * padding of [32, 64, 56, 56] by one on each side of the last two dims, one thread: two
 * kernels and 26.6 MB of scratch memory, 3.3-3.6 ms -> one kernel, 1.9 ms; PyTorch 2.2). */
static bool inner_cat(const fuser *f, int32_t i) {
  const ljg_gnode *n = &f->g->nodes[i];
  return n->op == LJG_OP_CAT && n->attr.a[0] != 0 && !f->is_root[i] && f->eff[i] == 1;
}

static void decide(fuser *f) {
  const ljg_graph *g = f->g;
  for (int r = 0; r < g->nroots; r++) {
    int32_t i = g->roots[r], src = i;
    while (g->nodes[src].op == LJG_OP_RESHAPE) src = ljg_in(g, &g->nodes[src])[0];
    f->root_src[i] = src;
    f->is_root[src] = true;
    f->eff[src]++;
  }
  for (int i = g->n - 1; i >= 0; i--) {
    const ljg_gnode *n = &g->nodes[i];
    bool view = ljg_ops[n->op].kind == LJG_VIEW;
    const int32_t *in = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) f->eff[in[k]] += view ? f->eff[i] : 1;
  }
  recompute_cost cost = {.seen = ljb_xcalloc((size_t)g->n + 1, sizeof *cost.seen)};
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    ljg_kind k = ljg_ops[n->op].kind;
    if (n->op == LJG_OP_DATA) continue;
    if (f->opt && f->opt->disable_fusion) {
      f->realized[i] = f->is_root[i] || (k != LJG_LEAF && f->eff[i] > 0);
      continue;
    }
    f->realized[i] = f->is_root[i] || k == LJG_REDUCE || k == LJG_CAT || k == LJG_MATMUL ||
                     k == LJG_WINDOW || k == LJG_INDEX ||
                     ((k == LJG_ELEMWISE || (k == LJG_INDEXED && n->op != LJG_OP_IOTA)) && f->eff[i] > 1);
    if (f->realized[i] && !f->is_root[i] && k == LJG_ELEMWISE) {
      cost.stamp++;
      cost.ops = cost.large = 0;
      cost.numel = ljg_gnumel(n);
      f->realized[i] = !add_cost(f, &cost, i, true);
    }
  }
  free(cost.seen);
  /* an im2col that only implicit GEMMs read is never stored */
  bool fusing = !(f->opt && f->opt->disable_fusion);
  int32_t *implicit_uses = ljb_xcalloc((size_t)g->n, sizeof *implicit_uses);
  for (int i = 0; i < g->n; i++) {
    f->cols[i] = fusing ? implicit_cols(g, i, &f->cols_op[i]) : -1;
    if (f->cols[i] >= 0) implicit_uses[f->cols[i]]++;
  }
  for (int i = 0; i < g->n; i++)
    if (implicit_uses[i] && !f->is_root[i] && f->eff[i] == implicit_uses[i]) f->realized[i] = false;
  free(implicit_uses);
  for (int i = 0; i < g->n && fusing; i++) {
    const ljg_gnode *n = &g->nodes[i];
    const int32_t *in = ljg_in(g, n);
    if (n->op == LJG_OP_CAT && n->attr.a[0] != 0)
      for (int c = 0; c < n->nin; c++)
        if (inner_cat(f, in[c])) f->realized[in[c]] = false;
  }
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == LJG_OP_COL2IM && winograd_dx(f, i))
      f->winograd_dx[ljg_strip_views(g, ljg_in(g, &g->nodes[i])[0])] = true;
  /* the views between a bf16 product and its casts: an expand there is not a reason to store
   * what it expands (below) */
  int32_t *bf16_views = ljb_xcalloc((size_t)g->n, sizeof *bf16_views);
  for (int i = 0; i < g->n; i++) {
    int32_t bsrc[2];
    if (!bf16_operands(f, i, bsrc)) continue;
    f->bf16[i] = true;
    for (int k = 0; k < 2; k++) {
      if (g->nodes[bsrc[k]].op != LJG_OP_DATA) f->realized[bsrc[k]] = true;
      int32_t x = k == 1 && f->cols[i] >= 0 ? ljg_in(g, &g->nodes[f->cols[i]])[0] : ljg_in(g, &g->nodes[i])[k];
      for (; ljg_ops[g->nodes[x].op].kind == LJG_VIEW; x = ljg_in(g, &g->nodes[x])[0]) bf16_views[x]++;
    }
  }
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    const int32_t *in = ljg_in(g, n);
    if (f->bf16[i]) continue;
    /* operands read as one strided view of a buffer: an implicit im2col's image is its
     * reader's (not a bf16 product's, which reads the bf16 image below its cast) */
    int nbuf = ljg_ops[n->op].kind == LJG_MATMUL ? 2 : (n->op == LJG_OP_GATHER || ljg_ops[n->op].kind == LJG_WINDOW) ? 1 : 0;
    if (ljg_ops[n->op].kind == LJG_WINDOW && !f->realized[i]) nbuf = 0;
    for (int k = 0; k < nbuf; k++) {
      int32_t x = in[k];
      if (ljg_ops[n->op].kind == LJG_MATMUL && f->cols[i] >= 0 && k == ljg_mm_cols_operand(f->cols_op[i]))
        x = ljg_in(g, &g->nodes[f->cols[i]])[0];
      int32_t src = ljg_strip_views(g, x);
      if (g->nodes[src].op != LJG_OP_DATA) f->realized[src] = true;
      ljg_view one;
      int64_t period;
      if (chain_levels(g, x, src) > 1 &&
          !(ljg_ops[n->op].kind == LJG_MATMUL && k == 0 && periodic_a(f, i, x, src, &one, &period)))
        f->realized[x] = true;
    }
    if (n->op == LJG_OP_EXPAND && !(f->opt && f->opt->disable_fusion) && bf16_views[i] < f->eff[i]) {
      int32_t src = ljg_strip_views(g, in[0]);
      ljg_kind k = ljg_ops[g->nodes[src].op].kind;
      int64_t sn = ljg_gnumel(&g->nodes[src]);
      if ((k == LJG_ELEMWISE || (k == LJG_INDEXED && g->nodes[src].op != LJG_OP_IOTA)) && sn > 1 && ljg_gnumel(n) > sn)
        f->realized[src] = true;
    }
  }
  free(bf16_views);
  if (fusing) store_shared_transposed(f);
}

static int32_t add_slot(fuser *f, ljg_slotkind kind, const ljg_gnode *n, int32_t node) {
  ljg_slot s = {0};
  s.kind = (uint8_t)kind;
  s.dtype = n->dtype;
  s.param = kind == LJG_SLOT_PARAM || kind == LJG_SLOT_SCALAR ? n->param : -1;
  s.node = node;
  s.nbytes = kind == LJG_SLOT_SCALAR ? 8 : ljg_gnumel(n) * (int64_t)lj_dtype_size(n->dtype);
  if (n->op == LJG_OP_MATMUL_SUM && n->shape[0] > 1) /* and its runs' sums of B (ljc_gemm_b_sum) */
    s.nbytes += n->shape[0] * n->shape[2] * (int64_t)lj_dtype_size(n->dtype);
  s.offset = -1;
  ljb_vec_push(&f->slots, s);
  return f->slots.n - 1;
}

static void assign_slots(fuser *f) {
  const ljg_graph *g = f->g;
  f->slots.n = 0;
  for (int p = 0; p < g->nparams; p++) {
    int32_t i = g->params[p];
    const ljg_gnode *n = &g->nodes[i];
    f->pslot[i] = add_slot(f, n->op == LJG_OP_DATA ? LJG_SLOT_PARAM : LJG_SLOT_SCALAR, n, i);
  }
  for (int i = 0; i < g->n; i++)
    if (f->realized[i])
      f->oslot[i] = add_slot(f, f->is_root[i] ? LJG_SLOT_OUTPUT : LJG_SLOT_TEMP, &g->nodes[i], i);
}

/* ---- loop normalization ------------------------------------------------------------------ */

/* The view indices the accesses of nests [0, nn) use, each once, into out (room for every
 * view of the kernel); their count. */
static int nest_views(const fuser *f, const ljg_nest *nests, int nn, int32_t *out) {
  int n = 0;
  for (int e = -nn; e < f->exprs.n; e++) {
    int32_t v = e < 0 ? nests[nn + e].out_view : f->exprs.a[e].view;
    if (v < 0) continue;
    bool seen = false;
    for (int k = 0; k < n; k++) seen |= out[k] == v;
    if (!seen) out[n++] = v;
  }
  return n;
}

static void remove_dim(int64_t *a, int ndim, int d) {
  memmove(a + d, a + d + 1, (size_t)(ndim - d - 1) * sizeof *a);
  a[ndim - 1] = 0;
}

/* The shape of a common refinement of shapes a and b (na and nb dims) into r (LJ_MAX_DIMS at
 * most): every dim of either is a run of neighbouring dims of r, size-1 dims dropped. Its
 * dims, 0 when there is none, it has too many dims or a shape has no elements. */
static int refinement(int na, const int64_t *a, int nb, const int64_t *b, int64_t *r) {
  int64_t at[2][LJ_MAX_DIMS];
  int n[2] = {0, 0}, nr = 0;
  const int64_t *shape[2] = {a, b};
  int nd[2] = {na, nb};
  for (int k = 0; k < 2; k++) {
    int64_t p = 1;
    for (int d = nd[k] - 1; d >= 0; d--) {
      if (shape[k][d] == 0) return 0;
      if (shape[k][d] != 1) at[k][n[k]++] = p *= shape[k][d];
    }
  }
  int64_t last = 1, inner[LJ_MAX_DIMS]; /* innermost first */
  for (int i = 0, j = 0; i < n[0] || j < n[1];) {
    int64_t next = j >= n[1] || (i < n[0] && at[0][i] < at[1][j]) ? at[0][i] : at[1][j];
    i += i < n[0] && at[0][i] == next;
    j += j < n[1] && at[1][j] == next;
    if (next % last || nr == LJ_MAX_DIMS) return 0;
    inner[nr++] = next / last;
    last = next;
  }
  if (nr == 0 || (n[0] && n[1] && at[0][n[0] - 1] != at[1][n[1] - 1])) return 0;
  for (int d = 0; d < nr; d++) r[d] = inner[nr - 1 - d];
  return nr;
}

/* The dims of mask (over shape, ndim dims) as dims of its refinement r (nr dims): each dim's
 * run of r's. */
static uint32_t refined_mask(int ndim, const int64_t *shape, uint32_t mask, int nr, const int64_t *r) {
  uint32_t out = 0;
  int j = nr - 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (shape[d] == 1) continue;
    for (int64_t run = 1; run < shape[d]; run *= r[j--])
      if (mask >> d & 1) out |= 1u << j;
  }
  return out;
}

/* A nest reading through a view of two levels — a reshape that strides cannot express, such
 * as flattening a broadcast (an average pool's gradient, each window's value expanded over its
 * positions, [B, C, K, L] as [B, C·K, L] for the col2im; a group norm's per-channel weight,
 * [N, C, H, W] read as [N, G, C/G·H·W]) — whose top walks the nest's shape from its start
 * loops over a common refinement of its shape and the levels below instead ([N, G, C/G, H·W]):
 * each dim a run of the refinement's, every view one level, every address affine (it took a
 * division per dim and element: the average pool's copy alone took 8.5 ms of its forward and
 * backward over [32, 64, 56, 56] on one thread, 11.8 -> 3.8 ms, the copy now in the col2im's
 * kernel; a group norm's over [32, 64, 28, 28] in 8 groups, whose nests then join by groups,
 * 4 kernels and 5.6 ms -> 2 kernels and 0.86 ms). Not with gathers, whose point names dims,
 * or views of more levels. The nests [0, nn) of a kernel of several (a cat's) go together:
 * they have one shape, and each view is refined alike. */
static void drop_reshape_level(fuser *f, ljg_nest *nests, int nn) {
  const ljg_nest *nest = &nests[0];
  for (int s = 0; s < nn; s++)
    if (nests[s].scatter_index >= 0 || nests[s].ndim != nest->ndim ||
        memcmp(nests[s].shape, nest->shape, sizeof nest->shape) != 0)
      return;
  for (int e = 0; e < f->exprs.n; e++)
    if (f->exprs.a[e].kind == LJG_X_BUFFER || f->exprs.a[e].kind == LJG_X_GATHER) return;
  int32_t *vs = ljb_xalloc(((size_t)f->views.n + 1) * sizeof *vs);
  int nv = nest_views(f, nests, nn, vs);
  int64_t r[LJ_MAX_DIMS] = {0};
  int nr = refinement(nest->ndim, nest->shape, 0, NULL, r);
  bool two = false;
  for (int k = 0; k < nv && nr; k++) {
    const ljg_view *v = &f->views.a[vs[k]];
    const ljg_view1 *t = ljg_view_top(v);
    if (v->n > 2 || (v->n == 2 && (t->offset != 0 || !ljg_view1_walks(t, nest->ndim, nest->shape)))) nr = 0;
    if (v->n != 2 || !nr) continue;
    two = true;
    int64_t so_far[LJ_MAX_DIMS];
    memcpy(so_far, r, sizeof so_far);
    nr = refinement(nr, so_far, v->v[0].ndim, v->v[0].shape, r);
  }
  if (two && nr) {
    for (int k = 0; k < nv; k++) { /* a refinement only splits dims: one level still */
      ljg_view *v = &f->views.a[vs[k]];
      v->n = 1;
      bool ok = ljg_view_reshape(v, nr, r);
      LJ_ASSERT(ok && v->n == 1);
    }
    for (int s = 0; s < nn; s++) {
      nests[s].rmask = refined_mask(nests[s].ndim, nests[s].shape, nests[s].rmask, nr, r);
      nests[s].ndim = nr;
      memcpy(nests[s].shape, r, sizeof nests[s].shape);
    }
  }
  free(vs);
}

static void normalize(fuser *f, ljg_nest *nest) {
  drop_reshape_level(f, nest, 1);
  int32_t *vs = ljb_xalloc(((size_t)f->views.n + 1) * sizeof *vs);
  int nv = nest_views(f, nest, 1, vs);
  /* reduced dims last */
  int64_t perm[LJ_MAX_DIMS];
  int np = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < nest->ndim; d++)
      if ((int)(nest->rmask >> d & 1) == pass) perm[np++] = d;
  int64_t shape[LJ_MAX_DIMS];
  uint32_t rmask = 0;
  for (int d = 0; d < nest->ndim; d++) {
    shape[d] = nest->shape[perm[d]];
    if (nest->rmask >> perm[d] & 1) rmask |= 1u << d;
  }
  memcpy(nest->shape, shape, sizeof shape);
  nest->rmask = rmask;
  for (int k = 0; k < nv; k++) ljg_view_permute(&f->views.a[vs[k]], perm);
  /* drop size-1 dims */
  for (int d = nest->ndim - 1; d >= 0; d--) {
    if (nest->shape[d] != 1) continue;
    for (int k = 0; k < nv; k++) {
      ljg_view1 *t = &f->views.a[vs[k]].v[f->views.a[vs[k]].n - 1];
      remove_dim(t->shape, t->ndim, d);
      remove_dim(t->stride, t->ndim, d);
      t->ndim--;
    }
    remove_dim(nest->shape, nest->ndim, d);
    uint32_t low = nest->rmask & ((1u << d) - 1), high = nest->rmask >> (d + 1);
    nest->rmask = low | high << d;
    nest->ndim--;
  }
  /* merge dims that every access walks contiguously */
  for (int d = nest->ndim - 2; d >= 0; d--) {
    if ((nest->rmask >> d & 1) != (nest->rmask >> (d + 1) & 1)) continue;
    bool ok = true;
    for (int k = 0; k < nv && ok; k++) {
      const ljg_view1 *t = ljg_view_top(&f->views.a[vs[k]]);
      ok = t->stride[d] == t->stride[d + 1] * t->shape[d + 1];
    }
    if (!ok) continue;
    for (int k = 0; k < nv; k++) {
      ljg_view1 *t = &f->views.a[vs[k]].v[f->views.a[vs[k]].n - 1];
      t->shape[d] *= t->shape[d + 1];
      t->stride[d] = t->stride[d + 1];
      remove_dim(t->shape, t->ndim, d + 1);
      remove_dim(t->stride, t->ndim, d + 1);
      t->ndim--;
    }
    nest->shape[d] *= nest->shape[d + 1];
    remove_dim(nest->shape, nest->ndim, d + 1);
    uint32_t low = nest->rmask & ((1u << (d + 1)) - 1), high = nest->rmask >> (d + 2);
    nest->rmask = low | high << (d + 1);
    nest->ndim--;
  }
  free(vs);
}

/* ---- kernels ----------------------------------------------------------------------------- */

static void begin_kernel(fuser *f) {
  f->exprs.n = f->views.n = f->nests.n = 0;
  f->paths.n = 0;
  ljb_vec_push(&f->paths, ((path_entry){-1, 0}));
  memo_clear(f);
}

static ljg_nest nest_for(const ljg_gnode *space, int32_t value, int32_t out_slot, uint8_t dt) {
  ljg_nest nest = {0};
  nest.ndim = space->ndim;
  nest.row_dims = 1;
  memcpy(nest.shape, space->shape, sizeof nest.shape);
  nest.rop = -1;
  nest.value = value;
  nest.out_slot = out_slot;
  nest.out_dtype = dt;
  nest.rcount = 1;
  nest.scatter_index = -1;
  return nest;
}

/* Rows a cat's task should have at least: a cat of parts [1, 32, 1024] along its second dim
 * (the operand of joined products, pass_matmul.c) ran as one task, 0.25 ms of a two-thread
 * LSTM step of 9.6. */
enum { CAT_MIN_TASKS = 8 };

/* A cat of parts of one shape (a stack of steps) whose tasks would be fewer than
 * CAT_MIN_TASKS (one, along its first dim; the parts' first dim, else) splits the parts'
 * leading dims as rows instead: task r writes row r of every part. */
static void cat_rows(fuser *f, ljg_kernel *k) {
  ljg_nest *nests = f->nests.a;
  if (f->nests.n < 2 || (k->task_dim == 0 && k->ntasks >= CAT_MIN_TASKS)) return;
  for (int s = 1; s < f->nests.n; s++)
    if (nests[s].ndim != nests[0].ndim || memcmp(nests[s].shape, nests[0].shape, sizeof nests[0].shape) ||
        nests[s].scatter_index >= 0)
      return;
  int nd = 0;
  int64_t rows = 1;
  while (nd < nests[0].ndim - 1 && rows < CAT_MIN_TASKS) rows *= nests[0].shape[nd++];
  if (nd == 0 || rows <= (k->task_dim == 0 ? k->ntasks : 1)) return;
  for (int s = 0; s < f->nests.n; s++) nests[s].row_dims = nd;
  k->task_dim = 0;
  k->ntasks = rows;
}

/* A BUFFER expression for a buffer operand: the slot and view of its LOAD. */
static int32_t buffer_expr(fuser *f, int32_t i) {
  ljg_kexpr x = f->exprs.a[build(f, i, 0, false)];
  LJ_ASSERT(x.kind == LJG_X_LOAD);
  x.kind = LJG_X_BUFFER;
  return push_expr(f, &x);
}

/* A nest for each part of cat i, writing its part of out (the view of slot oslot where cat i
 * goes); the parts of an inner cat (inner_cat) within its part. */
static void cat_parts(fuser *f, int32_t i, const ljg_view *out, int32_t oslot, lj_dtype dt) {
  const ljg_gnode *n = &f->g->nodes[i];
  const int32_t *in = ljg_in(f->g, n);
  int dim = (int)n->attr.a[0];
  int64_t base = 0;
  for (int c = 0; c < n->nin; c++) {
    const ljg_gnode *x = &f->g->nodes[in[c]];
    ljg_view v = *out;
    ljg_view_slice(&v, dim, base, 1, x->shape[dim]);
    base += x->shape[dim];
    if (x->op == LJG_OP_CAT && !f->realized[in[c]]) {
      cat_parts(f, in[c], &v, oslot, dt);
      continue;
    }
    ljg_nest nest = nest_for(x, build(f, in[c], 0, false), oslot, dt);
    nest.out_view = add_view(f, &v);
    if (ljg_gnumel(x) > 0) ljb_vec_push(&f->nests, nest);
  }
}

static void build_kernel(fuser *f, int32_t i, ljg_kernel *k) {
  const ljg_graph *g = f->g;
  const ljg_gnode *n = &g->nodes[i];
  const int32_t *in = ljg_in(g, n);
  memset(k, 0, sizeof *k);
  k->kind = LJG_K_LOOPS;
  k->node = i;
  k->task_dim = -1;
  k->ntasks = 1;
  k->mm_unpool_at = k->mm_unpool_mask = -1;
  bool keep_dims = false;
  switch (ljg_ops[n->op].kind) {
  case LJG_WINDOW: {
    bool to_cols = n->op == LJG_OP_IM2COL;
    const ljg_gnode *img = to_cols ? &g->nodes[in[0]] : n;
    k->kind = LJG_K_WINDOW;
    k->win_op = (int16_t)n->op;
    k->win_src = build(f, in[0], 0, false);
    k->win_out_slot = f->oslot[i];
    k->win_dtype = n->dtype;
    memcpy(k->win, n->attr.a, sizeof k->win);
    k->win_fill = n->attr.f;
    memcpy(k->win_img, img->shape, sizeof k->win_img);
    ljg_window_out(n->attr.a, img->shape[2], img->shape[3], &k->win_oh, &k->win_ow);
    k->ntasks = img->shape[0] * img->shape[1];
    k->work = (double)ljg_gnumel(to_cols ? n : &g->nodes[in[0]]);
    break;
  }
  case LJG_INDEX: {
    int dim = (int)n->attr.a[0];
    const ljg_gnode *index = &g->nodes[in[1]];
    keep_dims = true;
    if (n->op == LJG_OP_GATHER) {
      ljg_kexpr x = {0};
      x.kind = LJG_X_GATHER;
      x.dtype = n->dtype;
      x.op = n->op;
      x.node = i;
      x.aux = dim;
      x.nin = 2;
      x.in[0] = build(f, in[1], 0, false);
      x.in[1] = buffer_expr(f, in[0]);
      x.value = (double)g->nodes[in[0]].shape[dim];
      ljg_nest nest = nest_for(n, push_expr(f, &x), f->oslot[i], n->dtype);
      ljg_view v;
      ljg_view_contiguous(&v, n->ndim, n->shape);
      nest.out_view = add_view(f, &v);
      ljb_vec_push(&f->nests, nest);
      break;
    }
    /* scatter_add: copy the base, then add src at the indexed places */
    ljg_view v;
    ljg_view_contiguous(&v, n->ndim, n->shape);
    int32_t out_view = add_view(f, &v);
    ljg_nest copy = nest_for(n, build(f, in[0], 0, false), f->oslot[i], n->dtype);
    copy.out_view = out_view;
    ljb_vec_push(&f->nests, copy);
    ljg_nest add = nest_for(index, build(f, in[2], 0, false), f->oslot[i], n->dtype);
    add.out_view = out_view;
    add.scatter_index = build(f, in[1], 0, false);
    add.scatter_dim = dim;
    ljb_vec_push(&f->nests, add);
    if (dim != 0 && n->ndim > 0 && index->shape[0] == n->shape[0]) {
      k->task_dim = 0;
      k->ntasks = n->shape[0];
    }
    break;
  }
  case LJG_REDUCE: {
    const ljg_gnode *x = &g->nodes[in[0]];
    ljg_nest nest = nest_for(x, build(f, in[0], 0, false), f->oslot[i], n->dtype);
    nest.rmask = (uint32_t)n->attr.a[0];
    nest.rop = (int16_t)n->op;
    for (int d = 0; d < x->ndim; d++)
      if (nest.rmask >> d & 1) nest.rcount *= x->shape[d];
    ljg_view v;
    ljg_view_contiguous(&v, n->ndim, n->shape);
    for (int d = 0; d < x->ndim; d++) {
      v.v[0].shape[d] = x->shape[d];
      if (nest.rmask >> d & 1) v.v[0].stride[d] = 0;
    }
    nest.out_view = add_view(f, &v);
    ljb_vec_push(&f->nests, nest);
    break;
  }
  case LJG_CAT: {
    int dim = (int)n->attr.a[0];
    ljg_view v;
    ljg_view_contiguous(&v, n->ndim, n->shape);
    cat_parts(f, i, &v, f->oslot[i], n->dtype);
    if (dim != 0 && n->ndim > 0 && f->nests.n > 0) { /* tasks split each part's first dim */
      drop_reshape_level(f, f->nests.a, f->nests.n);
      k->task_dim = 0;
      k->ntasks = f->nests.a[0].shape[0];
    }
    cat_rows(f, k);
    break;
  }
  case LJG_MATMUL: {
    k->kind = LJG_K_MATMUL;
    int32_t cols = f->cols[i], operand[2] = {in[0], in[1]};
    if (cols >= 0) { /* the operand's load reads the image */
      const ljg_gnode *c = &g->nodes[cols];
      int32_t img = ljg_in(g, c)[0];
      k->mm_cols = f->cols_op[i];
      operand[ljg_mm_cols_operand(k->mm_cols)] = img;
      memcpy(k->mm_win, c->attr.a, sizeof k->mm_win);
      memcpy(k->mm_img, g->nodes[img].shape, sizeof k->mm_img);
      ljg_window_out(c->attr.a, k->mm_img[2], k->mm_img[3], &k->mm_oh, &k->mm_ow);
    }
    int64_t period = 0;
    int32_t periodic = f->bf16[i] || k->mm_cols == LJG_MM_COLS_A ? -1 : period_load(f, i, operand[0], &period);
    k->mm_a = f->bf16[i] ? bf16_load(f, operand[0]) : periodic >= 0 ? periodic : build(f, operand[0], 0, false);
    k->mm_bm = f->bf16[i] ? bf16_load(f, operand[1]) : build(f, operand[1], 0, false);
    k->mm_a_period = periodic >= 0 ? period : 0;
    k->mm_b = g->nodes[in[0]].shape[0];
    k->mm_m = n->shape[1];
    k->mm_n = n->shape[2];
    k->mm_k = g->nodes[in[0]].shape[2];
    k->mm_out_slot = f->oslot[i];
    k->mm_dtype = n->dtype;
    k->mm_sum = n->op == LJG_OP_MATMUL_SUM ? n->shape[0] : 0;
    k->mm_task_rows = 1;
    k->ntasks = n->shape[0] * k->mm_m;
    /* multiply-adds run 16 to a cycle in the register tiles: count them like that many
     * points of an elementwise loop, so a small matmul stays on one thread */
    k->work = (double)k->mm_b * (double)k->mm_m * (double)k->mm_n * (double)k->mm_k / 16;
    break;
  }
  default: {
    ljg_nest nest = nest_for(n, build(f, i, 0, true), f->oslot[i], n->dtype);
    ljg_view v;
    ljg_view_contiguous(&v, n->ndim, n->shape);
    nest.out_view = add_view(f, &v);
    ljb_vec_push(&f->nests, nest);
    break;
  }
  }
  if (k->kind == LJG_K_LOOPS && f->nests.n == 1 && f->overflow < 0) {
    ljg_nest *nest = &f->nests.a[0];
    if (!keep_dims) normalize(f, nest);
    if (nest->ndim > 0 && !(nest->rmask & 1)) {
      k->task_dim = 0;
      k->ntasks = nest->shape[0];
    }
  }
  if (k->kind == LJG_K_LOOPS)
    for (int s = 0; s < f->nests.n; s++)
      k->work += (double)ljg_numel(f->nests.a[s].ndim, f->nests.a[s].shape) * f->exprs.n;
}

static void *arena_copy(ljb_arena *a, const void *src, size_t n) {
  void *p = ljb_arena_alloc(a, n ? n : 1);
  if (n) memcpy(p, src, n);
  return p;
}

/* Builds every kernel; false if a view overflowed (f->overflow names the node to realize). */
static bool build_all(fuser *f, ljg_program *p) {
  const ljg_graph *g = f->g;
  f->kernels.n = 0;
  assign_slots(f);
  for (int i = 0; i < g->n; i++) {
    if (!f->realized[i] || ljg_gnumel(&g->nodes[i]) == 0) continue;
    begin_kernel(f);
    ljg_kernel k;
    build_kernel(f, i, &k);
    if (f->overflow >= 0) return false;
    k.nnests = f->nests.n;
    k.nests = arena_copy(&p->arena, f->nests.a, (size_t)f->nests.n * sizeof *f->nests.a);
    k.nexprs = f->exprs.n;
    k.exprs = arena_copy(&p->arena, f->exprs.a, (size_t)f->exprs.n * sizeof *f->exprs.a);
    k.nviews = f->views.n;
    k.views = arena_copy(&p->arena, f->views.a, (size_t)f->views.n * sizeof *f->views.a);
    ljb_vec_push(&f->kernels, k);
  }
  return true;
}

bool ljg_column_nest(const ljg_kernel *k, int s) {
  const ljg_nest *n = &k->nests[s];
  return n->rop < 0 && n->scatter_index < 0 && n->ndim >= 2 && n->row_dims < n->ndim &&
         n->shape[n->ndim - 1] == k->mm_n && ljg_numel(n->ndim - 1, n->shape) == k->mm_b * k->mm_m;
}

/* Whether matmul kernel k's nests can run with column tasks: each column nest reads what the
 * matmul and the column nests write only at its own point, laid out as C (one reading C
 * transposed would need the other tasks' columns), and writes its own point likewise; the
 * other nests, which the first task runs whole (those joined past independent kernels, a
 * loss's one-hot), neither read nor write what those write, nor write what they read. */
static bool nests_by_columns(const ljg_program *p, const ljg_kernel *k) {
  /* per slot: 1 written by the matmul or a column nest, 2 by another nest, 3 both */
  uint8_t *by = ljb_xcalloc((size_t)p->nslots + 1, 1);
  by[k->mm_out_slot] = 1;
  for (int s = 0; s < k->nnests; s++) by[k->nests[s].out_slot] |= ljg_column_nest(k, s) ? 1 : 2;
  bool *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used), ok = true;
  for (int s = 0; s < k->nnests && ok; s++) {
    const ljg_nest *n = &k->nests[s];
    bool cols = ljg_column_nest(k, s);
    ok = by[n->out_slot] != 3 && (!cols || ljg_view_row_major(&k->views[n->out_view]));
    ljg_nest_exprs(k, n, used);
    for (int e = 0; e < k->nexprs && ok; e++) {
      const ljg_kexpr *x = &k->exprs[e];
      if (!used[e] || (x->kind != LJG_X_LOAD && x->kind != LJG_X_BUFFER) || !by[x->slot]) continue;
      ok = cols ? by[x->slot] == 1 && x->kind == LJG_X_LOAD && ljg_view_row_major(&k->views[x->view])
                : by[x->slot] == 2;
    }
  }
  free(used);
  free(by);
  return ok;
}

/* Gives the matmul kernels with few rows column tasks (LJG_MATMUL_COL_TASK) when there are at
 * least as many blocks of columns as rows, or LJG_MATMUL_COL_SPLIT_TASKS of them (so that a
 * machine of many cores keeps as many tasks as the rows gave it): only those the GEMM
 * routines take by a plain read of B, f32 or f64 through single-level views
 * (codegen_llvm/gemm.c), whose fused nests, if any, run on a task's columns of all the rows
 * in one block of them or whole in the first task (nests_by_columns). The taps routine's
 * weight gradients always split their columns (LJG_TAPS_COL_TASK). */
static void column_tasks(ljg_program *p) {
  for (int i = 0; i < p->nkernels; i++) {
    ljg_kernel *k = &p->kernels[i];
    if (ljg_taps_dw(k)) {
      k->mm_col_tasks = LJG_TAPS_COL_TASK;
      k->ntasks = k->mm_sum * ((k->mm_n + LJG_TAPS_COL_TASK - 1) / LJG_TAPS_COL_TASK);
      continue;
    }
    int64_t rows = k->mm_b * k->mm_m, blocks = (k->mm_n + LJG_MATMUL_COL_TASK - 1) / LJG_MATMUL_COL_TASK;
    if (k->kind != LJG_K_MATMUL || (k->nnests && k->row_block < rows) || k->tm || k->mm_sum || k->mm_cols ||
        k->mm_a_period ||
        k->mm_task_rows != 1 || ljg_kernel_has_window(k) || (k->mm_dtype != LJ_F32 && k->mm_dtype != LJ_F64) ||
        k->mm_k == 0 || k->mm_b == 0 || rows > LJG_MATMUL_COL_SPLIT_ROWS || blocks < 2 ||
        (blocks < rows && blocks < LJG_MATMUL_COL_SPLIT_TASKS) || !nests_by_columns(p, k))
      continue;
    const ljg_kexpr *a = &k->exprs[k->mm_a], *b = &k->exprs[k->mm_bm];
    if (a->kind != LJG_X_LOAD || b->kind != LJG_X_LOAD || k->views[a->view].n != 1 || k->views[b->view].n != 1) continue;
    k->mm_col_tasks = LJG_MATMUL_COL_TASK;
    k->ntasks = blocks;
  }
}

ljg_program *ljg_fuse(const ljg_graph *g, const ljg_fuse_options *opt) {
  fuser f = {0};
  f.g = g;
  f.opt = opt;
  size_t n = (size_t)g->n + 1;
  f.realized = ljb_xcalloc(n, sizeof *f.realized);
  f.is_root = ljb_xcalloc(n, sizeof *f.is_root);
  f.eff = ljb_xcalloc(n, sizeof *f.eff);
  f.root_src = ljb_xalloc(n * sizeof *f.root_src);
  f.pslot = ljb_xalloc(n * sizeof *f.pslot);
  f.oslot = ljb_xalloc(n * sizeof *f.oslot);
  f.cols = ljb_xalloc(n * sizeof *f.cols);
  f.cols_op = ljb_xcalloc(n, sizeof *f.cols_op);
  f.bf16 = ljb_xcalloc(n, sizeof *f.bf16);
  f.winograd_dx = ljb_xcalloc(n, sizeof *f.winograd_dx);
  memset(f.pslot, 0xff, n * sizeof *f.pslot);
  memset(f.oslot, 0xff, n * sizeof *f.oslot);
  decide(&f);
  ljg_program *p = ljb_xcalloc(1, sizeof *p);
  for (;;) {
    f.overflow = -1;
    if (build_all(&f, p)) break;
    f.realized[f.overflow] = true;
    ljb_arena_reset(&p->arena);
  }
  p->nkernels = f.kernels.n;
  p->kernels = arena_copy(&p->arena, f.kernels.a, (size_t)f.kernels.n * sizeof *f.kernels.a);
  p->nslots = f.slots.n;
  p->slots = arena_copy(&p->arena, f.slots.a, (size_t)f.slots.n * sizeof *f.slots.a);
  p->nroots = g->nroots;
  p->root_slot = ljb_arena_alloc(&p->arena, ((size_t)g->nroots + 1) * sizeof *p->root_slot);
  for (int r = 0; r < g->nroots; r++) {
    int32_t i = f.root_src[g->roots[r]];
    p->root_slot[r] = f.realized[i] ? f.oslot[i] : f.pslot[i];
  }
  if (!(opt && opt->disable_fusion)) {
    ljg_fuse_rows(p);
    ljg_fuse_unpool(p, g);
  }
  column_tasks(p);
  for (int i = 0; opt && opt->no_winograd && i < p->nkernels; i++)
    p->kernels[i].mm_no_winograd = p->kernels[i].kind == LJG_K_MATMUL;
  ljg_donate(p, g);
  ljg_plan(p);
  free(f.realized);
  free(f.is_root);
  free(f.eff);
  free(f.root_src);
  free(f.pslot);
  free(f.oslot);
  free(f.cols);
  free(f.cols_op);
  free(f.bf16);
  free(f.winograd_dx);
  ljb_vec_free(&f.slots);
  ljb_vec_free(&f.kernels);
  ljb_vec_free(&f.exprs);
  ljb_vec_free(&f.views);
  ljb_vec_free(&f.nests);
  ljb_vec_free(&f.paths);
  free(f.mkeys);
  free(f.mvals);
  return p;
}

int ljg_kernel_own_outputs(const ljg_kernel *k, int32_t out[3]) {
  int n = 0;
  if (k->kind == LJG_K_MATMUL) out[n++] = k->mm_out_slot;
  if (ljg_kernel_has_window(k)) out[n++] = k->win_out_slot;
  if (k->tm) out[n++] = k->tm_out_slot;
  return n;
}

bool ljg_kernel_writes(const ljg_kernel *k, int32_t slot, int skip) {
  for (int s = 0; s < k->nnests; s++)
    if (s != skip && k->nests[s].out_slot == slot) return true;
  int32_t own[3];
  for (int i = 0, n = ljg_kernel_own_outputs(k, own); i < n; i++)
    if (own[i] == slot) return true;
  return false;
}

bool ljg_slot_used_elsewhere(const ljg_program *p, const ljg_kernel *k, int32_t slot) {
  for (int i = 0; i < p->nkernels; i++) {
    const ljg_kernel *o = &p->kernels[i];
    if (o->exprs == k->exprs && o->node == k->node) continue; /* k, or lower.c's shifted_kernel copy */
    for (int e = 0; e < o->nexprs; e++)
      if (o->exprs[e].kind != LJG_X_CONST && o->exprs[e].kind != LJG_X_OP && o->exprs[e].slot == slot) return true;
    if (ljg_kernel_writes(o, slot, -1)) return true;
  }
  return false;
}

void ljg_trailing_product(const ljg_kernel *k, ljg_kernel *out) {
  LJ_ASSERT(k->kind == LJG_K_MATMUL && k->tm);
  *out = *k;
  out->nnests = 0;
  out->nests = NULL;
  out->task_dim = -1;
  out->row_block = out->task_rows = 0;
  out->per_task_at = 0;
  out->mm_n = k->tm_n;
  out->mm_k = k->tm_k;
  out->mm_a = k->tm_a;
  out->mm_bm = k->tm_bm;
  out->mm_out_slot = k->tm_out_slot;
  out->mm_dtype = k->tm_dtype;
  out->mm_sum = out->mm_col_tasks = out->mm_cols = 0;
  out->mm_no_winograd = 1;
  out->mm_task_rows = 1;
  out->mm_a_period = 0;
  out->mm_unpool_at = out->mm_unpool_mask = -1;
  out->win_op = LJG_OP_DATA;
  out->tm = 0;
}

void ljg_nest_exprs(const ljg_kernel *k, const ljg_nest *nest, bool *used) {
  memset(used, 0, (size_t)k->nexprs * sizeof *used);
  used[nest->value] = true;
  if (nest->scatter_index >= 0) used[nest->scatter_index] = true;
  for (int e = k->nexprs - 1; e >= 0; e--)
    if (used[e])
      for (int i = 0; i < k->exprs[e].nin; i++) used[k->exprs[e].in[i]] = true;
}

bool ljg_nests_read(const ljg_kernel *k, int32_t slot, int first, int last) {
  bool *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used), reads = false;
  for (int o = 0; o < k->nnests && !reads; o++) {
    if (o >= first && o <= last) continue;
    ljg_nest_exprs(k, &k->nests[o], used);
    for (int e = 0; e < k->nexprs && !reads; e++) reads = used[e] && ljg_expr_reads(&k->exprs[e], slot);
  }
  free(used);
  return reads;
}

static void count_strides(const ljg_kernel *k, int e, int j, int r, int *col, int *row, uint8_t *seen) {
  if (seen[e]) return;
  seen[e] = 1;
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind == LJG_X_LOAD) {
    const ljg_view1 *v = ljg_view_top(&k->views[x->view]);
    if (v->stride[j] == 0 || v->stride[r] == 0) return; /* a scalar in one order or the other */
    if (v->stride[r] == 1) (*row)++;
    else if (llabs(v->stride[j]) < llabs(v->stride[r])) (*col)++;
    return;
  }
  for (int i = 0; i < x->nin; i++) count_strides(k, x->in[i], j, r, col, row, seen);
}

bool ljg_column_order(const ljg_kernel *k, const ljg_nest *nest, int nkept) {
  if (nest->rop < 0 || nkept == 0 || nkept == nest->ndim) return false;
  int j = nkept - 1;
  if (nest->shape[j] < 4) return false;
  int col = 0, row = 0;
  uint8_t *seen = ljb_xcalloc((size_t)k->nexprs + 1, 1);
  count_strides(k, nest->value, j, nest->ndim - 1, &col, &row, seen);
  free(seen);
  return col > row;
}

void ljg_program_free(ljg_program *p) {
  if (!p) return;
  ljb_arena_free(&p->arena);
  free(p);
}

/* ---- text -------------------------------------------------------------------------------- */

static void print_view(ljb_str *b, const ljg_view *v) {
  for (int l = v->n - 1; l >= 0; l--) {
    const ljg_view1 *t = &v->v[l];
    char shape[LJB_SHAPE_STR_MAX], stride[LJB_SHAPE_STR_MAX];
    ljb_str_printf(b, "%s%s:%s+%" PRId64, l == v->n - 1 ? "" : " -> ",
                   ljb_shape_str(shape, t->ndim, t->shape),
                   ljb_shape_str(stride, t->ndim, t->stride), t->offset);
  }
}

static void print_expr(ljb_str *b, const ljg_kernel *k, int e) {
  const ljg_kexpr *x = &k->exprs[e];
  ljb_str_printf(b, "    e%d = %s ", e, lj_dtype_name(x->dtype));
  switch (x->kind) {
  case LJG_X_LOAD:
    ljb_str_printf(b, "load slot%d ", x->slot);
    print_view(b, &k->views[x->view]);
    break;
  case LJG_X_SCALAR: ljb_str_printf(b, "scalar slot%d", x->slot); break;
  case LJG_X_CONST: ljb_str_printf(b, "constant %.17g", x->value); break;
  case LJG_X_INDEX:
    ljb_str_printf(b, "%s ", ljg_ops[x->op].name);
    print_view(b, &k->views[x->view]);
    for (int i = 0; i < x->nin; i++) ljb_str_printf(b, " e%d", x->in[i]);
    break;
  case LJG_X_OP:
    ljb_str_printf(b, "%s", ljg_ops[x->op].name);
    for (int i = 0; i < x->nin; i++) ljb_str_printf(b, "%se%d", i ? ", " : " ", x->in[i]);
    break;
  case LJG_X_BUFFER:
    ljb_str_printf(b, "buffer slot%d ", x->slot);
    print_view(b, &k->views[x->view]);
    break;
  case LJG_X_GATHER: ljb_str_printf(b, "gather e%d at e%d along dim %d", x->in[1], x->in[0], x->aux); break;
  }
  ljb_str_printf(b, "  ; %%%d\n", x->node);
}

static void print_window_attr(ljb_str *b, const int64_t *w) {
  ljb_str_printf(b, "window (%" PRId64 ",%" PRId64 ") stride (%" PRId64 ",%" PRId64 ") pad (%" PRId64 ",%" PRId64
                 ") dilation (%" PRId64 ",%" PRId64 ")", w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
}

static void print_window(ljb_str *b, const ljg_kernel *k) {
  ljb_str_printf(b, "  %s of e%d, ", ljg_ops[k->win_op].name, k->win_src);
  print_window_attr(b, k->win);
  ljb_str_printf(b, " -> slot%d\n", k->win_out_slot);
}

char *ljg_program_text(const ljg_program *p, const ljg_graph *g) {
  static const char *const slot_kinds[] = {"param", "scalar", "output", "temp", "local"};
  ljb_str b = {0};
  ljb_str_printf(&b, "program: %d kernels, %d slots, scratch %" PRId64 " bytes\n", p->nkernels,
                 p->nslots, p->scratch_bytes);
  for (int s = 0; s < p->nslots; s++) {
    const ljg_slot *sl = &p->slots[s];
    ljb_str_printf(&b, "  slot%d: %s %s %" PRId64 " bytes (%%%d)", s, slot_kinds[sl->kind],
                   lj_dtype_name(sl->dtype), sl->nbytes, sl->node);
    if (sl->kind == LJG_SLOT_TEMP) ljb_str_printf(&b, " at %" PRId64, sl->offset);
    if (sl->kind == LJG_SLOT_LOCAL) ljb_str_printf(&b, " per block of %" PRId64 "-byte rows", sl->row_bytes);
    if (sl->kind == LJG_SLOT_OUTPUT && sl->param >= 0) ljb_str_printf(&b, " in place of parameter %d", sl->param);
    ljb_str_puts(&b, "\n");
  }
  for (int i = 0; i < p->nkernels; i++) {
    const ljg_kernel *k = &p->kernels[i];
    static const char *const kinds[] = {"loops", "matmul", "window"};
    ljb_str_printf(&b, "kernel %d: %s %%%d (%s), %" PRId64 " tasks", i, kinds[k->kind], k->node,
                   ljg_ops[g->nodes[k->node].op].name, k->ntasks);
    if (k->mm_col_tasks) ljb_str_printf(&b, " of %d columns", k->mm_col_tasks);
    if (k->task_rows) ljb_str_printf(&b, " of %" PRId64 " rows", k->task_rows);
    if (k->row_block) ljb_str_printf(&b, " in blocks of %" PRId64 " rows", k->row_block);
    if (k->col_block) ljb_str_printf(&b, " and %" PRId64 " columns", k->col_block);
    if (k->task_rows) ljb_str_printf(&b, ", nests from %d once a task", k->per_task_at);
    ljb_str_puts(&b, "\n");
    for (int e = 0; e < k->nexprs; e++) print_expr(&b, k, e);
    if (k->kind == LJG_K_MATMUL) {
      ljb_str_printf(&b, "  [%" PRId64 "x%" PRId64 "x%" PRId64 "] * [%" PRId64 "x%" PRId64 "] "
                     "-> slot%d: e%d * e%d%s", k->mm_b, k->mm_m, k->mm_k, k->mm_k, k->mm_n,
                     k->mm_out_slot, k->mm_a, k->mm_bm, k->mm_sum ? ", summed over the batch" : "");
      if (k->mm_sum > 1) ljb_str_printf(&b, " in %" PRId64 " runs", k->mm_sum);
      if (k->mm_no_winograd) ljb_str_puts(&b, ", no Winograd");
      if (k->mm_task_rows > 1) ljb_str_printf(&b, ", %" PRId64 " rows a task", k->mm_task_rows);
      if (k->mm_a_period) ljb_str_printf(&b, ", A's %" PRId64 " matrices again and again", k->mm_a_period);
      ljb_str_puts(&b, "\n");
      if (k->mm_cols) {
        bool a = k->mm_cols == LJG_MM_COLS_A;
        ljb_str_printf(&b, "  %s: im2col%s of e%d, ", a ? "A" : "B", k->mm_cols == LJG_MM_COLS_BT ? ", transposed," : "",
                       a ? k->mm_a : k->mm_bm);
        print_window_attr(&b, k->mm_win);
        ljb_str_puts(&b, ", packed from the image\n");
      }
      if (k->mm_unpool_at >= 0) {
        ljb_str_printf(&b, "  B: e%d unpooled, 2x2 windows, the maxima at e%d", k->mm_bm, k->mm_unpool_at);
        if (k->mm_unpool_mask >= 0) ljb_str_printf(&b, ", where e%d > 0", k->mm_unpool_mask);
        ljb_str_puts(&b, "\n");
      }
    }

    for (int s = 0; s < k->nnests; s++) {
      const ljg_nest *nest = &k->nests[s];
      if (ljg_kernel_has_window(k) && k->win_at == s) print_window(&b, k);
      char shape[LJB_SHAPE_STR_MAX];
      ljb_str_printf(&b, "  nest %s", ljb_shape_str(shape, nest->ndim, nest->shape));
      if (nest->row_dims > 1) ljb_str_printf(&b, " rows over %d dims", nest->row_dims);
      if (nest->rop >= 0)
        ljb_str_printf(&b, " %s over mask 0x%x", ljg_ops[nest->rop].name, nest->rmask);
      if (nest->scatter_index >= 0)
        ljb_str_printf(&b, " scatter-add at e%d along dim %d", nest->scatter_index, nest->scatter_dim);
      ljb_str_printf(&b, ": e%d -> slot%d ", nest->value, nest->out_slot);
      print_view(&b, &k->views[nest->out_view]);
      ljb_str_puts(&b, "\n");
    }
    if (ljg_kernel_has_window(k) && k->win_at == k->nnests) print_window(&b, k);
    if (k->tm)
      ljb_str_printf(&b, "  then [%" PRId64 "x%" PRId64 "x%" PRId64 "] * [%" PRId64 "x%" PRId64 "] -> slot%d: e%d * e%d\n",
                     k->mm_b, k->mm_m, k->tm_k, k->tm_k, k->tm_n, k->tm_out_slot, k->tm_a, k->tm_bm);
  }
  return ljb_str_take(&b);
}
