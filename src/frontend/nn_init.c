/* nn_init.c — parameters initialized as PyTorch initializes nn.Linear and nn.Conv2d:
 * weights kaiming-uniform with a = sqrt(5), biases uniform in ±1/sqrt(fan_in) — both come to
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) — drawn from the device's RNG, so a C model starts from
 * the same distribution as the PyTorch one. */
#include "frontend/frontend.h"

#include <math.h>

/* A new parameter of shape, U(-bound, bound), requiring grad. */
static lj_tensor *uniform_param(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape, double bound) {
  lj_scope_begin();
  lj_tensor *t = lj_add_scalar(lj_mul_scalar(lj_rand(d, dt, ndim, shape), 2 * bound), -bound);
  lj_keep(t);
  lj_scope_end();
  if (t) lj_tensor_set_requires_grad(t, true);
  return t;
}

static lj_status layer_params(const char *name, lj_device *d, lj_dtype dt, int ndim, const int64_t *wshape,
                              int64_t fan_in, bool bias, lj_tensor **w, lj_tensor **b) {
  if (!d || !w || (bias && !b)) {
    ljb_error(LJ_ERR_ARG, "%s: a NULL device or output pointer", name);
    return LJ_ERR_ARG;
  }
  for (int i = 0; i < ndim; i++)
    if (wshape[i] < 1) {
      ljb_error(LJ_ERR_ARG, "%s: sizes must be positive (dim %d is %lld)", name, i, (long long)wshape[i]);
      return LJ_ERR_ARG;
    }
  if (!ljg_dtype_valid((int)dt) || !ljg_dtype_is_float(dt)) {
    ljb_error(LJ_ERR_DTYPE, "%s: parameters must have a float dtype", name);
    return LJ_ERR_DTYPE;
  }
  double bound = 1.0 / sqrt((double)fan_in);
  *w = uniform_param(d, dt, ndim, wshape, bound);
  if (b) *b = bias ? uniform_param(d, dt, 1, wshape, bound) : NULL;
  return *w && (!bias || *b) ? LJ_OK : lj_last_status();
}

lj_status lj_nn_linear_init(lj_device *d, lj_dtype dt, int64_t in, int64_t out, bool bias, lj_tensor **w,
                            lj_tensor **b) {
  int64_t shape[2] = {out, in};
  return layer_params("lj_nn_linear_init", d, dt, 2, shape, in, bias, w, b);
}

lj_status lj_nn_conv2d_init(lj_device *d, lj_dtype dt, int64_t in_channels, int64_t out_channels,
                            const int kernel[2], int groups, bool bias, lj_tensor **w, lj_tensor **b) {
  static const char *name = "lj_nn_conv2d_init";
  if (!kernel || groups < 1 || in_channels % groups || out_channels % groups) {
    ljb_error(LJ_ERR_ARG, "%s: bad kernel or groups (%lld -> %lld channels, groups %d)", name,
              (long long)in_channels, (long long)out_channels, groups);
    return LJ_ERR_ARG;
  }
  int64_t shape[4] = {out_channels, in_channels / groups, kernel[0], kernel[1]};
  return layer_params(name, d, dt, 4, shape, shape[1] * kernel[0] * kernel[1], bias, w, b);
}
