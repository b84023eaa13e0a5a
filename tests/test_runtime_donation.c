/* test_runtime_donation.c — buffer donation: lj_sync writes the new value lj_assign gave a
 * tensor into the buffer the tensor held before, when the program can work in place and
 * nothing else holds that buffer. Counted by DonatedBuffers (written in place) and
 * DonationCopies (planned in place, but the old buffer was still held, so its value was
 * copied into a fresh one); values are checked against host arithmetic, and random update
 * rules give the same bits in place or not. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t donated(void) { return lj_counter_value("DonatedBuffers"); }
static int64_t copied(void) { return lj_counter_value("DonationCopies"); }
static int64_t compiles(void) { return lj_counter_value("UncachedCompile"); }

/* The counters a test checks, taken before it runs a sync. */
typedef struct counts {
  int64_t donated, copied;
} counts;
static counts counts_now(void) { return (counts){donated(), copied()}; }
/* Asserts how much each counter grew since c. */
static void expect_growth(counts c, int64_t donations, int64_t copies) {
  ck_assert_int_eq(donated() - c.donated, donations);
  ck_assert_int_eq(copied() - c.copied, copies);
}

static void check_values(lj_tensor *t, const double *want, int64_t n, double tol) {
  int64_t got_n;
  double *got = tu_read(t, &got_n);
  ck_assert_int_eq(got_n, n);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])), "element %lld: %g, want %g",
                  (long long)i, got[i], want[i]);
  free(got);
}

/* w <- w - 0.5 g, three steps: every step writes w's buffer in place, from one compile; the
 * later steps are recognized by replaying the first one's walk, donor included. */
START_TEST(test_update_in_place) {
  lj_device *d = lj_default_device();
  int64_t n = 64 * 33;
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(64, 33), TU_ANY, 1);
  lj_tensor *g = tu_tensor(LJ_F32, LJ_SHAPE(64, 33), TU_ANY, 2);
  int64_t k;
  double *want = tu_read(w, &k), *gv = tu_read(g, &k);
  int64_t c0 = compiles(), r0 = lj_counter_value("TraceReplays");
  counts c = counts_now();
  for (int step = 1; step <= 3; step++) {
    lj_scope_begin();
    ck_assert_int_eq(lj_assign(w, lj_sub(w, lj_mul_scalar(g, 0.5))), LJ_OK);
    lj_scope_end();
    ck_assert_int_eq(lj_sync(d), LJ_OK);
    expect_growth(c, step, 0);
    for (int64_t i = 0; i < n; i++) want[i] = (float)(want[i] - (float)(0.5f * (float)gv[i]));
  }
  check_values(w, want, n, 1e-6);
  ck_assert_int_eq(compiles() - c0, 1);
  ck_assert_int_eq(lj_counter_value("TraceReplays") - r0, 2); /* steps 2 and 3, donor checked */
  free(want);
  free(gv);
  lj_tensor_release(w);
  lj_tensor_release(g);
}
END_TEST

/* Another tensor still holds the old buffer: the new value goes to a fresh buffer holding a
 * copy of the old one, and the other tensor keeps the old value. */
START_TEST(test_held_elsewhere_copies) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(40), TU_ANY, 3);
  lj_tensor *old = tu_tensor(LJ_F32, LJ_SHAPE(40), TU_ANY, 4);
  ck_assert_int_eq(lj_assign(old, w), LJ_OK); /* shares w's buffer */
  int64_t k;
  double *before = tu_read(w, &k);
  counts c = counts_now();
  lj_scope_begin();
  ck_assert_int_eq(lj_assign(w, lj_add_scalar(lj_mul_scalar(w, 2.0), 1.0)), LJ_OK);
  lj_scope_end();
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  expect_growth(c, 0, 1);
  check_values(old, before, 40, 0);
  double want[40];
  for (int i = 0; i < 40; i++) want[i] = (float)((float)(before[i] * 2) + 1);
  check_values(w, want, 40, 1e-6);
  free(before);
  lj_tensor_release(w);
  lj_tensor_release(old);
}
END_TEST

/* lj_sync_tensors and host reads may leave other pending work that reads the old value: they
 * never donate, and their graph (no donors) is another executable. */
START_TEST(test_partial_syncs_never_donate) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 16), TU_ANY, 5);
  int64_t n;
  double *want = tu_read(w, &n);
  lj_tensor *t = lj_add_scalar(w, 1.0);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  int64_t c0 = compiles();
  counts c = counts_now();
  t = lj_add_scalar(w, 1.0);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  ck_assert_int_eq(lj_sync_tensors(1, &w), LJ_OK);
  t = lj_add_scalar(w, 1.0);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  for (int64_t i = 0; i < n; i++) want[i] = (float)((float)((float)(want[i] + 1) + 1) + 1);
  check_values(w, want, n, 1e-6); /* a host read runs the third update */
  ck_assert_int_eq(compiles() - c0, 1);
  expect_growth(c, 0, 0);
  free(want);
  lj_tensor_release(w);
}
END_TEST

/* New values that read the old one elsewhere than at the element they write, or that a
 * matmul writes, are not computed in place; the values are right either way. */
START_TEST(test_not_in_place) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 8), TU_ANY, 6);
  int64_t n;
  double *v = tu_read(w, &n), want[64];
  counts c = counts_now();
  lj_scope_begin();
  ck_assert_int_eq(lj_assign(w, lj_add(lj_transpose(w, 0, 1), w)), LJ_OK);
  lj_scope_end();
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) want[i * 8 + j] = (float)(v[j * 8 + i] + v[i * 8 + j]);
  check_values(w, want, 64, 1e-6);
  memcpy(v, want, sizeof want);
  lj_tensor *t = lj_matmul(w, w);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) {
      double s = 0;
      for (int k = 0; k < 8; k++) s += v[i * 8 + k] * v[k * 8 + j];
      want[i * 8 + j] = s;
    }
  check_values(w, want, 64, 1e-5);
  expect_growth(c, 0, 0);
  free(v);
  lj_tensor_release(w);
}
END_TEST

/* A value read again by a later kernel (through another tensor holding it) stays out of
 * place: no donation, no copy. */
START_TEST(test_later_reader_keeps_old_value) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(100), TU_ANY, 7);
  lj_tensor *old = tu_tensor(LJ_F32, LJ_SHAPE(100), TU_ANY, 8);
  ck_assert_int_eq(lj_assign(old, w), LJ_OK);
  int64_t n;
  double *v = tu_read(w, &n), want_w[100], want_y[100];
  counts c = counts_now();
  lj_tensor *t = lj_neg(w);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  lj_tensor *y = lj_mul_scalar(old, 3.0);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  for (int i = 0; i < 100; i++) {
    want_w[i] = -v[i];
    want_y[i] = (float)(v[i] * 3);
  }
  check_values(w, want_w, 100, 0);
  check_values(y, want_y, 100, 1e-6);
  check_values(old, v, 100, 0);
  expect_growth(c, 0, 0);
  free(v);
  lj_tensor_release(w);
  lj_tensor_release(old);
  lj_tensor_release(y);
}
END_TEST

/* A pending view of the old value shares its buffer once computed: the buffer is not
 * donated. */
START_TEST(test_view_root_keeps_old_value) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 25), TU_ANY, 13);
  int64_t n;
  double *v = tu_read(w, &n), want[100];
  lj_tensor *flat = lj_reshape(w, LJ_SHAPE(100));
  lj_scope_begin();
  ck_assert_int_eq(lj_assign(w, lj_add_scalar(w, 1.0)), LJ_OK);
  lj_scope_end();
  counts c = counts_now();
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  expect_growth(c, 0, 0);
  for (int i = 0; i < 100; i++) want[i] = (float)(v[i] + 1);
  check_values(w, want, 100, 1e-6);
  check_values(flat, v, 100, 0);
  free(v);
  lj_tensor_release(w);
  lj_tensor_release(flat);
}
END_TEST

/* Row-wise ops whose reductions read the old value in the same kernel before it is written
 * (row fusion): normalizing rows and softmax, in place. Odd sizes leave vector remainders. */
START_TEST(test_row_ops_in_place) {
  lj_device *d = lj_default_device();
  enum { R = 19, C = 37 };
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(R, C), TU_ANY, 9);
  int64_t n;
  double *v = tu_read(w, &n), want[R * C];
  counts c = counts_now();
  lj_tensor *m = lj_mean(w, 1, (int[]){1}, true);
  lj_tensor *t = lj_sub(w, m);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(m);
  lj_tensor_release(t);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  for (int i = 0; i < R; i++) {
    double s = 0;
    for (int j = 0; j < C; j++) s += v[i * C + j];
    for (int j = 0; j < C; j++) want[i * C + j] = v[i * C + j] - s / C;
  }
  check_values(w, want, n, 1e-5);
  memcpy(v, want, sizeof want);
  t = lj_softmax(w, 1);
  ck_assert_int_eq(lj_assign(w, t), LJ_OK);
  lj_tensor_release(t);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  for (int i = 0; i < R; i++) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) mx = fmax(mx, v[i * C + j]);
    for (int j = 0; j < C; j++) s += exp(v[i * C + j] - mx);
    for (int j = 0; j < C; j++) want[i * C + j] = exp(v[i * C + j] - mx) / s;
  }
  check_values(w, want, n, 1e-5);
  expect_growth(c, 2, 0);
  free(v);
  lj_tensor_release(w);
}
END_TEST

/* SGD with momentum on a linear model, loss sum((x wᵀ + b)²), against the same arithmetic in
 * double on the host: every step updates w, b and both momentum buffers in place. */
enum { B = 6, I = 5, O = 3, STEPS = 4 };

static void host_sgd(const double *x, double *w, double *b, double lr, double mu) {
  double vw[O * I], vb[O];
  for (int step = 0; step < STEPS; step++) {
    double y[B * O], gw[O * I] = {0}, gb[O] = {0};
    for (int r = 0; r < B; r++)
      for (int o = 0; o < O; o++) {
        double s = b[o];
        for (int i = 0; i < I; i++) s += x[r * I + i] * w[o * I + i];
        y[r * O + o] = 2 * s; /* dloss/dy */
      }
    for (int r = 0; r < B; r++)
      for (int o = 0; o < O; o++) {
        gb[o] += y[r * O + o];
        for (int i = 0; i < I; i++) gw[o * I + i] += y[r * O + o] * x[r * I + i];
      }
    for (int k = 0; k < O * I; k++) {
      vw[k] = step ? mu * vw[k] + gw[k] : gw[k];
      w[k] -= lr * vw[k];
    }
    for (int o = 0; o < O; o++) {
      vb[o] = step ? mu * vb[o] + gb[o] : gb[o];
      b[o] -= lr * vb[o];
    }
  }
}

/* Runs the training loop on the default device and checks its values. */
static void train(void) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(B, I), TU_UNIT, 10);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(O, I), TU_UNIT, 11);
  lj_tensor *b = tu_tensor(LJ_F32, LJ_SHAPE(O), TU_UNIT, 12);
  int64_t n;
  double *xv = tu_read(x, &n), *wv = tu_read(w, &n), *bv = tu_read(b, &n);
  lj_tensor_set_requires_grad(w, true);
  lj_tensor_set_requires_grad(b, true);
  lj_tensor *params[2] = {w, b};
  lj_optim *opt = lj_optim_sgd(2, params, (lj_sgd_options){.lr = 0.01, .momentum = 0.9});
  ck_assert_ptr_nonnull(opt);
  for (int step = 0; step < STEPS; step++) {
    lj_scope_begin();
    lj_tensor *y = lj_linear(x, w, b);
    ck_assert_int_eq(lj_backward(lj_sum(lj_mul(y, y), 0, NULL, false)), LJ_OK);
    ck_assert_int_eq(lj_optim_step(opt), LJ_OK);
    lj_scope_end();
    ck_assert_int_eq(lj_sync(d), LJ_OK);
    lj_optim_zero_grad(opt);
  }
  host_sgd(xv, wv, bv, 0.01, 0.9);
  check_values(w, wv, O * I, 1e-5);
  check_values(b, bv, O, 1e-5);
  lj_optim_free(opt);
  free(xv);
  free(wv);
  free(bv);
  lj_tensor_release(x);
  lj_tensor_release(w);
  lj_tensor_release(b);
}

START_TEST(test_sgd_momentum) {
  /* the first step creates the momentum buffers: only w and b are updated in place */
  counts c = counts_now();
  train();
  expect_growth(c, 2 + 4 * (STEPS - 1), 0);
}
END_TEST

START_TEST(test_aliasing_off) {
  lj_config cfg = lj_config_default();
  cfg.enable_param_aliasing = false;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  counts c = counts_now();
  train();
  expect_growth(c, 0, 0);
}
END_TEST

/* A two-layer classifier (odd sizes: several row blocks, both threads, vector remainders)
 * trained three steps with SGD (momentum, weight decay) then Adam; returns every parameter's
 * bits (*n of them), malloc'd. */
static float *train_mlp(int64_t *n) {
  lj_device *d = lj_default_device();
  lj_manual_seed(d, 3);
  lj_tensor *w1, *b1, *w2, *b2;
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 300, 37, true, &w1, &b1), LJ_OK);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 37, 11, true, &w2, &b2), LJ_OK);
  lj_tensor *params[4] = {w1, b1, w2, b2};
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(50, 300), TU_ANY, 20);
  int64_t labels[50];
  for (int i = 0; i < 50; i++) labels[i] = (i * 7) % 11;
  lj_tensor *y = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(50), labels);
  lj_optim *opts[2] = {lj_optim_sgd(4, params, (lj_sgd_options){.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3}),
                       lj_optim_adam(4, params, lj_adam_defaults())};
  for (int o = 0; o < 2; o++)
    for (int step = 0; step < 3; step++) {
      lj_scope_begin();
      lj_tensor *logits = lj_linear(lj_relu(lj_linear(x, w1, b1)), w2, b2);
      lj_optim_zero_grad(opts[o]);
      ck_assert_int_eq(lj_backward(lj_cross_entropy(logits, y, LJ_REDUCE_MEAN)), LJ_OK);
      ck_assert_int_eq(lj_optimizer_step(opts[o], true), LJ_OK);
      lj_scope_end();
    }
  *n = 0;
  for (int i = 0; i < 4; i++) *n += lj_tensor_numel(params[i]);
  float *bits = malloc((size_t)*n * sizeof *bits), *at = bits;
  for (int i = 0; i < 4; i++) {
    size_t bytes = (size_t)lj_tensor_numel(params[i]) * sizeof *bits;
    ck_assert_int_eq(lj_tensor_to_host(params[i], at, bytes), LJ_OK);
    at += lj_tensor_numel(params[i]);
  }
  for (int o = 0; o < 2; o++) lj_optim_free(opts[o]);
  for (int i = 0; i < 4; i++) lj_tensor_release(params[i]);
  lj_tensor_release(x);
  lj_tensor_release(y);
  return bits;
}

/* In place or not, training computes the same bits. */
START_TEST(test_same_bits_either_way) {
  int64_t n, m;
  counts c = counts_now();
  float *with = train_mlp(&n);
  /* SGD's first step computes the initial parameters and creates the momentum buffers: then
   * 4 parameters + 4 buffers a step; Adam's first step creates its moments: the 4 parameters,
   * then 4 + 8 a step */
  expect_growth(c, 0 + 8 + 8 + 4 + 12 + 12, 0);
  lj_shutdown();
  lj_config cfg = lj_config_default();
  cfg.enable_param_aliasing = false;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  c = counts_now();
  float *without = train_mlp(&m);
  expect_growth(c, 0, 0);
  ck_assert_int_eq(n, m);
  ck_assert_mem_eq(with, without, (size_t)n * sizeof *with);
  free(with);
  free(without);
}
END_TEST

/* ---- random update rules ------------------------------------------------------------------ */

/* Each of three square parameters gets a new value from the old values of the others: an
 * elementwise mix, a transpose, a row mean, tanh, or a matmul. */
typedef struct rule {
  int kind[3], src[3][2];
} rule;

static uint64_t rule_state = 0x5851f42d4c957f2dULL;

static int pick(int n) { return (int)tu_pick(&rule_state, 0, n - 1); } /* uniform in [0, n) */

static lj_tensor *updated(const rule *r, lj_tensor **p, int i) {
  lj_tensor *a = p[r->src[i][0]], *b = p[r->src[i][1]];
  switch (r->kind[i]) {
  case 0: return lj_add(lj_mul_scalar(p[i], 0.5), a);
  case 1: return lj_add(p[i], lj_transpose(a, 0, 1));
  case 2: return lj_sub(p[i], lj_mean(a, 1, (const int[]){1}, true));
  case 3: return lj_add(lj_mul_scalar(lj_tanh(a), 0.5), b);
  default: return lj_add(p[i], lj_mul_scalar(lj_matmul(a, b), 0.01));
  }
}

/* Four steps of r (each assigns all three, then lj_sync) on [n, n] parameters; their bits,
 * malloc'd. */
static float *run_rule(const rule *r, int64_t n) {
  lj_device *d = lj_default_device();
  lj_tensor *p[3];
  for (int i = 0; i < 3; i++) p[i] = tu_tensor(LJ_F32, LJ_SHAPE(n, n), TU_UNIT, (uint64_t)i + 1);
  for (int step = 0; step < 4; step++) {
    lj_scope_begin();
    lj_tensor *next[3];
    for (int i = 0; i < 3; i++) next[i] = updated(r, p, i);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(lj_assign(p[i], next[i]), LJ_OK);
    lj_scope_end();
    ck_assert_int_eq(lj_sync(d), LJ_OK);
  }
  float *bits = malloc((size_t)(3 * n * n) * sizeof *bits);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(lj_tensor_to_host(p[i], bits + i * n * n, (size_t)(n * n) * sizeof *bits), LJ_OK);
    lj_tensor_release(p[i]);
  }
  return bits;
}

/* Random update rules, where a new value reads old values that other updates replace: in
 * place (donated) or not, the same bits. */
START_TEST(test_random_rules_same_bits) {
  static const int64_t sizes[] = {1, 3, 8, 17, 33, 64};
  int64_t donations = 0;
  for (int prog = 0; prog < 25; prog++) {
    rule r;
    for (int i = 0; i < 3; i++) {
      r.kind[i] = pick(5);
      r.src[i][0] = pick(3);
      r.src[i][1] = pick(3);
    }
    int64_t n = sizes[pick(6)];
    lj_config cfg = lj_config_default();
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    int64_t before = donated();
    float *with = run_rule(&r, n);
    donations += donated() - before;
    lj_shutdown();
    cfg.enable_param_aliasing = false;
    ck_assert_int_eq(lj_init(&cfg), LJ_OK);
    float *without = run_rule(&r, n);
    lj_shutdown();
    ck_assert_msg(memcmp(with, without, (size_t)(3 * n * n) * sizeof *with) == 0,
                  "rule %d (kinds %d %d %d, n %lld): donation changed the values", prog, r.kind[0], r.kind[1], r.kind[2],
                  (long long)n);
    free(with);
    free(without);
  }
  ck_assert_int_ge(donations, 25);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_donation");
  TCase *tc = tu_tcase("donation");
  tcase_add_test(tc, test_update_in_place);
  tcase_add_test(tc, test_held_elsewhere_copies);
  tcase_add_test(tc, test_partial_syncs_never_donate);
  tcase_add_test(tc, test_not_in_place);
  tcase_add_test(tc, test_later_reader_keeps_old_value);
  tcase_add_test(tc, test_view_root_keeps_old_value);
  tcase_add_test(tc, test_row_ops_in_place);
  tcase_add_test(tc, test_sgd_momentum);
  tcase_add_test(tc, test_aliasing_off);
  tcase_add_test(tc, test_same_bits_either_way);
  tcase_add_test(tc, test_random_rules_same_bits);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
