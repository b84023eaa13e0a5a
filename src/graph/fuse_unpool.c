/* fuse_unpool.c — a 2×2 max-pool's gradient read where it is pooled.
 *
 * Max-pool's gradient scatter-adds each window's gradient at the position of its maximum
 * into zeros, then col2im lays the windows out as the image: a WINDOW kernel that writes the
 * convolution's dY in full (MNISTNet's conv1 at batch 64: 6.4 MB, three quarters zeros) for
 * the kernels after it to read back. When the only readers are the convolution's weight
 * gradient through the taps routine, which loads dY a row at a time, and nests that sum dY
 * over its positions (the bias gradient), none needs it written:
 *   - the taps routine builds each row of dY from a row of the pooled gradient G, of the
 *     positions I and of the relu's mask M (ljg_kernel.mm_unpool_at);
 *   - a sum over an image's positions is the same sum over G's (each window's value lands
 *     once, on the position I names), so the nest sums G (or where(M > 0, G, 0)) instead.
 * The window kernel is removed; its slots keep their numbers, with no bytes.
 *
 * The window kernel must be exactly max-pool's gradient: a zero fill of [N, C, 4, P] planes,
 * a scatter-add of value V at I along the window dim (V a load of G, or where(M > 0, G, 0)
 * with M a load or the relu of one; I an i8 argmax or argmin over 4 elements, so always in
 * [0, 4)), then col2im of window 2×2, stride 2 onto an image of exactly 2·OH × 2·OW. G, M
 * and I are read with the same strides, positions contiguous. Its image is a TEMP read by one
 * taps matmul (as B, rows contiguous) and by sums over [.., H·W] positions only. Deciding it
 * here, before the buffer plan, makes the plan keep G, M and I until their new readers have
 * run. */
#include "graph/graph.h"

#include <string.h>

/* The window kernel's reads of the pooled gradient: expressions G, M (-1: none) and I, their
 * image and channel strides (0 along a dim of 1) and their offsets; the image's sizes. */
typedef struct pooled {
  int32_t g, m, i;
  int64_t sn, sc, off[3];
  int64_t n, c, h, w, p;
} pooled;

bool ljg_taps_dw(const ljg_kernel *k) {
  const int64_t *w = k->mm_win;
  if (k->kind != LJG_K_MATMUL || k->mm_dtype != LJ_F32 || k->mm_cols != LJG_MM_COLS_A || !k->mm_sum || w[0] != 3 ||
      w[1] != 3 || w[3] != 1 || k->row_block || k->nnests || ljg_kernel_has_window(k) ||
      k->mm_img[1] > LJG_TAPS_MAX_CHANNELS || k->mm_k != k->mm_oh * k->mm_ow)
    return false;
  const ljg_kexpr *ea = &k->exprs[k->mm_a], *eb = &k->exprs[k->mm_bm];
  if (ea->kind != LJG_X_LOAD || eb->kind != LJG_X_LOAD || k->views[ea->view].n != 1 || k->views[eb->view].n != 1)
    return false;
  return k->views[ea->view].v[0].stride[3] == 1 && k->views[eb->view].v[0].stride[1] == 1 &&
         k->mm_img[3] < INT32_MAX / 2 && k->mm_ow < INT32_MAX / 2;
}

/* Whether view v reads ndim dims of shape one after another from offset 0. */
static bool row_major(const ljg_view *v, int ndim, const int64_t *shape) {
  return v->n == 1 && v->v[0].offset == 0 && ljg_view1_walks(&v->v[0], ndim, shape);
}

/* Whether expression e of the window kernel w loads the pooled [N, C, 1, P] of dtype dt, its
 * positions contiguous, with pl's strides (the first such load sets them), not a LOCAL; at: its
 * offset. */
static bool plane_load(const ljg_program *p, const ljg_kernel *w, int32_t e, lj_dtype dt, pooled *pl, int64_t *at) {
  const ljg_kexpr *x = &w->exprs[e];
  if (x->kind != LJG_X_LOAD || x->dtype != dt || w->views[x->view].n != 1 || p->slots[x->slot].kind == LJG_SLOT_LOCAL)
    return false;
  const ljg_view1 *v = &w->views[x->view].v[0];
  int64_t shape[4] = {pl->n, pl->c, 1, pl->p};
  if (v->ndim != 4 || memcmp(v->shape, shape, sizeof shape) != 0 || (pl->p != 1 && v->stride[3] != 1)) return false;
  int64_t sn = pl->n == 1 ? 0 : v->stride[0], sc = pl->c == 1 ? 0 : v->stride[1];
  if (pl->sn < 0) pl->sn = sn, pl->sc = sc;
  *at = v->offset;
  return sn == pl->sn && sc == pl->sc && sn >= 0 && sc >= 0;
}

bool ljg_relu_gradient(const ljg_kernel *k, int32_t e, int32_t *x, int32_t *v) {
  const ljg_kexpr *w = &k->exprs[e];
  if (w->kind != LJG_X_OP || w->op != LJG_OP_WHERE || !ljg_expr_is_zero(&k->exprs[w->in[2]])) return false;
  const ljg_kexpr *cond = &k->exprs[w->in[0]];
  if (cond->kind != LJG_X_OP || cond->op != LJG_OP_GT || !ljg_expr_is_zero(&k->exprs[cond->in[1]])) return false;
  *x = cond->in[0], *v = w->in[1];
  return true;
}

/* Whether the slot holds an argmax or argmin over 4 elements (its values lie in [0, 4)). */
static bool window_position(const ljg_program *p, const ljg_graph *g, int32_t slot) {
  const ljg_gnode *n = &g->nodes[p->slots[slot].node];
  if (n->op != LJG_OP_ARGMAX && n->op != LJG_OP_ARGMIN) return false;
  int64_t out = ljg_gnumel(n);
  return out > 0 && ljg_gnumel(&g->nodes[ljg_in(g, n)[0]]) == 4 * out;
}

/* Whether window kernel w is a 2×2 max-pool's gradient as above; fills pl. */
static bool pool_gradient(const ljg_program *p, const ljg_graph *g, const ljg_kernel *w, pooled *pl) {
  static const int64_t win[8] = {2, 2, 2, 2, 0, 0, 1, 1};
  if (w->kind != LJG_K_WINDOW || w->win_op != LJG_OP_COL2IM || w->win_dtype != LJ_F32 ||
      memcmp(w->win, win, sizeof win) != 0 || w->nnests != 2 || w->win_at != 2 || w->win_img[2] != 2 * w->win_oh ||
      w->win_img[3] != 2 * w->win_ow || p->slots[w->win_out_slot].kind != LJG_SLOT_TEMP)
    return false;
  *pl = (pooled){.m = -1, .sn = -1, .n = w->win_img[0], .c = w->win_img[1], .h = w->win_img[2], .w = w->win_img[3],
                 .p = w->win_oh * w->win_ow};
  const ljg_nest *z = &w->nests[0], *s = &w->nests[1];
  int64_t planes[4] = {pl->n, pl->c, 4, pl->p}, cols[3] = {pl->n, 4 * pl->c, pl->p};
  const ljg_kexpr *src = &w->exprs[w->win_src];
  if (z->rop >= 0 || z->scatter_index >= 0 || !ljg_expr_is_zero(&w->exprs[z->value]) || z->ndim != 4 ||
      memcmp(z->shape, planes, sizeof planes) != 0 || !row_major(&w->views[z->out_view], 4, planes) ||
      s->rop >= 0 || s->scatter_index < 0 || s->scatter_dim != 2 || s->out_slot != z->out_slot ||
      !row_major(&w->views[s->out_view], 4, planes) || src->kind != LJG_X_LOAD || src->slot != z->out_slot ||
      !row_major(&w->views[src->view], 3, cols))
    return false;
  int64_t pooled_shape[4] = {pl->n, pl->c, 1, pl->p};
  if (s->ndim != 4 || memcmp(s->shape, pooled_shape, sizeof pooled_shape) != 0) return false;
  pl->i = s->scatter_index;
  if (!plane_load(p, w, pl->i, LJ_I8, pl, &pl->off[2]) || !window_position(p, g, w->exprs[pl->i].slot)) return false;
  pl->g = s->value;
  if (ljg_relu_gradient(w, s->value, &pl->m, &pl->g)) {
    /* relu(m) > 0 where m > 0 */
    if (w->exprs[pl->m].kind == LJG_X_OP && w->exprs[pl->m].op == LJG_OP_RELU) pl->m = w->exprs[pl->m].in[0];
    if (!plane_load(p, w, pl->m, LJ_F32, pl, &pl->off[1])) return false;
  }
  return plane_load(p, w, pl->g, LJ_F32, pl, &pl->off[0]);
}

/* Whether expression e of kernel k is one of its nests' values and nothing else's input. */
static bool only_nest_value(const ljg_kernel *k, int32_t e, int *nest) {
  *nest = -1;
  for (int s = 0; s < k->nnests; s++) {
    if (k->nests[s].scatter_index == e) return false;
    if (k->nests[s].value == e) {
      if (*nest >= 0) return false;
      *nest = s;
    }
  }
  for (int x = 0; x < k->nexprs; x++)
    for (int i = 0; i < k->exprs[x].nin; i++)
      if (k->exprs[x].in[i] == e) return false;
  return *nest >= 0 && k->kind == LJG_K_LOOPS;
}

/* The dim of nest s (value: a load of the image) that runs over the image's positions, or
 * -1 when the nest is not a sum over them: a SUM whose load's dims are images (stride C·H·W),
 * channels (H·W), dims of 1, and one reduced dim of all H·W positions (stride 1). */
static int sum_positions(const ljg_kernel *k, int s, const pooled *pl) {
  const ljg_nest *n = &k->nests[s];
  const ljg_kexpr *x = &k->exprs[n->value];
  const ljg_view1 *v = &k->views[x->view].v[0];
  if (n->rop != LJG_OP_SUM || k->views[x->view].n != 1 || k->views[n->out_view].n != 1 || v->ndim != n->ndim ||
      v->offset != 0)
    return -1;
  int pos = -1;
  for (int d = 0; d < n->ndim; d++) {
    if (n->shape[d] == 1) continue;
    if (n->shape[d] == pl->h * pl->w && v->stride[d] == 1 && (n->rmask >> d & 1) && pos < 0) pos = d;
    else if (!(n->shape[d] == pl->n && v->stride[d] == pl->c * pl->h * pl->w) &&
             !(n->shape[d] == pl->c && v->stride[d] == pl->h * pl->w))
      return -1;
  }
  return pos;
}

/* Whether expression e of kernel k is the B of a taps weight gradient of the window's image:
 * dY [N, C, H, W] read as [N, H·W, C] from its start. */
static bool taps_b(const ljg_kernel *k, int32_t e, const pooled *pl) {
  if (k->kind != LJG_K_MATMUL || e != k->mm_bm || !ljg_taps_dw(k) || k->mm_b != pl->n || k->mm_n != pl->c ||
      k->mm_oh != pl->h || k->mm_ow != pl->w)
    return false;
  const ljg_view1 *v = &k->views[k->exprs[e].view].v[0];
  return v->offset == 0 && v->stride[0] == pl->c * pl->h * pl->w && v->stride[2] == pl->h * pl->w;
}

/* Whether every read of the window's image (slot) after kernel wi is the B of one taps matmul
 * or a sum over its positions; *taps: that matmul. */
static bool readers_fit(const ljg_program *p, int wi, int32_t slot, const pooled *pl, int *taps) {
  *taps = -1;
  for (int j = wi + 1; j < p->nkernels; j++) {
    const ljg_kernel *k = &p->kernels[j];
    if (ljg_kernel_writes(k, slot, -1)) return false;
    for (int e = 0; e < k->nexprs; e++) {
      if (!ljg_expr_reads(&k->exprs[e], slot)) continue;
      int nest;
      if (*taps < 0 && taps_b(k, e, pl))
        *taps = j;
      else if (k->exprs[e].kind != LJG_X_LOAD || !only_nest_value(k, e, &nest) || sum_positions(k, nest, pl) < 0)
        return false;
    }
  }
  return *taps >= 0;
}

/* Appends view v to kernel k (its views are the program arena's). */
static int32_t add_view(ljg_program *p, ljg_kernel *k, ljg_view v) {
  ljg_view *views = ljb_arena_alloc(&p->arena, ((size_t)k->nviews + 1) * sizeof *views);
  memcpy(views, k->views, (size_t)k->nviews * sizeof *views);
  views[k->nviews] = v;
  k->views = views;
  return k->nviews++;
}

/* Makes room for n expressions at index at of kernel k, renumbering what refers to the later
 * ones; returns the first of them. */
static int32_t insert_exprs(ljg_program *p, ljg_kernel *k, int32_t at, int n) {
  ljg_kexpr *x = ljb_arena_alloc(&p->arena, ((size_t)k->nexprs + (size_t)n) * sizeof *x);
  memcpy(x, k->exprs, (size_t)at * sizeof *x);
  memcpy(x + at + n, k->exprs + at, (size_t)(k->nexprs - at) * sizeof *x);
  memset(x + at, 0, (size_t)n * sizeof *x);
  k->exprs = x;
  k->nexprs += n;
#define SHIFT(e) if ((e) >= at) (e) += n
  for (int e = at + n; e < k->nexprs; e++)
    for (int i = 0; i < x[e].nin; i++) SHIFT(x[e].in[i]);
  for (int s = 0; s < k->nnests; s++) {
    SHIFT(k->nests[s].value);
    SHIFT(k->nests[s].scatter_index);
  }
  if (k->kind == LJG_K_MATMUL) {
    SHIFT(k->mm_a);
    SHIFT(k->mm_bm);
    SHIFT(k->mm_unpool_at);
    SHIFT(k->mm_unpool_mask);
  }
  if (ljg_kernel_has_window(k)) SHIFT(k->win_src);
#undef SHIFT
  return at;
}

/* A load of the pooled tensor of window-kernel expression `from` (G, M or I; which: its
 * offset) through a view of shape with strides: dims of images sn, of channels sc, of
 * positions 1. */
static ljg_kexpr pooled_load(ljg_program *p, ljg_kernel *k, const ljg_kexpr *from, int64_t off, int ndim,
                             const int64_t *shape, const int64_t *stride) {
  ljg_view v = {.n = 1};
  v.v[0].ndim = ndim;
  v.v[0].offset = off;
  memcpy(v.v[0].shape, shape, (size_t)ndim * sizeof *shape);
  memcpy(v.v[0].stride, stride, (size_t)ndim * sizeof *stride);
  ljg_kexpr x = *from;
  x.view = add_view(p, k, v);
  return x;
}

/* The taps matmul reads G as B and I and M beside it, all as [N, P, C]. */
static void unpool_taps(ljg_program *p, ljg_kernel *k, const ljg_kernel *w, const pooled *pl) {
  int64_t shape[3] = {pl->n, pl->p, pl->c}, stride[3] = {pl->sn, 1, pl->sc};
  k->exprs[k->mm_bm] = pooled_load(p, k, &w->exprs[pl->g], pl->off[0], 3, shape, stride);
  int extra = pl->m >= 0 ? 2 : 1;
  int32_t at = insert_exprs(p, k, k->nexprs, extra);
  k->exprs[at] = pooled_load(p, k, &w->exprs[pl->i], pl->off[2], 3, shape, stride);
  k->mm_unpool_at = at;
  if (pl->m >= 0) {
    k->exprs[at + 1] = pooled_load(p, k, &w->exprs[pl->m], pl->off[1], 3, shape, stride);
    k->mm_unpool_mask = at + 1;
  }
}

/* Nest s, a sum over the image's positions (sum_positions), sums G, masked as the scatter's
 * value was, over the pooled positions instead. */
static void unpool_sum(ljg_program *p, ljg_kernel *k, int s, const ljg_kernel *w, const pooled *pl) {
  ljg_nest *n = &k->nests[s];
  int pos = sum_positions(k, s, pl);
  const ljg_view1 *v = &k->views[k->exprs[n->value].view].v[0];
  int64_t stride[LJ_MAX_DIMS];
  for (int d = 0; d < n->ndim; d++) {
    bool channels = n->shape[d] == pl->c && v->stride[d] == pl->h * pl->w;
    stride[d] = d == pos ? 1 : n->shape[d] == 1 ? 0 : channels ? pl->sc : pl->sn;
  }
  n->rcount = n->rcount / n->shape[pos] * pl->p;
  n->shape[pos] = pl->p;
  ljg_view out = k->views[n->out_view];
  out.v[0].shape[pos] = pl->p;
  n->out_view = add_view(p, k, out);
  int32_t e = n->value;
  if (pl->m < 0) {
    k->exprs[e] = pooled_load(p, k, &w->exprs[pl->g], pl->off[0], n->ndim, n->shape, stride);
    return;
  }
  int32_t at = insert_exprs(p, k, e, 4);
  const ljg_kexpr *where = &w->exprs[w->nests[1].value], *gt = &w->exprs[where->in[0]];
  k->exprs[at] = pooled_load(p, k, &w->exprs[pl->m], pl->off[1], n->ndim, n->shape, stride);
  k->exprs[at + 1] = w->exprs[gt->in[1]];
  k->exprs[at + 2] = *gt;
  k->exprs[at + 2].in[0] = at, k->exprs[at + 2].in[1] = at + 1;
  k->exprs[at + 3] = pooled_load(p, k, &w->exprs[pl->g], pl->off[0], n->ndim, n->shape, stride);
  k->exprs[at + 4] = *where;
  k->exprs[at + 4].in[0] = at + 2, k->exprs[at + 4].in[1] = at + 3, k->exprs[at + 4].in[2] = at + 1;
}

void ljg_fuse_unpool(ljg_program *p, const ljg_graph *g) {
  for (int wi = 0; wi < p->nkernels; wi++) {
    const ljg_kernel *w = &p->kernels[wi];
    pooled pl;
    int taps;
    if (!pool_gradient(p, g, w, &pl) || !readers_fit(p, wi, w->win_out_slot, &pl, &taps)) continue;
    for (int j = wi + 1; j < p->nkernels; j++) {
      ljg_kernel *k = &p->kernels[j];
      if (j == taps) {
        unpool_taps(p, k, w, &pl);
        continue;
      }
      for (int s = 0; s < k->nnests; s++)
        if (ljg_expr_reads(&k->exprs[k->nests[s].value], w->win_out_slot)) unpool_sum(p, k, s, w, &pl);
    }
    p->slots[w->win_out_slot].nbytes = 0;
    p->slots[w->nests[0].out_slot].nbytes = 0;
    memmove(&p->kernels[wi], &p->kernels[wi + 1], (size_t)(p->nkernels - wi - 1) * sizeof *p->kernels);
    p->nkernels--;
    wi--;
  }
}
