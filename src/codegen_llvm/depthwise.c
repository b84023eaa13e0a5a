/* depthwise.c — depthwise convolutions (groups = channels: each output plane the product of
 * one image plane and one window of weights) computed from the planes' rows in a row-fused
 * WINDOW kernel of whole planes, instead of through the window's im2col or col2im. The
 * frontend's convolution of groups = channels and its gradients are, per (n, c) plane:
 *   forward      y[p]  = Σ_t cols[t, p] · w[t]      (a nest [N, C, P, KK], summed along KK)
 *   weight grad  dw[t] = Σ_p cols[t, p] · dy[p]     (a nest [N, C, KK, P], summed along P)
 *   input grad   dx    = col2im(dy[p] · w[t])       (a nest [N, C, KK, P], then the col2im)
 * (or [N·C, ...]), where cols is the image's im2col: KK = KH·KW rows of P = OH·OW positions,
 * each tap's a shifted copy of the image. Written and read back, those rows cost KK times the
 * plane's traffic for one multiply-add an element. Here each output row of y and dx is summed
 * over the taps of vectors of the rows the taps read (lanes outside the plane read as 0, the
 * im2col's padding: masked loads at the plane's edges, plain ones inside), and dw's taps
 * accumulate vectors of dy's rows times the image's under them. A column stride of 2 reads
 * the even lanes of two vectors; an input gradient of stride 2 sums each class of the image's
 * rows and columns (their position mod 2) over the taps that reach it, the columns' two
 * classes interleaved; of stride 1, four output rows at a time share the source rows they
 * read. One Zen 4 thread, 3×3 over 128 channels at batch 32, against the im2col and col2im:
 * 56×56 "same", the forward 14.7 -> 2.95 ms, the weight gradient 15.4 -> 2.9, the input
 * gradient 16.8 -> 3.0; 112×112 of stride 2, the forward 31.8 -> 9.0, the input gradient
 * 39.7 -> 8.7 (its 205 MB written with non-temporal stores, stream.c). */
#include "codegen_llvm/ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The most taps a window takes (each a load and a multiply-add of the code, unrolled). */
enum { TAPS_MAX = 49 };

/* The most vectors of a row's positions emit_sums sums at a time. */
enum { SUM_VECTORS = 4 };

/* The output rows emit_sums computes at a time where every tap's row lies in the plane, of
 * stride 1: the rows' taps read SUM_ROWS + KH - 1 source rows, each vector loaded once for the
 * taps of every output row that reads it (a load a multiply-add instead, most of them across
 * two cache lines, bounded the sums). One Zen 4 thread, 56×56 planes at batch 32, a row at a
 * time -> 2 -> 4: 3×3 over 128 channels 3.85 -> 2.95 -> 2.96 ms, 5×5 13.2 -> 8.7 -> 7.7, 7×7
 * over 96 channels 23.9 -> 14.6 -> 14.7; the 3×3's input gradient 3.9 -> 3.0 -> 3.0. Of stride
 * 2, whose rows share fewer source rows and wait on memory, a row at a time: its forward and
 * input gradient over 112×112 took 9.0 and 8.7 ms so, 9.8 and 10.1 two rows at a time. */
enum { SUM_ROWS = 4 };

/* The most taps a pass of emit_weight_sums accumulates (a vector register each). */
enum { WEIGHT_ACCS = 16 };

/* What nest s of a depthwise kernel computes (the header's forward and weight gradient). */
typedef enum dw_form { DW_NONE, DW_FORWARD, DW_WEIGHT } dw_form;

static int64_t taps(const ljg_kernel *k) { return k->win[0] * k->win[1]; }
static int64_t positions(const ljg_kernel *k) { return k->win_oh * k->win_ow; }

/* Whether nest n runs over the window's planes: [N, C, ...] or [N·C, ...]. */
static bool over_planes(const ljg_kernel *k, const ljg_nest *n) {
  const int64_t *img = k->win_img;
  return n->ndim == 4 ? n->shape[0] == img[0] && n->shape[1] == img[1]
                      : n->ndim == 3 && n->shape[0] == img[0] * img[1];
}

/* The point of ndim dims of plane (image in, channel c; the task `task` = in·C + c) at 0 along
 * the dims after it, the plane two dims (split) or one. */
static ljc_point plane_origin(int ndim, bool split, LLVMValueRef task, LLVMValueRef in, LLVMValueRef c,
                              LLVMValueRef zero) {
  ljc_point p = {ndim, {0}};
  int d = 0;
  if (split) p.idx[d++] = in, p.idx[d++] = c;
  else p.idx[d++] = task;
  while (d < ndim) p.idx[d++] = zero;
  return p;
}

/* Whether expression e is a LOAD of the window's LOCAL [N, C·KK, P] in a nest of d dims over
 * the planes, the taps along dim `tap` (d - 1 or d - 2) and the positions along the other. */
static bool cols_load(const ljg_kernel *k, int32_t e, int d, int tap) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind != LJG_X_LOAD || x->slot != k->win_out_slot || k->views[x->view].n != 1) return false;
  const ljg_view1 *t = &k->views[x->view].v[0];
  int64_t C = k->win_img[1], P = positions(k), KK = taps(k);
  int pos = tap == d - 1 ? d - 2 : d - 1;
  return t->ndim == d && t->offset == 0 && (d == 3 || t->stride[0] == C * KK * P) && t->stride[d - 3] == KK * P &&
         t->stride[tap] == P && t->stride[pos] == 1;
}

/* Whether expression e is a LOAD of dtype dt of a slot that is not LOCAL (a weight, the same
 * for every block) when `local` is false, in a view of one level of d dims whose stride is 0
 * along dim `zero` and 1 along dim `one` (unless -1). */
static bool plain_load(const ljg_program *p, const ljg_kernel *k, int32_t e, lj_dtype dt, int d, int zero, int one,
                       bool local) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind != LJG_X_LOAD || x->slot == k->win_out_slot || x->dtype != dt || k->views[x->view].n != 1 ||
      (!local && p->slots[x->slot].kind == LJG_SLOT_LOCAL))
    return false;
  const ljg_view1 *v = &k->views[x->view].v[0];
  return v->ndim == d && v->stride[zero] == 0 && (one < 0 || v->stride[one] == 1);
}

/* The operand of expression e, a product of two, for which cols_load(tap) holds of the other
 * and plain_load(zero, one, local) of it; -1 when there is none. */
static int32_t product_operand(const ljg_program *p, const ljg_kernel *k, int32_t e, int d, int tap, int zero,
                               int one, bool local) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind != LJG_X_OP || x->op != LJG_OP_MUL || x->nin != 2) return -1;
  for (int i = 0; i < 2; i++)
    if (cols_load(k, x->in[i], d, tap) &&
        plain_load(p, k, x->in[1 - i], k->exprs[x->in[i]].dtype, d, zero, one, local))
      return x->in[1 - i];
  return -1;
}

/* Whether k is a row-fused WINDOW kernel of whole planes whose im2col ljc_emit_depthwise_nest
 * can read from the image instead: f32 or f64 rows of contiguous columns, a column stride of
 * 1 or 2, at most TAPS_MAX taps, the im2col LOCAL. */
static bool cols_kernel(const ljg_program *p, const ljg_kernel *k) {
  if (k->kind != LJG_K_WINDOW || k->win_op != LJG_OP_IM2COL || k->row_block <= 0 || k->task_rows > 0)
    return false;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  return (dt == LJ_F32 || dt == LJ_F64) && (k->win[3] == 1 || k->win[3] == 2) && taps(k) <= TAPS_MAX &&
         p->slots[k->win_out_slot].kind == LJG_SLOT_LOCAL && sv->n == 1 && ljg_view_top(sv)->ndim == 4 &&
         ljg_view_top(sv)->stride[3] == 1;
}

/* What nest s of kernel k (cols_kernel) computes from the im2col; for DW_FORWARD *operand is
 * the weight, for DW_WEIGHT dY. Alone in its loop, a sum along its last dim over the planes,
 * of the window's dtype: the forward [.., P, KK] of the im2col times a weight the same for
 * every position, contiguous along the positions; the weight gradient [.., KK, P] of the
 * im2col times dY, the same for every tap and contiguous along the positions, which no later
 * nest writes. No nest writes the weight. */
static dw_form form(const ljg_program *p, const ljg_kernel *k, int s, int32_t *operand) {
  const ljg_nest *n = &k->nests[s];
  int d = n->ndim;
  if (!ljc_nest_alone(k, s) || !over_planes(k, n) || n->rop != LJG_OP_SUM || n->rmask != 1u << (d - 1) ||
      n->scatter_index >= 0 || n->out_dtype != k->win_dtype)
    return DW_NONE;
  int64_t P = positions(k), KK = taps(k);
  const ljg_view *ov = &k->views[n->out_view];
  if (n->shape[d - 2] == P && n->shape[d - 1] == KK && ov->n == 1 && ov->v[0].stride[d - 2] == 1) {
    *operand = product_operand(p, k, n->value, d, d - 1, d - 2, -1, false);
    return *operand >= 0 && !ljg_kernel_writes(k, k->exprs[*operand].slot, -1) ? DW_FORWARD : DW_NONE;
  }
  if (n->shape[d - 2] == KK && n->shape[d - 1] == P) {
    *operand = product_operand(p, k, n->value, d, d - 2, d - 2, d - 1, true);
    if (*operand < 0) return DW_NONE;
    for (int o = s; o < k->nnests; o++)
      if (k->nests[o].out_slot == k->exprs[*operand].slot) return DW_NONE;
    return DW_WEIGHT;
  }
  return DW_NONE;
}

bool ljc_depthwise_cols(const ljg_program *p, const ljg_kernel *k) {
  if (!cols_kernel(p, k)) return false;
  bool *used = ljb_xcalloc((size_t)k->nexprs + 1, sizeof *used), any = false, all = true;
  for (int s = 0; s < k->nnests && all; s++) {
    ljg_nest_exprs(k, &k->nests[s], used);
    bool reads = false;
    for (int e = 0; e < k->nexprs && !reads; e++) reads = used[e] && ljg_expr_reads(&k->exprs[e], k->win_out_slot);
    int32_t unused;
    if (reads) any = true, all = form(p, k, s, &unused) != DW_NONE;
  }
  free(used);
  return any && all;
}

bool ljc_depthwise_nest(const ljg_program *p, const ljg_kernel *k, int s) {
  int32_t unused;
  return s >= 0 && s < k->nnests && ljc_depthwise_cols(p, k) && form(p, k, s, &unused) != DW_NONE;
}

/* What nest s + 1 of kernel k does to the forward sums of nest s (DW_FORWARD), which then
 * take it on and go to nest s + 1's output: it adds a bias (a load the same for every position
 * that is not LOCAL), then bounds the values, or one of them, to nest s's LOCAL sums, read
 * where they lie and by no other nest; alone in its loop (or with nest s + 2, which copies its
 * output: copies_out, the sums then writing nest s + 2's), over the planes' positions ([..,
 * P], one dim fewer than nest s), the output contiguous along them. The bounds, in the order
 * they apply, the last first: a relu, where(v < b, b, v) and where(v > b, b, v) for b a
 * constant or a scalar (a clamp's: lj_clamp, ReLU6). */
enum { BOUNDS_MAX = 4 };
typedef struct dw_epilogue {
  int out;                   /* the nest whose output the sums write: s + 1, or the copy s + 2 */
  int32_t bias;              /* the bias LOAD, or -1 */
  int nbounds;
  int32_t bound[BOUNDS_MAX]; /* the bound b, or -1 for a relu's 0; the outermost first */
  bool upper[BOUNDS_MAX];    /* where(v > b, b, v), else where(v < b, b, v) */
} dw_epilogue;

/* The bounds of a dw_epilogue as emit_sums takes them: n scalars in the order they apply. */
typedef struct dw_bounds {
  int n;
  LLVMValueRef value[BOUNDS_MAX];
  bool upper[BOUNDS_MAX];
} dw_bounds;

/* The bound expression e puts on its operand (*v) when it is one of dw_epilogue's, of dtype
 * dt: into ep's next bound. */
static bool bound_of(const ljg_kernel *k, int32_t e, lj_dtype dt, dw_epilogue *ep, int32_t *v) {
  const ljg_kexpr *x = &k->exprs[e];
  if (x->kind != LJG_X_OP || ep->nbounds == BOUNDS_MAX) return false;
  if (x->op == LJG_OP_RELU) {
    ep->bound[ep->nbounds] = -1, ep->upper[ep->nbounds++] = false;
    *v = x->in[0];
    return true;
  }
  if (x->op != LJG_OP_WHERE) return false;
  const ljg_kexpr *c = &k->exprs[x->in[0]], *b = &k->exprs[x->in[1]];
  if (c->kind != LJG_X_OP || (c->op != LJG_OP_LT && c->op != LJG_OP_GT) || c->in[0] != x->in[2] ||
      c->in[1] != x->in[1] || (b->kind != LJG_X_CONST && b->kind != LJG_X_SCALAR) || b->dtype != dt)
    return false;
  ep->bound[ep->nbounds] = x->in[1], ep->upper[ep->nbounds++] = c->op == LJG_OP_GT;
  *v = x->in[2];
  return true;
}

/* Whether nest c of kernel k copies what nest a writes to a LOCAL slot that no other nest reads
 * into a layout of its own, contiguous along the last dim, in a's loop alone with it: a
 * depthwise convolution's output, planes of [N, C, P], copied to the [C, N·P] of the 1×1
 * convolution after it. */
static bool copies_out(const ljg_program *p, const ljg_kernel *k, int a, int c) {
  if (c >= k->nnests || ljc_nest_loop_end(k, a) != c) return false;
  const ljg_nest *na = &k->nests[a], *nc = &k->nests[c];
  const ljg_kexpr *x = &k->exprs[nc->value];
  const ljg_view *cv = &k->views[nc->out_view];
  return nc->ndim == na->ndim && !memcmp(nc->shape, na->shape, (size_t)na->ndim * sizeof *na->shape) && !nc->rmask &&
         nc->scatter_index < 0 && nc->out_dtype == na->out_dtype && x->kind == LJG_X_LOAD && x->slot == na->out_slot &&
         ljg_view_equal(&k->views[x->view], &k->views[na->out_view]) &&
         p->slots[na->out_slot].kind == LJG_SLOT_LOCAL && !ljg_nests_read(k, na->out_slot, a, c) && cv->n == 1 &&
         cv->v[0].stride[nc->ndim - 1] == 1;
}

/* False when nest s + 1 is not such a nest (nor one whose output nest s + 2 copies alone in
 * its loop: copies_out). */
static bool epilogue_of(const ljg_program *p, const ljg_kernel *k, int s, dw_epilogue *ep) {
  int32_t unused;
  if (s + 1 >= k->nnests || form(p, k, s, &unused) != DW_FORWARD) return false;
  ep->out = ljc_nest_alone(k, s + 1) ? s + 1 : copies_out(p, k, s + 1, s + 2) ? s + 2 : -1;
  if (ep->out < 0) return false;
  const ljg_nest *n = &k->nests[s], *a = &k->nests[s + 1];
  const ljg_view *ov = &k->views[n->out_view], *av = &k->views[k->nests[ep->out].out_view];
  int d = a->ndim;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  /* nest s + 1 over [N·C, P] where nest s is over [N, C, P, KK]: the planes flattened, as
   * where no bias of C values keeps N and C apart */
  bool merged = d == 2 && n->ndim == 4;
  if ((merged ? a->shape[0] != n->shape[0] * n->shape[1] || a->shape[1] != n->shape[2]
            : d != n->ndim - 1 || memcmp(a->shape, n->shape, (size_t)d * sizeof *a->shape)) ||
      a->rmask || a->scatter_index >= 0 || a->out_dtype != dt || p->slots[n->out_slot].kind != LJG_SLOT_LOCAL ||
      ljg_nests_read(k, n->out_slot, s, s + 1) || av->n != 1 || av->v[0].stride[d - 1] != 1)
    return false;
  /* the sums' positions (nest s's output without its taps) seen in nest s + 1's shape */
  ljg_view pos = {1, {ov->v[0]}};
  pos.v[0].ndim = n->ndim - 1;
  if (ov->n != 1 || !ljg_view_reshape(&pos, d, a->shape)) return false;
  int32_t e = a->value;
  ep->nbounds = 0;
  while (bound_of(k, e, dt, ep, &e))
    continue;
  const ljg_kexpr *x = &k->exprs[e];
  bool add = x->kind == LJG_X_OP && x->op == LJG_OP_ADD && x->nin == 2;
  for (int i = 0; i < (add ? 2 : 1); i++) {
    const ljg_kexpr *sums = add ? &k->exprs[x->in[i]] : x;
    ep->bias = add ? x->in[1 - i] : -1;
    if (sums->kind == LJG_X_LOAD && sums->slot == n->out_slot && ljg_view_equal(&k->views[sums->view], &pos) &&
        (add ? plain_load(p, k, ep->bias, dt, d, d - 1, -1, false) : ep->nbounds > 0))
      return true;
  }
  return false;
}

int ljc_depthwise_epilogue(const ljg_program *p, const ljg_kernel *k, int s) {
  dw_epilogue ep;
  if (s < 1 || !ljc_depthwise_cols(p, k)) return -1;
  if (epilogue_of(p, k, s - 1, &ep)) return s - 1;
  return s >= 2 && epilogue_of(p, k, s - 2, &ep) && ep.out == s ? s - 2 : -1;
}

bool ljc_depthwise_writes_rows(const ljg_program *p, const ljg_kernel *k, int s) {
  int32_t unused;
  if (!ljc_depthwise_cols(p, k) || s < 0 || s >= k->nnests) return false;
  dw_epilogue ep;
  return ljc_depthwise_epilogue(p, k, s) >= 0 || (form(p, k, s, &unused) == DW_FORWARD && !epilogue_of(p, k, s, &ep));
}

/* Whether expression e is dY times the weight, the input gradient's product over a nest of d
 * dims: dY the same for every tap, contiguous along the positions; the weight the same for
 * every position, not LOCAL. Sets *dy and *w. */
static bool image_product(const ljg_program *p, const ljg_kernel *k, int32_t e, int d, int32_t *dy, int32_t *w) {
  const ljg_kexpr *x = &k->exprs[e];
  lj_dtype dt = (lj_dtype)k->win_dtype;
  if (x->kind != LJG_X_OP || x->op != LJG_OP_MUL || x->nin != 2) return false;
  for (int i = 0; i < 2; i++)
    if (plain_load(p, k, x->in[i], dt, d, d - 2, d - 1, true) &&
        plain_load(p, k, x->in[1 - i], dt, d, d - 1, -1, false)) {
      *dy = x->in[i], *w = x->in[1 - i];
      return true;
    }
  return false;
}

bool ljc_depthwise_image(const ljg_program *p, const ljg_kernel *k) {
  int s = k->win_at - 1;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  if (k->kind != LJG_K_WINDOW || k->win_op != LJG_OP_COL2IM || k->row_block <= 0 || k->task_rows > 0 || s < 0 ||
      s >= k->nnests || !ljc_nest_alone(k, s) || (dt != LJ_F32 && dt != LJ_F64) || k->win[2] > 2 || k->win[3] > 2 ||
      taps(k) > TAPS_MAX)
    return false;
  const ljg_nest *n = &k->nests[s];
  const ljg_kexpr *src = &k->exprs[k->win_src];
  int d = n->ndim;
  int64_t C = k->win_img[1], P = positions(k), KK = taps(k);
  if (!over_planes(k, n) || n->rmask || n->scatter_index >= 0 || n->out_dtype != dt || n->shape[d - 2] != KK ||
      n->shape[d - 1] != P || n->out_slot != src->slot || p->slots[n->out_slot].kind != LJG_SLOT_LOCAL ||
      ljg_nests_read(k, n->out_slot, s, s))
    return false;
  const ljg_view *ov = &k->views[n->out_view], *sv = &k->views[src->view];
  const ljg_view1 *o = &ov->v[0], *c = &sv->v[0];
  if (ov->n != 1 || o->offset != 0 || (d == 4 && o->stride[0] != C * KK * P) || o->stride[d - 3] != KK * P ||
      o->stride[d - 2] != P || o->stride[d - 1] != 1 || sv->n != 1 || c->ndim != 3 || c->offset != 0 ||
      c->stride[0] != C * KK * P || c->stride[1] != P || c->stride[2] != 1)
    return false;
  int32_t dy, w;
  return image_product(p, k, n->value, d, &dy, &w);
}

/* A tap of a plane's product: output row y and column x read the source's row y·rs + ro and
 * column x·cs + co (dw_plane's rs and cs), times weight t. */
typedef struct dw_tap {
  int64_t t, ro, co;
} dw_tap;

/* One plane's rows as emit_sums and emit_weight_sums read them: the source's src_h rows of
 * src_w columns, src_rs elements apart, zero outside them; out_h rows of out_w columns of
 * nq classes of output columns (1, or 2 for an input gradient of column stride 2), the output
 * column of class q at x the row's x·nq + q of its out_cols, each class with its taps. */
typedef struct dw_plane {
  LLVMValueRef src;
  int64_t src_h, src_w, src_rs;
  int64_t out_h, out_w, out_cols;
  int64_t rs, cs;
  int nq, ntaps[2];
  dw_tap taps[2][TAPS_MAX];
  lj_dtype dt;
} dw_plane;

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }
static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The least and greatest row (rows) or column offset of pl's taps. */
static void tap_range(const dw_plane *pl, bool rows, int64_t *lo, int64_t *hi) {
  *lo = INT64_MAX, *hi = INT64_MIN;
  for (int q = 0; q < pl->nq; q++)
    for (int i = 0; i < pl->ntaps[q]; i++) {
      int64_t o = rows ? pl->taps[q][i].ro : pl->taps[q][i].co;
      *lo = o < *lo ? o : *lo, *hi = o > *hi ? o : *hi;
    }
  if (*lo > *hi) *lo = *hi = 0;
}

/* The code of one row of the output: its vectors of positions, a group at a time (emit_row);
 * each tap's source row (row[q][i]) and whether it lies in the plane (inside[q][i], an i1;
 * rows_inside where every output row the loop runs has them all inside). */
typedef struct row_gen {
  ljc_kctx *kc;
  const dw_plane *pl;
  int vw;
  bool flat;                /* the plane runs flat (runs_flat) */
  LLVMTypeRef vt, st, pair; /* pair: the vector of cs·vw lanes a tap's source columns lie in */
  int nrows;                /* output rows the code computes at a time (emit_sums) */
  LLVMValueRef rows[SUM_ROWS][2][TAPS_MAX], inside[2][TAPS_MAX];
  bool rows_inside;
  LLVMValueRef w, dst, dst_row[SUM_ROWS]; /* emit_sums: the taps' weights, w_stride apart;
                                             the output plane and rows (rows dst_rs apart from
                                             row d0); the alignment of a row's vectors inside
                                             it */
  int64_t w_stride, dst_rs, d0;
  unsigned dst_align;
  LLVMValueRef bias;            /* emit_sums: the value the sums start from, or NULL for 0; */
  dw_bounds bounds;             /* and the bounds of the values stored */
  LLVMValueRef dy, dy_row[SUM_ROWS]; /* emit_weight_sums: dY's plane and the block's rows,
                                        the accumulators */
  int nacc;
  LLVMValueRef acc[LJC_LOOP_ACC];
  /* nv vectors of positions from x0[0], x0[1], ...; `plain` when every lane of them lies in
   * the output row and every tap's source column in the plane */
  void (*vectors)(struct row_gen *g, const LLVMValueRef *x0, int nv, bool plain);
} row_gen;

/* The columns x of output class q: x·nq + q < out_cols. */
static int64_t class_cols(const dw_plane *pl, int q) { return ceil_div(pl->out_cols - q, pl->nq); }

/* The lanes i of n (an i1 vector) with x0 + i / cs < cols (x0 an i64). */
static LLVMValueRef lanes_below(row_gen *g, LLVMValueRef x0, int n, int64_t cs, int64_t cols) {
  ljc_ir *ir = g->kc->ir;
  LLVMValueRef d[128];
  for (int i = 0; i < n; i++) d[i] = ljc_const_i(ir->i32, i / cs);
  LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)n);
  LLVMValueRef x = ljc_splat(ir, LLVMBuildTrunc(ir->b, x0, ir->i32, ""), it);
  return LLVMBuildICmp(ir->b, LLVMIntSLT, LLVMBuildAdd(ir->b, x, LLVMConstVector(d, (unsigned)n), ""),
                       ljc_splat(ir, ljc_const_i(ir->i32, cols), it), "");
}

/* The lanes i of n for column x0 + i / cs of output class q below its columns whose source
 * column x0·cs + shift + i lies in the plane (the lanes of a tap's source columns under the
 * output's vector at x0). */
static LLVMValueRef lanes_in(row_gen *g, LLVMValueRef x0, int64_t shift, int n, int64_t cs, int q) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMValueRef l[128];
  for (int i = 0; i < n; i++) l[i] = ljc_const_i(ir->i32, i);
  LLVMTypeRef it = LLVMVectorType(ir->i32, (unsigned)n);
  LLVMValueRef x = ljc_splat(ir, LLVMBuildTrunc(b, x0, ir->i32, ""), it);
  LLVMValueRef ok = lanes_below(g, x0, n, cs, class_cols(g->pl, q));
  LLVMValueRef c = LLVMBuildAdd(b, LLVMBuildMul(b, x, ljc_splat(ir, ljc_const_i(ir->i32, cs), it), ""),
                                LLVMConstVector(l, (unsigned)n), "");
  c = LLVMBuildAdd(b, c, ljc_splat(ir, ljc_const_i(ir->i32, shift), it), "");
  return LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntULT, c, ljc_splat(ir, ljc_const_i(ir->i32, g->pl->src_w), it), ""),
                      "");
}

/* A vector of vt at element `at` of the array p (storage type st): lanes `mask` (the others
 * 0), or all where mask is NULL. */
static LLVMValueRef load_vector(row_gen *g, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef at, LLVMValueRef mask) {
  ljc_ir *ir = g->kc->ir;
  LLVMValueRef ptr = LLVMBuildGEP2(ir->b, g->st, p, &at, 1, ""); /* a tap's may lie before its row */
  unsigned esize = (unsigned)lj_dtype_size(g->pl->dt);
  if (mask) return ljc_masked_load(ir, vt, ptr, (int)esize, mask);
  LLVMValueRef v = LLVMBuildLoad2(ir->b, vt, ptr, "");
  LLVMSetAlignment(v, esize);
  return v;
}

/* The source's vector under tap i of class q of the output's vector at column x0 of the
 * block's output row r: the lanes outside the plane's columns or the row 0 (no mask when
 * plain); of column stride 2, the even lanes of the 2·vw from the first column. A tap's row
 * outside the plane (its pointer then row 0's) zeroes the vector after the load rather than
 * in the load's mask: compiled for AVX2, LLVM 19 loaded lanes past the image's end from a
 * 16-lane mask that ANDed the columns' constant lanes with the row's broadcast flag (NaN in a
 * weight gradient where the memory after the image held one). */
static LLVMValueRef tap_vector(row_gen *g, int r, LLVMValueRef x0, int q, int i, bool plain) {
  ljc_ir *ir = g->kc->ir;
  const dw_plane *pl = g->pl;
  int64_t shift = pl->taps[q][i].co;
  int n = g->vw * (int)pl->cs;
  LLVMValueRef col = LLVMBuildNSWMul(ir->b, x0, ljc_i64(ir, pl->cs), "");
  col = LLVMBuildNSWAdd(ir->b, col, ljc_i64(ir, shift), "");
  LLVMValueRef mask = plain ? NULL : lanes_in(g, x0, shift, n, pl->cs, q);
  LLVMValueRef v = load_vector(g, g->pair, g->rows[r][q][i], col, mask);
  if (!g->rows_inside)
    v = LLVMBuildSelect(ir->b, g->inside[q][i], v, LLVMConstNull(g->pair), "");
  if (pl->cs == 1) return v;
  LLVMValueRef even[64];
  for (int l = 0; l < g->vw; l++) even[l] = ljc_const_i(ir->i32, 2 * l);
  return LLVMBuildShuffleVector(ir->b, v, v, LLVMConstVector(even, (unsigned)g->vw), "");
}

/* One output row: its vectors at the row's ends (masked) one group at a time with constant
 * columns, and those between, whose lanes and taps' columns all lie inside (plain), in a
 * loop of groups of `group` when there are more than two groups of them. */
static void emit_row(row_gen *g, int group) {
  ljc_ir *ir = g->kc->ir;
  const dw_plane *pl = g->pl;
  int64_t vw = g->vw, nvec = (pl->out_w + vw - 1) / vw, lo_shift, hi_shift;
  tap_range(pl, false, &lo_shift, &hi_shift);
  int64_t inside = floor_div(pl->src_w - hi_shift, pl->cs * vw), full = class_cols(pl, pl->nq - 1) / vw;
  int64_t j_lo = clamp(ceil_div(-lo_shift, pl->cs * vw), 0, nvec);
  int64_t j_hi = clamp(inside < full ? inside : full, j_lo, nvec);
  int64_t loop_groups = j_hi - j_lo > 2 * group ? (j_hi - j_lo) / group : 0, j_rest = j_lo + loop_groups * group;
  LLVMValueRef x0[SUM_VECTORS];
  for (int64_t j = 0; j < j_lo; j += group) {
    int nv = (int)(j_lo - j < group ? j_lo - j : group);
    for (int v = 0; v < nv; v++) x0[v] = ljc_i64(ir, (j + v) * vw);
    g->vectors(g, x0, nv, false);
  }
  if (loop_groups) {
    ljc_loop J;
    ljc_loop_begin(ir, &J, ljc_i64(ir, 0), ljc_i64(ir, loop_groups), false, g->nacc, g->acc);
    memcpy(g->acc, J.acc, (size_t)g->nacc * sizeof *g->acc);
    LLVMValueRef first = LLVMBuildNSWAdd(ir->b, LLVMBuildNSWMul(ir->b, J.iv, ljc_i64(ir, group * vw), ""),
                                         ljc_i64(ir, j_lo * vw), "");
    for (int v = 0; v < group; v++) x0[v] = LLVMBuildNSWAdd(ir->b, first, ljc_i64(ir, v * vw), "");
    g->vectors(g, x0, group, true);
    ljc_loop_end(ir, &J, g->acc, g->acc);
  }
  for (int64_t j = j_rest; j < nvec; j += group) {
    int64_t end = j < j_hi && j_hi < j + group ? j_hi : j + group; /* plain groups apart */
    int nv = (int)((end < nvec ? end : nvec) - j);
    for (int v = 0; v < nv; v++) x0[v] = ljc_i64(ir, (j + v) * vw);
    g->vectors(g, x0, nv, j + nv <= j_hi);
    j += nv - group;
  }
}

/* The output rows [y0, y0 + n·nrows), nrows at a time, each block by emit_row after
 * row_start; rows_inside: every tap's source row lies in the plane for all of them (nrows 1
 * otherwise). */
static void emit_row_blocks(row_gen *g, int64_t y0, int64_t n, int nrows, bool rows_inside, int group,
                            void (*row_start)(row_gen *g, LLVMValueRef y)) {
  if (n <= 0) return;
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const dw_plane *pl = g->pl;
  ljc_loop Y;
  ljc_loop_begin_step(ir, &Y, ljc_i64(ir, y0), ljc_i64(ir, y0 + n * nrows), nrows, false, g->nacc, g->acc);
  memcpy(g->acc, Y.acc, (size_t)g->nacc * sizeof *g->acc);
  g->rows_inside = rows_inside;
  g->nrows = nrows;
  LLVMValueRef base = LLVMBuildNSWMul(b, Y.iv, ljc_i64(ir, pl->rs), "");
  for (int r = 0; r < nrows; r++)
    for (int q = 0; q < pl->nq; q++)
      for (int i = 0; i < pl->ntaps[q]; i++) {
        LLVMValueRef at = LLVMBuildNSWAdd(b, base, ljc_i64(ir, r * pl->rs + pl->taps[q][i].ro), "");
        if (!rows_inside) {
          g->inside[q][i] = LLVMBuildICmp(b, LLVMIntULT, at, ljc_i64(ir, pl->src_h), "");
          at = LLVMBuildSelect(b, g->inside[q][i], at, ljc_i64(ir, 0), "");
        }
        LLVMValueRef off = LLVMBuildNSWMul(b, at, ljc_i64(ir, pl->src_rs), "");
        g->rows[r][q][i] = LLVMBuildInBoundsGEP2(b, g->st, pl->src, &off, 1, "");
      }
  row_start(g, Y.iv);
  emit_row(g, group);
  ljc_loop_end(ir, &Y, g->acc, g->acc);
}

/* The output rows [y0, y1), `nrows` at a time then one at a time (rows_inside), else one at
 * a time. */
static void emit_rows(row_gen *g, int64_t y0, int64_t y1, bool rows_inside, int nrows, int group,
                      void (*row_start)(row_gen *g, LLVMValueRef y)) {
  int64_t blocks = rows_inside && y1 > y0 ? (y1 - y0) / nrows : 0;
  emit_row_blocks(g, y0, blocks, nrows, rows_inside, group, row_start);
  emit_row_blocks(g, y0 + blocks * nrows, y1 - y0 - blocks * nrows, 1, rows_inside, group, row_start);
}

/* Every output row by emit_rows: those whose taps' rows all lie in the plane apart from the
 * others (no masks of rows), nrows at a time. */
static void emit_plane_rows(row_gen *g, int nrows, int group, void (*row_start)(row_gen *g, LLVMValueRef y)) {
  const dw_plane *pl = g->pl;
  int64_t lo, hi;
  tap_range(pl, true, &lo, &hi);
  int64_t y_lo = clamp(ceil_div(-lo, pl->rs), 0, pl->out_h);
  int64_t y_hi = clamp(floor_div(pl->src_h - 1 - hi, pl->rs) + 1, y_lo, pl->out_h);
  emit_rows(g, 0, y_lo, false, 1, group, row_start);
  emit_rows(g, y_lo, y_hi, true, nrows, group, row_start);
  emit_rows(g, y_hi, pl->out_h, false, 1, group, row_start);
}

/* Planes of stride 1 whose rows take at most half a cache line and whose source and output
 * are the same size ("same" padding; MobileNet's last depthwise convolutions, over 7×7) run
 * flat: a vector holds positions of the plane's rows one after another, and tap (ro, co)
 * reads the source at the positions' p + ro·W + co, its lanes whose source row or column
 * lies outside the plane masked (constants: the plane's size is the kernel's). Row by row, a
 * 7×7 plane takes 14 vectors of 4 lanes a tap (two a row), flat 4 of 16. At most
 * FLAT_PLANE_BYTES a plane (16 vectors of AVX-512, the code of each unrolled). 3×3 with bias
 * and relu6 at batch 32, one Zen 5 thread, row by row -> flat: 960 channels of 7×7 forward
 * 1.24-1.31 -> 0.47-0.52 ms, with both gradients 4.8 -> 2.7-2.8; of 5×5 0.53-0.76 -> 0.34-0.40
 * and 1.58-1.63 -> 1.17-1.19; 576 channels of 8×8 0.42-0.43 -> 0.26-0.29 and 1.09-1.12 either
 * way (medians of 60-100 steps). Wider rows lost: 10×10 0.66-0.86 ms against 0.76-0.79,
 * 12×12 0.87 against 1.08-1.14, 14×14 1.56-1.74 against 1.69-1.74, though flat a 14×14 plane
 * takes 114 multiply-adds of 16 lanes against the rows' 252 of 8 (why, not found: not the
 * source's and output's offsets mod 4 KiB, moved by up to 2 KiB). */
enum { FLAT_PLANE_BYTES = 1024 };

/* Whether plane pl runs flat (above): the source and output dense. */
static bool runs_flat(const dw_plane *pl) {
  int64_t esize = lj_dtype_size(pl->dt);
  return pl->rs == 1 && pl->cs == 1 && pl->nq == 1 && pl->src_h == pl->out_h && pl->src_w == pl->out_w &&
         pl->src_rs == pl->src_w && pl->out_cols == pl->out_w && 2 * pl->out_w * esize <= LJC_LINE_BYTES &&
         pl->out_h * pl->out_w * esize <= FLAT_PLANE_BYTES;
}

static int64_t flat_vectors(const dw_plane *pl, int vw) { return (pl->out_h * pl->out_w + vw - 1) / vw; }

/* The code of plane pl: vectors of the target's width where the plane runs flat (and `dense`:
 * its output rows lie one after another), else halved down to its rows' width. */
static row_gen row_gen_of(ljc_kctx *kc, const dw_plane *pl, bool dense) {
  row_gen g = {.kc = kc, .pl = pl};
  g.vw = kc->ir->vec_bytes / (int)lj_dtype_size(pl->dt);
  g.flat = dense && runs_flat(pl);
  while (!g.flat && g.vw > pl->out_w && g.vw > 1) g.vw /= 2;
  g.vt = LLVMVectorType(ljc_compute_type(kc->ir, pl->dt), (unsigned)g.vw);
  g.pair = LLVMVectorType(ljc_compute_type(kc->ir, pl->dt), (unsigned)(g.vw * pl->cs));
  g.st = ljc_storage_type(kc->ir, pl->dt);
  return g;
}

static void sums_row(row_gen *g, LLVMValueRef y) {
  ljc_ir *ir = g->kc->ir;
  for (int r = 0; r < g->nrows; r++) {
    LLVMValueRef row = LLVMBuildNSWAdd(ir->b, LLVMBuildNSWMul(ir->b, y, ljc_i64(ir, g->dst_rs), ""),
                                       ljc_i64(ir, g->d0 + r * g->dst_rs), "");
    LLVMValueRef off = LLVMBuildNSWMul(ir->b, row, ljc_i64(ir, g->pl->out_cols), "");
    g->dst_row[r] = LLVMBuildInBoundsGEP2(ir->b, g->st, g->dst, &off, 1, "");
  }
}

/* A tap of a block's output row: the row, the tap's class and index. */
typedef struct row_tap {
  int r, q, i;
} row_tap;

/* Whether tap a goes before tap b: by source row (the block's row's and the tap's), then
 * source column, so that the taps that read the same vectors are next to each other. */
static bool before(const dw_plane *pl, row_tap a, row_tap b) {
  const dw_tap *ta = &pl->taps[a.q][a.i], *tb = &pl->taps[b.q][b.i];
  int64_t sa = a.r * pl->rs + ta->ro, sb = b.r * pl->rs + tb->ro;
  if (sa != sb) return sa < sb;
  if (ta->co != tb->co) return ta->co < tb->co;
  return a.r != b.r ? a.r < b.r : a.q != b.q ? a.q < b.q : a.i < b.i;
}

/* The weight of tap tp (emit_sums' w[t·w_stride]) broadcast to a vector. */
static LLVMValueRef tap_weight(row_gen *g, const dw_tap *tp) {
  ljc_ir *ir = g->kc->ir;
  LLVMValueRef off = ljc_i64(ir, tp->t * g->w_stride);
  LLVMValueRef wt = LLVMBuildLoad2(ir->b, g->st, LLVMBuildInBoundsGEP2(ir->b, g->st, g->w, &off, 1, ""), "");
  return ljc_splat(ir, ljc_from_storage(ir, wt, g->pl->dt), g->vt);
}

/* y within g's bounds (lower_expr.c's relu and where: -0 and NaN kept). */
static LLVMValueRef bounded(row_gen *g, LLVMValueRef y) {
  LLVMBuilderRef b = g->kc->ir->b;
  for (int i = 0; i < g->bounds.n; i++) {
    LLVMValueRef bound = ljc_splat(g->kc->ir, g->bounds.value[i], LLVMTypeOf(y));
    LLVMRealPredicate beyond = g->bounds.upper[i] ? LLVMRealOGT : LLVMRealOLT;
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, beyond, y, bound, ""), bound, y, "");
  }
  return y;
}

/* emit_sums' nv vectors of each of the block's rows: each class's Σ over its taps, one
 * broadcast of a tap's weight for the vectors, the taps of every row in the order of the
 * source rows and columns they read, so that a source vector is loaded once for all of them
 * (LLVM merges the loads of one address) and lives briefly; each row's taps in the order of
 * the weight's where its rows and columns grow with it (as the forward's do). Two classes'
 * vectors are interleaved into the row. */
static void sum_vectors(row_gen *g, const LLVMValueRef *x0, int nv, bool plain) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const dw_plane *pl = g->pl;
  LLVMValueRef acc[SUM_ROWS][2][SUM_VECTORS];
  row_tap order[SUM_ROWS * 2 * TAPS_MAX];
  int n = 0;
  for (int r = 0; r < g->nrows; r++)
    for (int q = 0; q < pl->nq; q++) {
      for (int v = 0; v < nv; v++) acc[r][q][v] = g->bias ? ljc_splat(ir, g->bias, g->vt) : LLVMConstNull(g->vt);
      for (int i = 0; i < pl->ntaps[q]; i++) order[n++] = (row_tap){r, q, i};
    }
  for (int o = 1; o < n; o++) /* insertion: a few hundred taps at most */
    for (int j = o; j > 0 && before(pl, order[j], order[j - 1]); j--) {
      row_tap t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (int o = 0; o < n; o++) {
    int r = order[o].r, q = order[o].q, i = order[o].i;
    LLVMValueRef wv = tap_weight(g, &pl->taps[q][i]);
    for (int v = 0; v < nv; v++) acc[r][q][v] = ljc_fmuladd(ir, tap_vector(g, r, x0[v], q, i, plain), wv, acc[r][q][v]);
  }
  unsigned esize = (unsigned)lj_dtype_size(pl->dt);
  LLVMValueRef lanes[128];
  for (int l = 0; l < 2 * g->vw; l++) lanes[l] = ljc_const_i(ir->i32, l % 2 * g->vw + l / 2);
  for (int r = 0; r < g->nrows; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef y = pl->nq == 1 ? acc[r][0][v]
                                   : LLVMBuildShuffleVector(b, acc[r][0][v], acc[r][1][v],
                                                            LLVMConstVector(lanes, (unsigned)(2 * g->vw)), "");
      LLVMValueRef x = LLVMBuildNSWMul(b, x0[v], ljc_i64(ir, pl->nq), "");
      LLVMValueRef at = LLVMBuildInBoundsGEP2(b, g->st, g->dst_row[r], &x, 1, "");
      y = ljc_to_storage(ir, bounded(g, y), pl->dt);
      if (plain) LLVMSetAlignment(LLVMBuildStore(b, y, at), g->dst_align);
      else ljc_masked_store(ir, y, at, (int)esize, lanes_below(g, x, g->vw * pl->nq, 1, pl->out_cols));
    }
}

/* The lanes of a flat plane's vector v (positions v·vw + l) that lie in the plane and, for tap
 * tp (none where NULL), whose source lies in it: into mask (vw i1 constants); returns how many. */
static int flat_lanes(const row_gen *g, int64_t v, const dw_tap *tp, LLVMValueRef *mask) {
  const dw_plane *pl = g->pl;
  int n = 0;
  for (int l = 0; l < g->vw; l++) {
    int64_t p = v * g->vw + l, y = p / pl->out_w, x = p % pl->out_w;
    bool in = p < pl->out_h * pl->out_w;
    if (tp) in = in && y + tp->ro >= 0 && y + tp->ro < pl->src_h && x + tp->co >= 0 && x + tp->co < pl->src_w;
    mask[l] = ljc_const_i(g->kc->ir->i1, in);
    n += in;
  }
  return n;
}

/* The source's vector under tap tp of a flat plane's vector v, its lanes outside the plane 0;
 * NULL where no lane's source lies in the plane. */
static LLVMValueRef flat_tap(row_gen *g, int64_t v, const dw_tap *tp) {
  LLVMValueRef mask[64];
  int n = flat_lanes(g, v, tp, mask);
  if (!n) return NULL;
  LLVMValueRef at = ljc_i64(g->kc->ir, v * g->vw + tp->ro * g->pl->src_w + tp->co);
  return load_vector(g, g->vt, g->pl->src, at, n == g->vw ? NULL : LLVMConstVector(mask, (unsigned)g->vw));
}

/* emit_sums over a flat plane into dst's positions: each vector's sum over the taps from the
 * bias, bounded and stored (masked past the plane), the taps' weights broadcast once. */
static void flat_sums(row_gen *g, LLVMValueRef dst) {
  ljc_ir *ir = g->kc->ir;
  LLVMBuilderRef b = ir->b;
  const dw_plane *pl = g->pl;
  LLVMValueRef wv[TAPS_MAX], mask[64];
  for (int i = 0; i < pl->ntaps[0]; i++) wv[i] = tap_weight(g, &pl->taps[0][i]);
  int esize = (int)lj_dtype_size(pl->dt);
  for (int64_t v = 0; v < flat_vectors(pl, g->vw); v++) {
    LLVMValueRef acc = g->bias ? ljc_splat(ir, g->bias, g->vt) : LLVMConstNull(g->vt);
    for (int i = 0; i < pl->ntaps[0]; i++) {
      LLVMValueRef x = flat_tap(g, v, &pl->taps[0][i]);
      if (x) acc = ljc_fmuladd(ir, x, wv[i], acc);
    }
    LLVMValueRef y = ljc_to_storage(ir, bounded(g, acc), pl->dt), off = ljc_i64(ir, v * g->vw);
    LLVMValueRef at = LLVMBuildInBoundsGEP2(b, g->st, dst, &off, 1, "");
    if (flat_lanes(g, v, NULL, mask) == g->vw)
      LLVMSetAlignment(LLVMBuildStore(b, y, at), (unsigned)esize);
    else
      ljc_masked_store(ir, y, at, esize, LLVMConstVector(mask, (unsigned)g->vw));
  }
}

/* out[y, x] = *bias (0 where NULL) + Σ over the taps of the source under the tap times its
 * weight w[t·w_stride], bounded by `bounds` (NULL: none; scalars), each output row (row y at
 * row y·dst_rs + d0 of dst's rows of out_cols) SUM_VECTORS vectors of positions at a time;
 * with `lines`, dst lies at a cache line, so that the vectors inside rows of whole lines are
 * aligned (stream.c's non-temporal stores need it). A vector at a time, each tap's weight kept
 * broadcast in a register for the plane (spilled past 32), a 5×5 forward took 23.0 ms instead
 * of 12.7. */
static void emit_sums(ljc_kctx *kc, const dw_plane *pl, LLVMValueRef w, int64_t w_stride, LLVMValueRef bias,
                      const dw_bounds *bounds, LLVMValueRef dst, int64_t dst_rs, int64_t d0, bool lines) {
  row_gen g = row_gen_of(kc, pl, dst_rs == 1 && d0 == 0);
  g.w = w, g.w_stride = w_stride, g.dst = dst, g.dst_rs = dst_rs, g.d0 = d0, g.vectors = sum_vectors;
  if (bounds) g.bounds = *bounds;
  if (bias) g.bias = ljc_from_storage(kc->ir, LLVMBuildLoad2(kc->ir->b, g.st, bias, ""), pl->dt);
  unsigned esize = (unsigned)lj_dtype_size(pl->dt), vector = (unsigned)g.vw * (unsigned)pl->nq * esize;
  bool aligned = lines && pl->out_cols * esize % LJC_LINE_BYTES == 0;
  g.dst_align = aligned ? (vector < LJC_LINE_BYTES ? vector : LJC_LINE_BYTES) : esize;
  if (g.flat) {
    flat_sums(&g, dst);
    return;
  }
  int64_t vectors = (pl->out_w + g.vw - 1) / g.vw;
  emit_plane_rows(&g, pl->rs == 1 && pl->cs == 1 && pl->nq == 1 ? SUM_ROWS : 1,
                  vectors < SUM_VECTORS ? (int)vectors : SUM_VECTORS, sums_row);
}

static void weight_row(row_gen *g, LLVMValueRef y) {
  ljc_ir *ir = g->kc->ir;
  for (int r = 0; r < g->nrows; r++) {
    LLVMValueRef off = LLVMBuildNSWAdd(ir->b, y, ljc_i64(ir, r), "");
    off = LLVMBuildNSWMul(ir->b, off, ljc_i64(ir, g->pl->out_w), "");
    g->dy_row[r] = LLVMBuildInBoundsGEP2(ir->b, g->st, g->dy, &off, 1, "");
  }
}

/* emit_weight_sums' vectors: each dY's vector of each of the block's rows times the
 * source's under each tap into the tap's accumulator. */
static void weight_vectors(row_gen *g, const LLVMValueRef *x0, int nv, bool plain) {
  for (int v = 0; v < nv; v++)
    for (int r = 0; r < g->nrows; r++) {
      LLVMValueRef mask = plain ? NULL : lanes_below(g, x0[v], g->vw, 1, g->pl->out_w);
      LLVMValueRef dy = load_vector(g, g->vt, g->dy_row[r], x0[v], mask);
      for (int i = 0; i < g->pl->ntaps[0]; i++)
        g->acc[i] = ljc_fmuladd(g->kc->ir, tap_vector(g, r, x0[v], 0, i, plain), dy, g->acc[i]);
    }
}

/* emit_weight_sums over a flat plane: each of dY's vectors (masked past the plane) times the
 * source's under each tap into the tap's accumulator. */
static void flat_weight_sums(row_gen *g) {
  LLVMValueRef mask[64];
  for (int64_t v = 0; v < flat_vectors(g->pl, g->vw); v++) {
    bool whole = flat_lanes(g, v, NULL, mask) == g->vw;
    LLVMValueRef dy = load_vector(g, g->vt, g->dy, ljc_i64(g->kc->ir, v * g->vw),
                                  whole ? NULL : LLVMConstVector(mask, (unsigned)g->vw));
    for (int i = 0; i < g->pl->ntaps[0]; i++) {
      LLVMValueRef x = flat_tap(g, v, &g->pl->taps[0][i]);
      if (x) g->acc[i] = ljc_fmuladd(g->kc->ir, x, dy, g->acc[i]);
    }
  }
}

/* dw[t·out_stride] = Σ over the output's positions of dY (its rows contiguous from dy) times
 * the source under tap t: a vector accumulator a tap, WEIGHT_ACCS taps a pass over dY, a
 * vector of a row's positions at a time (of stride 1, of SUM_ROWS rows, which share the
 * source's vectors as emit_sums' rows do: the 3×3 of SUM_ROWS' numbers 3.9 -> 2.9 ms, a row
 * at a time against four), summed across its lanes at the end. */
static void emit_weight_sums(ljc_kctx *kc, const dw_plane *pl, LLVMValueRef dy, LLVMValueRef out, int64_t out_stride) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  LLVMTypeRef ct = ljc_compute_type(ir, pl->dt);
  for (int t0 = 0; t0 < pl->ntaps[0]; t0 += WEIGHT_ACCS) {
    dw_plane pass = *pl;
    pass.ntaps[0] = pl->ntaps[0] - t0 < WEIGHT_ACCS ? pl->ntaps[0] - t0 : WEIGHT_ACCS;
    memmove(pass.taps[0], pl->taps[0] + t0, (size_t)pass.ntaps[0] * sizeof *pass.taps[0]);
    row_gen g = row_gen_of(kc, &pass, true);
    g.dy = dy, g.vectors = weight_vectors, g.nacc = pass.ntaps[0];
    for (int i = 0; i < g.nacc; i++) g.acc[i] = LLVMConstNull(g.vt);
    if (g.flat)
      flat_weight_sums(&g);
    else
      emit_plane_rows(&g, pl->rs == 1 && pl->cs == 1 ? SUM_ROWS : 1, 1, weight_row);
    for (int i = 0; i < g.nacc; i++) {
      LLVMValueRef args[2] = {ljc_const_f(ct, 0), g.acc[i]};
      LLVMValueRef sum = ljc_intrinsic_over(ir, "vector.reduce.fadd", 1, &g.vt, 2, args);
      LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
      LLVMValueRef off = ljc_i64(ir, pass.taps[0][i].t * out_stride);
      LLVMBuildStore(b, ljc_to_storage(ir, sum, pl->dt), LLVMBuildInBoundsGEP2(b, g.st, out, &off, 1, ""));
    }
  }
}

/* The element of expression e's slot at point pt (a pointer of its storage type). */
static LLVMValueRef plane_at(ljc_kctx *kc, int32_t e, const ljc_point *pt) {
  const ljg_kexpr *x = &kc->k->exprs[e];
  LLVMValueRef off = ljc_slot_offset(kc, x->slot, &kc->k->views[x->view], pt);
  return LLVMBuildInBoundsGEP2(kc->ir->b, ljc_storage_type(kc->ir, (lj_dtype)x->dtype), kc->slot_ptr[x->slot], &off, 1,
                               "");
}

/* The image's plane under the window of kernel k: the forward product's and the weight
 * gradient's taps, every tap in the order of the weight's. */
static dw_plane image_plane(const ljg_kernel *k) {
  const int64_t *a = k->win;
  const ljg_view *sv = &k->views[k->exprs[k->win_src].view];
  dw_plane pl = {.src_h = k->win_img[2], .src_w = k->win_img[3], .src_rs = ljg_view_top(sv)->stride[2],
                 .out_h = k->win_oh, .out_w = k->win_ow, .out_cols = k->win_ow, .rs = a[2], .cs = a[3], .nq = 1,
                 .dt = (lj_dtype)k->win_dtype};
  for (int64_t kh = 0; kh < a[0]; kh++)
    for (int64_t kw = 0; kw < a[1]; kw++)
      pl.taps[0][pl.ntaps[0]++] = (dw_tap){kh * a[1] + kw, kh * a[6] - a[4], kw * a[7] - a[5]};
  return pl;
}

void ljc_emit_depthwise_nest(ljc_kctx *kc, int s, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const ljg_nest *n = &k->nests[s];
  int32_t operand;
  dw_form f = form(kc->p, k, s, &operand);
  dw_plane pl = image_plane(k);
  LLVMValueRef zero = ljc_i64(ir, 0);
  ljc_loop task;
  ljc_loop_begin(ir, &task, lo, hi, true, 0, NULL);
  LLVMValueRef in = LLVMBuildUDiv(b, task.iv, ljc_i64(ir, k->win_img[1]), "");
  LLVMValueRef c = LLVMBuildURem(b, task.iv, ljc_i64(ir, k->win_img[1]), "");
  bool split = n->ndim == 4;
  ljc_point img = plane_origin(4, true, task.iv, in, c, zero), pt = plane_origin(n->ndim, split, task.iv, in, c, zero);
  pl.src = plane_at(kc, k->win_src, &img);
  dw_epilogue ep = {-1, -1, 0, {0}, {0}};
  bool epilogue = f == DW_FORWARD && epilogue_of(kc->p, k, s, &ep);
  const ljg_nest *o = epilogue ? &k->nests[ep.out] : n; /* the nest whose output the sums write */
  ljc_point opt = plane_origin(o->ndim, epilogue ? o->ndim == 3 : split, task.iv, in, c, zero);
  dw_bounds bounds = {ep.nbounds, {0}, {0}};
  for (int i = 0; i < ep.nbounds; i++) { /* the innermost (the last) first */
    int32_t e = ep.bound[ep.nbounds - 1 - i];
    if (e >= 0) ljc_emit_exprs(kc, &opt, e);
    bounds.value[i] = e >= 0 ? kc->vals[e] : LLVMConstNull(ljc_compute_type(ir, pl.dt));
    bounds.upper[i] = ep.upper[ep.nbounds - 1 - i];
  }
  LLVMValueRef off = ljc_slot_offset(kc, o->out_slot, &k->views[o->out_view], &opt);
  LLVMValueRef out = LLVMBuildInBoundsGEP2(b, ljc_storage_type(ir, (lj_dtype)o->out_dtype), kc->slot_ptr[o->out_slot],
                                           &off, 1, "");
  const ljg_view1 *ov = &k->views[n->out_view].v[0], *xv = &k->views[k->exprs[operand].view].v[0];
  if (f == DW_FORWARD)
    emit_sums(kc, &pl, plane_at(kc, operand, &pt), xv->stride[n->ndim - 1],
              ep.bias >= 0 ? plane_at(kc, ep.bias, &opt) : NULL, &bounds, out, 1, 0, false);
  else
    emit_weight_sums(kc, &pl, plane_at(kc, operand, &pt), out, ov->stride[n->ndim - 2]);
  ljc_loop_end(ir, &task, NULL, NULL);
}

/* dY's plane as the input gradient's row class r reads it: image rows iy = y·sh + r, each of
 * sw classes of columns (ix = x·sw + q) the taps (kh, kw) whose dY position
 * ((iy + ph - kh·dh) / sh, (ix + pw - kw·dw) / sw) is whole, in the order of the weight's. */
static dw_plane dy_plane(const ljg_kernel *k, int64_t r) {
  const int64_t *a = k->win;
  int64_t sh = a[2], sw = a[3];
  dw_plane pl = {.src_h = k->win_oh, .src_w = k->win_ow, .src_rs = k->win_ow, .out_h = ceil_div(k->win_img[2] - r, sh),
                 .out_w = ceil_div(k->win_img[3], sw), .out_cols = k->win_img[3], .rs = 1, .cs = 1, .nq = (int)sw,
                 .dt = (lj_dtype)k->win_dtype};
  for (int64_t q = 0; q < sw; q++)
    for (int64_t kh = 0; kh < a[0]; kh++)
      for (int64_t kw = 0; kw < a[1]; kw++) {
        int64_t ro = r + a[4] - kh * a[6], co = q + a[5] - kw * a[7];
        if (floor_div(ro, sh) * sh == ro && floor_div(co, sw) * sw == co)
          pl.taps[q][pl.ntaps[q]++] = (dw_tap){kh * a[1] + kw, ro / sh, co / sw};
      }
  return pl;
}

void ljc_emit_depthwise_image(ljc_kctx *kc, LLVMValueRef lo, LLVMValueRef hi) {
  ljc_ir *ir = kc->ir;
  LLVMBuilderRef b = ir->b;
  const ljg_kernel *k = kc->k;
  const ljg_nest *n = &k->nests[k->win_at - 1];
  int d = n->ndim;
  lj_dtype dt = (lj_dtype)k->win_dtype;
  int32_t dy, w;
  image_product(kc->p, k, n->value, d, &dy, &w);
  LLVMValueRef zero = ljc_i64(ir, 0);
  ljc_loop task;
  ljc_loop_begin(ir, &task, lo, hi, true, 0, NULL);
  LLVMValueRef in = LLVMBuildUDiv(b, task.iv, ljc_i64(ir, k->win_img[1]), "");
  LLVMValueRef c = LLVMBuildURem(b, task.iv, ljc_i64(ir, k->win_img[1]), "");
  ljc_point pt = plane_origin(n->ndim, n->ndim == 4, task.iv, in, c, zero);
  LLVMValueRef src = plane_at(kc, dy, &pt), wts = plane_at(kc, w, &pt);
  LLVMValueRef base = LLVMBuildNSWMul(b, task.iv, ljc_i64(ir, ljg_window_image_plane(k)), "");
  if (kc->slot_origin[k->win_out_slot]) base = LLVMBuildNSWSub(b, base, kc->slot_origin[k->win_out_slot], "");
  LLVMValueRef out = LLVMBuildInBoundsGEP2(b, ljc_storage_type(ir, dt), kc->slot_ptr[k->win_out_slot], &base, 1, "");
  for (int64_t r = 0; r < k->win[2]; r++) {
    dw_plane pl = dy_plane(k, r);
    pl.src = src;
    emit_sums(kc, &pl, wts, k->views[k->exprs[w].view].v[0].stride[d - 2], NULL, NULL, out, k->win[2], r,
              !kc->slot_origin[k->win_out_slot]);
  }
  ljc_loop_end(ir, &task, NULL, NULL);
}

bool ljc_depthwise_flat(const ljg_program *p, const ljg_kernel *k) {
  dw_plane pl;
  if (ljc_depthwise_image(p, k)) {
    if (k->win[2] != 1) return false; /* rows of the image apart (emit_sums' dst_rs) */
    pl = dy_plane(k, 0);
  } else {
    if (!ljc_depthwise_cols(p, k)) return false;
    pl = image_plane(k);
  }
  return runs_flat(&pl);
}
