/* ops_create.c — zeros, ones, full, arange, rand, randn and the device's RNG seed. Filled
 * tensors are one scalar broadcast to the shape (no data until a sync). Random tensors read
 * the device seed and a per-op offset as scalar parameters, so a new step with new random
 * numbers is the same graph. */
#include "frontend/frontend.h"

#include <math.h>

static bool check_create(const char *name, lj_device *d, lj_dtype dt, int ndim, const int64_t *shape) {
  if (!d) {
    ljb_error(LJ_ERR_ARG, "%s: argument d is NULL", name);
    return false;
  }
  if (!ljg_dtype_valid((int)dt)) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype %d is not an lj_dtype", name, (int)dt);
    return false;
  }
  return ljf_shape_valid(name, ndim, shape);
}

static lj_tensor *filled(const char *name, lj_device *d, lj_dtype dt, int ndim,
                         const int64_t *shape, double v) {
  if (!check_create(name, d, dt, ndim, shape)) return NULL;
  return ljf_tensor_from_node(d, ljf_expand_node(d, ljf_scalar(d, dt, v), ndim, shape));
}

lj_tensor *lj_zeros(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape) {
  return filled("lj_zeros", d, dt, ndim, shape, 0);
}
lj_tensor *lj_ones(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape) {
  return filled("lj_ones", d, dt, ndim, shape, 1);
}
lj_tensor *lj_full(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape, double v) {
  return filled("lj_full", d, dt, ndim, shape, v);
}

lj_tensor *lj_arange(lj_device *d, lj_dtype dt, double start, double end, double step) {
  static const char *name = "lj_arange";
  if (!check_create(name, d, dt, 0, NULL)) return NULL;
  if (dt == LJ_BOOL) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype bool is not supported", name);
    return NULL;
  }
  if (!isfinite(start) || !isfinite(end) || !isfinite(step)) {
    ljb_error(LJ_ERR_ARG, "%s: start, end and step must be finite (%g, %g, %g)", name, start, end,
              step);
    return NULL;
  }
  if (step == 0 || (end > start && step < 0) || (end < start && step > 0)) {
    ljb_error(LJ_ERR_ARG, "%s: step %g cannot go from %g to %g", name, step, start, end);
    return NULL;
  }
  int64_t n = (int64_t)ceil((end - start) / step);
  /* start + i * step in f64 (PyTorch's accumulation type), then cast */
  ljg_node *i = ljg_node_make(&d->trace, LJG_OP_IOTA, LJ_I64, 1, &n, 0, NULL, NULL);
  i = ljf_cast(d, i, LJ_F64);
  ljg_node *mul[2] = {i, ljf_expand_node(d, ljf_scalar(d, LJ_F64, step), 1, &n)};
  ljg_node *x = ljf_elemwise(d, LJG_OP_MUL, LJ_F64, 2, mul);
  ljg_node *add[2] = {x, ljf_expand_node(d, ljf_scalar(d, LJ_F64, start), 1, &n)};
  x = ljf_elemwise(d, LJG_OP_ADD, LJ_F64, 2, add);
  return ljf_tensor_from_node(d, ljf_cast(d, x, dt));
}

static lj_tensor *random_op(const char *name, ljg_op op, lj_device *d, lj_dtype dt, int ndim,
                            const int64_t *shape) {
  if (!check_create(name, d, dt, ndim, shape)) return NULL;
  if (!ljg_dtype_is_float(dt)) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype %s is not a float dtype", name, lj_dtype_name(dt));
    return NULL;
  }
  /* seed and offset are always parameters, never baked constants */
  ljg_node *in[2] = {ljg_node_scalar(&d->trace, LJ_I64, 0, (int64_t)d->rng_seed),
                     ljg_node_scalar(&d->trace, LJ_I64, 0, (int64_t)d->rng_offset++)};
  return ljf_tensor_from_node(d, ljg_node_make(&d->trace, op, dt, ndim, shape, 2, in, NULL));
}

lj_tensor *lj_rand(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape) {
  return random_op("lj_rand", LJG_OP_RAND_UNIFORM, d, dt, ndim, shape);
}
lj_tensor *lj_randn(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape) {
  return random_op("lj_randn", LJG_OP_RAND_NORMAL, d, dt, ndim, shape);
}

void lj_manual_seed(lj_device *d, uint64_t seed) {
  if (!d) return;
  d->rng_seed = seed;
  d->rng_offset = 0;
}
