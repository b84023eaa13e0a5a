/* test_autograd_gradcheck.c — every differentiable op's gradient against central finite
 * differences in f64, through one helper: loss = sum(op(inputs) * W) for fixed random W, the
 * analytic gradient from lj_backward, the numeric one from (loss(x+h) - loss(x-h)) / 2h for
 * every input element. Inputs are drawn away from the ops' kinks (abs at 0, ties of max...). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXIN = 3 };

typedef struct gcase {
  const char *name;
  int nin;
  int ndim[MAXIN];
  int64_t shape[MAXIN][4];
  tu_values kind[MAXIN];
  lj_tensor *(*fn)(lj_tensor **in);
} gcase;

static uint64_t rng = 88172645463325252ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

/* Values of a kind, spread so that no two are closer than ~0.05 (no ties for max/min). */
static void fill(double *v, int64_t n, tu_values kind) {
  for (int64_t i = 0; i < n; i++) {
    double u = ((double)i + 0.2 + 0.6 * uniform()) / (double)n; /* stratified in (0, 1) */
    switch (kind) {
    case TU_POSITIVE: v[i] = 0.3 + 2 * u; break;
    case TU_UNIT: v[i] = -0.9 + 1.8 * u; break;
    default: v[i] = -2 + 4 * u; break;
    }
  }
  for (int64_t i = n - 1; i > 0; i--) { /* shuffle so neighbours are not ordered */
    int64_t j = (int64_t)(uniform() * (double)(i + 1));
    double t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

static double loss_of(const gcase *c, double **vals, const double *w, int64_t wn, bool grad, double **grads) {
  lj_device *d = lj_default_device();
  lj_tensor *in[MAXIN];
  for (int k = 0; k < c->nin; k++) {
    in[k] = lj_tensor_from_host(d, LJ_F64, c->ndim[k], c->shape[k], vals[k]);
    lj_tensor_set_requires_grad(in[k], grad);
  }
  lj_manual_seed(d, 1234); /* the same dropout mask at every evaluation */
  lj_scope_begin();
  lj_tensor *out = c->fn(in);
  ck_assert_msg(out, "%s: %s", c->name, lj_last_error());
  ck_assert_int_eq(lj_tensor_numel(out), wn);
  lj_tensor *wt = lj_tensor_from_host(d, LJ_F64, lj_tensor_ndim(out), lj_tensor_shape(out), w);
  lj_tensor *loss = lj_keep(lj_sum(lj_mul(lj_cast(out, LJ_F64), wt), 0, NULL, false));
  lj_scope_end();
  if (grad) ck_assert_msg(lj_backward(loss) == LJ_OK, "%s: %s", c->name, lj_last_error());
  double v = lj_item(loss);
  ck_assert_msg(!isnan(v), "%s: loss is NaN (%s)", c->name, lj_last_error());
  for (int k = 0; grad && k < c->nin; k++) {
    lj_tensor *g = lj_tensor_grad(in[k]);
    int64_t n = lj_tensor_numel(in[k]);
    if (!g) {
      grads[k] = calloc((size_t)n + 1, sizeof(double));
      continue;
    }
    int64_t cnt;
    grads[k] = tu_read(g, &cnt);
  }
  for (int k = 0; k < c->nin; k++) lj_tensor_release(in[k]);
  lj_tensor_release(loss);
  return v;
}

static void gradcheck(const gcase *c) {
  double *vals[MAXIN], *grads[MAXIN];
  int64_t n[MAXIN];
  for (int k = 0; k < c->nin; k++) {
    n[k] = 1;
    for (int i = 0; i < c->ndim[k]; i++) n[k] *= c->shape[k][i];
    vals[k] = malloc(((size_t)n[k] + 1) * sizeof(double));
    fill(vals[k], n[k], c->kind[k]);
  }
  /* the output's size, then fixed weights for it */
  lj_device *d = lj_default_device();
  lj_tensor *probe[MAXIN];
  for (int k = 0; k < c->nin; k++) probe[k] = lj_tensor_from_host(d, LJ_F64, c->ndim[k], c->shape[k], vals[k]);
  lj_tensor *o = c->fn(probe);
  ck_assert_msg(o, "%s: %s", c->name, lj_last_error());
  int64_t wn = lj_tensor_numel(o);
  lj_tensor_release(o);
  for (int k = 0; k < c->nin; k++) lj_tensor_release(probe[k]);
  double *w = malloc(((size_t)wn + 1) * sizeof *w);
  for (int64_t i = 0; i < wn; i++) w[i] = -1 + 2 * uniform();
  loss_of(c, vals, w, wn, true, grads);
  const double h = 1e-6;
  for (int k = 0; k < c->nin; k++) {
    if (c->kind[k] == TU_NONZERO) continue; /* integer-valued inputs (indices): not differentiated */
    for (int64_t i = 0; i < n[k]; i++) {
      double x = vals[k][i];
      vals[k][i] = x + h;
      double up = loss_of(c, vals, w, wn, false, NULL);
      vals[k][i] = x - h;
      double down = loss_of(c, vals, w, wn, false, NULL);
      vals[k][i] = x;
      double num = (up - down) / (2 * h);
      ck_assert_msg(fabs(grads[k][i] - num) <= 2e-6 * fabs(num) + 2e-6, "%s: input %d element %lld: autograd %.10g, numeric %.10g",
                    c->name, k, (long long)i, grads[k][i], num);
    }
    free(grads[k]);
  }
  for (int k = 0; k < c->nin; k++) free(vals[k]);
  free(w);
}

/* ---- the ops ------------------------------------------------------------------------------- */

#define U(fname, call) \
  static lj_tensor *fname(lj_tensor **in) { return call; }

U(f_neg, lj_neg(in[0]))
U(f_abs, lj_abs(in[0]))
U(f_exp, lj_exp(in[0]))
U(f_log, lj_log(in[0]))
U(f_log1p, lj_log1p(in[0]))
U(f_expm1, lj_expm1(in[0]))
U(f_sqrt, lj_sqrt(in[0]))
U(f_rsqrt, lj_rsqrt(in[0]))
U(f_sin, lj_sin(in[0]))
U(f_cos, lj_cos(in[0]))
U(f_tanh, lj_tanh(in[0]))
U(f_sigmoid, lj_sigmoid(in[0]))
U(f_relu, lj_relu(in[0]))
U(f_gelu, lj_gelu(in[0], false))
U(f_gelu_tanh, lj_gelu(in[0], true))
U(f_silu, lj_silu(in[0]))
U(f_erf, lj_erf(in[0]))
U(f_reciprocal, lj_reciprocal(in[0]))
U(f_floor, lj_add(lj_floor(in[0]), in[0]))
U(f_sign, lj_mul(lj_sign(in[0]), in[0]))
U(f_add, lj_add(in[0], in[1]))
U(f_sub, lj_sub(in[0], in[1]))
U(f_mul, lj_mul(in[0], in[1]))
U(f_div, lj_div(in[0], in[1]))
U(f_pow, lj_pow(in[0], in[1]))
U(f_maximum, lj_maximum(in[0], in[1]))
U(f_minimum, lj_minimum(in[0], in[1]))
U(f_remainder, lj_remainder(in[0], lj_add_scalar(in[1], 3.0)))
U(f_where, lj_where(lj_gt_scalar(in[2], 0), in[0], in[1]))
U(f_clamp, lj_clamp(in[0], -1.1, 1.3))
U(f_scalars, lj_rsub_scalar(lj_pow_scalar(lj_div_scalar(lj_mul_scalar(in[0], 1.5), 2.5), 3), 0.5))
U(f_rpow, lj_rpow_scalar(1.7, in[0]))
U(f_sum, lj_sum(in[0], 1, (const int[]){1}, false))
U(f_mean, lj_mean(in[0], 2, (const int[]){0, 2}, true))
U(f_prod, lj_prod(in[0], 1, (const int[]){1}, false))
U(f_amax, lj_amax(in[0], 1, (const int[]){-1}, false))
U(f_amin, lj_amin(in[0], 0, NULL, false))
U(f_reshape, lj_mul(lj_reshape(in[0], LJ_SHAPE(3, -1)), lj_reshape(in[0], LJ_SHAPE(3, 4))))
U(f_permute, lj_mul(lj_permute(in[0], 3, (const int[]){2, 0, 1}), lj_permute(in[0], 3, (const int[]){2, 0, 1})))
U(f_expand, lj_mul(lj_expand(in[0], LJ_SHAPE(3, 2, 4)), lj_expand(in[1], LJ_SHAPE(3, 2, 4))))
U(f_squeeze, lj_exp(lj_unsqueeze(lj_squeeze(lj_flatten(in[0], 0, 1), 0, NULL), 0)))
U(f_slice, lj_exp(lj_slice(in[0], 1, 1, 5, 2)))
U(f_slice_neg, lj_exp(lj_slice(lj_transpose(in[0], 0, 1), 0, -4, -1, 1)))
U(f_cat, lj_cat(3, (lj_tensor *const[]){in[0], lj_exp(in[1]), in[0]}, 1))
U(f_matmul, lj_matmul(in[0], in[1]))
U(f_matmul_1d, lj_matmul(lj_reshape(in[0], LJ_SHAPE(-1)), lj_transpose(in[1], 0, 1)))
U(f_matmul_batched, lj_matmul(in[0], in[1]))
U(f_softmax, lj_softmax(in[0], 1))
U(f_log_softmax, lj_log_softmax(in[0], -1))
U(f_linear, lj_linear(in[0], in[1], in[2]))
U(f_mse, lj_mse_loss(in[0], in[1], LJ_REDUCE_MEAN))
U(f_dropout, lj_dropout(in[0], 0.5, true))
U(f_conv, lj_conv2d(in[0], in[1], in[2], (const int[]){2, 1}, (const int[]){1, 2}, (const int[]){1, 2}, 2))
U(f_conv_plain, lj_conv2d(in[0], in[1], NULL, NULL, (const int[]){1, 1}, NULL, 1))
U(f_conv_depthwise, lj_conv2d(in[0], in[1], in[2], (const int[]){2, 1}, (const int[]){1, 2}, (const int[]){1, 2}, 3))
U(f_conv_wide, lj_conv2d(in[0], in[1], NULL, NULL, (const int[]){2, 1}, NULL, 1))
U(f_conv_1x1, lj_conv2d(in[0], in[1], in[2], NULL, NULL, NULL, 1))
U(f_max_pool, lj_max_pool2d(in[0], (const int[]){2, 2}, NULL, NULL))
U(f_max_pool_pad, lj_max_pool2d(in[0], (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1}))
U(f_avg_pool, lj_avg_pool2d(in[0], (const int[]){2, 3}, (const int[]){1, 2}, (const int[]){1, 1}))
U(f_avg_pool_wide, lj_avg_pool2d(in[0], (const int[]){4, 3}, (const int[]){2, 1}, (const int[]){1, 1}))
U(f_layer_norm, lj_layer_norm(in[0], 1, in[1], in[2], 1e-5))
U(f_batch_norm, lj_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5))
U(f_pad, lj_pad(in[0], 4, (const int64_t[]){1, 2, -1, 1}, 0.5))

static lj_tensor *indices(const int64_t *v, int ndim, const int64_t *shape) {
  return lj_tensor_from_host(lj_default_device(), LJ_I64, ndim, shape, v);
}

static lj_tensor *f_nll(lj_tensor **in) {
  lj_tensor *t = indices((const int64_t[]){2, 0, 4, 1}, LJ_SHAPE(4));
  return lj_nll_loss(lj_log_softmax(in[0], 1), t, LJ_REDUCE_MEAN);
}
static lj_tensor *f_cross_entropy(lj_tensor **in) {
  lj_tensor *t = indices((const int64_t[]){1, 3, 0}, LJ_SHAPE(3));
  return lj_cross_entropy(in[0], t, LJ_REDUCE_SUM);
}
static lj_tensor *f_embedding(lj_tensor **in) {
  return lj_embedding(in[0], indices((const int64_t[]){3, 0, 3, 1, 4, 0}, LJ_SHAPE(2, 3)));
}
static lj_tensor *f_index_select(lj_tensor **in) {
  return lj_index_select(in[0], 1, indices((const int64_t[]){2, 2, 0}, LJ_SHAPE(3)));
}
static lj_tensor *f_gather(lj_tensor **in) {
  return lj_gather(in[0], 0, indices((const int64_t[]){0, 2, 1, 1, 0, 2}, LJ_SHAPE(2, 3)));
}
static lj_tensor *f_scatter_add(lj_tensor **in) {
  return lj_scatter_add(in[0], 1, indices((const int64_t[]){0, 0, 3, 2, 1, 3}, LJ_SHAPE(2, 3)), in[1]);
}

static const gcase cases[] = {
    {"neg", 1, {2}, {{3, 4}}, {TU_ANY}, f_neg},
    {"abs", 1, {2}, {{3, 4}}, {TU_ANY}, f_abs},
    {"exp", 1, {2}, {{3, 4}}, {TU_ANY}, f_exp},
    {"log", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_log},
    {"log1p", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_log1p},
    {"expm1", 1, {2}, {{3, 4}}, {TU_ANY}, f_expm1},
    {"sqrt", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_sqrt},
    {"rsqrt", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_rsqrt},
    {"sin", 1, {2}, {{3, 4}}, {TU_ANY}, f_sin},
    {"cos", 1, {2}, {{3, 4}}, {TU_ANY}, f_cos},
    {"tanh", 1, {2}, {{3, 4}}, {TU_ANY}, f_tanh},
    {"sigmoid", 1, {2}, {{3, 4}}, {TU_ANY}, f_sigmoid},
    {"relu", 1, {2}, {{3, 4}}, {TU_ANY}, f_relu},
    {"gelu", 1, {2}, {{3, 4}}, {TU_ANY}, f_gelu},
    {"gelu_tanh", 1, {2}, {{3, 4}}, {TU_ANY}, f_gelu_tanh},
    {"silu", 1, {2}, {{3, 4}}, {TU_ANY}, f_silu},
    {"erf", 1, {2}, {{3, 4}}, {TU_ANY}, f_erf},
    {"reciprocal", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_reciprocal},
    {"floor", 1, {2}, {{3, 4}}, {TU_ANY}, f_floor},
    {"sign", 1, {2}, {{3, 4}}, {TU_ANY}, f_sign},
    {"add", 2, {2, 1}, {{3, 4}, {4}}, {TU_ANY, TU_ANY}, f_add},
    {"sub", 2, {2, 2}, {{3, 4}, {3, 1}}, {TU_ANY, TU_ANY}, f_sub},
    {"mul", 2, {2, 0}, {{3, 4}, {0}}, {TU_ANY, TU_ANY}, f_mul},
    {"div", 2, {2, 2}, {{3, 4}, {3, 4}}, {TU_ANY, TU_POSITIVE}, f_div},
    {"pow", 2, {2, 2}, {{3, 4}, {3, 4}}, {TU_POSITIVE, TU_ANY}, f_pow},
    {"maximum", 2, {2, 2}, {{3, 4}, {3, 4}}, {TU_ANY, TU_ANY}, f_maximum},
    {"minimum", 2, {2, 1}, {{3, 4}, {4}}, {TU_ANY, TU_ANY}, f_minimum},
    {"remainder", 2, {2, 2}, {{3, 4}, {3, 4}}, {TU_UNIT, TU_UNIT}, f_remainder},
    {"where", 3, {2, 2, 2}, {{3, 4}, {3, 4}, {3, 4}}, {TU_ANY, TU_ANY, TU_ANY}, f_where},
    {"clamp", 1, {2}, {{3, 4}}, {TU_ANY}, f_clamp},
    {"scalar ops", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_scalars},
    {"rpow_scalar", 1, {2}, {{3, 4}}, {TU_ANY}, f_rpow},
    {"sum", 1, {3}, {{2, 3, 4}}, {TU_ANY}, f_sum},
    {"mean", 1, {3}, {{2, 3, 4}}, {TU_ANY}, f_mean},
    {"prod", 1, {2}, {{3, 4}}, {TU_POSITIVE}, f_prod},
    {"amax", 1, {2}, {{3, 4}}, {TU_ANY}, f_amax},
    {"amin", 1, {2}, {{3, 4}}, {TU_ANY}, f_amin},
    {"reshape", 1, {2}, {{4, 3}}, {TU_ANY}, f_reshape},
    {"permute", 1, {3}, {{2, 3, 2}}, {TU_ANY}, f_permute},
    {"expand", 2, {3, 2}, {{3, 1, 4}, {2, 1}}, {TU_ANY, TU_ANY}, f_expand},
    {"squeeze/unsqueeze/flatten", 1, {3}, {{1, 3, 4}}, {TU_ANY}, f_squeeze},
    {"slice step 2", 1, {2}, {{3, 6}}, {TU_ANY}, f_slice},
    {"slice negative", 1, {2}, {{3, 6}}, {TU_ANY}, f_slice_neg},
    {"cat", 2, {2, 2}, {{3, 2}, {3, 1}}, {TU_ANY, TU_ANY}, f_cat},
    {"matmul", 2, {2, 2}, {{3, 4}, {4, 2}}, {TU_ANY, TU_ANY}, f_matmul},
    {"matmul 1-d", 2, {2, 2}, {{1, 4}, {3, 4}}, {TU_ANY, TU_ANY}, f_matmul_1d},
    {"matmul batched", 2, {3, 2}, {{2, 3, 4}, {4, 2}}, {TU_ANY, TU_ANY}, f_matmul_batched},
    {"softmax", 1, {2}, {{3, 4}}, {TU_ANY}, f_softmax},
    {"log_softmax", 1, {2}, {{3, 4}}, {TU_ANY}, f_log_softmax},
    {"nll_loss", 1, {2}, {{4, 5}}, {TU_ANY}, f_nll},
    {"cross_entropy", 1, {2}, {{3, 4}}, {TU_ANY}, f_cross_entropy},
    {"linear", 3, {2, 2, 1}, {{2, 3}, {4, 3}, {4}}, {TU_ANY, TU_ANY, TU_ANY}, f_linear},
    {"mse_loss", 2, {2, 2}, {{3, 4}, {3, 4}}, {TU_ANY, TU_ANY}, f_mse},
    {"dropout", 1, {2}, {{4, 5}}, {TU_ANY}, f_dropout},
    {"conv2d stride/pad/dilation/groups", 3, {4, 4, 1}, {{1, 4, 5, 6}, {2, 2, 2, 2}, {2}},
     {TU_ANY, TU_ANY, TU_ANY}, f_conv},
    {"conv2d", 2, {4, 4}, {{2, 2, 4, 4}, {3, 2, 3, 3}}, {TU_ANY, TU_ANY}, f_conv_plain},
    {"conv2d depthwise, 2 channels out per channel in", 3, {4, 4, 1}, {{2, 3, 5, 6}, {6, 1, 3, 3}, {6}},
     {TU_ANY, TU_ANY, TU_ANY}, f_conv_depthwise},
    /* windows of more than 9 positions: im2col and col2im loop over them at run time */
    {"conv2d 4x3 window", 2, {4, 4}, {{2, 2, 5, 4}, {3, 2, 4, 3}}, {TU_ANY, TU_ANY}, f_conv_wide},
    /* its im2col and col2im only reshape: a matmul of the image */
    {"conv2d 1x1", 3, {4, 4, 1}, {{2, 3, 4, 5}, {4, 3, 1, 1}, {4}}, {TU_ANY, TU_ANY, TU_ANY}, f_conv_1x1},
    {"max_pool2d", 1, {4}, {{2, 2, 4, 4}}, {TU_ANY}, f_max_pool},
    {"max_pool2d padded", 1, {4}, {{1, 2, 5, 5}}, {TU_ANY}, f_max_pool_pad},
    {"avg_pool2d", 1, {4}, {{1, 2, 4, 5}}, {TU_ANY}, f_avg_pool},
    {"avg_pool2d 4x3 window", 1, {4}, {{1, 2, 6, 5}}, {TU_ANY}, f_avg_pool_wide},
    {"layer_norm", 3, {2, 1, 1}, {{3, 5}, {5}, {5}}, {TU_ANY, TU_ANY, TU_ANY}, f_layer_norm},
    {"batch_norm", 3, {4, 1, 1}, {{3, 2, 2, 2}, {2}, {2}}, {TU_ANY, TU_ANY, TU_ANY}, f_batch_norm},
    {"pad", 1, {2}, {{3, 4}}, {TU_ANY}, f_pad},
    {"embedding", 1, {2}, {{5, 3}}, {TU_ANY}, f_embedding},
    {"index_select", 1, {2}, {{2, 4}}, {TU_ANY}, f_index_select},
    {"gather", 1, {2}, {{3, 3}}, {TU_ANY}, f_gather},
    {"scatter_add", 2, {2, 2}, {{2, 4}, {2, 3}}, {TU_ANY, TU_ANY}, f_scatter_add},
};

START_TEST(test_gradcheck) { gradcheck(&cases[_i]); }
END_TEST

/* Gradients accumulate across backward calls, stop at detach, and only reach leaves that
 * require grad; zero_grad drops them. */
START_TEST(test_accumulation_and_detach) {
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(3), (float[]){1, 2, 3});
  lj_tensor *y = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(3), (float[]){4, 5, 6});
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  for (int k = 0; k < 2; k++) {
    lj_scope_begin();
    lj_tensor *loss = lj_keep(lj_sum(lj_mul(lj_mul(x, x), lj_detach(lj_mul(x, y))), 0, NULL, false));
    lj_scope_end();
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor_release(loss);
  }
  float g[3];
  ck_assert_int_eq(lj_tensor_to_host(lj_tensor_grad(x), g, sizeof g), LJ_OK);
  for (int i = 0; i < 3; i++) ck_assert_float_eq_tol(g[i], 2 * 2 * (i + 1) * (i + 1) * (i + 4), 1e-4); /* 2 * 2x * (x y) */
  ck_assert(!lj_tensor_grad(y));
  lj_tensor_zero_grad(x);
  ck_assert(!lj_tensor_grad(x));
  lj_tensor *i = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(1), (int32_t[]){1});
  ck_assert_int_eq(lj_tensor_set_requires_grad(i, true), LJ_ERR_DTYPE);
  tu_expect_error(LJ_ERR_DTYPE, "float", NULL);
  lj_tensor *v = lj_mul(x, x);
  ck_assert_int_eq(lj_backward(v), LJ_ERR_SHAPE);
  tu_expect_error(LJ_ERR_SHAPE, "lj_backward", "[3]", NULL);
}
END_TEST

/* x's gradient of sum(f(x)) (and *gy's for two-operand f); checked against want. */
static void expect_grad(const char *what, lj_tensor *(*f)(lj_tensor *, lj_tensor *), int ndim, const int64_t *shape,
                        const float *x0, const float *y0, const float *want_x, const float *want_y) {
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, ndim, shape, x0);
  lj_tensor *y = y0 ? lj_tensor_from_host(d, LJ_F32, ndim, shape, y0) : NULL;
  lj_tensor_set_requires_grad(x, true);
  if (y) lj_tensor_set_requires_grad(y, true);
  lj_scope_begin();
  lj_tensor *loss = lj_keep(lj_sum(f(x, y), 0, NULL, false));
  lj_scope_end();
  ck_assert_int_eq(lj_backward(loss), LJ_OK);
  for (int k = 0; k < (y ? 2 : 1); k++) {
    int64_t n;
    ck_assert_int_eq(lj_tensor_dtype(lj_tensor_grad(k ? y : x)), LJ_F32);
    double *g = tu_read(lj_tensor_grad(k ? y : x), &n);
    const float *want = k ? want_y : want_x;
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(g[i] == want[i], "%s: d/d%s[%lld] is %g, PyTorch %g", what, k ? "y" : "x", (long long)i, g[i],
                    (double)want[i]);
    free(g);
  }
  lj_tensor_release(loss);
  lj_tensor_release(x);
  lj_tensor_release(y);
}

static lj_tensor *g_clamp(lj_tensor *x, lj_tensor *y) { return lj_clamp(x, 0, 1); }
static lj_tensor *g_relu(lj_tensor *x, lj_tensor *y) { return lj_relu(x); }
static lj_tensor *g_abs(lj_tensor *x, lj_tensor *y) { return lj_abs(x); }
static lj_tensor *g_maximum(lj_tensor *x, lj_tensor *y) { return lj_maximum(x, y); }
static lj_tensor *g_amax(lj_tensor *x, lj_tensor *y) { return lj_amax(x, 1, (const int[]){1}, false); }
static lj_tensor *g_max_pool(lj_tensor *x, lj_tensor *y) { return lj_max_pool2d(x, (const int[]){2, 2}, NULL, NULL); }
static lj_tensor *g_div_floor(lj_tensor *x, lj_tensor *y) { return lj_div_rounding(x, y, LJ_ROUND_FLOOR); }
static lj_tensor *g_div_trunc(lj_tensor *x, lj_tensor *y) { return lj_div_rounding(x, y, LJ_ROUND_TRUNC); }
static lj_tensor *g_casts(lj_tensor *x, lj_tensor *y) { return lj_mul_scalar(lj_cast(lj_cast(x, LJ_F16), LJ_F32), 0.1); }

/* Where a function is not differentiable, the gradient is PyTorch's (values from PyTorch
 * 1.13): clamp passes it at the bounds, relu and abs give 0 at 0, maximum splits ties,
 * amax spreads over the maxima, max_pool2d picks the first maximum. */
START_TEST(test_nondifferentiable_points) {
  expect_grad("clamp", g_clamp, LJ_SHAPE(5), (float[]){0, 0.5f, 1, 2, -1}, NULL, (float[]){1, 1, 1, 0, 0}, NULL);
  expect_grad("relu", g_relu, LJ_SHAPE(3), (float[]){0, -0.0f, 1}, NULL, (float[]){0, 0, 1}, NULL);
  expect_grad("abs", g_abs, LJ_SHAPE(2), (float[]){0, 1}, NULL, (float[]){0, 1}, NULL);
  expect_grad("maximum", g_maximum, LJ_SHAPE(3), (float[]){1, 2, 3}, (float[]){1, 1, 4}, (float[]){0.5f, 1, 0},
              (float[]){0.5f, 0, 1});
  expect_grad("amax", g_amax, LJ_SHAPE(2, 3), (float[]){3, 1, 3, 0, 2, 1}, NULL, (float[]){0.5f, 0, 0.5f, 0, 1, 0},
              NULL);
  expect_grad("max_pool2d", g_max_pool, LJ_SHAPE(1, 1, 2, 2), (float[]){1, 1, 0, 1}, NULL, (float[]){1, 0, 0, 0},
              NULL);
  /* two windows: each gives its first maximum in row-major order, (0,3) and not (1,2) */
  expect_grad("max_pool2d", g_max_pool, LJ_SHAPE(1, 1, 2, 4), (float[]){1, 1, 0, 2, 0, 1, 2, 0}, NULL,
              (float[]){1, 0, 0, 1, 0, 0, 0, 0}, NULL);
  /* rounded division: zero for both operands */
  expect_grad("div_floor", g_div_floor, LJ_SHAPE(3), (float[]){1.5f, -2.5f, 3}, (float[]){2, 2, -1},
              (float[]){0, 0, 0}, (float[]){0, 0, 0});
  expect_grad("div_trunc", g_div_trunc, LJ_SHAPE(3), (float[]){1.5f, -2.5f, 3}, (float[]){2, 2, -1},
              (float[]){0, 0, 0}, (float[]){0, 0, 0});
}
END_TEST

static lj_tensor *g_relu_max_pool(lj_tensor *x, lj_tensor *y) {
  static const float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  lj_tensor *p = lj_max_pool2d(lj_relu(x), (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1});
  return lj_mul(p, lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(1, 1, 3, 3), w));
}

/* relu then max-pool (ResNet's stem): the relu's mask goes on the pooled gradient, before
 * it is scattered to the windows' maxima, instead of over the image. Values from PyTorch
 * 1.13: a maximum four overlapping windows share, windows of zeros after the relu (their
 * first element, not positive, gets nothing), a maximum at the image's edge. The gradient's
 * graph has no where over the image; with the relu's output read elsewhere too, it has. */
START_TEST(test_relu_then_max_pool) {
  static const float x0[25] = {1,  -2, 3,  -1, 0,  -3, 4,  -5, -6, -2, 2,  -1, -7,
                               -5, -4, -2, -3, -8, -9, -1, 6,  -3, 0,  -2, -3};
  float want[25] = {0};
  want[6] = 1 + 2 + 4 + 5, want[20] = 7;
  expect_grad("relu then max_pool2d", g_relu_max_pool, LJ_SHAPE(1, 1, 5, 5), x0, NULL, want, NULL);
  for (int elsewhere = 0; elsewhere < 2; elsewhere++) {
    lj_tensor *x = lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(1, 1, 5, 5), x0);
    lj_tensor_set_requires_grad(x, true);
    lj_scope_begin();
    lj_tensor *r = lj_relu(x);
    lj_tensor *p = lj_max_pool2d(r, (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1});
    lj_tensor *loss = lj_sum(p, 0, NULL, false);
    if (elsewhere) loss = lj_add(loss, lj_sum(r, 0, NULL, false));
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    lj_tensor *g = lj_tensor_grad(x);
    char *text = lj_tensors_text(1, &g);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg((strstr(text, "f32[1,1,5,5] where(") != NULL) == elsewhere, "%s", text);
    ck_assert_msg(strstr(text, "f32[1,1,1,9] where(") != NULL || elsewhere, "%s", text);
    free(text);
    lj_scope_end();
    lj_tensor_release(x);
  }
}
END_TEST

/* A cast between floats hands the gradient on in its input's dtype (PyTorch 1.13): the 0.1
 * reaching the f16 tensor is rounded to f16, 0.0999755859375, before it reaches x (f32). */
START_TEST(test_cast_gradient_dtype) {
  const float g = 0.0999755859375f;
  expect_grad("cast", g_casts, LJ_SHAPE(3), (float[]){1.5f, -2.5f, 3}, NULL, (float[]){g, g, g}, NULL);
}
END_TEST

/* An op recorded again after a sync gave the same op its value (the trace kept: a tensor is
 * still pending), with its input requiring grad since: it is a node of its own, and its
 * gradient reaches the input (shared with the computed node, which autograd takes as a
 * constant, it was silently lost). */
START_TEST(test_grad_after_same_op_synced) {
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(1, 1, 3, 3), (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
  lj_tensor *w = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(1, 1, 2, 2), (float[]){1, -1, 2, 0.5f});
  lj_tensor *pending = lj_mul_scalar(w, 2);
  lj_tensor *y0 = lj_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
  ck_assert_int_eq(lj_sync_tensors(1, &y0), LJ_OK);
  ck_assert(lj_tensor_is_pending(pending));
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  lj_tensor *y = lj_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
  lj_tensor *loss = lj_sum(y, 0, NULL, false);
  ck_assert_int_eq(lj_backward(loss), LJ_OK);
  ck_assert_ptr_nonnull(lj_tensor_grad(x));
  float g[9];
  ck_assert_int_eq(lj_tensor_to_host(lj_tensor_grad(x), g, sizeof g), LJ_OK);
  /* d sum / d x: each position's sum of the weights whose window covers it */
  const float want[9] = {1, 0, -1, 3, 2.5f, -0.5f, 2, 2.5f, 0.5f};
  for (int i = 0; i < 9; i++) ck_assert_float_eq_tol(g[i], want[i], 1e-6);
  lj_tensor *all[] = {y0, y, loss, x, w, pending};
  for (int i = 0; i < 6; i++) lj_tensor_release(all[i]);
}
END_TEST

/* Leaves made alike, two lj_ones and two lj_zeros of one shape (two layer norms' weights and
 * biases), are one node (ops are hash-consed) and, synced, one buffer; each leaf still gets
 * only its own uses' gradient, synced before requiring grad or pending, and its value is
 * unchanged. Against d/da sum(2a) = 2, d/db sum(3b) = 3. */
START_TEST(test_leaves_made_alike) {
  lj_device *d = lj_default_device();
  for (int synced = 0; synced < 2; synced++) {
    lj_scope_begin();
    lj_tensor *p[4] = {lj_ones(d, LJ_F32, LJ_SHAPE(3)), lj_ones(d, LJ_F32, LJ_SHAPE(3)),
                       lj_zeros(d, LJ_F32, LJ_SHAPE(3)), lj_zeros(d, LJ_F32, LJ_SHAPE(3))};
    if (synced) ck_assert_int_eq(lj_sync_tensors(4, p), LJ_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(lj_tensor_set_requires_grad(p[i], true), LJ_OK);
    lj_tensor *loss = NULL;
    for (int i = 0; i < 4; i++) {
      lj_tensor *term = lj_sum(lj_mul_scalar(p[i], 2 + i % 2), 0, NULL, false);
      loss = loss ? lj_add(loss, term) : term;
    }
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    for (int i = 0; i < 4; i++) {
      float g[3], v[3];
      ck_assert_int_eq(lj_tensor_to_host(lj_tensor_grad(p[i]), g, sizeof g), LJ_OK);
      ck_assert_int_eq(lj_tensor_to_host(p[i], v, sizeof v), LJ_OK);
      for (int j = 0; j < 3; j++) {
        ck_assert_float_eq(g[j], 2 + i % 2);
        ck_assert_float_eq(v[j], i < 2 ? 1 : 0);
      }
    }
    lj_scope_end();
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("autograd_gradcheck");
  TCase *tc = tu_tcase("gradcheck");
  tcase_add_loop_test(tc, test_gradcheck, 0, (int)(sizeof cases / sizeof *cases));
  tcase_add_test(tc, test_accumulation_and_detach);
  tcase_add_test(tc, test_nondifferentiable_points);
  tcase_add_test(tc, test_relu_then_max_pool);
  tcase_add_test(tc, test_cast_gradient_dtype);
  tcase_add_test(tc, test_grad_after_same_op_synced);
  tcase_add_test(tc, test_leaves_made_alike);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
