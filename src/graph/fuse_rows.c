/* fuse_rows.c — row fusion: consecutive loop kernels over the same rows become one kernel
 * that runs all their nests on a block of rows before going to the next block.
 *
 * softmax is max → exp(x - max) → sum → divide: four kernels, each streaming the whole
 * [rows, cols] tensor through memory. When every kernel splits the same row dim across
 * threads and each reads the others' results only at its own row, the four can run row block
 * by row block: the block's max, exps, sum and quotients stay in cache, and one dispatch
 * replaces four. The kernel's row_block says how many rows a block holds (sized so a block
 * of its widest nest fits in L1); the lowering runs the nests in order inside each block.
 *
 * A kernel B joins the group before it when
 *   - both are LOOPS kernels split over dim 0 with the same number of rows, every nest of
 *     them has that many rows in dim 0 and does not reduce it, none scatters;
 *   - every slot the group writes is written row-disjointly (row r at [r·S, (r+1)·S) of a
 *     buffer of rows·S elements) and B reads it only through plain loads at its own row
 *     (one view level, dim-0 stride S, offset 0, no negative stride) — never as a gather
 *     operand, whose index may point at rows not computed yet.
 * A flat elementwise kernel (its loops collapsed to one dim) is read as rows of the other's
 * row count when that divides it. Only neighbours merge, so no kernel moves past one it
 * depends on.
 *
 * An intermediate that only its row-fused kernel uses (softmax's exps) then needs no more
 * than the block being computed: it becomes a LOCAL slot, one block of rows on the stack of
 * the thread running the kernel, instead of a whole tensor in the scratch arena that every
 * block would write to memory and read back. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* Elements a block of rows should hold in its widest nest: 16 KiB of f32 (half of L1). */
#define ROW_BLOCK_ELEMS 4096
/* The most a LOCAL slot's block may take on a kernel's stack. */
#define LOCAL_MAX_BYTES (64 << 10)

static bool rows_kernel(const ljg_kernel *k) {
  if (k->kind != LJG_K_LOOPS || k->task_dim != 0 || k->ntasks < 1) return false;
  for (int s = 0; s < k->nnests; s++) {
    const ljg_nest *n = &k->nests[s];
    if (n->ndim == 0 || n->shape[0] != k->ntasks || (n->rmask & 1) || n->scatter_index >= 0) return false;
  }
  return true;
}

static bool nonneg_strides(const ljg_view1 *v) {
  for (int d = 0; d < v->ndim; d++)
    if (v->stride[d] < 0) return false;
  return true;
}

/* Whether every point of a row of v (the dims after 0) stays within a row of s elements. */
static bool within_row(const ljg_view1 *v, int64_t s) {
  int64_t last = 0;
  for (int d = 1; d < v->ndim; d++) last += (v->shape[d] - 1) * v->stride[d];
  return last < s;
}

/* The row stride S of a row-disjoint write by nest n, or 0 when it is not one. */
static int64_t write_row_stride(const ljg_program *p, const ljg_kernel *k, const ljg_nest *n) {
  const ljg_view *v = &k->views[n->out_view];
  if (v->n != 1 || v->v[0].offset != 0 || !nonneg_strides(&v->v[0]) || !within_row(&v->v[0], v->v[0].stride[0]))
    return 0;
  int64_t s = v->v[0].stride[0];
  int64_t numel = p->slots[n->out_slot].nbytes / lj_dtype_size(n->out_dtype);
  return s > 0 && s * k->ntasks == numel ? s : 0;
}

/* Whether b reads slot only at its own row, with row stride s. */
static bool reads_own_row(const ljg_kernel *b, int32_t slot, int64_t s) {
  for (int e = 0; e < b->nexprs; e++) {
    const ljg_kexpr *x = &b->exprs[e];
    if (x->kind == LJG_X_BUFFER && x->slot == slot) return false;
    if (x->kind != LJG_X_LOAD || x->slot != slot) continue;
    const ljg_view *v = &b->views[x->view];
    if (v->n != 1 || v->v[0].offset != 0 || v->v[0].stride[0] != s || !nonneg_strides(&v->v[0]) ||
        !within_row(&v->v[0], s))
      return false;
  }
  return true;
}

/* A flat elementwise kernel (one 1-D nest over N points, every view one level, 1-D, offset
 * 0) read as `rows` rows of N / rows: the same points in the same order, now splittable like
 * its neighbours. Its views are copied into the arena, so the kernel it came from is intact
 * when the join does not happen. */
static bool as_rows(ljb_arena *arena, ljg_kernel *k, int64_t rows) {
  if (k->kind != LJG_K_LOOPS || k->nnests != 1 || k->task_dim != 0 || rows < 1) return false;
  const ljg_nest *n = &k->nests[0];
  if (n->ndim != 1 || n->rop >= 0 || n->scatter_index >= 0 || n->shape[0] % rows != 0) return false;
  int64_t cols = n->shape[0] / rows;
  for (int v = 0; v < k->nviews; v++) {
    const ljg_view *w = &k->views[v];
    if (w->n != 1 || w->v[0].ndim != 1 || w->v[0].offset != 0 || w->v[0].stride[0] < 0) return false;
  }
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_BUFFER || k->exprs[e].kind == LJG_X_GATHER) return false;
  ljg_view *views = ljb_arena_alloc(arena, (size_t)k->nviews * sizeof *views);
  for (int v = 0; v < k->nviews; v++) {
    ljg_view1 *w = &views[v].v[0];
    int64_t s = k->views[v].v[0].stride[0];
    views[v] = k->views[v];
    w->ndim = 2;
    w->shape[0] = rows;
    w->shape[1] = cols;
    w->stride[0] = s * cols;
    w->stride[1] = s;
  }
  ljg_nest *nest = ljb_arena_alloc(arena, sizeof *nest);
  *nest = *n;
  nest->ndim = 2;
  nest->shape[0] = rows;
  nest->shape[1] = cols;
  k->views = views;
  k->nests = nest;
  k->ntasks = rows;
  return true;
}

static bool can_join(const ljg_program *p, const ljg_kernel *a, const ljg_kernel *b) {
  if (!rows_kernel(a) || !rows_kernel(b) || a->ntasks != b->ntasks) return false;
  for (int s = 0; s < a->nnests; s++) {
    int64_t stride = write_row_stride(p, a, &a->nests[s]);
    if (!stride || !reads_own_row(b, a->nests[s].out_slot, stride)) return false;
  }
  return true;
}

/* a followed by b, as one kernel whose exprs and views are a's then b's. */
static void join(ljb_arena *arena, ljg_kernel *a, const ljg_kernel *b) {
  int ne = a->nexprs + b->nexprs, nv = a->nviews + b->nviews, nn = a->nnests + b->nnests;
  ljg_kexpr *x = ljb_arena_alloc(arena, (size_t)ne * sizeof *x);
  ljg_view *v = ljb_arena_alloc(arena, (size_t)nv * sizeof *v);
  ljg_nest *n = ljb_arena_alloc(arena, (size_t)nn * sizeof *n);
  memcpy(x, a->exprs, (size_t)a->nexprs * sizeof *x);
  memcpy(v, a->views, (size_t)a->nviews * sizeof *v);
  memcpy(n, a->nests, (size_t)a->nnests * sizeof *n);
  for (int e = 0; e < b->nexprs; e++) {
    ljg_kexpr *y = &x[a->nexprs + e];
    *y = b->exprs[e];
    for (int i = 0; i < y->nin; i++) y->in[i] += a->nexprs;
    if (y->kind == LJG_X_LOAD || y->kind == LJG_X_INDEX || y->kind == LJG_X_BUFFER) y->view += a->nviews;
  }
  memcpy(v + a->nviews, b->views, (size_t)b->nviews * sizeof *v);
  for (int s = 0; s < b->nnests; s++) {
    ljg_nest *m = &n[a->nnests + s];
    *m = b->nests[s];
    m->value += a->nexprs;
    m->out_view += a->nviews;
  }
  a->exprs = x;
  a->nexprs = ne;
  a->views = v;
  a->nviews = nv;
  a->nests = n;
  a->nnests = nn;
  a->work += b->work;
  a->row_block = 1; /* sized below */
}

/* Whether a kernel other than k reads or writes slot. */
static bool used_elsewhere(const ljg_program *p, const ljg_kernel *k, int32_t slot) {
  for (int i = 0; i < p->nkernels; i++) {
    const ljg_kernel *o = &p->kernels[i];
    if (o == k) continue;
    for (int e = 0; e < o->nexprs; e++)
      if (o->exprs[e].kind != LJG_X_CONST && o->exprs[e].kind != LJG_X_OP && o->exprs[e].slot == slot) return true;
    for (int s = 0; s < o->nnests; s++)
      if (o->nests[s].out_slot == slot) return true;
    if (o->kind != LJG_K_LOOPS && o->mm_out_slot == slot) return true;
  }
  return false;
}

/* Whether expression e of k (or one it depends on) loads slot. */
static bool expr_reads(const ljg_kernel *k, int32_t e, int32_t slot) {
  const ljg_kexpr *x = &k->exprs[e];
  if ((x->kind == LJG_X_LOAD || x->kind == LJG_X_BUFFER) && x->slot == slot) return true;
  for (int i = 0; i < x->nin; i++)
    if (expr_reads(k, x->in[i], slot)) return true;
  return false;
}

/* Makes the intermediates that only row-fused kernel k uses LOCAL: each written by one nest,
 * row-disjointly, and read by later nests at their own row. */
static void localize(ljg_program *p, ljg_kernel *k) {
  for (int w = 0; w < k->nnests; w++) {
    const ljg_nest *n = &k->nests[w];
    ljg_slot *sl = &p->slots[n->out_slot];
    int64_t stride = write_row_stride(p, k, n);
    int64_t row_bytes = stride * lj_dtype_size(sl->dtype);
    if (sl->kind != LJG_SLOT_TEMP || !stride || k->row_block * row_bytes > LOCAL_MAX_BYTES ||
        !reads_own_row(k, n->out_slot, stride) || used_elsewhere(p, k, n->out_slot))
      continue;
    bool ordered = true; /* no other nest writes it, none before the writer reads it */
    for (int r = 0; r < k->nnests && ordered; r++)
      if (r != w)
        ordered = k->nests[r].out_slot != n->out_slot && (r > w || !expr_reads(k, k->nests[r].value, n->out_slot));
    if (!ordered) continue;
    sl->kind = LJG_SLOT_LOCAL;
    sl->row_bytes = row_bytes;
    sl->nbytes = k->row_block * row_bytes;
  }
}

void ljg_fuse_rows(ljg_program *p) {
  int out = 0;
  for (int i = 0; i < p->nkernels; i++) {
    if (out > 0) {
      /* on copies: a flat neighbour is read as rows of the other's row count */
      ljg_kernel a = p->kernels[out - 1], b = p->kernels[i];
      if (a.ntasks != b.ntasks && !as_rows(&p->arena, &b, a.ntasks)) as_rows(&p->arena, &a, b.ntasks);
      if (can_join(p, &a, &b)) {
        join(&p->arena, &a, &b);
        p->kernels[out - 1] = a;
        continue;
      }
    }
    p->kernels[out++] = p->kernels[i];
  }
  p->nkernels = out;
  for (int i = 0; i < p->nkernels; i++) {
    ljg_kernel *k = &p->kernels[i];
    if (k->row_block == 0) continue;
    int64_t widest = 1;
    for (int s = 0; s < k->nnests; s++) {
      int64_t row = ljg_numel(k->nests[s].ndim, k->nests[s].shape) / k->ntasks;
      if (row > widest) widest = row;
    }
    int64_t rb = ROW_BLOCK_ELEMS / widest;
    k->row_block = rb < 1 ? 1 : rb > k->ntasks ? k->ntasks : rb;
    localize(p, k);
  }
}
