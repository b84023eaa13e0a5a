/* rewrite.c — the graph rewriter passes are written with: walk the old graph in order, add
 * each node (or a replacement) to a new graph, with equal nodes shared by hashing. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

void ljg_rw_init(ljg_rewriter *rw, const ljg_graph *old) {
  memset(rw, 0, sizeof *rw);
  ljg_graph_init(&rw->out);
  rw->map = ljb_xalloc(((size_t)old->n + 1) * sizeof *rw->map);
  rw->table_cap = 64;
  while (rw->table_cap < 2 * old->n + 16) rw->table_cap *= 2;
  rw->table = ljb_xalloc((size_t)rw->table_cap * sizeof *rw->table);
  memset(rw->table, 0xff, (size_t)rw->table_cap * sizeof *rw->table);
}

static uint64_t gnode_hash(const ljg_gnode *n, const int32_t *in) {
  ljb_hasher h;
  ljb_hasher_init(&h, (uint64_t)n->op << 16 | n->dtype << 8 | n->ndim);
  ljb_hash_bytes(&h, n->shape, (size_t)n->ndim * sizeof *n->shape);
  ljb_hash_bytes(&h, in, (size_t)n->nin * sizeof *in);
  ljb_hash_bytes(&h, &n->attr, sizeof n->attr);
  return ljb_hasher_final(&h).lo;
}

static bool gnode_same(const ljg_graph *g, const ljg_gnode *a, const ljg_gnode *b,
                       const int32_t *bin) {
  return a->op == b->op && a->dtype == b->dtype && a->ndim == b->ndim && a->nin == b->nin &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0 &&
         memcmp(&a->attr, &b->attr, sizeof a->attr) == 0 &&
         (a->nin == 0 || memcmp(ljg_in(g, a), bin, (size_t)a->nin * sizeof *bin) == 0);
}

int ljg_rw_add(ljg_rewriter *rw, const ljg_gnode *proto, const int32_t *in) {
  ljg_graph *g = &rw->out;
  if (proto->op == LJG_OP_DATA || proto->op == LJG_OP_SCALAR) return ljg_graph_add(g, proto, in);
  if (2 * (g->n + 1) > rw->table_cap) {
    int cap = rw->table_cap * 2;
    int32_t *t = ljb_xalloc((size_t)cap * sizeof *t);
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (int k = 0; k < rw->table_cap; k++) {
      int32_t idx = rw->table[k];
      if (idx < 0) continue;
      const ljg_gnode *n = &g->nodes[idx];
      uint64_t h = gnode_hash(n, ljg_in(g, n));
      int b = (int)(h & (uint64_t)(cap - 1));
      while (t[b] >= 0) b = (b + 1) & (cap - 1);
      t[b] = idx;
    }
    free(rw->table);
    rw->table = t;
    rw->table_cap = cap;
  }
  uint64_t h = gnode_hash(proto, in);
  int b = (int)(h & (uint64_t)(rw->table_cap - 1));
  for (; rw->table[b] >= 0; b = (b + 1) & (rw->table_cap - 1))
    if (gnode_same(g, &g->nodes[rw->table[b]], proto, in)) return rw->table[b];
  int idx = ljg_graph_add(g, proto, in);
  rw->table[b] = idx;
  return idx;
}

int ljg_rw_copy(ljg_rewriter *rw, const ljg_graph *old, int i) {
  const ljg_gnode *n = &old->nodes[i];
  int32_t small[8] = {0};
  int32_t *in = n->nin <= 8 ? small : ljb_xalloc((size_t)n->nin * sizeof *in);
  const int32_t *oin = ljg_in(old, n);
  for (int k = 0; k < n->nin; k++) in[k] = rw->map[oin[k]];
  int idx = ljg_rw_add(rw, n, in);
  if (in != small) free(in);
  return idx;
}

void ljg_rw_finish(ljg_rewriter *rw, ljg_graph *old) {
  ljg_graph *g = &rw->out;
  for (int r = 0; r < old->nroots; r++) ljg_graph_add_root(g, rw->map[old->roots[r]], old->donors[r]);
  g->strings = old->strings;
  old->strings = NULL;
  ljg_graph_free(old);
  *old = *g;
  free(rw->map);
  free(rw->table);
}

bool ljg_uniform_const(const ljg_graph *g, int idx, double *v) {
  const ljg_gnode *n = &g->nodes[idx];
  while (n->op == LJG_OP_RESHAPE || n->op == LJG_OP_EXPAND) n = &g->nodes[ljg_in(g, n)[0]];
  if (n->op != LJG_OP_CONST) return false;
  *v = n->attr.f;
  return true;
}

int ljg_rw_const(ljg_rewriter *rw, lj_dtype dt, double v, int ndim, const int64_t *shape) {
  ljg_gnode c = {.op = LJG_OP_CONST, .dtype = (uint8_t)dt, .param = -1};
  c.attr.f = v;
  int32_t idx = ljg_rw_add(rw, &c, NULL);
  if (ndim == 0) return idx;
  ljg_gnode r = {.op = LJG_OP_RESHAPE, .dtype = (uint8_t)dt, .ndim = (uint8_t)ndim, .nin = 1, .param = -1};
  bool ones = true;
  for (int d = 0; d < ndim; d++) {
    r.shape[d] = 1;
    ones &= shape[d] == 1;
  }
  idx = ljg_rw_add(rw, &r, &idx);
  if (ones) return idx;
  r.op = LJG_OP_EXPAND;
  memcpy(r.shape, shape, (size_t)ndim * sizeof *shape);
  return ljg_rw_add(rw, &r, &idx);
}
