/* collect.c — from pending trace nodes to a canonical graph, and the graph key.
 *
 * A sync's roots are walked depth-first, operands in order; nodes are numbered in post-order,
 * so the same program produces the same node array every step. Data nodes (and nodes a sync
 * already computed) become DATA parameters and scalar nodes SCALAR parameters, in first-use
 * order; their buffers and values are bindings, outside the graph's identity. The key hashes
 * the node array (op, dtype, shape, attributes, operand indices) and the roots: equal keys
 * mean the same function of the parameters, confirmed by ljg_graph_equal on a cache hit. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

void ljg_graph_init(ljg_graph *g) { memset(g, 0, sizeof *g); }

void ljg_graph_clear(ljg_graph *g) {
  g->n = g->nops = g->nroots = g->nparams = 0;
  free(g->strings);
  g->strings = NULL;
}

void ljg_graph_free(ljg_graph *g) {
  free(g->nodes);
  free(g->operands);
  free(g->roots);
  free(g->params);
  free(g->strings);
  memset(g, 0, sizeof *g);
}

#define GROW(arr, n, cap, extra)                                                          \
  do {                                                                                    \
    if ((n) + (extra) > (cap)) {                                                          \
      int c_ = (cap) ? (cap) : 16;                                                        \
      while (c_ < (n) + (extra)) c_ *= 2;                                                 \
      (arr) = ljb_xrealloc((arr), (size_t)c_ * sizeof *(arr));                            \
      (cap) = c_;                                                                         \
    }                                                                                     \
  } while (0)

/* A malloc'd copy of n elements of size sz (never NULL, even for 0). */
static void *copy_array(const void *src, int n, size_t sz) {
  void *p = ljb_xalloc((size_t)n * sz + 1);
  if (n) memcpy(p, src, (size_t)n * sz);
  return p;
}

ljg_graph *ljg_graph_clone(const ljg_graph *g) {
  ljg_graph *c = ljb_xcalloc(1, sizeof *c);
  c->n = c->cap = g->n;
  c->nodes = copy_array(g->nodes, g->n, sizeof *g->nodes);
  c->nops = c->ops_cap = g->nops;
  c->operands = copy_array(g->operands, g->nops, sizeof *g->operands);
  c->nroots = c->roots_cap = g->nroots;
  c->roots = copy_array(g->roots, g->nroots, sizeof *g->roots);
  c->nparams = c->params_cap = g->nparams;
  c->params = copy_array(g->params, g->nparams, sizeof *g->params);
  /* Call-site strings point into static storage or the trace; a clone keeps none. */
  for (int i = 0; i < c->n; i++) c->nodes[i].loc = NULL;
  return c;
}

int ljg_graph_add(ljg_graph *g, const ljg_gnode *proto, const int32_t *in) {
  /* proto and in may point into g itself (a pass re-adding a node's operands): copy them
   * before growing the arrays they live in */
  ljg_gnode copy = *proto;
  int32_t small[8];
  int32_t *ops = copy.nin <= 8 ? small : ljb_xalloc((size_t)copy.nin * sizeof *ops);
  if (copy.nin) memcpy(ops, in, (size_t)copy.nin * sizeof *ops);
  GROW(g->nodes, g->n, g->cap, 1);
  GROW(g->operands, g->nops, g->ops_cap, copy.nin);
  ljg_gnode *n = &g->nodes[g->n];
  *n = copy;
  n->in0 = g->nops;
  for (int i = 0; i < copy.nin; i++) {
    LJ_ASSERT(ops[i] >= 0 && ops[i] < g->n);
    g->operands[g->nops++] = ops[i];
  }
  if (ops != small) free(ops);
  if (n->op == LJG_OP_DATA || n->op == LJG_OP_SCALAR) {
    if (n->param < 0) n->param = g->nparams;
    GROW(g->params, g->nparams, g->params_cap, 1);
    g->params[g->nparams++] = g->n;
  } else {
    n->param = -1;
  }
  return g->n++;
}

void ljg_graph_add_root(ljg_graph *g, int32_t node) {
  GROW(g->roots, g->nroots, g->roots_cap, 1);
  g->roots[g->nroots++] = node;
}

static bool is_param(const ljg_node *n) {
  return n->op == LJG_OP_DATA || n->op == LJG_OP_SCALAR || n->data != NULL;
}

typedef struct frame {
  ljg_node *node;
  int next;
} frame;

static int emit(ljg_graph *g, ljg_node *nd, uint64_t stamp, ljg_binding_vec *binds) {
  ljg_gnode gn = {0};
  int32_t in[64] = {0};
  int32_t *inp = in;
  gn.dtype = nd->dtype;
  gn.ndim = nd->ndim;
  memcpy(gn.shape, nd->shape, sizeof gn.shape);
  gn.loc = nd->loc;
  gn.param = -1;
  if (is_param(nd)) {
    ljg_binding b = {0};
    if (nd->op == LJG_OP_SCALAR) {
      gn.op = LJG_OP_SCALAR;
      gn.attr.f = b.f = nd->attr.f;
      gn.attr.a[1] = b.i = nd->attr.a[1];
    } else {
      gn.op = LJG_OP_DATA;
      b.buf = nd->data;
    }
    if (binds) ljb_vec_push(binds, b);
  } else {
    gn.op = nd->op;
    gn.attr = nd->attr;
    gn.nin = nd->nin;
    if (nd->nin > (int)LJ_COUNT_OF(in)) inp = ljb_xalloc((size_t)nd->nin * sizeof *inp);
    for (int i = 0; i < nd->nin; i++) inp[i] = nd->in[i]->index;
  }
  int idx = ljg_graph_add(g, &gn, inp);
  if (inp != in) free(inp);
  nd->walk = stamp;
  nd->index = idx;
  return idx;
}

void ljg_collect(ljg_trace *t, int n, ljg_node *const *roots, ljg_graph *g,
                 ljg_binding_vec *binds) {
  ljg_graph_clear(g);
  if (binds) binds->n = 0;
  uint64_t stamp = ++t->walk;
  LJB_VEC(frame) stack = {0};
  for (int r = 0; r < n; r++) {
    ljg_node *root = roots[r];
    if (root->walk != stamp) {
      ljb_vec_push(&stack, ((frame){root, 0}));
      while (stack.n) {
        frame *f = &stack.a[stack.n - 1];
        ljg_node *nd = f->node;
        if (is_param(nd) || f->next == nd->nin) {
          stack.n--;
          if (nd->walk != stamp) emit(g, nd, stamp, binds);
          continue;
        }
        ljg_node *child = nd->in[f->next++];
        if (child->walk != stamp) ljb_vec_push(&stack, ((frame){child, 0}));
      }
    }
    ljg_graph_add_root(g, root->index);
  }
  ljb_vec_free(&stack);
}

/* The attribute words that are part of a node's identity. */
static int identity_attrs(const ljg_gnode *n, int64_t out[LJ_MAX_DIMS + 2]) {
  switch (ljg_ops[n->op].attrs) {
  case LJG_A_VALUE:
    if (n->op == LJG_OP_SCALAR) return 0;
    memcpy(&out[0], &n->attr.f, sizeof(double));
    return 1;
  case LJG_A_PERM:
    memcpy(out, n->attr.a, (size_t)n->ndim * sizeof(int64_t));
    return n->ndim;
  case LJG_A_SLICE:
    memcpy(out, n->attr.a, 3 * sizeof(int64_t));
    return 3;
  case LJG_A_DIMS:
  case LJG_A_DIM:
  case LJG_A_BOUND:
    out[0] = n->attr.a[0];
    return 1;
  case LJG_A_WINDOW:
    memcpy(out, n->attr.a, 8 * sizeof(int64_t));
    memcpy(&out[8], &n->attr.f, sizeof(double));
    return 9;
  case LJG_A_NONE: return 0;
  }
  return 0;
}

ljb_hash ljg_graph_key(const ljg_graph *g, ljb_hash env_seed) {
  ljb_hasher h;
  ljb_hasher_init(&h, env_seed.lo);
  ljb_hash_u64(&h, env_seed.hi);
  ljb_hash_u64(&h, (uint64_t)g->n);
  for (int i = 0; i < g->n; i++) {
    const ljg_gnode *n = &g->nodes[i];
    ljb_hash_u64(&h, (uint64_t)n->op | (uint64_t)n->dtype << 16 | (uint64_t)n->ndim << 24 |
                         (uint64_t)(uint32_t)n->nin << 32);
    for (int d = 0; d < n->ndim; d++) ljb_hash_u64(&h, (uint64_t)n->shape[d]);
    const int32_t *in = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) ljb_hash_u64(&h, (uint64_t)in[k]);
    int64_t a[LJ_MAX_DIMS + 2];
    int na = identity_attrs(n, a);
    for (int k = 0; k < na; k++) ljb_hash_u64(&h, (uint64_t)a[k]);
  }
  ljb_hash_u64(&h, (uint64_t)g->nroots);
  for (int r = 0; r < g->nroots; r++) ljb_hash_u64(&h, (uint64_t)g->roots[r]);
  return ljb_hasher_final(&h);
}

static bool node_same(const ljg_graph *ga, const ljg_gnode *a, const ljg_graph *gb,
                      const ljg_gnode *b) {
  if (a->op != b->op || a->dtype != b->dtype || a->ndim != b->ndim || a->nin != b->nin ||
      a->param != b->param)
    return false;
  if (memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) != 0) return false;
  if (a->nin && memcmp(ljg_in(ga, a), ljg_in(gb, b), (size_t)a->nin * sizeof(int32_t)) != 0) return false;
  int64_t x[LJ_MAX_DIMS + 2], y[LJ_MAX_DIMS + 2];
  int nx = identity_attrs(a, x), ny = identity_attrs(b, y);
  return nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0;
}

int ljg_graph_first_difference(const ljg_graph *a, const ljg_graph *b) {
  int n = a->n < b->n ? a->n : b->n;
  for (int i = 0; i < n; i++)
    if (!node_same(a, &a->nodes[i], b, &b->nodes[i])) return i;
  if (a->n != b->n) return n;
  if (a->nroots != b->nroots ||
      (a->nroots && memcmp(a->roots, b->roots, (size_t)a->nroots * sizeof *a->roots) != 0))
    return a->n;
  return -1;
}

bool ljg_graph_equal(const ljg_graph *a, const ljg_graph *b) {
  return ljg_graph_first_difference(a, b) < 0;
}
