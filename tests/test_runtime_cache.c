/* test_runtime_cache.c — the executable cache, seen through counters: a training-like loop
 * compiles once; new scalar values never recompile; a new shape compiles exactly one more
 * graph and the old shape still hits; the LRU evicts beyond its capacity; 0, 1 and -1 are
 * baked in unless LJ_NO_SPECIAL_SCALARS; a sync seen before is found by its walk, which tells
 * graphs of the same node types but different wiring (or a computed value used as data)
 * apart, and one recorded as before is found by replaying its walk's node ids, checked node
 * by node (operands, ops, attributes); devices that compile the same graph share its code, which outlives either cache's
 * copy. */
#include "test_util.h"

static int64_t compiles(void) { return lj_counter_value("UncachedCompile"); }
static int64_t hits(void) { return lj_counter_value("CachedCompile"); }
static int64_t replays(void) { return lj_counter_value("TraceReplays"); }

/* One step: w = w * a + b (a, b scalars), synced. */
static void step(lj_device *d, lj_tensor *w, double a, double b) {
  lj_scope_begin();
  lj_assign(w, lj_add_scalar(lj_mul_scalar(w, a), b));
  lj_scope_end();
  ck_assert_int_eq(lj_sync(d), LJ_OK);
}

START_TEST(test_loop_compiles_once) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 8), TU_ANY, 1);
  step(d, w, 0.9, 0.1);
  int64_t c0 = compiles(), h0 = hits();
  int64_t r0 = replays();
  for (int i = 0; i < 10; i++) step(d, w, 0.9, 0.1);
  ck_assert_int_eq(compiles(), c0);
  ck_assert_int_eq(hits(), h0 + 10);
  ck_assert_int_eq(replays(), r0 + 10); /* recorded the same way: no walk */
  /* a learning-rate schedule: new scalar values, same graph */
  for (int i = 0; i < 10; i++) step(d, w, 0.5 + 0.01 * i, 0.25 / (i + 2));
  ck_assert_int_eq(compiles(), c0);
  ck_assert_int_eq(hits(), h0 + 20);
  lj_tensor_release(w);
}
END_TEST

START_TEST(test_new_shape_compiles_once_more) {
  lj_device *d = lj_default_device();
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(8, 8), TU_ANY, 1);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(8, 9), TU_ANY, 2);
  step(d, a, 2, 3);
  int64_t c0 = compiles();
  step(d, b, 2, 3);
  ck_assert_int_eq(compiles(), c0 + 1);
  step(d, a, 4, 5);
  step(d, b, 4, 5);
  ck_assert_int_eq(compiles(), c0 + 1);
  lj_tensor_release(a);
  lj_tensor_release(b);
}
END_TEST

/* sum(x*y + y*x) and sum(x*x + y*y) have the same nodes, differently wired; each runs twice
 * (the second time from its walk) and must keep its own values. */
static double wired(lj_tensor *x, lj_tensor *y, bool cross) {
  lj_scope_begin();
  lj_tensor *r = cross ? lj_add(lj_mul(x, y), lj_mul(y, x)) : lj_add(lj_mul(x, x), lj_mul(y, y));
  lj_tensor *s = lj_keep(lj_sum(r, 0, NULL, false));
  lj_scope_end();
  double v = lj_item(s); /* nothing else pending: the trace starts afresh after it */
  lj_tensor_release(s);
  return v;
}

START_TEST(test_walk_tells_wiring_apart) {
  float xv[4] = {1, 2, 3, 4}, yv[4] = {5, 6, 7, 8};
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(4), xv);
  lj_tensor *y = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(4), yv);
  int64_t c0 = compiles(), h0 = hits();
  for (int round = 0; round < 2; round++) {
    ck_assert_double_eq(wired(x, y, true), 2 * (5 + 12 + 21 + 32));
    ck_assert_double_eq(wired(x, y, false), 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64);
  }
  ck_assert_int_eq(compiles(), c0 + 2);
  ck_assert_int_eq(hits(), h0 + 2);
  /* the same expression on a value computed earlier in the trace (a parameter then) and on
   * one still pending (part of the graph): different graphs, right values either way */
  lj_tensor *x2 = lj_mul_scalar(x, 2);
  ck_assert_double_eq(wired(x2, y, false), 4 + 16 + 36 + 64 + 25 + 36 + 49 + 64);
  ck_assert_int_eq(lj_sync_tensors(1, &x2), LJ_OK);
  ck_assert_double_eq(wired(x2, y, false), 4 + 16 + 36 + 64 + 25 + 36 + 49 + 64);
  ck_assert_double_eq(wired(x2, y, false), 4 + 16 + 36 + 64 + 25 + 36 + 49 + 64);
  lj_tensor_release(x2);
  lj_tensor_release(x);
  lj_tensor_release(y);
}
END_TEST

/* Variants of one program that give every node the same id (x, y and x + y are recorded
 * first), so only the replay's node-by-node check tells them apart: an operand (s - x vs
 * s - y), an op (sub vs mul), an attribute (a constant factor, 1 or -1). Each variant
 * runs twice in a row (the second time replayed) and again after the others, with its own
 * value every time; new input buffers and new scalar values at the same ids are used. */
static double variant(lj_tensor *x, lj_tensor *y, lj_tensor *w, int v, double c) {
  lj_scope_begin();
  lj_tensor *sxy = lj_add(x, y);
  lj_tensor *r = v == 1 ? lj_sub(sxy, y) : v == 2 ? lj_mul(sxy, x) : lj_sub(sxy, x);
  int dim = 0;
  lj_tensor *rc = lj_mul_scalar(lj_mul_scalar(r, c), v == 3 ? -1 : 1); /* 1 and -1: constants */
  lj_tensor *s = lj_keep(lj_sum(lj_mul(lj_sum(rc, 1, &dim, false), w), 0, NULL, false));
  lj_scope_end();
  double got = lj_item(s);
  lj_tensor_release(s);
  return got;
}

START_TEST(test_replay_checks_every_node) {
  float xv[4] = {1, 2, 3, 4}, yv[4] = {10, 20, 30, 40}, zv[4] = {-1, 5, 7, 2}, wv[2] = {1, 10};
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 2), xv);
  lj_tensor *y = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 2), yv);
  lj_tensor *z = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 2), zv);
  lj_tensor *w = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2), wv);
  /* r's sums over dim 0, weighted 1 and 10: y, x, (x + y) * x, -y */
  const double want[4] = {40 + 600, 4 + 60, 110 + 2200, -(40 + 600)};
  int64_t c0 = compiles();
  for (int round = 0; round < 2; round++)
    for (int v = 0; v < 4; v++)
      for (int twice = 0; twice < 2; twice++) {
        int64_t r0 = replays();
        ck_assert_double_eq_tol(variant(x, y, w, v, 0.5 + twice), want[v] * (0.5 + twice), 1e-3);
        if (round || twice) ck_assert_int_eq(replays(), r0 + 1);
      }
  ck_assert_int_eq(compiles(), c0 + 4);
  /* other input buffers at the same node ids: r = z either way */
  ck_assert_double_eq_tol(variant(x, z, w, 0, 1.5), (6 + 70) * 1.5, 1e-3);
  ck_assert_double_eq_tol(variant(z, y, w, 1, 0.5), (6 + 70) * 0.5, 1e-3);
  ck_assert_int_eq(compiles(), c0 + 4);
  lj_tensor_release(x);
  lj_tensor_release(y);
  lj_tensor_release(z);
  lj_tensor_release(w);
}
END_TEST

START_TEST(test_lru_eviction) {
  lj_config cfg = lj_config_default();
  cfg.compilation_cache_size = 2;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  lj_device *d = lj_default_device();
  lj_tensor *t[3];
  for (int i = 0; i < 3; i++) t[i] = tu_tensor(LJ_F32, LJ_SHAPE(4, 4 + i), TU_ANY, i);
  int64_t c0 = compiles(), e0 = lj_counter_value("CacheEvictions");
  for (int i = 0; i < 3; i++) step(d, t[i], 2, 3);
  ck_assert_int_eq(compiles(), c0 + 3);
  ck_assert_int_eq(lj_counter_value("CacheEvictions"), e0 + 1);
  step(d, t[2], 2, 3); /* most recent: still cached */
  step(d, t[1], 2, 3);
  ck_assert_int_eq(compiles(), c0 + 3);
  step(d, t[0], 2, 3); /* evicted: compiles again */
  ck_assert_int_eq(compiles(), c0 + 4);
  for (int i = 0; i < 3; i++) lj_tensor_release(t[i]);
}
END_TEST

START_TEST(test_special_scalars) {
  for (int off = 0; off < 2; off++) {
    lj_config cfg = lj_config_default();
    cfg.no_special_scalars = off;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    lj_device *d = lj_default_device();
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(5), TU_ANY, 1);
    step(d, w, 1, 2);
    int64_t c0 = compiles();
    step(d, w, 3, 2);
    /* with special scalars, w*1 was a different graph (the 1 is baked in, and simplified) */
    ck_assert_int_eq(compiles(), c0 + (off ? 0 : 1));
    lj_tensor_release(w);
    lj_shutdown();
  }
}
END_TEST

/* GEMM routines outlive the runtime that built them: a runtime started after it takes them
 * from the process instead of compiling them again (compiled, not taken from the library's
 * precompiled ones: test_runtime_precompiled), also where it streams otherwise (the
 * non-temporal store threshold is in the graphs' target, not in the routines'). */
START_TEST(test_gemm_routines_outlive_runtime) {
  int64_t built = 0;
  lj_config cfg = lj_config_default();
  cfg.precompiled_routines = false;
  for (int run = 0; run < 2; run++) {
    cfg.nt_store_kb = run ? 0 : 4096;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    int64_t r0 = lj_counter_value("CompiledGemmRoutines");
    lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(9, 40), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(40, 30), TU_ANY, 2);
    tu_check1(lj_matmul(a, b), 1e-4);
    built += lj_counter_value("CompiledGemmRoutines") - r0;
    ck_assert_int_ge(lj_counter_value("CompiledGemmRoutines"), 1); /* the matmul calls one */
    ck_assert_int_le(built, 1);
    lj_tensor_release(a);
    lj_tensor_release(b);
    lj_shutdown();
  }
}
END_TEST

START_TEST(test_devices_share_code) {
  lj_config c = lj_config_default();
  c.num_devices = 2;
  c.compilation_cache_size = 1;
  ck_assert_int_eq(lj_init(&c), LJ_OK);
  lj_tensor *w[2];
  for (int i = 0; i < 2; i++) {
    float v[64];
    for (int k = 0; k < 64; k++) v[k] = (float)k / 8;
    w[i] = lj_tensor_from_host(lj_device_get(i), LJ_F32, LJ_SHAPE(8, 8), v);
  }
  int64_t c0 = compiles();
  /* the same graph on both devices: compiled by each (their caches are their own), one code */
  for (int i = 0; i < 2; i++) step(lj_device_get(i), w[i], 0.5, 1);
  ck_assert_int_eq(compiles(), c0 + 2);
  /* device 0 evicts its executable: device 1's still runs the shared code */
  lj_tensor *other = lj_add_scalar(w[0], 2);
  ck_assert_int_eq(lj_sync(lj_device_get(0)), LJ_OK);
  step(lj_device_get(1), w[1], 0.5, 1);
  ck_assert_int_eq(compiles(), c0 + 3);
  float got[64];
  ck_assert_int_eq(lj_tensor_to_host(w[1], got, sizeof got), LJ_OK);
  for (int k = 0; k < 64; k++) ck_assert_float_eq(got[k], ((float)k / 8 * 0.5f + 1) * 0.5f + 1);
  ck_assert_int_eq(lj_tensor_to_host(w[0], got, sizeof got), LJ_OK);
  for (int k = 0; k < 64; k++) ck_assert_float_eq(got[k], (float)k / 8 * 0.5f + 1);
  lj_tensor_release(other);
  lj_tensor_release(w[0]);
  lj_tensor_release(w[1]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_cache");
  TCase *tc = tu_tcase("cache");
  tcase_add_test(tc, test_loop_compiles_once);
  tcase_add_test(tc, test_new_shape_compiles_once_more);
  tcase_add_test(tc, test_lru_eviction);
  tcase_add_test(tc, test_walk_tells_wiring_apart);
  tcase_add_test(tc, test_replay_checks_every_node);
  tcase_add_test(tc, test_special_scalars);
  tcase_add_test(tc, test_gemm_routines_outlive_runtime);
  tcase_add_test(tc, test_devices_share_code);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
