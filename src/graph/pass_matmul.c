/* pass_matmul.c — batch sums, sums of products and orientation of matmuls.
 * Requires: a verified graph whose view chains are merged (after simplify). Guarantees: the
 * same values at every root (up to the order of float sums), and
 *  - a matmul whose only use is a sum over its batch dim in its dtype (through reshapes that
 *    keep the batch leading) is one matmul_sum: the products are summed as they are computed,
 *    never stored per matrix. This is a weight's gradient when the weight was expanded over
 *    the batch: a convolution's, dW = Σ_b dY_b · cols_bᵀ. A large one sums each half of the
 *    batch, [2, M, N], and an add of its two slices sums them (in_halves);
 *  - the matmuls of every step of a sequence by one matrix, x_t · B for the T slices of a
 *    [T, ...] tensor, are one matmul of its T·R rows, each step's a slice of it (join_steps:
 *    an RNN's input projections);
 *  - a sum of matmuls of one shape, each read only by the sum, is one matmul over their
 *    operands concatenated along k where copying those costs less than storing the products
 *    and adding them (worth_joining): a weight's gradient when the weight served several
 *    steps, an RNN's Σ_t h_tᵀ · dg_t;
 *  - a matmul read only through transposes is replaced by permute(matmul(permute(B),
 *    permute(A))): its readers then read it as it lies, and a transposed root (a linear
 *    layer's weight gradient, computed by autograd as d(Wᵀ) = xᵀ·dY) becomes a reshape of the
 *    product instead of a copy with strided reads;
 *  - a matmul_sum that is not a root is turned likewise when that costs less per multiply-add:
 *    the register tiles' waste (rows past a tile's last, lanes past the last column: a
 *    product 9 columns wide fills 9 of 16 lanes, turned 9 of 12 rows) plus packing B, the
 *    swapped product's counted twice (so that a second run does not turn it back), plus
 *    reading C transposed, where either way would: a weight gradient summed over a batch of
 *    sequences, d(Wᵀ) = Σ xᵀ·dY read only through a transpose, is turned unless its tiles
 *    waste more turned than the copy costs. A B that is the transpose of an im2col is always
 *    turned: as A, the matmul routine packs it from the image (fuse.c), and the im2col is
 *    never stored;
 *  - a matmul or matmul_sum of 16-bit floats (bf16, f16: only a graph read from text has one;
 *    the frontend records its own as this) is one of f32 between casts: its products summed
 *    in f32 and rounded once, as PyTorch's CPU matmul of 16-bit floats does (semantics.md),
 *    by the f32 kernels (they store what they compute, and compute 16-bit floats in f32).
 *
 * The matmul kernels (codegen_llvm/gemm.c) copy B into panels that serve every row sharing
 * them: the M rows of its matrix, or all rows of the batch when B is the same for each (a
 * weight expanded over it). Packing thus costs about (the packer's cost per element) / (rows
 * sharing B) per multiply-add, nothing when B is read in place. A convolution's weight
 * gradient, dY·colsᵀ per image, has M = output channels and a B of positions × taps that must
 * be transposed while packed; swapped, the rows are the taps and the packed operand is dY,
 * several times smaller. The product comes out transposed, [1, N, M]; its readers see it
 * through a permute, which fusion folds into their loads. Only batch sums are turned for
 * packing: their one matrix is small next to the products summed into it, so reading it
 * transposed costs little, while a per-matrix product read transposed by elementwise ops
 * would lose its epilogue (fuse_rows.c) and vector loads. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

static const int64_t swap_last[3] = {0, 2, 1};

/* The vector of columns the matmul kernels' register tiles count in (32 bytes: AVX2's, half of
 * AVX-512's, which wastes no more lanes on narrow products). */
enum { MATMUL_VECTOR_BYTES = 32 };

/* The rows of a matmul of m rows a matrix over `batch` matrices that share one B (seen
 * through view b): the batch's where B is the same for each. */
static int64_t rows_sharing_b(const ljg_view1 *b, int64_t batch, int64_t m) {
  return m * (batch > 1 && b->stride[0] == 0 ? batch : 1);
}

/* B read in place by at most DIRECT_ROWS rows, and B's bytes times those rows at most
 * DIRECT_ROW_BYTES (64 rows of a B of 2 MiB, 16 of 8 MiB): the register tiles each read B's
 * panels where they lie, from the caches after the first. One Zen 5 thread, f32, µs packed ->
 * in place: m × k × n of 32×1024×256 102 -> 79, 32×256×1024 95 -> 89, 32×1024×1024 382 -> 353,
 * 16×2048×1024 394 -> 382, 64×784×512 259-285 -> 225-251; two threads 32×1024×256 57 -> 48,
 * 16×784×512 47 -> 36. Past them the tiles read B from memory: 32×4096×4096 8.8 -> 9.3 ms,
 * 64×1024×1024 678 -> 696 µs. */
enum { DIRECT_ROWS = 64 };
#define DIRECT_ROW_BYTES (128.0 * (1 << 20))

bool ljg_matmul_b_in_place(const ljg_view1 *b, int64_t batch, int64_t m, int64_t k, int64_t n, lj_dtype dt) {
  if (b->stride[2] != 1) return false;
  if (k <= LJG_MATMUL_DIRECT_K) return true;
  int64_t rows = rows_sharing_b(b, batch, m);
  return rows <= DIRECT_ROWS && (double)rows * (double)k * (double)n * (double)lj_dtype_size(dt) <= DIRECT_ROW_BYTES;
}

/* Packing cost per multiply-add of B (seen through view b) for products of m rows of
 * `batch` matrices, k by n, of dtype dt: the packer's cost per element over the rows sharing
 * B. */
static double pack_cost(const ljg_view1 *b, int64_t batch, int64_t m, int64_t k, int64_t n, lj_dtype dt) {
  if (ljg_matmul_b_in_place(b, batch, m, k, n, dt)) return 0;
  double per_elem = b->stride[2] == 1 ? 1 : b->stride[1] == 1 ? 2 : 4;
  return per_elem / (double)rows_sharing_b(b, batch, m);
}

/* The single-level view operand i of the matmul reads, or false. */
static bool operand_view(const ljg_graph *g, int32_t i, ljg_view1 *out) {
  ljg_view v;
  if (!ljg_chain_view(g, i, ljg_strip_views(g, i), &v) || v.n != 1) return false;
  *out = v.v[0];
  return true;
}

/* Multiply-adds the register tiles make per one of an m × n product's: rows go in tiles of
 * LJG_MATMUL_TILE_ROWS, columns in vectors of MATMUL_VECTOR_BYTES (what is past the last row or
 * column is computed and dropped). */
static double tile_cost(int64_t m, int64_t n, lj_dtype dt) {
  int64_t lanes = MATMUL_VECTOR_BYTES / lj_dtype_size(dt);
  int64_t rows = (m + LJG_MATMUL_TILE_ROWS - 1) / LJG_MATMUL_TILE_ROWS * LJG_MATMUL_TILE_ROWS;
  int64_t cols = (n + lanes - 1) / lanes * lanes;
  return (double)rows / (double)m * (double)cols / (double)n;
}

/* What reading an element of a product transposed costs, in the register tiles' multiply-adds
 * (about a cycle: a transposed copy of a [768, 3072] weight gradient took 1.4 cycles an
 * element on one Zen 5 core). */
enum { READ_TRANSPOSED_COST = 32 };

/* Whether a product of a · b (views; `batch` products of m × k by k × n, summed) costs less a
 * multiply-add turned, bᵀ · aᵀ: the swapped product's packing counted twice (whichever way its
 * small result is then read: a rule that also looked at that could turn it back and forth),
 * and the way that is read transposed (read_transposed: this one, else the turned one) paying
 * READ_TRANSPOSED_COST an element of C. */
static bool cheaper_turned(const ljg_view1 *a, const ljg_view1 *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                           lj_dtype dt, bool read_transposed) {
  double read = (double)READ_TRANSPOSED_COST / ((double)batch * (double)k);
  ljg_view1 at = *a; /* Aᵀ, the B of the swapped product */
  at.stride[1] = a->stride[2];
  at.stride[2] = a->stride[1];
  double turned = tile_cost(n, m, dt) + 2 * pack_cost(&at, batch, n, k, m, dt) + (read_transposed ? 0 : read);
  return turned < tile_cost(m, n, dt) + pack_cost(b, batch, m, k, n, dt) + (read_transposed ? read : 0);
}

/* Whether matmul_sum n (operands in), read only through transposes of its last two dims or
 * not (read_transposed), is worth turning. */
static bool worth_swapping(const ljg_graph *g, const ljg_gnode *n, const int32_t *in, bool read_transposed) {
  if (n->dtype != LJ_F32 && n->dtype != LJ_F64) return false;
  if (ljg_cols_operand(g, in[1], true) >= 0) return true; /* A, packed from the image */
  if (ljg_cols_operand(g, in[0], false) >= 0) return false; /* turned, B would be the above */
  int64_t batch = g->nodes[in[0]].shape[0], m = n->shape[1], nn = n->shape[2], k = g->nodes[in[0]].shape[2];
  if (ljg_gnumel(n) == 0 || k == 0) return false;
  ljg_view1 a, b;
  if (!operand_view(g, in[0], &a) || !operand_view(g, in[1], &b)) return false;
  return cheaper_turned(&a, &b, batch, m, nn, k, n->dtype, read_transposed);
}

/* Whether n permutes the last two dims of a batch of matrices. */
static bool swaps_last(const ljg_gnode *n) {
  return n->op == LJG_OP_PERMUTE && n->ndim == 3 && n->attr.a[0] == 0 && n->attr.a[1] == 2;
}

static int transposed(ljg_rewriter *rw, const ljg_gnode *x, int32_t in) {
  ljg_gnode p = *x;
  memset(&p.attr, 0, sizeof p.attr);
  p.op = LJG_OP_PERMUTE;
  p.nin = 1;
  p.param = -1;
  p.shape[1] = x->shape[2];
  p.shape[2] = x->shape[1];
  for (int d = 0; d < 3; d++) p.attr.a[d] = swap_last[d];
  return ljg_rw_add(rw, &p, &in);
}

/* uses[i]: the operands and roots that are node i. */
static int *count_uses(const ljg_graph *g) {
  int *uses = calloc((size_t)g->n + 1, sizeof *uses);
  for (int i = 0; i < g->n; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) uses[ljg_in(g, &g->nodes[i])[k]]++;
  for (int r = 0; r < g->nroots; r++) uses[g->roots[r]]++;
  return uses;
}

/* The matmul whose batch sum node n is, seen through single-use reshapes, or -1. */
static int32_t summed_matmul(const ljg_graph *g, const ljg_gnode *n, const int *uses) {
  if (n->op != LJG_OP_SUM) return -1;
  int32_t x = ljg_in(g, n)[0];
  const ljg_gnode *r = &g->nodes[x];
  while (g->nodes[x].op == LJG_OP_RESHAPE && uses[x] == 1) x = ljg_in(g, &g->nodes[x])[0];
  const ljg_gnode *mm = &g->nodes[x];
  if (mm->op != LJG_OP_MATMUL || uses[x] != 1 || mm->dtype != n->dtype || mm->shape[0] < 2) return -1;
  /* the reduced dims of the sum's operand are the batch, ahead of every kept dim */
  uint64_t mask = (uint64_t)n->attr.a[0];
  int64_t reduced = 1;
  bool kept_seen = false;
  for (int d = 0; d < r->ndim; d++) {
    if (r->shape[d] == 1) continue;
    bool red = mask >> d & 1;
    if (red && kept_seen) return -1;
    kept_seen |= !red;
    if (red) reduced *= r->shape[d];
  }
  return reduced == mm->shape[0] ? x : -1;
}

/* Whether the batch sum of matmul mm (k terms a product) is computed as two, of the batch's
 * first half and of its second, added after: an even batch of at least HALVES_MIN_BATCH
 * matrices, at least HALVES_MIN_TERMS products summed into each element of C (so that the
 * second half's pass over C and the sum of the two cost little next to them) and
 * HALVES_MIN_WORK multiply-adds (enough for two threads). The matmul kernel's tasks are then
 * the rows of the two halves' sums, so that on two threads each reads only its half's
 * operands, which the kernels before wrote on the same thread (their tasks split the batch
 * too): a convolution's weight gradient reads its half of the images and of dY, and the
 * Winograd routine transforms each image once instead of on every thread. The bits of the
 * result do not depend on the thread count. Measured, MNISTNet's training step at batch 64
 * on two threads: its conv2 weight gradient (Winograd) 0.80 -> 0.59 ms, the step's first
 * kernel (conv1, which writes what the weight gradients read) 0.45 -> 0.33, pool2's gradient
 * 0.28 -> 0.14; the step 3.85-4.08 -> 3.57-3.75 ms; one thread unchanged (5.7-6.0 ms).
 * conv2's weight gradient alone at batch 8, 16 and 32: two threads 0.193 -> 0.089-0.093 ms,
 * 0.182 -> 0.171, 0.323-0.330 -> 0.286-0.295; one thread pays the second half's clearing and
 * transform of dU (Winograd), 0.140-0.145 -> 0.152, 0.277-0.297 -> 0.289-0.315,
 * 0.547-0.552 -> 0.573 (medians). */
enum { HALVES_MIN_BATCH = 8, HALVES_MIN_TERMS = 1024 };
#define HALVES_MIN_WORK ((double)(1 << 20))

static bool in_halves(const ljg_gnode *mm, int64_t k) {
  int64_t batch = mm->shape[0];
  return batch % 2 == 0 && batch >= HALVES_MIN_BATCH && batch * k >= HALVES_MIN_TERMS &&
         (double)batch * (double)mm->shape[1] * (double)mm->shape[2] * (double)k >= HALVES_MIN_WORK;
}

static void batch_sums(ljg_graph *g) {
  int *uses = count_uses(g);
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    int32_t x = summed_matmul(g, n, uses);
    if (x < 0) {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
      continue;
    }
    const ljg_gnode *mm = &g->nodes[x];
    int32_t in[2] = {rw.map[ljg_in(g, mm)[0]], rw.map[ljg_in(g, mm)[1]]};
    ljg_gnode s = *mm;
    s.op = LJG_OP_MATMUL_SUM;
    s.shape[0] = in_halves(mm, g->nodes[ljg_in(g, mm)[0]].shape[2]) ? 2 : 1;
    int32_t c = ljg_rw_add(&rw, &s, in);
    if (s.shape[0] > 1) { /* the halves' sums added, as two slices: elementwise */
      ljg_gnode t = s;
      memset(&t.attr, 0, sizeof t.attr);
      t.op = LJG_OP_SLICE;
      t.nin = 1;
      t.shape[0] = 1;
      t.attr.a[2] = 1;
      int32_t half[2];
      for (int h = 0; h < 2; h++) {
        t.attr.a[1] = h;
        half[h] = ljg_rw_add(&rw, &t, &c);
      }
      memset(&t.attr, 0, sizeof t.attr);
      t.op = LJG_OP_ADD;
      t.nin = 2;
      c = ljg_rw_add(&rw, &t, half);
    }
    if (memcmp(rw.out.nodes[c].shape, n->shape, sizeof n->shape) == 0 && rw.out.nodes[c].ndim == n->ndim) {
      rw.map[i] = c; /* read as it is: orient() then sees its readers */
      continue;
    }
    ljg_gnode r = *n;
    memset(&r.attr, 0, sizeof r.attr);
    r.op = LJG_OP_RESHAPE;
    rw.map[i] = ljg_rw_add(&rw, &r, &c);
  }
  free(uses);
  ljg_rw_finish(&rw, g);
}

typedef LJB_VEC(int32_t) index_vec;

/* Whether node x is a term only sum n reads: of n's dtype and shape, used once. */
static bool own_term(const ljg_graph *g, int32_t x, const ljg_gnode *n, const int *uses) {
  const ljg_gnode *t = &g->nodes[x];
  return uses[x] == 1 && t->dtype == n->dtype && t->ndim == n->ndim && memcmp(t->shape, n->shape, sizeof n->shape) == 0;
}

/* Whether node x is an add inside sum n that only the sum reads. */
static bool own_add(const ljg_graph *g, int32_t x, const ljg_gnode *n, const int *uses) {
  return g->nodes[x].op == LJG_OP_ADD && own_term(g, x, n, uses);
}

/* The matmul that term x of sum n is, seen through a reshape to n's shape (a product of
 * matrices, [1, m, n], added as [m, n]), when only the sum reads it; else -1. */
static int32_t own_product(const ljg_graph *g, int32_t x, const ljg_gnode *n, const int *uses) {
  if (!own_term(g, x, n, uses)) return -1;
  const ljg_gnode *t = &g->nodes[x];
  if (t->op == LJG_OP_RESHAPE) {
    x = ljg_in(g, t)[0];
    t = &g->nodes[x];
    if (uses[x] != 1) return -1;
  }
  return t->op == LJG_OP_MATMUL ? x : -1;
}

/* A matmul with the keys it is ordered by, the first first. */
typedef struct keyed {
  int64_t key[3];
  int32_t node;
} keyed;

static int by_keys(const void *x, const void *y) {
  const keyed *p = x, *q = y;
  for (int i = 0; i < 3; i++)
    if (p->key[i] != q->key[i]) return (p->key[i] > q->key[i]) - (p->key[i] < q->key[i]);
  return 0;
}

/* The terms of the sum whose last add is node n (a tree of the adds that are its own parts):
 * its products in prods, by their operands (sums over the same steps then concatenate an
 * operand they share alike, an LSTM's input and recurrent weight gradients their dg_t: one
 * cat), the other terms in rest. */
static void sum_terms(const ljg_graph *g, int32_t n, const int *uses, index_vec *prods, index_vec *rest) {
  index_vec stack = {0};
  ljb_vec_push(&stack, n);
  while (stack.n) {
    int32_t x = stack.a[--stack.n], mm;
    if (x == n || own_add(g, x, &g->nodes[n], uses)) {
      ljb_vec_push(&stack, ljg_in(g, &g->nodes[x])[1]);
      ljb_vec_push(&stack, ljg_in(g, &g->nodes[x])[0]);
    } else if ((mm = own_product(g, x, &g->nodes[n], uses)) >= 0) {
      ljb_vec_push(prods, mm);
    } else {
      ljb_vec_push(rest, x);
    }
  }
  ljb_vec_free(&stack);
  keyed *p = ljb_xalloc((size_t)prods->n * sizeof *p + 1);
  for (int i = 0; i < prods->n; i++) {
    const int32_t *in = ljg_in(g, &g->nodes[prods->a[i]]);
    p[i] = (keyed){.key = {in[1], in[0]}, .node = prods->a[i]}; /* by B, then A */
  }
  qsort(p, (size_t)prods->n, sizeof *p, by_keys);
  for (int i = 0; i < prods->n; i++) prods->a[i] = p[i].node;
  free(p);
}

/* Whether the products prods ([b, m, k_i] · [b, k_i, n] each) cost less as one product of
 * their operands concatenated along k: the copies of the operands, Σ k_i · (m + n) elements
 * a matrix, against the products but one stored and read back by the adds, 2 · m · n each.
 * An LSTM's recurrent weight gradient, Σ_t h_tᵀ · dg_t over T steps of a batch of 32 (k_i),
 * is one product of k = 32·T instead of T products written in full. */
static bool worth_joining(const ljg_graph *g, const index_vec *prods) {
  if (prods->n < 2 || ljg_gnumel(&g->nodes[prods->a[0]]) == 0) return false;
  const ljg_gnode *first = &g->nodes[prods->a[0]];
  double m = (double)first->shape[1], n = (double)first->shape[2], k = 0;
  for (int i = 0; i < prods->n; i++) {
    const ljg_gnode *p = &g->nodes[prods->a[i]];
    int64_t ki = g->nodes[ljg_in(g, p)[0]].shape[2];
    if (ki == 0 || memcmp(p->shape, first->shape, sizeof p->shape)) return false;
    k += (double)ki;
  }
  return k * (m + n) <= 2.0 * (prods->n - 1) * m * n;
}

/* Whether node x is a transpose of its last two dims: a permute, or a matrix's transpose
 * reshaped to one matrix of a batch (how the simplify pass leaves a linear layer's xᵀ). */
static bool is_transpose(const ljg_graph *g, int32_t x) {
  const ljg_gnode *n = &g->nodes[x];
  if (n->op == LJG_OP_PERMUTE) return swaps_last(n);
  if (n->op != LJG_OP_RESHAPE || n->ndim != 3 || n->shape[0] != 1) return false;
  const ljg_gnode *p = &g->nodes[ljg_in(g, n)[0]];
  return p->op == LJG_OP_PERMUTE && p->ndim == 2 && p->attr.a[0] == 1 && n->shape[1] == p->shape[0];
}

/* Operand `which` (0: A, 1: B) of the products, concatenated along k: when one of them is a
 * transpose (a weight gradient's xᵀ), the transpose of the cat of their transposes (which
 * the simplify pass then folds with theirs), so that the cat copies rows as they lie. */
static int32_t joined_operand(ljg_rewriter *rw, const ljg_graph *g, const index_vec *prods, int which) {
  bool swapped = false;
  for (int i = 0; i < prods->n; i++) swapped |= is_transpose(g, ljg_in(g, &g->nodes[prods->a[i]])[which]);
  int dim = (which == 0) != swapped ? 2 : 1;
  int32_t *in = ljb_xalloc((size_t)prods->n * sizeof *in);
  int64_t k = 0;
  for (int i = 0; i < prods->n; i++) {
    int32_t x = rw->map[ljg_in(g, &g->nodes[prods->a[i]])[which]];
    in[i] = swapped ? transposed(rw, &rw->out.nodes[x], x) : x;
    k += rw->out.nodes[in[i]].shape[dim];
  }
  ljg_gnode c = rw->out.nodes[in[0]];
  memset(&c.attr, 0, sizeof c.attr);
  c.op = LJG_OP_CAT;
  c.nin = prods->n;
  c.param = -1;
  c.shape[dim] = k;
  c.attr.a[0] = dim;
  int32_t r = ljg_rw_add(rw, &c, in);
  free(in);
  return swapped ? transposed(rw, &rw->out.nodes[r], r) : r;
}

/* Sums of products of one shape that pay (worth_joining) become one product over their
 * operands concatenated along k, the sum's other terms added to it; true when one did. */
static bool join_sums(ljg_graph *g) {
  int *uses = count_uses(g);
  bool *part = ljb_xcalloc((size_t)g->n + 1, 1), joined = false;
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (n->op != LJG_OP_ADD) continue;
    for (int k = 0; k < 2; k++) part[ljg_in(g, n)[k]] |= own_add(g, ljg_in(g, n)[k], n, uses);
  }
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  index_vec prods = {0}, rest = {0};
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    prods.n = rest.n = 0;
    if (n->op == LJG_OP_ADD && !part[i]) sum_terms(g, i, uses, &prods, &rest);
    if (!worth_joining(g, &prods)) {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
      continue;
    }
    int32_t in[2] = {joined_operand(&rw, g, &prods, 0), joined_operand(&rw, g, &prods, 1)};
    int32_t c = ljg_rw_add(&rw, &g->nodes[prods.a[0]], in);
    if (memcmp(rw.out.nodes[c].shape, n->shape, sizeof n->shape) || rw.out.nodes[c].ndim != n->ndim) {
      ljg_gnode r = *n;
      memset(&r.attr, 0, sizeof r.attr);
      r.op = LJG_OP_RESHAPE;
      r.nin = 1;
      c = ljg_rw_add(&rw, &r, &c);
    }
    for (int t = 0; t < rest.n; t++) c = ljg_rw_add(&rw, n, (const int32_t[]){c, rw.map[rest.a[t]]});
    rw.map[i] = c;
    joined = true;
  }
  ljb_vec_free(&prods);
  ljb_vec_free(&rest);
  free(part);
  free(uses);
  ljg_rw_finish(&rw, g);
  return joined;
}

/* The step of a sequence x that matmul i multiplies: its A is slice t of x along x's first
 * dim (seen through a reshape to [1, R, K]: x is [T, ...] of T·R·K elements), and its B one
 * matrix; else -1. */
static int64_t step_of(const ljg_graph *g, int32_t i, int32_t *x) {
  const ljg_gnode *n = &g->nodes[i];
  if (n->op != LJG_OP_MATMUL || n->shape[0] != 1 || g->nodes[ljg_in(g, n)[1]].shape[0] != 1) return -1;
  const ljg_gnode *a = &g->nodes[ljg_in(g, n)[0]], *s = a;
  if (s->op == LJG_OP_RESHAPE) s = &g->nodes[ljg_in(g, s)[0]];
  if (s->op != LJG_OP_SLICE || s->attr.a[0] != 0 || s->attr.a[2] != 1 || s->shape[0] != 1) return -1;
  *x = ljg_in(g, s)[0];
  const ljg_gnode *seq = &g->nodes[*x];
  return ljg_gnumel(seq) == seq->shape[0] * a->shape[1] * a->shape[2] ? s->attr.a[1] : -1;
}

/* Products of every step of a sequence by one matrix, x_t · B for the T slices x_t of a [T, R,
 * K] tensor (an RNN's input projections, a head applied at every step), are one product of
 * its T·R rows, each step's product the slice of its rows: one kernel, B's panels packed once
 * for all rows. True when some were joined. */
static bool join_steps(ljg_graph *g) {
  keyed *sp = ljb_xalloc(((size_t)g->n + 1) * sizeof *sp); /* by sequence, B, step */
  int count = 0;
  for (int i = 0; i < g->n; i++) {
    int32_t x;
    int64_t t = step_of(g, i, &x);
    if (t >= 0) sp[count++] = (keyed){.key = {x, ljg_in(g, &g->nodes[i])[1], t}, .node = i};
  }
  qsort(sp, (size_t)count, sizeof *sp, by_keys);
  int32_t *first = ljb_xalloc(((size_t)g->n + 1) * sizeof *first); /* per matmul joined: its group's first */
  for (int i = 0; i < g->n; i++) first[i] = -1;
  bool joined = false;
  for (int lo = 0, hi; lo < count; lo = hi) {
    bool whole = true;
    for (hi = lo; hi < count && sp[hi].key[0] == sp[lo].key[0] && sp[hi].key[1] == sp[lo].key[1]; hi++)
      whole &= sp[hi].key[2] == hi - lo;
    if (!whole || hi - lo < 2 || hi - lo != g->nodes[sp[lo].key[0]].shape[0]) continue;
    int32_t f = sp[lo].node;
    for (int k = lo; k < hi; k++) f = sp[k].node < f ? sp[k].node : f;
    for (int k = lo; k < hi; k++) first[sp[k].node] = f;
    joined = true;
  }
  free(sp);
  if (!joined) {
    free(first);
    return false;
  }
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  int32_t *joint = ljb_xalloc(((size_t)g->n + 1) * sizeof *joint); /* per group's first: the product */
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (first[i] < 0) {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
      continue;
    }
    int32_t x;
    int64_t t = step_of(g, i, &x), rows = g->nodes[ljg_in(g, n)[0]].shape[1];
    if (first[i] == i) { /* x as [1, T·R, K] */
      ljg_gnode r = g->nodes[ljg_in(g, n)[0]];
      memset(&r.attr, 0, sizeof r.attr);
      r.op = LJG_OP_RESHAPE;
      r.nin = 1;
      r.param = -1;
      r.shape[1] = g->nodes[x].shape[0] * rows;
      int32_t in[2] = {ljg_rw_add(&rw, &r, &rw.map[x]), rw.map[ljg_in(g, n)[1]]};
      ljg_gnode mm = *n;
      mm.shape[1] = r.shape[1];
      joint[i] = ljg_rw_add(&rw, &mm, in);
    }
    ljg_gnode sl = *n;
    memset(&sl.attr, 0, sizeof sl.attr);
    sl.op = LJG_OP_SLICE;
    sl.nin = 1;
    sl.attr.a[0] = 1;
    sl.attr.a[1] = t * rows;
    sl.attr.a[2] = 1;
    rw.map[i] = ljg_rw_add(&rw, &sl, &joint[first[i]]);
  }
  free(joint);
  free(first);
  ljg_rw_finish(&rw, g);
  return true;
}

/* Whether each node is used, and only as the operand of transposes of its last two dims
 * (never as a root). */
static bool *read_transposed(const ljg_graph *g, const bool *root) {
  bool *t = calloc((size_t)g->n + 1, 1), *used = calloc((size_t)g->n + 1, 1);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    bool swap = swaps_last(n);
    for (int k = 0; k < n->nin; k++) {
      int32_t x = ljg_in(g, n)[k];
      t[x] = (used[x] ? t[x] : true) && swap;
      used[x] = true;
    }
  }
  for (int i = 0; i < g->n; i++) t[i] &= !root[i];
  free(used);
  return t;
}

/* Whether matmul n (operands in) is a matrix-vector product, turned: one column (N = 1) and
 * more rows. As it is, its register tiles multiply a vector of one lane by each element of A,
 * loaded one by one; turned, its one row takes dot products along k where A's rows and the
 * vector are contiguous (dot_rows_of in gemm.c), adds B's rows into its sums where A's columns
 * are (axpy_rows_of), and otherwise runs tiles of one row. Its C is [b, M, 1] as it lies either
 * way, so turning copies nothing. One Zen 5 thread, A of 4096 × 4096 times a vector: 4.95 ->
 * 1.34-1.57 ms (PyTorch 1.93), Aᵀ times it 7.8 -> 1.5, a column of a matrix for the vector
 * 5.1 -> 3.6; 8 matrices of 1024 × 1024 each times its vector 2.19 -> 0.68. Not for an im2col
 * operand, which the kernels read packed from its image only as B or as A untransposed. */
static bool turned_vector_product(const ljg_graph *g, const ljg_gnode *n, const int32_t *in) {
  return (n->dtype == LJ_F32 || n->dtype == LJ_F64) && n->shape[2] == 1 && n->shape[1] > 1 &&
         ljg_cols_operand(g, in[0], false) < 0 && ljg_cols_operand(g, in[1], false) < 0;
}

static void orient(ljg_graph *g) {
  bool *root = calloc((size_t)g->n + 1, 1);
  for (int r = 0; r < g->nroots; r++) root[g->roots[r]] = true;
  bool *transposed_only = read_transposed(g, root);
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    const int32_t *oin = ljg_in(g, n);
    bool turn = n->op == LJG_OP_MATMUL ? transposed_only[i] || turned_vector_product(g, n, oin)
                : n->op == LJG_OP_MATMUL_SUM && !root[i] && worth_swapping(g, n, oin, transposed_only[i]);
    if (!turn) {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
      continue;
    }
    const ljg_graph *out = &rw.out;
    int32_t in[2];
    in[0] = transposed(&rw, &out->nodes[rw.map[oin[1]]], rw.map[oin[1]]);
    in[1] = transposed(&rw, &out->nodes[rw.map[oin[0]]], rw.map[oin[0]]);
    ljg_gnode mm = *n;
    mm.shape[1] = n->shape[2];
    mm.shape[2] = n->shape[1];
    int32_t c = ljg_rw_add(&rw, &mm, in);
    rw.map[i] = transposed(&rw, &rw.out.nodes[c], c);
  }
  free(root);
  free(transposed_only);
  ljg_rw_finish(&rw, g);
}

static bool is_half_product(const ljg_gnode *n) {
  return (n->op == LJG_OP_MATMUL || n->op == LJG_OP_MATMUL_SUM) && (n->dtype == LJ_BF16 || n->dtype == LJ_F16);
}

/* Node x (new index) cast to dtype dt. */
static int cast_to(ljg_rewriter *rw, int32_t x, lj_dtype dt) {
  ljg_gnode c = rw->out.nodes[x];
  memset(&c.attr, 0, sizeof c.attr);
  c.op = LJG_OP_CAST;
  c.dtype = (uint8_t)dt;
  c.nin = 1;
  c.param = -1;
  return ljg_rw_add(rw, &c, &x);
}

/* Each 16-bit float matmul and matmul_sum as an f32 one between casts (the file's comment). */
static void widen_half_products(ljg_graph *g) {
  bool any = false;
  for (int i = 0; i < g->n && !any; i++) any = is_half_product(&g->nodes[i]);
  if (!any) return;
  ljg_rewriter rw;
  ljg_rw_init(&rw, g);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (!is_half_product(n)) {
      rw.map[i] = ljg_rw_copy(&rw, g, i);
      continue;
    }
    const int32_t *oin = ljg_in(g, n);
    int32_t in[2] = {cast_to(&rw, rw.map[oin[0]], LJ_F32), cast_to(&rw, rw.map[oin[1]], LJ_F32)};
    ljg_gnode mm = *n;
    mm.dtype = LJ_F32;
    rw.map[i] = cast_to(&rw, ljg_rw_add(&rw, &mm, in), (lj_dtype)n->dtype);
  }
  ljg_rw_finish(&rw, g);
}

void ljg_pass_matmul(ljg_graph *g) {
  widen_half_products(g);
  /* the products joined are read by no one: the uses are counted next */
  if (join_steps(g)) ljg_pass_dce(g);
  if (join_sums(g)) ljg_pass_dce(g);
  batch_sums(g);
  orient(g);
}
