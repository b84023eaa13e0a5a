/* test_ops_shape.c — reshape (with -1), permute, transpose, expand, squeeze, unsqueeze,
 * flatten, slice (negative and clamped bounds, steps) and cat against the interpreter, for
 * every dtype, including compositions that need multi-level views (reshape of a transpose)
 * and view chains feeding elementwise ops; transposed operands read in tiles; and their shape
 * errors. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

static void check_shape(lj_tensor *t, int ndim, const int64_t *shape) {
  ck_assert_msg(t, "%s", lj_last_error());
  ck_assert_int_eq(lj_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) ck_assert_int_eq(lj_tensor_shape(t)[i], shape[i]);
}

START_TEST(test_views_all_dtypes) {
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(2, 3, 4), TU_ANY, 30 + di);
    lj_tensor *ts[32];
    int n = 0;
    ts[n++] = lj_reshape(x, LJ_SHAPE(4, -1));
    ts[n++] = lj_reshape(x, LJ_SHAPE(24));
    ts[n++] = lj_permute(x, 3, (const int[]){2, 0, 1});
    ts[n++] = lj_transpose(x, -1, 0);
    ts[n++] = lj_expand(lj_slice(x, 1, 0, 1, 1), LJ_SHAPE(5, 2, 3, 4));
    ts[n++] = lj_unsqueeze(x, 1);
    ts[n++] = lj_squeeze(lj_unsqueeze(x, -1), 0, NULL);
    ts[n++] = lj_flatten(x, 1, 2);
    ts[n++] = lj_slice(x, 2, -3, 100, 2);
    ts[n++] = lj_slice(x, 0, -100, -1, 1);
    ts[n++] = lj_slice(x, 1, 2, 1, 1); /* empty */
    /* reshape of a transpose: a two-level view */
    ts[n++] = lj_reshape(lj_transpose(x, 0, 2), LJ_SHAPE(6, 4));
    ts[n++] = lj_flatten(lj_permute(x, 3, (const int[]){1, 2, 0}), 0, -1);
    /* views under an elementwise op, and a slice of a broadcast */
    lj_tensor *y = lj_add(lj_transpose(lj_reshape(x, LJ_SHAPE(6, 4)), 0, 1), lj_slice(lj_reshape(x, LJ_SHAPE(4, 6)), 0, 0, 4, 1));
    ts[n++] = y;
    ts[n++] = lj_slice(lj_expand(lj_reshape(x, LJ_SHAPE(1, 24)), LJ_SHAPE(3, 24)), 1, 1, 20, 4);
    ts[n++] = lj_cat(3, (lj_tensor *const[]){x, lj_slice(x, 0, 1, 2, 1), x}, 0);
    ts[n++] = lj_cat(2, (lj_tensor *const[]){lj_transpose(x, 1, 2), lj_abs(lj_cast(lj_transpose(x, 1, 2), LJ_I32))}, 1);
    ts[n++] = lj_cat(2, (lj_tensor *const[]){x, lj_slice(x, 2, 0, 0, 1)}, 2);
    for (int i = 0; i < n; i++) ck_assert_msg(ts[i], "%s #%d: %s", lj_dtype_name(dt), i, lj_last_error());
    tu_check_interp(n, ts, 0);
    lj_tensor_release(x);
  }
}
END_TEST

START_TEST(test_result_shapes) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 1, 4), TU_ANY, 1);
  check_shape(lj_reshape(x, LJ_SHAPE(-1)), 1, (const int64_t[]){8});
  check_shape(lj_squeeze(x, 0, NULL), 2, (const int64_t[]){2, 4});
  check_shape(lj_squeeze(x, 1, (const int[]){0}), 3, (const int64_t[]){2, 1, 4});
  check_shape(lj_unsqueeze(x, 3), 4, (const int64_t[]){2, 1, 4, 1});
  check_shape(lj_flatten(x, 0, -1), 1, (const int64_t[]){8});
  check_shape(lj_slice(x, 2, 1, 4, 2), 3, (const int64_t[]){2, 1, 2});
  check_shape(lj_slice(x, 2, 3, 1, 1), 3, (const int64_t[]){2, 1, 0});
  check_shape(lj_expand(x, LJ_SHAPE(3, -1, 5, -1)), 4, (const int64_t[]){3, 2, 5, 4});
  lj_tensor *s = tu_tensor(LJ_F32, LJ_SCALAR_SHAPE, TU_ANY, 2);
  check_shape(lj_reshape(s, LJ_SHAPE(1, 1)), 2, (const int64_t[]){1, 1});
  check_shape(lj_flatten(s, 0, 0), 1, (const int64_t[]){1});
  check_shape(lj_unsqueeze(s, 0), 1, (const int64_t[]){1});
}
END_TEST

START_TEST(test_shape_errors) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 1);
  ck_assert(!lj_reshape(x, LJ_SHAPE(4, 2)));
  tu_expect_error(LJ_ERR_SHAPE, "lj_reshape", "[4,2]", "[2,3]", NULL);
  ck_assert(!lj_reshape(x, LJ_SHAPE(-1, -1)));
  tu_expect_error(LJ_ERR_ARG, "lj_reshape", "-1", NULL);
  ck_assert(!lj_reshape(x, LJ_SHAPE(-1, 4)));
  tu_expect_error(LJ_ERR_SHAPE, "lj_reshape", "infer", NULL);
  ck_assert(!lj_permute(x, 2, (const int[]){0, 0}));
  tu_expect_error(LJ_ERR_ARG, "lj_permute", "more than once", NULL);
  ck_assert(!lj_permute(x, 3, (const int[]){0, 1, 2}));
  tu_expect_error(LJ_ERR_ARG, "lj_permute", NULL);
  ck_assert(!lj_transpose(x, 0, 2));
  tu_expect_error(LJ_ERR_ARG, "lj_transpose", "dim 2", NULL);
  ck_assert(!lj_expand(x, LJ_SHAPE(4, 3)));
  tu_expect_error(LJ_ERR_SHAPE, "lj_expand", "[2,3]", "[4,3]", NULL);
  ck_assert(!lj_slice(x, 0, 0, 2, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_slice", "step", NULL);
  lj_tensor *y = tu_tensor(LJ_F32, LJ_SHAPE(2, 4), TU_ANY, 2);
  ck_assert(!lj_cat(2, (lj_tensor *const[]){x, y}, 0));
  tu_expect_error(LJ_ERR_SHAPE, "lj_cat", "[2,4]", NULL);
  ck_assert(!lj_cat(0, NULL, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_cat", NULL);
  ck_assert(!lj_unsqueeze(x, 5));
  tu_expect_error(LJ_ERR_ARG, "lj_unsqueeze", "dim 5", NULL);
}
END_TEST

/* Elementwise ops on transposed operands large enough to be read in tiles (lower.c's
 * find_tiles), against the interpreter on two threads, for the host, AVX2 and SSE2 (tiles of
 * 16, 8 and 4 f32): a 2-D transpose whose tiles run along the task range (a thread's chunk
 * of rows ends in a tile cut short), both dims past a multiple of the tile, its output rows
 * of 1001 floats not starting on lines (tiles one at a time along j); one whose rows of 1008
 * floats do (blocks of 64 along j, the last of 48); a batched one; a permute with a dim
 * between the tiled two (f64, blocks of 32 and 8); two transposed operands with a broadcast
 * one (i32); i64; a transposed bf16 operand, not tiled; and operands of 1 MiB or more (f32,
 * f64), whose tiles prefetch their rows ahead, past the end of the last. The dump says which
 * were tiled along which dims, in which blocks, and which prefetch. */
static const char *const tile_targets[] = {NULL, "haswell", "x86-64"};

START_TEST(test_transposed_tiles) {
  const char *cpu = tile_targets[_i];
  if (!tu_host_runs(cpu)) return;
  char dir[] = "/tmp/lj_tiles_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  lj_config cfg = lj_config_default();
  cfg.num_threads = 2;
  cfg.cpu = cpu;
  cfg.dump_dir = dir;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(1001, 75), TU_ANY, 1);
  lj_tensor *c = tu_tensor(LJ_F32, LJ_SHAPE(75, 1001), TU_ANY, 2);
  lj_tensor *lines = tu_tensor(LJ_F32, LJ_SHAPE(1008, 77), TU_ANY, 10);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(3, 45, 70), TU_ANY, 3);
  lj_tensor *d = tu_tensor(LJ_F64, LJ_SHAPE(2, 40, 3, 70), TU_ANY, 4);
  lj_tensor *e = tu_tensor(LJ_I32, LJ_SHAPE(130, 33), TU_ANY, 5), *f = tu_tensor(LJ_I32, LJ_SHAPE(130, 33), TU_ANY, 6);
  lj_tensor *row = tu_tensor(LJ_I32, LJ_SHAPE(1, 130), TU_ANY, 7);
  lj_tensor *g = tu_tensor(LJ_I64, LJ_SHAPE(64, 90), TU_ANY, 8), *h = tu_tensor(LJ_BF16, LJ_SHAPE(80, 70), TU_ANY, 9);
  lj_tensor *big = tu_tensor(LJ_F32, LJ_SHAPE(600, 520), TU_ANY, 11);
  lj_tensor *big64 = tu_tensor(LJ_F64, LJ_SHAPE(5, 80, 330), TU_ANY, 12);
  lj_tensor *ts[] = {
      lj_add(lj_mul(lj_transpose(a, 0, 1), c), c),
      lj_mul_scalar(lj_transpose(lines, 0, 1), 3.0),
      lj_exp(lj_transpose(b, 1, 2)),
      lj_mul(lj_permute(d, 4, (const int[]){0, 3, 2, 1}), lj_permute(d, 4, (const int[]){0, 3, 2, 1})),
      lj_add(lj_mul(lj_transpose(e, 0, 1), lj_transpose(f, 0, 1)), row),
      lj_neg(lj_transpose(g, 0, 1)),
      lj_abs(lj_transpose(h, 0, 1)),
      lj_sub_scalar(lj_transpose(big, 0, 1), 1.0),
      lj_sqrt(lj_abs(lj_transpose(big64, 1, 2))),
  };
  int n = (int)(sizeof ts / sizeof *ts);
  for (int i = 0; i < n; i++) ck_assert_msg(ts[i], "#%d: %s", i, lj_last_error());
  tu_check_interp(n, ts, 1e-6);
  ck_assert(tu_dir_has(dir, ".kernels.txt", "transposed, in tiles along dims 0 and 1\n"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "transposed, in tiles along dims 0 and 1, in blocks of 64 along dim 1"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "transposed, in tiles along dims 1 and 2\n"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "transposed, in tiles along dims 1 and 3, in blocks of 32 along dim 3\n"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "prefetching e0 128 bytes ahead along dim 0\n"));
  ck_assert(tu_dir_has(dir, ".kernels.txt", "prefetching e0 128 bytes ahead along dim 1\n"));
  tu_remove_dir(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_shape");
  TCase *tc = tu_tcase("shape");
  tcase_add_test(tc, test_views_all_dtypes);
  tcase_add_test(tc, test_result_shapes);
  tcase_add_test(tc, test_shape_errors);
  tcase_add_loop_test(tc, test_transposed_tiles, 0, (int)(sizeof tile_targets / sizeof *tile_targets));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
