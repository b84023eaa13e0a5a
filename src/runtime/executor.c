/* executor.c — from pending nodes to computed buffers.
 *
 *   collect (post-order graph + parameter bindings) → key → cache lookup, confirmed by
 *   structural equality → on a miss: the persistent cache, else graph passes, fusion + buffer
 *   plan, LLVM (and the entry written to the persistent cache) → bind slots
 *   (parameter buffers, scalar values, fresh output buffers, the scratch arena) → run the
 *   kernels on the device → hand out each root's buffer.
 *
 * Steady state (a training step seen before) costs one pass over the cached graph that
 * checks the trace's nodes of the same ids against it (ljg_replay), the bindings and the
 * kernels: no walk, no graph is built, nothing is allocated but the outputs, which come from
 * the pool. */
#include "runtime/runtime.h"
#include "codegen_llvm/codegen.h"
#include "runtime/disk_cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ljb_hash ljr_graph_key(const ljg_graph *g) { return ljg_graph_key(g, ljr_get()->env_seed); }

static ljg_fuse_options fuse_options(const ljr_runtime *rt) {
  ljg_fuse_options o = {0};
  o.disable_fusion = rt->cfg.pub.disable_fusion;
  o.no_winograd = !rt->cfg.pub.winograd;
  o.bf16_dot = ljc_session_bf16_dot(rt->cg);
  return o;
}

int ljr_kernel_count(const ljg_graph *g) {
  ljr_runtime *rt = ljr_get();
  if (!rt) return -1;
  ljg_graph *opt = ljg_graph_clone(g);
  ljg_optimize(opt);
  ljg_fuse_options o = fuse_options(rt);
  ljg_program *p = ljg_fuse(opt, &o);
  int n = p->nkernels;
  ljg_program_free(p);
  ljg_graph_free(opt);
  free(opt);
  return n;
}

/* Compiles g (key) into a new executable, written to the persistent cache; NULL with the
 * error set. */
static ljr_exec *compile(ljr_runtime *rt, struct lj_device *d, const ljg_graph *g, ljb_hash key) {
  ljr_analysis_compile(d, g, key);
  uint64_t t0 = ljb_now_ns();
  ljr_exec *e = ljb_xcalloc(1, sizeof *e);
  e->key = key;
  e->graph = ljg_graph_clone(g);
  e->opt = ljg_graph_clone(g);
  ljg_optimize(e->opt);
  ljg_fuse_options o = fuse_options(rt);
  e->prog = ljg_fuse(e->opt, &o);
  e->fns = ljb_xcalloc((size_t)e->prog->nkernels + 1, sizeof *e->fns);
  if (ljr_dump_keeps_texts()) e->texts = ljb_xcalloc(1, sizeof *e->texts);
  /* the object files, for LJ_DUMP_DIR and the persistent cache */
  ljc_objects buf = {0};
  ljc_objects *objs = rt->cfg.pub.dump_dir || (rt->cfg.pub.cache_dir && !rt->cfg.pub.cache_readonly) ? &buf : NULL;
  ljc_compile_counts counts = {0};
  e->code = ljc_compile(rt->cg, e->prog, e->opt, key, e->fns, e->texts, objs, &counts);
  if (!e->code) {
    ljr_exec_free(e);
    return NULL;
  }
  ljr_dump_compiled(e, e->texts, objs);
  ljr_count(LJR_C_UncachedCompile, 1);
  ljr_count(LJR_C_CompiledKernels, e->prog->nkernels);
  ljr_count(LJR_C_CompiledGemmRoutines, counts.compiled);
  ljr_count(LJR_C_PrecompiledGemmRoutines, counts.precompiled);
  ljr_count(LJR_C_TwinKernels, counts.twins);
  ljr_count(LJR_C_KernelObjects, counts.objects);
  ljr_count(LJR_C_UnvectorizedLoops, counts.unvectorized);
  ljr_sample(LJR_M_CompileTime, (double)(ljb_now_ns() - t0));
  ljr_disk_store(rt, e, objs);
  ljc_objects_free(&buf);
  return e;
}

/* Stores a scalar binding in the slot's dtype (storage format) into an 8-byte cell. */
static void store_scalar(lj_dtype dt, const ljg_binding *b, uint64_t *cell) {
  *cell = 0;
  if (ljg_dtype_is_float(dt))
    ljg_store_f64(dt, cell, 0, b->f);
  else
    ljg_store_i64(dt, cell, 0, b->i);
}

static lj_status runtime_error(const ljr_exec *e, const ljg_kerr *err) {
  const ljg_gnode *n = &e->opt->nodes[err->node];
  char shape[LJB_SHAPE_STR_MAX];
  ljb_shape_str(shape, n->ndim, n->shape);
  switch (err->code) {
  case LJG_KERR_DIV_ZERO:
    ljb_error(LJ_ERR_RUNTIME, "%s: integer division by zero (node %%%d, %s%s)", ljg_ops[n->op].name,
              err->node, lj_dtype_name(n->dtype), shape);
    break;
  case LJG_KERR_INDEX:
    ljb_error(LJ_ERR_RUNTIME, "%s: index %lld is out of range [0, %lld) (node %%%d, %s%s)",
              ljg_ops[n->op == LJG_OP_INDEX_CHECK && n->attr.a[1] ? n->attr.a[1] : n->op].name, (long long)err->value, (long long)err->bound, err->node,
              lj_dtype_name(n->dtype), shape);
    break;
  default:
    ljb_error(LJ_ERR_RUNTIME, "%s: error %d in compiled code (node %%%d, %s%s)", ljg_ops[n->op].name,
              err->code, err->node, lj_dtype_name(n->dtype), shape);
    break;
  }
  return LJ_ERR_RUNTIME;
}

/* Whether runs end before their sync returns: LJ_SYNC_WAIT, and the switches that report on
 * a run when it has ended (LJ_METRICS_FILE, LJ_DEBUG=2). */
static bool waits(void) {
  const lj_config *c = &ljr_get()->cfg.pub;
  return c->sync_wait || c->metrics_file || c->debug >= 2;
}

/* Waits for the device's previous run and reports its error; then binds e's slots
 * (parameters from binds, output buffers) into a job and queues it. An output that works in
 * place of a parameter (ljg_donate) takes the parameter's buffer when the caller donates it
 * and nothing but the trace holds it; otherwise it gets a fresh buffer with a copy of the
 * parameter. out[r] receives root r's buffer, written once the job has run. */
static lj_status run(struct lj_device *d, const ljr_exec *e, const ljg_binding *binds, bool donate,
                     ljr_buffer **out) {
  const ljg_program *p = e->prog;
  /* one run in flight per device: this sync reports the previous run's error */
  ljr_queue_wait(d, d->queue.submitted);
  lj_status st = ljr_queue_take_error(d);
  if (st != LJ_OK) return st;
  ljr_sample(LJR_M_TensorsGraphSize, e->graph->n);
  ljr_count(LJR_C_SyncTensors, 1);
  size_t n = (size_t)p->nslots + 1;
  ljr_job *j = ljb_xcalloc(1, sizeof *j + n * (sizeof *j->slots + sizeof *j->cells + sizeof *j->owned));
  j->e = e;
  j->slots = (void **)(j + 1);
  j->cells = (uint64_t *)(j->slots + n);
  j->owned = (ljr_buffer **)(j->cells + n);
  j->seq = ljr_queue_next(d);
  /* donations first: the parameter slots below take references of their own */
  int donated = 0, copied = 0;
  for (int s = 0; donate && s < p->nslots; s++) {
    const ljg_slot *sl = &p->slots[s];
    if (sl->kind == LJG_SLOT_OUTPUT && sl->param >= 0 && atomic_load(&binds[sl->param].buf->refs) == 1) {
      j->owned[s] = ljr_buffer_retain(binds[sl->param].buf);
      donated++;
    }
  }
  for (int s = 0; s < p->nslots; s++) {
    const ljg_slot *sl = &p->slots[s];
    switch (sl->kind) {
    case LJG_SLOT_PARAM:
      j->owned[s] = ljr_buffer_retain(binds[sl->param].buf);
      j->slots[s] = j->owned[s]->data;
      break;
    case LJG_SLOT_SCALAR:
      store_scalar(sl->dtype, &binds[sl->param], &j->cells[s]);
      j->slots[s] = &j->cells[s];
      break;
    case LJG_SLOT_OUTPUT:
      if (!j->owned[s]) {
        if (!(j->owned[s] = ljr_buffer_new(d, (size_t)sl->nbytes))) {
          for (int k = 0; k < p->nslots; k++) ljr_buffer_release(j->owned[k]);
          free(j);
          return LJ_ERR_OOM;
        }
        if (sl->param >= 0) {
          d->backend->copy(d, j->owned[s]->data, binds[sl->param].buf->data, (size_t)sl->nbytes);
          copied++;
        }
      }
      j->owned[s]->seq = j->seq;
      j->slots[s] = j->owned[s]->data;
      break;
    case LJG_SLOT_TEMP: break;  /* bound to the scratch arena when it runs */
    case LJG_SLOT_LOCAL: break; /* on the kernel's stack */
    }
  }
  ljr_count(LJR_C_DonatedBuffers, donated);
  ljr_count(LJR_C_DonationCopies, copied);
  for (int r = 0; r < p->nroots; r++) out[r] = ljr_buffer_retain(j->owned[p->root_slot[r]]);
  uint64_t seq = j->seq;
  ljr_queue_submit(d, j);
  if (!waits()) return LJ_OK;
  ljr_queue_wait(d, seq);
  ljr_analysis_execute(d, e, d->last_run_ns);
  return ljr_queue_take_error(d);
}

/* Why a job cannot run: an input whose own job failed, or no scratch memory. */
static lj_status job_inputs(struct lj_device *d, const ljr_job *j) {
  const ljg_program *p = j->e->prog;
  for (int s = 0; s < p->nslots; s++)
    if (p->slots[s].kind == LJG_SLOT_PARAM && atomic_load(&j->owned[s]->status) != LJ_OK) {
      char hex[33];
      ljb_hash_hex(j->e->key, hex);
      ljb_error(LJ_ERR_RUNTIME, "%s: input %d of graph %.16s was not computed: the graph computing it failed",
                d->name, p->slots[s].param, hex);
      return LJ_ERR_RUNTIME;
    }
  if (p->scratch_bytes > 0 && (!d->scratch_arena || d->scratch_arena->nbytes < (size_t)p->scratch_bytes)) {
    ljr_buffer_release(d->scratch_arena);
    d->scratch_arena = ljr_buffer_new(d, (size_t)p->scratch_bytes);
    if (!d->scratch_arena) return LJ_ERR_OOM;
  }
  return LJ_OK;
}

void ljr_job_run(struct lj_device *d, ljr_job *j) {
  const ljr_exec *e = j->e;
  const ljg_program *p = e->prog;
  lj_status st = job_inputs(d, j);
  if (st == LJ_OK) {
    /* without scratch (every temporary empty: a product over an empty inner dim of casts)
     * there may be no arena yet */
    char *scratch = p->scratch_bytes > 0 ? d->scratch_arena->data : NULL;
    for (int s = 0; s < p->nslots; s++)
      if (p->slots[s].kind == LJG_SLOT_TEMP) j->slots[s] = scratch ? scratch + p->slots[s].offset : NULL;
    uint64_t t0 = ljb_now_ns();
    ljg_kerr err = {0};
    bool flushed = ljb_flush_subnormals(d->flush_denormal); /* the pool's workers take it on */
    d->backend->execute(d, e, j->slots, &err);
    ljb_flush_subnormals(flushed);
    d->last_run_ns = ljb_now_ns() - t0;
    ljr_sample(LJR_M_ExecuteTime, (double)d->last_run_ns);
    if (err.code) st = runtime_error(e, &err);
  }
  if (st != LJ_OK) {
    ljr_queue_fail(d, st, lj_last_error());
    lj_clear_error();
    for (int s = 0; s < p->nslots; s++)
      if (p->slots[s].kind == LJG_SLOT_OUTPUT) atomic_store(&j->owned[s]->status, st);
  }
  for (int s = 0; s < p->nslots; s++) ljr_buffer_release(j->owned[s]);
  free(j);
}

/* g's executable: from the cache, or compiled and inserted; NULL with the error set. */
static ljr_exec *find_or_compile(struct lj_device *d, const ljg_graph *g) {
  ljr_runtime *rt = ljr_get();
  ljb_hash key = ljg_graph_key(g, rt->env_seed);
  ljr_exec *e = ljr_cache_lookup(&d->cache, key, g);
  if (e) {
    ljr_count(LJR_C_CachedCompile, 1);
    return e;
  }
  e = ljr_disk_load(rt, key, g);
  if (!e) e = compile(rt, d, g, key);
  if (!e) return NULL;
  e->compiled_at = d->syncs;
  if (rt->cfg.pub.debug) e->site = ljb_call_site();
  if (rt->cfg.pub.profile_kernels) e->profile = ljr_profile_new(e->prog->nkernels);
  /* a queued job may still use the executable the insert evicts */
  if (d->cache.count >= d->cache.capacity) ljr_queue_wait(d, d->queue.submitted);
  ljr_cache_insert(&d->cache, e);
  return e;
}

/* Runs g as one executable (compiled on a cache miss), its roots taking their donors'
 * buffers with donate (run); *ran: the executable. */
static lj_status run_fused(struct lj_device *d, const ljg_graph *g, const ljg_binding *binds, bool donate,
                           ljr_buffer **out, ljr_exec **ran) {
  ljr_exec *e = find_or_compile(d, g);
  if (ran) *ran = e;
  return e ? run(d, e, binds, donate, out) : lj_last_status();
}

/* Adds operand src of g to the one-op graph `one` as a parameter (once), bound to its value:
 * a scalar keeps its node and binding, anything else becomes a DATA node on val[src]. */
static int32_t op_operand(ljg_graph *one, ljg_binding_vec *b, const ljg_graph *g,
                          const ljg_binding *binds, ljr_buffer **val, int32_t *map, int32_t src) {
  if (map[src] >= 0) return map[src];
  const ljg_gnode *n = &g->nodes[src];
  ljg_gnode p = *n;
  p.nin = 0;
  p.param = -1;
  ljg_binding v = {0};
  if (n->op == LJG_OP_SCALAR) {
    v = binds[n->param];
  } else {
    p.op = LJG_OP_DATA;
    memset(&p.attr, 0, sizeof p.attr);
    v.buf = val[src];
  }
  ljb_vec_push(b, v);
  return map[src] = ljg_graph_add(one, &p, NULL);
}

/* Op-by-op execution (LJ_SYNC_TENSORS_OPBYOP): every node of g runs as a graph of its own,
 * its operands bound as parameters, each such graph compiled once and cached like any other.
 * Eager execution through the same compiler: for debugging and for measuring what fusion
 * saves. */
static lj_status run_op_by_op(struct lj_device *d, const ljg_graph *g, const ljg_binding *binds,
                              ljr_buffer **out) {
  ljr_buffer **val = ljb_xcalloc((size_t)g->n + 1, sizeof *val);
  int32_t *map = ljb_xalloc(((size_t)g->n + 1) * sizeof *map);
  for (int i = 0; i < g->n; i++) map[i] = -1;
  int32_t *in = ljb_xalloc(((size_t)g->nops + 1) * sizeof *in);
  bool *is_root = ljb_xcalloc((size_t)g->n + 1, sizeof *is_root);
  for (int r = 0; r < g->nroots; r++) is_root[g->roots[r]] = true;
  ljg_graph one;
  ljg_graph_init(&one);
  ljg_binding_vec b = {0};
  lj_status st = LJ_OK;
  for (int i = 0; i < g->n && st == LJ_OK; i++) {
    const ljg_gnode *n = &g->nodes[i];
    if (n->op == LJG_OP_DATA) {
      val[i] = ljr_buffer_retain(binds[n->param].buf);
      continue;
    }
    if (n->op == LJG_OP_SCALAR && !is_root[i]) continue;
    ljg_graph_clear(&one);
    b.n = 0;
    const int32_t *gin = ljg_in(g, n);
    for (int k = 0; k < n->nin; k++) in[k] = op_operand(&one, &b, g, binds, val, map, gin[k]);
    ljg_graph_add_root(&one, n->op == LJG_OP_SCALAR ? op_operand(&one, &b, g, binds, val, map, i)
                                                    : ljg_graph_add(&one, n, in), -1);
    st = run_fused(d, &one, b.a, false, &val[i], NULL);
    for (int k = 0; k < n->nin; k++) map[gin[k]] = -1;
    map[i] = -1;
  }
  if (st == LJ_OK)
    for (int r = 0; r < g->nroots; r++) out[r] = ljr_buffer_retain(val[g->roots[r]]);
  for (int i = 0; i < g->n; i++) ljr_buffer_release(val[i]);
  ljg_graph_free(&one);
  ljb_vec_free(&b);
  free(val);
  free(map);
  free(in);
  free(is_root);
  return st;
}

/* Starts a sync on d: its cause, its number; and whether it runs op by op
 * (LJ_GET_TENSORS_OPBYOP for host reads, LJ_SYNC_TENSORS_OPBYOP for the rest). */
static bool begin(struct lj_device *d, ljr_cause cause) {
  d->cause = cause;
  d->syncs++;
  const lj_config *c = &ljr_get()->cfg.pub;
  return cause == LJR_CAUSE_READ ? c->get_tensors_opbyop : c->sync_tensors_opbyop;
}

static lj_status run_whole(struct lj_device *d, bool op_by_op, const ljg_graph *g, const ljg_binding *binds,
                           bool donate, ljr_buffer **out) {
  ljr_exec *e = NULL;
  lj_status st = op_by_op ? run_op_by_op(d, g, binds, out) : run_fused(d, g, binds, donate, out, &e);
  if (st == LJ_OK) ljr_dump_executed(d, g, binds, e);
  return st;
}

lj_status ljr_run_graph(struct lj_device *d, const ljg_graph *g, const ljg_binding *binds, bool donate,
                        ljr_buffer **out, ljr_cause cause) {
  return run_whole(d, begin(d, cause), g, binds, donate, out);
}

/* A sync: a step recorded as before (the same graph with the same node ids) is recognized by
 * replaying the last walk of a recently used executable; otherwise the trace below the roots
 * is walked, and a walk seen before runs its executable without building the graph (the walk
 * is compared with the executable's graph node by node); otherwise the graph is built, looked
 * up by its key or compiled. The walk (key and node ids) is recorded for the next time. */
lj_status ljr_execute(struct lj_device *d, int n, ljg_node *const *roots, ljg_node *const *donors,
                      ljr_buffer **out, ljr_cause cause) {
  bool op_by_op = begin(d, cause);
  ljr_exec *e = op_by_op ? NULL : ljr_cache_replay(&d->cache, &d->trace, n, roots, donors, &d->scratch_binds);
  if (e) {
    ljr_count(LJR_C_CachedCompile, 1);
    ljr_count(LJR_C_TraceReplays, 1);
  } else {
    ljg_walk *w = &d->scratch_walk;
    ljg_walk_run(&d->trace, n, roots, op_by_op ? NULL : donors, w, &d->scratch_binds);
    ljg_graph *g = &d->scratch_graph;
    if (op_by_op) {
      ljg_walk_graph(w, g);
      return run_whole(d, true, g, d->scratch_binds.a, false, out);
    }
    e = ljr_cache_lookup_walk(&d->cache, w->key);
    if (e && ljg_walk_matches(w, e->graph)) {
      ljr_count(LJR_C_CachedCompile, 1);
    } else {
      ljg_walk_graph(w, g);
      e = find_or_compile(d, g);
      if (!e) return lj_last_status();
    }
    ljr_cache_set_walk(&d->cache, e, w);
  }
  lj_status st = run(d, e, d->scratch_binds.a, donors != NULL, out);
  if (st == LJ_OK) ljr_dump_executed(d, e->graph, d->scratch_binds.a, e);
  return st;
}
