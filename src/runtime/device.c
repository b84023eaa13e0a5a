/* device.c — devices and the CPU backend. A device is a backend vtable plus the state that
 * belongs to it: thread pool, buffer pool, trace, RNG state and executable cache. The CPU
 * backend allocates 64-byte aligned host memory (2 MiB aligned and huge-page advised for
 * large buffers, whose first touch otherwise costs a page fault per 4 KiB) and runs a
 * program's kernels in order, splitting each across the pool when it is big enough. */
#include "runtime/runtime.h"
#include "codegen_llvm/codegen.h"
#include "frontend/frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Below this much work (points × expression size) a second thread does not pay. */
#define PARALLEL_MIN_WORK 32768.0
#define HUGE_BUFFER ((size_t)2 << 20)
/* How long a wait for a run spins before it sleeps when the devices' threads leave a CPU
 * free: the spinning thread then takes no kernel's core, and waking from a condition variable
 * costs 35-60 µs on virtual machines, as much as a short step's kernels. */
#define WAIT_SPIN_NS 2000000
/* A parallel kernel's tasks go out in about this many chunks per thread. */
#define CHUNKS_PER_PART 4

static void *cpu_alloc(struct lj_device *d, size_t n) {
  size_t align = n >= HUGE_BUFFER ? HUGE_BUFFER : 64;
  size_t size = (n + align - 1) & ~(align - 1);
  void *p = aligned_alloc(align, size ? size : align);
#ifdef MADV_HUGEPAGE
  if (p && n >= HUGE_BUFFER) madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

static void cpu_free(struct lj_device *d, void *p, size_t n) { free(p); }

static void cpu_copy(struct lj_device *d, void *dst, const void *src, size_t n) {
  if (n) memcpy(dst, src, n);
}

typedef struct launch {
  ljg_kernel_fn fn;
  void *const *slots;
  ljg_kerr *err;
} launch;

static void run_range(void *ctx, int64_t begin, int64_t end) {
  const launch *l = ctx;
  l->fn(l->slots, begin, end, l->err);
}

/* The chunks a kernel's tasks are handed out in across `parts` threads: about CHUNKS_PER_PART
 * each, whole blocks of a row-fused kernel's rows (any number of tasks of task_rows rows); 0
 * (one contiguous range each) for a matmul kernel whose call packs a B shared by all its rows
 * (a chunk would pack it again), whose tasks are its columns, or whose routine takes the
 * range in one call (Winograd's input gradient: its images go together, 16 of 7×7 against
 * one block of the transformed weight, where a chunk held 4). */
static int64_t chunk_of(const ljg_kernel *k, int parts) {
  if ((!k->task_rows && k->row_block >= k->ntasks) ||
      (k->kind == LJG_K_MATMUL && (k->row_block == 0 || k->mm_col_tasks || ljc_gemm_in_one_call(k))))
    return 0;
  int64_t unit = k->row_block > 0 && !k->task_rows ? k->row_block : 1;
  int64_t units = (k->ntasks + unit - 1) / unit, want = (int64_t)parts * CHUNKS_PER_PART;
  return unit * ((units + want - 1) / want);
}

static void cpu_execute(struct lj_device *d, const ljr_exec *e, void *const *slots, ljg_kerr *err) {
  int nthreads = ljr_threadpool_size(d->pool);
  for (int k = 0; k < e->prog->nkernels; k++) {
    const ljg_kernel *kr = &e->prog->kernels[k];
    launch l = {e->fns[k], slots, err};
    int parts = 1;
    if (kr->ntasks > 1 && kr->work >= PARALLEL_MIN_WORK) {
      double by_work = kr->work / PARALLEL_MIN_WORK;
      parts = by_work < nthreads ? (int)by_work : nthreads;
    }
    uint64_t t0 = e->profile ? ljb_now_ns() : 0;
    ljr_threadpool_run(d->pool, run_range, &l, kr->ntasks, parts, parts > 1 ? chunk_of(kr, parts) : 0);
    if (e->profile) ljr_profile_add(e->profile, k, ljb_now_ns() - t0);
    if (err->code) break;
  }
  ljr_count(LJR_C_ExecutedKernels, e->prog->nkernels);
}

const ljr_backend ljr_cpu_backend = {
    .hw = "CPU",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .execute = cpu_execute,
};

/* PyTorch's default seed, so programs that never seed are still reproducible. */
#define DEFAULT_SEED 67280421310721ULL

void ljr_device_init(struct lj_device *d, int ordinal, const ljr_config *cfg) {
  memset(d, 0, sizeof *d);
  d->ordinal = ordinal;
  snprintf(d->name, sizeof d->name, "lj:%d", ordinal);
  d->backend = &ljr_cpu_backend;
  d->pool = ljr_threadpool_new(cfg->pub.num_threads);
  d->flush_denormal = cfg->pub.flush_denormal;
  if ((int64_t)cfg->pub.num_devices * cfg->pub.num_threads < ljr_online_cpus()) d->queue.wait_spin_ns = WAIT_SPIN_NS;
  d->queue.runs_here = cfg->pub.num_devices == 1;
  ljr_pool_init(&d->buffers);
  ljg_trace_init(&d->trace);
  d->trace.call_sites = cfg->pub.ir_debug || cfg->pub.hlo_debug;
  ljr_cache_init(&d->cache, cfg->pub.compilation_cache_size);
  d->rng_seed = DEFAULT_SEED;
  ljg_graph_init(&d->scratch_graph);
  ljr_queue_start(d);
}

void ljr_device_free(struct lj_device *d) {
  ljr_queue_stop(d);
  ljf_tensors_free_all(d);
  ljg_trace_free(&d->trace);
  ljr_cache_free(&d->cache);
  ljg_walk_free(&d->scratch_walk);
  ljg_graph_free(&d->scratch_graph);
  ljb_vec_free(&d->scratch_binds);
  ljr_buffer_release(d->scratch_arena);
  d->scratch_arena = NULL;
  ljr_threadpool_free(d->pool);
  ljr_pool_free(&d->buffers);
}

const char *lj_device_name(const lj_device *d) { return d ? d->name : "(null)"; }
const char *lj_device_hw(const lj_device *d) { return d ? d->backend->hw : "(null)"; }
