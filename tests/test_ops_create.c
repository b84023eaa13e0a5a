/* test_ops_create.c — zeros, ones, full, arange and the counter-based RNG: values against
 * the interpreter, arange lengths and dtypes, random statistics, reproducibility from a seed,
 * independence from the thread count, and that random steps never recompile. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_filled) {
  lj_device *d = lj_default_device();
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    lj_tensor *ts[6] = {lj_zeros(d, dt, LJ_SHAPE(3, 4)), lj_ones(d, dt, LJ_SHAPE(5)),
                        lj_full(d, dt, LJ_SHAPE(2, 2), 7.75), lj_full(d, dt, LJ_SCALAR_SHAPE, -3.0),
                        lj_zeros(d, dt, LJ_SHAPE(0, 3)), lj_full(d, dt, LJ_SHAPE(1), 0.5)};
    tu_check_interp(6, ts, 0);
    double v = lj_item(ts[3]);
    ck_assert_double_eq(v, dt == LJ_BOOL ? 1 : dt == LJ_U8 ? 253 : -3);
    for (int i = 0; i < 6; i++) lj_tensor_release(ts[i]);
  }
}
END_TEST

START_TEST(test_arange) {
  lj_device *d = lj_default_device();
  static const double args[][3] = {{0, 10, 1}, {0, 1, 0.3}, {5, -5, -1.5}, {-2.5, 2.5, 0.5}, {3, 3, 1}, {0, 1e3, 7}};
  static const int64_t lens[] = {10, 4, 7, 10, 0, 143};
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    if (dt == LJ_BOOL) {
      ck_assert(!lj_arange(d, dt, 0, 3, 1));
      tu_expect_error(LJ_ERR_DTYPE, "lj_arange", NULL);
      continue;
    }
    lj_tensor *ts[6];
    for (int k = 0; k < 6; k++) {
      ts[k] = lj_arange(d, dt, args[k][0], args[k][1], args[k][2]);
      ck_assert_msg(ts[k], "%s", lj_last_error());
      ck_assert_int_eq(lj_tensor_numel(ts[k]), lens[k]);
    }
    tu_check_interp(6, ts, 0);
    for (int k = 0; k < 6; k++) lj_tensor_release(ts[k]);
  }
  ck_assert(!lj_arange(d, LJ_F32, 0, 1, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_arange", "step", NULL);
  ck_assert(!lj_arange(d, LJ_F32, 0, 1, -1));
  tu_expect_error(LJ_ERR_ARG, "lj_arange", NULL);
  ck_assert(!lj_arange(d, LJ_F32, 0, INFINITY, 1));
  tu_expect_error(LJ_ERR_ARG, "finite", NULL);
}
END_TEST

/* Small tensors (scalar loops) and large ones (vector loops of 64-bit lanes, and their last
 * elements past a whole vector) against the interpreter's Philox. */
START_TEST(test_random_against_interpreter) {
  lj_device *d = lj_default_device();
  lj_dtype floats[] = {LJ_F32, LJ_F64, LJ_BF16, LJ_F16};
  for (int k = 0; k < 4; k++) {
    lj_tensor *ts[6] = {lj_rand(d, floats[k], LJ_SHAPE(7, 33)), lj_randn(d, floats[k], LJ_SHAPE(1000)),
                        lj_transpose(lj_rand(d, floats[k], LJ_SHAPE(4, 6)), 0, 1),
                        lj_add(lj_randn(d, floats[k], LJ_SHAPE(5)), lj_rand(d, floats[k], LJ_SHAPE(5))),
                        lj_rand(d, floats[k], LJ_SHAPE(3, 5003)),
                        lj_mul(lj_randn(d, floats[k], LJ_SHAPE(4101)), lj_randn(d, floats[k], LJ_SHAPE(4101)))};
    tu_check_interp(6, ts, floats[k] == LJ_F32 ? 1e-5 : floats[k] == LJ_F64 ? 1e-12 : 0);
  }
  ck_assert(!lj_rand(d, LJ_I32, LJ_SHAPE(3)));
  tu_expect_error(LJ_ERR_DTYPE, "lj_rand", "i32", NULL);
}
END_TEST

static double *sample(lj_device *d, bool normal, int64_t n) {
  lj_tensor *t = normal ? lj_randn(d, LJ_F32, LJ_SHAPE(n)) : lj_rand(d, LJ_F32, LJ_SHAPE(n));
  int64_t cnt;
  double *v = tu_read(t, &cnt);
  lj_tensor_release(t);
  return v;
}

START_TEST(test_random_statistics) {
  lj_device *d = lj_default_device();
  int64_t n = 200000;
  double *u = sample(d, false, n), *g = sample(d, true, n);
  double su = 0, su2 = 0, sg = 0, sg2 = 0, umin = 1, umax = 0;
  for (int64_t i = 0; i < n; i++) {
    su += u[i];
    su2 += u[i] * u[i];
    sg += g[i];
    sg2 += g[i] * g[i];
    umin = fmin(umin, u[i]);
    umax = fmax(umax, u[i]);
  }
  double mu = su / n, vu = su2 / n - mu * mu, mg = sg / n, vg = sg2 / n - mg * mg;
  ck_assert_msg(fabs(mu - 0.5) < 0.005 && fabs(vu - 1.0 / 12) < 0.002, "uniform mean %g var %g", mu, vu);
  ck_assert_msg(fabs(mg) < 0.01 && fabs(vg - 1) < 0.02, "normal mean %g var %g", mg, vg);
  ck_assert(umin >= 0 && umax < 1);
  free(u);
  free(g);
}
END_TEST

/* The same seed gives the same numbers, a new op new ones; a random training-like step
 * compiles once however many steps run. */
START_TEST(test_random_seed_and_cache) {
  lj_device *d = lj_default_device();
  lj_manual_seed(d, 42);
  double *a = sample(d, true, 64), *b = sample(d, true, 64);
  lj_manual_seed(d, 42);
  double *c = sample(d, true, 64);
  ck_assert(memcmp(a, c, 64 * sizeof *a) == 0);
  ck_assert(memcmp(a, b, 64 * sizeof *a) != 0);
  int64_t before = lj_counter_value("UncachedCompile");
  lj_tensor *w = lj_zeros(d, LJ_F32, LJ_SHAPE(128));
  for (int step = 0; step < 10; step++) {
    lj_scope_begin();
    lj_assign(w, lj_add(w, lj_mul_scalar(lj_randn(d, LJ_F32, LJ_SHAPE(128)), 0.1)));
    lj_scope_end();
    ck_assert_int_eq(lj_sync(d), LJ_OK);
  }
  /* the initial zeros and the step: two graphs, whatever the seed offsets were */
  ck_assert_int_le(lj_counter_value("UncachedCompile") - before, 2);
  lj_tensor_release(w);
  free(a);
  free(b);
  free(c);
}
END_TEST

/* Random results do not depend on how many threads run the kernels. */
START_TEST(test_random_thread_independent) {
  double *res[2];
  for (int k = 0; k < 2; k++) {
    lj_config cfg = lj_config_default();
    cfg.num_threads = k ? 2 : 1;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_device *d = lj_default_device();
    lj_manual_seed(d, 7);
    res[k] = sample(d, true, 1 << 18);
    lj_shutdown();
  }
  ck_assert(memcmp(res[0], res[1], (1 << 18) * sizeof(double)) == 0);
  free(res[0]);
  free(res[1]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ops_create");
  TCase *tc = tu_tcase("create");
  tcase_add_test(tc, test_filled);
  tcase_add_test(tc, test_arange);
  tcase_add_test(tc, test_random_against_interpreter);
  tcase_add_test(tc, test_random_statistics);
  tcase_add_test(tc, test_random_seed_and_cache);
  tcase_add_test(tc, test_random_thread_independent);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
