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

static lj_tensor *mnistnet_forward(lj_tensor **p, lj_tensor *x) {
  static const int pad1[2] = {1, 1}, pool[2] = {2, 2};
  lj_tensor *h = lj_relu(lj_max_pool2d(lj_conv2d(x, p[0], p[1], NULL, pad1, NULL, 1), pool, NULL, NULL));
  h = lj_relu(lj_max_pool2d(lj_conv2d(h, p[2], p[3], NULL, pad1, NULL, 1), pool, NULL, NULL));
  h = lj_relu(lj_linear(lj_reshape(h, LJ_SHAPE(-1, 3136)), p[4], p[5]));
  return lj_log_softmax(lj_linear(h, p[6], p[7]), 1);
}

static lj_tensor *mnistnet_loss(lj_tensor **p, lj_tensor *x, lj_tensor *target) {
  return lj_nll_loss(mnistnet_forward(p, x), target, LJ_REDUCE_MEAN);
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

/* Forward, backward and the SGD update of a step compile to one executable; after the two
 * warm-up steps (the first momentum step differs: the buffer starts as the gradient), 20
 * more steps compile nothing, although the learning rate changes half way. */
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
  for (int step = 0; step < 22; step++) {
    if (step == 12) ck_assert_int_eq(lj_optim_set_lr(opt, 0.005), LJ_OK);
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

static lj_dataset *fashion_mnist(const char *split) {
  const char *dir = getenv("LJ_TEST_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = "/usr/share/datasets/fashion-mnist";
  char images[512], labels[512];
  snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
  snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  lj_dataset *ds = lj_dataset_load_idx(images, labels);
  ck_assert_msg(ds, "%s (tools/install-deps.sh installs dataset-fashion-mnist)", lj_last_error());
  return ds;
}

/* The main job, short: 300 steps of batch 64 on the first 19200 training images, initialized
 * like PyTorch, with the loader (shuffled, normalized, a barrier per step via
 * lj_optimizer_step). The loss falls, nothing compiles after the two warm-up steps, and the
 * model beats chance by far on 2000 test images. */
START_TEST(test_trains_on_fashion_mnist) {
  enum { STEPS = 300, BATCH = 64, WINDOW = 50 };
  lj_device *d = lj_default_device();
  lj_dataset *all = fashion_mnist("train"), *train = lj_dataset_subset(all, 0, STEPS * BATCH);
  lj_dataset *all_test = fashion_mnist("t10k"), *test = lj_dataset_subset(all_test, 0, 2000);
  lj_dataset_free(all);
  lj_dataset_free(all_test);
  lj_loader_options lo = lj_loader_defaults();
  lo.batch_size = BATCH;
  lo.seed = 7;
  lo.mean = 0.2860;
  lo.std = 0.3530;
  lj_loader *loader = lj_loader_new(train, d, &lo);
  ck_assert_msg(loader, "%s", lj_last_error());
  ck_assert_int_eq(lj_loader_batches(loader), STEPS);
  lj_manual_seed(d, 1);
  lj_tensor *p[NPARAM];
  static const int k3[2] = {3, 3};
  ck_assert_int_eq(lj_nn_conv2d_init(d, LJ_F32, 1, 32, k3, 1, true, &p[0], &p[1]), LJ_OK);
  ck_assert_int_eq(lj_nn_conv2d_init(d, LJ_F32, 32, 64, k3, 1, true, &p[2], &p[3]), LJ_OK);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 3136, 128, true, &p[4], &p[5]), LJ_OK);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 128, 10, true, &p[6], &p[7]), LJ_OK);
  lj_optim *opt = lj_optim_sgd(NPARAM, p, (lj_sgd_options){.lr = 0.01, .momentum = 0.5});
  double first = 0, last = 0;
  int64_t compiles = 0, step = 0;
  lj_tensor *x, *y;
  while (lj_loader_next(loader, &x, &y)) {
    lj_optim_zero_grad(opt);
    lj_scope_begin();
    lj_tensor *loss = lj_keep(mnistnet_loss(p, x, y));
    lj_scope_end();
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    ck_assert_int_eq(lj_optimizer_step(opt, true), LJ_OK);
    double v = lj_item(loss);
    ck_assert(isfinite(v));
    if (step < WINDOW) first += v / WINDOW;
    if (step >= STEPS - WINDOW) last += v / WINDOW;
    if (step == 1) compiles = lj_counter_value("UncachedCompile");
    step++;
    lj_tensor_release(loss);
    lj_tensor_release(x);
    lj_tensor_release(y);
  }
  ck_assert_int_eq(lj_last_status(), LJ_OK);
  ck_assert_int_eq(step, STEPS);
  ck_assert_int_eq(lj_counter_value("UncachedCompile"), compiles);
  ck_assert_msg(last < 0.5 * first, "mean loss of the first %d steps %.3f, of the last %.3f", WINDOW, first, last);
  lj_loader_options to = lo;
  to.batch_size = 500;
  to.shuffle = false;
  lj_loader *tl = lj_loader_new(test, d, &to);
  int64_t correct = 0;
  while (lj_loader_next(tl, &x, &y)) {
    lj_scope_begin();
    lj_tensor *c = lj_sum(lj_cast(lj_eq(lj_argmax(mnistnet_forward(p, x), 1, false), y), LJ_I64), 0, NULL, false);
    correct += (int64_t)lj_item(c);
    lj_scope_end();
    lj_tensor_release(x);
    lj_tensor_release(y);
  }
  ck_assert_msg(correct >= 1400, "test accuracy %lld / 2000", (long long)correct);
  lj_loader_free(tl);
  lj_loader_free(loader);
  lj_optim_free(opt);
  for (int i = 0; i < NPARAM; i++) lj_tensor_release(p[i]);
  lj_dataset_free(train);
  lj_dataset_free(test);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nn_mnistnet");
  TCase *tc = tu_tcase("mnistnet");
  tcase_add_test(tc, test_loss_and_gradients_match_pytorch);
  tcase_add_test(tc, test_training_step_is_one_graph);
  suite_add_tcase(s, tc);
  TCase *train = tu_tcase("fashion_mnist");
  tcase_add_test(train, test_trains_on_fashion_mnist);
  suite_add_tcase(s, train);
  return s;
}

int main(void) { return tu_run(suite()); }
