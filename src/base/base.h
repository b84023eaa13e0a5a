/* base.h — support shared by every stage: assertions, arenas, hashing, growable arrays,
 * clocks, the threads lazyjit starts, their floating-point mode and the thread-local error
 * state behind lj_last_error.
 * Prefix ljb_. */
#ifndef LJ_BASE_H
#define LJ_BASE_H

#include <lazyjit.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Broken internal invariants only (never user errors): prints and aborts, always on. */
#define LJ_ASSERT(c)                                                                      \
  do {                                                                                    \
    if (!(c)) ljb_assert_fail(#c, __FILE__, __LINE__);                                    \
  } while (0)
_Noreturn void ljb_assert_fail(const char *cond, const char *file, int line);
/* A place the code never reaches (the default of a switch over every case): aborts, saying why. */
#define LJ_UNREACHABLE(why) ljb_assert_fail(why, __FILE__, __LINE__)

#define LJ_LIKELY(x) __builtin_expect(!!(x), 1)
#define LJ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LJ_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* error.c: thread-local status + message. A real error always overwrites; a NULL operand
 * only reports when no error is pending, so a chain of ops keeps the first error. */
void ljb_error(lj_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ljb_verror(lj_status s, const char *fmt, va_list ap);
void ljb_null_arg(const char *op, const char *arg);
/* Formats a shape as "[2,3]" into buf (at least 24*LJ_MAX_DIMS bytes). Returns buf. */
#define LJB_SHAPE_STR_MAX (24 * LJ_MAX_DIMS + 4)
char *ljb_shape_str(char *buf, int ndim, const int64_t *shape);

/* alloc.c: allocation for internal structures: aborts on out-of-memory (device buffers, the
 * large allocations, report LJ_ERR_OOM instead). */
void *ljb_xalloc(size_t n);
void *ljb_xcalloc(size_t n, size_t size);
void *ljb_xrealloc(void *p, size_t n);

/* Growable array of T: { T *a; int n, cap; }. */
#define LJB_VEC(T)                                                                        \
  struct {                                                                                \
    T *a;                                                                                 \
    int n, cap;                                                                           \
  }
#define ljb_vec_push(v, x)                                                                \
  do {                                                                                    \
    if ((v)->n == (v)->cap) {                                                             \
      (v)->cap = (v)->cap ? 2 * (v)->cap : 8;                                             \
      (v)->a = ljb_xrealloc((v)->a, (size_t)(v)->cap * sizeof(*(v)->a));                  \
    }                                                                                     \
    (v)->a[(v)->n++] = (x);                                                               \
  } while (0)
#define ljb_vec_reserve(v, m)                                                             \
  do {                                                                                    \
    if ((v)->cap < (m)) {                                                                 \
      (v)->cap = (m);                                                                     \
      (v)->a = ljb_xrealloc((v)->a, (size_t)(v)->cap * sizeof(*(v)->a));                  \
    }                                                                                     \
  } while (0)
#define ljb_vec_free(v)                                                                   \
  do {                                                                                    \
    free((v)->a);                                                                         \
    (v)->a = NULL;                                                                        \
    (v)->n = (v)->cap = 0;                                                                \
  } while (0)

/* String builder (malloc'd, always NUL-terminated). */
typedef struct ljb_str {
  char *s;
  size_t n, cap;
} ljb_str;
void ljb_str_printf(ljb_str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ljb_str_puts(ljb_str *b, const char *s);
/* Hands the string over (never NULL) and resets b. */
char *ljb_str_take(ljb_str *b);
/* Appends n raw bytes (binary records: the persistent cache writes in host byte order). */
void ljb_str_put(ljb_str *b, const void *p, size_t n);

/* Reads binary records back: each read takes bytes from p up to end; a read past the end
 * zeroes its destination and sets bad, which stays set. */
typedef struct ljb_reader {
  const unsigned char *p, *end;
  bool bad;
} ljb_reader;
void ljb_read(ljb_reader *r, void *dst, size_t n);

/* arena.c: bump allocator for memory with one lifetime (a trace, a compile). Memory is
 * 16-byte aligned and zeroed; reset keeps the first chunk for reuse. */
typedef struct ljb_arena_chunk ljb_arena_chunk;
typedef struct ljb_arena {
  ljb_arena_chunk *head;
  size_t used_total;
} ljb_arena;
void *ljb_arena_alloc(ljb_arena *a, size_t n);
void ljb_arena_reset(ljb_arena *a);
void ljb_arena_free(ljb_arena *a);

/* hash.c: 128-bit non-cryptographic hashing for graph keys and hash-consing. */
typedef struct ljb_hash {
  uint64_t lo, hi;
} ljb_hash;
typedef struct ljb_hasher {
  uint64_t a, b;
} ljb_hasher;
void ljb_hasher_init(ljb_hasher *h, uint64_t seed);
static inline uint64_t ljb_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
/* One multiply per lane per word; the lanes see the word differently (xor vs add, other
 * constants and rotations), and the finalizer mixes them into each other. Inline: a cached
 * sync hashes a few words per graph node. */
static inline void ljb_hash_u64(ljb_hasher *h, uint64_t x) {
  h->a = ljb_rotl64((h->a ^ x) * 0x87c37b91114253d5ULL, 31);
  h->b = ljb_rotl64((h->b + x) * 0x4cf5ad432745937fULL, 27) ^ h->a;
}
void ljb_hash_f64(ljb_hasher *h, double x);
void ljb_hash_bytes(ljb_hasher *h, const void *p, size_t n);
void ljb_hash_str(ljb_hasher *h, const char *s);
ljb_hash ljb_hasher_final(const ljb_hasher *h);
static inline bool ljb_hash_eq(ljb_hash x, ljb_hash y) { return x.lo == y.lo && x.hi == y.hi; }
/* Writes 32 lowercase hex digits and a NUL. */
void ljb_hash_hex(ljb_hash h, char out[33]);
uint64_t ljb_mix64(uint64_t x);

/* callsite.c: the first frame of the calling thread's stack outside lazyjit, as
 * "function (file:line)" (from DWARF line info; "function (module+offset)" without it).
 * Interned: valid until the process ends. NULL when no frame outside lazyjit is found. */
const char *ljb_call_site(void);

/* clock.c */
uint64_t ljb_now_ns(void);

/* fpmode.c: whether the calling thread flushes subnormal floats to zero (results and
 * operands, x86 and AArch64; elsewhere never), and setting it, which returns what it was. */
bool ljb_flushes_subnormals(void);
bool ljb_flush_subnormals(bool on);

/* thread.c: starts a thread that runs lazyjit's work (a pool worker, a device's executor, a
 * compile thread) with a stack of at least LJB_THREAD_STACK bytes whatever the process's
 * default: kernels keep packed matmul panels and LOCAL blocks of rows on their stack (about
 * a MiB), and LLVM's code generator recurses deeply. pthread_create's result. */
enum { LJB_THREAD_STACK = 8 << 20 };
int ljb_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* thread.c: whether the calling thread's stack has room for a job's kernels, LJB_JOB_STACK
 * bytes: a kernel's LOCAL slots (up to 2 MiB, graph/fuse_rows.c) beside a GEMM routine's packed
 * blocks (over a MiB) and, for a window of stride 2, its image's phase planes (a MiB more;
 * codegen_llvm/gemm.c). A thread the user made with a smaller stack hands its jobs to the
 * executor (runtime/queue.c). Asked once a thread. */
enum { LJB_JOB_STACK = 6 << 20 };
bool ljb_stack_holds_jobs(void);

#endif
