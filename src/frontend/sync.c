/* sync.c — barriers and inspection: lj_sync runs every live pending tensor of a device,
 * lj_sync_tensors the ones given, and the inspection calls collect the same graph a sync
 * would, without running it. A sync that leaves nothing pending resets the trace, one that
 * leaves some drops the buffers only the rest of the trace held. Runs are
 * queued (runtime/queue.c); a barrier reports the error the previous run left. */
#include "frontend/frontend.h"

#include <stdlib.h>
#include <string.h>

/* Runs ts[0..n) (pending, on d, sorted by id) and binds the buffers the run writes (also
 * when it waited for the run and returns its error: LJ_SYNC_WAIT). With donate, a tensor
 * lj_assign gave a new value may get it written into the buffer it held before. */
static lj_status run(struct lj_device *d, int n, lj_tensor *const *ts, bool donate, ljr_cause cause) {
  ljg_node **nodes = ljb_xalloc((size_t)n * 2 * sizeof *nodes), **donors = nodes + n;
  ljr_buffer **bufs = ljb_xcalloc((size_t)n, sizeof *bufs);
  for (int i = 0; i < n; i++) {
    nodes[i] = ts[i]->node;
    donors[i] = ts[i]->donor;
  }
  lj_status st = ljr_execute(d, n, nodes, donate ? donors : NULL, bufs, cause);
  for (int i = 0; i < n; i++)
    if (bufs[i]) ljf_bind(ts[i], bufs[i]);
  free(nodes);
  free(bufs);
  return st;
}

/* After a sync of some tensors: the trace resets when no live tensor is pending; else it drops
 * the buffers of the nodes no live tensor reaches (a pending tensor kept across steps, a
 * constant made once, kept every later result's buffer: a leak of every step's outputs, each
 * step page-faulting in fresh memory). */
static void trim_trace(struct lj_device *d) {
  LJB_VEC(ljg_node *) live = {0};
  bool pending = false;
  for (lj_tensor *t = d->live_head; t; t = t->next) {
    pending |= ljf_pending(t);
    if (t->epoch != d->trace.epoch) continue;
    if (t->node) ljb_vec_push(&live, t->node);
    if (t->donor) ljb_vec_push(&live, t->donor);
  }
  if (pending)
    ljg_trace_release_unreached(&d->trace, live.n, live.a);
  else
    ljg_trace_reset(&d->trace);
  ljb_vec_free(&live);
}

lj_status ljf_sync(lj_device *d, ljr_cause cause) {
  if (!d) return ljb_error(LJ_ERR_ARG, "lj_sync: argument d is NULL"), LJ_ERR_ARG;
  LJB_VEC(lj_tensor *) roots = {0};
  for (lj_tensor *t = d->live_head; t; t = t->next)
    if (ljf_pending(t)) ljb_vec_push(&roots, t);
  ljr_count(LJR_C_MarkStep, 1);
  ljr_analysis_step(d);
  /* every pending tensor is a root, and the trace is reset after the run: nothing can read a
   * donated buffer's old value afterwards */
  bool donate = ljr_get()->cfg.pub.enable_param_aliasing;
  lj_status st = roots.n ? run(d, roots.n, roots.a, donate, cause) : ljr_queue_finish(d);
  ljb_vec_free(&roots);
  if (st == LJ_OK) ljg_trace_reset(&d->trace);
  return st;
}

lj_status lj_sync(lj_device *d) { return ljf_sync(d, LJR_CAUSE_SYNC); }

static int by_id(const void *a, const void *b) {
  uint64_t x = (*(lj_tensor *const *)a)->id, y = (*(lj_tensor *const *)b)->id;
  return (x > y) - (x < y);
}

lj_status ljf_sync_tensors(int n, lj_tensor *const *ts, ljr_cause cause) {
  static const char *op = "lj_sync_tensors";
  if (n < 0 || (n > 0 && !ts)) {
    ljb_error(LJ_ERR_ARG, "%s: bad tensor list (n = %d)", op, n);
    return LJ_ERR_ARG;
  }
  for (int i = 0; i < n; i++) {
    if (!ts[i]) {
      ljb_error(LJ_ERR_ARG, "%s: tensor %d of %d is NULL", op, i, n);
      return LJ_ERR_ARG;
    }
    if (!ljf_same_device(op, ts[0], ts[i])) return LJ_ERR_DEVICE;
  }
  LJB_VEC(lj_tensor *) roots = {0};
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int k = 0; k < roots.n; k++) dup |= roots.a[k] == ts[i];
    if (!dup && ljf_pending(ts[i])) ljb_vec_push(&roots, ts[i]);
  }
  lj_status st = LJ_OK;
  if (roots.n) {
    qsort(roots.a, (size_t)roots.n, sizeof *roots.a, by_id);
    struct lj_device *d = roots.a[0]->dev;
    st = run(d, roots.n, roots.a, false, cause);
    if (st == LJ_OK) trim_trace(d);
  } else if (n > 0) {
    st = ljr_queue_finish(ts[0]->dev);
  }
  ljb_vec_free(&roots);
  return st;
}

lj_status lj_sync_tensors(int n, lj_tensor *const *ts) { return ljf_sync_tensors(n, ts, LJR_CAUSE_SYNC_TENSORS); }

lj_status lj_wait(lj_device *d) {
  if (!d) return ljb_error(LJ_ERR_ARG, "lj_wait: argument d is NULL"), LJ_ERR_ARG;
  return ljr_queue_finish(d);
}

/* ---- inspection ---------------------------------------------------------------------- */

/* Collects the graph of ts into g; false with the error set on bad arguments. */
static bool collect(const char *op, int n, lj_tensor *const *ts, ljg_graph *g,
                    ljg_binding_vec *binds) {
  if (n <= 0 || !ts) {
    ljb_error(LJ_ERR_ARG, "%s: no tensors given (n = %d)", op, n);
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (!ljf_arg(op, "ts[i]", ts[i])) return false;
    if (!ljf_same_device(op, ts[0], ts[i])) return false;
  }
  ljg_node **nodes = ljb_xalloc((size_t)n * sizeof *nodes);
  for (int i = 0; i < n; i++) nodes[i] = ljf_node(ts[i]);
  ljg_collect(&ts[0]->dev->trace, n, nodes, g, binds);
  free(nodes);
  return true;
}

char *lj_tensors_text(int n, lj_tensor *const *ts) {
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding_vec binds = {0};
  char *s = collect("lj_tensors_text", n, ts, &g, &binds) ? ljg_graph_text(&g, binds.a) : NULL;
  ljg_graph_free(&g);
  ljb_vec_free(&binds);
  return s;
}

char *lj_tensors_dot(int n, lj_tensor *const *ts) {
  ljg_graph g;
  ljg_graph_init(&g);
  char *s = collect("lj_tensors_dot", n, ts, &g, NULL) ? ljg_graph_dot(&g) : NULL;
  ljg_graph_free(&g);
  return s;
}

lj_status lj_graph_hash(int n, lj_tensor *const *ts, char out_hex[33]) {
  if (!out_hex) return ljb_error(LJ_ERR_ARG, "lj_graph_hash: argument out_hex is NULL"), LJ_ERR_ARG;
  ljg_graph g;
  ljg_graph_init(&g);
  lj_status st = LJ_OK;
  if (collect("lj_graph_hash", n, ts, &g, NULL))
    ljb_hash_hex(ljr_graph_key(&g), out_hex);
  else
    st = lj_last_status();
  ljg_graph_free(&g);
  return st;
}

int lj_graph_kernel_count(int n, lj_tensor *const *ts) {
  ljg_graph g;
  ljg_graph_init(&g);
  int k = collect("lj_graph_kernel_count", n, ts, &g, NULL) ? ljr_kernel_count(&g) : -1;
  ljg_graph_free(&g);
  return k;
}
