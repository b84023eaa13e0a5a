/* test_frontend_tensor.c — tensor handles: scopes and lj_keep, retain/release, lj_assign
 * (identity kept, cast and broadcast, shared buffers, pending values), partial syncs that
 * leave other tensors pending, host reads of every dtype, 0-d items, the inspection calls,
 * and shutting down with tensors alive. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

START_TEST(test_scopes) {
  lj_device *d = lj_default_device();
  int64_t destroyed0 = lj_counter_value("DestroyDataHandles");
  lj_tensor *kept;
  lj_scope_begin();
  lj_tensor *a = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2), (float[]){1, 2});
  lj_scope_begin();
  lj_tensor *b = lj_mul_scalar(a, 3);
  lj_tensor *c = lj_add(b, a);
  kept = lj_keep(c); /* moves to the outer scope */
  lj_tensor_release(b); /* releasing a scoped tensor by hand is allowed */
  lj_scope_end();
  lj_tensor_retain(kept); /* a caller-owned reference that outlives both scopes */
  lj_scope_end();
  float out[2];
  ck_assert_int_eq(lj_tensor_to_host(kept, out, sizeof out), LJ_OK);
  ck_assert_float_eq(out[0], 4);
  ck_assert_float_eq(out[1], 8);
  lj_tensor_release(kept);
  lj_scope_end(); /* no open scope: nothing happens */
  ck_assert_int_ge(lj_counter_value("DestroyDataHandles") - destroyed0, 2);
}
END_TEST

START_TEST(test_assign) {
  lj_device *d = lj_default_device();
  lj_tensor *w = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
  lj_tensor *v = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(3), (int32_t[]){7, 8, 9});
  ck_assert_int_eq(lj_assign(w, v), LJ_OK); /* broadcast and cast */
  ck_assert(lj_tensor_is_pending(w));
  ck_assert_int_eq(lj_tensor_dtype(w), LJ_F32);
  ck_assert_int_eq(lj_tensor_shape(w)[0], 2);
  float out[6];
  ck_assert_int_eq(lj_tensor_to_host(w, out, sizeof out), LJ_OK);
  ck_assert_float_eq(out[3], 7);
  ck_assert_float_eq(out[5], 9);
  /* data to data: the buffer is shared, no work is pending */
  lj_tensor *u = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, 3), (float[]){0, 0, 0, 0, 0, 1});
  ck_assert_int_eq(lj_assign(w, u), LJ_OK);
  ck_assert(!lj_tensor_is_pending(w));
  ck_assert_double_eq(lj_item(lj_sum(w, 0, NULL, false)), 1);
  ck_assert_int_eq(lj_assign(w, w), LJ_OK);
  /* assign keeps identity: w keeps its place among the roots */
  lj_tensor *first = lj_zeros(d, LJ_F32, LJ_SHAPE(1));
  lj_tensor *later = lj_ones(d, LJ_F32, LJ_SHAPE(1));
  lj_assign(first, lj_add_scalar(later, 1));
  char *text = lj_tensors_text(2, (lj_tensor *const[]){first, later});
  ck_assert(strstr(text, "ROOT=0") && strstr(text, "ROOT=1"));
  free(text);
}
END_TEST

START_TEST(test_partial_sync) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(4), TU_ANY, 1);
  lj_tensor *a = lj_exp(x), *b = lj_neg(x), *c = lj_add(a, b);
  ck_assert_int_eq(lj_sync_tensors(1, &a), LJ_OK);
  ck_assert(!lj_tensor_is_pending(a));
  ck_assert(lj_tensor_is_pending(b) && lj_tensor_is_pending(c));
  /* c now reads a's computed buffer instead of recomputing exp */
  char *text = lj_tensors_text(1, &c);
  ck_assert(!strstr(text, "exp("));
  free(text);
  lj_tensor *same[3] = {b, b, c};
  ck_assert_int_eq(lj_sync_tensors(3, same), LJ_OK);
  ck_assert(!lj_tensor_is_pending(c));
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  /* two tensors recorded equal share one node and one result */
  lj_tensor *p = lj_mul(x, x), *q = lj_mul(x, x);
  ck_assert_int_eq(lj_graph_kernel_count(2, (lj_tensor *const[]){p, q}), 1);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert_double_eq(lj_item(lj_sum(lj_sub(p, q), 0, NULL, false)), 0);
}
END_TEST

static int64_t buffers_live(void) {
  return lj_counter_value("CreateDataHandles") - lj_counter_value("DestroyDataHandles");
}

/* A sync of some tensors while another stays pending (a constant made once and kept) cannot
 * reset the trace; it drops the buffers of the results no live tensor reaches: a loop reading
 * its outputs holds as many buffers as it keeps, not one more a step. A pending tensor still
 * reads what it reaches: a result and a host tensor the caller released. */
START_TEST(test_partial_sync_drops_unreached) {
  enum { N = 1000 };
  lj_device *d = lj_default_device();
  static float host[N], got[N];
  for (int k = 0; k < N; k++) host[k] = (float)k / 8;
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(N), host), *h = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(N), host);
  lj_tensor *scale = lj_full(d, LJ_F32, LJ_SCALAR_SHAPE, 0.5), *later = lj_add(h, x);
  lj_tensor_release(h);
  int64_t live = 0;
  for (int i = 0; i < 20; i++) {
    lj_tensor *y = lj_mul(x, scale);
    ck_assert_int_eq(lj_tensor_to_host(y, got, sizeof got), LJ_OK);
    for (int k = 0; k < N; k++) ck_assert_float_eq(got[k], host[k] * 0.5f);
    if (i == 10) later = lj_mul(later, y); /* reads y's buffer */
    lj_tensor_release(y);
    if (i == 0) live = buffers_live(); /* x, h and the last y, released after its sync */
    ck_assert_int_le(buffers_live(), live + (i >= 10));
  }
  ck_assert(lj_tensor_is_pending(scale));
  ck_assert_int_eq(lj_tensor_to_host(later, got, sizeof got), LJ_OK);
  for (int k = 0; k < N; k++) ck_assert_float_eq(got[k], 2 * host[k] * (host[k] * 0.5f));
}
END_TEST

START_TEST(test_host_round_trip_all_dtypes) {
  lj_device *d = lj_default_device();
  for (int di = 0; di < LJ_NUM_DTYPES; di++) {
    lj_dtype dt = tu_all_dtypes[di];
    unsigned char in[5 * 8], out[5 * 8];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 37 + 11);
    if (dt == LJ_BOOL)
      for (int i = 0; i < 5; i++) in[i] = (unsigned char)(i & 1);
    size_t bytes = 5 * lj_dtype_size(dt);
    lj_tensor *t = lj_tensor_from_host(d, dt, LJ_SHAPE(5), in);
    ck_assert_int_eq(lj_tensor_to_host(t, out, bytes), LJ_OK);
    ck_assert(memcmp(in, out, bytes) == 0);
    lj_tensor *z = lj_tensor_from_host(d, dt, LJ_SHAPE(0, 2), NULL);
    ck_assert_int_eq(lj_tensor_to_host(z, out, 0), LJ_OK);
    lj_tensor_release(t);
    lj_tensor_release(z);
  }
  lj_tensor *s = lj_tensor_from_host(d, LJ_I64, LJ_SCALAR_SHAPE, (int64_t[]){-42});
  ck_assert_int_eq(lj_tensor_ndim(s), 0);
  ck_assert_int_eq(lj_tensor_numel(s), 1);
  ck_assert_double_eq(lj_item(s), -42);
  ck_assert_double_eq(lj_item(lj_mul_scalar(s, 2)), -84);
  ck_assert_str_eq(lj_dtype_name(LJ_BF16), "bf16");
  ck_assert_int_eq(lj_dtype_size(LJ_I16), 2);
  ck_assert_str_eq(lj_dtype_name((lj_dtype)42), "?");
}
END_TEST

START_TEST(test_shutdown_with_live_tensors) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(100), TU_ANY, 1);
  lj_tensor *y = lj_exp(x);
  ck_assert(y);
  lj_scope_begin();
  lj_tensor *z = lj_neg(y);
  ck_assert(z);
  lj_shutdown(); /* frees x, y, z and their buffers */
  lj_scope_end(); /* the scope's entries were dropped with the tensors */
  /* the runtime starts again on demand */
  d = lj_default_device();
  ck_assert(d);
  ck_assert_double_eq(lj_item(lj_full(d, LJ_F32, LJ_SCALAR_SHAPE, 2.5)), 2.5);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("frontend_tensor");
  TCase *tc = tu_tcase("tensor");
  tcase_add_test(tc, test_scopes);
  tcase_add_test(tc, test_assign);
  tcase_add_test(tc, test_partial_sync);
  tcase_add_test(tc, test_partial_sync_drops_unreached);
  tcase_add_test(tc, test_host_round_trip_all_dtypes);
  tcase_add_test(tc, test_shutdown_with_live_tensors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
