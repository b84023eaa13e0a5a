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
 * mean is a mean of the blocks' means (the blocks are equal). */
#include "graph/graph.h"

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

static int split(ljg_rewriter *rw, const ljg_gnode *n, const int32_t *in) {
  const ljg_gnode *x = &rw->out.nodes[in[0]];
  int r = leading_reduced(n);
  if (!splittable_op(n->op) || r == 0 || x->dtype != n->dtype || !splittable_dtype(n->dtype) ||
      ljg_gnumel(x) < SPLIT_MIN_ELEMENTS)
    return ljg_rw_add(rw, n, in);
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
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (ljg_ops[n->op].kind == LJG_REDUCE) {
      int32_t in = rw.map[ljg_in(g, n)[0]];
      rw.map[i] = split(&rw, n, &in);
    } else {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
    }
  }
  ljg_rw_finish(&rw, g);
}
