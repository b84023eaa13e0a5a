/* runtime.h — the runtime stage: configuration, metrics, device buffers, the thread pool,
 * devices (a backend vtable plus trace, RNG and executable cache), executables and the
 * executor that collects, compiles and runs pending graphs. Prefix ljr_. */
#ifndef LJ_RUNTIME_H
#define LJ_RUNTIME_H

#include "base/base.h"
#include "graph/graph.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

struct ljc_program;
struct ljc_session;

/* ---- config.c ---------------------------------------------------------------------- */

/* The configuration the runtime runs with: lj_config with its strings copied. */
/* LJ_SAVE_TENSORS_FMT */
typedef enum ljr_dump_fmt { LJR_FMT_TEXT, LJR_FMT_DOT, LJR_FMT_LLVM, LJR_FMT_ASM } ljr_dump_fmt;

/* The configuration the runtime runs with: lj_config with its strings copied (the pub
 * string fields point at these copies, NULL when empty; pub.cache_dir is the directory in
 * use, the default resolved, NULL when the persistent cache is off). */
typedef struct ljr_config {
  lj_config pub;
  char cpu[64];
  char metrics_file[1024], save_tensors_file[1024], dump_dir[1024], cache_dir[1024];
  ljr_dump_fmt save_fmt;
} ljr_config;

/* Validates cfg and copies it; false with LJ_ERR_ARG naming the field. */
bool ljr_config_load(ljr_config *out, const lj_config *cfg);
/* The CPUs this process may run on. */
int ljr_online_cpus(void);

/* ---- metrics.c ----------------------------------------------------------------------- */

typedef enum ljr_counter {
#define COUNTER(name) LJR_C_##name,
#define METRIC(name, unit)
#include "runtime/metrics.def"
#undef COUNTER
#undef METRIC
  LJR_NUM_COUNTERS
} ljr_counter;

typedef enum ljr_metric {
#define COUNTER(name)
#define METRIC(name, unit) LJR_M_##name,
#include "runtime/metrics.def"
#undef COUNTER
#undef METRIC
  LJR_NUM_METRICS
} ljr_metric;

void ljr_count(ljr_counter c, int64_t by);
/* Adds a sample: nanoseconds for TIME metrics, bytes for BYTES, a count for COUNT. */
void ljr_sample(ljr_metric m, double v);

/* ---- buffer.c: device memory ---------------------------------------------------------- */

/* A device buffer: 64-byte aligned, refcounted, returned to its device's pool when the last
 * reference goes. Never lives in an arena. A graph's output is written by a queued job
 * (queue.c): seq is that job's number (0: written when made), status its outcome. */
typedef struct ljr_buffer {
  atomic_int refs;
  uint64_t seq;
  atomic_int status;       /* LJ_OK, or the job failed and the contents are garbage */
  int size_class;          /* pool class, -1 when not pooled */
  size_t nbytes;           /* requested size */
  size_t capacity;         /* allocated size */
  void *data;
  struct lj_device *dev;
  struct ljr_buffer *next; /* free list */
} ljr_buffer;

/* A buffer of at least nbytes on d (one reference, seq 0), NULL with LJ_ERR_OOM. */
ljr_buffer *ljr_buffer_new(struct lj_device *d, size_t nbytes);
ljr_buffer *ljr_buffer_retain(ljr_buffer *b);
void ljr_buffer_release(ljr_buffer *b);

typedef struct ljr_pool {
  pthread_mutex_t lock;
  ljr_buffer *free[256];   /* by size class (buffer.c) */
  size_t cached_bytes;
  size_t in_use_bytes, peak_bytes;
} ljr_pool;
void ljr_pool_init(ljr_pool *p);
void ljr_pool_free(ljr_pool *p);

/* ---- threadpool.c -------------------------------------------------------------------- */

/* Waiting threads (the pool's workers and callers, the executor and its waiters) spin this
 * many steps (ljr_spin_step) for what they wait for before sleeping on a condition
 * variable. */
enum { LJR_SPIN_ITERATIONS = 4000 };
/* How long a thread waiting for work (a pool worker, the executor) then stays awake, yielding
 * the CPU to any thread that wants it, before it sleeps: twice the last gap between the end of
 * its work and the next work when that gap was short, else no longer than the spin. On a VM,
 * waking a sleeping thread costs the waker tens of microseconds and the sleeper up to
 * hundreds before it runs again; work that comes in quick succession (small steps, a step's
 * kernels, syncs in a loop) never pays that. */
enum { LJR_AWAKE_MAX_NS = 1000000 };
static inline uint64_t ljr_awake_ns(uint64_t gap_ns) {
  return gap_ns <= LJR_AWAKE_MAX_NS / 2 ? 2 * gap_ns : 0;
}
/* Step i of a spin-wait: a pause, and every 64th step a yield of the CPU. With more threads
 * than cores (the host thread, the executor, the pool's workers) a spinning thread can share
 * its CPU with the very thread it waits for, which then runs only when the spin ends (a 64³
 * matmul step took 0.22 ms instead of 0.012 with the process on one core); the yields let it
 * run. */
static inline void ljr_spin_step(int i) {
  if ((i & 63) == 63) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

typedef void (*ljr_task_fn)(void *ctx, int64_t begin, int64_t end);
typedef struct ljr_threadpool ljr_threadpool;
/* A pool of n-1 workers; the calling thread is the n-th. Workers spin briefly for the next
 * job before sleeping. */
ljr_threadpool *ljr_threadpool_new(int nthreads);
void ljr_threadpool_free(ljr_threadpool *p);
int ljr_threadpool_size(const ljr_threadpool *p);
/* Runs fn over [0, n) on at most `parts` threads, and returns when all is done: one
 * contiguous range per thread (grain 0), or chunks of `grain` tasks (fn runs once per chunk),
 * each thread taking those of its own range first, then those left in the others'. */
void ljr_threadpool_run(ljr_threadpool *p, ljr_task_fn fn, void *ctx, int64_t n, int parts, int64_t grain);

/* ---- executable.c and cache.c ---------------------------------------------------------- */

/* A compiled graph: its canonical graph (for structural confirmation), the fused program
 * (kernels + buffer plan) and the machine code. */
typedef struct ljr_exec {
  ljb_hash key;
  ljg_graph *graph;        /* as collected: what a cache hit is compared against */
  ljg_graph *opt;          /* after the graph passes: what the kernels compute */
  ljg_program *prog;
  struct ljc_program *code;
  ljg_kernel_fn *fns;      /* one per kernel */
  struct ljc_texts *texts; /* LLVM IR and assembly, kept for LJ_SAVE_TENSORS_FMT, or NULL */
  const char *site;        /* LJ_DEBUG: the call site of the sync that compiled it (interned
                              by ljb_call_site), or NULL */
  uint64_t compiled_at;    /* LJ_DEBUG: the device's sync count when it was compiled */
  ljb_hash walk_key;       /* the walk key of the last sync that ran it (has_walk) */
  bool has_walk;
  uint32_t *walk_ids;      /* the trace ids of graph's nodes in that walk (ljg_replay), or NULL */
  struct ljr_profile *profile; /* LJ_PROFILE_KERNELS: its kernels' times, or NULL */
  struct ljr_exec *lru_prev, *lru_next, *bucket_next, *walk_next;
} ljr_exec;

void ljr_exec_free(ljr_exec *e);

/* profile.c: LJ_PROFILE_KERNELS. Each kernel's run time over an executable's runs, the report
 * printed to stderr when the executable is freed. */
typedef struct ljr_profile ljr_profile;
ljr_profile *ljr_profile_new(int nkernels);
/* Kernel k of a run took ns nanoseconds (called by the thread that runs the device's jobs,
 * one job at a time). */
void ljr_profile_add(ljr_profile *p, int k, uint64_t ns);
/* The Kernel Profile of e's runs on stderr (nothing when it never ran), then frees e->profile. */
void ljr_profile_report(ljr_exec *e);

typedef struct ljr_cache {
  int capacity, count;
  ljr_exec **buckets;      /* by graph key */
  ljr_exec **walk_buckets; /* by walk key */
  int nbuckets;
  ljr_exec *lru_head, *lru_tail; /* head: most recently used */
} ljr_cache;
void ljr_cache_init(ljr_cache *c, int capacity);
void ljr_cache_free(ljr_cache *c);
/* The executable for key whose graph equals g (moved to the front), or NULL. */
ljr_exec *ljr_cache_lookup(ljr_cache *c, ljb_hash key, const ljg_graph *g);
/* The executable last run by a sync with this walk key, or NULL (the caller confirms it
 * with ljg_walk_matches); marks it most recently used. */
ljr_exec *ljr_cache_lookup_walk(ljr_cache *c, ljb_hash walk_key);
/* Makes walk_key find e (replacing e's previous walk key) and keeps the walk's node ids for
 * ljr_cache_replay. */
void ljr_cache_set_walk(ljr_cache *c, ljr_exec *e, const ljg_walk *w);
/* The first of the few most recently used executables whose last walk t replays below
 * roots[0..n) with donors (ljg_replay; binds receives the bindings), marked most recently used; or NULL.
 * A training loop's step is found here, before any walk. */
ljr_exec *ljr_cache_replay(ljr_cache *c, const ljg_trace *t, int n, ljg_node *const *roots,
                           ljg_node *const *donors, ljg_binding_vec *binds);
/* Inserts e (owned by the cache from now), evicting the least recently used beyond
 * capacity. */
void ljr_cache_insert(ljr_cache *c, ljr_exec *e);

/* ---- device.c ----------------------------------------------------------------------- */

/* What a backend provides. The CPU backend is the first; a GPU backend adds its own. */
typedef struct ljr_backend {
  const char *hw;
  void *(*alloc)(struct lj_device *d, size_t nbytes);   /* 64-byte aligned; NULL on OOM */
  void (*free)(struct lj_device *d, void *p, size_t nbytes);
  void (*to_device)(struct lj_device *d, void *dst, const void *src, size_t n);
  void (*to_host)(struct lj_device *d, void *dst, const void *src, size_t n);
  void (*copy)(struct lj_device *d, void *dst, const void *src, size_t n); /* device to device */
  /* Runs e with its slot table bound; fills *err with a data-dependent error if any. */
  void (*execute)(struct lj_device *d, const ljr_exec *e, void *const *slots, ljg_kerr *err);
} ljr_backend;

extern const ljr_backend ljr_cpu_backend;

struct lj_tensor;

/* ---- queue.c: async execution ------------------------------------------------------- */

/* One run of an executable, queued on its device: the slot table bound at submission, the
 * buffers it holds (parameters and outputs, released when it ends). */
typedef struct ljr_job {
  uint64_t seq;
  const struct ljr_exec *e;
  void **slots;          /* per slot: its address */
  uint64_t *cells;       /* per slot: a scalar parameter's value */
  ljr_buffer **owned;    /* per slot: the buffer it holds, or NULL */
  struct ljr_job *next;
} ljr_job;

/* A device's executor thread and its FIFO of jobs. */
typedef struct ljr_queue {
  pthread_t thread;
  bool started;
  pthread_mutex_t lock;
  pthread_cond_t wake, finished;
  ljr_job *head, *tail;          /* under lock */
  bool sleeping, paused;         /* under lock */
  atomic_bool head_ready, stop;
  atomic_int waiters;
  uint64_t gap_ns;               /* executor side: from the end of a job to the next one's
                                    arrival, last time */
  uint64_t submitted;            /* host side: the last job's number */
  bool host_waited;              /* host side: whether the host waited for the last job (lj_wait,
                                    a read of its outputs) after queuing it */
  bool runs_here;                /* whether jobs may run on the syncing thread (one device) */
  atomic_ullong done;            /* the last finished job's number */
  uint64_t wait_spin_ns;         /* how long a wait spins before it sleeps (ljr_queue_wait) */
  atomic_int error;              /* a failed job's lj_status, not yet reported (set under lock) */
  char error_msg[1024];          /* its message, under lock */
} ljr_queue;

void ljr_queue_start(struct lj_device *d);
/* Waits for every job, then stops the thread. */
void ljr_queue_stop(struct lj_device *d);
/* The number the next queued job gets (its output buffers carry it). */
uint64_t ljr_queue_next(const struct lj_device *d);
/* Queues j, numbered ljr_queue_next (owned by the queue from now; freed after it runs). */
void ljr_queue_submit(struct lj_device *d, ljr_job *j);
/* Waits until job seq has run: spins (ljr_spin_step) for LJR_SPIN_ITERATIONS steps, or
 * for wait_spin_ns if that is longer, then sleeps. */
void ljr_queue_wait(struct lj_device *d, uint64_t seq);
/* Holds queued jobs back (tests: to see what runs while a job waits) or lets them go. */
void ljr_queue_pause(struct lj_device *d, bool paused);
/* From the executor: records a job's error for the next barrier (the first one until then). */
void ljr_queue_fail(struct lj_device *d, lj_status st, const char *msg);
/* The error a job left (set as this thread's error with its message, and cleared), or LJ_OK. */
lj_status ljr_queue_take_error(struct lj_device *d);
/* Waits for every queued job; then ljr_queue_take_error. */
lj_status ljr_queue_finish(struct lj_device *d);
/* Waits until b is written; LJ_ERR_RUNTIME (naming op) if its job failed, or a job's pending
 * error. */
lj_status ljr_buffer_wait(ljr_buffer *b, const char *op);
/* executor.c: runs a job on the executor thread. */
void ljr_job_run(struct lj_device *d, ljr_job *j);

/* Why a graph runs (LJ_DEBUG, LJ_SAVE_TENSORS_FILE). */
typedef enum ljr_cause {
  LJR_CAUSE_SYNC,         /* lj_sync */
  LJR_CAUSE_SYNC_TENSORS, /* lj_sync_tensors */
  LJR_CAUSE_READ,         /* a host read of a pending tensor */
  LJR_CAUSE_OPTIMIZER,    /* an optimizer step's sync */
  LJR_CAUSE_LOADER,       /* the device loader's barrier */
  LJR_CAUSE_REPLAY        /* a parsed graph run by a tool */
} ljr_cause;
const char *ljr_cause_name(ljr_cause c);

struct lj_device {
  int ordinal;
  char name[16];
  const ljr_backend *backend;
  ljr_threadpool *pool;
  ljr_pool buffers;
  ljg_trace trace;
  ljr_cache cache;
  uint64_t rng_seed, rng_offset;
  /* Live tensors in id (creation) order: the candidates for a sync's roots. */
  struct lj_tensor *live_head, *live_tail;
  uint64_t next_tensor_id;
  /* executor.c: reusable per-sync storage; the scratch arena belongs to the executor thread */
  ljg_walk scratch_walk;
  ljg_graph scratch_graph;
  ljg_binding_vec scratch_binds;
  ljr_buffer *scratch_arena;
  ljr_queue queue;
  uint64_t last_run_ns;    /* the last job's run time (read after waiting for it) */
  bool flush_denormal;     /* kernels run with subnormals flushed to zero (LJ_FLUSH_DENORMAL) */
  /* dump.c and analysis.c: the current sync and what LJ_DEBUG counts between warnings */
  ljr_cause cause;
  uint64_t syncs;          /* graphs run on this device */
  uint64_t steps;          /* lj_sync calls on this device */
  int window_steps, window_compiles, window_reads;
};

/* ---- dataset.c and loader.c: IDX datasets and the device loader ----------------------- */

/* IDX element types (the third magic byte). */
typedef enum ljr_idx_type {
  LJR_IDX_U8 = 0x08,
  LJR_IDX_I8 = 0x09,
  LJR_IDX_I16 = 0x0B,
  LJR_IDX_I32 = 0x0C,
  LJR_IDX_F32 = 0x0D,
  LJR_IDX_F64 = 0x0E
} ljr_idx_type;

/* One IDX array in host byte order. */
typedef struct ljr_idx {
  ljr_idx_type type;
  int ndim;
  int64_t dims[LJ_MAX_DIMS];
  size_t elem_size;
  void *data;
} ljr_idx;

/* A dataset's samples and labels, shared (refcounted) by datasets and loaders. */
typedef struct ljr_dataset_storage {
  atomic_int refs;
  ljr_idx samples, labels;
  int sample_ndim;                  /* the delivered sample shape (channel added to images) */
  int64_t sample_shape[LJ_MAX_DIMS];
  int64_t sample_numel;
} ljr_dataset_storage;

struct lj_dataset {
  ljr_dataset_storage *s;
  int64_t start, count;
};

void ljr_dataset_storage_release(ljr_dataset_storage *s);
/* Samples idx[0..count) (absolute indices) converted to f32 one after another into out: u8
 * scaled to [0, 1], then (x - mean) / std. */
void ljr_dataset_samples_f32(const ljr_dataset_storage *s, const int64_t *idx, int64_t count, double mean,
                             double std, float *out);
/* Label i (absolute) as an integer. */
int64_t ljr_dataset_label(const ljr_dataset_storage *s, int64_t i);

/* Stops every loader's thread and drops its staged buffers (lj_shutdown, before the devices
 * go). */
void ljr_loaders_stop(void);

/* ---- runtime.c ----------------------------------------------------------------------- */

typedef struct ljr_runtime {
  ljr_config cfg;
  struct ljc_session *cg;
  int ndevices;
  struct lj_device *devices;
  ljb_hash env_seed;      /* hashes everything outside the graph that changes code */
} ljr_runtime;

/* The running runtime, started on first use with lj_config_default(); NULL (with the error
 * set) if it cannot start. */
ljr_runtime *ljr_get(void);
/* The running runtime or NULL, never starting it. */
ljr_runtime *ljr_current(void);

/* device.c */
void ljr_device_init(struct lj_device *d, int ordinal, const ljr_config *cfg);
void ljr_device_free(struct lj_device *d);

/* ---- executor.c ---------------------------------------------------------------------- */

/* Runs the graph that computes roots[0..n) (pending nodes of d's trace): collects it, finds
 * or compiles its executable, binds parameters and queues its run (queue.c). out[i] receives
 * a new reference to root i's buffer, written once the run has ended (ljr_buffer_wait),
 * whenever the run was queued, even when an error is returned (LJ_SYNC_WAIT: the run's).
 * donors (NULL: none) gives each root a node whose buffer the run may overwrite with the
 * root's value (ljg_walk_run): the caller guarantees that nothing reads that node after this
 * run (the trace is reset after it). The buffer is taken when nothing but the trace holds
 * it; otherwise the root gets a fresh buffer. */
lj_status ljr_execute(struct lj_device *d, int n, ljg_node *const *roots, ljg_node *const *donors,
                      ljr_buffer **out, ljr_cause cause);
/* Runs a collected (or parsed) graph on d with its parameters bound to binds (buffers of d
 * for DATA parameters, values for SCALAR ones); out[r] receives root r's buffer, as
 * ljr_execute. With donate, a root with a donor (g->donors) takes that parameter's buffer
 * when binds holds the only reference to it (the caller then reads the parameter no more). */
lj_status ljr_run_graph(struct lj_device *d, const ljg_graph *g, const ljg_binding *binds, bool donate,
                        ljr_buffer **out, ljr_cause cause);
/* ---- dump.c and analysis.c: debugging output ---------------------------------------- */

struct ljc_texts;
/* mkdir -p: creates dir and its missing parents; false (errno set) if one cannot be made. */
bool ljr_make_dirs(const char *dir);
/* Whether compiles keep their LLVM IR and assembly (LJ_DUMP_DIR, LJ_SAVE_TENSORS_FMT). */
bool ljr_dump_keeps_texts(void);
struct ljc_objects;
/* LJ_DUMP_DIR: e's graph, kernels, LLVM IR before and after optimization, assembly (t), and
 * each kernel's object file (objs). */
void ljr_dump_compiled(const ljr_exec *e, const struct ljc_texts *t, const struct ljc_objects *objs);
/* After a graph ran on d: LJ_SAVE_TENSORS_FILE gets g (e: its executable, NULL op by op) and
 * LJ_METRICS_FILE the metrics report. */
void ljr_dump_executed(const struct lj_device *d, const ljg_graph *g, const ljg_binding *binds,
                       const ljr_exec *e);
/* LJ_DEBUG >= 1, before g (key) compiles on d: the Compilation Analysis on stderr, with why
 * no cached executable matched. */
void ljr_analysis_compile(struct lj_device *d, const ljg_graph *g, ljb_hash key);
/* LJ_DEBUG >= 2, after e ran on d (for ns): the Execution Analysis. */
void ljr_analysis_execute(const struct lj_device *d, const ljr_exec *e, uint64_t ns);
/* LJ_DEBUG >= 2: a step (lj_sync) and a host read on d, for the frequency warnings. */
void ljr_analysis_step(struct lj_device *d);
void ljr_analysis_read(struct lj_device *d);

/* The graph key of the collected graph g on device d's runtime. */
ljb_hash ljr_graph_key(const ljg_graph *g);
/* Runs the passes and fusion on a copy of g (no LLVM) and returns the kernel count. */
int ljr_kernel_count(const ljg_graph *g);

#endif
