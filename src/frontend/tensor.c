/* tensor.c — tensor handles: creation, reference counting, the device's list of live
 * tensors (a sync's root candidates, in id order), scopes, host transfers and lj_assign. */
#include "frontend/frontend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scopes (per thread) ------------------------------------------------------------ */

typedef struct scope {
  LJB_VEC(lj_tensor *) ts;
} scope;

static _Thread_local LJB_VEC(scope) tl_scopes;

void lj_scope_begin(void) { ljb_vec_push(&tl_scopes, ((scope){{0}})); }

static void scope_add(lj_tensor *t, int level) {
  scope *s = &tl_scopes.a[level];
  t->scope_level = level;
  t->scope_index = s->ts.n;
  ljb_vec_push(&s->ts, t);
}

static void scope_remove(lj_tensor *t) {
  if (t->scope_level < 0) return;
  if (t->scope_level < tl_scopes.n && t->scope_index < tl_scopes.a[t->scope_level].ts.n &&
      tl_scopes.a[t->scope_level].ts.a[t->scope_index] == t)
    tl_scopes.a[t->scope_level].ts.a[t->scope_index] = NULL;
  t->scope_level = t->scope_index = -1;
}

void lj_scope_end(void) {
  if (tl_scopes.n == 0) return;
  scope *s = &tl_scopes.a[tl_scopes.n - 1];
  for (int i = 0; i < s->ts.n; i++) {
    lj_tensor *t = s->ts.a[i];
    if (!t) continue;
    t->scope_level = t->scope_index = -1;
    lj_tensor_release(t);
  }
  ljb_vec_free(&s->ts);
  tl_scopes.n--;
  if (tl_scopes.n == 0) ljb_vec_free(&tl_scopes);
}

lj_tensor *lj_keep(lj_tensor *t) {
  if (!t || t->scope_level < 0 || t->scope_level != tl_scopes.n - 1) return t;
  int level = t->scope_level;
  scope_remove(t);
  if (level > 0) scope_add(t, level - 1);
  return t;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static lj_tensor *tensor_new(struct lj_device *d, lj_dtype dt, int ndim, const int64_t *shape, bool scoped) {
  lj_tensor *t = ljb_xcalloc(1, sizeof *t);
  atomic_init(&t->refs, 1);
  t->id = ++d->next_tensor_id;
  t->dev = d;
  t->dtype = dt;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  t->prev = d->live_tail;
  if (d->live_tail) d->live_tail->next = t;
  else d->live_head = t;
  d->live_tail = t;
  t->scope_level = t->scope_index = -1;
  if (scoped && tl_scopes.n) scope_add(t, tl_scopes.n - 1);
  return t;
}

static void tensor_free(lj_tensor *t) {
  struct lj_device *d = t->dev;
  if (t->prev) t->prev->next = t->next;
  else d->live_head = t->next;
  if (t->next) t->next->prev = t->prev;
  else d->live_tail = t->prev;
  scope_remove(t);
  ljr_buffer_release(t->buf);
  lj_tensor_release(t->grad);
  free(t);
}

static lj_tensor *from_node(struct lj_device *d, ljg_node *n, bool scoped) {
  lj_tensor *t = tensor_new(d, n->dtype, n->ndim, n->shape, scoped);
  t->node = n;
  t->epoch = d->trace.epoch;
  if (n->data) t->buf = ljr_buffer_retain(n->data);
  return t;
}

lj_tensor *ljf_tensor_from_node(struct lj_device *d, ljg_node *n) { return from_node(d, n, true); }
lj_tensor *ljf_tensor_unscoped(struct lj_device *d, ljg_node *n) { return from_node(d, n, false); }

lj_tensor *ljf_tensor_from_buffer(struct lj_device *d, lj_dtype dt, int ndim,
                                  const int64_t *shape, ljr_buffer *buf) {
  lj_tensor *t = tensor_new(d, dt, ndim, shape, true);
  t->buf = ljr_buffer_retain(buf);
  return t;
}

void ljf_tensors_free_all(struct lj_device *d) {
  for (lj_tensor *t = d->live_head; t; t = t->next) t->grad = NULL; /* freed as list members */
  while (d->live_head) tensor_free(d->live_head);
}

lj_tensor *lj_tensor_retain(lj_tensor *t) {
  if (t) atomic_fetch_add(&t->refs, 1);
  return t;
}

void lj_tensor_release(lj_tensor *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) tensor_free(t);
}

/* ---- values ---------------------------------------------------------------------------- */

ljg_node *ljf_node(lj_tensor *t) {
  struct lj_device *d = t->dev;
  if (!t->node || t->epoch != d->trace.epoch) {
    LJ_ASSERT(t->buf);
    t->node = ljg_node_data(&d->trace, t->buf, t->dtype, t->ndim, t->shape);
    t->epoch = d->trace.epoch;
    t->node->grad_lost |= t->grad_lost;
  }
  if (t->requires_grad || t->grad_lost) t->node->grad_below = d->trace.any_grad = true;
  return t->node;
}

/* t's pending value has been computed: whether it lost a graph that autograd needs. */
static void computed(lj_tensor *t) {
  t->grad_lost = t->node->grad_below && !t->requires_grad;
  t->node->grad_lost |= t->grad_lost;
}

bool ljf_pending(lj_tensor *t) {
  if (t->buf) return false;
  LJ_ASSERT(t->node && t->epoch == t->dev->trace.epoch);
  if (!t->node->data) return true;
  t->buf = ljr_buffer_retain(t->node->data);
  computed(t);
  return false;
}

void ljf_bind(lj_tensor *t, ljr_buffer *buf) {
  LJ_ASSERT(!t->buf);
  t->buf = buf;
  t->donor = NULL;
  if (!t->node->data) ljg_node_set_data(&t->dev->trace, t->node, buf);
  computed(t);
}

bool lj_tensor_is_pending(const lj_tensor *t) { return t && ljf_pending((lj_tensor *)t); }

int lj_tensor_ndim(const lj_tensor *t) { return t ? t->ndim : -1; }
const int64_t *lj_tensor_shape(const lj_tensor *t) { return t ? t->shape : NULL; }
int64_t lj_tensor_numel(const lj_tensor *t) { return t ? ljg_numel(t->ndim, t->shape) : -1; }
lj_dtype lj_tensor_dtype(const lj_tensor *t) { return t ? t->dtype : LJ_F32; }
lj_device *lj_tensor_device(const lj_tensor *t) { return t ? t->dev : NULL; }

/* ---- host transfers ---------------------------------------------------------------------- */

lj_tensor *lj_tensor_from_host(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape,
                               const void *data) {
  static const char *op = "lj_tensor_from_host";
  if (!d) return ljb_error(LJ_ERR_ARG, "%s: argument device is NULL", op), NULL;
  if (!ljg_dtype_valid((int)dt)) {
    ljb_error(LJ_ERR_DTYPE, "%s: dtype %d is not an lj_dtype", op, (int)dt);
    return NULL;
  }
  if (!ljf_shape_valid(op, ndim, shape)) return NULL;
  int64_t numel = ljg_numel(ndim, shape);
  size_t nbytes = (size_t)numel * lj_dtype_size(dt);
  if (!data && numel > 0) return ljb_error(LJ_ERR_ARG, "%s: argument data is NULL", op), NULL;
  uint64_t t0 = ljb_now_ns();
  ljr_buffer *b = ljr_buffer_new(d, nbytes);
  if (!b) return NULL;
  d->backend->to_device(d, b->data, data, nbytes);
  ljr_sample(LJR_M_TransferToDeviceTime, (double)(ljb_now_ns() - t0));
  ljr_sample(LJR_M_InboundData, (double)nbytes);
  lj_tensor *t = ljf_tensor_from_buffer(d, dt, ndim, shape, b);
  ljr_buffer_release(b);
  return t;
}

lj_status lj_tensor_to_host(lj_tensor *t, void *dst, size_t nbytes) {
  static const char *op = "lj_tensor_to_host";
  if (!t) {
    ljb_null_arg(op, "t");
    return lj_last_status();
  }
  if (!dst) return ljb_error(LJ_ERR_ARG, "%s: argument dst is NULL", op), LJ_ERR_ARG;
  size_t want = (size_t)lj_tensor_numel(t) * lj_dtype_size(t->dtype);
  if (nbytes != want) {
    char shape[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_ARG, "%s: nbytes is %zu but the %s%s tensor holds %zu bytes", op, nbytes,
              lj_dtype_name(t->dtype), ljb_shape_str(shape, t->ndim, t->shape), want);
    return LJ_ERR_ARG;
  }
  lj_status st = ljf_pending(t) ? ljf_sync_tensors(1, &t, LJR_CAUSE_READ) : LJ_OK;
  if (st == LJ_OK) st = ljr_buffer_wait(t->buf, op);
  if (st != LJ_OK) return st;
  struct lj_device *d = t->dev;
  ljr_analysis_read(d);
  uint64_t t0 = ljb_now_ns();
  d->backend->to_host(d, dst, t->buf->data, nbytes);
  ljr_sample(LJR_M_TransferFromDeviceTime, (double)(ljb_now_ns() - t0));
  ljr_sample(LJR_M_OutboundData, (double)nbytes);
  return LJ_OK;
}

double lj_item(lj_tensor *t) {
  if (!t) return ljb_null_arg("lj_item", "t"), NAN;
  if (lj_tensor_numel(t) != 1) {
    char shape[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "lj_item: the tensor has %lld elements (shape %s), not 1",
              (long long)lj_tensor_numel(t), ljb_shape_str(shape, t->ndim, t->shape));
    return NAN;
  }
  uint64_t cell = 0;
  if (lj_tensor_to_host(t, &cell, lj_dtype_size(t->dtype)) != LJ_OK) return NAN;
  return ljg_load_f64(t->dtype, &cell, 0);
}

lj_status lj_assign(lj_tensor *dst, lj_tensor *src) {
  static const char *op = "lj_assign";
  if (!ljf_arg(op, "dst", dst) || !ljf_arg(op, "src", src)) return lj_last_status();
  if (!ljf_same_device(op, dst, src)) return LJ_ERR_DEVICE;
  if (dst == src) return LJ_OK;
  struct lj_device *d = dst->dev;
  int on;
  int64_t os[LJ_MAX_DIMS];
  if (!ljf_broadcast(op, src->ndim, src->shape, dst->ndim, dst->shape, &on, os)) return LJ_ERR_SHAPE;
  if (on != dst->ndim || memcmp(os, dst->shape, (size_t)on * sizeof *os) != 0) {
    char a[LJB_SHAPE_STR_MAX], b[LJB_SHAPE_STR_MAX];
    ljb_error(LJ_ERR_SHAPE, "%s: src of shape %s does not broadcast to dst's shape %s", op,
              ljb_shape_str(a, src->ndim, src->shape), ljb_shape_str(b, dst->ndim, dst->shape));
    return LJ_ERR_SHAPE;
  }
  ljg_node *n = ljf_cast(d, ljf_node(src), dst->dtype);
  n = ljf_expand_node(d, n, dst->ndim, dst->shape);
  /* a constant for autograd, as PyTorch's updates under no_grad (optimizer state, running
   * statistics, an average of the weights); a computed value gets a data node of its own */
  if (n->grad_below && !n->data)
    n = ljg_node_make(&d->trace, LJG_OP_STOP_GRADIENT, n->dtype, n->ndim, n->shape, 1, &n, NULL);
  /* the buffer dst held, if this trace uses it: the donor of dst's new value (a pending dst
   * keeps the donor of its first assignment) */
  if (dst->buf) dst->donor = dst->node && dst->epoch == d->trace.epoch ? dst->node : NULL;
  ljr_buffer_release(dst->buf);
  dst->buf = n->data ? ljr_buffer_retain(n->data) : NULL;
  dst->node = dst->buf ? NULL : n;
  dst->epoch = d->trace.epoch;
  dst->grad_lost = false;
  if (dst->buf) dst->donor = NULL;
  return LJ_OK;
}
