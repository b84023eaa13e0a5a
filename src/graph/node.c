/* node.c — a device's trace: nodes recorded by ops, hash-consed in an arena.
 *
 * Every recorded op goes through ljg_node_make, which hashes the op, dtype, shape,
 * attributes and the identity of the operands, and returns an existing equal node when
 * there is one (common subexpressions are free). Data nodes are keyed by their buffer, so
 * one buffer has one node per trace; scalar parameters carry a unique sequence number so two
 * uses of the same value stay two parameters. The arena is reset when a sync leaves no
 * pending tensor on the device; a sync that leaves some drops the buffers of the nodes no live
 * tensor reaches. */
#include "graph/graph.h"
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

void ljg_trace_init(ljg_trace *t) {
  memset(t, 0, sizeof *t);
  t->epoch = 1;
}

void ljg_trace_reset(ljg_trace *t) {
  for (int i = 0; i < t->held.n; i++) {
    ljr_buffer_release(t->held.a[i]->data);
    t->held.a[i]->data = NULL;
  }
  t->held.n = 0;
  if (t->table) memset(t->table, 0, t->table_cap * sizeof *t->table);
  t->by_id.n = 0;
  ljb_arena_reset(&t->arena);
  t->any_grad = false;
  t->epoch++;
}

void ljg_trace_release_unreached(ljg_trace *t, int n, ljg_node *const *live) {
  uint64_t stamp = ++t->walk;
  LJB_VEC(ljg_node *) stack = {0};
  for (int i = 0; i < n; i++)
    if (live[i]->walk != stamp) {
      live[i]->walk = stamp;
      ljb_vec_push(&stack, live[i]);
    }
  while (stack.n) {
    ljg_node *x = stack.a[--stack.n];
    for (int k = 0; k < x->nin; k++)
      if (x->in[k]->walk != stamp) {
        x->in[k]->walk = stamp;
        ljb_vec_push(&stack, x->in[k]);
      }
  }
  ljb_vec_free(&stack);
  int kept = 0;
  for (int i = 0; i < t->held.n; i++) {
    ljg_node *x = t->held.a[i];
    if (x->walk == stamp) {
      t->held.a[kept++] = x;
    } else {
      ljr_buffer_release(x->data);
      x->data = NULL;
    }
  }
  t->held.n = kept;
}

void ljg_trace_free(ljg_trace *t) {
  ljg_trace_reset(t);
  ljb_arena_free(&t->arena);
  free(t->table);
  ljb_vec_free(&t->held);
  ljb_vec_free(&t->by_id);
  memset(t, 0, sizeof *t);
}

/* Number of attribute words of op that can differ between nodes (the rest stay zero). */
static int attr_words(int op, int ndim) {
  switch (ljg_ops[op].attrs) {
  case LJG_A_VALUE: return 2; /* a[0] keeps scalars apart, a[1] an integer scalar's value */
  case LJG_A_PERM: return ndim;
  case LJG_A_SLICE: return 3;
  case LJG_A_DIMS:
  case LJG_A_DIM:
  case LJG_A_BOUND: return 1;
  case LJG_A_WINDOW: return 8;
  case LJG_A_NONE: return 0;
  }
  return LJ_MAX_DIMS;
}

static ljb_hash node_hash(int op, int dt, int ndim, const int64_t *shape, int nin,
                          ljg_node *const *in, const ljg_attr *attr, const void *data) {
  ljb_hasher h;
  ljb_hasher_init(&h, (uint64_t)op << 16 | (uint64_t)dt << 8 | (uint64_t)ndim);
  for (int i = 0; i < ndim; i++) ljb_hash_u64(&h, (uint64_t)shape[i]);
  for (int i = 0; i < nin; i++) ljb_hash_u64(&h, in[i]->id);
  for (int i = 0, n = attr_words(op, ndim); i < n; i++) ljb_hash_u64(&h, (uint64_t)attr->a[i]);
  if (ljg_ops[op].attrs == LJG_A_VALUE || ljg_ops[op].attrs == LJG_A_WINDOW) ljb_hash_f64(&h, attr->f);
  if (data) ljb_hash_u64(&h, (uint64_t)(uintptr_t)data);
  return ljb_hasher_final(&h);
}

static bool node_equal(const ljg_node *n, int op, int dt, int ndim, const int64_t *shape, int nin,
                       ljg_node *const *in, const ljg_attr *attr, const void *data) {
  if (n->op != op || n->dtype != dt || n->ndim != ndim || n->nin != nin) return false;
  if (ndim && memcmp(n->shape, shape, (size_t)ndim * sizeof *shape) != 0) return false;
  for (int i = 0; i < nin; i++)
    if (n->in[i] != in[i]) return false;
  if (memcmp(&n->attr, attr, sizeof *attr) != 0) return false;
  /* a computed node that a sync has given its value is not shared with an op recorded
   * since: autograd takes such values as constants, and the new op may depend on a tensor
   * that has required grad since (its gradient would silently be lost) */
  return op == LJG_OP_DATA ? n->data == data : !n->data;
}

static void table_grow(ljg_trace *t) {
  uint32_t cap = t->table_cap ? t->table_cap * 2 : 1024;
  ljg_node **table = ljb_xcalloc(cap, sizeof *table);
  for (uint32_t i = 0; i < t->table_cap; i++) {
    ljg_node *n = t->table[i];
    while (n) {
      ljg_node *next = n->chain;
      uint32_t b = (uint32_t)(n->hash.lo & (cap - 1));
      n->chain = table[b];
      table[b] = n;
      n = next;
    }
  }
  free(t->table);
  t->table = table;
  t->table_cap = cap;
}

static ljg_node *intern(ljg_trace *t, int op, lj_dtype dt, int ndim, const int64_t *shape,
                        int nin, ljg_node *const *in, const ljg_attr *attr, ljr_buffer *data) {
  static const ljg_attr zero;
  if (!attr) attr = &zero;
  LJ_ASSERT(ndim >= 0 && ndim <= LJ_MAX_DIMS);
  ljb_hash h = node_hash(op, dt, ndim, shape, nin, in, attr, data);
  if ((uint32_t)t->by_id.n + 1 > t->table_cap / 4 * 3) table_grow(t);
  uint32_t b = (uint32_t)(h.lo & (t->table_cap - 1));
  for (ljg_node *n = t->table[b]; n; n = n->chain)
    if (ljb_hash_eq(n->hash, h) && node_equal(n, op, dt, ndim, shape, nin, in, attr, data))
      return n;
  ljg_node *n = ljb_arena_alloc(&t->arena, sizeof *n);
  n->hash = h;
  n->id = (uint32_t)t->by_id.n;
  ljb_vec_push(&t->by_id, n);
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->ndim = (uint8_t)ndim;
  n->nin = nin;
  if (nin) {
    n->in = ljb_arena_alloc(&t->arena, (size_t)nin * sizeof *n->in);
    memcpy(n->in, in, (size_t)nin * sizeof *in);
  }
  if (ndim) memcpy(n->shape, shape, (size_t)ndim * sizeof *shape);
  n->attr = *attr;
  n->lhash = ljg_local_hash(op, dt, ndim, shape, attr);
  n->index = -1;
  n->grad_below = n->grad_lost = false;
  if (t->any_grad && !t->no_grad && !ljg_op_blocks_grad(op, dt))
    for (int i = 0; i < nin; i++) n->grad_below |= in[i]->grad_below;
  if (t->call_sites) n->loc = ljb_call_site();
  n->chain = t->table[b];
  t->table[b] = n;
  if (data) ljg_node_set_data(t, n, data);
  return n;
}

ljg_node *ljg_node_make(ljg_trace *t, ljg_op op, lj_dtype dt, int ndim, const int64_t *shape,
                        int nin, ljg_node *const *in, const ljg_attr *attr) {
  LJ_ASSERT(op != LJG_OP_DATA && op != LJG_OP_SCALAR);
  return intern(t, op, dt, ndim, shape, nin, in, attr, NULL);
}

ljg_node *ljg_node_data(ljg_trace *t, ljr_buffer *b, lj_dtype dt, int ndim,
                        const int64_t *shape) {
  return intern(t, LJG_OP_DATA, dt, ndim, shape, 0, NULL, NULL, b);
}

ljg_node *ljg_node_scalar(ljg_trace *t, lj_dtype dt, double f, int64_t i) {
  ljg_attr a = {0};
  a.f = f;
  a.a[0] = (int64_t)++t->scalar_seq;
  a.a[1] = i;
  return intern(t, LJG_OP_SCALAR, dt, 0, NULL, 0, NULL, &a, NULL);
}

void ljg_node_set_data(ljg_trace *t, ljg_node *n, ljr_buffer *b) {
  LJ_ASSERT(!n->data);
  n->data = ljr_buffer_retain(b);
  ljb_vec_push(&t->held, n);
}

