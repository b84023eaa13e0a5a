/* ops_nn.c — neural-network ops, composed from the graph's primitives so that autograd and
 * fusion need nothing special for them:
 *   conv2d      im2col → matmul with the weight (batched over groups) → reshape, + bias;
 *               depthwise (groups = input channels), im2col → product with the weight → sum
 *               over each window: a matmul of one channel against K = kh·kw runs its
 *               register tiles nearly empty (3×3 on 64 channels of 56×56, batch 32, one Zen 4
 *               core: 22.2 → 7.9 ms)
 *   max_pool2d  im2col (padding -inf) → argmax over each window (an i8 position) → gather
 *               (so the gradient goes to the first maximum, as PyTorch's does)
 *   avg_pool2d  im2col (padding 0) → mean over each window (padding counted, PyTorch's default)
 *   softmax     exp(x - max) / sum, the max detached (exact gradients); log_softmax likewise
 *   nll_loss    -gather(logp, target) (class indices checked by the kernel), reduced
 * Each op validates its arguments first (so errors name it and its shapes), then composes
 * inside a scope of its own: temporaries are released, the result kept. */
#include "frontend/frontend.h"

#include <math.h>
#include <string.h>

/* Wraps a primitive node in a tensor. */
static lj_tensor *wrap(struct lj_device *d, ljg_op op, lj_dtype dt, int ndim, const int64_t *shape, int nin,
                       ljg_node *const *in, const ljg_attr *a) {
  return ljf_tensor_from_node(d, ljg_node_make(&d->trace, op, dt, ndim, shape, nin, in, a));
}

/* Ends an op's scope keeping r (NULL stays NULL). */
static lj_tensor *finish(lj_tensor *r) {
  lj_keep(r);
  lj_scope_end();
  return r;
}

/* Convolutions, softmax, log_softmax, layer norm and batch norm of 16-bit floats compute in
 * f32 and round their results once, as PyTorch's kernels do (its accumulation type): rounded
 * after each op, a softmax's sum of exps over a row of more than 65504 f16 columns was inf,
 * and every output 0. x widened to f32 (x itself otherwise, NULL included), and r rounded
 * back to x's dtype. */
static lj_tensor *widened(lj_tensor *x) {
  return x && (x->dtype == LJ_F16 || x->dtype == LJ_BF16) ? lj_cast(x, LJ_F32) : x;
}

static lj_tensor *narrowed(lj_tensor *r, const lj_tensor *x) {
  return r && r->dtype != x->dtype ? lj_cast(r, x->dtype) : r;
}

static bool require_float(const char *name, const char *arg, const lj_tensor *t) {
  if (ljg_dtype_is_float(t->dtype)) return true;
  ljb_error(LJ_ERR_DTYPE, "%s: %s must be a float tensor, not %s", name, arg, lj_dtype_name(t->dtype));
  return false;
}

static bool require_ndim(const char *name, const char *arg, const lj_tensor *t, int ndim) {
  if (t->ndim == ndim) return true;
  char s[LJB_SHAPE_STR_MAX];
  ljb_error(LJ_ERR_SHAPE, "%s: %s must have %d dims, got shape %s", name, arg, ndim,
            ljb_shape_str(s, t->ndim, t->shape));
  return false;
}

static bool same_dtype(const char *name, const lj_tensor *a, const lj_tensor *b) {
  if (a->dtype == b->dtype) return true;
  ljb_error(LJ_ERR_DTYPE, "%s: dtypes differ (%s and %s)", name, lj_dtype_name(a->dtype), lj_dtype_name(b->dtype));
  return false;
}

/* ---- windows: conv and pooling ------------------------------------------------------------ */

/* Fills a window attribute block; false with the error set when the window cannot apply to
 * an h x w input. */
static bool window_attrs(const char *name, int64_t h, int64_t w, const int k[2], const int *s, const int *p,
                         const int *dl, double fill, ljg_attr *a, int64_t *oh, int64_t *ow) {
  memset(a, 0, sizeof *a);
  int64_t v[8] = {k[0], k[1], s ? s[0] : 1, s ? s[1] : 1, p ? p[0] : 0, p ? p[1] : 0, dl ? dl[0] : 1, dl ? dl[1] : 1};
  memcpy(a->a, v, sizeof v);
  a->f = fill;
  if (!ljg_window_out(a->a, h, w, oh, ow)) {
    ljb_error(LJ_ERR_SHAPE,
              "%s: window %lldx%lld (stride %lldx%lld, padding %lldx%lld, dilation %lldx%lld) does not "
              "fit an input of %lldx%lld",
              name, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4],
              (long long)v[5], (long long)v[6], (long long)v[7], (long long)h, (long long)w);
    return false;
  }
  return true;
}

/* im2col of x [N,C,H,W]: [N, C*KH*KW, OH*OW]. */
static lj_tensor *im2col(lj_tensor *x, const ljg_attr *a, int64_t oh, int64_t ow) {
  int64_t shape[3] = {x->shape[0], x->shape[1] * a->a[0] * a->a[1], oh * ow};
  ljg_node *xn = ljf_node(x);
  return wrap(x->dev, LJG_OP_IM2COL, x->dtype, 3, shape, 1, &xn, a);
}

/* Whether a convolution of window attributes a over x [N, C, H, W] (f32 or computed in f32)
 * with O output channels in one group runs as batches of sub-images: of stride 1, dilated by
 * a dilation that divides the image's height and width and the padding, through Winograd's
 * transforms once undilated (a 3×3 or 5×5 window, channels enough, Winograd on). */
static bool dilated_as_batches(const ljg_attr *a, const lj_tensor *x, int64_t O, int groups) {
  const int64_t *v = a->a;
  return groups == 1 && x->dtype == LJ_F32 && ljr_current()->cfg.pub.winograd && (v[6] > 1 || v[7] > 1) &&
         v[2] == 1 && v[3] == 1 && (v[0] == 3 || v[0] == 5) && v[1] == v[0] && x->shape[2] % v[6] == 0 &&
         x->shape[3] % v[7] == 0 && v[4] % v[6] == 0 && v[5] % v[7] == 0 &&
         x->shape[1] >= LJG_WINOGRAD_MIN_CHANNELS && O >= LJG_WINOGRAD_MIN_ROWS;
}

/* x [N, C, H, W] as dh·dw batches of its sub-images of every dh-th row and dw-th column,
 * [dh·dw·N, C, H/dh, W/dw] (the sub-image of rows ≡ r and columns ≡ q first by r, then q); with
 * `back`, the inverse: such batches of [N, C, H/dh, W/dw] sub-images into [N, C, H, W]. */
static lj_tensor *sub_images(lj_tensor *x, int64_t dh, int64_t dw, bool back) {
  static const int to[6] = {3, 5, 0, 1, 2, 4}, from[6] = {2, 3, 4, 0, 5, 1};
  const int64_t *s = x->shape;
  if (!back)
    return lj_reshape(lj_permute(lj_reshape(x, LJ_SHAPE(s[0], s[1], s[2] / dh, dh, s[3] / dw, dw)), 6, to),
                      LJ_SHAPE(dh * dw * s[0], s[1], s[2] / dh, s[3] / dw));
  int64_t n = s[0] / (dh * dw);
  return lj_reshape(lj_permute(lj_reshape(x, LJ_SHAPE(dh, dw, n, s[1], s[2], s[3])), 6, from),
                    LJ_SHAPE(n, s[1], s[2] * dh, s[3] * dw));
}

/* The columns a product's tiles take at a time: a row's columns past a multiple of it fill a
 * last panel in part. */
enum { PANEL_COLUMNS = 16 };

/* Whether a convolution of window attributes a over x [N, C, H, W] to O channels in one group,
 * of oh × ow outputs, is one product of the weight [O, C] and the images side by side [C,
 * N·oh·ow]: a 1×1 window without padding over N > 1 images whose oh·ow positions leave more
 * than a tenth of their last panel's lanes empty (7×7: 49 of 64), of any stride (the image's
 * every s-th row and column, a ResNet's downsampling). Per image, 512 to 2048 channels over 7×7
 * at batch 32, one Zen 4 thread, took 38.6-40.8 ms (PyTorch 35.4-37.7); side by side
 * 31.9-33.9, the image copied across and the output permuted back (by the product's kernel
 * where its rows are more than column tasks take: graph/fuse_rows.c). A 16-bit image is copied
 * in its dtype and widened after, so that a product of bf16 pairs reads the copy (fuse.c's
 * bf16_source; widened first, the copy in f32, a bf16 one took 31 ms instead of 20.3 a product
 * an image, 16.7 so). */
static bool images_side_by_side(const ljg_attr *a, const lj_tensor *x, int groups, int64_t oh, int64_t ow) {
  const int64_t *v = a->a, hw = oh * ow;
  int64_t lanes = (hw + PANEL_COLUMNS - 1) / PANEL_COLUMNS * PANEL_COLUMNS;
  return groups == 1 && x->shape[0] > 1 && v[0] == 1 && v[1] == 1 && v[4] == 0 && v[5] == 0 &&
         10 * (lanes - hw) > lanes;
}

lj_tensor *lj_conv2d(lj_tensor *x, lj_tensor *w, lj_tensor *b, const int stride[2], const int padding[2],
                     const int dilation[2], int groups) {
  static const char *name = "lj_conv2d";
  if (!ljf_arg(name, "x", x) || !ljf_arg(name, "w", w)) return NULL;
  if (!ljf_same_device(name, x, w) || (b && !ljf_same_device(name, x, b))) return NULL;
  if (!require_ndim(name, "x", x, 4) || !require_ndim(name, "w", w, 4) || !require_float(name, "x", x) ||
      !same_dtype(name, x, w) || (b && !same_dtype(name, x, b)))
    return NULL;
  int64_t N = x->shape[0], C = x->shape[1], O = w->shape[0];
  if (groups < 1 || C % groups || O % groups || w->shape[1] * groups != C) {
    char xs[LJB_SHAPE_STR_MAX], ws[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: x %s has %lld channels but weight %s with groups=%d expects %lld", name,
              ljb_shape_str(xs, x->ndim, x->shape), (long long)C, ljb_shape_str(ws, w->ndim, w->shape), groups,
              (long long)(w->shape[1] * groups));
    return NULL;
  }
  if (b && (b->ndim != 1 || b->shape[0] != O)) {
    char bs[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: bias %s does not match the %lld output channels", name,
              ljb_shape_str(bs, b->ndim, b->shape), (long long)O);
    return NULL;
  }
  ljg_attr a;
  int64_t oh, ow;
  const int k[2] = {(int)w->shape[2], (int)w->shape[3]};
  if (!window_attrs(name, x->shape[2], x->shape[3], k, stride, padding, dilation, 0, &a, &oh, &ow)) return NULL;
  int64_t G = groups, CK = C / G * k[0] * k[1];
  lj_scope_begin();
  /* 16-bit floats in f32 (widened): the products and the bias summed in f32 and the output
   * rounded once, and so, through autograd, the input gradient's col2im and the weight
   * gradient's sum over the batch, each rounded once; a 3x3 convolution then runs as f32's,
   * through Winograd's transforms (a bf16 one of [32, 64, 28, 28] to 64 channels, forward
   * and both gradients, one Zen 4 thread: 50.7 -> 13.4-14.9 ms, f32's 12.2-14.3) */
  lj_tensor *xf = widened(x), *wf = widened(w), *y;
  /* dilated by d: sub-image (r, q) of the output is the undilated convolution of sub-image
   * (r, q) of the image, padded by p / d (a 3×3 dilated by 2 over [16, 64, 56, 56] to 64
   * channels, one Zen 4 thread: 35.9 -> 14.5 ms; without Winograd 37.5, so not then) */
  int64_t dh = a.a[6], dw = a.a[7];
  bool batches = dilated_as_batches(&a, xf, O, groups);
  if (batches) {
    xf = sub_images(xf, dh, dw, false);
    a.a[4] /= dh, a.a[5] /= dw, a.a[6] = a.a[7] = 1;
    oh /= dh, ow /= dw;
    N *= dh * dw;
  }
  if (images_side_by_side(&a, x, groups, oh, ow)) {
    lj_tensor *xo = lj_slice(lj_slice(x, 2, 0, x->shape[2], a.a[2]), 3, 0, x->shape[3], a.a[3]);
    lj_tensor *xs = widened(lj_reshape(lj_permute(xo, 4, (const int[]){1, 0, 2, 3}), LJ_SHAPE(C, N * oh * ow)));
    lj_tensor *ys = lj_matmul(lj_reshape(wf, LJ_SHAPE(O, C)), xs);
    y = lj_permute(lj_reshape(ys, LJ_SHAPE(O, N, oh, ow)), 4, (const int[]){1, 0, 2, 3});
  } else if (G > 1 && C == G) {
    lj_tensor *cols = lj_reshape(im2col(xf, &a, oh, ow), LJ_SHAPE(N, G, 1, CK, oh * ow));
    lj_tensor *wg = lj_reshape(wf, LJ_SHAPE(G, O / G, CK, 1));
    y = lj_reshape(lj_sum(lj_mul(cols, wg), 1, (const int[]){3}, false), LJ_SHAPE(N, O, oh, ow));
  } else {
    lj_tensor *xg = lj_reshape(xf, LJ_SHAPE(N * G, C / G, xf->shape[2], xf->shape[3]));
    lj_tensor *cols = lj_reshape(im2col(xg, &a, oh, ow), LJ_SHAPE(N, G, CK, oh * ow));
    lj_tensor *wg = lj_reshape(wf, LJ_SHAPE(G, O / G, CK));
    y = lj_reshape(lj_matmul(wg, cols), LJ_SHAPE(N, O, oh, ow));
  }
  if (batches) y = sub_images(y, dh, dw, true);
  if (b) y = lj_add(y, lj_reshape(widened(b), LJ_SHAPE(O, 1, 1)));
  return finish(narrowed(y, x));
}

/* A pooling window's attributes: stride defaults to the kernel, padding to 0. */
static bool pool_attrs(const char *name, lj_tensor *x, const int kernel[2], const int stride[2],
                       const int padding[2], double fill, ljg_attr *a, int64_t *oh, int64_t *ow) {
  if (!ljf_arg(name, "x", x)) return false;
  if (!kernel) {
    ljb_error(LJ_ERR_ARG, "%s: argument kernel is NULL", name);
    return false;
  }
  if (!require_ndim(name, "x", x, 4) || !require_float(name, "x", x)) return false;
  for (int i = 0; i < 2; i++)
    if (padding && kernel[i] > 0 && 2 * padding[i] > kernel[i]) {
      ljb_error(LJ_ERR_ARG, "%s: padding %d must be at most half the kernel size %d", name, padding[i], kernel[i]);
      return false;
    }
  return window_attrs(name, x->shape[2], x->shape[3], kernel, stride ? stride : kernel, padding, NULL, fill, a,
                      oh, ow);
}

lj_tensor *lj_max_pool2d(lj_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  static const char *name = "lj_max_pool2d";
  ljg_attr a;
  int64_t oh, ow;
  if (!pool_attrs(name, x, kernel, stride, padding, -INFINITY, &a, &oh, &ow)) return NULL;
  int64_t N = x->shape[0], C = x->shape[1], K = a.a[0] * a.a[1];
  lj_scope_begin();
  lj_tensor *cols = lj_reshape(im2col(x, &a, oh, ow), LJ_SHAPE(N, C, K, oh * ow));
  /* each window's position of its maximum, as i8 up to 127 positions (an eighth of the
   * memory of the i64 lj_argmax gives; the gradient reads it back), else i32: MNISTNet's
   * step at batch 64, one thread, conv1's forward kernel 1.10 -> 1.04 ms, its pooling's
   * gradient 0.74-0.80 -> 0.67-0.75, conv2's pooling gradient 0.27 -> 0.25 (i32 -> i8) */
  ljg_attr dim2 = {0};
  dim2.a[0] = 1 << 2;
  ljg_node *in[2] = {ljf_node(cols), NULL};
  lj_dtype position = K <= INT8_MAX ? LJ_I8 : LJ_I32;
  lj_tensor *best = wrap(x->dev, LJG_OP_ARGMAX, position, LJ_SHAPE(N, C, 1, oh * ow), 1, in, &dim2);
  in[1] = ljf_node(best);
  ljg_attr gdim = {0};
  gdim.a[0] = 2;
  lj_tensor *y = wrap(x->dev, LJG_OP_GATHER, x->dtype, LJ_SHAPE(N, C, 1, oh * ow), 2, in, &gdim);
  return finish(lj_reshape(y, LJ_SHAPE(N, C, oh, ow)));
}

lj_tensor *lj_avg_pool2d(lj_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  static const char *name = "lj_avg_pool2d";
  ljg_attr a;
  int64_t oh, ow;
  if (!pool_attrs(name, x, kernel, stride, padding, 0, &a, &oh, &ow)) return NULL;
  int64_t N = x->shape[0], C = x->shape[1], K = a.a[0] * a.a[1];
  lj_scope_begin();
  lj_tensor *cols = lj_reshape(im2col(x, &a, oh, ow), LJ_SHAPE(N, C, K, oh * ow));
  return finish(lj_reshape(lj_mean(cols, 1, (const int[]){2}, false), LJ_SHAPE(N, C, oh, ow)));
}

/* ---- softmax and losses ------------------------------------------------------------------- */

/* x - max(x) along dim, the max detached: the shift cannot change the result, so it gets no
 * gradient. Along an empty dim there is no max, nor any element to shift: x itself (the
 * result has no elements, as PyTorch's). */
static lj_tensor *shifted(const char *name, lj_tensor *x, int dim) {
  if (!ljf_arg(name, "x", x) || !require_float(name, "x", x)) return NULL;
  int d;
  if (!ljf_dim(name, x->ndim, dim, &d)) return NULL;
  if (x->ndim > 0 && x->shape[d] == 0) return lj_sub_scalar(x, 0);
  return lj_sub(x, lj_detach(lj_amax(x, 1, &d, true)));
}

lj_tensor *lj_softmax(lj_tensor *x, int dim) {
  lj_scope_begin();
  lj_tensor *e = lj_exp(shifted("lj_softmax", widened(x), dim));
  int d = dim < 0 ? dim + (x && x->ndim ? x->ndim : 1) : dim;
  /* one division per row, like PyTorch */
  return finish(narrowed(lj_mul(e, lj_reciprocal(lj_sum(e, 1, &d, true))), x));
}

lj_tensor *lj_log_softmax(lj_tensor *x, int dim) {
  lj_scope_begin();
  lj_tensor *s = shifted("lj_log_softmax", widened(x), dim);
  int d = dim < 0 ? dim + (x && x->ndim ? x->ndim : 1) : dim;
  return finish(narrowed(lj_sub(s, lj_log(lj_sum(lj_exp(s), 1, &d, true))), x));
}

static lj_tensor *reduce_loss(const char *name, lj_tensor *per_item, lj_reduction r) {
  switch (r) {
  case LJ_REDUCE_MEAN: return lj_mean(per_item, 0, NULL, false);
  case LJ_REDUCE_SUM: return lj_sum(per_item, 0, NULL, false);
  case LJ_REDUCE_NONE: return per_item;
  }
  ljb_error(LJ_ERR_ARG, "%s: reduction %d is not an lj_reduction", name, (int)r);
  return NULL;
}

/* The class dim of logp/logits: 1 for [N, C, ...], 0 for [C]; checks target's shape. */
static bool class_dim(const char *name, const lj_tensor *x, const lj_tensor *target, int *cd) {
  if (target->dtype != LJ_I64) {
    ljb_error(LJ_ERR_DTYPE, "%s: target must hold class indices as i64, not %s", name, lj_dtype_name(target->dtype));
    return false;
  }
  *cd = x->ndim == 1 ? 0 : 1;
  bool ok = x->ndim >= 1 && target->ndim == x->ndim - 1;
  for (int i = 0, j = 0; ok && i < x->ndim; i++)
    if (i != *cd) ok = target->shape[j++] == x->shape[i];
  if (!ok) {
    char xs[LJB_SHAPE_STR_MAX], ts[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: target %s does not match input %s (expected the input's shape without dim %d)",
              name, ljb_shape_str(ts, target->ndim, target->shape), ljb_shape_str(xs, x->ndim, x->shape), *cd);
  }
  return ok;
}

lj_tensor *lj_nll_loss(lj_tensor *logp, lj_tensor *target, lj_reduction r) {
  static const char *name = "lj_nll_loss";
  if (!ljf_arg(name, "logp", logp) || !ljf_arg(name, "target", target)) return NULL;
  if (!ljf_same_device(name, logp, target) || !require_float(name, "logp", logp)) return NULL;
  int cd;
  if (!class_dim(name, logp, target, &cd)) return NULL;
  lj_scope_begin();
  lj_tensor *picked = lj_gather(logp, cd, lj_unsqueeze(target, cd));
  return finish(reduce_loss(name, lj_neg(lj_squeeze(picked, 1, &cd)), r));
}

lj_tensor *lj_cross_entropy(lj_tensor *logits, lj_tensor *target, lj_reduction r) {
  static const char *name = "lj_cross_entropy";
  if (!ljf_arg(name, "logits", logits) || !ljf_arg(name, "target", target)) return NULL;
  int cd;
  if (!require_float(name, "logits", logits) || !class_dim(name, logits, target, &cd)) return NULL;
  lj_scope_begin();
  return finish(lj_nll_loss(lj_log_softmax(logits, cd), target, r));
}

lj_tensor *lj_mse_loss(lj_tensor *a, lj_tensor *b, lj_reduction r) {
  static const char *name = "lj_mse_loss";
  if (!ljf_arg(name, "a", a) || !ljf_arg(name, "b", b)) return NULL;
  if (!require_float(name, "a", a) || !require_float(name, "b", b)) return NULL;
  lj_scope_begin();
  lj_tensor *diff = lj_sub(a, b);
  return finish(reduce_loss(name, lj_mul(diff, diff), r));
}

lj_tensor *lj_linear(lj_tensor *x, lj_tensor *w, lj_tensor *b) {
  static const char *name = "lj_linear";
  if (!ljf_arg(name, "x", x) || !ljf_arg(name, "w", w)) return NULL;
  if (!require_ndim(name, "w", w, 2)) return NULL;
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
    char xs[LJB_SHAPE_STR_MAX], ws[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: x %s has %lld features, weight %s expects %lld", name,
              ljb_shape_str(xs, x->ndim, x->shape), (long long)(x->ndim ? x->shape[x->ndim - 1] : 0),
              ljb_shape_str(ws, w->ndim, w->shape), (long long)w->shape[1]);
    return NULL;
  }
  lj_scope_begin();
  lj_tensor *y = lj_matmul(x, lj_transpose(w, 0, 1));
  return finish(b ? lj_add(y, b) : y);
}

lj_tensor *lj_dropout(lj_tensor *x, double p, bool train) {
  static const char *name = "lj_dropout";
  if (!ljf_arg(name, "x", x) || !require_float(name, "x", x)) return NULL;
  if (!(p >= 0 && p <= 1)) {
    ljb_error(LJ_ERR_ARG, "%s: p is %g, must be in [0, 1]", name, p);
    return NULL;
  }
  if (!train || p == 0) return ljf_tensor_from_node(x->dev, ljf_node(x));
  lj_scope_begin();
  if (p == 1) return finish(lj_mul_scalar(x, 0));
  lj_tensor *keep = lj_cast(lj_ge_scalar(lj_rand(x->dev, x->dtype, x->ndim, x->shape), p), x->dtype);
  return finish(lj_mul_scalar(lj_mul(x, keep), 1.0 / (1.0 - p)));
}

/* ---- indexing --------------------------------------------------------------------------- */

/* gather / scatter_add: index has x's rank and fits x in every dim but d; src (if given)
 * has index's shape. */
static bool index_fits(const char *name, const lj_tensor *x, const lj_tensor *index, const lj_tensor *src, int d) {
  bool ok = index->ndim == x->ndim && x->ndim > 0 && (!src || src->ndim == index->ndim);
  for (int i = 0; ok && i < x->ndim; i++)
    ok = (i == d || index->shape[i] <= x->shape[i]) && (!src || src->shape[i] == index->shape[i]);
  if (ok) return true;
  char xs[LJB_SHAPE_STR_MAX], is[LJB_SHAPE_STR_MAX], ss[LJB_SHAPE_STR_MAX] = "";
  if (src) ljb_shape_str(ss, src->ndim, src->shape);
  ljb_error(LJ_ERR_SHAPE, "%s: index %s%s%s does not fit x %s off dim %d%s", name,
            ljb_shape_str(is, index->ndim, index->shape), src ? " with src " : "", ss,
            ljb_shape_str(xs, x->ndim, x->shape), d, src ? " (src must have index's shape)" : "");
  return false;
}

lj_tensor *lj_gather(lj_tensor *x, int dim, lj_tensor *index) {
  static const char *name = "lj_gather";
  if (!ljf_arg(name, "x", x) || !ljf_arg(name, "index", index)) return NULL;
  if (!ljf_same_device(name, x, index)) return NULL;
  int d;
  if (!ljf_dim(name, x->ndim, dim, &d)) return NULL;
  if (index->dtype != LJ_I64) {
    ljb_error(LJ_ERR_DTYPE, "%s: index must be i64, not %s", name, lj_dtype_name(index->dtype));
    return NULL;
  }
  if (!index_fits(name, x, index, NULL, d)) return NULL;
  ljg_attr a = {0};
  a.a[0] = d;
  ljg_node *in[2] = {ljf_node(x), ljf_node(index)};
  return wrap(x->dev, LJG_OP_GATHER, x->dtype, index->ndim, index->shape, 2, in, &a);
}

lj_tensor *lj_scatter_add(lj_tensor *x, int dim, lj_tensor *index, lj_tensor *src) {
  static const char *name = "lj_scatter_add";
  if (!ljf_arg(name, "x", x) || !ljf_arg(name, "index", index) || !ljf_arg(name, "src", src)) return NULL;
  if (!ljf_same_device(name, x, index) || !ljf_same_device(name, x, src) || !same_dtype(name, x, src)) return NULL;
  int d;
  if (!ljf_dim(name, x->ndim, dim, &d)) return NULL;
  if (index->dtype != LJ_I64 || x->dtype == LJ_BOOL) {
    ljb_error(LJ_ERR_DTYPE, "%s: index must be i64 and x numeric (got %s and %s)", name,
              lj_dtype_name(index->dtype), lj_dtype_name(x->dtype));
    return NULL;
  }
  if (!index_fits(name, x, index, src, d)) return NULL;
  ljg_attr a = {0};
  a.a[0] = d;
  ljg_node *in[3] = {ljf_node(x), ljf_node(index), ljf_node(src)};
  return wrap(x->dev, LJG_OP_SCATTER_ADD, x->dtype, x->ndim, x->shape, 3, in, &a);
}

lj_tensor *lj_index_select(lj_tensor *x, int dim, lj_tensor *index) {
  static const char *name = "lj_index_select";
  if (!ljf_arg(name, "x", x) || !ljf_arg(name, "index", index)) return NULL;
  int d;
  if (!ljf_dim(name, x->ndim, dim, &d)) return NULL;
  if (index->ndim != 1) {
    ljb_error(LJ_ERR_SHAPE, "%s: index must be 1-D, it has %d dims", name, index->ndim);
    return NULL;
  }
  int64_t line[LJ_MAX_DIMS], full[LJ_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) {
    line[i] = i == d ? index->shape[0] : 1;
    full[i] = i == d ? index->shape[0] : x->shape[i];
  }
  lj_scope_begin();
  return finish(lj_gather(x, d, lj_expand(lj_reshape(index, x->ndim, line), x->ndim, full)));
}

lj_tensor *lj_embedding(lj_tensor *weight, lj_tensor *index) {
  static const char *name = "lj_embedding";
  if (!ljf_arg(name, "weight", weight) || !ljf_arg(name, "index", index)) return NULL;
  if (!require_ndim(name, "weight", weight, 2)) return NULL;
  if (index->ndim >= LJ_MAX_DIMS) {
    ljb_error(LJ_ERR_ARG, "%s: index has too many dims (%d)", name, index->ndim);
    return NULL;
  }
  int64_t shape[LJ_MAX_DIMS];
  memcpy(shape, index->shape, (size_t)index->ndim * sizeof *shape);
  shape[index->ndim] = weight->shape[1];
  lj_scope_begin();
  lj_tensor *rows = lj_index_select(weight, 0, lj_reshape(index, LJ_SHAPE(-1)));
  return finish(lj_reshape(rows, index->ndim + 1, shape));
}

lj_tensor *lj_one_hot(lj_tensor *index, int64_t num_classes) {
  static const char *name = "lj_one_hot";
  if (!ljf_arg(name, "index", index)) return NULL;
  if (index->dtype != LJ_I64) {
    ljb_error(LJ_ERR_DTYPE, "%s: index must be i64, not %s", name, lj_dtype_name(index->dtype));
    return NULL;
  }
  if (num_classes < 1 || index->ndim >= LJ_MAX_DIMS) {
    ljb_error(LJ_ERR_ARG, "%s: num_classes is %lld, must be at least 1", name, (long long)num_classes);
    return NULL;
  }
  struct lj_device *d = index->dev;
  ljg_attr a = {0};
  a.a[0] = num_classes;
  ljg_node *in = ljf_node(index);
  ljg_node *checked = ljg_node_make(&d->trace, LJG_OP_INDEX_CHECK, LJ_I64, index->ndim, index->shape, 1, &in, &a);
  lj_scope_begin();
  lj_tensor *idx = lj_unsqueeze(ljf_tensor_from_node(d, checked), -1);
  lj_tensor *classes = lj_arange(d, LJ_I64, 0, (double)num_classes, 1);
  return finish(lj_cast(lj_eq(idx, classes), LJ_I64));
}

/* ---- normalization and padding ----------------------------------------------------------------- */

lj_tensor *lj_layer_norm(lj_tensor *x, int ndims, lj_tensor *w, lj_tensor *b, double eps) {
  static const char *name = "lj_layer_norm";
  if (!ljf_arg(name, "x", x) || !require_float(name, "x", x)) return NULL;
  if (ndims < 1 || ndims > x->ndim) {
    ljb_error(LJ_ERR_ARG, "%s: %d normalized dims for a %d-d input", name, ndims, x->ndim);
    return NULL;
  }
  int dims[LJ_MAX_DIMS];
  for (int i = 0; i < ndims; i++) dims[i] = x->ndim - ndims + i;
  const int64_t *tail = x->shape + x->ndim - ndims;
  lj_tensor *affine[2] = {w, b};
  for (int k = 0; k < 2; k++)
    if (affine[k] && (affine[k]->ndim != ndims || memcmp(affine[k]->shape, tail, (size_t)ndims * sizeof *tail))) {
      char s[LJB_SHAPE_STR_MAX], t[LJB_SHAPE_STR_MAX];
      ljb_error(LJ_ERR_SHAPE, "%s: %s %s does not match the normalized shape %s", name, k ? "bias" : "weight",
                ljb_shape_str(s, affine[k]->ndim, affine[k]->shape), ljb_shape_str(t, ndims, tail));
      return NULL;
    }
  lj_scope_begin();
  lj_tensor *xf = widened(x);
  lj_tensor *centered = lj_sub(xf, lj_mean(xf, ndims, dims, true));
  lj_tensor *var = lj_mean(lj_mul(centered, centered), ndims, dims, true);
  lj_tensor *y = lj_mul(centered, lj_rsqrt(lj_add_scalar(var, eps)));
  if (w) y = lj_mul(y, widened(w));
  if (b) y = lj_add(y, widened(b));
  return finish(narrowed(y, x));
}

lj_tensor *lj_batch_norm(lj_tensor *x, lj_tensor *running_mean, lj_tensor *running_var, lj_tensor *w,
                         lj_tensor *b, bool training, double momentum, double eps) {
  static const char *name = "lj_batch_norm";
  if (!ljf_arg(name, "x", x) || !require_float(name, "x", x)) return NULL;
  if (x->ndim < 2) {
    ljb_error(LJ_ERR_SHAPE, "%s: x needs at least 2 dims [N, C, ...], it has %d", name, x->ndim);
    return NULL;
  }
  int64_t C = x->shape[1];
  lj_tensor *per_channel[4] = {running_mean, running_var, w, b};
  for (int k = 0; k < 4; k++)
    if (per_channel[k] && (per_channel[k]->ndim != 1 || per_channel[k]->shape[0] != C)) {
      char s[LJB_SHAPE_STR_MAX];
      ljb_error(LJ_ERR_SHAPE, "%s: per-channel argument %d has shape %s, expected [%lld]", name, k,
                ljb_shape_str(s, per_channel[k]->ndim, per_channel[k]->shape), (long long)C);
      return NULL;
    }
  if ((running_mean == NULL) != (running_var == NULL)) {
    ljb_error(LJ_ERR_ARG, "%s: give both running_mean and running_var, or neither", name);
    return NULL;
  }
  int dims[LJ_MAX_DIMS], nd = 0;
  int64_t bshape[LJ_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) {
    if (i != 1) dims[nd++] = i;
    bshape[i] = i == 1 ? C : 1;
  }
  int64_t count = lj_tensor_numel(x) / (C ? C : 1);
  lj_scope_begin();
  lj_tensor *xf = widened(x), *mean, *var;
  if (training || !running_mean) {
    mean = lj_mean(xf, nd, dims, true);
    lj_tensor *c = lj_sub(xf, mean);
    var = lj_mean(lj_mul(c, c), nd, dims, true);
    if (training && running_mean) {
      /* running statistics: the batch's, unbiased variance, no gradient */
      lj_tensor *m = lj_detach(lj_reshape(mean, LJ_SHAPE(C)));
      lj_tensor *v = lj_detach(lj_reshape(lj_mul_scalar(var, count > 1 ? (double)count / (double)(count - 1) : 1), LJ_SHAPE(C)));
      lj_assign(running_mean,
                narrowed(lj_add(lj_mul_scalar(running_mean, 1 - momentum), lj_mul_scalar(m, momentum)), running_mean));
      lj_assign(running_var,
                narrowed(lj_add(lj_mul_scalar(running_var, 1 - momentum), lj_mul_scalar(v, momentum)), running_var));
    }
  } else {
    mean = lj_reshape(running_mean, x->ndim, bshape);
    var = lj_reshape(running_var, x->ndim, bshape);
  }
  lj_tensor *y = lj_mul(lj_sub(xf, mean), lj_rsqrt(lj_add_scalar(var, eps)));
  if (w) y = lj_mul(y, lj_reshape(widened(w), x->ndim, bshape));
  if (b) y = lj_add(y, lj_reshape(widened(b), x->ndim, bshape));
  return finish(narrowed(y, x));
}

lj_tensor *lj_pad(lj_tensor *x, int npads, const int64_t *pads, double value) {
  static const char *name = "lj_pad";
  if (!ljf_arg(name, "x", x)) return NULL;
  if (npads < 0 || npads % 2 || npads / 2 > x->ndim || (npads && !pads)) {
    ljb_error(LJ_ERR_ARG, "%s: %d pad values for a %d-d tensor (need pairs, at most 2 per dim)", name, npads, x->ndim);
    return NULL;
  }
  lj_scope_begin();
  lj_tensor *y = x;
  /* pairs from the last dim backwards, as torch.nn.functional.pad */
  for (int k = 0; k < npads / 2 && y; k++) {
    int dim = x->ndim - 1 - k;
    int64_t lo = pads[2 * k], hi = pads[2 * k + 1], size = y->shape[dim];
    if (size + lo + hi < 0) {
      ljb_error(LJ_ERR_SHAPE, "%s: padding (%lld, %lld) leaves dim %d of size %lld negative", name,
                (long long)lo, (long long)hi, dim, (long long)size);
      lj_scope_end();
      return NULL;
    }
    y = lj_slice(y, dim, lo < 0 ? -lo : 0, hi < 0 ? size + hi : size, 1);
    lj_tensor *parts[3];
    int n = 0;
    int64_t shape[LJ_MAX_DIMS];
    memcpy(shape, y->shape, sizeof shape);
    if (lo > 0) {
      shape[dim] = lo;
      parts[n++] = lj_full(x->dev, x->dtype, y->ndim, shape, value);
    }
    parts[n++] = y;
    if (hi > 0) {
      shape[dim] = hi;
      parts[n++] = lj_full(x->dev, x->dtype, y->ndim, shape, value);
    }
    if (n > 1) y = lj_cat(n, parts, dim);
  }
  return finish(y == x ? ljf_tensor_from_node(x->dev, ljf_node(x)) : y);
}
