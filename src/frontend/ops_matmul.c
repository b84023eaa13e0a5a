/* ops_matmul.c — torch.matmul: 1-D operands gain a dim (a row for the left, a column for the
 * right) that the result loses again; batch dims broadcast; the graph sees one batched
 * [B,M,K] x [B,K,N] matmul between reshapes. 16-bit floats multiply in f32 and round once,
 * as PyTorch accumulates them. */
#include "frontend/frontend.h"

#include <string.h>

lj_tensor *lj_matmul(lj_tensor *a, lj_tensor *b) {
  static const char *name = "lj_matmul";
  if (!ljf_arg(name, "a", a) || !ljf_arg(name, "b", b)) return NULL;
  if (!ljf_same_device(name, a, b)) return NULL;
  char sa[LJB_SHAPE_STR_MAX], sb[LJB_SHAPE_STR_MAX];
  if (a->ndim == 0 || b->ndim == 0) {
    ljb_error(LJ_ERR_SHAPE, "%s: both operands need at least 1 dim (got %s and %s)", name,
              ljb_shape_str(sa, a->ndim, a->shape), ljb_shape_str(sb, b->ndim, b->shape));
    return NULL;
  }
  if (a->dtype != b->dtype) {
    ljb_error(LJ_ERR_DTYPE, "%s: operands have different dtypes (%s and %s)", name,
              lj_dtype_name(a->dtype), lj_dtype_name(b->dtype));
    return NULL;
  }
  if (a->dtype == LJ_BOOL) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype bool is not supported", name);
    return NULL;
  }
  /* as matrices: a [..., m, k], b [..., k, n] */
  int an = a->ndim == 1 ? 2 : a->ndim, bn = b->ndim == 1 ? 2 : b->ndim;
  int64_t as[LJ_MAX_DIMS + 1], bs[LJ_MAX_DIMS + 1];
  if (a->ndim == 1) {
    as[0] = 1;
    as[1] = a->shape[0];
  } else {
    memcpy(as, a->shape, (size_t)an * sizeof *as);
  }
  if (b->ndim == 1) {
    bs[0] = b->shape[0];
    bs[1] = 1;
  } else {
    memcpy(bs, b->shape, (size_t)bn * sizeof *bs);
  }
  int64_t m = as[an - 2], k = as[an - 1], k2 = bs[bn - 2], n = bs[bn - 1];
  if (k != k2) {
    ljb_error(LJ_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied (%lld vs %lld)", name,
              ljb_shape_str(sa, a->ndim, a->shape), ljb_shape_str(sb, b->ndim, b->shape), (long long)k,
              (long long)k2);
    return NULL;
  }
  int batch_n;
  int64_t batch[LJ_MAX_DIMS];
  /* an, bn <= LJ_MAX_DIMS: the result has batch_n + 2 <= LJ_MAX_DIMS dims */
  if (!ljf_broadcast(name, an - 2, as, bn - 2, bs, &batch_n, batch)) return NULL;
  int64_t B = ljg_numel(batch_n, batch);
  struct lj_device *d = a->dev;
  lj_dtype dt = a->dtype;
  lj_dtype ct = (dt == LJ_BF16 || dt == LJ_F16) ? LJ_F32 : dt;
  int64_t full[LJ_MAX_DIMS];
  memcpy(full, batch, (size_t)batch_n * sizeof *full);
  /* a -> [*batch, m, k] -> [B, m, k] */
  ljg_node *x = ljf_reshape_node(d, ljf_node(a), an, as);
  full[batch_n] = m;
  full[batch_n + 1] = k;
  x = ljf_expand_node(d, x, batch_n + 2, full);
  x = ljf_cast(d, ljf_reshape_node(d, x, 3, (const int64_t[]){B, m, k}), ct);
  ljg_node *y = ljf_reshape_node(d, ljf_node(b), bn, bs);
  full[batch_n] = k;
  full[batch_n + 1] = n;
  y = ljf_expand_node(d, y, batch_n + 2, full);
  y = ljf_cast(d, ljf_reshape_node(d, y, 3, (const int64_t[]){B, k, n}), ct);
  ljg_node *in[2] = {x, y};
  ljg_node *r = ljg_node_make(&d->trace, LJG_OP_MATMUL, ct, 3, (const int64_t[]){B, m, n}, 2, in, NULL);
  r = ljf_cast(d, r, dt);
  /* the result's shape: batch, then m unless a was 1-D, then n unless b was 1-D */
  int64_t out[LJ_MAX_DIMS];
  int on = batch_n;
  memcpy(out, batch, (size_t)batch_n * sizeof *out);
  if (a->ndim > 1) out[on++] = m;
  if (b->ndim > 1) out[on++] = n;
  return ljf_tensor_from_node(d, ljf_reshape_node(d, r, on, out));
}
