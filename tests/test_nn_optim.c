/* test_nn_optim.c — SGD (momentum, dampening, nesterov, weight decay), Adam and AdamW against
 * torch.optim: parameter trajectories of 6 steps on a fixed quadratic, replayed from
 * tests/data/optim_fixture.txt (made by gen_optim_fixture.py) in f64; a learning-rate change
 * mid-run must not recompile; clip_grad_norm against torch.nn.utils.clip_grad_norm_; the
 * updates of a layer wider than a kernel's stack blocks against the interpreter. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 4, STEPS = 6 };
static const double target[N] = {0.5, -1.0, 2.0, 0.25}, coef[N] = {1.0, 0.5, 2.0, 3.0};
static const double p0[N] = {1.5, 0.5, -0.75, 1.0}, q0[N] = {0.3, -0.2, 0.9, -1.1};

typedef struct run {
  char kind[16];
  double lr, momentum, dampening, weight_decay, nesterov, beta1, beta2, eps, new_lr;
  double want[STEPS][2 * N];
} run;

static FILE *open_fixture(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/optim_fixture.txt", LJ_TEST_DATA_DIR);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "cannot open %s", path);
  return f;
}

/* Reads the next "run" block; false at the clip line or the end. */
static bool read_run(FILE *f, run *r) {
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "run ", 4) != 0) continue;
    int got = sscanf(line,
                     "run %15s lr=%lf momentum=%lf dampening=%lf weight_decay=%lf nesterov=%lf beta1=%lf "
                     "beta2=%lf eps=%lf new_lr=%lf",
                     r->kind, &r->lr, &r->momentum, &r->dampening, &r->weight_decay, &r->nesterov, &r->beta1,
                     &r->beta2, &r->eps, &r->new_lr);
    ck_assert_int_eq(got, 10);
    for (int s = 0; s < STEPS; s++) {
      double *w = r->want[s];
      ck_assert(fgets(line, sizeof line, f));
      got = sscanf(line, "p %lf %lf %lf %lf q %lf %lf %lf %lf", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6],
                   &w[7]);
      ck_assert_int_eq(got, 2 * N);
    }
    return true;
  }
  return false;
}

static lj_optim *make_optim(const run *r, lj_tensor **params) {
  if (strcmp(r->kind, "sgd") == 0)
    return lj_optim_sgd(2, params,
                        (lj_sgd_options){.lr = r->lr, .momentum = r->momentum, .dampening = r->dampening,
                                         .weight_decay = r->weight_decay, .nesterov = r->nesterov != 0});
  lj_adam_options a = {.lr = r->lr, .beta1 = r->beta1, .beta2 = r->beta2, .eps = r->eps,
                       .weight_decay = r->weight_decay, .decoupled_weight_decay = strcmp(r->kind, "adamw") == 0};
  return lj_optim_adam(2, params, a);
}

/* loss = sum(c * (p - t)^2) + sum(q^2 * t) */
static lj_tensor *quadratic_loss(lj_tensor *p, lj_tensor *q, lj_tensor *t, lj_tensor *c) {
  lj_scope_begin();
  lj_tensor *d = lj_sub(p, t);
  lj_tensor *loss = lj_add(lj_sum(lj_mul(c, lj_mul(d, d)), 0, NULL, false), lj_sum(lj_mul(lj_mul(q, q), t), 0, NULL, false));
  lj_keep(loss);
  lj_scope_end();
  return loss;
}

static void replay(const run *r) {
  lj_device *d = lj_default_device();
  lj_tensor *params[2] = {lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(N), p0), lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(N), q0)};
  lj_tensor *t = lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(N), target);
  lj_tensor *c = lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(N), coef);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(lj_tensor_set_requires_grad(params[i], true), LJ_OK);
  lj_optim *opt = make_optim(r, params);
  ck_assert_msg(opt, "%s", lj_last_error());
  int64_t compiles = 0;
  for (int s = 0; s < STEPS; s++) {
    if (r->new_lr != 0 && s == 3) ck_assert_int_eq(lj_optim_set_lr(opt, r->new_lr), LJ_OK);
    lj_optim_zero_grad(opt);
    lj_tensor *loss = quadratic_loss(params[0], params[1], t, c);
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor_release(loss);
    ck_assert_int_eq(lj_optimizer_step(opt, true), LJ_OK);
    if (s == 2) compiles = lj_counter_value("UncachedCompile"); /* warmed up: first step and the steady one */
    for (int i = 0; i < 2; i++) {
      int64_t n;
      double *got = tu_read(params[i], &n);
      ck_assert_int_eq(n, N);
      for (int k = 0; k < N; k++) {
        double want = r->want[s][i * N + k];
        ck_assert_msg(fabs(got[k] - want) <= 1e-12 * (1 + fabs(want)), "%s lr=%g step %d %s[%d]: %.17g, PyTorch %.17g",
                      r->kind, r->lr, s, i ? "q" : "p", k, got[k], want);
      }
      free(got);
    }
  }
  ck_assert_msg(lj_counter_value("UncachedCompile") == compiles, "%s lr=%g: steps 3.. compiled %lld graphs", r->kind,
                r->lr, (long long)(lj_counter_value("UncachedCompile") - compiles));
  lj_optim_free(opt);
  lj_tensor_release(params[0]);
  lj_tensor_release(params[1]);
  lj_tensor_release(t);
  lj_tensor_release(c);
}

START_TEST(test_trajectories_match_torch_optim) {
  FILE *f = open_fixture();
  run r;
  int runs = 0;
  while (read_run(f, &r)) replay(&r), runs++;
  fclose(f);
  ck_assert_int_eq(runs, 6);
}
END_TEST

START_TEST(test_clip_grad_norm_matches_torch) {
  FILE *f = open_fixture();
  char line[1024];
  double max_norm = 0, norm = 0, g[7];
  bool found = false;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "clip %lf norm %lf g1 %lf %lf %lf g2 %lf %lf %lf %lf", &max_norm, &norm, &g[0], &g[1], &g[2],
               &g[3], &g[4], &g[5], &g[6]) == 9)
      found = true;
  fclose(f);
  ck_assert(found);
  lj_device *d = lj_default_device();
  lj_tensor *p[2] = {lj_zeros(d, LJ_F64, LJ_SHAPE(3)), lj_zeros(d, LJ_F64, LJ_SHAPE(2, 2))};
  lj_tensor *gv[2] = {lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(3), (double[]){3, -4, 1}),
                      lj_tensor_from_host(d, LJ_F64, LJ_SHAPE(2, 2), (double[]){2, .5, -1, 6})};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(lj_tensor_set_requires_grad(p[i], true), LJ_OK);
    lj_tensor *loss = lj_sum(lj_mul(p[i], gv[i]), 0, NULL, false); /* d(loss)/dp = gv */
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor_release(loss);
  }
  lj_tensor *got_norm = lj_clip_grad_norm(2, p, max_norm);
  ck_assert_msg(got_norm, "%s", lj_last_error());
  ck_assert_double_eq_tol(lj_item(got_norm), norm, 1e-12 * norm);
  int at = 0;
  for (int i = 0; i < 2; i++) {
    int64_t n;
    double *got = tu_read(lj_tensor_grad(p[i]), &n);
    for (int k = 0; k < n; k++, at++) ck_assert_double_eq_tol(got[k], g[at], 1e-12);
    free(got);
  }
  ck_assert_int_eq(at, 7);
}
END_TEST

/* The update of a linear layer's weight with rows of C wider than a kernel keeps on its
 * stack (20000 inputs: 78 KiB a row) from a batch of 2 (a weight gradient of k = 2): its
 * compile divided by zero blocks of rows, which killed the process with SIGFPE. */
START_TEST(test_wide_layer_small_batch) {
  lj_device *d = lj_default_device();
  for (int kind = 0; kind < 2; kind++) {
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 20000), TU_ANY, 1);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(9, 20000), TU_ANY, 2);
    lj_tensor *t = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(2), (const int64_t[]){3, 8});
    ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
    lj_tensor *loss = lj_cross_entropy(lj_linear(x, w, NULL), t, LJ_REDUCE_MEAN);
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_optim *o = kind ? lj_optim_adam(1, &w, lj_adam_defaults())
                       : lj_optim_sgd(1, &w, (lj_sgd_options){.lr = 0.1, .momentum = 0.9});
    ck_assert_int_eq(lj_optim_step(o), LJ_OK);
    tu_check_interp(1, &w, 1e-5);
    lj_optim_free(o);
    lj_tensor_release(loss);
    lj_tensor_release(t);
    lj_tensor_release(w);
    lj_tensor_release(x);
  }
}
END_TEST

START_TEST(test_bad_options) {
  lj_tensor *p = lj_zeros(lj_default_device(), LJ_F32, LJ_SHAPE(3));
  lj_tensor *i = lj_zeros(lj_default_device(), LJ_I32, LJ_SHAPE(3));
  ck_assert_ptr_null(lj_optim_sgd(1, &p, (lj_sgd_options){.lr = -0.1}));
  tu_expect_error(LJ_ERR_ARG, "lj_optim_sgd", "lr", "-0.1", NULL);
  ck_assert_ptr_null(lj_optim_sgd(1, &p, (lj_sgd_options){.lr = 0.1, .nesterov = true}));
  tu_expect_error(LJ_ERR_ARG, "nesterov", NULL);
  ck_assert_ptr_null(lj_optim_sgd(1, &i, (lj_sgd_options){.lr = 0.1}));
  tu_expect_error(LJ_ERR_DTYPE, "lj_optim_sgd", "parameter 0", "i32", NULL);
  lj_adam_options a = lj_adam_defaults();
  a.beta2 = 1.0;
  ck_assert_ptr_null(lj_optim_adam(1, &p, a));
  tu_expect_error(LJ_ERR_ARG, "lj_optim_adam", "betas", NULL);
  lj_optim *o = lj_optim_adam(1, &p, lj_adam_defaults());
  ck_assert(o);
  ck_assert_int_eq(lj_optim_set_lr(o, -1), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lr", NULL);
  ck_assert_int_eq(lj_optim_step(o), LJ_OK); /* no gradient: nothing to do */
  lj_optim_free(o);
  lj_tensor_release(p);
  lj_tensor_release(i);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nn_optim");
  TCase *tc = tu_tcase("optim");
  tcase_add_test(tc, test_trajectories_match_torch_optim);
  tcase_add_test(tc, test_clip_grad_norm_matches_torch);
  tcase_add_test(tc, test_wide_layer_small_batch);
  tcase_add_test(tc, test_bad_options);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
