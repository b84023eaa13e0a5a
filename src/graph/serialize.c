/* serialize.c — graphs and fused programs as binary records, for the persistent cache
 * (runtime/disk_cache.h has the entry layout). One visitor per structure walks its fields in a
 * fixed order and either writes each at its in-memory width, in host byte order, or reads it
 * back, so the format is written down once. Counts precede arrays; call sites are not kept.
 * Reading checks every count against the bytes left and every index against what it points
 * into, so a malformed record is refused, never followed. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct io {
  ljb_str *out;     /* writing (the visitors store nothing but what they read back) */
  ljb_reader *in;   /* reading */
  ljb_arena *arena; /* reading a program: where its arrays go */
} io;

static void field(io *x, void *v, size_t n) {
  if (x->out)
    ljb_str_put(x->out, v, n);
  else
    ljb_read(x->in, v, n);
}
#define F(x, lv) field((x), &(lv), sizeof(lv))

static bool bad(const io *x) { return x->in && x->in->bad; }

/* The count *n of an array of elements of `elem` bytes in memory and at least `min` bytes in
 * the record. Writing: returns arr. Reading: a fresh zeroed array for them, or NULL when the
 * count is negative or more than the bytes left can hold. */
static void *count(io *x, int *n, void *arr, size_t elem, size_t min) {
  F(x, *n);
  if (!x->in) return arr;
  if (x->in->bad || *n < 0 || (size_t)(x->in->end - x->in->p) / min < (size_t)*n) {
    x->in->bad = true;
    *n = 0;
    return NULL;
  }
  size_t bytes = ((size_t)*n + 1) * elem;
  return x->arena ? ljb_arena_alloc(x->arena, bytes) : ljb_xcalloc((size_t)*n + 1, elem);
}

static void check(io *x, bool ok) {
  if (x->in && !ok) x->in->bad = true;
}

static void gnode_io(io *x, ljg_gnode *n) {
  F(x, n->op);
  F(x, n->dtype);
  F(x, n->ndim);
  F(x, n->nin);
  F(x, n->in0);
  F(x, n->param);
  F(x, n->shape);
  F(x, n->attr.a);
  F(x, n->attr.f);
  if (x->in) n->loc = NULL;
}

static void int32s_io(io *x, int32_t *a, int n) {
  for (int i = 0; i < n; i++) F(x, a[i]);
}

static void graph_io(io *x, ljg_graph *g) {
  if ((g->nodes = count(x, &g->n, g->nodes, sizeof *g->nodes, 8))) {
    for (int i = 0; i < g->n; i++) gnode_io(x, &g->nodes[i]);
  }
  if ((g->operands = count(x, &g->nops, g->operands, sizeof *g->operands, sizeof *g->operands))) {
    int32s_io(x, g->operands, g->nops);
  }
  if ((g->roots = count(x, &g->nroots, g->roots, sizeof *g->roots, 2 * sizeof *g->roots))) {
    int32s_io(x, g->roots, g->nroots);
    if (x->in) g->donors = ljb_xcalloc((size_t)g->nroots + 1, sizeof *g->donors);
    int32s_io(x, g->donors, g->nroots);
  }
  if ((g->params = count(x, &g->nparams, g->params, sizeof *g->params, sizeof *g->params))) {
    int32s_io(x, g->params, g->nparams);
  }
  if (!x->in || bad(x)) return;
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    check(x, n->op < LJG_NUM_OPS && ljg_dtype_valid(n->dtype) && n->ndim <= LJ_MAX_DIMS && n->nin >= 0 &&
                 n->in0 >= 0 && n->in0 <= g->nops - n->nin && n->param >= -1 && n->param < g->nparams);
    for (int k = 0; !bad(x) && k < n->nin; k++) check(x, g->operands[n->in0 + k] >= 0 && g->operands[n->in0 + k] < i);
  }
  for (int r = 0; r < g->nroots; r++)
    check(x, g->roots[r] >= 0 && g->roots[r] < g->n && g->donors[r] >= -1 && g->donors[r] < g->nparams);
  for (int p = 0; p < g->nparams; p++) check(x, g->params[p] >= 0 && g->params[p] < g->n);
}

void ljg_graph_write(ljb_str *out, const ljg_graph *g) {
  io x = {.out = out};
  graph_io(&x, (ljg_graph *)g);
}

bool ljg_graph_read(ljb_reader *in, ljg_graph *g) {
  ljg_graph_init(g);
  io x = {.in = in};
  graph_io(&x, g);
  g->cap = g->n;
  g->ops_cap = g->nops;
  g->roots_cap = g->nroots;
  g->params_cap = g->nparams;
  if (!in->bad) return true;
  ljg_graph_free(g);
  return false;
}

/* ---- programs ------------------------------------------------------------------------------ */

static void nest_io(io *x, ljg_nest *n) {
  F(x, n->ndim);
  F(x, n->row_dims);
  F(x, n->shape);
  F(x, n->rmask);
  F(x, n->rop);
  F(x, n->value);
  F(x, n->out_slot);
  F(x, n->out_view);
  F(x, n->out_dtype);
  F(x, n->rcount);
  F(x, n->scatter_index);
  F(x, n->scatter_dim);
  check(x, n->ndim >= 0 && n->ndim <= LJ_MAX_DIMS && n->row_dims >= 1 && n->row_dims <= (n->ndim > 1 ? n->ndim : 1));
}

static void expr_io(io *x, ljg_kexpr *e) {
  F(x, e->kind);
  F(x, e->dtype);
  F(x, e->op);
  F(x, e->nin);
  F(x, e->in);
  F(x, e->slot);
  F(x, e->view);
  F(x, e->node);
  F(x, e->aux);
  F(x, e->value);
}

static void view_io(io *x, ljg_view *v) {
  F(x, v->n);
  check(x, v->n >= 0 && v->n <= LJG_MAX_VIEWS);
  for (int l = 0; l < v->n && !bad(x); l++) {
    ljg_view1 *t = &v->v[l];
    F(x, t->ndim);
    F(x, t->shape);
    F(x, t->stride);
    F(x, t->offset);
  }
}

static void kernel_io(io *x, ljg_kernel *k) {
  int kind = k->kind;
  F(x, kind);
  k->kind = (ljg_kkind)kind;
  F(x, k->node);
  if ((k->nests = count(x, &k->nnests, k->nests, sizeof *k->nests, 16)))
    for (int i = 0; i < k->nnests; i++) nest_io(x, &k->nests[i]);
  if ((k->exprs = count(x, &k->nexprs, k->exprs, sizeof *k->exprs, 16)))
    for (int i = 0; i < k->nexprs; i++) expr_io(x, &k->exprs[i]);
  if ((k->views = count(x, &k->nviews, k->views, sizeof *k->views, 4)))
    for (int i = 0; i < k->nviews; i++) view_io(x, &k->views[i]);
  F(x, k->task_dim);
  F(x, k->ntasks);
  F(x, k->row_block);
  F(x, k->task_rows);
  F(x, k->per_task_at);
  F(x, k->col_block);
  F(x, k->work);
  F(x, k->mm_b);
  F(x, k->mm_m);
  F(x, k->mm_n);
  F(x, k->mm_k);
  F(x, k->mm_a);
  F(x, k->mm_bm);
  F(x, k->mm_out_slot);
  F(x, k->mm_dtype);
  F(x, k->mm_sum);
  F(x, k->mm_col_tasks);
  F(x, k->mm_no_winograd);
  F(x, k->mm_task_rows);
  F(x, k->mm_cols);
  F(x, k->mm_win);
  F(x, k->mm_img);
  F(x, k->mm_oh);
  F(x, k->mm_ow);
  F(x, k->mm_unpool_at);
  F(x, k->mm_unpool_mask);
  F(x, k->win_op);
  F(x, k->win_at);
  F(x, k->win_src);
  F(x, k->win_out_slot);
  F(x, k->win_dtype);
  F(x, k->win);
  F(x, k->win_fill);
  F(x, k->win_img);
  F(x, k->win_oh);
  F(x, k->win_ow);
  F(x, k->tm);
  F(x, k->tm_dtype);
  F(x, k->tm_n);
  F(x, k->tm_k);
  F(x, k->tm_a);
  F(x, k->tm_bm);
  F(x, k->tm_out_slot);
  check(x, kind >= LJG_K_LOOPS && kind <= LJG_K_WINDOW && k->ntasks >= 0 &&
               (kind != LJG_K_MATMUL || k->mm_task_rows >= 1) && k->task_rows >= 0 &&
               k->per_task_at >= 0 && k->per_task_at <= k->nnests && k->col_block >= 0 && k->mm_unpool_at >= -1 &&
               k->mm_sum >= 0 && (k->mm_sum == 0 || (k->mm_b % k->mm_sum == 0 && k->ntasks % k->mm_sum == 0)) &&
               k->mm_unpool_at < k->nexprs && k->mm_unpool_mask >= -1 && k->mm_unpool_mask < k->nexprs &&
               k->tm <= 1 && (!k->tm || (kind == LJG_K_MATMUL && k->tm_a >= 0 && k->tm_a < k->nexprs &&
                                         k->tm_bm >= 0 && k->tm_bm < k->nexprs)));
}

static void slot_io(io *x, ljg_slot *s) {
  F(x, s->kind);
  F(x, s->dtype);
  F(x, s->param);
  F(x, s->node);
  F(x, s->nbytes);
  F(x, s->offset);
  F(x, s->row_bytes);
}

/* Reading: what the runtime binds must stay in range of g (the graph the program computes)
 * and of the scratch arena. */
static void check_slots(io *x, const ljg_program *p, const ljg_graph *g) {
  check(x, p->nroots == g->nroots && p->scratch_bytes >= 0);
  for (int s = 0; s < p->nslots && !bad(x); s++) {
    const ljg_slot *sl = &p->slots[s];
    check(x, sl->nbytes >= 0 && ljg_dtype_valid(sl->dtype));
    switch (sl->kind) {
    case LJG_SLOT_PARAM:
    case LJG_SLOT_SCALAR: check(x, sl->param >= 0 && sl->param < g->nparams); break;
    case LJG_SLOT_OUTPUT: /* a donor: a DATA parameter of the same size */
      check(x, sl->param == -1 || (sl->param >= 0 && sl->param < g->nparams &&
                                   g->nodes[g->params[sl->param]].op == LJG_OP_DATA &&
                                   ljg_gnumel(&g->nodes[g->params[sl->param]]) * (int64_t)lj_dtype_size(sl->dtype) == sl->nbytes));
      break;
    case LJG_SLOT_TEMP: check(x, sl->offset >= 0 && sl->offset <= p->scratch_bytes - sl->nbytes); break;
    case LJG_SLOT_LOCAL: check(x, sl->row_bytes > 0 && sl->nbytes % sl->row_bytes == 0); break;
    default: check(x, false); break;
    }
  }
  /* a root is an output, or a parameter's own buffer when it only views it (a reshape) */
  for (int r = 0; r < p->nroots && !bad(x); r++)
    check(x, p->root_slot[r] >= 0 && p->root_slot[r] < p->nslots &&
                 (p->slots[p->root_slot[r]].kind == LJG_SLOT_OUTPUT || p->slots[p->root_slot[r]].kind == LJG_SLOT_PARAM));
}

static void program_io(io *x, ljg_program *p) {
  if ((p->kernels = count(x, &p->nkernels, p->kernels, sizeof *p->kernels, 64)))
    for (int k = 0; k < p->nkernels && !bad(x); k++) kernel_io(x, &p->kernels[k]);
  if ((p->slots = count(x, &p->nslots, p->slots, sizeof *p->slots, 16)))
    for (int s = 0; s < p->nslots; s++) slot_io(x, &p->slots[s]);
  if ((p->root_slot = count(x, &p->nroots, p->root_slot, sizeof *p->root_slot, sizeof *p->root_slot)))
    int32s_io(x, p->root_slot, p->nroots);
  F(x, p->scratch_bytes);
}

void ljg_program_write(ljb_str *out, const ljg_program *p) {
  io x = {.out = out};
  program_io(&x, (ljg_program *)p);
}

ljg_program *ljg_program_read(ljb_reader *in, const ljg_graph *g) {
  ljg_program *p = ljb_xcalloc(1, sizeof *p);
  io x = {.in = in, .arena = &p->arena};
  program_io(&x, p);
  if (!in->bad) check_slots(&x, p, g);
  if (!in->bad) return p;
  ljg_program_free(p);
  return NULL;
}
