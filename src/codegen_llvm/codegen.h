/* codegen.h — the LLVM stage: turns a fused program's kernels into machine code through ORC
 * LLJIT. The only part of lazyjit that includes LLVM headers; the rest sees sessions,
 * compiled programs and kernel function pointers. Prefix ljc_. */
#ifndef LJ_CODEGEN_H
#define LJ_CODEGEN_H

#include "graph/graph.h"

/* A JIT session: the target machine for the host CPU (or an override) and one LLJIT. */
typedef struct ljc_session ljc_session;

/* What a session does besides compiling. LJC_PERF (LJ_PERF): every kernel is listed in
 * perf's map file and its jitdump. LJC_DEBUG_INFO (LJ_HLO_DEBUG): kernels carry their nodes'
 * call sites as DWARF and are registered with gdb's JIT interface. LJC_PRECOMPILED
 * (LJ_PRECOMPILED_ROUTINES): a GEMM routine the session lacks is taken from those the library
 * was built with (ljc_precompiled_routines) when they were built for its routine target,
 * before the persistent cache's or a compile. */
typedef enum ljc_flags { LJC_PERF = 1, LJC_DEBUG_INFO = 2, LJC_PRECOMPILED = 4 } ljc_flags;

/* A session for `cpu` (NULL: the host CPU and its features) at LLVM opt level 0..3 that
 * compiles the kernels of a program on up to `threads` threads, with ljc_flags; kernels that
 * move at least nt_store_bytes write their outputs of at least half that with non-temporal
 * stores (0: never; stream.c). NULL with LJ_ERR_COMPILE and LLVM's message if the target
 * cannot be set up. */
ljc_session *ljc_session_new(const char *cpu, int opt_level, int64_t nt_store_bytes, int threads, unsigned flags);
void ljc_session_free(ljc_session *s);
/* What the generated code depends on besides the graph: LLVM version, target triple, CPU
 * name and features, opt level, the non-temporal store threshold, debug info. Part of every
 * graph key. Borrowed. */
const char *ljc_session_target(const ljc_session *s);
/* Sets stream[slot] (p->nslots entries) for the outputs kernel ki of p writes non-temporally
 * when s compiles it (stream.c, under s's threshold and CPU; never off x86); whether any. */
bool ljc_session_stream_slots(const ljc_session *s, const ljg_program *p, int ki, uint8_t *stream);
/* What the GEMM routines' code depends on, a prefix of the target: LLVM version, target
 * triple, CPU name and features, opt level. Borrowed. */
const char *ljc_session_routine_target(const ljc_session *s);
/* Its parts: the LLVM version ("19.1.7"), the CPU name and its feature string. Borrowed. */
const char *ljc_session_llvm(const ljc_session *s);
const char *ljc_session_cpu(const ljc_session *s);
const char *ljc_session_features(const ljc_session *s);
/* Whether the session's target has bf16 dot products (what ljg_fuse_options.bf16_dot asks). */
bool ljc_session_bf16_dot(const ljc_session *s);

/* Where a session looks for the object file of a GEMM routine that this process has not built
 * yet, and leaves each one it builds: the persistent cache. get: routine `name`'s object file
 * for the session's target (malloc'd, its size in *size), or NULL; put: keep a copy of one.
 * Called with the session lock held, so they must not call into the session. */
typedef struct ljc_routine_cache {
  void *ctx;
  char *(*get)(void *ctx, const char *name, size_t *size);
  void (*put)(void *ctx, const char *name, const char *obj, size_t size);
} ljc_routine_cache;
void ljc_session_set_routine_cache(ljc_session *s, ljc_routine_cache c);

/* GEMM routine r's object file (ljc_gemm_routine_defined(r, ljc_session_bf16_dot(s))) as the session compiles it for
 * its target, malloc'd, its size in *size; NULL with LJ_ERR_COMPILE. What lj-precompile builds
 * the library's precompiled routines with. */
char *ljc_session_build_routine(ljc_session *s, int r, size_t *size);

/* The GEMM routines' object files the library was built with: lj-precompile compiles every
 * routine for the build host (a session of the host CPU at the default opt level) into a
 * generated source, or none (LJ_PRECOMPILE_ROUTINES off at configure time). target: their
 * routine target (ljc_session_routine_target); routine i is number routine[i], its object
 * size[i] bytes at data + offset[i]. */
typedef struct ljc_precompiled {
  const char *target;
  int n;
  const int *routine;
  const size_t *offset, *size;
  const unsigned char *data;
} ljc_precompiled;
extern const ljc_precompiled ljc_precompiled_routines;

/* The machine code of one program (refcounted: see ljc_compile). */
typedef struct ljc_program ljc_program;

/* What a compile can leave behind for dumps (LJ_DUMP_DIR, LJ_SAVE_TENSORS_FMT): every
 * kernel's LLVM IR as lowered, after optimization, and its assembly, in kernel order. All
 * malloc'd. */
typedef struct ljc_texts {
  char *ir, *ir_opt, *asm_text;
} ljc_texts;
void ljc_texts_free(ljc_texts *t);

/* The object files of a program: kernel k's in data[k] (size[k] bytes), then those of the
 * GEMM routines its kernels call (ljc_program_routines), malloc'd: what the persistent cache
 * stores, so that a process loading the program need not compile the routines, and what
 * LJ_DUMP_DIR writes. n = the program's kernels + its routines. */
typedef struct ljc_objects {
  int n;
  char **data;
  size_t *size;
} ljc_objects;
void ljc_objects_free(ljc_objects *o);
/* How many GEMM routines p's kernels call: the objects after its kernels' in ljc_objects. */
int ljc_program_routines(const ljg_program *p);
/* The name of object i of p's ljc_objects: "k<i>" for a kernel, else the routine's symbol. */
void ljc_object_name(const ljg_program *p, int i, char name[40]);
/* The longest text ljc_kernel_routine writes, with its terminating zero. */
enum { LJC_KERNEL_ROUTINES_MAX = 72 };
/* The symbol of the GEMM routine kernel k calls into name ("A, then B" with a trailing product's
 * B); false (name "") when it calls none. */
bool ljc_kernel_routine(const ljg_kernel *k, char name[LJC_KERNEL_ROUTINES_MAX]);
/* Whether matmul kernel k's GEMM routine writes the col2im's image itself (Winograd's input
 * gradient) with nothing after it, and so takes a thread's whole range of tasks in one call,
 * whatever row blocks the kernel has: its tasks are best handed out as one range a thread. */
bool ljc_gemm_in_one_call(const ljg_kernel *k);
/* Text (malloc'd) saying, kernel by kernel, what the lowering does otherwise than p's nests say
 * (LJ_DUMP_DIR's kernels.txt ends with it): the GEMM routine a kernel calls, the nests it does
 * not run because another does their work (a bias the routine starts from, a zero fill under a
 * scatter, a gather of what an argmax found), the nests that share one loop, and, for session s
 * (unless NULL), the outputs it streams (stream.c). */
char *ljc_lowering_text(const ljg_program *p, const ljc_session *s);

/* Compiles every kernel of p, each lowered into a module of its own, on the session's threads
 * (with the GEMM routines the kernels call that the session does not have yet, which then
 * stay for the session's life), a group of consecutive kernels into one object file (one per
 * pipeline they go through), and stores kernel k's entry point in fns[k]. key is the graph key:
 * symbols are "lj_<first 16 hex digits of key>_k<k>", and a program whose key is live in the
 * session already (another device compiled it) is shared instead of compiled again. g is the
 * graph p was fused from (its nodes' call sites become debug info with LJC_DEBUG_INFO). With
 * texts non-NULL, also fills it; with objs non-NULL, copies the object files there, kernel k's
 * at k, empty where it is in an earlier kernel's (both built even for a shared program).
 * *counts (when not NULL): the GEMM routines this compile added to the session, compiled and
 * precompiled, the kernels compiled as calls to an earlier kernel's body, the same code
 * (twins.c), the object files the kernels were emitted into, and the loops of the vectorized
 * kernels that LLVM's loop vectorizer reported leaving scalar (its "loop not vectorized"
 * remarks). NULL with LJ_ERR_COMPILE and LLVM's message on failure. */
typedef struct ljc_compile_counts {
  int compiled, precompiled, twins, objects, unvectorized;
} ljc_compile_counts;
ljc_program *ljc_compile(ljc_session *s, const ljg_program *p, const ljg_graph *g, ljb_hash key,
                         ljg_kernel_fn *fns, ljc_texts *texts, ljc_objects *objs, ljc_compile_counts *counts);
/* Loads the object files an earlier ljc_compile of key (program p) produced (copied; shared
 * like a compile when key is live) and stores kernel k's entry point in fns[k]; the GEMM
 * routines among them that the session does not have yet are loaded first. NULL with
 * LJ_ERR_COMPILE when the JIT refuses an object, the objects do not match p's kernels and
 * routines, or a kernel symbol is missing. */
ljc_program *ljc_load(ljc_session *s, const ljg_program *p, ljb_hash key, const ljc_objects *objs,
                      ljg_kernel_fn *fns);
/* Drops a reference; the last one removes the program's code from the JIT. */
void ljc_program_free(ljc_program *c);

#endif
