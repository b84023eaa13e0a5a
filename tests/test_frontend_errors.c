/* test_frontend_errors.c — bad input never crashes: NULL operands (and their propagation
 * through chains), bad dims, shapes that do not broadcast, tensors of different devices,
 * wrong sizes, bad dtypes, bad configuration, every nn op's and list-taking function's
 * argument checks (each message naming the op, the argument and the values), and
 * data-dependent errors in compiled code, reported at the sync with LJ_ERR_RUNTIME while the
 * device stays usable. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_null_operands) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3), TU_ANY, 1);
  lj_clear_error();
  ck_assert(!lj_add(NULL, x));
  tu_expect_error(LJ_ERR_ARG, "lj_add", "argument a is NULL", NULL);
  ck_assert(!lj_matmul(x, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_matmul", "argument b", NULL);
  ck_assert(!lj_exp(NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_exp", NULL);
  ck_assert(!lj_where(x, NULL, x));
  tu_expect_error(LJ_ERR_ARG, "lj_where", NULL);
  ck_assert_int_ne(lj_sync(NULL), LJ_OK);
  tu_expect_error(LJ_ERR_ARG, "lj_sync", NULL);
  ck_assert_int_ne(lj_tensor_to_host(x, NULL, 12), LJ_OK);
  tu_expect_error(LJ_ERR_ARG, "lj_tensor_to_host", "dst", NULL);
  ck_assert(isnan(lj_item(NULL)));
  tu_expect_error(LJ_ERR_ARG, "lj_item", NULL);
  ck_assert(!lj_tensor_from_host(NULL, LJ_F32, LJ_SHAPE(1), (float[]){1}));
  tu_expect_error(LJ_ERR_ARG, "device", NULL);
  ck_assert(!lj_tensor_from_host(lj_default_device(), LJ_F32, LJ_SHAPE(2), NULL));
  tu_expect_error(LJ_ERR_ARG, "data", NULL);
  /* NULL-tolerant accessors */
  ck_assert_int_eq(lj_tensor_ndim(NULL), -1);
  ck_assert_int_eq(lj_tensor_numel(NULL), -1);
  ck_assert(!lj_tensor_shape(NULL));
  lj_tensor_release(NULL);
  ck_assert(!lj_keep(NULL) && !lj_tensor_retain(NULL));
  lj_tensor_release(x);
}
END_TEST

START_TEST(test_first_error_survives_a_chain) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 1);
  lj_clear_error();
  lj_tensor *y = lj_exp(lj_add(lj_reshape(x, LJ_SHAPE(5)), x));
  ck_assert(!y);
  ck_assert_int_eq(lj_last_status(), LJ_ERR_SHAPE);
  ck_assert(strstr(lj_last_error(), "lj_reshape"));
  /* a later success does not clear it; lj_clear_error does */
  lj_tensor *z = lj_neg(x);
  ck_assert(z);
  ck_assert_int_eq(lj_last_status(), LJ_ERR_SHAPE);
  lj_clear_error();
  ck_assert_int_eq(lj_last_status(), LJ_OK);
  ck_assert_str_eq(lj_last_error(), "");
  ck_assert_str_eq(lj_status_str(LJ_ERR_RUNTIME), "LJ_ERR_RUNTIME");
  lj_tensor_release(z);
  lj_tensor_release(x);
}
END_TEST

START_TEST(test_broadcast_message) {
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(4, 3), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 2);
  ck_assert(!lj_add(a, b));
  ck_assert_int_eq(lj_last_status(), LJ_ERR_SHAPE);
  ck_assert_str_eq(lj_last_error(), "lj_add: shapes [4,3] and [2,3] are not broadcastable (dim 0: 4 vs 2)");
  lj_clear_error();
  ck_assert_int_ne(lj_assign(b, a), LJ_OK);
  tu_expect_error(LJ_ERR_SHAPE, "lj_assign", NULL);
  lj_tensor *c = tu_tensor(LJ_F32, LJ_SHAPE(3), TU_ANY, 3);
  ck_assert_int_ne(lj_assign(c, a), LJ_OK);
  tu_expect_error(LJ_ERR_SHAPE, "lj_assign", "[4,3]", "[3]", NULL);
}
END_TEST

START_TEST(test_devices) {
  lj_config cfg = lj_config_default();
  cfg.num_devices = 2;
  cfg.num_threads = 1;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  ck_assert_int_eq(lj_device_count(), 2);
  lj_device *d0 = lj_device_get(0), *d1 = lj_device_get(1);
  ck_assert_str_eq(lj_device_name(d1), "lj:1");
  ck_assert_str_eq(lj_device_hw(d0), "CPU");
  ck_assert(!lj_device_get(2));
  tu_expect_error(LJ_ERR_DEVICE, "no device 2", NULL);
  float v[3] = {1, 2, 3};
  lj_tensor *a = lj_tensor_from_host(d0, LJ_F32, LJ_SHAPE(3), v);
  lj_tensor *b = lj_tensor_from_host(d1, LJ_F32, LJ_SHAPE(3), v);
  ck_assert(!lj_add(a, b));
  ck_assert_str_eq(lj_last_error(), "lj_add: tensors are on different devices (lj:0 and lj:1)");
  tu_expect_error(LJ_ERR_DEVICE, NULL);
  ck_assert_int_eq(lj_assign(a, b), LJ_ERR_DEVICE);
  lj_clear_error();
  lj_tensor *ab[2] = {lj_neg(a), lj_neg(b)};
  ck_assert_int_eq(lj_sync_tensors(2, ab), LJ_ERR_DEVICE);
  lj_clear_error();
  /* each device computes its own graphs */
  ck_assert_int_eq(lj_sync(d1), LJ_OK);
  ck_assert(!lj_tensor_is_pending(ab[1]) && lj_tensor_is_pending(ab[0]));
  ck_assert_double_eq(lj_item(lj_sum(ab[1], 0, NULL, false)), -6);
}
END_TEST

START_TEST(test_sizes_and_dtypes) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 1);
  float buf[6];
  ck_assert_int_eq(lj_tensor_to_host(x, buf, 20), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "nbytes is 20", "24 bytes", "f32[2,3]", NULL);
  ck_assert(isnan(lj_item(x)));
  tu_expect_error(LJ_ERR_SHAPE, "lj_item", "6 elements", NULL);
  ck_assert(!lj_tensor_from_host(d, (lj_dtype)99, LJ_SHAPE(1), buf));
  tu_expect_error(LJ_ERR_DTYPE, "99", NULL);
  ck_assert(!lj_tensor_from_host(d, LJ_F32, LJ_SHAPE(2, -1), buf));
  tu_expect_error(LJ_ERR_ARG, "negative", NULL);
  ck_assert(!lj_tensor_from_host(d, LJ_F32, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, buf));
  tu_expect_error(LJ_ERR_ARG, "ndim", NULL);
  ck_assert(!lj_cast(x, (lj_dtype)-1));
  tu_expect_error(LJ_ERR_DTYPE, "lj_cast", NULL);
  lj_tensor *i = tu_tensor(LJ_I32, LJ_SHAPE(2), TU_ANY, 2);
  ck_assert(!lj_gelu(i, false));
  tu_expect_error(LJ_ERR_DTYPE, "lj_gelu", "i32", NULL);
  ck_assert(!lj_mean(i, 0, NULL, false));
  tu_expect_error(LJ_ERR_DTYPE, "lj_mean", NULL);
  lj_tensor *bl = tu_tensor(LJ_BOOL, LJ_SHAPE(2), TU_ANY, 3);
  ck_assert(!lj_neg(bl));
  tu_expect_error(LJ_ERR_DTYPE, "lj_neg", "bool", NULL);
  ck_assert(!lj_sub(bl, bl));
  tu_expect_error(LJ_ERR_DTYPE, "lj_sub", NULL);
  ck_assert(!lj_where(x, x, x));
  tu_expect_error(LJ_ERR_DTYPE, "lj_where", "cond", NULL);
  ck_assert(!lj_pow_scalar(i, -2));
  tu_expect_error(LJ_ERR_ARG, "negative integer powers", NULL);
  ck_assert(!lj_div_rounding(x, x, (lj_rounding)7));
  tu_expect_error(LJ_ERR_ARG, "mode", NULL);
}
END_TEST

START_TEST(test_config_errors) {
  lj_config cfg = lj_config_default();
  cfg.num_threads = 0;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "num_threads", "LJ_NUM_THREADS", NULL);
  cfg = lj_config_default();
  cfg.opt_level = 7;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "opt_level", NULL);
  cfg = lj_config_default();
  cfg.num_devices = 65;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_init: num_devices (LJ_NUM_DEVICES) is 65, must be 1..64", NULL);
  cfg = lj_config_default();
  cfg.compilation_cache_size = 0;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "compilation_cache_size (LJ_COMPILATION_CACHE_SIZE) is 0, must be >= 1", NULL);
  ck_assert_int_eq(lj_init(NULL), LJ_OK);
  ck_assert_int_eq(lj_init(NULL), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "already running", NULL);
}
END_TEST

/* The nn ops' argument checks: each names the op, the argument and the values. */
START_TEST(test_nn_argument_errors) {
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 5, 5), TU_ANY, 1);
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3, 3, 3), TU_ANY, 2);
  lj_tensor *xi = tu_tensor(LJ_I32, LJ_SHAPE(2, 3, 5, 5), TU_ANY, 3);
  lj_tensor *w64 = tu_tensor(LJ_F64, LJ_SHAPE(4, 3, 3, 3), TU_ANY, 4);
  lj_tensor *b5 = tu_tensor(LJ_F32, LJ_SHAPE(5), TU_ANY, 5);
  ck_assert(!lj_conv2d(xi, w, NULL, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_DTYPE, "lj_conv2d: x must be a float tensor, not i32", NULL);
  ck_assert(!lj_conv2d(x, w64, NULL, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_DTYPE, "lj_conv2d: dtypes differ (f32 and f64)", NULL);
  ck_assert(!lj_conv2d(x, w, b5, NULL, NULL, NULL, 1));
  tu_expect_error(LJ_ERR_SHAPE, "lj_conv2d: bias [5] does not match the 4 output channels", NULL);
  ck_assert(!lj_max_pool2d(x, NULL, NULL, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_max_pool2d: argument kernel is NULL", NULL);

  lj_tensor *logp = tu_tensor(LJ_F32, LJ_SHAPE(4, 3), TU_ANY, 6);
  lj_tensor *t5 = lj_tensor_from_host(lj_default_device(), LJ_I64, LJ_SHAPE(5), (int64_t[]){0, 1, 2, 0, 1});
  ck_assert(!lj_mse_loss(logp, logp, (lj_reduction)7));
  tu_expect_error(LJ_ERR_ARG, "lj_mse_loss: reduction 7 is not an lj_reduction", NULL);
  ck_assert(!lj_nll_loss(logp, t5, LJ_REDUCE_MEAN));
  tu_expect_error(LJ_ERR_SHAPE, "lj_nll_loss: target [5] does not match input [4,3]",
                  "expected the input's shape without dim 1", NULL);
  ck_assert(!lj_linear(logp, tu_tensor(LJ_F32, LJ_SHAPE(2, 5), TU_ANY, 7), NULL));
  tu_expect_error(LJ_ERR_SHAPE, "lj_linear: x [4,3] has 3 features, weight [2,5] expects 5", NULL);

  lj_tensor *i32 = tu_tensor(LJ_I32, LJ_SHAPE(4, 3), TU_ANY, 8);
  ck_assert(!lj_gather(logp, 1, i32));
  tu_expect_error(LJ_ERR_DTYPE, "lj_gather: index must be i64, not i32", NULL);
  ck_assert(!lj_scatter_add(logp, 1, i32, logp));
  tu_expect_error(LJ_ERR_DTYPE, "lj_scatter_add: index must be i64 and x numeric (got i32 and f32)", NULL);
  lj_tensor *i2d = lj_zeros(lj_default_device(), LJ_I64, LJ_SHAPE(2, 2));
  ck_assert(!lj_index_select(logp, 0, i2d));
  tu_expect_error(LJ_ERR_SHAPE, "lj_index_select: index must be 1-D, it has 2 dims", NULL);
  lj_tensor *i8d = lj_zeros(lj_default_device(), LJ_I64, LJ_SHAPE(1, 1, 1, 1, 1, 1, 1, 1));
  ck_assert(!lj_embedding(logp, i8d));
  tu_expect_error(LJ_ERR_ARG, "lj_embedding: index has too many dims (8)", NULL);
  ck_assert(!lj_one_hot(t5, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_one_hot: num_classes is 0, must be at least 1", NULL);

  ck_assert(!lj_layer_norm(logp, 3, NULL, NULL, 1e-5));
  tu_expect_error(LJ_ERR_ARG, "lj_layer_norm: 3 normalized dims for a 2-d input", NULL);
  ck_assert(!lj_layer_norm(logp, 1, b5, NULL, 1e-5));
  tu_expect_error(LJ_ERR_SHAPE, "lj_layer_norm: weight [5] does not match the normalized shape [3]", NULL);
  ck_assert(!lj_layer_norm(logp, 1, NULL, b5, 1e-5));
  tu_expect_error(LJ_ERR_SHAPE, "lj_layer_norm: bias [5] does not match the normalized shape [3]", NULL);
  ck_assert(!lj_batch_norm(b5, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
  tu_expect_error(LJ_ERR_SHAPE, "lj_batch_norm: x needs at least 2 dims [N, C, ...], it has 1", NULL);
  ck_assert(!lj_batch_norm(logp, b5, b5, NULL, NULL, true, 0.1, 1e-5));
  tu_expect_error(LJ_ERR_SHAPE, "lj_batch_norm: per-channel argument 0 has shape [5], expected [3]", NULL);
  lj_tensor *c3 = lj_zeros(lj_default_device(), LJ_F32, LJ_SHAPE(3));
  ck_assert(!lj_batch_norm(logp, c3, NULL, NULL, NULL, true, 0.1, 1e-5));
  tu_expect_error(LJ_ERR_ARG, "lj_batch_norm: give both running_mean and running_var, or neither", NULL);

  ck_assert(!lj_pad(logp, 3, (const int64_t[]){1, 1, 1}, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_pad: 3 pad values for a 2-d tensor (need pairs, at most 2 per dim)", NULL);
  ck_assert(!lj_pad(logp, 2, (const int64_t[]){-2, -2}, 0));
  tu_expect_error(LJ_ERR_SHAPE, "lj_pad: padding (-2, -2) leaves dim 1 of size 3 negative", NULL);
  /* none of them recorded anything: the device has nothing to run */
  ck_assert_int_eq(lj_sync(lj_default_device()), LJ_OK);
}
END_TEST

/* Shape, dim-list and tensor-list arguments of the other ops, the optimizers, the layer
 * initializers, the inspection functions and lj_backward. */
START_TEST(test_list_and_shape_argument_errors) {
  lj_device *d = lj_default_device();
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 3), TU_ANY, 1);
  ck_assert(!lj_reshape(x, -1, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_reshape: bad shape (ndim = -1)", NULL);
  ck_assert(!lj_reshape(x, LJ_SHAPE(-3, -2)));
  tu_expect_error(LJ_ERR_ARG, "lj_reshape: invalid size -3 at dim 0", NULL);
  ck_assert(!lj_expand(x, LJ_SHAPE(3)));
  tu_expect_error(LJ_ERR_ARG, "lj_expand: 1 dims given for a 2-d tensor (need at least as many)", NULL);
  ck_assert(!lj_squeeze(x, -1, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_squeeze: bad dim list (ndims = -1)", NULL);
  lj_tensor *x8 = lj_zeros(d, LJ_F32, LJ_SHAPE(1, 1, 1, 1, 1, 1, 1, 2));
  ck_assert(!lj_unsqueeze(x8, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_unsqueeze: a tensor has at most 8 dims", NULL);
  ck_assert(!lj_flatten(x, 1, 0));
  tu_expect_error(LJ_ERR_ARG, "lj_flatten: start_dim 1 comes after end_dim 0", NULL);
  ck_assert(!lj_sum(x, -1, NULL, false));
  tu_expect_error(LJ_ERR_ARG, "lj_sum: bad dim list (ndims = -1)", NULL);

  ck_assert(!lj_zeros(NULL, LJ_F32, LJ_SHAPE(2)));
  tu_expect_error(LJ_ERR_ARG, "lj_zeros: argument d is NULL", NULL);
  ck_assert(!lj_full(d, (lj_dtype)99, LJ_SHAPE(2), 1));
  tu_expect_error(LJ_ERR_DTYPE, "lj_full: dtype 99 is not an lj_dtype", NULL);
  ck_assert(!lj_zeros(d, LJ_F32, 2, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_zeros: argument shape is NULL", NULL);

  lj_tensor *pair[2] = {x, NULL};
  ck_assert_int_eq(lj_sync_tensors(-1, NULL), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_sync_tensors: bad tensor list (n = -1)", NULL);
  ck_assert_int_eq(lj_sync_tensors(2, pair), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_sync_tensors: tensor 1 of 2 is NULL", NULL);
  ck_assert(!lj_tensors_text(0, NULL));
  tu_expect_error(LJ_ERR_ARG, "lj_tensors_text: no tensors given (n = 0)", NULL);

  ck_assert(!lj_optim_sgd(0, NULL, (lj_sgd_options){.lr = 0.1}));
  tu_expect_error(LJ_ERR_ARG, "lj_optim_sgd: no parameters (n = 0)", NULL);
  lj_adam_options ao = lj_adam_defaults();
  ao.lr = -1;
  ck_assert(!lj_optim_adam(1, &x, ao));
  tu_expect_error(LJ_ERR_ARG, "lj_optim_adam", "lr", NULL);
  ck_assert(!lj_clip_grad_norm(0, NULL, 1));
  tu_expect_error(LJ_ERR_ARG, "lj_clip_grad_norm: no parameters (n = 0)", NULL);
  lj_tensor *w = NULL, *b = NULL;
  ck_assert_int_eq(lj_nn_linear_init(NULL, LJ_F32, 3, 2, true, &w, &b), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_nn_linear_init: a NULL device or output pointer", NULL);
  ck_assert_int_eq(lj_nn_linear_init(d, LJ_F32, 3, 2, true, &w, NULL), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_nn_linear_init", NULL);
  ck_assert(!w && !b);

  lj_tensor *loss = lj_sum(lj_cast(x, LJ_I32), 0, NULL, false); /* i64, as in PyTorch */
  ck_assert_int_eq(lj_backward(loss), LJ_ERR_DTYPE);
  tu_expect_error(LJ_ERR_DTYPE, "lj_backward: the loss must be a float tensor, not i64", NULL);
  /* a loss below which no tensor requires grad, and one read before its backward (which kept
   * its value only and once gave no gradient and no error) */
  lj_tensor *plain = lj_sum(lj_mul(x, x), 0, NULL, false);
  ck_assert_int_eq(lj_backward(plain), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_backward: the loss depends on no tensor that requires grad", NULL);
  lj_tensor *leaf = lj_ones(d, LJ_F32, LJ_SHAPE(3));
  ck_assert_int_eq(lj_tensor_set_requires_grad(leaf, true), LJ_OK);
  lj_tensor *read = lj_sum(lj_mul(leaf, leaf), 0, NULL, false);
  ck_assert(lj_item(read) == 3);
  ck_assert_int_eq(lj_backward(read), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "lj_backward", "read or synced before", NULL);
  ck_assert(!lj_tensor_grad(leaf));
  lj_tensor *again = lj_sum(lj_mul(leaf, leaf), 0, NULL, false);
  ck_assert_int_eq(lj_backward(again), LJ_OK);
  ck_assert(lj_item(again) == 3 && lj_item(lj_sum(lj_tensor_grad(leaf), 0, NULL, false)) == 6);
}
END_TEST

/* A value a sync or a read computed from tensors that require grad keeps no graph: a loss
 * depending on it is an error at lj_backward rather than a gradient missing what flowed
 * through it (d/dx of (2x)·x at 3 came out 6, not 12). lj_detach makes it a constant; what
 * lj_backward and lj_assign compute (gradients, optimizer state, running statistics) is
 * constant anyway, as under PyTorch's no_grad. */
START_TEST(test_backward_through_synced_value) {
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_full(d, LJ_F32, LJ_SHAPE(1), 3.0);
  ck_assert_int_eq(lj_tensor_set_requires_grad(x, true), LJ_OK);
  for (int read = 0; read < 2; read++) {
    lj_tensor *y = lj_mul_scalar(x, 2);
    ck_assert(read ? lj_item(y) == 6 : lj_sync(d) == LJ_OK);
    lj_tensor *loss = lj_sum(lj_mul(lj_exp(lj_neg(y)), x), 0, NULL, false);
    ck_assert_int_eq(lj_backward(loss), LJ_ERR_ARG);
    tu_expect_error(LJ_ERR_ARG, "lj_backward: the loss depends on a f32[1] value that a sync or read computed",
                    "lj_detach", NULL);
    ck_assert(!lj_tensor_grad(x));
    lj_tensor *detached = lj_sum(lj_mul(lj_detach(y), x), 0, NULL, false);
    ck_assert_int_eq(lj_backward(detached), LJ_OK);
    ck_assert(lj_item(lj_tensor_grad(x)) == 6);
    lj_tensor_zero_grad(x);
  }
  /* two steps of a layer with batch norm and momentum, then an evaluation with the running
   * statistics and a loss using a gradient and an average of the weights as constants */
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3, 1, 1), TU_ANY, 1);
  lj_tensor *in = tu_tensor(LJ_F32, LJ_SHAPE(2, 3, 2, 2), TU_ANY, 2);
  lj_tensor *rm = lj_zeros(d, LJ_F32, LJ_SHAPE(4)), *rv = lj_ones(d, LJ_F32, LJ_SHAPE(4));
  ck_assert_int_eq(lj_tensor_set_requires_grad(w, true), LJ_OK);
  lj_tensor *avg = lj_zeros(d, LJ_F32, LJ_SHAPE(4, 3, 1, 1));
  lj_optim *o = lj_optim_sgd(1, &w, (lj_sgd_options){.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  for (int step = 0; step < 3; step++) {
    if (step < 2) lj_optim_zero_grad(o);
    lj_tensor *h = lj_batch_norm(lj_conv2d(in, w, NULL, NULL, NULL, NULL, 1), rm, rv, NULL, NULL, step < 2, 0.1, 1e-5);
    lj_tensor *loss = lj_sum(lj_mul(h, h), 0, NULL, false);
    if (step == 2) {
      lj_tensor *far = lj_sub(w, avg);
      loss = lj_add(loss, lj_sum(lj_add(lj_mul(w, lj_tensor_grad(w)), lj_mul(far, far)), 0, NULL, false));
    }
    ck_assert_int_eq(lj_backward(loss), LJ_OK);
    ck_assert_int_eq(lj_assign(avg, lj_add(lj_mul_scalar(avg, 0.9), lj_mul_scalar(w, 0.1))), LJ_OK);
    ck_assert_int_eq(lj_optimizer_step(o, true), LJ_OK);
    ck_assert(isfinite(lj_item(loss)));
  }
  lj_optim_free(o);
}
END_TEST

/* Integer division by zero is found by the compiled code. The sync only queues the run: its
 * error comes back, with its message, from the next barrier or read (once); the tensor it
 * computed holds no value, a graph using it fails without running, and the device stays
 * usable. */
START_TEST(test_runtime_division_by_zero) {
  lj_device *d = lj_default_device();
  int32_t a[4] = {7, -7, 8, 9}, b[4] = {2, 0, 3, 4};
  lj_tensor *x = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), a);
  lj_tensor *y = lj_tensor_from_host(d, LJ_I32, LJ_SHAPE(4), b);
  lj_tensor *q = lj_floor_divide(x, y);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert(!lj_tensor_is_pending(q));
  ck_assert_int_eq(lj_wait(d), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "div_floor", "integer division by zero", "i32[4]", NULL);
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  int32_t out[4];
  ck_assert_int_eq(lj_tensor_to_host(q, out, sizeof out), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "lj_tensor_to_host", "not computed", NULL);
  lj_tensor *q1 = lj_add_scalar(q, 1);
  ck_assert_int_eq(lj_tensor_to_host(q1, out, sizeof out), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "lj:0: input 0 of graph", "was not computed", NULL);
  lj_tensor_release(q);
  lj_tensor_release(q1);
  lj_tensor *r = lj_remainder(x, lj_add_scalar(y, 1)); /* no zero now */
  ck_assert_int_eq(lj_tensor_to_host(r, out, sizeof out), LJ_OK);
  ck_assert_int_eq(out[0], 1);
  ck_assert_int_eq(out[1], 0);
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  /* inside a fused chain and in a remainder by a scalar 0: the next sync reports it */
  lj_scope_begin();
  lj_tensor *s = lj_keep(lj_add_scalar(lj_remainder_scalar(x, 0), 1));
  lj_scope_end();
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  lj_tensor_release(s);
  ck_assert_int_eq(lj_sync(d), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "remainder", NULL);
  ck_assert_msg(lj_sync(d) == LJ_OK, "%s", lj_last_error());
  ck_assert_int_eq(lj_wait(d), LJ_OK);
}
END_TEST

/* LJ_SYNC_WAIT: the sync waits for its run and returns the run's error itself. */
START_TEST(test_sync_wait_reports_at_the_sync) {
  lj_config cfg = lj_config_default();
  cfg.sync_wait = true;
  ck_assert_int_eq(lj_init(&cfg), LJ_OK);
  lj_device *d = lj_default_device();
  lj_tensor *x = lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(3), (int64_t[]){5, 6, 7});
  lj_tensor *q = lj_div_rounding(x, lj_tensor_from_host(d, LJ_I64, LJ_SHAPE(3), (int64_t[]){1, 2, 0}),
                                 LJ_ROUND_TRUNC);
  ck_assert_int_eq(lj_sync(d), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "integer division by zero", "i64[3]", NULL);
  ck_assert(!lj_tensor_is_pending(q));
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  int64_t out[3];
  ck_assert_int_eq(lj_tensor_to_host(q, out, sizeof out), LJ_ERR_RUNTIME);
  tu_expect_error(LJ_ERR_RUNTIME, "not computed", NULL);
  lj_tensor *ok = lj_mul_scalar(x, 3); /* the device goes on */
  ck_assert_int_eq(lj_sync(d), LJ_OK);
  ck_assert_int_eq(lj_tensor_to_host(ok, out, sizeof out), LJ_OK);
  ck_assert_int_eq(out[2], 21);
}
END_TEST

/* Random ops with random (often invalid) arguments: results or clean errors, never a crash. */
START_TEST(test_fuzz_never_crashes) {
  lj_device *d = lj_default_device();
  uint64_t s = 0x1234567;
  for (int it = 0; it < 300; it++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    int ndim = (int)(s >> 60) % 4;
    int64_t shape[3] = {1 + (int64_t)(s >> 40) % 3, (int64_t)(s >> 30) % 4, 1 + (int64_t)(s >> 20) % 2};
    lj_dtype dt = tu_all_dtypes[(s >> 8) % LJ_NUM_DTYPES];
    lj_scope_begin();
    lj_tensor *x = tu_tensor(dt, ndim, shape, TU_ANY, (uint64_t)it);
    lj_tensor *y = tu_tensor(tu_all_dtypes[(s >> 12) % LJ_NUM_DTYPES], ndim ? ndim - 1 : 0, shape + 1, TU_ANY, 3);
    int dim = (int)((s >> 16) % 7) - 3;
    lj_tensor *r = NULL;
    switch ((s >> 24) % 10) {
    case 0: r = lj_add(x, y); break;
    case 1: r = lj_matmul(x, y); break;
    case 2: r = lj_sum(x, 1, &dim, (s >> 3) & 1); break;
    case 3: r = lj_transpose(x, dim, 0); break;
    case 4: r = lj_cat(2, (lj_tensor *const[]){x, y}, dim); break;
    case 5: r = lj_slice(x, dim, -2, 5, 1 + (int64_t)(s % 3)); break;
    case 6: r = lj_argmax(x, dim, true); break;
    case 7: r = lj_reshape(x, LJ_SHAPE(-1, 2)); break;
    case 8: r = lj_where(lj_gt(x, y), x, y); break;
    default: r = lj_floor_divide(x, lj_add_scalar(y, 100)); break;
    }
    if (r) {
      lj_keep(r);
    } else {
      ck_assert_int_ne(lj_last_status(), LJ_OK);
      ck_assert(strlen(lj_last_error()) > 0);
    }
    lj_clear_error();
    lj_scope_end();
    if (r) {
      lj_status st = lj_sync(d);
      ck_assert_msg(st == LJ_OK, "iteration %d: %s", it, lj_last_error());
      lj_tensor_release(r);
    }
  }
}
END_TEST

/* The nn, indexing and shape ops with random (often invalid) windows, pads, dims, groups and
 * index values: a result, or a clean error; a result whose indices are out of range fails
 * its sync with LJ_ERR_RUNTIME and a message; nothing crashes. */
static uint64_t fuzz_state = 0x9e3779b97f4a7c15ULL;

static int64_t pick(int64_t lo, int64_t hi) { return tu_pick(&fuzz_state, lo, hi); }

static lj_tensor *random_index(int ndim, const int64_t *shape, int64_t lo, int64_t hi) {
  int64_t n = 1, v[64];
  for (int d = 0; d < ndim; d++) n *= shape[d];
  ck_assert_int_le(n, 64);
  for (int64_t i = 0; i < n; i++) v[i] = pick(lo, hi);
  return lj_tensor_from_host(lj_default_device(), LJ_I64, ndim, shape, v);
}

static lj_tensor *fuzz_nn_op(lj_tensor *x, const int64_t *xs) {
  int win[3][2] = {{(int)pick(-1, 4), (int)pick(0, 4)}, {(int)pick(-1, 3), (int)pick(0, 3)}, {(int)pick(-1, 2), (int)pick(1, 2)}};
  int64_t pads[9], ish[4] = {pick(0, 3), pick(1, 3), 1, 1};
  for (int i = 0; i < 9; i++) pads[i] = pick(-4, 4);
  int dim = (int)pick(-5, 5), perm[4] = {(int)pick(0, 3), (int)pick(0, 3), (int)pick(0, 3), (int)pick(0, 3)};
  switch (pick(0, 13)) {
  case 0: {
    int groups = (int)pick(0, 3);
    lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(pick(1, 3), pick(1, 3), pick(1, 4), pick(1, 4)), TU_ANY, 7);
    return lj_conv2d(x, w, pick(0, 1) ? tu_tensor(LJ_F32, LJ_SHAPE(pick(1, 3)), TU_ANY, 8) : NULL,
                     pick(0, 1) ? win[1] : NULL, win[1], win[2], groups);
  }
  case 1: return lj_max_pool2d(x, win[0], pick(0, 1) ? win[1] : NULL, win[2]);
  case 2: return lj_avg_pool2d(x, win[0], pick(0, 1) ? win[1] : NULL, win[2]);
  case 3: return lj_pad(x, (int)pick(0, 9), pads, 0.5);
  case 4: return lj_gather(x, dim, random_index(4, (int64_t[]){pick(1, xs[0]), pick(1, xs[1]), pick(1, 2), pick(1, 2)}, -1, 4));
  case 5: return lj_index_select(x, dim, random_index(1, ish, -1, 4));
  case 6: return lj_one_hot(random_index(2, ish, -1, 4), pick(-1, 4));
  case 7: return lj_embedding(tu_tensor(LJ_F32, LJ_SHAPE(pick(0, 4), pick(1, 3)), TU_ANY, 9), random_index(2, ish, -1, 4));
  case 8: {
    lj_tensor *logits = lj_flatten(x, 1, 3);
    return lj_cross_entropy(logits, random_index(1, (int64_t[]){xs[0]}, -1, pick(1, 30)), (lj_reduction)pick(0, 3));
  }
  case 9: return lj_softmax(x, dim);
  case 10: return lj_permute(x, (int)pick(3, 4), perm);
  case 11: return lj_slice(x, dim, pick(-8, 8), pick(-8, 8), pick(-1, 3));
  case 12: return lj_layer_norm(x, (int)pick(-1, 5), pick(0, 1) ? tu_tensor(LJ_F32, LJ_SHAPE(pick(1, 6)), TU_ANY, 10) : NULL,
                                NULL, 1e-5);
  default: {
    lj_tensor *stat = lj_zeros(lj_default_device(), LJ_F32, LJ_SHAPE(pick(1, 3)));
    return lj_batch_norm(x, pick(0, 1) ? stat : NULL, pick(0, 1) ? stat : NULL, NULL, NULL, pick(0, 1), 0.1, 1e-5);
  }
  }
}

START_TEST(test_fuzz_nn_ops_never_crash) {
  lj_device *d = lj_default_device();
  int results = 0, runtime_errors = 0;
  for (int it = 0; it < 400; it++) {
    lj_scope_begin();
    int64_t xs[4] = {pick(1, 2), pick(1, 3), pick(0, 6), pick(1, 6)};
    lj_tensor *x = tu_tensor(pick(0, 3) ? LJ_F32 : LJ_I32, 4, xs, TU_ANY, (uint64_t)it);
    lj_tensor *r = fuzz_nn_op(x, xs);
    if (r) {
      lj_keep(r);
    } else {
      ck_assert_msg(lj_last_status() != LJ_OK && strlen(lj_last_error()) > 0, "iteration %d: NULL without an error", it);
    }
    lj_clear_error();
    lj_scope_end();
    if (!r) continue;
    results++;
    lj_status st = lj_sync_tensors(1, &r);
    if (st == LJ_OK) st = lj_wait(d);
    if (st == LJ_ERR_RUNTIME) {
      ck_assert_msg(strstr(lj_last_error(), "out of range") || strstr(lj_last_error(), "index"), "iteration %d: %s", it,
                    lj_last_error());
      runtime_errors++;
      lj_clear_error();
    } else {
      ck_assert_msg(st == LJ_OK, "iteration %d: %s", it, lj_last_error());
    }
    lj_tensor_release(r);
  }
  /* the arguments reach every outcome */
  ck_assert_int_ge(results, 40);
  ck_assert_int_ge(runtime_errors, 5);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("frontend_errors");
  TCase *tc = tu_tcase("errors");
  tcase_add_test(tc, test_null_operands);
  tcase_add_test(tc, test_first_error_survives_a_chain);
  tcase_add_test(tc, test_broadcast_message);
  tcase_add_test(tc, test_devices);
  tcase_add_test(tc, test_sizes_and_dtypes);
  tcase_add_test(tc, test_config_errors);
  tcase_add_test(tc, test_nn_argument_errors);
  tcase_add_test(tc, test_list_and_shape_argument_errors);
  tcase_add_test(tc, test_backward_through_synced_value);
  tcase_add_test(tc, test_runtime_division_by_zero);
  tcase_add_test(tc, test_sync_wait_reports_at_the_sync);
  tcase_add_test(tc, test_fuzz_never_crashes);
  tcase_add_test(tc, test_fuzz_nn_ops_never_crash);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
