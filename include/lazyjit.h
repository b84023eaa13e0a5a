/* lazyjit.h — the whole public API of lazyjit: lazy tensors for C, compiled through LLVM.
 *
 * Tensors on a lazyjit device are lazy: every op records a node in a pending graph instead of
 * running. A barrier (lj_sync, like PyTorch/XLA's xm.mark_step()) or a host read collects the
 * pending graph, hashes it, looks the hash up in a cache of compiled executables, compiles on a
 * miss (fusion, LLVM IR, vectorized machine code through ORC LLJIT) and runs the executable on
 * the device's thread pool. A loop that records the same graph every step compiles once, and
 * compiled graphs persist on disk (lj_config.cache_dir), so the next run of the program loads
 * them instead of compiling.
 *
 * Tutorial (this block is compiled and run by the test suite):
 *
 * @code
 *   #include <lazyjit.h>
 *   #include <stdio.h>
 *
 *   int main(void) {
 *     lj_device *dev = lj_default_device();
 *     float w0[6] = {1, 2, 3, 4, 5, 6};
 *     lj_tensor *w = lj_tensor_from_host(dev, LJ_F32, LJ_SHAPE(2, 3), w0);
 *     for (int step = 0; step < 3; step++) {
 *       lj_scope_begin();                             // frees the step's temporaries
 *       lj_tensor *g = lj_mul_scalar(lj_tanh(w), 0.5); // recorded, not run
 *       lj_assign(w, lj_sub(w, g));                    // w takes the new value
 *       lj_scope_end();
 *       if (lj_sync(dev) != LJ_OK) {                   // compiles once, then hits the cache
 *         fprintf(stderr, "%s\n", lj_last_error());
 *         return 1;
 *       }
 *     }
 *     lj_tensor *total = lj_sum(w, 0, NULL, false);    // 0 dims: reduce over all of them
 *     double sum = lj_item(total);                      // a host read runs what it needs
 *     printf("sum = %.4f, compiles = %lld, cache hits = %lld\n", sum,
 *            (long long)lj_counter_value("UncachedCompile"),
 *            (long long)lj_counter_value("CachedCompile"));
 *     lj_tensor_release(total);
 *     lj_tensor_release(w);
 *     lj_shutdown();
 *     return 0;
 *   }
 * @endcode
 *
 * Conventions
 *  - Ownership: a returned lj_tensor * is a new reference, owned by the caller, or by the
 *    innermost open scope of the calling thread (lj_scope_begin). Release it with
 *    lj_tensor_release. Strings returned as char * are malloc'd; the caller frees them.
 *  - Errors: a failing call returns NULL (or a status other than LJ_OK) and sets a
 *    thread-local status and message (lj_last_status, lj_last_error) that name the op, the
 *    argument and the offending shapes or values. Errors are sticky like errno: a later
 *    successful call does not clear them; lj_clear_error does. Every op accepts NULL inputs
 *    and returns NULL without overwriting the first error, so a chain can be checked once.
 *  - Semantics follow PyTorch: broadcasting, type promotion, integer division, NaN handling,
 *    reductions and matmul. Shapes are static: a new shape is a new graph and a new compile.
 *  - Scalars (the double arguments of *_scalar ops, lj_full, lj_clamp...) are graph
 *    parameters, not constants, so changing their value never recompiles; only 0, 1 and -1
 *    are baked into the graph (LJ_NO_SPECIAL_SCALARS=1 turns that off). A scalar whose value
 *    is integral acts like a Python int in type promotion, any other like a Python float.
 *  - Threads: a device's tensors must be used from one thread at a time. Errors and scopes
 *    are per thread.
 */
#ifndef LAZYJIT_H
#define LAZYJIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------- */

/** Status of a call. LJ_OK is 0; every other value names the kind of failure. */
typedef enum lj_status {
  LJ_OK = 0,
  LJ_ERR_ARG,         /**< a NULL pointer or an out-of-range argument */
  LJ_ERR_SHAPE,       /**< shapes that do not fit the op (broadcasting, sizes, numel) */
  LJ_ERR_DTYPE,       /**< a dtype the op does not take, or mismatched dtypes */
  LJ_ERR_DEVICE,      /**< tensors on different devices, or no such device */
  LJ_ERR_OOM,         /**< out of memory */
  LJ_ERR_IO,          /**< a file could not be read or written */
  LJ_ERR_COMPILE,     /**< LLVM failed; the message is LLVM's */
  LJ_ERR_RUNTIME,     /**< a data-dependent error in compiled code (e.g. integer division by 0) */
  LJ_ERR_UNSUPPORTED, /**< a valid request lazyjit does not handle */
  LJ_ERR_DISTRIBUTED  /**< a collective failed */
} lj_status;

/** The status of the last failing call on this thread (LJ_OK if none since lj_clear_error). */
lj_status lj_last_status(void);
/** The message of the last failing call on this thread; "" when none. Borrowed: valid until
 *  the next failing call or lj_clear_error on this thread. */
const char *lj_last_error(void);
/** Resets this thread's status to LJ_OK and its message to "". */
void lj_clear_error(void);
/** A static name for a status, e.g. "LJ_ERR_SHAPE". Never NULL. */
const char *lj_status_str(lj_status s);

/* ---------------------------------------------------------------------------------------
 * Runtime and devices
 * ------------------------------------------------------------------------------------- */

/** Runtime configuration. lj_config_default() fills it from the defaults overlaid with the
 *  LJ_* environment (docs/env_vars.md); a program may then change fields before lj_init. */
typedef struct lj_config {
  int num_devices;            /**< LJ_NUM_DEVICES: devices in this process (default 1) */
  int num_threads;            /**< LJ_NUM_THREADS: threads per device that run kernels (default:
                                   online CPUs); compiles use at least every CPU the process may run on */
  int opt_level;              /**< LJ_OPT_LEVEL: LLVM optimization level 0..3 (default 2) */
  const char *cpu;            /**< LJ_CPU: target CPU name for code generation; NULL or "" =
                                   the host CPU. Copied by lj_init. */
  int compilation_cache_size; /**< LJ_COMPILATION_CACHE_SIZE: executables kept per device
                                   (default 1024; at least 1) */
  bool disable_fusion;        /**< LJ_DISABLE_FUSION: every op becomes its own kernel */
  bool winograd;              /**< LJ_WINOGRAD: f32 3×3 and 5×5 convolutions of stride and
                                   dilation 1 with at least 8 channels in and out (and dilated
                                   ones whose dilation divides the image's sides and the
                                   padding, as the convolution of the sub-images) go through
                                   Winograd's F(4×4, 3×3) or F(5×5, 3×3), F(2×2, 5×5) or
                                   F(3×3, 5×5) (whichever takes fewer products), which rounds
                                   to about 3e-5 of the output's magnitude (default on); off:
                                   through the GEMM, as the other convolutions, about 1e-6
                                   (docs/semantics.md) */
  bool no_special_scalars;    /**< LJ_NO_SPECIAL_SCALARS: 0, 1, -1 are parameters too, and so
                                   is every lj_pow_scalar exponent */
  bool sync_tensors_opbyop;   /**< LJ_SYNC_TENSORS_OPBYOP: a sync runs every op of its graph
                                   as an executable of its own (eager execution through the
                                   same compiler; each one-op graph is cached) */
  bool get_tensors_opbyop;    /**< LJ_GET_TENSORS_OPBYOP: the same, for the graphs that host
                                   reads (lj_tensor_to_host, lj_item) run */
  bool sync_wait;             /**< LJ_SYNC_WAIT: a sync returns when its graph has run (and
                                   returns its runtime error), instead of when it is queued */
  bool enable_param_aliasing; /**< LJ_ENABLE_PARAM_ALIASING: lj_sync writes the new value of
                                   a tensor given one by lj_assign into the buffer it held
                                   before, when nothing else holds that buffer (default on) */
  const char *metrics_file;   /**< LJ_METRICS_FILE: after every executed graph, append
                                   "[MetricsData; step=N]" and the metrics report to this file
                                   ("STDOUT" / "STDERR": those streams); NULL or "" = off.
                                   Copied by lj_init */
  const char *save_tensors_file; /**< LJ_SAVE_TENSORS_FILE: append every executed graph to
                                   "<file>.<device ordinal>"; NULL or "" = off. Copied */
  const char *save_tensors_fmt; /**< LJ_SAVE_TENSORS_FMT: "text" (default), "dot", "llvm"
                                   (optimized LLVM IR of its kernels) or "asm". Copied */
  const char *dump_dir;       /**< LJ_DUMP_DIR: for every compiled graph, write its graph
                                   text, fused kernels, LLVM IR before and after optimization
                                   and assembly into this directory (created if missing),
                                   named by graph hash; NULL or "" = off. Copied */
  bool ir_debug;              /**< LJ_IR_DEBUG: record the user call site of every node
                                   (shown as location= in dumps) */
  bool hlo_debug;             /**< LJ_HLO_DEBUG: record call sites as ir_debug does and carry
                                   them into the generated code as DWARF line info, registered
                                   with gdb's JIT interface, so gdb breaks in a kernel at the
                                   user's line and perf annotates kernels with it */
  int debug;                  /**< LJ_DEBUG: 0 off; 1 a Compilation Analysis on stderr per
                                   compile (cause, graph hash, inputs, outputs, call site, why
                                   the cache missed); 2 also an Execution Analysis per run and
                                   warnings about frequent compiles and host reads */
  bool perf;                  /**< LJ_PERF: list every compiled kernel in /tmp/perf-<pid>.map
                                   so perf report / perf top name kernels, and in a jitdump
                                   file for perf inject --jit (under $JITDUMPDIR, else
                                   $HOME, in .debug/jit/) */
  bool profile_kernels;       /**< LJ_PROFILE_KERNELS: time every kernel of every run; when an
                                   executable is freed (evicted from the cache, or at
                                   lj_shutdown) a Kernel Profile of its runs goes to stderr:
                                   each kernel's mean and fastest time and share of the run,
                                   the slowest first */
  bool precompiled_routines;  /**< LJ_PRECOMPILED_ROUTINES: take the GEMM routines from those
                                   the library was built with, when it was built for this
                                   target (the build host's CPU, LLVM and opt_level), instead
                                   of compiling them at their first use (default on; off:
                                   compiled, or found in the persistent cache, as on any
                                   other target) */
  const char *cache_dir;      /**< LJ_CACHE_DIR: the persistent cache, a directory of compiled
                                   graphs shared by every process that uses it: a graph found
                                   there is loaded instead of compiled (docs/caching.md).
                                   NULL = the default, $XDG_CACHE_HOME/lazyjit, else
                                   $HOME/.cache/lazyjit; "" = off. Created if missing. Copied */
  bool cache_readonly;        /**< LJ_CACHE_READONLY: use the persistent cache's entries but
                                   never write, touch or evict any */
  int cache_max_mb;           /**< LJ_CACHE_MAX_MB: the persistent cache's size limit in MiB
                                   (default 1024; 0 = no limit): a write evicts the entries
                                   used longest ago beyond it */
  int nt_store_kb;            /**< LJ_NT_STORE_KB: a kernel writes an output of at least half
                                   this many KiB with non-temporal stores (straight to memory,
                                   past the caches) when it moves at least this many KiB in
                                   all (default: the host's L3 cache size, at most 32768, so
                                   only outputs the cache could not keep; 0 = never) */
  bool flush_denormal;        /**< LJ_FLUSH_DENORMAL: kernels run with subnormal floats flushed
                                   to zero, read as zero and results below the smallest
                                   normal number stored as zero (x86 and AArch64), as
                                   torch.set_flush_denormal(true) does: an x86 core takes
                                   ~100 cycles for an operation on a subnormal. Default off:
                                   subnormals kept, as PyTorch keeps them (docs/semantics.md) */
} lj_config;

/** The default configuration overlaid with the LJ_* environment variables. Strings point
 *  into the environment; lj_init copies them. */
lj_config lj_config_default(void);

/** Starts the runtime with cfg (NULL: lj_config_default()). Optional: the first call that
 *  needs the runtime calls it with NULL. Errors: LJ_ERR_ARG for a field out of range (the
 *  message names it), LJ_ERR_COMPILE if LLVM cannot target the CPU, LJ_ERR_ARG if the
 *  runtime is already running (call lj_shutdown first). */
lj_status lj_init(const lj_config *cfg);

/** Waits for pending work and frees everything: devices, caches, compiled code, and the
 *  storage of every tensor still alive (their handles become invalid; release them first).
 *  A later call that needs the runtime starts it again. */
void lj_shutdown(void);

typedef struct lj_device lj_device;

/** Number of devices (starts the runtime if needed; 0 if it cannot start). */
int lj_device_count(void);
/** Device `ordinal` (0-based), borrowed: valid until lj_shutdown. NULL with LJ_ERR_DEVICE if
 *  there is no such device. */
lj_device *lj_device_get(int ordinal);
/** Device 0; NULL if the runtime cannot start (lj_last_error says why). */
lj_device *lj_default_device(void);
/** "lj:<ordinal>", e.g. "lj:0". Borrowed, static for the device's life. */
const char *lj_device_name(const lj_device *d);
/** The hardware behind the device: "CPU". Borrowed, static. */
const char *lj_device_hw(const lj_device *d);

/* ---------------------------------------------------------------------------------------
 * Dtypes and shapes
 * ------------------------------------------------------------------------------------- */

/** Element types. BF16 and F16 compute in f32 and round after every op, as PyTorch does on
 *  the CPU. BOOL is stored as one byte, 0 or 1. */
typedef enum lj_dtype {
  LJ_F32, LJ_F64, LJ_BF16, LJ_F16, LJ_I8, LJ_U8, LJ_I32, LJ_I64, LJ_BOOL, LJ_I16
} lj_dtype;

/** Number of dtypes (one past the last lj_dtype value). */
#define LJ_NUM_DTYPES 10
/** Most dimensions a tensor may have. */
#define LJ_MAX_DIMS 8

/** Short name of a dtype: "f32", "f64", "bf16", "f16", "i8", "u8", "i32", "i64", "bool",
 *  "i16"; "?" for a value out of range. Static. */
const char *lj_dtype_name(lj_dtype dt);
/** Bytes per element of a dtype; 0 for a value out of range. */
size_t lj_dtype_size(lj_dtype dt);

/** Expands to the `int ndim, const int64_t *shape` pair of a shape: LJ_SHAPE(2, 3).
 *  For a 0-d (scalar) shape use LJ_SCALAR_SHAPE. */
#define LJ_SHAPE(...)                                                                   \
  (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                     \
      (const int64_t[]){__VA_ARGS__}
/** The `int ndim, const int64_t *shape` pair of a 0-d shape. */
#define LJ_SCALAR_SHAPE 0, (const int64_t *)0

/* ---------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------- */

typedef struct lj_tensor lj_tensor;

/** A tensor of `shape` with a copy of `data` (ndim ≤ LJ_MAX_DIMS, row-major, numel elements
 *  of dt). The copy happens now: the result is device data, not a pending node. data may be
 *  NULL only when numel is 0. Errors: LJ_ERR_ARG (NULL device or data, negative size,
 *  ndim out of range), LJ_ERR_DTYPE, LJ_ERR_OOM. */
lj_tensor *lj_tensor_from_host(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape,
                               const void *data);

/** Copies t's value to dst (row-major), running the pending work t needs first. nbytes must
 *  be exactly numel × lj_dtype_size(dtype). Waits for the run computing t. Errors: LJ_ERR_ARG
 *  (NULL, wrong nbytes, the message gives both sizes), any error of the sync it runs
 *  (LJ_ERR_COMPILE, LJ_ERR_RUNTIME), a queued run's error not yet reported, and
 *  LJ_ERR_RUNTIME when the run that computed t failed. */
lj_status lj_tensor_to_host(lj_tensor *t, void *dst, size_t nbytes);

/** The value of a one-element tensor as a double (runs what t needs). NaN on error, with
 *  LJ_ERR_SHAPE if t has more than one element. */
double lj_item(lj_tensor *t);

/** Lazy creation ops: a pending tensor of `shape` filled with 0, 1, or v (v is a scalar
 *  parameter). Errors: LJ_ERR_ARG, LJ_ERR_DTYPE. */
lj_tensor *lj_zeros(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape);
lj_tensor *lj_ones(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape);
lj_tensor *lj_full(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape, double v);

/** 1-D tensor start, start+step, ... up to but excluding end (torch.arange). Its length,
 *  ceil((end-start)/step), is part of the shape, so it is fixed when recorded; start and step
 *  are scalar parameters. Errors: LJ_ERR_ARG for step 0, a step whose sign does not reach end,
 *  or non-finite bounds; LJ_ERR_DTYPE for bool. */
lj_tensor *lj_arange(lj_device *d, lj_dtype dt, double start, double end, double step);

/** Uniform [0,1) and standard normal random tensors of a float dtype. The generator is
 *  counter-based (Philox4x32-10): the device seed and a per-op offset are scalar parameters,
 *  so random ops never recompile and results do not depend on the thread count.
 *  Errors: LJ_ERR_DTYPE for non-float dtypes, LJ_ERR_ARG. */
lj_tensor *lj_rand(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape);
lj_tensor *lj_randn(lj_device *d, lj_dtype dt, int ndim, const int64_t *shape);
/** Sets d's random seed and resets its offset: the random ops that follow repeat. */
void lj_manual_seed(lj_device *d, uint64_t seed);

/** Number of dimensions (0 for a 0-d tensor); -1 for NULL. */
int lj_tensor_ndim(const lj_tensor *t);
/** The sizes, borrowed (valid while t lives); NULL for NULL. */
const int64_t *lj_tensor_shape(const lj_tensor *t);
/** Number of elements; -1 for NULL. */
int64_t lj_tensor_numel(const lj_tensor *t);
/** The dtype; LJ_F32 for NULL. */
lj_dtype lj_tensor_dtype(const lj_tensor *t);
/** The device, borrowed; NULL for NULL. */
lj_device *lj_tensor_device(const lj_tensor *t);
/** True when t's value is a pending (not yet computed) graph node. */
bool lj_tensor_is_pending(const lj_tensor *t);

/** Adds a reference to t and returns t (NULL stays NULL). The new reference belongs to the
 *  caller, never to a scope. */
lj_tensor *lj_tensor_retain(lj_tensor *t);
/** Drops a reference; the tensor is freed with the last one. NULL is fine. Releasing a
 *  reference owned by an open scope is allowed: the scope then drops its entry. */
void lj_tensor_release(lj_tensor *t);

/** dst takes src's value and keeps its identity (its place in the graph's roots). src is
 *  broadcast to dst's shape and cast to dst's dtype (like Tensor.copy_); the assignment is
 *  recorded lazily and is not recorded by autograd. The next lj_sync may write the new value
 *  into the buffer dst held before when nothing else holds that buffer (buffer donation,
 *  docs/semantics.md; LJ_ENABLE_PARAM_ALIASING). Errors: LJ_ERR_ARG (NULL), LJ_ERR_DEVICE,
 *  LJ_ERR_SHAPE (not broadcastable to dst's shape). */
lj_status lj_assign(lj_tensor *dst, lj_tensor *src);

/* ---------------------------------------------------------------------------------------
 * Scopes: every tensor created on this thread inside a scope is released when it ends,
 * except the ones passed to lj_keep. Scopes nest.
 * ------------------------------------------------------------------------------------- */

/** Opens a scope on this thread; scopes nest. */
void lj_scope_begin(void);
/** Releases the tensors the innermost scope owns. Without an open scope it does nothing. */
void lj_scope_end(void);
/** Moves t out of the innermost scope into the enclosing one (or to the caller when none)
 *  and returns t. NULL stays NULL. */
lj_tensor *lj_keep(lj_tensor *t);

/* ---------------------------------------------------------------------------------------
 * Elementwise ops (lazy). Binary ops broadcast and promote like PyTorch; the result is a new
 * reference. Ops that PyTorch only defines for some dtypes give LJ_ERR_DTYPE for the others.
 * ------------------------------------------------------------------------------------- */

/* Unary. exp, log, log1p, expm1, sqrt, rsqrt, sin, cos, tanh, sigmoid, erf and reciprocal
 * promote integer and bool inputs to f32. relu, gelu, silu, abs, neg, floor, ceil, round and
 * sign keep the dtype (floor/ceil/round are the identity on integers; round is half to
 * even). logical_not and isnan return bool. */
/** -t. Not for bool (LJ_ERR_DTYPE). */
lj_tensor *lj_neg(lj_tensor *t);
/** |t|. Not for bool. */
lj_tensor *lj_abs(lj_tensor *t);
/** e^t. */
lj_tensor *lj_exp(lj_tensor *t);
/** Natural log (NaN below 0, -inf at 0). */
lj_tensor *lj_log(lj_tensor *t);
/** log(1 + t), accurate for small t. */
lj_tensor *lj_log1p(lj_tensor *t);
/** e^t - 1, accurate for small t. */
lj_tensor *lj_expm1(lj_tensor *t);
/** Square root. */
lj_tensor *lj_sqrt(lj_tensor *t);
/** 1 / sqrt(t). */
lj_tensor *lj_rsqrt(lj_tensor *t);
/** Sine (radians). */
lj_tensor *lj_sin(lj_tensor *t);
/** Cosine (radians). */
lj_tensor *lj_cos(lj_tensor *t);
/** Hyperbolic tangent. */
lj_tensor *lj_tanh(lj_tensor *t);
/** 1 / (1 + e^-t). */
lj_tensor *lj_sigmoid(lj_tensor *t);
/** max(t, 0), NaN kept. Not for bool. */
lj_tensor *lj_relu(lj_tensor *t);
/** GELU: x·Φ(x) exactly (erf) or, with tanh_approx, PyTorch's approximate='tanh' form. */
lj_tensor *lj_gelu(lj_tensor *t, bool tanh_approx);
/** t * sigmoid(t). Float dtypes only. */
lj_tensor *lj_silu(lj_tensor *t);
/** The error function. */
lj_tensor *lj_erf(lj_tensor *t);
/** Round down (the identity on integers). Not for bool. */
lj_tensor *lj_floor(lj_tensor *t);
/** Round up (the identity on integers). Not for bool. */
lj_tensor *lj_ceil(lj_tensor *t);
/** Round half to even (the identity on integers). Not for bool. */
lj_tensor *lj_round(lj_tensor *t);
/** -1, 0 or 1 (0 for NaN). */
lj_tensor *lj_sign(lj_tensor *t);
/** 1 / t. */
lj_tensor *lj_reciprocal(lj_tensor *t);
/** t == 0, as bool. */
lj_tensor *lj_logical_not(lj_tensor *t);
/** Whether each element is NaN (false for integers), as bool. */
lj_tensor *lj_isnan(lj_tensor *t);

/* Binary. div is true division (integers give f32). maximum/minimum propagate NaN.
 * remainder has the sign of the divisor (Python's %). pow on integers with a negative
 * exponent gives 0 except for bases 1 and -1, as PyTorch does. Integer division or remainder
 * by zero is reported as LJ_ERR_RUNTIME once the graph has run (lj_sync). */
/** a + b (for two bools: a or b). */
lj_tensor *lj_add(lj_tensor *a, lj_tensor *b);
/** a - b. Not for two bools. */
lj_tensor *lj_sub(lj_tensor *a, lj_tensor *b);
/** a * b (for two bools: a and b). */
lj_tensor *lj_mul(lj_tensor *a, lj_tensor *b);
/** a / b, true division: integers give f32. */
lj_tensor *lj_div(lj_tensor *a, lj_tensor *b);
/** a ** b (C's pow for floats; exact for integers). Not for two bools. */
lj_tensor *lj_pow(lj_tensor *a, lj_tensor *b);
/** Elementwise max; NaN if either is NaN. */
lj_tensor *lj_maximum(lj_tensor *a, lj_tensor *b);
/** Elementwise min; NaN if either is NaN. */
lj_tensor *lj_minimum(lj_tensor *a, lj_tensor *b);
/** a - floor(a / b) * b: the sign of b (Python's %). Not for two bools. */
lj_tensor *lj_remainder(lj_tensor *a, lj_tensor *b);

/** Rounding modes of lj_div_rounding (torch.div's rounding_mode). */
typedef enum lj_rounding {
  LJ_ROUND_NONE,  /**< true division */
  LJ_ROUND_TRUNC, /**< toward zero; integers stay integers */
  LJ_ROUND_FLOOR  /**< toward -inf (floor_divide, Python's //) */
} lj_rounding;
/** torch.div(a, b, rounding_mode): see lj_rounding. LJ_ERR_ARG for a bad mode. */
lj_tensor *lj_div_rounding(lj_tensor *a, lj_tensor *b, lj_rounding mode);
/** lj_div_rounding(a, b, LJ_ROUND_FLOOR). */
lj_tensor *lj_floor_divide(lj_tensor *a, lj_tensor *b);

/* Comparisons and logic return bool. */
/** a == b (false for NaN). */
lj_tensor *lj_eq(lj_tensor *a, lj_tensor *b);
/** a != b (true for NaN). */
lj_tensor *lj_ne(lj_tensor *a, lj_tensor *b);
/** a < b. */
lj_tensor *lj_lt(lj_tensor *a, lj_tensor *b);
/** a <= b. */
lj_tensor *lj_le(lj_tensor *a, lj_tensor *b);
/** a > b. */
lj_tensor *lj_gt(lj_tensor *a, lj_tensor *b);
/** a >= b. */
lj_tensor *lj_ge(lj_tensor *a, lj_tensor *b);
/** a != 0 and b != 0. */
lj_tensor *lj_logical_and(lj_tensor *a, lj_tensor *b);
/** a != 0 or b != 0. */
lj_tensor *lj_logical_or(lj_tensor *a, lj_tensor *b);

/* Scalar forms (PyTorch's Python-number overloads): the scalar is a graph parameter. */
/** a + s. */
lj_tensor *lj_add_scalar(lj_tensor *a, double s);
/** a - s. */
lj_tensor *lj_sub_scalar(lj_tensor *a, double s);
/** s - a. */
lj_tensor *lj_rsub_scalar(lj_tensor *a, double s);
/** a * s. */
lj_tensor *lj_mul_scalar(lj_tensor *a, double s);
/** a / s (true division). */
lj_tensor *lj_div_scalar(lj_tensor *a, double s);
/** a ** s; for f32 and f64 the exponents 2, 3, 0.5, -0.5, -1 and -2 are computed as PyTorch
 *  computes them (x·x, x·x·x, sqrt, rsqrt, 1/x, 1/(x·x)) and are part of the graph.
 *  Errors: LJ_ERR_ARG for an integer tensor and a negative integral s. */
lj_tensor *lj_pow_scalar(lj_tensor *a, double s);
/** s ** a (torch.pow(number, tensor)). */
lj_tensor *lj_rpow_scalar(double s, lj_tensor *a);
/** a % s, Python's sign rule. */
lj_tensor *lj_remainder_scalar(lj_tensor *a, double s);
/** a == s. */
lj_tensor *lj_eq_scalar(lj_tensor *a, double s);
/** a != s. */
lj_tensor *lj_ne_scalar(lj_tensor *a, double s);
/** a < s. */
lj_tensor *lj_lt_scalar(lj_tensor *a, double s);
/** a <= s. */
lj_tensor *lj_le_scalar(lj_tensor *a, double s);
/** a > s. */
lj_tensor *lj_gt_scalar(lj_tensor *a, double s);
/** a >= s. */
lj_tensor *lj_ge_scalar(lj_tensor *a, double s);

/** cond ? a : b elementwise; cond must be bool; the three broadcast; a and b promote. */
lj_tensor *lj_where(lj_tensor *cond, lj_tensor *a, lj_tensor *b);
/** min(max(t, lo), hi) with NaN propagated (torch.clamp); lo > hi gives hi. lo and hi are
 *  scalar parameters and promote like Python numbers. */
lj_tensor *lj_clamp(lj_tensor *t, double lo, double hi);
/** max(t, lo), NaN propagated. */
lj_tensor *lj_clamp_min(lj_tensor *t, double lo);
/** min(t, hi), NaN propagated. */
lj_tensor *lj_clamp_max(lj_tensor *t, double hi);
/** t converted to dt. Float to integer truncates toward zero; NaN and values out of the
 *  target's range give what PyTorch gives on x86 (the minimum of int32/int64, narrower types
 *  wrap through int32). Anything nonzero (NaN too) converts to true. */
lj_tensor *lj_cast(lj_tensor *t, lj_dtype dt);

/* ---------------------------------------------------------------------------------------
 * Reductions. dims lists ndims dimensions (negative counts from the end; ndims 0 means all);
 * keepdim keeps them as size 1. sum and prod of integers and bool give i64; mean needs a float
 * dtype; amax/amin propagate NaN and need a non-empty reduced extent.
 * ------------------------------------------------------------------------------------- */
lj_tensor *lj_sum(lj_tensor *t, int ndims, const int *dims, bool keepdim);
/** Mean over dims (NaN over an empty extent). Float dtypes only. */
lj_tensor *lj_mean(lj_tensor *t, int ndims, const int *dims, bool keepdim);
/** Product over dims. */
lj_tensor *lj_prod(lj_tensor *t, int ndims, const int *dims, bool keepdim);
/** Maximum over dims. */
lj_tensor *lj_amax(lj_tensor *t, int ndims, const int *dims, bool keepdim);
/** Minimum over dims. */
lj_tensor *lj_amin(lj_tensor *t, int ndims, const int *dims, bool keepdim);
/** Index (i64) of the first maximum / minimum along dim; NaN counts as the maximum (and as
 *  the minimum for argmin), as in PyTorch. Errors: LJ_ERR_DTYPE for bool, LJ_ERR_SHAPE for an
 *  empty dim. */
lj_tensor *lj_argmax(lj_tensor *t, int dim, bool keepdim);
/** See lj_argmax. */
lj_tensor *lj_argmin(lj_tensor *t, int dim, bool keepdim);

/* ---------------------------------------------------------------------------------------
 * Shape ops. Results are new tensors (views are not preserved: storage is contiguous and
 * opaque); the compiler folds them into the index expressions of the loads that use them.
 * Negative dims count from the end.
 * ------------------------------------------------------------------------------------- */

/** Same elements in a new shape; one size may be -1 (inferred). Errors: LJ_ERR_SHAPE when the
 *  element counts differ or -1 is ambiguous, LJ_ERR_ARG for two -1s. */
lj_tensor *lj_reshape(lj_tensor *t, int ndim, const int64_t *shape);
/** Dimensions reordered: result dim i is t's dim perm[i]. ndim must equal t's. */
lj_tensor *lj_permute(lj_tensor *t, int ndim, const int *perm);
/** t with dims dim0 and dim1 swapped. */
lj_tensor *lj_transpose(lj_tensor *t, int dim0, int dim1);
/** Broadcast to shape (new leading dims allowed; -1 keeps a size; only size-1 dims grow). */
lj_tensor *lj_expand(lj_tensor *t, int ndim, const int64_t *shape);
/** Removes the size-1 dims among dims (ndims 0: all size-1 dims). */
lj_tensor *lj_squeeze(lj_tensor *t, int ndims, const int *dims);
/** Inserts a size-1 dim at position dim (-ndim-1 ≤ dim ≤ ndim). */
lj_tensor *lj_unsqueeze(lj_tensor *t, int dim);
/** Merges dims start_dim..end_dim into one. */
lj_tensor *lj_flatten(lj_tensor *t, int start_dim, int end_dim);
/** t[start:end:step] along dim, Python style: negative start/end count from the end and are
 *  clamped to the size. step must be positive. */
lj_tensor *lj_slice(lj_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/** Concatenation along dim. All tensors have the same shape except along dim (1-D empty
 *  tensors are skipped, as in PyTorch); dtypes promote. */
lj_tensor *lj_cat(int n, lj_tensor *const *ts, int dim);

/** torch.matmul: 1-D·1-D is a dot product (0-d), 2-D·2-D a matrix product, 1-D operands
 *  gain and lose a dim, and batch dims broadcast. Both operands must have the same dtype
 *  (not bool). 16-bit floats are multiplied and summed in f32 and rounded once (bf16 with
 *  AVX-512's bf16 dot products where the CPU has them: docs/semantics.md). Errors:
 *  LJ_ERR_SHAPE when the inner sizes differ (the message gives both shapes), LJ_ERR_DTYPE. */
lj_tensor *lj_matmul(lj_tensor *a, lj_tensor *b);

/* ---------------------------------------------------------------------------------------
 * Neural-network ops (PyTorch semantics, differentiable). Arrays of 2 ints give (height,
 * width); NULL means the default (stride 1 for conv and the kernel size for pooling, padding
 * 0, dilation 1). Inputs are batched: [N, C, H, W] for 2-D ops. Errors name the op and the
 * shapes: LJ_ERR_SHAPE for mismatched channels or a window that does not fit, LJ_ERR_DTYPE.
 * ------------------------------------------------------------------------------------- */

/** 2-D convolution (cross-correlation, as torch.nn.functional.conv2d): x [N, C, H, W],
 *  w [O, C/groups, KH, KW], b [O] or NULL, all of one float dtype. 16-bit floats are
 *  computed in f32 and the output rounded once, as are their gradients. */
lj_tensor *lj_conv2d(lj_tensor *x, lj_tensor *w, lj_tensor *b, const int stride[2], const int padding[2],
                     const int dilation[2], int groups);
/** Max over each window (padding counts as -inf; the gradient goes to the first maximum).
 *  padding must be at most half the kernel. */
lj_tensor *lj_max_pool2d(lj_tensor *x, const int kernel[2], const int stride[2], const int padding[2]);
/** Mean over each window, padding counted in the divisor (count_include_pad=True). */
lj_tensor *lj_avg_pool2d(lj_tensor *x, const int kernel[2], const int stride[2], const int padding[2]);
/** exp(x) / sum(exp(x)) along dim, computed stably. Float dtypes. */
lj_tensor *lj_softmax(lj_tensor *x, int dim);
/** x - log(sum(exp(x))) along dim, computed stably. Float dtypes. */
lj_tensor *lj_log_softmax(lj_tensor *x, int dim);

/** How a loss reduces its per-element values. */
typedef enum lj_reduction { LJ_REDUCE_MEAN, LJ_REDUCE_SUM, LJ_REDUCE_NONE } lj_reduction;
/** Negative log likelihood: logp [N, C, ...] (or [C]) of log-probabilities, target [N, ...]
 *  of i64 class indices (LJ_ERR_DTYPE otherwise). A class index outside [0, C) is reported
 *  once the graph has run (lj_sync) as LJ_ERR_RUNTIME naming the index and C. */
lj_tensor *lj_nll_loss(lj_tensor *logp, lj_tensor *target, lj_reduction r);
/** nll_loss(log_softmax(logits, class dim), target). */
lj_tensor *lj_cross_entropy(lj_tensor *logits, lj_tensor *target, lj_reduction r);
/** (a - b)^2, broadcast, reduced. */
lj_tensor *lj_mse_loss(lj_tensor *a, lj_tensor *b, lj_reduction r);
/** x @ w^T + b for w [out, in] (b [out] or NULL), as torch.nn.functional.linear. */
lj_tensor *lj_linear(lj_tensor *x, lj_tensor *w, lj_tensor *b);
/** Zeroes each element with probability p (from the device RNG) and scales the rest by
 *  1/(1-p) when train; the identity otherwise. p is a scalar parameter. */
lj_tensor *lj_dropout(lj_tensor *x, double p, bool train);
/** Rows of weight [V, D] picked by index (i64, any shape): shape [*index, D]. */
lj_tensor *lj_embedding(lj_tensor *weight, lj_tensor *index);
/** Entries of x along dim picked by index (1-D i64). */
lj_tensor *lj_index_select(lj_tensor *x, int dim, lj_tensor *index);
/** torch.gather: out[i][j] = x[index[i][j]][j] for dim 0 (and so on); index is i64 with x's
 *  rank and no larger than x off dim. Out-of-range indices are runtime errors at the sync. */
lj_tensor *lj_gather(lj_tensor *x, int dim, lj_tensor *index);
/** A copy of x with src added at index along dim (torch.Tensor.scatter_add); src has index's
 *  shape and x's dtype. */
lj_tensor *lj_scatter_add(lj_tensor *x, int dim, lj_tensor *index, lj_tensor *src);
/** i64 one-hot encoding with a new last dim of num_classes; an index outside
 *  [0, num_classes) is a runtime error at the sync. */
lj_tensor *lj_one_hot(lj_tensor *index, int64_t num_classes);
/** Layer normalization over the last ndims dims, with optional elementwise weight and bias
 *  of those dims' shape. */
lj_tensor *lj_layer_norm(lj_tensor *x, int ndims, lj_tensor *w, lj_tensor *b, double eps);
/** Batch normalization over all dims but 1 (channels). training: normalizes with the batch's
 *  statistics and, when running_mean/running_var are given, updates them in place with
 *  momentum (unbiased variance), without gradient; otherwise normalizes with the running
 *  statistics. w and b are per-channel, or NULL. */
lj_tensor *lj_batch_norm(lj_tensor *x, lj_tensor *running_mean, lj_tensor *running_var, lj_tensor *w,
                         lj_tensor *b, bool training, double momentum, double eps);
/** Constant padding as torch.nn.functional.pad: npads values (left, right) per dim starting
 *  from the last dim; negative values crop. value is a scalar parameter. */
lj_tensor *lj_pad(lj_tensor *x, int npads, const int64_t *pads, double value);

/* ---------------------------------------------------------------------------------------
 * Autograd. The backward pass is recorded like any other ops: lj_backward adds the gradient
 * computation to the pending graph, so forward, backward and the optimizer update of a
 * training step compile into one executable at the next sync.
 * ------------------------------------------------------------------------------------- */

/** Marks t as a leaf that lj_backward computes a gradient for (on) or stops doing so (off).
 *  A leaf's gradient is that of its own uses only: turned on for a pending t, or for one whose
 *  buffer another tensor shares (ops are recorded once per distinct op and operands, so two
 *  lj_ones of one shape are one value), t gets a value of its own, computed into its own
 *  buffer at the next sync; tensors that shared t's value before keep it and are not leaves.
 *  Errors: LJ_ERR_DTYPE for a non-float tensor. */
lj_status lj_tensor_set_requires_grad(lj_tensor *t, bool on);
/** Whether t requires grad (false for NULL). */
bool lj_tensor_requires_grad(const lj_tensor *t);
/** Adds d(loss)/d(t) to the grad of every live tensor t that requires grad and that the loss
 *  depends on (a tensor's grad starts as NULL; each call accumulates, like PyTorch). The
 *  gradient is recorded lazily, from the pending graph below the loss: a loss already read or
 *  synced is a value without that graph, so record lj_backward before reading the loss; so is
 *  any value a sync or read computed from tensors that require grad (lj_detach it to use it as
 *  a constant). Gradients and values given by lj_assign are constants for autograd.
 *  Errors: LJ_ERR_ARG (NULL, or a loss that depends on no tensor that requires grad,
 *  as PyTorch's backward of a tensor without grad_fn; as well a loss read or synced before;
 *  or a loss that depends on such a synced value, named by its dtype and shape, rather than
 *  a gradient missing what flows through it),
 *  LJ_ERR_DTYPE (non-float loss), LJ_ERR_SHAPE (a loss with more than one element). */
lj_status lj_backward(lj_tensor *loss);
/** t's accumulated gradient, borrowed (valid until the next lj_backward, zero_grad or t's
 *  release); NULL when it has none. */
lj_tensor *lj_tensor_grad(const lj_tensor *t);
/** Drops t's gradient (it becomes NULL, as PyTorch's zero_grad(set_to_none=True)). */
void lj_tensor_zero_grad(lj_tensor *t);
/** t's value with gradients stopped: lj_backward treats it as a constant. New reference. */
lj_tensor *lj_detach(lj_tensor *t);

/* ---------------------------------------------------------------------------------------
 * Optimizers: each step records PyTorch's update rule as lazy ops and rebinds parameters
 * and state with lj_assign; hyper-parameters are scalar parameters, so changing the learning
 * rate never recompiles. Parameters without a gradient are skipped.
 * ------------------------------------------------------------------------------------- */

typedef struct lj_optim lj_optim;
/** torch.optim.SGD's options (PyTorch's defaults are all 0 / false but lr). */
typedef struct lj_sgd_options {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
} lj_sgd_options;
/** torch.optim.Adam's options; decoupled_weight_decay makes it AdamW. */
typedef struct lj_adam_options {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
} lj_adam_options;
/** PyTorch's Adam defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay. */
lj_adam_options lj_adam_defaults(void);
/** An SGD optimizer over params (retained; released by lj_optim_free). Errors: LJ_ERR_ARG for
 *  a negative or non-finite hyper-parameter or nesterov without momentum, LJ_ERR_DTYPE for a
 *  non-float parameter, LJ_ERR_DEVICE for parameters on different devices. */
lj_optim *lj_optim_sgd(int n, lj_tensor *const *params, lj_sgd_options o);
/** An Adam (or AdamW) optimizer over params; errors as lj_optim_sgd (betas in [0, 1)). */
lj_optim *lj_optim_adam(int n, lj_tensor *const *params, lj_adam_options o);
/** Records one update of every parameter that has a gradient. */
lj_status lj_optim_step(lj_optim *o);
/** lj_optim_step and, with barrier, lj_sync of the parameters' device (xm.optimizer_step). */
lj_status lj_optimizer_step(lj_optim *o, bool barrier);
/** Drops every parameter's gradient. */
void lj_optim_zero_grad(lj_optim *o);
/** Sets the learning rate used from the next step on. LJ_ERR_ARG when negative. */
lj_status lj_optim_set_lr(lj_optim *o, double lr);
/** Frees o, its state and its parameter references. NULL is fine. Like tensors, an optimizer
 *  does not outlive lj_shutdown: free it before. */
void lj_optim_free(lj_optim *o);
/** Scales the n parameters' gradients so their joint L2 norm is at most max_norm
 *  (torch.nn.utils.clip_grad_norm_) without reading anything back to the host; returns the
 *  norm before clipping (0-d, new reference): f64 when any gradient is f64, else f32 (f16 and
 *  bf16 gradients are squared and summed in f32). */
lj_tensor *lj_clip_grad_norm(int n, lj_tensor *const *params, double max_norm);

/** New parameters of a Linear layer, initialized like PyTorch's: w [out, in] and, when bias,
 *  b [out], both U(-1/sqrt(in), 1/sqrt(in)) from the device RNG, requiring grad. New
 *  references (owned by the caller or the innermost scope); *b is NULL without bias. */
lj_status lj_nn_linear_init(lj_device *d, lj_dtype dt, int64_t in, int64_t out, bool bias, lj_tensor **w,
                            lj_tensor **b);
/** New parameters of a Conv2d layer initialized like PyTorch's: w [out, in/groups, kh, kw],
 *  b [out], U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * kh * kw. */
lj_status lj_nn_conv2d_init(lj_device *d, lj_dtype dt, int64_t in_channels, int64_t out_channels,
                            const int kernel[2], int groups, bool bias, lj_tensor **w, lj_tensor **b);

/* ---------------------------------------------------------------------------------------
 * Data: datasets read from IDX files and a device loader (like PyTorch/XLA's
 * MpDeviceLoader): a background thread shuffles, converts and normalizes the next batches
 * and stages them into device buffers while the current step runs.
 * ------------------------------------------------------------------------------------- */

typedef struct lj_dataset lj_dataset;
/** Reads a labelled dataset from two IDX files ((Fashion-)MNIST's format, gzip'd or not):
 *  samples [N, ...] of any IDX element type and labels [N] of an integer type. Returns a new
 *  dataset owned by the caller (lj_dataset_free). Errors: LJ_ERR_ARG (NULL path), LJ_ERR_IO
 *  (a file is missing, unreadable, not IDX, corrupt or truncated; the message names the
 *  file), LJ_ERR_SHAPE (labels not 1-d or sample and label counts differ), LJ_ERR_DTYPE
 *  (float labels), LJ_ERR_OOM. */
lj_dataset *lj_dataset_load_idx(const char *samples_path, const char *labels_path);
/** Number of samples (0 for NULL). */
int64_t lj_dataset_size(const lj_dataset *ds);
/** The shape of one sample as the loader delivers it (IDX images [N, H, W] gain a channel:
 *  [1, H, W], as torchvision's ToTensor); returns its rank, writes shape[0..rank). */
int lj_dataset_sample_shape(const lj_dataset *ds, int64_t shape[LJ_MAX_DIMS]);
/** The label of sample i. Errors: LJ_ERR_ARG (i out of range; returns -1). */
int64_t lj_dataset_label(const lj_dataset *ds, int64_t i);
/** Samples [start, start + count) of ds as a new dataset sharing its storage (freed
 *  independently). Errors: LJ_ERR_ARG (NULL, or the range is not within ds). */
lj_dataset *lj_dataset_subset(const lj_dataset *ds, int64_t start, int64_t count);
/** Frees ds. NULL is fine. Loaders made from it keep working. */
void lj_dataset_free(lj_dataset *ds);

/** Options of a device loader. */
typedef struct lj_loader_options {
  int64_t batch_size;  /**< samples per batch (default 64) */
  bool shuffle;        /**< a new permutation each epoch (default true) */
  uint64_t seed;       /**< shuffle seed: epoch e's order depends only on (seed, e) (default 0) */
  bool drop_last;      /**< drop the last partial batch (default false: keep it) */
  double mean, std;    /**< normalization (x - mean) / std after scaling u8 samples to [0, 1]
                            (defaults 0 and 1) */
  int prefetch;        /**< batches staged ahead on the device, K (default 2) */
  int barrier_every;   /**< lj_sync the device after every N batches of an epoch (before
                            handing out the next one) and at the end of each epoch, as
                            MpDeviceLoader's mark_step (default 0: never) */
} lj_loader_options;
/** The defaults listed above. */
lj_loader_options lj_loader_defaults(void);

typedef struct lj_loader lj_loader;
/** A loader of ds's batches onto d; starts its background thread at once. ds may be freed
 *  afterwards (the loader shares its storage). Free it with lj_loader_free (lj_shutdown stops
 *  its thread and drops staged batches; the handle is then only good for lj_loader_free).
 *  o NULL: lj_loader_defaults(). Errors: LJ_ERR_ARG (NULL ds or d; batch_size < 1, prefetch
 *  not in [1, 64], barrier_every < 0, std not finite and > 0, or drop_last with fewer samples
 *  than a batch). */
lj_loader *lj_loader_new(const lj_dataset *ds, lj_device *d, const lj_loader_options *o);
/** The next batch of the current epoch: *x f32 [B, sample shape...] and *y i64 [B], device
 *  data, new references (owned by the caller or the innermost scope). Returns false at the
 *  end of the epoch with *x and *y NULL and the status LJ_OK; the next call starts the next
 *  epoch. Also false on an error (lj_last_status() says which: LJ_ERR_OOM from staging, or
 *  the barrier's error, e.g. LJ_ERR_RUNTIME). */
bool lj_loader_next(lj_loader *l, lj_tensor **x, lj_tensor **y);
/** Batches per epoch. */
int64_t lj_loader_batches(const lj_loader *l);
/** Stops the loader's thread and frees it with its staged batches. NULL is fine. */
void lj_loader_free(lj_loader *l);

/* ---------------------------------------------------------------------------------------
 * Barriers
 * ------------------------------------------------------------------------------------- */

/** Runs every pending tensor of d that is still alive (like xm.mark_step()): they become
 *  device data. Compiles only when the graph is new (on the calling thread), waits for d's
 *  previous run, queues this one on d's executor thread and returns, so the caller traces the
 *  next step while this one runs; reads of the results wait for it. A data-dependent error of
 *  a queued run (e.g. integer division by zero) is reported, with its message, by the next
 *  lj_sync, lj_sync_tensors, lj_wait or read on d (once), and the tensors that run computed
 *  hold no value: reading one, or syncing a graph that uses one, gives LJ_ERR_RUNTIME; the
 *  device stays usable. With LJ_SYNC_WAIT (lj_config.sync_wait) the sync waits for the run and
 *  reports its error itself. Errors: LJ_ERR_COMPILE, LJ_ERR_RUNTIME (an earlier run's, or
 *  this one's with LJ_SYNC_WAIT; nothing is queued then), LJ_ERR_OOM. */
lj_status lj_sync(lj_device *d);
/** Runs only what the n given tensors need (all on one device; NULL entries are an error),
 *  queued like lj_sync. */
lj_status lj_sync_tensors(int n, lj_tensor *const *ts);
/** Waits until every run queued on d has ended. Errors: LJ_ERR_RUNTIME with the message of a
 *  failed run not yet reported; LJ_ERR_ARG for NULL. */
lj_status lj_wait(lj_device *d);

/* ---------------------------------------------------------------------------------------
 * Metrics. Names and report layout follow PyTorch/XLA's metrics report (docs/metrics.md).
 * ------------------------------------------------------------------------------------- */

/** The metrics report: every metric with samples and every counter with a nonzero value.
 *  malloc'd; the caller frees it. */
char *lj_metrics_report(void);
/** The short report (PyTorch/XLA's short_metrics_report): CompileTime, ExecuteTime and the
 *  transfer times, and the CachedCompile, UncachedCompile and MarkStep counters, in the same
 *  layout. malloc'd; the caller frees it. */
char *lj_metrics_short_report(void);
/** A counter's value, e.g. "UncachedCompile"; 0 when never counted or unknown. */
int64_t lj_counter_value(const char *name);
/** A metric's number of samples and their sum (seconds for times, bytes for sizes).
 *  Either pointer may be NULL. Errors: LJ_ERR_ARG for an unknown name. */
lj_status lj_metric_data(const char *name, int64_t *samples, double *accumulator);
/** Zeroes every counter and metric. */
void lj_metrics_clear(void);

/* ---------------------------------------------------------------------------------------
 * Inspection
 * ------------------------------------------------------------------------------------- */

/** The pending graph of the n tensors in the IR text format (docs/ir_format.md), the same one
 *  dumps use and tools/lj-run reads. malloc'd; NULL on error. */
char *lj_tensors_text(int n, lj_tensor *const *ts);
/** The same graph in Graphviz dot. malloc'd; NULL on error. */
char *lj_tensors_dot(int n, lj_tensor *const *ts);
/** The graph key the n tensors' pending graph would be compiled under, as 32 hex digits. */
lj_status lj_graph_hash(int n, lj_tensor *const *ts, char out_hex[33]);
/** Number of kernels the pending graph of the n tensors compiles to after fusion (runs the
 *  graph passes and fusion, not LLVM). -1 on error. */
int lj_graph_kernel_count(int n, lj_tensor *const *ts);

#ifdef __cplusplus
}
#endif
#endif /* LAZYJIT_H */
