/* frontend.h — the frontend stage: tensor handles, scopes, and the public ops, which
 * validate their arguments, infer the result's dtype and shape with PyTorch's rules, and
 * record nodes into the device's trace. Nothing here computes. Prefix ljf_. */
#ifndef LJ_FRONTEND_H
#define LJ_FRONTEND_H

#include "graph/graph.h"
#include "runtime/runtime.h"

/* A tensor handle. Its value is a buffer (device data) or a pending node; `node` may also
 * cache the node that stands for `buf` in the current trace. */
struct lj_tensor {
  atomic_int refs;
  uint64_t id;               /* creation order: the order of a sync's roots */
  struct lj_device *dev;
  lj_dtype dtype;
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  ljr_buffer *buf;           /* the value when computed */
  ljg_node *node;            /* pending value, or buf's node; valid while epoch matches */
  uint64_t epoch;            /* trace epoch of node */
  ljg_node *donor;           /* pending after lj_assign: the node of the buffer it held before,
                                which lj_sync may overwrite with the new value; or NULL */
  struct lj_tensor *prev, *next; /* the device's live tensors, by id */
  int scope_level;           /* index of the owning scope on its thread's stack, or -1 */
  int scope_index;
  bool requires_grad;        /* a leaf of autograd: lj_backward fills grad */
  bool grad_lost;            /* the value, computed by a sync from tensors that required grad,
                                has lost the graph lj_backward would walk (ljg_node.grad_lost) */
  struct lj_tensor *grad;    /* owned; NULL when none */
};

/* tensor.c */
/* A new tensor on d for node n (pending, or data when n already has a buffer); registered in
 * the innermost scope. */
lj_tensor *ljf_tensor_from_node(struct lj_device *d, ljg_node *n);
/* The same, owned by the caller only (never by a scope): gradients, optimizer state. */
lj_tensor *ljf_tensor_unscoped(struct lj_device *d, ljg_node *n);
/* A new data tensor holding a reference to buf. */
lj_tensor *ljf_tensor_from_buffer(struct lj_device *d, lj_dtype dt, int ndim,
                                  const int64_t *shape, ljr_buffer *buf);
/* The node to use t as an operand in the current trace (creating t's data node if needed). */
ljg_node *ljf_node(lj_tensor *t);
/* Whether t's value is a pending node (adopting a buffer another sync computed for it). */
bool ljf_pending(lj_tensor *t);
/* lj_sync and lj_sync_tensors with the reason they run (LJ_DEBUG and dumps show it; a host
 * read runs op by op under LJ_GET_TENSORS_OPBYOP). */
lj_status ljf_sync(lj_device *d, ljr_cause cause);
lj_status ljf_sync_tensors(int n, lj_tensor *const *ts, ljr_cause cause);
/* Binds t to buf (takes the reference) after a sync computed it. */
void ljf_bind(lj_tensor *t, ljr_buffer *buf);
/* Frees every tensor of d (lj_shutdown). */
void ljf_tensors_free_all(struct lj_device *d);

/* record.c: validation and recording helpers shared by the ops. */
/* False (reporting a NULL operand unless an error is already pending) when t is NULL. */
bool ljf_arg(const char *op, const char *name, const lj_tensor *t);
/* False with LJ_ERR_DEVICE when b is on another device than a. */
bool ljf_same_device(const char *op, const lj_tensor *a, const lj_tensor *b);
/* Normalizes dim (negative counts from the end) for a tensor of ndim dims; false with
 * LJ_ERR_ARG naming op and the range when out of range. A 0-d tensor accepts 0 and -1. */
bool ljf_dim(const char *op, int ndim, int dim, int *out);
/* The broadcast shape of two shapes; false with LJ_ERR_SHAPE naming the dim. */
bool ljf_broadcast(const char *op, int an, const int64_t *as, int bn, const int64_t *bs,
                   int *on, int64_t *os);
bool ljf_shape_valid(const char *op, int ndim, const int64_t *shape);
lj_dtype ljf_promote_types(lj_dtype a, lj_dtype b);

/* A participant in PyTorch's result-type computation. */
typedef struct ljf_typed {
  lj_dtype dtype;
  int ndim;         /* 0 for 0-d tensors and scalars */
  bool is_scalar;   /* a C double standing for a Python number */
} ljf_typed;
static inline ljf_typed ljf_typed_tensor(const lj_tensor *t) {
  return (ljf_typed){t->dtype, t->ndim, false};
}
/* A scalar argument: integral values act like Python ints (i64), others like floats (f32). */
ljf_typed ljf_typed_scalar(double v);
lj_dtype ljf_result_type(int n, const ljf_typed *ops);

/* Node helpers: each returns n itself when nothing changes. */
ljg_node *ljf_cast(struct lj_device *d, ljg_node *n, lj_dtype dt);
ljg_node *ljf_reshape_node(struct lj_device *d, ljg_node *n, int ndim, const int64_t *shape);
/* Broadcasts n to shape (prepending size-1 dims as needed). */
ljg_node *ljf_expand_node(struct lj_device *d, ljg_node *n, int ndim, const int64_t *shape);
/* n with its dims permuted (perm[i]: the source dim of dim i; in range, no repeats). */
ljg_node *ljf_permute_node(struct lj_device *d, ljg_node *n, const int64_t *perm);
/* Elements start, start + step, ... (len of them) of n along dim (in range). */
ljg_node *ljf_slice_node(struct lj_device *d, ljg_node *n, int dim, int64_t start, int64_t len, int64_t step);
/* A 0-d node of value v in dtype dt: a constant when v is 0, 1 or -1 (unless
 * LJ_NO_SPECIAL_SCALARS), otherwise a fresh scalar parameter. */
ljg_node *ljf_scalar(struct lj_device *d, lj_dtype dt, double v);
/* An elementwise node of op over operands of one shape. */
ljg_node *ljf_elemwise(struct lj_device *d, ljg_op op, lj_dtype dt, int nin, ljg_node *const *in);

/* ops_elementwise.c: the shared recorders behind the public elementwise ops. */
lj_tensor *ljf_binary(const char *name, ljg_op op, lj_tensor *a, lj_tensor *b);
lj_tensor *ljf_binary_scalar(const char *name, ljg_op op, lj_tensor *a, double s, bool reversed);

#endif
