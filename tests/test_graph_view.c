/* test_graph_view.c — the view algebra (graph/view.c) against brute force: random chains of
 * reshape, permute, expand and slice are applied both to a strided view and to an explicit
 * table of element offsets, and every index of the result must map to the same offset.
 * Also checks that compatible reshapes stay one level (affine loads) and incompatible ones
 * (reshaping a transpose) add a level. */
#include "test_util.h"

#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* An explicit view: the buffer offset of every element of shape, row-major. */
typedef struct table {
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  int64_t *off;
} table;

static int64_t numel_of(const table *t) { return ljg_numel(t->ndim, t->shape); }

static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx) {
  int64_t i = 0;
  for (int d = 0; d < ndim; d++) i = i * shape[d] + idx[d];
  return i;
}

/* Applies the view node op to the table, as the interpreter would to data. */
static void table_apply(table *t, const ljg_gnode *op) {
  table r = {op->ndim, {0}, NULL};
  memcpy(r.shape, op->shape, sizeof r.shape);
  int64_t n = numel_of(&r);
  r.off = malloc((size_t)(n + 1) * sizeof *r.off);
  int64_t idx[LJ_MAX_DIMS], src[LJ_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    unravel(i, r.ndim, r.shape, idx);
    switch (op->op) {
    case LJG_OP_RESHAPE: r.off[i] = t->off[i]; continue;
    case LJG_OP_PERMUTE:
      for (int d = 0; d < r.ndim; d++) src[op->attr.a[d]] = idx[d];
      break;
    case LJG_OP_EXPAND:
      for (int d = 0; d < r.ndim; d++) src[d] = t->shape[d] == 1 ? 0 : idx[d];
      break;
    default:
      memcpy(src, idx, sizeof src);
      src[op->attr.a[0]] = op->attr.a[1] + idx[op->attr.a[0]] * op->attr.a[2];
      break;
    }
    r.off[i] = t->off[ravel(t->ndim, t->shape, src)];
  }
  free(t->off);
  *t = r;
}

static uint64_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* A random view op that fits shape (ndim dims). */
static ljg_gnode random_op(uint64_t *s, int ndim, const int64_t *shape) {
  ljg_gnode op = {0};
  op.ndim = (uint8_t)ndim;
  memcpy(op.shape, shape, (size_t)ndim * sizeof *shape);
  switch (rnd(s) % 4) {
  case 0: { /* reshape: split or merge dims at random */
    int64_t n = ljg_numel(ndim, shape), out[LJ_MAX_DIMS];
    int k = 0;
    while (n > 1 && k < 5) {
      int64_t f = 1 + (int64_t)(rnd(s) % 4);
      while (n % f) f--;
      out[k++] = f;
      n /= f;
    }
    if (n > 1 || k == 0) out[k++] = n;
    op.op = LJG_OP_RESHAPE;
    op.ndim = (uint8_t)k;
    memcpy(op.shape, out, (size_t)k * sizeof *out);
    break;
  }
  case 1: /* permute */
    op.op = LJG_OP_PERMUTE;
    for (int d = 0; d < ndim; d++) op.attr.a[d] = d;
    for (int d = ndim - 1; d > 0; d--) {
      int j = (int)(rnd(s) % (uint64_t)(d + 1));
      int64_t tmp = op.attr.a[d];
      op.attr.a[d] = op.attr.a[j];
      op.attr.a[j] = tmp;
    }
    for (int d = 0; d < ndim; d++) op.shape[d] = shape[op.attr.a[d]];
    break;
  case 2: /* expand the size-1 dims */
    op.op = LJG_OP_EXPAND;
    for (int d = 0; d < ndim; d++)
      if (shape[d] == 1) op.shape[d] = 1 + (int64_t)(rnd(s) % 3);
    break;
  default: { /* slice */
    int d = (int)(rnd(s) % (uint64_t)ndim);
    int64_t step = 1 + (int64_t)(rnd(s) % 2), start = (int64_t)(rnd(s) % (uint64_t)shape[d]);
    op.op = LJG_OP_SLICE;
    op.attr.a[0] = d;
    op.attr.a[1] = start;
    op.attr.a[2] = step;
    op.shape[d] = (shape[d] - start + step - 1) / step;
    break;
  }
  }
  return op;
}

START_TEST(test_random_view_chains) {
  uint64_t s = 42;
  int multi = 0;
  for (int trial = 0; trial < 2000; trial++) {
    table t = {3, {2 + (int64_t)(rnd(&s) % 3), 1 + (int64_t)(rnd(&s) % 4), 2 + (int64_t)(rnd(&s) % 3)}, NULL};
    int64_t n = numel_of(&t);
    t.off = malloc((size_t)n * sizeof *t.off);
    for (int64_t i = 0; i < n; i++) t.off[i] = i;
    ljg_view v;
    ljg_view_contiguous(&v, t.ndim, t.shape);
    bool ok = true;
    for (int step = 0; step < 6 && ok; step++) {
      ljg_gnode op = random_op(&s, t.ndim, t.shape);
      ok = ljg_view_apply(&v, &op);
      if (ok) table_apply(&t, &op);
    }
    multi += v.n > 1;
    int64_t idx[LJ_MAX_DIMS];
    for (int64_t i = 0, m = numel_of(&t); ok && i < m; i++) {
      unravel(i, t.ndim, t.shape, idx);
      ck_assert_msg(ljg_view_offset(&v, idx) == t.off[i], "trial %d, element %lld: view %lld, table %lld", trial,
                    (long long)i, (long long)ljg_view_offset(&v, idx), (long long)t.off[i]);
    }
    free(t.off);
  }
  ck_assert_int_gt(multi, 0); /* the chains did exercise multi-level views */
}
END_TEST

START_TEST(test_levels) {
  ljg_view v;
  ljg_view_contiguous(&v, 3, (const int64_t[]){4, 5, 6});
  ck_assert(ljg_view_reshape(&v, 2, (const int64_t[]){20, 6}));
  ck_assert(ljg_view_reshape(&v, 4, (const int64_t[]){2, 2, 5, 6}));
  ck_assert_int_eq(v.n, 1); /* merges and splits of contiguous dims stay affine */
  ljg_view_permute(&v, (const int64_t[]){3, 1, 2, 0});
  ljg_view_expand(&v, (const int64_t[]){6, 2, 5, 2});
  ck_assert(ljg_view_reshape(&v, 3, (const int64_t[]){6, 10, 2}));
  ck_assert_int_eq(v.n, 1); /* merging dims 1 and 2 of a permuted view: still strides */
  ck_assert(ljg_view_reshape(&v, 2, (const int64_t[]){60, 2}));
  ck_assert_int_eq(v.n, 2); /* merging across the permutation needs a second level */
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("graph_view");
  TCase *tc = tu_tcase("view");
  tcase_add_test(tc, test_random_view_chains);
  tcase_add_test(tc, test_levels);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
