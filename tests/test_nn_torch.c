/* test_nn_torch.c — the neural-network ops against PyTorch: replays tests/data/nn_fixtures.txt
 * (written by gen_nn_fixtures.py from torch.nn.functional's results) — convolutions, pooling,
 * softmax, losses, linear, indexing ops, normalization (with batch_norm's running
 * statistics) and padding; checks dropout's statistics and its eval identity; and checks
 * the bad inputs: wrong target dtype, a class index out of range (reported by the sync with
 * the index), mismatched conv channels, windows that do not fit; and PyTorch's default
 * initialization of Linear and Conv2d parameters. Gathers and scatters along small dims (every
 * position selected, vectorized) and large ones (one computed address) agree with the
 * interpreter, keep -0.0 where nothing is added, and report the smallest bad index. */
#include "test_util.h"
#include "torch_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tf_case *fixtures;
static int nfixtures;

static const int *pair(const tf_case *c, int at, int *buf) {
  buf[0] = (int)c->scalars[at];
  buf[1] = (int)c->scalars[at + 1];
  return buf;
}

/* Runs c's op; fills out[0..) and returns how many outputs it has. */
static int apply(const tf_case *c, lj_tensor **in, lj_tensor **out) {
  const char *op = c->op;
  const double *s = c->scalars;
  int a[2], b[2], d[2];
  if (strcmp(op, "conv2d") == 0)
    out[0] = lj_conv2d(in[0], in[1], c->nin > 2 ? in[2] : NULL, pair(c, 0, a), pair(c, 2, b), pair(c, 4, d), (int)s[6]);
  else if (strcmp(op, "max_pool2d") == 0)
    out[0] = lj_max_pool2d(in[0], pair(c, 0, a), pair(c, 2, b), pair(c, 4, d));
  else if (strcmp(op, "avg_pool2d") == 0)
    out[0] = lj_avg_pool2d(in[0], pair(c, 0, a), pair(c, 2, b), pair(c, 4, d));
  else if (strcmp(op, "softmax") == 0)
    out[0] = lj_softmax(in[0], (int)s[0]);
  else if (strcmp(op, "log_softmax") == 0)
    out[0] = lj_log_softmax(in[0], (int)s[0]);
  else if (strcmp(op, "nll_loss") == 0)
    out[0] = lj_nll_loss(in[0], in[1], (lj_reduction)s[0]);
  else if (strcmp(op, "cross_entropy") == 0)
    out[0] = lj_cross_entropy(in[0], in[1], (lj_reduction)s[0]);
  else if (strcmp(op, "mse_loss") == 0)
    out[0] = lj_mse_loss(in[0], in[1], (lj_reduction)s[0]);
  else if (strcmp(op, "linear") == 0)
    out[0] = lj_linear(in[0], in[1], c->nin > 2 ? in[2] : NULL);
  else if (strcmp(op, "embedding") == 0)
    out[0] = lj_embedding(in[0], in[1]);
  else if (strcmp(op, "index_select") == 0)
    out[0] = lj_index_select(in[0], (int)s[0], in[1]);
  else if (strcmp(op, "gather") == 0)
    out[0] = lj_gather(in[0], (int)s[0], in[1]);
  else if (strcmp(op, "scatter_add") == 0)
    out[0] = lj_scatter_add(in[0], (int)s[0], in[1], in[2]);
  else if (strcmp(op, "one_hot") == 0)
    out[0] = lj_one_hot(in[0], (int64_t)s[0]);
  else if (strcmp(op, "layer_norm") == 0)
    out[0] = lj_layer_norm(in[0], (int)s[0], c->nin > 1 ? in[1] : NULL, c->nin > 2 ? in[2] : NULL, s[1]);
  else if (strcmp(op, "batch_norm_train") == 0 || strcmp(op, "batch_norm_eval") == 0) {
    bool train = strcmp(op, "batch_norm_train") == 0;
    out[0] = lj_batch_norm(in[0], in[1], in[2], in[3], in[4], train, s[0], s[1]);
    if (!train) return 1;
    out[1] = in[1]; /* updated in place */
    out[2] = in[2];
    return 3;
  } else if (strcmp(op, "pad") == 0) {
    int64_t pads[6];
    for (int k = 1; k < c->nscalars; k++) pads[k - 1] = (int64_t)s[k];
    out[0] = lj_pad(in[0], c->nscalars - 1, pads, s[0]);
  } else
    ck_abort_msg("fixture %s: unknown op %s", c->name, op);
  return 1;
}

START_TEST(test_fixture) {
  const tf_case *c = &fixtures[_i];
  lj_tensor *in[TF_MAX_IN], *out[TF_MAX_OUT];
  for (int k = 0; k < c->nin; k++) in[k] = tf_upload(&c->in[k]);
  int nout = apply(c, in, out);
  ck_assert_int_eq(nout, c->nout);
  if (nout > 1) ck_assert_int_eq(lj_sync_tensors(1, out), LJ_OK); /* runs the in-place updates */
  for (int k = 0; k < nout; k++) tf_check(c, k, out[k]);
}
END_TEST

/* Dropout: in training about p of the elements are zero and the rest are x / (1 - p); a new
 * mask each call (the RNG offset advances); in evaluation the identity. */
START_TEST(test_dropout) {
  lj_device *d = lj_default_device();
  enum { N = 20000 };
  lj_tensor *x = lj_full(d, LJ_F32, LJ_SHAPE(N), 2.0);
  double p = 0.3;
  lj_tensor *y1 = lj_dropout(x, p, true), *y2 = lj_dropout(x, p, true), *e = lj_dropout(x, p, false);
  int64_t n;
  double *v1 = tu_read(y1, &n), *v2 = tu_read(y2, &n), *ve = tu_read(e, &n);
  int zeros = 0, differ = 0;
  for (int i = 0; i < N; i++) {
    ck_assert_msg(v1[i] == 0 || fabs(v1[i] - 2 / (1 - p)) < 1e-6, "element %d is %g", i, v1[i]);
    zeros += v1[i] == 0;
    differ += (v1[i] == 0) != (v2[i] == 0);
    ck_assert(ve[i] == 2);
  }
  /* binomial(N, p): sd = sqrt(N p (1-p)) ~ 65; allow 5 sd */
  ck_assert_msg(abs(zeros - (int)(N * p)) < 5 * 65, "%d zeros of %d", zeros, N);
  ck_assert_msg(differ > N / 4, "two calls share their mask (%d differ)", differ);
  free(v1);
  free(v2);
  free(ve);
}
END_TEST

START_TEST(test_bad_inputs) {
  lj_device *d = lj_default_device();
  lj_tensor *logp = lj_log_softmax(tu_tensor(LJ_F32, LJ_SHAPE(3, 10), TU_ANY, 1), 1);
  lj_tensor *t32 = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(3), (int32_t[]){1, 2, 3});
  ck_assert_ptr_null(lj_nll_loss(logp, t32, LJ_REDUCE_MEAN));
  tu_expect_error(LJ_ERR_DTYPE, "nll_loss", "target", "i32", "i64", NULL);
  ck_assert_ptr_null(lj_cross_entropy(logp, lj_full(d, LJ_F32, LJ_SHAPE(3), 1), LJ_REDUCE_MEAN));
  tu_expect_error(LJ_ERR_DTYPE, "target", "f32", NULL);
  /* a class index out of range: the op records, the read reports the index and the bound */
  lj_tensor *bad = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(3), (int64_t[]){1, 12, 3});
  lj_tensor *loss = lj_nll_loss(logp, bad, LJ_REDUCE_MEAN);
  ck_assert(loss);
  ck_assert(isnan(lj_item(loss)));
  tu_expect_error(LJ_ERR_RUNTIME, "12", "[0, 10)", NULL);
  lj_tensor *neg = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(2), (int64_t[]){-1, 0});
  lj_tensor *oh = lj_one_hot(neg, 4);
  ck_assert(oh);
  ck_assert(isnan(lj_item(lj_sum(lj_cast(oh, LJ_F32), 0, NULL, false))));
  tu_expect_error(LJ_ERR_RUNTIME, "-1", "[0, 4)", NULL);
  /* conv: channels and groups */
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(1, 3, 8, 8), TU_ANY, 2);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 2, 3, 3), TU_ANY, 3);
  ck_assert_ptr_null(lj_conv2d(x, w, NULL, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_SHAPE, "conv2d", "[1,3,8,8]", "[4,2,3,3]", NULL);
  ck_assert_ptr_null(lj_conv2d(x, w, NULL, NULL, NULL, NULL, 2));
  tu_expect_error(LJ_ERR_SHAPE, "conv2d", "groups", NULL);
  lj_tensor *big = tu_tensor(LJ_F32, LJ_SHAPE(4, 3, 9, 9), TU_ANY, 4);
  ck_assert_ptr_null(lj_conv2d(x, big, NULL, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_SHAPE, "conv2d", NULL);
  ck_assert_ptr_null(lj_max_pool2d(x, (const int[]){3, 3}, NULL, (const int[]){2, 2}));
  tu_expect_error(LJ_ERR_ARG, "max_pool2d", "padding 2", "kernel size 3", NULL);
  ck_assert_ptr_null(lj_conv2d(tu_tensor(LJ_F32, LJ_SHAPE(3, 8, 8), TU_ANY, 5), w, NULL, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_SHAPE, "conv2d", NULL);
  ck_assert_ptr_null(lj_one_hot(t32, 4));
  tu_expect_error(LJ_ERR_DTYPE, "one_hot", NULL);
  lj_tensor *x34 = tu_tensor(LJ_F32, LJ_SHAPE(3, 4), TU_ANY, 6);
  lj_tensor *i25 = lj_zeros(d, LJ_I64, LJ_SHAPE(2, 5));
  ck_assert_ptr_null(lj_gather(x34, 0, i25));
  tu_expect_error(LJ_ERR_SHAPE, "lj_gather", "index [2,5]", "x [3,4]", "dim 0", NULL);
  lj_tensor *i24 = lj_zeros(d, LJ_I64, LJ_SHAPE(2, 4));
  ck_assert_ptr_null(lj_scatter_add(x34, 0, i24, tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 7)));
  tu_expect_error(LJ_ERR_SHAPE, "lj_scatter_add", "src [2,3]", "index's shape", NULL);
  ck_assert_ptr_null(lj_dropout(x, 1.5, true));
  tu_expect_error(LJ_ERR_ARG, "dropout", "1.5", NULL);
}
END_TEST

/* Checks that t has shape, requires grad, and looks like U(-bound, bound): every value
 * inside, mean ~ 0 and variance ~ bound^2 / 3 within 5 standard errors. */
static void expect_uniform(lj_tensor *t, int ndim, const int64_t *shape, double bound) {
  ck_assert(t && lj_tensor_requires_grad(t));
  ck_assert_int_eq(lj_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) ck_assert_int_eq(lj_tensor_shape(t)[i], shape[i]);
  int64_t n;
  double *v = tu_read(t, &n), sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    ck_assert_msg(fabs(v[i]) <= bound, "%g outside +-%g", v[i], bound);
    sum += v[i];
    sq += v[i] * v[i];
  }
  double var = bound * bound / 3, mean = sum / (double)n;
  ck_assert_msg(fabs(mean) < 5 * sqrt(var / (double)n), "mean %g", mean);
  ck_assert_msg(fabs(sq / (double)n - var) < 5 * sqrt(var * var * 0.8 / (double)n), "variance %g, want %g",
                sq / (double)n, var);
  free(v);
}

/* PyTorch's defaults: Linear and Conv2d weights and biases are U(+-1/sqrt(fan_in)), with
 * fan_in = in / groups * kh * kw for a convolution; the same seed repeats them. */
/* i64 indices in [0, n) for a tensor of `shape` (deterministic, repeats included). */
static lj_tensor *index_tensor(int ndim, const int64_t *shape, int64_t n, uint64_t seed) {
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= shape[d];
  int64_t *v = malloc((size_t)numel * sizeof *v);
  for (int64_t i = 0; i < numel; i++) v[i] = (int64_t)((i * 2654435761u + seed * 97) % (uint64_t)n);
  lj_tensor *t = lj_tensor_from_host(lj_default_device(), LJ_I64, ndim, shape, v);
  free(v);
  return t;
}

/* A scatter-add of one value per line along a small dim into zeros (max-pool's gradient: a
 * 2×2 window's 4 positions, a 3×3 one's 9) is stored without the zeros being written first:
 * f32, bf16 and i32 against the interpreter, -0.0 added to zeros gives +0.0 as it does there,
 * and a bad index is reported with the other lines right. */
START_TEST(test_scatter_into_zeros) {
  lj_device *d = lj_default_device();
  static const lj_dtype dts[] = {LJ_F32, LJ_BF16, LJ_I32};
  for (int k = 0; k < 3; k++)
    for (int dim = 1; dim <= 2; dim++)
      for (int64_t w = 4; w <= 9; w += 5) { /* a 2×2 window's positions, a 3×3 one's */
        int64_t xs[3] = {5, dim == 1 ? w : 37, dim == 2 ? w : 37}, is[3] = {5, dim == 1 ? 1 : 37, dim == 2 ? 1 : 37};
        lj_tensor *idx = index_tensor(3, is, w, (size_t)(k + dim));
        lj_tensor *src = tu_tensor(dts[k], 3, is, TU_ANY, 60 + k);
        lj_tensor *r = lj_scatter_add(lj_zeros(d, dts[k], 3, xs), dim, idx, src);
        tu_check_interp_tol(1, &r, 1e-5, 1e-5);
        lj_tensor_release(r);
        lj_tensor_release(src);
        lj_tensor_release(idx);
      }
  lj_tensor *idx = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(3, 1), (int64_t[]){1, 9, 3});
  lj_tensor *src = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(3, 1), (float[]){-0.0f, 2.5f, -1.0f});
  lj_tensor *r = lj_scatter_add(lj_zeros(d, LJ_F32, LJ_SHAPE(3, 4)), 1, idx, src);
  float got[12];
  ck_assert_int_ne(lj_tensor_to_host(r, got, sizeof got), LJ_OK);
  tu_expect_error(LJ_ERR_RUNTIME, "scatter_add: index 9", "[0, 4)", NULL);
  lj_tensor_release(r);
  r = lj_scatter_add(lj_zeros(d, LJ_F32, LJ_SHAPE(3, 4)), 1, lj_clamp(idx, 0, 3), src);
  ck_assert_int_eq(lj_tensor_to_host(r, got, sizeof got), LJ_OK);
  static const float want[12] = {0, 0, 0, 0, 0, 0, 0, 2.5f, 0, 0, 0, -1.0f};
  for (int i = 0; i < 12; i++) ck_assert_msg(got[i] == want[i] && !signbit(got[i]) == !signbit(want[i]), "element %d: %g", i, got[i]);
  lj_tensor_release(r);
  lj_tensor_release(src);
  lj_tensor_release(idx);
}
END_TEST

START_TEST(test_gather_scatter_dims) {
  /* dims of 1, 4, 9 (selected) and 10, 33 (addressed), along the middle and the last dim */
  static const int64_t sizes[] = {1, 4, 9, 10, 33};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int dim = 1; dim <= 2; dim++) {
      int64_t n = sizes[i];
      int64_t xs[3] = {3, dim == 1 ? n : 5, dim == 2 ? n : 7};
      int64_t is[3] = {3, dim == 1 ? 6 : 5, dim == 2 ? 6 : 7}; /* more indices than positions: repeats */
      lj_tensor *x = tu_tensor(LJ_F32, 3, xs, TU_ANY, 20 + i);
      lj_tensor *idx = index_tensor(3, is, n, i);
      lj_tensor *src = tu_tensor(LJ_F32, 3, is, TU_ANY, 40 + i);
      lj_tensor *r[2] = {lj_gather(x, dim, idx), lj_scatter_add(x, dim, idx, src)};
      tu_check_interp_tol(2, r, 1e-5, 1e-5); /* scatter sums in f32, the interpreter in f64 */
      for (int k = 0; k < 2; k++) lj_tensor_release(r[k]);
      lj_tensor_release(x);
      lj_tensor_release(idx);
      lj_tensor_release(src);
    }
  /* -0.0 stays -0.0 where the scatter adds nothing */
  lj_device *d = lj_default_device();
  lj_tensor *z = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(1, 4), (float[]){-0.0f, -0.0f, -0.0f, -0.0f});
  lj_tensor *one = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(1, 1), (int64_t[]){2});
  lj_tensor *v = lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(1, 1), (float[]){1.5f});
  lj_tensor *sc = lj_scatter_add(z, 1, one, v);
  float got[4];
  ck_assert_int_eq(lj_tensor_to_host(sc, got, sizeof got), LJ_OK);
  ck_assert(signbit(got[0]) && signbit(got[1]) && got[2] == 1.5f && signbit(got[3]));
  /* bad indices, small dim and large dim: the smallest is reported */
  for (int64_t n = 4; n <= 40; n += 36) {
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, n), TU_ANY, 5);
    lj_tensor *bad = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(2, 3), (int64_t[]){0, n + 5, 1, -7, n, 2});
    lj_tensor *g = lj_gather(x, 1, bad);
    ck_assert(g);
    float out[6];
    ck_assert_int_ne(lj_tensor_to_host(g, out, sizeof out), LJ_OK);
    char range[32];
    snprintf(range, sizeof range, "[0, %lld)", (long long)n);
    tu_expect_error(LJ_ERR_RUNTIME, "index -7", range, NULL);
    lj_tensor_release(g);
    lj_tensor_release(bad);
    lj_tensor_release(x);
  }
  lj_tensor *all[] = {z, one, v, sc};
  for (size_t i = 0; i < 4; i++) lj_tensor_release(all[i]);
}
END_TEST

/* Windows with a column stride of 2 (in f32 and f64, rows from two lanes' width to several
 * vectors, odd and even widths, with and without padding): max and
 * average pooling and a strided convolution, forward and the input's gradient, against the
 * reference interpreter. */
START_TEST(test_stride2_windows) {
  static const int64_t widths[] = {4, 5, 8, 15, 16, 17, 33, 40};
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  for (int t = 0; t < 2; t++)
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
      lj_tensor *x = tu_tensor(dts[t], LJ_SHAPE(2, 3, 7, widths[i]), TU_ANY, 60 + i);
      lj_tensor *w = tu_tensor(dts[t], LJ_SHAPE(4, 3, 3, 3), TU_ANY, 70 + i);
      lj_tensor_set_requires_grad(x, true);
      lj_scope_begin();
      lj_tensor *y[3] = {lj_max_pool2d(x, (const int[]){2, 2}, NULL, NULL),
                         lj_max_pool2d(x, (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1}),
                         lj_avg_pool2d(x, (const int[]){2, 2}, NULL, NULL)};
      lj_tensor *c = lj_conv2d(x, w, NULL, (const int[]){2, 2}, (const int[]){1, 1}, NULL, 1);
      lj_tensor *loss = lj_add(lj_add(lj_sum(y[0], 0, NULL, false), lj_sum(y[1], 0, NULL, false)),
                               lj_add(lj_sum(y[2], 0, NULL, false), lj_sum(lj_mul(c, c), 0, NULL, false)));
      ck_assert_int_eq(lj_backward(loss), LJ_OK);
      lj_tensor *out[5] = {y[0], y[1], y[2], c, lj_tensor_grad(x)};
      double tol = dts[t] == LJ_F32 ? 1e-4 : 1e-10; /* f32 sums of products of products */
      tu_check_interp_tol(5, out, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
    }
}
END_TEST

/* Max-pool windows two columns wide that tile the image (2×2, and 3×2 with a row stride of 3):
 * the gradient's col2im stores each window's values into its rows instead of adding them to
 * zeros. Widths below, at and past a vector's (the last vector overlapping the one before), in
 * f32, f64 and bf16, against the reference interpreter. */
START_TEST(test_paired_windows) {
  static const int64_t widths[] = {2, 4, 6, 14, 16, 30, 34};
  static const lj_dtype dts[] = {LJ_F32, LJ_F64, LJ_BF16};
  static const int k22[2] = {2, 2}, k32[2] = {3, 2}, s32[2] = {3, 2};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
      lj_tensor *x = tu_tensor(dts[t], LJ_SHAPE(2, 3, 6, widths[i]), TU_ANY, 80 + i);
      lj_tensor_set_requires_grad(x, true);
      lj_scope_begin();
      lj_tensor *y[2] = {lj_max_pool2d(x, k22, NULL, NULL), lj_max_pool2d(x, k32, s32, NULL)};
      lj_tensor *g = tu_tensor(dts[t], 4, lj_tensor_shape(y[0]), TU_ANY, 90 + i);
      lj_tensor *loss = lj_add(lj_sum(lj_mul(y[0], g), 0, NULL, false), lj_sum(lj_mul(y[1], y[1]), 0, NULL, false));
      ck_assert_int_eq(lj_backward(loss), LJ_OK);
      lj_tensor *out[3] = {y[0], y[1], lj_tensor_grad(x)};
      double tol = dts[t] == LJ_BF16 ? 1e-2 : dts[t] == LJ_F32 ? 1e-5 : 1e-12;
      tu_check_interp_tol(3, out, tol, tol);
      lj_tensor_release(g);
      lj_scope_end();
      lj_tensor_release(x);
    }
}
END_TEST

/* A convolution's input gradient adds each window's columns back a vector at a time and the
 * rest of a row by narrower vectors: widths 1 to 31 with padding (spans of every length below
 * a vector), in f32 and f64, against the reference interpreter. */
START_TEST(test_col2im_row_tails) {
  static const lj_dtype dts[] = {LJ_F32, LJ_F64};
  static const int p1[2] = {1, 1};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (int64_t width = 1; width <= 31; width += 2) {
      lj_tensor *x = tu_tensor(dts[t], LJ_SHAPE(2, 3, 5, width), TU_ANY, 100 + width);
      lj_tensor *w = tu_tensor(dts[t], LJ_SHAPE(4, 3, 3, 3), TU_ANY, 140 + width);
      lj_tensor_set_requires_grad(x, true);
      lj_scope_begin();
      lj_tensor *c = lj_conv2d(x, w, NULL, NULL, p1, NULL, 1);
      ck_assert_int_eq(lj_backward(lj_sum(lj_mul(c, c), 0, NULL, false)), LJ_OK);
      lj_tensor *dx = lj_tensor_grad(x);
      double tol = dts[t] == LJ_F32 ? 1e-4 : 1e-10;
      tu_check_interp_tol(1, &dx, tol, tol);
      lj_scope_end();
      lj_tensor_release(x);
      lj_tensor_release(w);
    }
}
END_TEST

START_TEST(test_default_init) {
  lj_device *d = lj_default_device();
  lj_tensor *w, *b, *w2, *b2;
  lj_manual_seed(d, 5);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 50, 400, true, &w, &b), LJ_OK);
  expect_uniform(w, LJ_SHAPE(400, 50), 1 / sqrt(50.0));
  expect_uniform(b, LJ_SHAPE(400), 1 / sqrt(50.0));
  lj_manual_seed(d, 5);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 50, 400, true, &w2, &b2), LJ_OK);
  float x1[4], x2[4];
  ck_assert_int_eq(lj_tensor_to_host(lj_slice(lj_reshape(w, LJ_SHAPE(-1)), 0, 0, 4, 1), x1, sizeof x1), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(lj_slice(lj_reshape(w2, LJ_SHAPE(-1)), 0, 0, 4, 1), x2, sizeof x2), LJ_OK);
  ck_assert(memcmp(x1, x2, sizeof x1) == 0);
  ck_assert_int_eq(lj_nn_conv2d_init(d, LJ_F64, 12, 63, (const int[]){3, 2}, 3, false, &w, &b), LJ_OK);
  ck_assert_ptr_null(b);
  expect_uniform(w, LJ_SHAPE(63, 4, 3, 2), 1 / sqrt(24.0));
  ck_assert_int_eq(lj_nn_conv2d_init(d, LJ_F32, 12, 64, (const int[]){3, 3}, 5, true, &w, &b), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_nn_conv2d_init", "groups 5", NULL);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_I32, 3, 4, true, &w, &b), LJ_ERR_DTYPE);
  tu_expect_error(LJ_ERR_DTYPE, "lj_nn_linear_init", "float", NULL);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 0, 4, true, &w, &b), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_nn_linear_init", "positive", NULL);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("nn_torch");
  TCase *tc = tu_tcase("torch");
  tcase_add_loop_test(tc, test_fixture, 0, nfixtures);
  tcase_add_test(tc, test_dropout);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_gather_scatter_dims);
  tcase_add_test(tc, test_scatter_into_zeros);
  tcase_add_test(tc, test_stride2_windows);
  tcase_add_test(tc, test_paired_windows);
  tcase_add_test(tc, test_col2im_row_tails);
  tcase_add_test(tc, test_default_init);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  fixtures = tf_load("nn_fixtures.txt", &nfixtures);
  return tu_run(suite());
}
