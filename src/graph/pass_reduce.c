/* pass_reduce.c — long reductions over leading dims in two stages.
 * Requires: a verified graph. Guarantees: the same values at every root up to the order of
 * the reduction's float operations, with every large sum, mean, prod, amax or amin over a
 * graph's leading dims only (a column sum, a bias gradient over a large batch, or all dims)
 * computed in two stages: the reduced rows, R in all, taken as BLOCKS blocks of R / BLOCKS
 * consecutive rows, reduced within each block, then the blocks' results reduced in order.
 *
 * Reduced in one stage, such a reduction's tasks are its kept columns: each thread reads a
 * slice of every row, and one whose kept part is a single element (a sum of everything) runs
 * on one thread. A column sum of [16384, 512] took longer on two threads than on one (0.81
 * vs 1.19 ms, one Zen 4 machine); split, the first stage's tasks are blocks of whole rows,
 * read as they lie in memory, and the second reduces a BLOCKS-row result. The blocks depend
 * on the shape alone, so the order of the operations does not depend on the thread count. A
 * mean is a mean of the blocks' means (the blocks are equal). A reduction of an image's
 * windows over leading and trailing dims (split_planes) goes in two stages as well, the
 * trailing dims first, and so does such a reduction of a convolution's output gradient that
 * is multiplied with the windows of each image (its bias gradient). */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* The blocks the reduced rows are cut into (the largest of these that divides them into
 * blocks of at least BLOCK_MIN_ROWS), and the smallest input worth a second stage. */
static const int64_t block_counts[] = {64, 32, 16, 8};
enum { BLOCK_MIN_ROWS = 16 };
#define SPLIT_MIN_ELEMENTS (1 << 20)

static bool splittable_op(int op) {
  return op == LJG_OP_SUM || op == LJG_OP_MEAN || op == LJG_OP_PROD || op == LJG_OP_AMAX || op == LJG_OP_AMIN;
}

/* Dtypes a reduction computes in: a block's result loses nothing to rounding it to n's dtype
 * (not f16 or bf16, whose sums accumulate in f32). */
static bool splittable_dtype(int dt) { return dt == LJ_F32 || dt == LJ_F64 || dt == LJ_I32 || dt == LJ_I64; }

/* The leading dims reduce n reduces, all of its reduced dims (0: not only leading ones). */
static int leading_reduced(const ljg_gnode *n) {
  uint64_t mask = (uint64_t)n->attr.a[0];
  int r = 0;
  while (r < n->ndim && (mask >> r & 1)) r++;
  return mask >> r == 0 ? r : 0;
}

static bool same_shape(const ljg_gnode *a, const ljg_gnode *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

/* Whether reduction n of x may go in two stages: an op and dtype whose stages' results lose
 * nothing. */
static bool splits_exactly(const ljg_gnode *n, const ljg_gnode *x) {
  return splittable_op(n->op) && x->dtype == n->dtype && splittable_dtype(n->dtype);
}

/* And over an input large enough to pay for a second kernel. */
static bool worth_splitting(const ljg_gnode *n, const ljg_gnode *x) {
  return splits_exactly(n, x) && ljg_gnumel(x) >= SPLIT_MIN_ELEMENTS;
}

/* Whether node i, or one it is computed from through elementwise and view ops (at most
 * `depth` levels down), is an im2col. */
static bool reads_windows(const ljg_graph *g, int32_t i, int depth) {
  const ljg_gnode *n = &g->nodes[i];
  if (n->op == LJG_OP_IM2COL) return true;
  ljg_kind k = ljg_ops[n->op].kind;
  if (depth == 0 || (k != LJG_ELEMWISE && k != LJG_VIEW)) return false;
  for (int j = 0; j < n->nin; j++)
    if (reads_windows(g, ljg_in(g, n)[j], depth - 1)) return true;
  return false;
}

/* Marks in dy[] the nodes that, through views alone, are an operand of a product (mul or
 * matmul) whose other operand reads an image's windows: a convolution's output gradient dY,
 * multiplied per image with the windows for the weight gradient (a depthwise convolution's
 * mul summed by split_planes, a grouped one's batched matmul). A product summed over the
 * batch in one node (matmul_sum) is not one: its routine may sum dY for the bias gradient
 * itself (codegen_llvm: ljc_gemm_b_sum). */
static void mark_conv_dy(const ljg_graph *g, bool *dy) {
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if ((n->op != LJG_OP_MUL && n->op != LJG_OP_MATMUL) || n->nin != 2) continue;
    const int32_t *in = ljg_in(g, n);
    for (int j = 0; j < 2; j++) {
      if (!reads_windows(g, in[1 - j], 8) || reads_windows(g, in[j], 8)) continue;
      for (int32_t x = in[j];; x = ljg_in(g, &g->nodes[x])[0]) {
        dy[x] = true;
        if (ljg_ops[g->nodes[x].op].kind != LJG_VIEW || g->nodes[x].nin != 1) break;
      }
    }
  }
}

/* A reduction over leading and trailing dims, kept dims between, of an image's windows or of
 * a convolution's output gradient (`of_dy`, mark_conv_dy): a depthwise convolution's weight
 * gradient, Σ over images and positions of im2col · dY, [B, C, 1, KH·KW, L] summed over dims 0
 * and 4, or a convolution's bias gradient, Σ of dY [B, C, H, W] over dims 0, 2 and 3: the
 * trailing dims first, then the leading. The first stage's rows are the (image, channel)
 * planes, so it joins the kernel that cuts them or computes dY, and the windows stay on its
 * stack instead of going through memory for a kernel split by channels (231 MB for 32
 * channels of 112×112 at batch 16), or are not cut at all where the kernel reads the image's
 * rows for the sum (codegen_llvm/depthwise.c); dY is summed as it is written instead of read
 * back by a kernel of its own (2.7 of the 17.4 ms of a 3×3 depthwise convolution's gradients
 * over 128 channels of 56×56 at batch 32, one Zen 4 thread). Split at any size: the second
 * stage is a sum of B rows of C·KH·KW or C. -1 when n is not such a reduction. */
static int split_planes(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in, bool of_dy) {
  const ljg_gnode *x = &rw->out.nodes[in[0]];
  uint64_t mask = (uint64_t)n->attr.a[0];
  int lead = 0, trail = 0;
  while (lead < n->ndim && (mask >> lead & 1)) lead++;
  while (trail < n->ndim - lead && (mask >> (n->ndim - 1 - trail) & 1)) trail++;
  if (!splits_exactly(n, x) || lead == 0 || trail == 0 || lead + trail >= n->ndim ||
      __builtin_popcountll(mask) != lead + trail || (!of_dy && !reads_windows(&rw->out, in[0], 8)))
    return -1;
  ljg_gnode first = *n;
  memcpy(first.shape, x->shape, sizeof first.shape);
  for (int d = n->ndim - trail; d < n->ndim; d++) first.shape[d] = 1;
  first.attr.a[0] = (int64_t)(mask & ~((1ull << lead) - 1));
  int32_t fi = ljg_rw_add(rw, &first, in);
  ljg_gnode second = *n;
  second.attr.a[0] = (int64_t)((1ull << lead) - 1);
  return ljg_rw_add(rw, &second, &fi);
}

static int split(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in, bool of_dy) {
  int w = split_planes(rw, n, in, of_dy);
  if (w >= 0) return w;
  const ljg_gnode *x = &rw->out.nodes[in[0]];
  int r = leading_reduced(n);
  if (!worth_splitting(n, x) || r == 0) return ljg_rw_add(rw, n, in);
  int64_t rows = ljg_numel(r, x->shape), blocks = 0;
  for (size_t i = 0; i < sizeof block_counts / sizeof *block_counts && !blocks; i++)
    if (rows % block_counts[i] == 0 && rows / block_counts[i] >= BLOCK_MIN_ROWS) blocks = block_counts[i];
  int kept = x->ndim - r;
  if (!blocks || kept + 2 > LJ_MAX_DIMS) return ljg_rw_add(rw, n, in);
  /* x as [blocks, rows / blocks, kept dims...] */
  ljg_gnode v = *x;
  memset(&v.attr, 0, sizeof v.attr);
  v.op = LJG_OP_RESHAPE;
  v.nin = 1;
  v.param = -1;
  v.loc = n->loc;
  v.ndim = (uint8_t)(kept + 2);
  v.shape[0] = blocks;
  v.shape[1] = rows / blocks;
  memcpy(v.shape + 2, x->shape + r, (size_t)kept * sizeof *v.shape);
  int32_t vi = same_shape(&v, x) ? in[0] : ljg_rw_add(rw, &v, in);
  ljg_gnode first = v;
  first.op = n->op;
  first.dtype = n->dtype;
  first.shape[1] = 1;
  first.attr.a[0] = 2;
  int32_t fi = ljg_rw_add(rw, &first, &vi);
  ljg_gnode second = first;
  second.shape[0] = 1;
  second.attr.a[0] = 1;
  int32_t si = ljg_rw_add(rw, &second, &fi);
  if (same_shape(&second, n)) return si;
  ljg_gnode back = *n;
  memset(&back.attr, 0, sizeof back.attr);
  back.op = LJG_OP_RESHAPE;
  return ljg_rw_add(rw, &back, &si);
}

void ljg_pass_reduce(ljg_graph *g) {
  bool *dy = ljb_xcalloc((size_t)g->n, sizeof *dy);
  mark_conv_dy(g, dy);
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (ljg_ops[n->op].kind == LJG_REDUCE) {
      int32_t x = ljg_in(g, n)[0], in = rw.map[x];
      rw.map[i] = split(&rw, n, &in, dy[x]);
    } else {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
    }
  }
  ljg_rw_finish(&rw, g);
  free(dy);
}
