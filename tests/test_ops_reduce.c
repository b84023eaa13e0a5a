/* test_ops_reduce.c — sum, mean, prod, amax, amin, argmax, argmin against the reference
 * interpreter: every dtype, dim lists, keepdim, negative dims, empty and size-1 dims, 0-d
 * tensors, reductions over non-contiguous inputs and over fused producers, NaN handling,
 * reductions over leading dims (column order), and large ones in two stages;
 * and the dtype and shape errors PyTorch gives. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef lj_tensor *(*reduce_fn)(lj_tensor *, int, const int *, bool);

static const struct {
  const char *name;
  reduce_fn fn;
  bool floats_only, nonempty;
} reductions[] = {
    {"lj_sum", lj_sum, false, false},   {"lj_mean", lj_mean, true, false},
    {"lj_prod", lj_prod, false, false}, {"lj_amax", lj_amax, false, true},
    {"lj_amin", lj_amin, false, true},
};

static bool is_float(lj_dtype dt) { return dt == LJ_F32 || dt == LJ_F64 || dt == LJ_BF16 || dt == LJ_F16; }

/* Tolerance: long float sums are reassociated by the vectorizer. */
static double tol(lj_dtype dt) {
  if (dt == LJ_F32) return 2e-5;
  if (dt == LJ_F64) return 1e-12;
  return tu_rtol(dt);
}

START_TEST(test_reductions) {
  int which = _i;
  reduce_fn fn = reductions[which].fn;
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    tu_values kind = reductions[which].fn == lj_prod ? TU_UNIT : TU_ANY;
    if (!is_float(dt) && reductions[which].fn == lj_prod) kind = TU_POSITIVE;
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(4, 5, 6), kind, 10 + di);
    if (reductions[which].floats_only && !is_float(dt)) {
      ck_assert(fn(x, 0, NULL, false) == NULL);
      tu_expect_error(LJ_ERR_DTYPE, reductions[which].name, NULL);
      lj_tensor_release(x);
      continue;
    }
    lj_tensor *ts[32];
    int n = 0;
    static const int dl[][4] = {{1, 0}, {1, 1}, {1, 2}, {1, -1}, {2, 0, 2}, {2, 1, 2}, {2, 0, 1}, {3, 0, 1, 2}};
    for (size_t k = 0; k < sizeof dl / sizeof *dl; k++) {
      ts[n++] = fn(x, dl[k][0], &dl[k][1], false);
      ts[n++] = fn(x, dl[k][0], &dl[k][1], true);
    }
    ts[n++] = fn(x, 0, NULL, false); /* all dims */
    /* non-contiguous input and a fused producer */
    lj_tensor *xt = lj_permute(x, 3, (const int[]){2, 0, 1});
    ts[n++] = fn(xt, 1, (const int[]){0}, false);
    ts[n++] = fn(xt, 1, (const int[]){2}, true);
    lj_tensor *sq = lj_mul(x, x);
    ts[n++] = fn(sq, 1, (const int[]){1}, false);
    /* size-1 and 0-d inputs */
    lj_tensor *one = tu_tensor(dt, LJ_SHAPE(3, 1, 2), kind, 3);
    ts[n++] = fn(one, 1, (const int[]){1}, false);
    lj_tensor *scalar = tu_tensor(dt, LJ_SCALAR_SHAPE, kind, 4);
    ts[n++] = fn(scalar, 0, NULL, false);
    ts[n++] = fn(scalar, 1, (const int[]){0}, true);
    /* empty along a kept dim; and an empty reduced dim where there is an identity */
    lj_tensor *empty = tu_tensor(dt, LJ_SHAPE(0, 3), kind, 5);
    ts[n++] = fn(empty, 1, (const int[]){1}, false);
    if (!reductions[which].nonempty) ts[n++] = fn(empty, 1, (const int[]){0}, false);
    for (int i = 0; i < n; i++) ck_assert_msg(ts[i], "%s %s #%d: %s", reductions[which].name, lj_dtype_name(dt), i, lj_last_error());
    tu_check_interp(n, ts, tol(lj_tensor_dtype(ts[0])));
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(xt);
    lj_tensor_release(sq);
    lj_tensor_release(one);
    lj_tensor_release(scalar);
    lj_tensor_release(empty);
    lj_tensor_release(x);
  }
}
END_TEST

/* Reductions of a few points a row in the plain order, past a kept dim long enough to be the
 * loop the vectorizer takes (lower.c's unrolls_inner: the reduced dims unrolled): every op
 * and dtype over [40, 3] along dim 1 and over [9, 10, 2, 2] along dims 2 and 3, floats with
 * NaN, infinities and signed zeros; argmax and argmin and an elementwise op whose last dim of
 * 2 a broadcast keeps from merging ([9, 20, 1] expanded to [9, 20, 2]), but for bool. Against
 * the interpreter. */
START_TEST(test_few_points_a_row) {
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    tu_values kind = is_float(dt) ? TU_SPECIAL : TU_POSITIVE;
    lj_scope_begin();
    lj_tensor *a = tu_tensor(dt, LJ_SHAPE(40, 3), kind, 30 + di);
    lj_tensor *b = tu_tensor(dt, LJ_SHAPE(9, 10, 2, 2), kind, 50 + di);
    lj_tensor *ts[16];
    int n = 0;
    for (size_t r = 0; r < sizeof reductions / sizeof *reductions; r++) {
      if (reductions[r].floats_only && !is_float(dt)) continue;
      ts[n++] = reductions[r].fn(a, 1, (const int[]){1}, false);
      ts[n++] = reductions[r].fn(b, 2, (const int[]){2, 3}, true);
    }
    if (dt != LJ_BOOL) {
      ts[n++] = lj_argmax(a, 1, false);
      ts[n++] = lj_argmin(lj_reshape(b, LJ_SHAPE(90, 4)), 1, true);
      ts[n++] = lj_add(lj_expand(tu_tensor(dt, LJ_SHAPE(9, 20, 1), kind, 70 + di), LJ_SHAPE(9, 20, 2)),
                       tu_tensor(dt, LJ_SHAPE(9, 20, 2), kind, 90 + di));
    }
    for (int i = 0; i < n; i++) ck_assert_msg(ts[i], "%s #%d: %s", lj_dtype_name(dt), i, lj_last_error());
    tu_check_interp(n, ts, tol(dt));
    lj_scope_end();
  }
}
END_TEST

/* Reductions along rows of 16 f32 or f64 (one vector of AVX-512, or two): the vectorizer takes
 * each row in vector loads; unrolled, it gathered the rows' points from 16 rows apart (a sum
 * along the rows of [1048576, 16] took 19 ms on one Zen 5 thread, 2 now). Sums, maxima and
 * argmax against the interpreter; no gathers in the kernels' assembly. */
START_TEST(test_rows_of_a_vector) {
  for (int d = 0; d < 2; d++) {
    lj_dtype dt = d ? LJ_F64 : LJ_F32;
    char path[64];
    tu_init_saving(lj_config_default(), "asm", path, sizeof path);
    lj_scope_begin();
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(2048, 16), TU_ANY, 7 + d);
    lj_tensor *ts[3] = {lj_sum(x, 1, (const int[]){1}, false), lj_amax(x, 1, (const int[]){1}, true),
                        lj_argmax(x, 1, false)};
    tu_check_interp_tol(3, ts, tol(dt), d ? 1e-14 : 1e-5); /* sums of 16 in another order */
    lj_scope_end();
    char *text = tu_take_saved(path);
    ck_assert_msg(!strstr(text, "vgather"), "%s: the rows' points gathered", lj_dtype_name(dt));
    free(text);
    lj_shutdown();
  }
}
END_TEST

START_TEST(test_arg_reductions) {
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(5, 7, 3), is_float(dt) ? TU_SPECIAL : TU_ANY, 20 + di);
    if (dt == LJ_BOOL) {
      ck_assert(lj_argmax(x, 0, false) == NULL);
      tu_expect_error(LJ_ERR_DTYPE, "lj_argmax", "bool", NULL);
      lj_tensor_release(x);
      continue;
    }
    lj_tensor *ts[16];
    int n = 0;
    for (int d = -3; d < 3; d++) {
      ts[n++] = lj_argmax(x, d, d < 0);
      ts[n++] = lj_argmin(x, d, d >= 0);
    }
    lj_tensor *xt = lj_transpose(x, 0, 2);
    ts[n++] = lj_argmax(xt, 1, false);
    lj_tensor *s = tu_tensor(dt, LJ_SCALAR_SHAPE, TU_ANY, 1);
    ts[n++] = lj_argmin(s, 0, false);
    tu_check_interp(n, ts, 0);
    for (int i = 0; i < n; i++) lj_tensor_release(ts[i]);
    lj_tensor_release(xt);
    lj_tensor_release(s);
    lj_tensor_release(x);
  }
}
END_TEST

/* Ties go to the first index; NaN is the maximum (and the minimum for argmin). */
START_TEST(test_arg_ties_and_nan) {
  lj_device *d = lj_default_device();
  float v[] = {1, 3, 3, 0, NAN, 2, NAN, -1};
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 4), v);
  lj_tensor *am = lj_argmax(x, 1, false), *an = lj_argmin(x, 1, false);
  lj_tensor *mx = lj_amax(x, 1, (const int[]){1}, false);
  int64_t a[2], b[2];
  float m[2];
  ck_assert_int_eq(lj_tensor_to_host(am, a, sizeof a), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(an, b, sizeof b), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(mx, m, sizeof m), LJ_OK);
  ck_assert_int_eq(a[0], 1);
  ck_assert_int_eq(b[0], 3);
  ck_assert_int_eq(a[1], 0);
  ck_assert_int_eq(b[1], 0);
  ck_assert_float_eq(m[0], 3);
  ck_assert(isnan(m[1]));
  lj_tensor_release(am);
  lj_tensor_release(an);
  lj_tensor_release(mx);
  lj_tensor_release(x);
}
END_TEST

/* Argmax and argmin along rows long enough for the vectorized passes (lower.c's
 * arg_in_two_passes: the max or min, then the first index holding it), every dtype: rows of
 * 1, 17, 64, 1000 and 1003 against the interpreter, of values without NaN (ints: many ties),
 * with NaN and specials, of an expression of the row (recomputed by the second pass) and along
 * a dim read across rows; and rows made for it: a maximum twice (the first one, in a later
 * lane), two NaNs, all -inf, +0 before -0 among negatives, +inf last twice. */
START_TEST(test_arg_long_rows) {
  static const int64_t cols[] = {1, 17, 64, 1000, 1003};
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    if (dt == LJ_BOOL) continue;
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
      lj_scope_begin();
      lj_tensor *a = tu_tensor(dt, LJ_SHAPE(6, cols[c]), TU_ANY, 100 + di * 8 + c);
      lj_tensor *s = tu_tensor(dt, LJ_SHAPE(6, cols[c]), is_float(dt) ? TU_SPECIAL : TU_POSITIVE, 200 + di * 8 + c);
      lj_tensor *ts[] = {lj_argmax(a, 1, false), lj_argmin(a, 1, true), lj_argmax(s, 1, false), lj_argmin(s, -1, false),
                         lj_argmax(lj_mul(a, s), 1, false), lj_argmin(lj_transpose(a, 0, 1), 0, false)};
      tu_check_interp((int)(sizeof ts / sizeof *ts), ts, 0);
      lj_scope_end();
    }
  }
  enum { C = 1000 };
  static float v[5 * C];
  for (int i = 0; i < 5 * C; i++) v[i] = -1.0f - (float)(i % C) / C;
  v[37] = v[20] = 2;
  v[C + 500] = v[C + 100] = NAN;
  for (int i = 0; i < C; i++) v[2 * C + i] = -INFINITY;
  v[3 * C + 2] = 0.0f;
  v[3 * C + 3] = -0.0f;
  v[4 * C + 998] = v[4 * C + 999] = INFINITY;
  lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(5, C), v);
  lj_tensor *am = lj_argmax(x, 1, false), *an = lj_argmin(lj_neg(x), 1, false);
  int64_t got[2][5], want[5] = {20, 100, 0, 2, 998};
  ck_assert_int_eq(lj_tensor_to_host(am, got[0], sizeof got[0]), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(an, got[1], sizeof got[1]), LJ_OK);
  for (int r = 0; r < 5; r++) {
    ck_assert_int_eq(got[0][r], want[r]);
    ck_assert_int_eq(got[1][r], want[r]);
  }
  lj_tensor_release(an);
  lj_tensor_release(am);
  lj_tensor_release(x);
}
END_TEST

/* A NaN anywhere in a long row (the vectorized loops, several accumulators) makes its amax,
 * amin and every softmax value NaN; the other rows keep their values. */
START_TEST(test_nan_in_long_rows) {
  enum { R = 4, C = 1000 };
  static float v[R * C];
  for (int i = 0; i < R * C; i++) v[i] = (float)((i * 37) % 101) - 50;
  v[1 * C + 517] = NAN; /* row 1: in the middle */
  v[2 * C + C - 1] = NAN; /* row 2: the last element (the loop's remainder) */
  v[3 * C + 7] = 1000;
  lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(R, C), v);
  lj_tensor *mx = lj_amax(x, 1, (const int[]){1}, false), *mn = lj_amin(x, 1, (const int[]){1}, false);
  lj_tensor *sm = lj_softmax(x, 1);
  float a[R], b[R];
  static float s[R * C];
  ck_assert_int_eq(lj_tensor_to_host(mx, a, sizeof a), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(mn, b, sizeof b), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(sm, s, sizeof s), LJ_OK);
  ck_assert_float_eq(a[0], 50);
  ck_assert_float_eq(b[0], -50);
  ck_assert(isnan(a[1]) && isnan(b[1]) && isnan(a[2]) && isnan(b[2]));
  ck_assert_float_eq(a[3], 1000);
  for (int j = 0; j < C; j++) ck_assert(isnan(s[1 * C + j]) && isnan(s[2 * C + j]));
  ck_assert_float_eq_tol(s[3 * C + 7], 1, 1e-6);
  double total = 0;
  for (int j = 0; j < C; j++) total += s[j];
  ck_assert_double_eq_tol(total, 1, 1e-5);
  lj_tensor_release(sm);
  lj_tensor_release(mn);
  lj_tensor_release(mx);
  lj_tensor_release(x);
}
END_TEST

/* Reductions big enough to be split across threads, with a mean of a softmax-like chain. */
START_TEST(test_large_rows) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(512, 300), TU_ANY, 3);
  lj_tensor *m = lj_amax(x, 1, (const int[]){1}, true);
  lj_tensor *e = lj_exp(lj_sub(x, m));
  lj_tensor *s = lj_div(e, lj_sum(e, 1, (const int[]){1}, true));
  lj_tensor *ts[3] = {s, lj_mean(x, 1, (const int[]){0}, false), lj_sum(x, 0, NULL, false)};
  tu_check_interp(3, ts, 2e-5);
  lj_tensor_release(ts[1]);
  lj_tensor_release(ts[2]);
  lj_tensor_release(s);
  lj_tensor_release(e);
  lj_tensor_release(m);
  lj_tensor_release(x);
}
END_TEST

/* Reductions over leading dims, whose values are contiguous along the kept dim (the code
 * runs them in column order: up to 16 reduced points unrolled with the accumulators in
 * registers, more in blocks of the kept dim with the accumulators in an array): every op and
 * dtype class, kept dims longer than a block and split across threads, NaN and ties in
 * arg-reductions, NaN in maxima and minima of more points than are unrolled, 16 and 17
 * reduced points, windows reduced as max-pooling does, and a middle dim of 37 points (rows
 * combined four at a time into the array, COLUMN_ROWS, and one left). */
START_TEST(test_column_reductions) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3, 5000), TU_SPECIAL, 11);
  lj_tensor *y = tu_tensor(LJ_F64, LJ_SHAPE(2, 9, 3000), TU_ANY, 12);
  lj_tensor *w = tu_tensor(LJ_BF16, LJ_SHAPE(5, 64), TU_UNIT, 13);
  lj_tensor *i = tu_tensor(LJ_I32, LJ_SHAPE(6, 300), TU_ANY, 14);
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(3, 4),
                                     (float[]){1, NAN, 0, 2, 1, 5, NAN, 2, 0, 5, 1, -1});
  lj_tensor *ts[21];
  int n = 0;
  ts[n++] = lj_sum(x, 1, (const int[]){0}, false);
  ts[n++] = lj_amax(x, 1, (const int[]){0}, true);
  ts[n++] = lj_argmax(x, 0, false);
  ts[n++] = lj_argmin(y, 1, true);
  ts[n++] = lj_mean(y, 2, (const int[]){0, 1}, false);
  ts[n++] = lj_prod(lj_add_scalar(lj_mul_scalar(y, 0.01), 1), 1, (const int[]){1}, false);
  ts[n++] = lj_sum(w, 1, (const int[]){0}, false);
  ts[n++] = lj_amin(i, 1, (const int[]){0}, false);
  ts[n++] = lj_sum(i, 1, (const int[]){0}, false);
  ts[n++] = lj_argmax(t, 0, false);
  ts[n++] = lj_argmin(t, 0, false);
  ts[n++] = lj_amax(t, 1, (const int[]){0}, false);
  /* max-pool's shape: windows of 4 laid out in rows of 196 */
  ts[n++] = lj_argmax(lj_reshape(y, LJ_SHAPE(2, 3, 3, 3000)), 2, false);
  /* on either side of the unrolled reductions' limit */
  lj_tensor *z = tu_tensor(LJ_F32, LJ_SHAPE(17, 700), TU_SPECIAL, 15);
  ts[n++] = lj_argmax(z, 0, false);
  ts[n++] = lj_argmin(lj_slice(z, 0, 1, 17, 1), 0, true);
  ts[n++] = lj_sum(lj_slice(z, 0, 0, 16, 1), 1, (const int[]){0}, false);
  /* a float max's and min's NaN flags in the accumulators' array */
  ts[n++] = lj_amax(z, 1, (const int[]){0}, false);
  ts[n++] = lj_amin(z, 1, (const int[]){0}, true);
  lj_tensor *mid = tu_tensor(LJ_F32, LJ_SHAPE(5, 37, 40), TU_SPECIAL, 16);
  lj_tensor *mid_finite = tu_tensor(LJ_F32, LJ_SHAPE(5, 37, 40), TU_ANY, 17);
  ts[n++] = lj_amax(mid, 1, (const int[]){1}, false);
  ts[n++] = lj_argmin(mid, 1, false);
  ts[n++] = lj_sum(mid_finite, 1, (const int[]){1}, true);
  tu_check_interp_tol(n, ts, 1e-5, 1e-5);
  int64_t got[4];
  ck_assert_int_eq(lj_tensor_to_host(ts[9], got, sizeof got), LJ_OK);
  ck_assert(got[0] == 0 && got[1] == 0 && got[2] == 1 && got[3] == 0); /* NaN wins, ties go first */
  for (int k = 0; k < n; k++) lj_tensor_release(ts[k]);
  lj_tensor_release(mid);
  lj_tensor_release(mid_finite);
}
END_TEST

/* Sum, mean, prod, amax and amin of at least 2^20 elements over leading dims (a column sum,
 * all dims): two stages, the rows in 64 blocks then the blocks (pass_reduce.c), against the
 * interpreter with NaN among the maxima, integers exactly; a column sum is two kernels; and
 * the bits do not depend on the thread count. */
static double *column_sums(int threads, int64_t *n) {
  tu_init_threads(threads);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4096, 300), TU_ANY, 21);
  double k0 = (double)lj_counter_value("CompiledKernels");
  lj_tensor *s = lj_sum(x, 1, (const int[]){0}, false);
  double *got = tu_read(s, n);
  ck_assert_int_eq((int)((double)lj_counter_value("CompiledKernels") - k0), 2);
  lj_tensor_release(s);
  lj_tensor_release(x);
  lj_shutdown();
  return got;
}

START_TEST(test_reductions_in_blocks) {
  int64_t n1, n2;
  double *one = column_sums(1, &n1), *two = column_sums(2, &n2);
  ck_assert_int_eq(n1, 300);
  ck_assert_int_eq(n2, 300);
  ck_assert(memcmp(one, two, (size_t)n1 * sizeof *one) == 0);
  free(one);
  free(two);
  lj_config cfg = lj_config_default();
  cfg.num_threads = 2;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4096, 300), TU_SPECIAL, 22);
  lj_tensor *y = tu_tensor(LJ_F64, LJ_SHAPE(64, 128, 160), TU_ANY, 23);
  lj_tensor *z = tu_tensor(LJ_F64, LJ_SHAPE(2048, 512), TU_UNIT, 24);
  lj_tensor *i = tu_tensor(LJ_I64, LJ_SHAPE(1 << 20), TU_ANY, 25);
  lj_tensor *j = tu_tensor(LJ_I32, LJ_SHAPE(8192, 128), TU_ANY, 26);
  lj_tensor *ts[] = {
      lj_amax(x, 1, (const int[]){0}, false),
      lj_mean(lj_abs(x), 1, (const int[]){0}, true),
      lj_sum(y, 2, (const int[]){0, 1}, false),
      lj_prod(lj_add_scalar(lj_mul_scalar(z, 0.001), 1), 1, (const int[]){0}, false),
      lj_sum(i, 0, NULL, false),
      lj_amin(j, 1, (const int[]){0}, false),
  };
  int n = (int)(sizeof ts / sizeof *ts);
  tu_check_interp_tol(n, ts, 1e-5, 1e-5);
  for (int k = 0; k < n; k++) lj_tensor_release(ts[k]);
}
END_TEST

/* Sums of products whose factors are the same along the summed dims, which pass_simplify.c
 * computes as the factors times sums of the other operands (sum_of_scaled): per-channel and
 * scalar factors, added, subtracted and negated, kept dims and not, f32 and f64, products of
 * products with such factors inside; and one term without such a factor (the sum stays
 * whole). Against the interpreter. */
START_TEST(test_sums_of_scaled) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int dims[2] = {0, 2};
  for (int di = 0; di < 2; di++) {
    lj_dtype dt = dts[di];
    lj_scope_begin();
    lj_tensor *x = tu_tensor(dt, LJ_SHAPE(6, 5, 70), TU_ANY, 80 + di), *y = tu_tensor(dt, LJ_SHAPE(6, 5, 70), TU_ANY, 82 + di);
    lj_tensor *s = tu_tensor(dt, LJ_SHAPE(1, 5, 1), TU_ANY, 84 + di), *c = tu_tensor(dt, LJ_SHAPE(1), TU_ANY, 86 + di);
    lj_tensor *scaled = lj_sub(lj_mul(x, s), lj_mul(lj_mul(c, y), s));
    lj_tensor *nested = lj_sub(lj_mul(lj_mul(x, s), lj_mul(y, c)), lj_mul(y, lj_mul(lj_mul(s, x), x)));
    lj_tensor *ts[4] = {lj_sum(lj_neg(lj_add(scaled, lj_mul(y, c))), 2, dims, true),
                        lj_sum(lj_sub(lj_mul(c, x), lj_neg(lj_mul(s, y))), 2, dims, false),
                        lj_sum(lj_sub(lj_mul(x, s), y), 2, dims, true), lj_sum(nested, 2, dims, false)};
    tu_check_interp_tol(4, ts, dt == LJ_F32 ? 1e-5 : 1e-12, dt == LJ_F32 ? 1e-4 : 1e-12);
    lj_scope_end();
  }
}
END_TEST

START_TEST(test_reduce_errors) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 0), TU_ANY, 1);
  ck_assert(lj_amax(x, 1, (const int[]){1}, false) == NULL);
  tu_expect_error(LJ_ERR_SHAPE, "lj_amax", "size 0", NULL);
  ck_assert(lj_argmax(x, 1, false) == NULL);
  tu_expect_error(LJ_ERR_SHAPE, "lj_argmax", NULL);
  ck_assert(lj_sum(x, 1, (const int[]){2}, false) == NULL);
  tu_expect_error(LJ_ERR_ARG, "lj_sum", "dim 2", NULL);
  ck_assert(lj_sum(x, 2, (const int[]){1, -1}, false) == NULL);
  tu_expect_error(LJ_ERR_ARG, "more than once", NULL);
  ck_assert(lj_sum(NULL, 0, NULL, false) == NULL);
  tu_expect_error(LJ_ERR_ARG, "lj_sum", "NULL", NULL);
  lj_tensor_release(x);
}
END_TEST

/* softmax and log_softmax along an empty dim, which has no max to shift by: empty results,
 * as PyTorch's (they named lj_amax's error), and an empty gradient. */
START_TEST(test_softmax_empty_dim) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 0), TU_ANY, 1);
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  lj_tensor *ts[2] = {lj_softmax(x, 1), lj_log_softmax(x, -1)};
  for (int i = 0; i < 2; i++) {
    ck_assert_msg(ts[i], "%s", lj_last_error());
    ck_assert_int_eq(lj_tensor_ndim(ts[i]), 2);
    ck_assert_int_eq(lj_tensor_shape(ts[i])[0], 2);
    ck_assert_int_eq(lj_tensor_shape(ts[i])[1], 0);
  }
  ck_assert_int_eq(lj_backward(lj_sum(lj_add(ts[0], ts[1]), 0, NULL, false)), LJ_OK);
  lj_tensor *g = lj_tensor_grad(x);
  ck_assert(g && lj_tensor_numel(g) == 0 && lj_tensor_shape(g)[0] == 2);
  lj_tensor *all[3] = {ts[0], ts[1], g};
  tu_check_interp(3, all, 0);
  for (int i = 0; i < 2; i++) lj_tensor_release(ts[i]);
  lj_tensor_release(x);
}
END_TEST

/* Softmax, log_softmax, layer norm and batch norm of 16-bit floats compute in f32 and round
 * once, as PyTorch's do: a row of 70000 equal f16 values gives 1/70000 each (rounded after
 * each op, its sum of exps was inf and every output 0), and on random rows offset by 300
 * (where a mean rounded to bf16 is off by up to 1) the results are the f32 op's on the
 * widened input, rounded. */
START_TEST(test_softmax_half_in_f32) {
  lj_dtype halves[2] = {LJ_F16, LJ_BF16};
  for (int h = 0; h < 2; h++) {
    lj_dtype dt = halves[h];
    lj_tensor *ones = lj_ones(lj_default_device(), dt, LJ_SHAPE(2, 70000));
    lj_tensor *sm = lj_cast(lj_softmax(ones, 1), LJ_F32), *lsm = lj_cast(lj_log_softmax(ones, -1), LJ_F32);
    float *v = malloc(2 * 70000 * sizeof *v), *lv = malloc(2 * 70000 * sizeof *lv);
    ck_assert_int_eq(lj_tensor_to_host(sm, v, 2 * 70000 * sizeof *v), LJ_OK);
    ck_assert_int_eq(lj_tensor_to_host(lsm, lv, 2 * 70000 * sizeof *lv), LJ_OK);
    lj_tensor *want = lj_full(lj_default_device(), LJ_F32, LJ_SCALAR_SHAPE, 1.0 / 70000);
    lj_tensor *lwant = lj_full(lj_default_device(), LJ_F32, LJ_SCALAR_SHAPE, -log(70000.0));
    float w = (float)lj_item(lj_cast(lj_cast(want, dt), LJ_F32));
    float lw = (float)lj_item(lj_cast(lj_cast(lwant, dt), LJ_F32));
    ck_assert_msg(w > 0 && lw < -11, "%s: %g %g", lj_dtype_name(dt), w, lw);
    for (int i = 0; i < 2 * 70000; i++) {
      ck_assert_msg(v[i] == w, "%s softmax[%d] = %g, not %g", lj_dtype_name(dt), i, v[i], w);
      ck_assert_msg(lv[i] == lw, "%s log_softmax[%d] = %g, not %g", lj_dtype_name(dt), i, lv[i], lw);
    }
    free(v);
    free(lv);

    lj_tensor *x = lj_cast(lj_add_scalar(tu_tensor(LJ_F32, LJ_SHAPE(37, 300), TU_ANY, 3 + h), 300), dt);
    lj_tensor *xf = lj_cast(x, LJ_F32);
    lj_tensor *x3 = lj_reshape(x, LJ_SHAPE(37, 3, 100)), *xf3 = lj_reshape(xf, LJ_SHAPE(37, 3, 100));
    lj_tensor *got[4] = {lj_softmax(x, 1), lj_log_softmax(x, 0), lj_layer_norm(x, 1, NULL, NULL, 1e-5),
                         lj_batch_norm(x3, NULL, NULL, NULL, NULL, true, 0.1, 1e-5)};
    lj_tensor *ref[4] = {lj_cast(lj_softmax(xf, 1), dt), lj_cast(lj_log_softmax(xf, 0), dt),
                         lj_cast(lj_layer_norm(xf, 1, NULL, NULL, 1e-5), dt),
                         lj_cast(lj_batch_norm(xf3, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), dt)};
    for (int k = 0; k < 4; k++) {
      ck_assert_int_eq(lj_tensor_dtype(got[k]), dt);
      lj_tensor *diff = lj_amax(lj_abs(lj_sub(lj_cast(got[k], LJ_F32), lj_cast(ref[k], LJ_F32))), 0, NULL, false);
      ck_assert_msg(lj_item(diff) == 0, "%s op %d: differs from the f32 op by %g", lj_dtype_name(dt), k, lj_item(diff));
    }
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_reduce");
  TCase *tc = tu_tcase("reduce");
  tcase_add_loop_test(tc, test_reductions, 0, (int)(sizeof reductions / sizeof *reductions));
  tcase_add_test(tc, test_few_points_a_row);
  tcase_add_test(tc, test_rows_of_a_vector);
  tcase_add_test(tc, test_arg_reductions);
  tcase_add_test(tc, test_arg_ties_and_nan);
  tcase_add_test(tc, test_arg_long_rows);
  tcase_add_test(tc, test_nan_in_long_rows);
  tcase_add_test(tc, test_large_rows);
  tcase_add_test(tc, test_column_reductions);
  tcase_add_test(tc, test_reductions_in_blocks);
  tcase_add_test(tc, test_sums_of_scaled);
  tcase_add_test(tc, test_reduce_errors);
  tcase_add_test(tc, test_softmax_empty_dim);
  tcase_add_test(tc, test_softmax_half_in_f32);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
