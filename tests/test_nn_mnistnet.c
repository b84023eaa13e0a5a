/* test_nn_mnistnet.c — the seed MNISTNet end to end against PyTorch: for weights and inputs
 * made by the same integer hash as tests/data/gen_mnistnet_fixture.py, the loss and every
 * parameter gradient (sum, sum of squares and 64 sampled entries) must match; one training
 * step (forward, backward, SGD update) compiles to a single executable. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lj_tensor *hashed(int ndim, const int64_t *shape, int seed, double scale) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = ((uint64_t)i * 2654435761ULL + (uint64_t)seed * 40503ULL) % 4294967296ULL;
    v[i] = (float)(((double)h / 4294967296.0 - 0.5) * scale);
  }
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), LJ_F32, ndim, shape, v);
  free(v);
  return t;
}

enum { NPARAM = 8 };
static const char *const names[NPARAM] = {"conv1.w", "conv1.b", "conv2.w", "conv2.b",
                                          "fc1.w",   "fc1.b",   "fc2.w",   "fc2.b"};

static void make_params(lj_tensor **p) {
  p[0] = hashed(LJ_SHAPE(32, 1, 3, 3), 1, 2.0 / 3);
  p[1] = hashed(LJ_SHAPE(32), 2, 2.0 / 3);
  p[2] = hashed(LJ_SHAPE(64, 32, 3, 3), 3, 2.0 / 17);
  p[3] = hashed(LJ_SHAPE(64), 4, 2.0 / 17);
  p[4] = hashed(LJ_SHAPE(128, 3136), 5, 2.0 / 56);
  p[5] = hashed(LJ_SHAPE(128), 6, 2.0 / 56);
  p[6] = hashed(LJ_SHAPE(10, 128), 7, 2.0 / 11.3);
  p[7] = hashed(LJ_SHAPE(10), 8, 2.0 / 11.3);
  for (int i = 0; i < NPARAM; i++) lj_tensor_set_requires_grad(p[i], true);
}

static lj_tensor *mnistnet_loss(lj_tensor **p, lj_tensor *x, lj_tensor *target) {
  static const int pad1[2] = {1, 1}, pool[2] = {2, 2};
  lj_tensor *h = lj_relu(lj_max_pool2d(lj_conv2d(x, p[0], p[1], NULL, pad1, NULL, 1), pool, NULL, NULL));
  h = lj_relu(lj_max_pool2d(lj_conv2d(h, p[2], p[3], NULL, pad1, NULL, 1), pool, NULL, NULL));
  h = lj_relu(lj_linear(lj_reshape(h, LJ_SHAPE(-1, 3136)), p[4], p[5]));
  return lj_nll_loss(lj_log_softmax(lj_linear(h, p[6], p[7]), 1), target, LJ_REDUCE_MEAN);
}

START_TEST(test_loss_and_gradients_match_pytorch) {
  char path[512];
  snprintf(path, sizeof path, "%s/mnistnet_fixture.txt", LJ_TEST_DATA_DIR);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "cannot open %s", path);
  lj_tensor *p[NPARAM];
  make_params(p);
  lj_tensor *x = hashed(LJ_SHAPE(8, 1, 28, 28), 9, 2.0);
  lj_tensor *target = lj_tensor_from_host(lj_default_device(), LJ_I64, LJ_SHAPE(8), (int64_t[]){3, 1, 4, 1, 5, 9, 2, 6});
  lj_scope_begin();
  lj_tensor *loss = lj_keep(mnistnet_loss(p, x, target));
  lj_scope_end();
  ck_assert_msg(loss, "%s", lj_last_error());
  ck_assert_int_eq(lj_backward(loss), LJ_OK);
  static char line[1 << 16];
  double want_loss = 0;
  int checked = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "loss %lf", &want_loss) == 1) {
      ck_assert_double_eq_tol(lj_item(loss), want_loss, 2e-6);
      continue;
    }
    char name[32];
    long long n;
    double sum, sumsq;
    if (sscanf(line, "grad %31s %lld %lf %lf", name, &n, &sum, &sumsq) != 4) continue;
    int k = 0;
    while (k < NPARAM && strcmp(names[k], name) != 0) k++;
    ck_assert_int_lt(k, NPARAM);
    int64_t cnt;
    double *g = tu_read(lj_tensor_grad(p[k]), &cnt);
    ck_assert_int_eq(cnt, n);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < cnt; i++) s += g[i], s2 += g[i] * g[i];
    ck_assert_msg(fabs(s2 - sumsq) <= 1e-4 * sumsq, "%s: sum of squares %g, PyTorch %g", name, s2, sumsq);
    ck_assert_msg(fabs(s - sum) <= 1e-4 * sqrt(sumsq * (double)cnt) + 1e-9, "%s: sum %g, PyTorch %g", name, s, sum);
    ck_assert(fgets(line, sizeof line, f));
    double scale = sqrt(sumsq / (double)cnt) + 1e-12;
    char *tok = strtok(line + 7, " \n");
    for (; tok; tok = strtok(NULL, " \n")) {
      long long i;
      double v;
      ck_assert(sscanf(tok, "%lld:%lf", &i, &v) == 2);
      ck_assert_msg(fabs(g[i] - v) <= 2e-4 * scale + 1e-5 * fabs(v), "%s[%lld]: %g, PyTorch %g", name, i, g[i], v);
    }
    free(g);
    checked++;
  }
  fclose(f);
  ck_assert_int_eq(checked, NPARAM);
}
END_TEST

/* Forward, backward and the SGD update of a step compile to one executable; later steps
 * compile nothing (the first momentum step differs: the buffer starts as the gradient). */
START_TEST(test_training_step_is_one_graph) {
  lj_device *d = lj_default_device();
  lj_tensor *p[NPARAM];
  make_params(p);
  lj_tensor *x = hashed(LJ_SHAPE(8, 1, 28, 28), 9, 2.0);
  lj_tensor *target = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(8), (int64_t[]){3, 1, 4, 1, 5, 9, 2, 6});
  lj_optim *opt = lj_optim_sgd(NPARAM, p, (lj_sgd_options){.lr = 0.01, .momentum = 0.5});
  ck_assert(opt);
  double first = 0, last = 0;
  int64_t compiles_after_warmup = 0;
  for (int step = 0; step < 8; step++) {
    lj_optim_zero_grad(opt);
    lj_scope_begin();
    lj_tensor *loss = lj_keep(mnistnet_loss(p, x, target));
    lj_scope_end();
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    int64_t runs = lj_counter_value("SyncTensors");
    ck_assert_int_eq(lj_optimizer_step(opt, true), LJ_OK);
    ck_assert_int_eq(lj_counter_value("SyncTensors") - runs, 1); /* forward + backward + update */
    if (step == 1) compiles_after_warmup = lj_counter_value("UncachedCompile");
    double v = lj_item(loss);
    if (step == 0) first = v;
    last = v;
    lj_tensor_release(loss);
  }
  ck_assert_int_eq(lj_counter_value("UncachedCompile"), compiles_after_warmup);
  ck_assert_msg(last < first, "loss did not fall: %g -> %g", first, last);
  lj_optim_free(opt);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nn_mnistnet");
  TCase *tc = tu_tcase("mnistnet");
  tcase_add_test(tc, test_loss_and_gradients_match_pytorch);
  tcase_add_test(tc, test_training_step_is_one_graph);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
