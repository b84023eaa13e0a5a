/* workloads.c — the workloads lj-bench times, written as a user would write them with the
 * public API: elementwise chains, softmax, reductions, matmuls, MNISTNet's conv layers
 * forward and backward, MLP and CNN training steps, and a 500-node graph for the cost of a
 * cached sync. Sizes live in each workload's n[]; inputs are uniform random. */
#include "workloads.h"

#include <math.h>
#include <stddef.h>

#define M1 ((int64_t)1 << 20)
#define M16 ((int64_t)1 << 24)

static const int pad1[2] = {1, 1}, pool2[2] = {2, 2};

static lj_tensor *rand_f32(bench_state *s, int ndim, const int64_t *shape) {
  lj_tensor *t = lj_rand(s->d, LJ_F32, ndim, shape);
  return t && lj_sync_tensors(1, &t) == LJ_OK ? t : NULL;
}

/* The same rounded to bf16. */
static lj_tensor *rand_bf16(bench_state *s, int ndim, const int64_t *shape) {
  lj_scope_begin();
  lj_tensor *t = lj_keep(lj_cast(lj_rand(s->d, LJ_F32, ndim, shape), LJ_BF16));
  lj_scope_end();
  return t && lj_sync_tensors(1, &t) == LJ_OK ? t : NULL;
}

/* Class labels in [0, classes) as i64, of the given shape. */
static lj_tensor *rand_labels_of(bench_state *s, int ndim, const int64_t *shape, int64_t classes) {
  lj_scope_begin();
  lj_tensor *u = lj_rand(s->d, LJ_F32, ndim, shape);
  lj_tensor *t = lj_keep(lj_cast(lj_floor(lj_mul_scalar(u, (double)classes - 0.5)), LJ_I64));
  lj_scope_end();
  return t && lj_sync_tensors(1, &t) == LJ_OK ? t : NULL;
}

/* A batch of class labels in [0, classes). */
static lj_tensor *rand_labels(bench_state *s, int64_t batch, int64_t classes) {
  return rand_labels_of(s, LJ_SHAPE(batch), classes);
}

static bool all_set(lj_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (!ts[i]) return false;
  return true;
}

void bench_state_clear(bench_state *s) {
  for (int i = 0; i < BENCH_MAX_TENSORS; i++) {
    lj_tensor_release(s->in[i]);
    lj_tensor_release(s->out[i]);
    lj_tensor_release(s->p[i]);
  }
  lj_optim_free(s->opt);
  lj_device *d = s->d;
  *s = (bench_state){0};
  s->d = d;
}

static void keep(bench_state *s, lj_tensor *t) { s->out[s->nout++] = lj_keep(t); }

/* ---- setups ------------------------------------------------------------------------- */

/* n[1] vectors of n[0] elements. */
static bool setup_vectors(const workload *w, bench_state *s) {
  for (int i = 0; i < w->n[1]; i++) s->in[i] = rand_f32(s, LJ_SHAPE(w->n[0]));
  return all_set(s->in, (int)w->n[1]);
}

/* One [n[0], n[1]] matrix. */
static bool setup_matrix(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1]));
  return s->in[0] != NULL;
}

/* One batch of images [n[0], n[1], n[2], n[2]]. */
static bool setup_images(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1], w->n[2], w->n[2]));
  return s->in[0] != NULL;
}

/* The operands of an [M, K] x [K, N] product with n = {M, N, K, trans}: A stored as [M, K],
 * or as [K, M] when trans has GEMM_TA; B as [K, N], or as [N, K] with GEMM_TB. */
static bool setup_matmul(const workload *w, bench_state *s) {
  int64_t m = w->n[0], n = w->n[1], k = w->n[2];
  s->in[0] = w->n[3] & GEMM_TA ? rand_f32(s, LJ_SHAPE(k, m)) : rand_f32(s, LJ_SHAPE(m, k));
  s->in[1] = w->n[3] & GEMM_TB ? rand_f32(s, LJ_SHAPE(n, k)) : rand_f32(s, LJ_SHAPE(k, n));
  return all_set(s->in, 2);
}

/* The same in bf16 (both operands as stored, n[3] 0). */
static bool setup_bf16_matmul(const workload *w, bench_state *s) {
  s->in[0] = rand_bf16(s, LJ_SHAPE(w->n[0], w->n[2]));
  s->in[1] = rand_bf16(s, LJ_SHAPE(w->n[2], w->n[1]));
  return all_set(s->in, 2);
}

/* x [B, K], weight [N, K], bias [N] with n = {B, N, K}. */
static bool setup_linear(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[2]));
  s->in[1] = rand_f32(s, LJ_SHAPE(w->n[1], w->n[2]));
  s->in[2] = rand_f32(s, LJ_SHAPE(w->n[1]));
  return all_set(s->in, 3);
}

/* The same in bf16. */
static bool setup_bf16_linear(const workload *w, bench_state *s) {
  s->in[0] = rand_bf16(s, LJ_SHAPE(w->n[0], w->n[2]));
  s->in[1] = rand_bf16(s, LJ_SHAPE(w->n[1], w->n[2]));
  s->in[2] = rand_bf16(s, LJ_SHAPE(w->n[1]));
  return all_set(s->in, 3);
}

/* A bf16 3x3 conv layer for inference with n = {B, Cin, Cout, H}: x [B, Cin, H, H], weight
 * [Cout, Cin, 3, 3] and bias [Cout], none needing gradients. */
static bool setup_bf16_conv(const workload *w, bench_state *s) {
  int64_t b = w->n[0], cin = w->n[1], cout = w->n[2], h = w->n[3];
  s->in[0] = rand_bf16(s, LJ_SHAPE(b, cin, h, h));
  s->in[1] = rand_bf16(s, LJ_SHAPE(cout, cin, 3, 3));
  s->in[2] = rand_bf16(s, LJ_SHAPE(cout));
  return all_set(s->in, 3);
}

/* A side × side conv layer with n = {B, Cin, Cout, H} in `groups` groups: x [B, Cin, H, H]
 * (needing its gradient with x_grad), weight and bias as parameters (PyTorch's init), and the
 * gradient flowing into its output, of side gh. */
static bool conv_setup(const workload *w, bench_state *s, int64_t gh, bool x_grad, int side, int groups) {
  int64_t b = w->n[0], cin = w->n[1], cout = w->n[2], h = w->n[3];
  s->in[0] = rand_f32(s, LJ_SHAPE(b, cin, h, h));
  s->in[1] = rand_f32(s, LJ_SHAPE(b, cout, gh, gh));
  s->np = 2;
  if (lj_nn_conv2d_init(s->d, LJ_F32, cin, cout, (const int[]){side, side}, groups, true, &s->p[0], &s->p[1]) !=
      LJ_OK)
    return false;
  if (x_grad && lj_tensor_set_requires_grad(s->in[0], true) != LJ_OK) return false;
  return all_set(s->in, 2);
}

/* MNISTNet's layers, max-pooled: the gradient into the pooled output; the first layer's
 * input is the data, the second's needs its gradient. */
static bool setup_conv(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3] / 2, w->n[1] > 1, 3, 1); }

/* A network's first layer without pooling (a CIFAR network's): the gradient into the whole
 * output, none for the input, the data. */
static bool setup_conv_relu(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3], false, 3, 1); }

/* A deep layer of a network, without pooling: the gradient into the whole output, and the
 * input's too. */
static bool setup_conv_deep(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3], true, 3, 1); }

/* The same with a 5x5 window (an Inception branch's, LeNet's): for inference (no gradients),
 * and as a deep layer. */
static bool setup_conv5(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3], false, 5, 1); }
static bool setup_conv5_deep(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3], true, 5, 1); }

/* ResNet's stem, 7x7, for inference: the data, its 3 channels. */
static bool setup_stem(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3] / 2, false, 7, 1); }

/* A 1x1 layer (a bottleneck's: ResNet-50's, MobileNet's pointwise) for inference. */
static bool setup_conv1x1(const workload *w, bench_state *s) { return conv_setup(w, s, w->n[3], false, 1, 1); }

/* A deep depthwise 3x3 layer (MobileNet's: a group a channel), the input's gradient too. */
static bool setup_conv_dw_deep(const workload *w, bench_state *s) {
  return conv_setup(w, s, w->n[3], true, 3, (int)w->n[1]);
}

/* A deep grouped 3x3 layer (ResNeXt's: groups of 4 channels), the input's gradient too. */
static bool setup_conv_grouped_deep(const workload *w, bench_state *s) {
  return conv_setup(w, s, w->n[3], true, 3, (int)(w->n[1] / 4));
}

static bool setup_sgd(bench_state *s) {
  s->opt = lj_optim_sgd(s->np, s->p, (lj_sgd_options){.lr = 0.01, .momentum = 0.5});
  return s->opt != NULL;
}

/* ResNet-18's basic blocks (torchvision's resnet18) after its stem: each block's output
 * channels and stride; a block of stride 2 takes its shortcut through a 1x1 projection. */
static const struct {
  int64_t c;
  int stride;
} resnet18_blocks[8] = {{64, 1}, {64, 1}, {128, 2}, {128, 1}, {256, 2}, {256, 1}, {512, 2}, {512, 1}};

/* A convolution without bias (PyTorch's init) and its batch norm: weight, norm weight and bias
 * (ones, zeros) in p[], the running mean and variance (zeros, ones) in in[] after *nin. */
static bool add_conv_bn(bench_state *s, int *nin, int64_t cin, int64_t cout, int k) {
  lj_tensor *unused = NULL;
  if (lj_nn_conv2d_init(s->d, LJ_F32, cin, cout, (const int[]){k, k}, 1, false, &s->p[s->np], &unused) != LJ_OK)
    return false;
  s->p[s->np + 1] = lj_ones(s->d, LJ_F32, LJ_SHAPE(cout));
  s->p[s->np + 2] = lj_zeros(s->d, LJ_F32, LJ_SHAPE(cout));
  s->in[*nin] = lj_zeros(s->d, LJ_F32, LJ_SHAPE(cout));
  s->in[*nin + 1] = lj_ones(s->d, LJ_F32, LJ_SHAPE(cout));
  s->np += 3;
  *nin += 2;
  return all_set(s->p + s->np - 2, 2) && all_set(s->in + *nin - 2, 2) &&
         lj_tensor_set_requires_grad(s->p[s->np - 2], true) == LJ_OK &&
         lj_tensor_set_requires_grad(s->p[s->np - 1], true) == LJ_OK;
}

/* ResNet-18 with SGD, n = {B, H}: images [B, 3, H, H], labels of 1000 classes, the stem's
 * and the blocks' convolutions and batch norms in the order resnet18_step walks them, and
 * the classifier. */
static bool setup_resnet18(const workload *w, bench_state *s) {
  int nin = 2;
  if (!add_conv_bn(s, &nin, 3, 64, 7)) return false;
  int64_t cin = 64;
  for (int i = 0; i < 8; i++) {
    int64_t c = resnet18_blocks[i].c;
    if (!add_conv_bn(s, &nin, cin, c, 3) || !add_conv_bn(s, &nin, c, c, 3) ||
        (resnet18_blocks[i].stride > 1 && !add_conv_bn(s, &nin, cin, c, 1)))
      return false;
    cin = c;
  }
  if (lj_nn_linear_init(s->d, LJ_F32, 512, 1000, true, &s->p[s->np], &s->p[s->np + 1]) != LJ_OK) return false;
  s->np += 2;
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], 3, w->n[1], w->n[1]));
  s->in[1] = rand_labels(s, w->n[0], 1000);
  return all_set(s->in, nin) && lj_sync_tensors(nin, s->in) == LJ_OK && lj_sync_tensors(s->np, s->p) == LJ_OK &&
         setup_sgd(s);
}

/* Q, K and V, each [n[0], n[1], n[2]] (batch × heads, tokens, head size). */
static bool setup_attention(const workload *w, bench_state *s) {
  for (int i = 0; i < 3; i++) s->in[i] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1], w->n[2]));
  return all_set(s->in, 3);
}

/* Logits [n[0], n[1]] requiring grad and a label for each row in [0, n[1]). */
static bool setup_logits(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1]));
  s->in[1] = rand_labels(s, w->n[0], w->n[1]);
  return all_set(s->in, 2) && lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* A segmentation's logits [n[0], n[1], n[2], n[2]] requiring grad, and a class of the n[1]
 * for each of their positions. */
static bool setup_pixel_logits(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1], w->n[2], w->n[2]));
  s->in[1] = rand_labels_of(s, LJ_SHAPE(w->n[0], w->n[2], w->n[2]), w->n[1]);
  return all_set(s->in, 2) && lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* A normalization's inputs: x of shape (ndim dims) requiring grad, the gradient flowing into
 * its output, of x's shape, and as parameters its weight and bias, of pshape (pdim dims),
 * requiring grad. */
static bool norm_setup(bench_state *s, int ndim, const int64_t *shape, int pdim, const int64_t *pshape) {
  s->in[0] = rand_f32(s, ndim, shape);
  s->in[1] = rand_f32(s, ndim, shape);
  s->np = 2;
  for (int i = 0; i < 2; i++) s->p[i] = rand_f32(s, pdim, pshape);
  if (!all_set(s->in, 2) || !all_set(s->p, 2)) return false;
  for (int i = 0; i < 2; i++)
    if (lj_tensor_set_requires_grad(s->p[i], true) != LJ_OK) return false;
  return lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* layer_norm with n = {rows, cols}: x [rows, cols], the weight and bias [cols]. */
static bool setup_layer_norm(const workload *w, bench_state *s) {
  return norm_setup(s, LJ_SHAPE(w->n[0], w->n[1]), LJ_SHAPE(w->n[1]));
}

/* A row normalization's forward with n = {rows, cols}: x [rows, cols], a weight and a bias
 * [cols]. */
static bool setup_rows_affine(const workload *w, bench_state *s) {
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], w->n[1]));
  s->in[1] = rand_f32(s, LJ_SHAPE(w->n[1]));
  s->in[2] = rand_f32(s, LJ_SHAPE(w->n[1]));
  return all_set(s->in, 3);
}

/* A group norm with n = {B, C, H, G}: x [B, C, H, H], the per-channel weight and bias
 * [1, C, 1, 1]. */
static bool setup_group_norm(const workload *w, bench_state *s) {
  return norm_setup(s, LJ_SHAPE(w->n[0], w->n[1], w->n[2], w->n[2]), LJ_SHAPE(1, w->n[1], 1, 1));
}

/* A ResNet basic block with n = {B, C, H}: x [B, C, H, H] requiring grad, the gradient
 * flowing into the block's output, and as parameters two 3x3 convolutions' weights (no bias)
 * and two batch norms' weights and biases (ones and zeros). */
static bool setup_resblock(const workload *w, bench_state *s) {
  int64_t b = w->n[0], c = w->n[1], h = w->n[2];
  s->in[0] = rand_f32(s, LJ_SHAPE(b, c, h, h));
  s->in[1] = rand_f32(s, LJ_SHAPE(b, c, h, h));
  s->np = 6;
  for (int i = 0; i < 2; i++) {
    lj_tensor *unused = NULL;
    if (lj_nn_conv2d_init(s->d, LJ_F32, c, c, (const int[]){3, 3}, 1, false, &s->p[i], &unused) != LJ_OK) return false;
    s->p[2 + 2 * i] = lj_ones(s->d, LJ_F32, LJ_SHAPE(c));
    s->p[3 + 2 * i] = lj_zeros(s->d, LJ_F32, LJ_SHAPE(c));
  }
  if (!all_set(s->in, 2) || !all_set(s->p, 6) || lj_sync_tensors(6, s->p) != LJ_OK) return false;
  for (int i = 0; i < 6; i++)
    if (lj_tensor_set_requires_grad(s->p[i], true) != LJ_OK) return false;
  return lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* A ResNeXt bottleneck block (torchvision's resnext50_32x4d's first stage) with n = {B, C, W,
 * H}: x [B, C, H, H] requiring grad, the gradient flowing into the block's output, and as
 * parameters the 1x1 reduction to W channels, the 3x3 convolution in groups of 4 and the 1x1
 * expansion back to C (without biases, PyTorch's initializations) and their batch norms'
 * weights and biases (ones and zeros). */
static bool setup_resnext_block(const workload *w, bench_state *s) {
  int64_t b = w->n[0], c = w->n[1], width = w->n[2], h = w->n[3];
  const int64_t ins[3] = {c, width, width}, outs[3] = {width, width, c};
  const int sides[3] = {1, 3, 1}, groups[3] = {1, (int)(width / 4), 1};
  s->in[0] = rand_f32(s, LJ_SHAPE(b, c, h, h));
  s->in[1] = rand_f32(s, LJ_SHAPE(b, c, h, h));
  s->np = 9;
  for (int i = 0; i < 3; i++) {
    lj_tensor *unused = NULL;
    if (lj_nn_conv2d_init(s->d, LJ_F32, ins[i], outs[i], (const int[]){sides[i], sides[i]}, groups[i], false,
                          &s->p[i], &unused) != LJ_OK)
      return false;
    s->p[3 + 2 * i] = lj_ones(s->d, LJ_F32, LJ_SHAPE(outs[i]));
    s->p[4 + 2 * i] = lj_zeros(s->d, LJ_F32, LJ_SHAPE(outs[i]));
  }
  if (!all_set(s->in, 2) || !all_set(s->p, 9) || lj_sync_tensors(9, s->p) != LJ_OK) return false;
  for (int i = 0; i < 9; i++)
    if (lj_tensor_set_requires_grad(s->p[i], true) != LJ_OK) return false;
  return lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* A MobileNetV2 inverted residual block for inference with n = {B, C, E, H}: x [B, C, H, H],
 * the 1x1 expansion to E channels, the depthwise 3x3 and the 1x1 projection back to C, each
 * with its bias (a batch norm folded in), PyTorch's initializations. */
static bool setup_mbv2_block(const workload *w, bench_state *s) {
  int64_t c = w->n[1], e = w->n[2];
  static const int sides[3] = {1, 3, 1};
  const int64_t ins[3] = {c, e, e}, outs[3] = {e, e, c}, groups[3] = {1, e, 1};
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], c, w->n[3], w->n[3]));
  s->np = 6;
  for (int i = 0; i < 3; i++)
    if (lj_nn_conv2d_init(s->d, LJ_F32, ins[i], outs[i], (const int[]){sides[i], sides[i]}, (int)groups[i], true,
                          &s->p[2 * i], &s->p[2 * i + 1]) != LJ_OK)
      return false;
  return all_set(s->in, 1) && all_set(s->p, 6);
}

/* A GPT-2 block with n = {B, T, C, H}: x [B, T, C] requiring grad, the gradient flowing into
 * the block's output, the causal mask [T, T] (true where a token may attend), and as
 * parameters (PyTorch's initializations) the two layer norms' weights and biases (ones and
 * zeros) and the four linear layers' (q, k and v in one [3C, C], the projection [C, C], the
 * MLP's [4C, C] and [C, 4C]). */
static bool setup_transformer(const workload *w, bench_state *s) {
  int64_t t = w->n[1], c = w->n[2];
  static const int64_t outs[4] = {3, 1, 4, 1}, ins[4] = {1, 1, 1, 4};
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], t, c));
  s->in[1] = rand_f32(s, LJ_SHAPE(w->n[0], t, c));
  lj_scope_begin();
  lj_tensor *pos = lj_arange(s->d, LJ_I64, 0, (double)t, 1);
  s->in[2] = lj_keep(lj_ge(lj_reshape(pos, LJ_SHAPE(t, 1)), lj_reshape(pos, LJ_SHAPE(1, t))));
  lj_scope_end();
  s->np = 12;
  for (int i = 0; i < 2; i++) {
    s->p[2 * i] = lj_ones(s->d, LJ_F32, LJ_SHAPE(c));
    s->p[2 * i + 1] = lj_zeros(s->d, LJ_F32, LJ_SHAPE(c));
  }
  for (int l = 0; l < 4; l++)
    if (lj_nn_linear_init(s->d, LJ_F32, ins[l] * c, outs[l] * c, true, &s->p[4 + 2 * l], &s->p[5 + 2 * l]) != LJ_OK)
      return false;
  if (!all_set(s->in, 3) || !all_set(s->p, 12) || lj_sync_tensors(3, s->in) != LJ_OK || lj_sync_tensors(12, s->p) != LJ_OK)
    return false;
  for (int i = 0; i < 4; i++)
    if (lj_tensor_set_requires_grad(s->p[i], true) != LJ_OK) return false;
  return lj_tensor_set_requires_grad(s->in[0], true) == LJ_OK;
}

/* An LSTM classifier with SGD, n = {B, T, I, H}: inputs [T, B, I], labels of 10 classes, the
 * input and recurrent projections of the gates (each with its bias, as torch.nn.LSTM's) and
 * the classifier. */
static bool setup_lstm(const workload *w, bench_state *s) {
  const int64_t *n = w->n;
  s->np = 6;
  if (lj_nn_linear_init(s->d, LJ_F32, n[2], 4 * n[3], true, &s->p[0], &s->p[1]) != LJ_OK ||
      lj_nn_linear_init(s->d, LJ_F32, n[3], 4 * n[3], true, &s->p[2], &s->p[3]) != LJ_OK ||
      lj_nn_linear_init(s->d, LJ_F32, n[3], 10, true, &s->p[4], &s->p[5]) != LJ_OK)
    return false;
  s->in[0] = rand_f32(s, LJ_SHAPE(n[1], n[0], n[2]));
  s->in[1] = rand_labels(s, n[0], 10);
  return all_set(s->in, 2) && setup_sgd(s);
}

/* The MLP 784-512-512-10 with SGD; n[0] is the batch. */
static bool setup_mlp(const workload *w, bench_state *s) {
  static const int64_t sizes[] = {784, 512, 512, 10};
  s->np = 6;
  for (int l = 0; l < 3; l++)
    if (lj_nn_linear_init(s->d, LJ_F32, sizes[l], sizes[l + 1], true, &s->p[2 * l], &s->p[2 * l + 1]) != LJ_OK)
      return false;
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], 784));
  s->in[1] = rand_labels(s, w->n[0], 10);
  return all_set(s->in, 2) && setup_sgd(s);
}

/* MNISTNet (examples/fashion_mnist.c) with SGD; n[0] is the batch. */
static bool setup_cnn(const workload *w, bench_state *s) {
  static const int k3[2] = {3, 3};
  s->np = 8;
  if (lj_nn_conv2d_init(s->d, LJ_F32, 1, 32, k3, 1, true, &s->p[0], &s->p[1]) != LJ_OK ||
      lj_nn_conv2d_init(s->d, LJ_F32, 32, 64, k3, 1, true, &s->p[2], &s->p[3]) != LJ_OK ||
      lj_nn_linear_init(s->d, LJ_F32, 3136, 128, true, &s->p[4], &s->p[5]) != LJ_OK ||
      lj_nn_linear_init(s->d, LJ_F32, 128, 10, true, &s->p[6], &s->p[7]) != LJ_OK)
    return false;
  s->in[0] = rand_f32(s, LJ_SHAPE(w->n[0], 1, 28, 28));
  s->in[1] = rand_labels(s, w->n[0], 10);
  return all_set(s->in, 2) && setup_sgd(s);
}

/* ---- steps -------------------------------------------------------------------------- */

static void relu_chain(const workload *w, bench_state *s) {
  keep(s, lj_mul_scalar(lj_relu(lj_add(lj_mul(s->in[0], s->in[1]), s->in[2])), 0.5));
}

static void gelu_tanh(const workload *w, bench_state *s) { keep(s, lj_gelu(s->in[0], true)); }
static void sigmoid(const workload *w, bench_state *s) { keep(s, lj_sigmoid(s->in[0])); }
static void softmax(const workload *w, bench_state *s) { keep(s, lj_softmax(s->in[0], 1)); }
static void log_softmax(const workload *w, bench_state *s) { keep(s, lj_log_softmax(s->in[0], 1)); }
static void row_sum(const workload *w, bench_state *s) { keep(s, lj_sum(s->in[0], 1, (const int[]){1}, false)); }
/* 2·xᵀ into a contiguous [cols, rows]: an elementwise op whose operand is read transposed. */
static void transpose(const workload *w, bench_state *s) { keep(s, lj_mul_scalar(lj_transpose(s->in[0], 0, 1), 2.0)); }
/* A stored transposed is read through a transpose view, as lj_linear reads its weight. */
static void matmul(const workload *w, bench_state *s) {
  lj_tensor *a = w->n[3] & GEMM_TA ? lj_transpose(s->in[0], 0, 1) : s->in[0];
  lj_tensor *b = w->n[3] & GEMM_TB ? lj_transpose(s->in[1], 0, 1) : s->in[1];
  keep(s, lj_matmul(a, b));
}

static void linear_relu(const workload *w, bench_state *s) {
  keep(s, lj_relu(lj_linear(s->in[0], s->in[1], s->in[2])));
}

/* A 501-node graph on 16 elements: what a cached sync costs. 125 ops with a scalar operand,
 * each four nodes (the scalar, its reshape and expand to x's shape, the op), and x. */
static void graph500(const workload *w, bench_state *s) {
  lj_tensor *x = s->in[0];
  for (int i = 0; i < 125; i++) x = i % 2 ? lj_mul_scalar(x, 0.999) : lj_add_scalar(x, 0.5 + i);
  keep(s, x);
}

/* softmax(Q·Kᵀ/√d)·V, as a transformer's attention computes it. */
static void attention(const workload *w, bench_state *s) {
  lj_tensor *scores = lj_mul_scalar(lj_matmul(s->in[0], lj_transpose(s->in[1], 1, 2)), 1 / sqrt((double)w->n[2]));
  keep(s, lj_matmul(lj_softmax(scores, 2), s->in[2]));
}

/* A language model's loss over its vocabulary and the logits' gradient. */
static void cross_entropy(const workload *w, bench_state *s) {
  lj_tensor_zero_grad(s->in[0]);
  lj_tensor *loss = lj_cross_entropy(s->in[0], s->in[1], LJ_REDUCE_MEAN);
  lj_backward(loss);
  keep(s, loss);
}

/* A transformer's layer norm forward and backward for an upstream gradient g: the input's,
 * the weight's and the bias's gradients. */
static void layer_norm(const workload *w, bench_state *s) {
  lj_tensor_zero_grad(s->in[0]);
  lj_tensor_zero_grad(s->p[0]);
  lj_tensor_zero_grad(s->p[1]);
  lj_backward(lj_sum(lj_mul(lj_layer_norm(s->in[0], 1, s->p[0], s->p[1], 1e-5), s->in[1]), 0, NULL, false));
}

/* A layer norm's forward, as inference runs it: no gradients. */
static void layer_norm_fwd(const workload *w, bench_state *s) {
  keep(s, lj_layer_norm(s->in[0], 1, s->in[1], s->in[2], 1e-5));
}

/* An RMS norm's forward (LLaMA's): x · rsqrt(mean(x²) + 1e-6) · w along the rows. */
static void rms_norm(const workload *w, bench_state *s) {
  static const int last[1] = {1};
  lj_tensor *x = s->in[0];
  lj_tensor *ms = lj_mean(lj_mul(x, x), 1, last, true);
  keep(s, lj_mul(lj_mul(x, lj_rsqrt(lj_add_scalar(ms, 1e-6))), s->in[1]));
}

/* A group norm (torch.nn.functional.group_norm: a layer norm over each group's channels and
 * positions, then a per-channel affine) forward and backward for an upstream gradient g: the
 * input's, the weight's and the bias's gradients. */
static void group_norm(const workload *w, bench_state *s) {
  const int64_t *n = w->n;
  lj_tensor_zero_grad(s->in[0]);
  lj_tensor_zero_grad(s->p[0]);
  lj_tensor_zero_grad(s->p[1]);
  lj_tensor *y = lj_layer_norm(lj_reshape(s->in[0], LJ_SHAPE(n[0], n[3], n[1] / n[3] * n[2] * n[2])), 1, NULL, NULL, 1e-5);
  y = lj_add(lj_mul(lj_reshape(y, LJ_SHAPE(n[0], n[1], n[2], n[2])), s->p[0]), s->p[1]);
  lj_backward(lj_sum(lj_mul(y, s->in[1]), 0, NULL, false));
}

/* relu(bn(conv(relu(bn(conv(x))))) + x), forward and backward for an upstream gradient g:
 * the input's, the convolutions' and the batch norms' gradients. */
static void resblock(const workload *w, bench_state *s) {
  lj_tensor *const *p = s->p;
  lj_tensor_zero_grad(s->in[0]);
  for (int i = 0; i < s->np; i++) lj_tensor_zero_grad(p[i]);
  lj_tensor *h = lj_conv2d(s->in[0], p[0], NULL, NULL, pad1, NULL, 1);
  h = lj_relu(lj_batch_norm(h, NULL, NULL, p[2], p[3], true, 0.1, 1e-5));
  h = lj_batch_norm(lj_conv2d(h, p[1], NULL, NULL, pad1, NULL, 1), NULL, NULL, p[4], p[5], true, 0.1, 1e-5);
  h = lj_relu(lj_add(h, s->in[0]));
  lj_backward(lj_sum(lj_mul(h, s->in[1]), 0, NULL, false));
}

/* relu(bn(expand(relu(bn(grouped(relu(bn(reduce(x)))))))) + x), forward and backward for an
 * upstream gradient g: the input's, the convolutions' and the batch norms' gradients. */
static void resnext_block(const workload *w, bench_state *s) {
  lj_tensor *const *p = s->p;
  lj_tensor_zero_grad(s->in[0]);
  for (int i = 0; i < s->np; i++) lj_tensor_zero_grad(p[i]);
  lj_tensor *h = s->in[0];
  for (int i = 0; i < 3; i++) {
    h = lj_conv2d(h, p[i], NULL, NULL, i == 1 ? pad1 : NULL, NULL, i == 1 ? (int)(w->n[2] / 4) : 1);
    h = lj_batch_norm(h, NULL, NULL, p[3 + 2 * i], p[4 + 2 * i], true, 0.1, 1e-5);
    h = lj_relu(i < 2 ? h : lj_add(h, s->in[0]));
  }
  lj_backward(lj_sum(lj_mul(h, s->in[1]), 0, NULL, false));
}

/* x + project(relu6(depthwise(relu6(expand(x))))), MobileNetV2's block of stride 1. */
static void mbv2_block(const workload *w, bench_state *s) {
  lj_tensor *const *p = s->p;
  lj_tensor *h = lj_clamp(lj_conv2d(s->in[0], p[0], p[1], NULL, NULL, NULL, 1), 0, 6);
  h = lj_clamp(lj_conv2d(h, p[2], p[3], NULL, pad1, NULL, (int)w->n[2]), 0, 6);
  keep(s, lj_add(s->in[0], lj_conv2d(h, p[4], p[5], NULL, NULL, NULL, 1)));
}

/* x + attention(ln1(x)) then that + mlp(ln2(that)), a GPT-2 block (causal self-attention of
 * H heads, the MLP's gelu in its tanh form), forward and backward for an upstream gradient g:
 * the input's and every parameter's gradients. */
static void transformer(const workload *w, bench_state *s) {
  int64_t b = w->n[0], t = w->n[1], c = w->n[2], h = w->n[3];
  lj_tensor *const *p = s->p;
  lj_tensor_zero_grad(s->in[0]);
  for (int i = 0; i < s->np; i++) lj_tensor_zero_grad(p[i]);
  static const int heads[4] = {0, 2, 1, 3};
  lj_tensor *qkv = lj_linear(lj_layer_norm(s->in[0], 1, p[0], p[1], 1e-5), p[4], p[5]), *hd[3];
  for (int i = 0; i < 3; i++)
    hd[i] = lj_permute(lj_reshape(lj_slice(qkv, 2, i * c, (i + 1) * c, 1), LJ_SHAPE(b, t, h, c / h)), 4, heads);
  lj_tensor *scores = lj_mul_scalar(lj_matmul(hd[0], lj_transpose(hd[1], 2, 3)), 1 / sqrt((double)(c / h)));
  scores = lj_where(s->in[2], scores, lj_full(s->d, LJ_F32, 0, NULL, -INFINITY));
  lj_tensor *att = lj_permute(lj_matmul(lj_softmax(scores, 3), hd[2]), 4, heads);
  lj_tensor *x = lj_add(s->in[0], lj_linear(lj_reshape(att, LJ_SHAPE(b, t, c)), p[6], p[7]));
  lj_tensor *mlp = lj_gelu(lj_linear(lj_layer_norm(x, 1, p[2], p[3], 1e-5), p[8], p[9]), true);
  x = lj_add(x, lj_linear(mlp, p[10], p[11]));
  lj_backward(lj_sum(lj_mul(x, s->in[1]), 0, NULL, false));
}

/* A 3×3 convolution of stride 2 with its bias, a ResNet's downsampling. */
static void conv_stride2(const workload *w, bench_state *s) {
  keep(s, lj_conv2d(s->in[0], s->p[0], s->p[1], pool2, pad1, NULL, 1));
}

/* relu(conv 7×7 of stride 2 + bias), ResNet's stem without its batch norm (folded into the
 * weight and bias for inference). */
static void conv_stem(const workload *w, bench_state *s) {
  keep(s, lj_relu(lj_conv2d(s->in[0], s->p[0], s->p[1], pool2, (const int[]){3, 3}, NULL, 1)));
}

/* A grouped 3×3 convolution for inference with n = {B, C, groups, H}: x [B, C, H, H], weight
 * [C, C / groups, 3, 3] and bias [C] (ResNeXt's: groups of 4 channels; MobileNet's depthwise
 * one: groups of 1), none needing gradients. */
static bool setup_grouped_conv(const workload *w, bench_state *s) {
  int64_t b = w->n[0], c = w->n[1], groups = w->n[2], h = w->n[3];
  s->in[0] = rand_f32(s, LJ_SHAPE(b, c, h, h));
  s->in[1] = rand_f32(s, LJ_SHAPE(c, c / groups, 3, 3));
  s->in[2] = rand_f32(s, LJ_SHAPE(c));
  return all_set(s->in, 3);
}

static void conv_grouped(const workload *w, bench_state *s) {
  keep(s, lj_conv2d(s->in[0], s->in[1], s->in[2], NULL, pad1, NULL, (int)w->n[2]));
}

static void conv_inference(const workload *w, bench_state *s) {
  keep(s, lj_conv2d(s->in[0], s->in[1], s->in[2], NULL, pad1, NULL, 1));
}

static lj_tensor *conv_layer(lj_tensor *x, lj_tensor *w, lj_tensor *b) {
  return lj_relu(lj_max_pool2d(lj_conv2d(x, w, b, NULL, pad1, NULL, 1), pool2, NULL, NULL));
}

static void conv_forward(const workload *w, bench_state *s) { keep(s, conv_layer(s->in[0], s->p[0], s->p[1])); }

/* The layer's backward for an upstream gradient g: d(sum(layer(x) * g)) by weight, bias and,
 * for the second layer, the input. The gradients are the live results the sync computes. */
static void conv_backward(const workload *w, bench_state *s) {
  lj_tensor_zero_grad(s->p[0]);
  lj_tensor_zero_grad(s->p[1]);
  lj_tensor_zero_grad(s->in[0]);
  lj_backward(lj_sum(lj_mul(conv_layer(s->in[0], s->p[0], s->p[1]), s->in[1]), 0, NULL, false));
}

/* relu(conv2d(x)), backward for an upstream gradient g: the weight's and bias's gradients,
 * and the input's when it needs one (a first layer's input is the data). */
static void conv_relu_backward(const workload *w, bench_state *s) {
  int same = (int)lj_tensor_shape(s->p[0])[2] / 2, groups = (int)(w->n[1] / lj_tensor_shape(s->p[0])[1]);
  lj_tensor_zero_grad(s->p[0]);
  lj_tensor_zero_grad(s->p[1]);
  lj_tensor_zero_grad(s->in[0]);
  lj_tensor *y = lj_relu(lj_conv2d(s->in[0], s->p[0], s->p[1], NULL, (const int[]){same, same}, NULL, groups));
  lj_backward(lj_sum(lj_mul(y, s->in[1]), 0, NULL, false));
}

/* The layer's convolution alone, padded to keep its size. */
static void conv_same(const workload *w, bench_state *s) {
  int same = (int)lj_tensor_shape(s->p[0])[2] / 2;
  keep(s, lj_conv2d(s->in[0], s->p[0], s->p[1], NULL, (const int[]){same, same}, NULL, 1));
}

/* nll(log_softmax) on the model's logits, backward, and an SGD step (no barrier). */
static void train(bench_state *s, lj_tensor *logits) {
  lj_tensor *loss = lj_nll_loss(lj_log_softmax(logits, 1), s->in[1], LJ_REDUCE_MEAN);
  lj_backward(loss);
  lj_optimizer_step(s->opt, false);
  keep(s, loss);
}

static void mlp_step(const workload *w, bench_state *s) {
  lj_tensor *const *p = s->p;
  lj_optim_zero_grad(s->opt);
  lj_tensor *h = lj_relu(lj_linear(s->in[0], p[0], p[1]));
  h = lj_relu(lj_linear(h, p[2], p[3]));
  train(s, lj_linear(h, p[4], p[5]));
}

static void cnn_step(const workload *w, bench_state *s) {
  lj_tensor *const *p = s->p;
  lj_optim_zero_grad(s->opt);
  lj_tensor *h = conv_layer(s->in[0], p[0], p[1]);
  h = conv_layer(h, p[2], p[3]);
  h = lj_relu(lj_linear(lj_reshape(h, LJ_SHAPE(-1, 3136)), p[4], p[5]));
  train(s, lj_linear(h, p[6], p[7]));
}

/* torch.nn.LSTM's cell (gates i, f, g, o) unrolled over the T steps from zero states, the
 * classifier on the last hidden state. */
static void lstm_step(const workload *w, bench_state *s) {
  int64_t b = w->n[0], hs = w->n[3];
  lj_tensor *const *p = s->p;
  lj_optim_zero_grad(s->opt);
  lj_tensor *h = lj_zeros(s->d, LJ_F32, LJ_SHAPE(b, hs)), *c = h;
  for (int64_t t = 0; t < w->n[1]; t++) {
    lj_tensor *x = lj_reshape(lj_slice(s->in[0], 0, t, t + 1, 1), LJ_SHAPE(b, w->n[2]));
    lj_tensor *g = lj_add(lj_linear(x, p[0], p[1]), lj_linear(h, p[2], p[3])), *gate[4];
    for (int k = 0; k < 4; k++) gate[k] = lj_slice(g, 1, k * hs, (k + 1) * hs, 1);
    c = lj_add(lj_mul(lj_sigmoid(gate[1]), c), lj_mul(lj_sigmoid(gate[0]), lj_tanh(gate[2])));
    h = lj_mul(lj_sigmoid(gate[3]), lj_tanh(c));
  }
  train(s, lj_linear(h, p[4], p[5]));
}

/* The next convolution of setup_resnet18's order and its batch norm, training (the running
 * statistics updated in place, as PyTorch's BatchNorm2d in train mode). */
typedef struct resnet_walk {
  bench_state *s;
  int p, in;
} resnet_walk;

static lj_tensor *conv_bn(resnet_walk *k, lj_tensor *x, int stride, int pad) {
  lj_tensor *const *p = k->s->p + k->p, *const *stats = k->s->in + k->in;
  k->p += 3;
  k->in += 2;
  x = lj_conv2d(x, p[0], NULL, (const int[]){stride, stride}, (const int[]){pad, pad}, NULL, 1);
  return lj_batch_norm(x, stats[0], stats[1], p[1], p[2], true, 0.1, 1e-5);
}

static void resnet18_step(const workload *w, bench_state *s) {
  static const int k3[2] = {3, 3};
  lj_optim_zero_grad(s->opt);
  resnet_walk k = {s, 0, 2};
  lj_tensor *h = lj_max_pool2d(lj_relu(conv_bn(&k, s->in[0], 2, 3)), k3, pool2, pad1);
  for (int i = 0; i < 8; i++) {
    int stride = resnet18_blocks[i].stride;
    lj_tensor *y = lj_relu(conv_bn(&k, h, stride, 1));
    y = conv_bn(&k, y, 1, 1);
    h = lj_relu(lj_add(y, stride > 1 ? conv_bn(&k, h, stride, 0) : h));
  }
  h = lj_mean(h, 2, (const int[]){2, 3}, false);
  train(s, lj_linear(h, s->p[k.p], s->p[k.p + 1]));
}

/* ---- the table ---------------------------------------------------------------------- */

#define MM(m, n, k, trans) {m, n, k, trans}, setup_matmul, matmul, 0, 2.0 * (m) * (n) * (k)
#define CONV_FLOPS(b, cin, cout, h) (2.0 * (b) * (cout) * (h) * (h) * (cin) * 9)
#define CONV5_FLOPS(b, cin, cout, h) (2.0 * (b) * (cout) * (h) * (h) * (cin) * 25)
#define CONV1X1_FLOPS(b, cin, cout, h) (2.0 * (b) * (cout) * (h) * (h) * (cin))
/* the forward products, the weight gradients and the input gradients but the first layer's
 * (the input needs none), as CNN_FLOPS leaves out conv1's */
#define MLP_FLOPS(b) (6.0 * (b) * (784 * 512 + 512 * 512 + 512 * 10) - 2.0 * (b) * 784 * 512)
/* a transformer block's products, forward (its linear layers' 12·C² multiply-adds a token, and
 * attention's Q·Kᵀ and P·V over every pair of tokens) and backward (both operands' gradients) */
#define TRANSFORMER_FLOPS(b, t, c) (3.0 * (24.0 * (b) * (t) * (c) * (c) + 4.0 * (b) * (t) * (t) * (c)))
/* ResNet-18's multiply-adds an image at 224x224: the stem, stage 1's four 3x3 convolutions,
 * and for stages 2-4 a strided 3x3, three more and the 1x1 projection, then the classifier */
#define RESNET18_MACS                                                                         \
  (3.0 * 64 * 49 * 112 * 112 + 4.0 * 64 * 64 * 9 * 56 * 56 +                                  \
   3 * (0.5 * 9 + 3 * 9 + 0.5) * (128.0 * 128 * 28 * 28) + 512.0 * 1000)
/* forward, the weight gradients and the input gradients but the stem's (the data needs none) */
#define RESNET18_FLOPS(b) (2.0 * (b) * (3 * RESNET18_MACS - 3.0 * 64 * 49 * 112 * 112))
/* an LSTM's gate products forward (input and recurrent), their weight gradients and the
 * hidden state's gradients (the input needs none) */
#define LSTM_FLOPS(b, t, i, h) (2.0 * (b) * (t) * 4 * (h) * (2.0 * (i) + 3.0 * (h)))
#define CNN_FLOPS(b)                                                                                    \
  (3.0 * (CONV_FLOPS(b, 1, 32, 28) + CONV_FLOPS(b, 32, 64, 14) + 2.0 * (b) * (3136 * 128 + 128 * 10)) - \
   CONV_FLOPS(b, 1, 32, 28))

const workload bench_workloads[] = {
    {"relu_chain_1M", "relu(x*w+b)*0.5, f32", {M1, 3}, setup_vectors, relu_chain, 4.0 * M1 * 4, 0},
    {"relu_chain_16M", "relu(x*w+b)*0.5, f32", {M16, 3}, setup_vectors, relu_chain, 4.0 * M16 * 4, 0},
    {"gelu_tanh_1M", "gelu (tanh form), f32", {M1, 1}, setup_vectors, gelu_tanh, 2.0 * M1 * 4, 0},
    {"gelu_tanh_16M", "gelu (tanh form), f32", {M16, 1}, setup_vectors, gelu_tanh, 2.0 * M16 * 4, 0},
    {"sigmoid_1M", "sigmoid, f32", {M1, 1}, setup_vectors, sigmoid, 2.0 * M1 * 4, 0},
    {"sigmoid_16M", "sigmoid, f32", {M16, 1}, setup_vectors, sigmoid, 2.0 * M16 * 4, 0},
    {"softmax_4096x1024", "softmax over rows", {4096, 1024}, setup_matrix, softmax, 2.0 * 4096 * 1024 * 4, 0},
    {"log_softmax_4096x1024", "log_softmax over rows", {4096, 1024}, setup_matrix, log_softmax,
     2.0 * 4096 * 1024 * 4, 0},
    {"softmax_channels_32x64x56x56", "softmax over the channels of [32, 64, 56, 56]", {32, 64, 56}, setup_images,
     softmax, 2.0 * 32 * 64 * 56 * 56 * 4, 0},
    {"row_sum_4096x1024", "sum over rows", {4096, 1024}, setup_matrix, row_sum, 4096.0 * 1024 * 4, 0},
    {"softmax_1048576x16", "softmax over rows of 16 (a row a vector)", {1048576, 16}, setup_matrix, softmax,
     2.0 * 1048576 * 16 * 4, 0},
    {"softmax_1048576x10", "softmax over rows of 10 (a classifier's logits at a large batch)", {1048576, 10},
     setup_matrix, softmax, 2.0 * 1048576 * 10 * 4, 0},
    {"transpose_4096x1024", "2 x^T into a contiguous 1024x4096", {4096, 1024}, setup_matrix, transpose,
     2.0 * 4096 * 1024 * 4, 0},
    {"sgemm_64", "64^3 matmul", MM(64, 64, 64, 0)},
    {"sgemm_256", "256^3 matmul", MM(256, 256, 256, 0)},
    {"sgemm_512", "512^3 matmul", MM(512, 512, 512, 0)},
    {"sgemm_1024", "1024^3 matmul", MM(1024, 1024, 1024, 0)},
    {"sgemm_2048", "2048^3 matmul", MM(2048, 2048, 2048, 0)},
    {"pairwise_4096x3", "x y^T over 3 features, 4096x3 . (4096x3)^T (a point cloud's pairwise products): its output",
     {4096, 4096, 3, GEMM_TB}, setup_matmul, matmul, 4.0 * 4096 * 4096, 0},
    {"sgemm_b32_4096", "x W^T at batch 32, 32x4096 . (4096x4096)^T: a weight from memory",
     MM(32, 4096, 4096, GEMM_TB)},
    {"sgemm_mlp_fwd1", "MLP batch 128: x W1^T, 128x784 . (512x784)^T", MM(128, 512, 784, GEMM_TB)},
    {"sgemm_mlp_fwd2", "MLP batch 128: h W2^T, 128x512 . (512x512)^T", MM(128, 512, 512, GEMM_TB)},
    {"sgemm_mlp_dx2", "MLP batch 128: dY W2, 128x512 . 512x512", MM(128, 512, 512, 0)},
    {"sgemm_mlp_dw1", "MLP batch 128: dY^T x, (128x512)^T . 128x784", MM(512, 784, 128, GEMM_TA)},
    {"sgemm_mlp_dw2", "MLP batch 128: dY^T h, (128x512)^T . 128x512", MM(512, 512, 128, GEMM_TA)},
    {"mlp_layer1_b128", "relu(linear), 128x784 -> 512", {128, 512, 784}, setup_linear, linear_relu, 0,
     2.0 * 128 * 784 * 512},
    {"mlp_layer2_b128", "relu(linear), 128x512 -> 512", {128, 512, 512}, setup_linear, linear_relu, 0,
     2.0 * 128 * 512 * 512},
    {"linear_b1_4096", "relu(linear), 1x4096 -> 4096 (a batch of one): its weight's bytes", {1, 4096, 4096},
     setup_linear, linear_relu, 4.0 * 4096 * 4096, 0},
    {"gemv_xw_4096", "x W, 1x4096 . 4096x4096 (W [in, out], as JAX's Dense keeps it): its bytes", {1, 4096, 4096, 0},
     setup_matmul, matmul, 4.0 * 4096 * 4096, 0},
    {"gemv_wx_4096", "W x, 4096x4096 . 4096x1 (a matrix times a column): its bytes", {4096, 1, 4096, 0}, setup_matmul,
     matmul, 4.0 * 4096 * 4096, 0},
    {"linear_b4_1024", "relu(linear), 4x1024 -> 1024", {4, 1024, 1024}, setup_linear, linear_relu, 0,
     2.0 * 4 * 1024 * 1024},
    {"bf16_gemm_1024", "1024^3 matmul, bf16", {1024, 1024, 1024, 0}, setup_bf16_matmul, matmul, 0,
     2.0 * 1024 * 1024 * 1024},
    {"bf16_linear_b1_4096", "relu(linear), 1x4096 -> 4096, bf16: its weight's bytes", {1, 4096, 4096},
     setup_bf16_linear, linear_relu, 2.0 * 4096 * 4096, 0},
    {"bf16_conv3x3_b32", "conv 64->64 3x3 + bias, 32x28x28, bf16 (inference)", {32, 64, 64, 28}, setup_bf16_conv,
     conv_inference, 0, CONV_FLOPS(32, 64, 64, 28)},
    {"attention_32x256x64", "softmax(Q K^T / 8) V, Q K V 32x256x64", {32, 256, 64}, setup_attention, attention, 0,
     4.0 * 32 * 256 * 256 * 64},
    {"cross_entropy_512x32000", "cross-entropy over 32000 classes + logits' gradient", {512, 32000}, setup_logits,
     cross_entropy, 2.0 * 512 * 32000 * 4, 0},
    {"cross_entropy_pixels_8x21x128x128", "cross-entropy over the 21 channels of each position + logits' gradient",
     {8, 21, 128}, setup_pixel_logits, cross_entropy, 2.0 * 8 * 21 * 128 * 128 * 4, 0},
    {"layer_norm_4096x1024", "layer_norm forward + input/weight/bias gradients", {4096, 1024}, setup_layer_norm,
     layer_norm, 3.0 * 4096 * 1024 * 4, 0},
    {"layer_norm_512x1024", "layer_norm forward + input/weight/bias gradients", {512, 1024}, setup_layer_norm,
     layer_norm, 3.0 * 512 * 1024 * 4, 0},
    {"layer_norm_fwd_4096x1024", "layer_norm forward (weight and bias, no gradients)", {4096, 1024},
     setup_rows_affine, layer_norm_fwd, 2.0 * 4096 * 1024 * 4, 0},
    {"rms_norm_4096x1024", "RMS norm forward, x * rsqrt(mean(x^2) + 1e-6) * w", {4096, 1024}, setup_rows_affine,
     rms_norm, 2.0 * 4096 * 1024 * 4, 0},
    {"group_norm_32x64x28", "group_norm, 8 groups, forward + input/weight/bias gradients", {32, 64, 28, 8},
     setup_group_norm, group_norm, 3.0 * 32 * 64 * 28 * 28 * 4, 0},
    {"transformer_b4x256", "GPT-2 block (768 wide, 12 heads, causal, 4x256 tokens), fwd + bwd", {4, 256, 768, 12},
     setup_transformer, transformer, 0, TRANSFORMER_FLOPS(4, 256, 768)},
    {"lstm_step_b32", "LSTM 64 -> 256 over 32 steps, batch 32, classifier, SGD", {32, 32, 64, 256}, setup_lstm,
     lstm_step, 0, LSTM_FLOPS(32, 32, 64, 256)},
    {"conv3x3_s2_b32", "conv 64->128 3x3 stride 2 + bias, 32x56x56", {32, 64, 128, 56}, setup_conv, conv_stride2, 0,
     CONV_FLOPS(32, 64, 128, 28)},
    {"conv7x7_s2_b8", "relu(conv 3->64 7x7 stride 2 + bias), 8x224x224 (inference; ResNet's stem)", {8, 3, 64, 224},
     setup_stem, conv_stem, 0, 2.0 * 8 * 64 * 112 * 112 * 3 * 49},
    {"conv_grouped_b32", "conv 128->128 3x3 + bias in 32 groups of 4, 32x28x28", {32, 128, 32, 28},
     setup_grouped_conv, conv_grouped, 0, CONV_FLOPS(32, 4, 128, 28)},
    {"conv_grouped_bwd_b32",
     "relu(conv 128->128 3x3 in 32 groups of 4), 32x28x28, forward + input/weight/bias gradients", {32, 128, 128, 28},
     setup_conv_grouped_deep, conv_relu_backward, 0, 3 * CONV_FLOPS(32, 4, 128, 28)},
    {"conv_dw3x3_b32", "depthwise conv 128 channels 3x3 + bias, 32x56x56 (inference)", {32, 128, 128, 56},
     setup_grouped_conv, conv_grouped, 0, CONV_FLOPS(32, 1, 128, 56)},
    {"conv_dw3x3_bwd_b32", "relu(depthwise conv 128 channels 3x3), 32x56x56, forward + input/weight/bias gradients",
     {32, 128, 128, 56}, setup_conv_dw_deep, conv_relu_backward, 0, 3 * CONV_FLOPS(32, 1, 128, 56)},
    {"conv5x5_b32", "conv 32->64 5x5 + bias, 32x28x28 (inference)", {32, 32, 64, 28}, setup_conv5, conv_same, 0,
     CONV5_FLOPS(32, 32, 64, 28)},
    {"conv1x1_7x7_b32", "conv 512->2048 1x1 + bias, 32x7x7 (inference; ResNet-50's last stage)", {32, 512, 2048, 7},
     setup_conv1x1, conv_same, 0, CONV1X1_FLOPS(32, 512, 2048, 7)},
    {"mbv2_block_b32", "MobileNetV2 block 160 -> 960 -> 160, 32x7x7: 1x1, depthwise 3x3, 1x1, relu6 (inference)",
     {32, 160, 960, 7}, setup_mbv2_block, mbv2_block, 0,
     2 * CONV1X1_FLOPS(32, 160, 960, 7) + CONV_FLOPS(32, 1, 960, 7)},
    {"conv5x5_bwd_b32", "relu(conv 32->64 5x5), 32x28x28, forward + input/weight/bias gradients", {32, 32, 64, 28},
     setup_conv5_deep, conv_relu_backward, 0, 3 * CONV5_FLOPS(32, 32, 64, 28)},
    {"resblock_b32", "ResNet basic block 64ch 56x56 (conv-bn-relu x2, add), fwd + bwd", {32, 64, 56},
     setup_resblock, resblock, 0, 6 * CONV_FLOPS(32, 64, 64, 56)},
    {"resnext_block_b16",
     "ResNeXt bottleneck 256 -> 128 (32 groups of 4) -> 256, 28x28 (conv-bn-relu x3, add), fwd + bwd", {16, 256, 128, 28},
     setup_resnext_block, resnext_block, 0,
     3 * (2 * CONV1X1_FLOPS(16, 256, 128, 28) + CONV_FLOPS(16, 4, 128, 28))},
    {"conv1_fwd_b64", "relu(maxpool(conv 1->32 3x3)), 64x28x28", {64, 1, 32, 28}, setup_conv, conv_forward, 0,
     CONV_FLOPS(64, 1, 32, 28)},
    {"conv1_bwd_b64", "conv1 layer forward + weight/bias gradients", {64, 1, 32, 28}, setup_conv, conv_backward,
     0, 2 * CONV_FLOPS(64, 1, 32, 28)},
    {"conv2_fwd_b64", "relu(maxpool(conv 32->64 3x3)), 64x14x14", {64, 32, 64, 14}, setup_conv, conv_forward, 0,
     CONV_FLOPS(64, 32, 64, 14)},
    {"conv2_bwd_b64", "conv2 layer forward + input/weight/bias gradients", {64, 32, 64, 14}, setup_conv,
     conv_backward, 0, 3 * CONV_FLOPS(64, 32, 64, 14)},
    {"conv_c3_bwd_b64", "relu(conv 3->64 3x3), 64x32x32, forward + weight/bias gradients", {64, 3, 64, 32},
     setup_conv_relu, conv_relu_backward, 0, 2 * CONV_FLOPS(64, 3, 64, 32)},
    {"conv_c512_bwd_b32", "relu(conv 512->512 3x3), 32x7x7, forward + input/weight/bias gradients", {32, 512, 512, 7},
     setup_conv_deep, conv_relu_backward, 0, 3 * CONV_FLOPS(32, 512, 512, 7)},
    {"mlp_step_b64", "MLP 784-512-512-10 training step, SGD", {64}, setup_mlp, mlp_step, 0, MLP_FLOPS(64)},
    {"mlp_step_b128", "MLP 784-512-512-10 training step, SGD", {128}, setup_mlp, mlp_step, 0, MLP_FLOPS(128)},
    {"cnn_step_b64", "MNISTNet training step, SGD", {64}, setup_cnn, cnn_step, 0, CNN_FLOPS(64)},
    {"cnn_step_b128", "MNISTNet training step, SGD", {128}, setup_cnn, cnn_step, 0, CNN_FLOPS(128)},
    {"resnet18_step_b8", "ResNet-18 training step, SGD, 8x3x224x224, 1000 classes", {8, 224}, setup_resnet18,
     resnet18_step, 0, RESNET18_FLOPS(8)},
    {"graph500", "500-node elementwise graph on 16 floats: cached sync cost", {16, 1}, setup_vectors, graph500,
     0, 0},
};

const int bench_nworkloads = (int)(sizeof bench_workloads / sizeof *bench_workloads);

bool bench_is_gemm(const workload *w) { return w->setup == setup_matmul; }
