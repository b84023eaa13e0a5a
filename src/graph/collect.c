/* collect.c — from pending trace nodes to a canonical graph, and the graph key.
 *
 * A sync's roots are walked depth-first, operands in order; nodes are numbered in post-order,
 * so the same program produces the same node array every step. Data nodes (and nodes a sync
 * already computed) become DATA parameters and scalar nodes SCALAR parameters, in first-use
 * order; their buffers and values are bindings, outside the graph's identity. The walk itself
 * is kept (ljg_walk) with a walk key over the nodes' local hashes and operand indices: a sync
 * seen before is recognized from it and confirmed node by node against the cached graph,
 * without building a graph. The graph key hashes the node array (op, dtype, shape,
 * attributes, operand indices) and the roots: equal keys mean the same function of the
 * parameters, confirmed by ljg_graph_equal on a cache hit. */
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
  free(g->donors);
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
  c->donors = copy_array(g->donors, g->nroots, sizeof *g->donors);
  c->nparams = c->params_cap = g->nparams;
  c->params = copy_array(g->params, g->nparams, sizeof *g->params);
  /* Call sites are copied into the clone's own strings: it outlives the text they came from. */
  size_t total = 0;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].loc) total += strlen(g->nodes[i].loc) + 1;
  char *p = c->strings = total ? ljb_xalloc(total) : NULL;
  for (int i = 0; i < c->n; i++)
    if (g->nodes[i].loc) {
      size_t n = strlen(g->nodes[i].loc) + 1;
      c->nodes[i].loc = memcpy(p, g->nodes[i].loc, n);
      p += n;
    }
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

void ljg_graph_add_root(ljg_graph *g, int32_t node, int32_t donor) {
  if (g->nroots + 1 > g->roots_cap) {
    int cap = g->roots_cap;
    GROW(g->roots, g->nroots, cap, 1);
    GROW(g->donors, g->nroots, g->roots_cap, 1);
  }
  g->donors[g->nroots] = donor;
  g->roots[g->nroots++] = node;
}

static bool is_param(const ljg_node *n) {
  return n->op == LJG_OP_DATA || n->op == LJG_OP_SCALAR || n->data != NULL;
}

/* The local hash a node has as a parameter: a scalar keeps its own (value-free), anything
 * else is DATA of its type. */
static uint64_t param_lhash(const ljg_node *n) {
  if (n->op == LJG_OP_SCALAR || n->op == LJG_OP_DATA) return n->lhash;
  return ljg_local_hash(LJG_OP_DATA, n->dtype, n->ndim, n->shape, &(ljg_attr){0});
}

/* A parameter node's binding: a scalar's value, or the buffer. */
static ljg_binding binding_of(const ljg_node *nd) {
  ljg_binding b = {0};
  if (nd->op == LJG_OP_SCALAR) {
    b.f = nd->attr.f;
    b.i = nd->attr.a[1];
  } else {
    b.buf = nd->data;
  }
  return b;
}

typedef struct frame {
  ljg_node *node;
  int next;
} frame;

/* Numbers nd (post-order), records its binding if it is a parameter, and hashes it. */
static void visit(ljg_walk *w, ljg_node *nd, uint64_t stamp, ljg_binding_vec *binds,
                  ljb_hasher *h) {
  nd->walk = stamp;
  nd->index = w->order.n;
  ljb_vec_push(&w->order, nd);
  if (is_param(nd)) {
    ljb_hash_u64(h, param_lhash(nd));
    if (binds) ljb_vec_push(binds, binding_of(nd));
    return;
  }
  ljb_hash_u64(h, nd->lhash ^ (uint64_t)nd->nin * 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i < nd->nin; i++) ljb_hash_u64(h, (uint64_t)nd->in[i]->index);
}

/* Whether d can receive root's value: a buffer (not a scalar) of root's dtype and size. */
static bool donor_fits(const ljg_node *root, const ljg_node *d) {
  return d && d != root && is_param(d) && d->op != LJG_OP_SCALAR && d->dtype == root->dtype &&
         ljg_numel(d->ndim, d->shape) == ljg_numel(root->ndim, root->shape);
}

void ljg_walk_run(ljg_trace *t, int n, ljg_node *const *roots, ljg_node *const *donors,
                  ljg_walk *w, ljg_binding_vec *binds) {
  w->order.n = w->roots.n = w->donors.n = 0;
  if (binds) binds->n = 0;
  ljb_hasher h;
  ljb_hasher_init(&h, (uint64_t)n);
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
          if (nd->walk != stamp) visit(w, nd, stamp, binds, &h);
          continue;
        }
        ljg_node *child = nd->in[f->next++];
        if (child->walk != stamp) ljb_vec_push(&stack, ((frame){child, 0}));
      }
    }
    ljb_vec_push(&w->roots, root->index);
    ljb_hash_u64(&h, (uint64_t)root->index);
  }
  for (int r = 0; r < n; r++) {
    ljg_node *d = donors ? donors[r] : NULL;
    int32_t idx = donor_fits(roots[r], d) && d->walk == stamp ? d->index : -1;
    ljb_vec_push(&w->donors, idx);
    ljb_hash_u64(&h, (uint64_t)(int64_t)idx);
  }
  ljb_vec_free(&stack);
  w->key = ljb_hasher_final(&h);
}

void ljg_walk_free(ljg_walk *w) {
  ljb_vec_free(&w->order);
  ljb_vec_free(&w->roots);
  ljb_vec_free(&w->donors);
}

/* The graph node a walked trace node becomes (operands aside). */
static ljg_gnode gnode_of(const ljg_node *nd) {
  ljg_gnode gn = {0};
  gn.dtype = nd->dtype;
  gn.ndim = nd->ndim;
  memcpy(gn.shape, nd->shape, sizeof gn.shape);
  gn.loc = nd->loc;
  gn.param = -1;
  if (nd->op == LJG_OP_SCALAR) {
    gn.op = LJG_OP_SCALAR;
    gn.attr.f = nd->attr.f;
    gn.attr.a[1] = nd->attr.a[1];
  } else if (is_param(nd)) {
    gn.op = LJG_OP_DATA;
  } else {
    gn.op = nd->op;
    gn.attr = nd->attr;
    gn.nin = nd->nin;
  }
  return gn;
}

void ljg_walk_graph(const ljg_walk *w, ljg_graph *g) {
  ljg_graph_clear(g);
  LJB_VEC(int32_t) in = {0};
  for (int i = 0; i < w->order.n; i++) {
    const ljg_node *nd = w->order.a[i];
    ljg_gnode gn = gnode_of(nd);
    in.n = 0;
    for (int k = 0; k < gn.nin; k++) ljb_vec_push(&in, nd->in[k]->index);
    ljg_graph_add(g, &gn, in.a);
  }
  for (int r = 0; r < w->roots.n; r++) {
    int32_t d = w->donors.a[r];
    ljg_graph_add_root(g, w->roots.a[r], d < 0 ? -1 : g->nodes[d].param);
  }
  ljb_vec_free(&in);
}

/* Whether trace node nd becomes graph node gn, operands aside: op (or parameter kind),
 * type, shape, identity attributes. */
static bool same_description(const ljg_node *nd, const ljg_gnode *gn) {
  bool param = is_param(nd);
  int op = nd->op == LJG_OP_SCALAR ? LJG_OP_SCALAR : param ? LJG_OP_DATA : nd->op;
  if (gn->op != op || gn->dtype != nd->dtype || gn->ndim != nd->ndim) return false;
  for (int d = 0; d < nd->ndim; d++)
    if (gn->shape[d] != nd->shape[d]) return false;
  if (param) return true;
  if (gn->nin != nd->nin) return false;
  if (ljg_ops[op].attrs == LJG_A_NONE) return true;
  int64_t x[LJ_MAX_DIMS + 2], y[LJ_MAX_DIMS + 2];
  int nx = ljg_identity_attrs(op, nd->ndim, &nd->attr, x);
  return nx == ljg_identity_attrs(op, gn->ndim, &gn->attr, y) && memcmp(x, y, (size_t)nx * sizeof *x) == 0;
}

bool ljg_walk_matches(const ljg_walk *w, const ljg_graph *g) {
  if (g->n != w->order.n || g->nroots != w->roots.n) return false;
  for (int i = 0; i < g->n; i++) {
    const ljg_node *nd = w->order.a[i];
    const ljg_gnode *gn = &g->nodes[i];
    if (!same_description(nd, gn)) return false;
    if (gn->op == LJG_OP_DATA || gn->op == LJG_OP_SCALAR) continue;
    const int32_t *in = ljg_in(g, gn);
    for (int k = 0; k < gn->nin; k++)
      if (in[k] != nd->in[k]->index) return false;
  }
  for (int r = 0; r < g->nroots; r++) {
    int32_t d = w->donors.a[r];
    if (g->roots[r] != w->roots.a[r] || g->donors[r] != (d < 0 ? -1 : g->nodes[d].param)) return false;
  }
  return true;
}

bool ljg_replay(const ljg_trace *t, const uint32_t *ids, const ljg_graph *g, int n,
                ljg_node *const *roots, ljg_node *const *donors, ljg_binding_vec *binds) {
  ljg_node *const *by_id = t->by_id.a;
  uint32_t count = (uint32_t)t->by_id.n;
  if (g->nroots != n) return false;
  for (int r = 0; r < n; r++) {
    uint32_t id = ids[g->roots[r]];
    if (id >= count || by_id[id] != roots[r]) return false;
    /* the donor must be the parameter g names (a donor outside the graph is left to a walk,
     * which sees whether it is among the nodes below the roots) */
    ljg_node *d = donors ? donors[r] : NULL;
    int32_t p = g->donors[r];
    bool same = donor_fits(roots[r], d) ? p >= 0 && ids[g->params[p]] < count && by_id[ids[g->params[p]]] == d
                                        : p < 0;
    if (!same) return false;
  }
  /* Every operand of every node is checked to be the node g names: the nodes reachable from
   * the roots are exactly these, linked as in g, so a walk would number them as g does. */
  binds->n = 0;
  for (int i = 0; i < g->n; i++) {
    if (ids[i] >= count) return false;
    const ljg_node *nd = by_id[ids[i]];
    const ljg_gnode *gn = &g->nodes[i];
    if (!same_description(nd, gn)) return false;
    if (gn->op == LJG_OP_DATA || gn->op == LJG_OP_SCALAR) {
      ljb_vec_push(binds, binding_of(nd));
      continue;
    }
    const int32_t *in = ljg_in(g, gn);
    for (int k = 0; k < gn->nin; k++)
      if (nd->in[k] != by_id[ids[in[k]]]) return false;
  }
  return true;
}

void ljg_collect(ljg_trace *t, int n, ljg_node *const *roots, ljg_graph *g,
                 ljg_binding_vec *binds) {
  ljg_walk w = {0};
  ljg_walk_run(t, n, roots, NULL, &w, binds);
  ljg_walk_graph(&w, g);
  ljg_walk_free(&w);
}

int ljg_identity_attrs(int op, int ndim, const ljg_attr *a, int64_t out[LJ_MAX_DIMS + 2]) {
  switch (ljg_ops[op].attrs) {
  case LJG_A_VALUE:
    if (op == LJG_OP_SCALAR) return 0;
    memcpy(&out[0], &a->f, sizeof(double));
    return 1;
  case LJG_A_PERM:
    memcpy(out, a->a, (size_t)ndim * sizeof(int64_t));
    return ndim;
  case LJG_A_SLICE:
    memcpy(out, a->a, 3 * sizeof(int64_t));
    return 3;
  case LJG_A_DIMS:
  case LJG_A_DIM:
  case LJG_A_BOUND:
    out[0] = a->a[0];
    return 1;
  case LJG_A_WINDOW:
    memcpy(out, a->a, 8 * sizeof(int64_t));
    memcpy(&out[8], &a->f, sizeof(double));
    return 9;
  case LJG_A_NONE: return 0;
  }
  return 0;
}

uint64_t ljg_local_hash(int op, int dt, int ndim, const int64_t *shape, const ljg_attr *attr) {
  ljb_hasher h;
  ljb_hasher_init(&h, (uint64_t)op << 16 | (uint64_t)dt << 8 | (uint64_t)ndim);
  for (int d = 0; d < ndim; d++) ljb_hash_u64(&h, (uint64_t)shape[d]);
  int64_t a[LJ_MAX_DIMS + 2];
  int na = ljg_identity_attrs(op, ndim, attr, a);
  for (int k = 0; k < na; k++) ljb_hash_u64(&h, (uint64_t)a[k]);
  return ljb_hasher_final(&h).lo;
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
    int na = ljg_identity_attrs(n->op, n->ndim, &n->attr, a);
    for (int k = 0; k < na; k++) ljb_hash_u64(&h, (uint64_t)a[k]);
  }
  ljb_hash_u64(&h, (uint64_t)g->nroots);
  for (int r = 0; r < g->nroots; r++) ljb_hash_u64(&h, (uint64_t)g->roots[r]);
  for (int r = 0; r < g->nroots; r++) ljb_hash_u64(&h, (uint64_t)(int64_t)g->donors[r]);
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
  int nx = ljg_identity_attrs(a->op, a->ndim, &a->attr, x);
  int ny = ljg_identity_attrs(b->op, b->ndim, &b->attr, y);
  return nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0;
}

int ljg_graph_first_difference(const ljg_graph *a, const ljg_graph *b) {
  int n = a->n < b->n ? a->n : b->n;
  for (int i = 0; i < n; i++)
    if (!node_same(a, &a->nodes[i], b, &b->nodes[i])) return i;
  if (a->n != b->n) return n;
  if (a->nroots != b->nroots ||
      (a->nroots && (memcmp(a->roots, b->roots, (size_t)a->nroots * sizeof *a->roots) != 0 ||
                     memcmp(a->donors, b->donors, (size_t)a->nroots * sizeof *a->donors) != 0)))
    return a->n;
  return -1;
}

int ljg_graph_same_nodes(const ljg_graph *a, const ljg_graph *b) {
  int n = a->n < b->n ? a->n : b->n, same = 0;
  for (int i = 0; i < n; i++) same += node_same(a, &a->nodes[i], b, &b->nodes[i]);
  return same;
}

bool ljg_graph_equal(const ljg_graph *a, const ljg_graph *b) {
  return ljg_graph_first_difference(a, b) < 0;
}
