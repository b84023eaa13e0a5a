/* session.c — the JIT session and the compile driver. A session holds target machines (host
 * CPU and features unless LJ_CPU says otherwise), one per compile thread, and one ORC LLJIT
 * whose main JITDylib also resolves process symbols (memset, memcpy, fmod). A program is
 * compiled kernel by kernel on the compile threads, each kernel lowered into a fresh context
 * and module, optimized and emitted as an object file with that thread's target machine
 * (LLVM contexts and target machines are not shared between threads), a kernel whose body is
 * the code of an earlier one's calling that one's instead (twins.c); the objects are then
 * added to the JIT under one resource tracker, so freeing the program frees its code. Object
 * files from the persistent cache are added the same way (ljc_load). The GEMM routines that
 * matmul kernels call (gemm.c) are built once per process and target, with the first program
 * that calls each (as more items of its compile), or come from the object files of a loaded
 * program, from an earlier session of the process (routine_store.c), from those the library
 * was built with (ljc_precompiled_routines, when built for the session's routine target) or
 * from the persistent cache (the session's routine cache), and stay in the JIT for the
 * session's life; their object files are kept to go into every program's ljc_objects, so a
 * cache entry brings the routines its kernels call. Programs are shared by graph key and
 * refcounted: symbols are named by the key, so two devices' copies would clash. Compiles are
 * serialized by the session lock. For LJ_HLO_DEBUG and LJ_PERF the JIT links with RuntimeDyld
 * instead of JITLink: its event listeners register every object with gdb (the GDB JIT
 * interface) and write perf's jitdump records. */
#include "codegen_llvm/ir.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/OrcEE.h>
#include <llvm-c/Target.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COMPILE_THREADS = 16 };

struct ljc_session {
  /* one per compile thread, and one for the modules not vectorized (ljc_codegen_level), but
   * with debug info (LJC_DEBUG_INFO): gdb did not show a kernel emitted at None as the user's
   * function inlined into it */
  LLVMTargetMachineRef tms[MAX_COMPILE_THREADS], scalar_tms[MAX_COMPILE_THREADS];
  int threads;
  LLVMOrcLLJITRef jit;
  LLVMOrcJITDylibRef jd;
  char *triple, *cpu, *features;
  char llvm[32];
  char routine_target[1024], target[1100];
  int opt_level;
  int64_t nt_store_bytes;
  unsigned flags; /* ljc_flags */
  /* GEMM routine r's object file once it is in the JIT (under lock), for ljc_objects */
  char *routine_obj[LJC_GEMM_NROUTINES];
  size_t routine_size[LJC_GEMM_NROUTINES];
  ljc_routine_cache routine_cache; /* the persistent cache's routines */
  pthread_mutex_t lock;
  struct ljc_program *live; /* under lock */
};

/* A program's code in the JIT. Programs are shared by key: devices that compile or load the
 * same graph get the same code (their symbols would clash otherwise). */
struct ljc_program {
  ljc_session *session;
  LLVMOrcResourceTrackerRef rt;
  ljb_hash key;
  int nkernels, refs;      /* refs: under the session lock */
  ljg_kernel_fn *fns;
  struct ljc_program *next; /* the session's live programs */
};

static bool llvm_error(LLVMErrorRef err, const char *what) {
  if (!err) return false;
  char *msg = LLVMGetErrorMessage(err);
  ljb_error(LJ_ERR_COMPILE, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return true;
}

static LLVMTargetMachineRef make_tm(ljc_session *s, bool vectorize) {
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(s->triple, &target, &msg)) {
    ljb_error(LJ_ERR_COMPILE, "LLVM has no target for %s: %s", s->triple, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  return LLVMCreateTargetMachine(target, s->triple, s->cpu, s->features, ljc_codegen_level(s->opt_level, vectorize),
                                 LLVMRelocPIC, LLVMCodeModelSmall);
}

/* The JIT's object layer when objects are announced to gdb or perf: RuntimeDyld with the
 * listeners (LLVM's listeners are process-wide singletons, never freed). */
static LLVMOrcObjectLayerRef listened_layer(void *ctx, LLVMOrcExecutionSessionRef es, const char *triple) {
  (void)triple;
  const ljc_session *s = ctx;
  LLVMOrcObjectLayerRef layer = LLVMOrcCreateRTDyldObjectLinkingLayerWithSectionMemoryManager(es);
  if (s->flags & LJC_DEBUG_INFO)
    LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(layer, LLVMCreateGDBRegistrationListener());
  LLVMJITEventListenerRef perf = s->flags & LJC_PERF ? LLVMCreatePerfJITEventListener() : NULL;
  if (perf) LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(layer, perf);
  return layer;
}

/* LLVM's command-line options, set once per process (they are LLVM's globals, so a program
 * that also uses LLVM sees them too): no loop strength reduction. It took a third of the
 * code generator's time on matmul kernels (many nested loops with many address uses) and
 * x86 addresses base + index · scale as cheaply as a strength-reduced pointer. No x86 domain
 * reassignment (general-purpose register chains redone in AVX-512 mask registers): ~5% of the
 * code generator's time (MNISTNet's first step compiled on one CPU, alternated, fastest of 4:
 * 229.7 -> 223.5 ms) for no kernel measurably faster (its conv and training workloads). */
static void llvm_options(void) {
  const char *argv[] = {"lazyjit", "-disable-lsr", "-disable-x86-domain-reassignment"};
  LLVMParseCommandLineOptions(3, argv, NULL);
}

ljc_session *ljc_session_new(const char *cpu, int opt_level, int64_t nt_store_bytes, int threads, unsigned flags) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, llvm_options);
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  ljc_session *s = ljb_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  s->opt_level = opt_level;
  s->nt_store_bytes = nt_store_bytes;
  s->flags = flags;
  s->triple = LLVMGetDefaultTargetTriple();
  s->cpu = cpu && *cpu ? LLVMCreateMessage(cpu) : LLVMGetHostCPUName();
  s->features = cpu && *cpu ? LLVMCreateMessage("") : LLVMGetHostCPUFeatures();
  s->threads = threads < 1 ? 1 : threads > MAX_COMPILE_THREADS ? MAX_COMPILE_THREADS : threads;
  for (int i = 0; i < s->threads; i++)
    if (!(s->tms[i] = make_tm(s, true)) || !(s->scalar_tms[i] = make_tm(s, flags & LJC_DEBUG_INFO))) goto fail;
  LLVMTargetMachineRef jit_tm = make_tm(s, true);
  if (!jit_tm) goto fail;
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm));
  if (flags & (LJC_DEBUG_INFO | LJC_PERF))
    LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(builder, listened_layer, s);
  if (llvm_error(LLVMOrcCreateLLJIT(&s->jit, builder), "cannot create the LLVM JIT")) goto fail;
  s->jd = LLVMOrcLLJITGetMainJITDylib(s->jit);
  LLVMOrcDefinitionGeneratorRef gen;
  if (llvm_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                     &gen, LLVMOrcLLJITGetGlobalPrefix(s->jit), NULL, NULL),
                 "cannot resolve process symbols for the JIT"))
    goto fail;
  LLVMOrcJITDylibAddGenerator(s->jd, gen);
  unsigned maj, min, patch;
  LLVMGetVersion(&maj, &min, &patch);
  snprintf(s->llvm, sizeof s->llvm, "%u.%u.%u", maj, min, patch);
  snprintf(s->routine_target, sizeof s->routine_target, "llvm-%s %s %s %s O%d", s->llvm, s->triple, s->cpu,
           s->features, opt_level);
  snprintf(s->target, sizeof s->target, "%s nt%lld%s", s->routine_target, (long long)nt_store_bytes,
           flags & LJC_DEBUG_INFO ? " debug-info" : "");
  return s;
fail:
  ljc_session_free(s);
  return NULL;
}

void ljc_session_free(ljc_session *s) {
  if (!s) return;
  if (s->jit) LLVMOrcDisposeLLJIT(s->jit);
  for (int i = 0; i < s->threads; i++) {
    if (s->tms[i]) LLVMDisposeTargetMachine(s->tms[i]);
    if (s->scalar_tms[i]) LLVMDisposeTargetMachine(s->scalar_tms[i]);
  }
  for (int r = 0; r < LJC_GEMM_NROUTINES; r++) free(s->routine_obj[r]);
  LLVMDisposeMessage(s->triple);
  LLVMDisposeMessage(s->cpu);
  LLVMDisposeMessage(s->features);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

const char *ljc_session_target(const ljc_session *s) { return s->target; }

const char *ljc_session_routine_target(const ljc_session *s) { return s->routine_target; }

void ljc_session_set_routine_cache(ljc_session *s, ljc_routine_cache c) {
  pthread_mutex_lock(&s->lock);
  s->routine_cache = c;
  pthread_mutex_unlock(&s->lock);
}
const char *ljc_session_llvm(const ljc_session *s) { return s->llvm; }
const char *ljc_session_cpu(const ljc_session *s) { return s->cpu; }
const char *ljc_session_features(const ljc_session *s) { return s->features; }

bool ljc_session_bf16_dot(const ljc_session *s) { return ljc_bf16_dot(s->features); }

/* One kernel's texts (ljc_texts), kept only when asked for. */
typedef struct kernel_texts {
  char *ir, *ir_opt, *asm_text;
} kernel_texts;

static char *module_text(LLVMModuleRef mod) {
  char *llvm = LLVMPrintModuleToString(mod);
  char *s = ljb_xalloc(strlen(llvm) + 1);
  strcpy(s, llvm);
  LLVMDisposeMessage(llvm);
  return s;
}

/* The assembly of mod, emitted from a clone (emission changes the module it is given). */
static char *asm_text(LLVMTargetMachineRef tm, LLVMModuleRef mod) {
  LLVMModuleRef clone = LLVMCloneModule(mod);
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  ljb_str b = {0};
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, clone, LLVMAssemblyFile, &msg, &buf)) {
    ljb_str_printf(&b, "; no assembly: %s\n", msg ? msg : "");
  } else {
    size_t n = LLVMGetBufferSize(buf);
    char *s = ljb_xalloc(n + 1);
    memcpy(s, LLVMGetBufferStart(buf), n);
    s[n] = 0;
    ljb_str_puts(&b, s);
    free(s);
    LLVMDisposeMemoryBuffer(buf);
  }
  LLVMDisposeMessage(msg);
  LLVMDisposeModule(clone);
  return ljb_str_take(&b);
}

/* A kernel that computes at most LJC_SMALL_POINTS points (summed over its nests, and the image
 * of a window kernel) is compiled without loop vectorization: that halves its compile (on the
 * MNISTNet step, its ten kernels on the loss, the last layer and the biases take 60-70 ms
 * instead of 120). */
static bool worth_vectorizing(const ljg_kernel *k) {
  int64_t points = ljg_kernel_has_window(k) ? ljg_numel(4, k->win_img) : 0;
  for (int i = 0; i < k->nnests; i++) points += ljg_numel(k->nests[i].ndim, k->nests[i].shape);
  return points > LJC_SMALL_POINTS;
}

bool ljc_session_stream_slots(const ljc_session *s, const ljg_program *p, int ki, uint8_t *stream) {
  int64_t nt_bytes = strncmp(s->triple, "x86_64", 6) == 0 ? s->nt_store_bytes : 0; /* x86's sfence */
  return ljc_stream_slots(p, ki, nt_bytes, s->cpu, stream);
}

/* A kernel (or GEMM routine) lowered into a module of its own, not yet optimized; its context
 * its group's (kernel_group), a routine's its own. */
typedef struct lowered {
  LLVMModuleRef mod;
  char mname[112];
  uint8_t *stream; /* per slot: its stores non-temporal (stream.c); NULL when none is */
  bool vectorize;
  bool hashed;     /* its body may have a twin (join_twins): body_hash is its hash */
  ljb_hash body_hash;
  int64_t cost;    /* its compile time, roughly (compile_cost) */
} lowered;

/* LLVM's diagnostics of a kernel's compile: its remarks and notes (the loop vectorizer's on
 * every loop it leaves scalar, whatever the loop's hints; LLVM's own handler printed those of
 * the loops the lowering asked vectors of on the user's stderr) are dropped, the loop
 * vectorizer's "loop not vectorized" counted into *unvectorized (an atomic_int, when not
 * NULL; counter UnvectorizedLoops);
 * warnings and errors, which no kernel should cause, are printed as the library's internal
 * errors are. */
static void diagnostic(LLVMDiagnosticInfoRef info, void *unvectorized) {
  LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
  char *msg = LLVMGetDiagInfoDescription(info);
  if (sev == LLVMDSRemark || sev == LLVMDSNote) {
    if (unvectorized && strstr(msg, "loop not vectorized")) atomic_fetch_add((atomic_int *)unvectorized, 1);
    LLVMDisposeMessage(msg);
    return;
  }
  fprintf(stderr, "lazyjit: internal error: LLVM %s while compiling a kernel: %s\n",
          sev == LLVMDSError ? "error" : "warning", msg);
  LLVMDisposeMessage(msg);
}

static LLVMContextRef new_context(atomic_int *unvectorized) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(ctx, diagnostic, unvectorized);
  return ctx;
}

/* Lowers kernel k of p (k < 0: GEMM routine -1 - k) into l, a new module in ctx, for tm's
 * data layout. */
static void lower(ljc_session *s, LLVMTargetMachineRef tm, const ljg_program *p, const ljg_graph *g, int k,
                  const char *name, LLVMContextRef ctx, lowered *l) {
  if (k < 0)
    ljc_gemm_routine_name(-1 - k, l->mname);
  else
    snprintf(l->mname, sizeof l->mname, "%s_k%d", name, k);
  l->mod = LLVMModuleCreateWithNameInContext(l->mname, ctx);
  LLVMSetTarget(l->mod, s->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(l->mod, td);
  LLVMDisposeTargetData(td);
  ljc_ir ir;
  ljc_ir_init(&ir, ctx, l->mod);
  ir.vec_bytes = ljc_vector_bytes(s->features);
  ir.fma = s->features && strstr(s->features, "+fma");
  ir.bf16_dot = ljc_bf16_dot(s->features);
  l->stream = k >= 0 ? ljb_xcalloc((size_t)p->nslots + 1, 1) : NULL;
  if (k >= 0 && !ljc_session_stream_slots(s, p, k, l->stream)) {
    free(l->stream);
    l->stream = NULL;
  }
  ir.stream = l->stream;
  ljc_dbg_begin(&ir, s->flags & LJC_DEBUG_INFO && k >= 0 ? g : NULL);
  if (k < 0)
    ljc_define_gemm_routine(&ir, -1 - k);
  else
    ljc_lower_kernel(&ir, p, k, name);
  ljc_dbg_end(&ir);
  ljc_ir_dispose(&ir);
  l->vectorize = k < 0 || worth_vectorizing(&p->kernels[k]);
}

/* Optimizes l's module into an object file in memory with tm, keeping its texts in *texts
 * when that is non-NULL, and disposes of l's module and stream (not its context); NULL with
 * the error set. */
static LLVMMemoryBufferRef emit(ljc_session *s, LLVMTargetMachineRef tm, const ljg_program *p, lowered *l,
                                kernel_texts *texts) {
  LLVMMemoryBufferRef obj = NULL;
  char *msg = NULL;
  if (texts) texts->ir = module_text(l->mod);
  if (LLVMVerifyModule(l->mod, LLVMReturnStatusAction, &msg)) {
    ljb_error(LJ_ERR_COMPILE, "lazyjit generated invalid LLVM IR (a bug): %s", msg);
  } else if (ljc_optimize(l->mod, tm, s->opt_level, l->vectorize, l->stream != NULL)) {
    LLVMDisposeMessage(msg);
    msg = NULL;
    if (l->stream) ljc_mark_stream_stores(l->mod, l->mname, l->stream, p->nslots);
    if (texts) {
      texts->ir_opt = module_text(l->mod);
      texts->asm_text = asm_text(tm, l->mod);
    }
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, l->mod, LLVMObjectFile, &msg, &obj))
      ljb_error(LJ_ERR_COMPILE, "LLVM code generation failed: %s", msg ? msg : "");
  }
  LLVMDisposeMessage(msg);
  LLVMDisposeModule(l->mod);
  free(l->stream);
  memset(l, 0, sizeof *l);
  return obj;
}

/* Lowers and optimizes GEMM routine r into an object file in memory with tm; NULL with the
 * error set. */
static LLVMMemoryBufferRef build_routine(ljc_session *s, LLVMTargetMachineRef tm, int r) {
  lowered l;
  LLVMContextRef ctx = new_context(NULL);
  lower(s, tm, NULL, NULL, -1 - r, "", ctx, &l);
  LLVMMemoryBufferRef obj = emit(s, tm, NULL, &l, NULL);
  LLVMContextDispose(ctx);
  return obj;
}

char *ljc_session_build_routine(ljc_session *s, int r, size_t *size) {
  LJ_ASSERT(ljc_gemm_routine_defined(r, ljc_bf16_dot(s->features)));
  LLVMMemoryBufferRef obj = build_routine(s, s->tms[0], r);
  if (!obj) return NULL;
  *size = LLVMGetBufferSize(obj);
  char *bytes = memcpy(ljb_xalloc(*size), LLVMGetBufferStart(obj), *size);
  LLVMDisposeMemoryBuffer(obj);
  return bytes;
}

/* Consecutive kernels lowered into one context, each into a module of its own, on one thread,
 * and emitted on one thread: those that go through the same pipeline (vectorized or not, none
 * with non-temporal stores) linked into one module first, which the code generator sets up
 * once for (~0.8 ms a module at level Less, ~0.2 at None, whatever its size). */
typedef struct kernel_group {
  int first, n;
  LLVMContextRef ctx;
  int64_t cost; /* its kernels' compile_cost */
} kernel_group;

/* The kernels of one compile, shared by its threads in two passes, by groups of kernels
 * (group_size): the first lowers every kernel; then kernels whose bodies are the same code
 * call the first one's (join_twins); the second builds the GEMM routines the kernels call that
 * the session does not have yet (the longest items, first) and optimizes and emits the
 * groups, the costliest first (emit_order). Each thread takes the next item until none is
 * left or one fails. */
typedef struct compile_job {
  ljc_session *s;
  const ljg_program *p;
  const ljg_graph *g;
  const char *name;
  int pass;                  /* 0: lowering, 1: building */
  int nroutines;             /* routines to build: the second pass's items 0 .. nroutines - 1 */
  int routine[LJC_GEMM_NROUTINES];
  LLVMMemoryBufferRef routine_obj[LJC_GEMM_NROUTINES];
  lowered *low;              /* one per kernel */
  int ngroups;
  kernel_group *groups;
  int *order;                /* the groups in the order the second pass takes them (emit_order) */
  LLVMMemoryBufferRef *objs; /* one per kernel: NULL for a kernel linked into an earlier one's */
  kernel_texts *texts;       /* one per kernel (a group's module's at its first kernel), or NULL */
  atomic_int next;
  atomic_int unvectorized;   /* the kernels' loops left scalar (diagnostic) */
  atomic_bool failed;
  lj_status status;          /* the first failure (errors are per thread) */
  char msg[512];
  pthread_mutex_t lock;
} compile_job;

typedef struct compile_thread {
  compile_job *job;
  LLVMTargetMachineRef tm, scalar_tm; /* the session's for this thread (ljc_session.tms) */
} compile_thread;

/* The name of kernel k's body function (lower.c names it so). */
static void body_name(const compile_job *j, int k, char name[128]) { snprintf(name, 128, "%s_k%d_body", j->name, k); }

/* After kernel k's lowering, the hash of its body for join_twins, where it may have a twin:
 * not a kernel with non-temporal stores (stream.c marks them in the entry, which the body is
 * inlined into) nor with debug info (each kernel's code its own, for the debugger). */
static void hash_body(compile_job *j, int k) {
  lowered *l = &j->low[k];
  char body[128];
  body_name(j, k, body);
  l->hashed = j->p->nkernels > 1 && !(j->s->flags & LJC_DEBUG_INFO) && !l->stream &&
              ljc_body_hash(l->mod, body, &l->body_hash);
}

/* Instructions of a module's functions. */
static int64_t module_instructions(LLVMModuleRef mod) {
  int64_t n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) n++;
  return n;
}

/* A kernel's compile time, roughly, in units of ~9 µs: a fixed part and a part per
 * instruction as lowered, both larger for a kernel that goes through the loop vectorizer and
 * code generation level Less (pipeline.c). Fitted to the 102 kernels of the MNISTNet and MLP
 * steps and a ResNet block, one CPU: ~2.3 ms + 58 µs an instruction vectorized, ~1.2 ms + 9
 * µs not (a loose fit: what an instruction becomes varies). */
static int64_t compile_cost(LLVMModuleRef mod, bool vectorize) {
  int64_t n = module_instructions(mod);
  return vectorize ? 250 + 6 * n : 130 + n;
}

static int by_cost(const void *a, const void *b, void *groups) {
  const kernel_group *g = groups;
  int64_t ca = g[*(const int *)a].cost, cb = g[*(const int *)b].cost;
  return ca < cb ? 1 : ca > cb ? -1 : *(const int *)a - *(const int *)b;
}

/* The order of the second pass's groups: the costliest first (longest processing time first),
 * so that the threads run out of work at about the same time rather than one waiting on
 * another's last large kernel. The second pass's wall time on two CPUs, one kernel a group,
 * against the kernels' own order (the same build switched, 6 alternated runs, medians): the
 * GPT-2 block's two graphs 140.4 -> 133.5 and 156.1 -> 147.8 ms, the ResNet basic block's
 * 46.7 -> 43.7 and 52.6 -> 50.7, the MNISTNet and MLP steps' within 2 ms either way. */
static void emit_order(compile_job *j) {
  for (int i = 0; i < j->ngroups; i++) {
    kernel_group *gr = &j->groups[i];
    gr->cost = 0;
    for (int k = gr->first; k < gr->first + gr->n; k++) gr->cost += j->low[k].cost;
    j->order[i] = i;
  }
  qsort_r(j->order, (size_t)j->ngroups, sizeof *j->order, by_cost, j->groups);
}

/* Kernels a group takes: enough groups for GROUPS_PER_THREAD a compile thread, so that the
 * costliest-first order still has small items to even the threads out with, of at most
 * GROUP_MAX kernels; one with LJC_PERF or LJC_DEBUG_INFO (each kernel its own object, which
 * perf's map and the debugger read by kernel). */
enum { GROUPS_PER_THREAD = 4, GROUP_MAX = 8 };

static int group_size(const compile_job *j) {
  if (j->s->flags & (LJC_PERF | LJC_DEBUG_INFO)) return 1;
  int n = j->p->nkernels / (GROUPS_PER_THREAD * j->s->threads);
  return n < 1 ? 1 : n > GROUP_MAX ? GROUP_MAX : n;
}

static void make_groups(compile_job *j) {
  int n = j->p->nkernels, size = group_size(j);
  j->ngroups = (n + size - 1) / size;
  j->groups = ljb_xcalloc((size_t)j->ngroups + 1, sizeof *j->groups);
  j->order = ljb_xcalloc((size_t)j->ngroups + 1, sizeof *j->order);
  for (int i = 0; i < j->ngroups; i++) {
    j->groups[i].first = i * size;
    j->groups[i].n = n - i * size < size ? n - i * size : size;
  }
}

/* Lowers group gi's kernels into a new context. */
static void lower_group(compile_job *j, const compile_thread *t, int gi) {
  kernel_group *gr = &j->groups[gi];
  gr->ctx = new_context(&j->unvectorized);
  for (int k = gr->first; k < gr->first + gr->n; k++) {
    lower(j->s, t->tm, j->p, j->g, k, j->name, gr->ctx, &j->low[k]);
    hash_body(j, k);
    j->low[k].cost = compile_cost(j->low[k].mod, j->low[k].vectorize);
  }
}

/* Emits group gi's kernels into j->objs: each not yet linked into an earlier one's module, with
 * those after it that go through the same pipeline linked into its module first; then disposes
 * of the group's context. False with the error set (what is left, build_objects disposes of). */
static bool emit_group(compile_job *j, const compile_thread *t, int gi) {
  kernel_group *gr = &j->groups[gi];
  int end = gr->first + gr->n;
  bool ok = true;
  for (int k = gr->first; ok && k < end; k++) {
    lowered *l = &j->low[k];
    if (!l->mod) continue;
    for (int m = k + 1; !l->stream && m < end; m++) {
      lowered *o = &j->low[m];
      if (!o->mod || o->stream || o->vectorize != l->vectorize) continue;
      ok = !LLVMLinkModules2(l->mod, o->mod); /* o's module is gone either way */
      o->mod = NULL;
      if (!ok) {
        ljb_error(LJ_ERR_COMPILE, "LLVM could not link kernel %d's module into kernel %d's (a bug)", m, k);
        break;
      }
    }
    if (ok) ok = (j->objs[k] = emit(j->s, l->vectorize ? t->tm : t->scalar_tm, j->p, l,
                                    j->texts ? &j->texts[k] : NULL)) != NULL;
  }
  if (ok) {
    LLVMContextDispose(gr->ctx);
    gr->ctx = NULL;
  }
  return ok;
}

static void fail(compile_job *j) {
  pthread_mutex_lock(&j->lock);
  if (!atomic_exchange(&j->failed, true)) {
    j->status = lj_last_status();
    snprintf(j->msg, sizeof j->msg, "%s", lj_last_error());
  }
  pthread_mutex_unlock(&j->lock);
}

static void *compile_kernels(void *arg) {
  const compile_thread *t = arg;
  compile_job *j = t->job;
  int items = j->pass == 0 ? j->ngroups : j->nroutines + j->ngroups;
  for (int i; !atomic_load(&j->failed) && (i = atomic_fetch_add(&j->next, 1)) < items;) {
    if (j->pass == 0) {
      lower_group(j, t, i);
    } else if (i < j->nroutines) {
      if (!(j->routine_obj[i] = build_routine(j->s, t->tm, j->routine[i]))) fail(j);
    } else if (!emit_group(j, t, j->order[i - j->nroutines])) {
      fail(j);
    }
  }
  return NULL;
}

/* Runs pass `pass` of j on up to `threads` threads (the calling one too). */
static void run_pass(compile_job *j, int pass, int items) {
  ljc_session *s = j->s;
  j->pass = pass;
  atomic_store(&j->next, 0);
  int n = items < s->threads ? items : s->threads;
  compile_thread t[MAX_COMPILE_THREADS];
  pthread_t tid[MAX_COMPILE_THREADS];
  int started = 1;
  for (int i = 0; i < n; i++) t[i] = (compile_thread){j, s->tms[i], s->scalar_tms[i]};
  for (int i = 1; i < n; i++)
    if (ljb_thread_start(&tid[i], compile_kernels, &t[i]) == 0) started = i + 1;
    else break;
  compile_kernels(&t[0]);
  for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
}

/* Between the passes: a kernel whose body is the code of an earlier one's (twins.c; hashed by
 * hash_body) calls that one's body, which its object then exports. The kernels that call
 * another's body. */
static int join_twins(compile_job *j) {
  int n = j->p->nkernels, twins = 0;
  ljb_hash *h = ljb_xcalloc((size_t)n + 1, sizeof *h);
  bool *has = ljb_xcalloc((size_t)n + 1, sizeof *has), *shared = ljb_xcalloc((size_t)n + 1, sizeof *shared);
  int *twin = ljb_xcalloc((size_t)n + 1, sizeof *twin);
  char body[128], other[128];
  for (int k = 0; k < n; k++) has[k] = j->low[k].hashed, h[k] = j->low[k].body_hash;
  ljc_find_twins(n, h, has, twin);
  for (int k = 0; k < n; k++) {
    if (twin[k] == k) continue;
    body_name(j, k, body);
    body_name(j, twin[k], other);
    ljc_call_twin_body(j->low[k].mod, body, other);
    j->low[k].cost = compile_cost(j->low[k].mod, j->low[k].vectorize); /* its entry alone now */
    shared[twin[k]] = true;
    twins++;
  }
  for (int k = 0; k < n; k++)
    if (shared[k]) {
      body_name(j, k, body);
      ljc_share_body(j->low[k].mod, body);
    }
  free(h);
  free(has);
  free(shared);
  free(twin);
  return twins;
}

/* Adds GEMM routine r's object (taken over) to the JIT for the session's lifetime; false
 * with the error set. Called with the session lock held. */
static bool add_routine(ljc_session *s, int r, LLVMMemoryBufferRef obj) {
  size_t n = LLVMGetBufferSize(obj);
  char *bytes = memcpy(ljb_xalloc(n + 1), LLVMGetBufferStart(obj), n);
  char sym[32];
  ljc_gemm_routine_name(r, sym);
  ljc_perf_symbols perf = s->flags & LJC_PERF ? ljc_perf_read(obj, sym) : (ljc_perf_symbols){0};
  if (llvm_error(LLVMOrcLLJITAddObjectFile(s->jit, s->jd, obj), "cannot load a GEMM routine")) {
    free(bytes);
    free(perf.sym);
    return false;
  }
  s->routine_obj[r] = bytes;
  s->routine_size[r] = n;
  if (s->flags & LJC_PERF) {
    LLVMOrcExecutorAddress addr = 0;
    if (llvm_error(LLVMOrcLLJITLookup(s->jit, &addr, sym), "cannot find a GEMM routine")) {
      free(perf.sym);
      return false;
    }
    ljc_perf_map_add(addr, &perf);
  }
  return true;
}

/* The GEMM routines p's kernels call, ascending (the order of their objects in
 * ljc_objects), into r[]; how many. */
static int routine_list(const ljg_program *p, int *r) {
  bool want[LJC_GEMM_NROUTINES] = {false};
  for (int k = 0; k < p->nkernels; k++) {
    const ljg_kernel *kr = &p->kernels[k];
    int x = ljc_gemm_routine(kr);
    if (x >= 0) want[ljc_gemm_code(x)] = true;
    if (kr->tm) {
      ljg_kernel t;
      ljg_trailing_product(kr, &t);
      want[ljc_gemm_code(ljc_gemm_routine(&t))] = true;
    }
  }
  int n = 0;
  for (int x = 0; x < LJC_GEMM_NROUTINES; x++)
    if (want[x]) r[n++] = x;
  return n;
}

int ljc_program_routines(const ljg_program *p) {
  int r[LJC_GEMM_NROUTINES];
  return routine_list(p, r);
}

bool ljc_kernel_routine(const ljg_kernel *k, char name[LJC_KERNEL_ROUTINES_MAX]) {
  int r = ljc_gemm_routine(k);
  name[0] = 0;
  if (r < 0) return false;
  ljc_gemm_routine_name(r, name);
  if (k->tm) {
    ljg_kernel t;
    char second[32];
    ljg_trailing_product(k, &t);
    ljc_gemm_routine_name(ljc_gemm_routine(&t), second);
    snprintf(name + strlen(name), LJC_KERNEL_ROUTINES_MAX - strlen(name), ", then %s", second);
  }
  return true;
}

void ljc_object_name(const ljg_program *p, int i, char name[40]) {
  int r[LJC_GEMM_NROUTINES], n = routine_list(p, r);
  if (i >= p->nkernels && i < p->nkernels + n)
    ljc_gemm_routine_name(r[i - p->nkernels], name);
  else
    snprintf(name, 40, "k%d", i);
}

/* Routine r's object among the library's precompiled ones for the session's routine target
 * (malloc'd), or NULL. */
static char *precompiled_routine(const ljc_session *s, int r, size_t *size) {
  const ljc_precompiled *pc = &ljc_precompiled_routines;
  if (!(s->flags & LJC_PRECOMPILED) || !pc->n || strcmp(pc->target, s->routine_target) != 0) return NULL;
  for (int i = 0; i < pc->n; i++)
    if (pc->routine[i] == r) {
      *size = pc->size[i];
      return memcpy(ljb_xalloc(pc->size[i]), pc->data + pc->offset[i], pc->size[i]);
    }
  return NULL;
}

/* GEMM routine r's object file as built earlier: by this process (ljc_routine_store_get), with
 * the library (precompiled_routine, counted in *precompiled), else by any process (the
 * session's routine cache, then kept in the process too); malloc'd, or NULL. */
static char *earlier_routine(ljc_session *s, int r, size_t *size, int *precompiled) {
  char *bytes = ljc_routine_store_get(s->routine_target, r, size);
  if (bytes) return bytes;
  if ((bytes = precompiled_routine(s, r, size))) {
    ++*precompiled;
    return bytes;
  }
  if (!s->routine_cache.get) return NULL;
  char name[32];
  ljc_gemm_routine_name(r, name);
  bytes = s->routine_cache.get(s->routine_cache.ctx, name, size);
  if (bytes) ljc_routine_store_put(s->routine_target, r, bytes, *size);
  return bytes;
}

/* The GEMM routines p's kernels call that the session does not have, into r[], after adding
 * to the JIT those built earlier (earlier_routine, counting the precompiled ones in
 * *precompiled); how many, or -1 with the error set. Called with the session lock held. */
static int missing_routines(ljc_session *s, const ljg_program *p, int *r, int *precompiled) {
  int all[LJC_GEMM_NROUTINES], n = routine_list(p, all), m = 0;
  for (int i = 0; i < n; i++) {
    if (s->routine_obj[all[i]]) continue;
    size_t size;
    char *bytes = earlier_routine(s, all[i], &size, precompiled);
    if (!bytes) {
      r[m++] = all[i];
      continue;
    }
    bool ok = add_routine(s, all[i], LLVMCreateMemoryBufferWithMemoryRangeCopy(bytes, size, "lazyjit routine"));
    free(bytes);
    if (!ok) return -1;
  }
  return m;
}

/* Keeps GEMM routine r, just built and added, for later sessions of this process and, through
 * the session's routine cache, of others. */
static void keep_routine(ljc_session *s, int r) {
  ljc_routine_store_put(s->routine_target, r, s->routine_obj[r], s->routine_size[r]);
  if (!s->routine_cache.put) return;
  char name[32];
  ljc_gemm_routine_name(r, name);
  s->routine_cache.put(s->routine_cache.ctx, name, s->routine_obj[r], s->routine_size[r]);
}

/* Loads the GEMM routines p's kernels call that the session does not have from objs (p's
 * ljc_objects); false with the error set. Called with the session lock held. */
static bool load_routines(ljc_session *s, const ljg_program *p, const ljc_objects *objs) {
  int r[LJC_GEMM_NROUTINES], n = routine_list(p, r);
  if (objs->n != p->nkernels + n) {
    ljb_error(LJ_ERR_COMPILE, "%d object files for a program of %d kernels and %d GEMM routines", objs->n,
              p->nkernels, n);
    return false;
  }
  for (int i = 0; i < n; i++) {
    int o = p->nkernels + i;
    if (!s->routine_obj[r[i]] &&
        !add_routine(s, r[i], LLVMCreateMemoryBufferWithMemoryRangeCopy(objs->data[o], objs->size[o], "lazyjit cache")))
      return false;
  }
  return true;
}

/* Builds every kernel's object, and the GEMM routines they call that the session does not
 * have, on up to s->threads threads (the caller is one of them), then adds the routines to
 * the JIT, counting them in *routines (when not NULL); false with the error set. Called with
 * the session lock held. */
static bool build_objects(ljc_session *s, const ljg_program *p, const ljg_graph *g, const char *name,
                          LLVMMemoryBufferRef *objs, kernel_texts *texts, ljc_compile_counts *counts) {
  compile_job j = {.s = s, .p = p, .g = g, .name = name, .objs = objs, .texts = texts};
  int precompiled = 0;
  j.nroutines = missing_routines(s, p, j.routine, &precompiled);
  if (counts) counts->precompiled = precompiled;
  if (j.nroutines < 0) return false;
  if (j.nroutines + p->nkernels == 0) return true;
  pthread_mutex_init(&j.lock, NULL);
  j.low = ljb_xcalloc((size_t)p->nkernels + 1, sizeof *j.low);
  make_groups(&j);
  run_pass(&j, 0, j.ngroups);
  int twins = join_twins(&j);
  emit_order(&j);
  run_pass(&j, 1, j.nroutines + j.ngroups);
  for (int k = 0; k < p->nkernels; k++) /* not emitted: a kernel failed */
    if (j.low[k].mod) {
      LLVMDisposeModule(j.low[k].mod);
      free(j.low[k].stream);
    }
  for (int i = 0; i < j.ngroups; i++)
    if (j.groups[i].ctx) LLVMContextDispose(j.groups[i].ctx);
  free(j.low);
  free(j.groups);
  free(j.order);
  pthread_mutex_destroy(&j.lock);
  bool ok = !j.failed;
  if (!ok) ljb_error(j.status, "%s", j.msg);
  for (int i = 0; i < j.nroutines; i++) {
    int r = j.routine[i];
    if (!ok) {
      if (j.routine_obj[i]) LLVMDisposeMemoryBuffer(j.routine_obj[i]);
      continue;
    }
    ok = add_routine(s, r, j.routine_obj[i]);
    if (ok) keep_routine(s, r);
  }
  if (ok && counts) {
    counts->compiled = j.nroutines, counts->twins = twins, counts->unvectorized = atomic_load(&j.unvectorized);
    for (int k = 0; k < p->nkernels; k++) counts->objects += objs[k] != NULL;
  }
  return ok;
}

/* Joins the kernels' texts into t, one text after the other. */
static void join_texts(const ljg_program *p, kernel_texts *kt, ljc_texts *t) {
  ljb_str ir = {0}, opt = {0}, as = {0};
  for (int k = 0; k < p->nkernels; k++) {
    if (kt[k].ir) ljb_str_puts(&ir, kt[k].ir);
    if (kt[k].ir_opt) ljb_str_puts(&opt, kt[k].ir_opt);
    if (kt[k].asm_text) ljb_str_puts(&as, kt[k].asm_text);
    free(kt[k].ir);
    free(kt[k].ir_opt);
    free(kt[k].asm_text);
  }
  t->ir = ljb_str_take(&ir);
  t->ir_opt = ljb_str_take(&opt);
  t->asm_text = ljb_str_take(&as);
}

void ljc_texts_free(ljc_texts *t) {
  free(t->ir);
  free(t->ir_opt);
  free(t->asm_text);
  memset(t, 0, sizeof *t);
}

void ljc_objects_free(ljc_objects *o) {
  for (int k = 0; k < o->n; k++) free(o->data[k]);
  free(o->data);
  free(o->size);
  memset(o, 0, sizeof *o);
}

/* Copies the kernels' objects' bytes into o, then those of the GEMM routines p calls (the
 * session has them all after p's compile). */
static void copy_objects(const ljc_session *s, const ljg_program *p, LLVMMemoryBufferRef *objs, ljc_objects *o) {
  int r[LJC_GEMM_NROUTINES], nr = routine_list(p, r), n = p->nkernels + nr;
  o->n = n;
  o->data = ljb_xcalloc((size_t)n + 1, sizeof *o->data);
  o->size = ljb_xcalloc((size_t)n + 1, sizeof *o->size);
  for (int k = 0; k < p->nkernels; k++) {
    o->size[k] = objs[k] ? LLVMGetBufferSize(objs[k]) : 0; /* 0: in an earlier kernel's object */
    o->data[k] = ljb_xalloc(o->size[k]);
    if (objs[k]) memcpy(o->data[k], LLVMGetBufferStart(objs[k]), o->size[k]);
  }
  for (int i = 0; i < nr; i++) {
    int k = p->nkernels + i;
    o->size[k] = s->routine_size[r[i]];
    o->data[k] = memcpy(ljb_xalloc(o->size[k]), s->routine_obj[r[i]], o->size[k]);
  }
}

/* The symbol prefix of a program: "lj_" and the first 16 hex digits of its key. */
static void program_name(ljb_hash key, char name[40]) {
  char hex[33];
  ljb_hash_hex(key, hex);
  snprintf(name, 40, "lj_%.16s", hex);
}

/* The live program for key with one more reference and its entry points in fns, or NULL.
 * Called with the session lock held. */
static ljc_program *share(ljc_session *s, ljb_hash key, ljg_kernel_fn *fns) {
  for (ljc_program *c = s->live; c; c = c->next)
    if (ljb_hash_eq(c->key, key)) {
      c->refs++;
      memcpy(fns, c->fns, (size_t)c->nkernels * sizeof *fns);
      return c;
    }
  return NULL;
}

/* Adds the n objects (taken over; NULL where a kernel is in an earlier one's object) to the JIT
 * under a new resource tracker and looks up each kernel's entry point; NULL with the error set
 * (and nothing left in the JIT). Called with the session lock held. With LJC_PERF, an object's
 * functions are listed from its first kernel's (perfmap.c: those of its entry's section). */
static ljc_program *link_objects(ljc_session *s, ljb_hash key, int n, LLVMMemoryBufferRef *objs,
                                 ljg_kernel_fn *fns) {
  char name[40];
  program_name(key, name);
  ljc_program *c = ljb_xcalloc(1, sizeof *c);
  c->session = s;
  c->rt = LLVMOrcJITDylibCreateResourceTracker(s->jd);
  ljc_perf_symbols *perf = ljb_xcalloc((size_t)n + 1, sizeof *perf); /* LJ_PERF: each kernel's functions */
  bool ok = true;
  for (int k = 0; k < n; k++) {
    char sym[64];
    snprintf(sym, sizeof sym, "%s_k%d", name, k);
    if (!objs[k]) continue; /* linked into an earlier kernel's object */
    if (ok && s->flags & LJC_PERF) perf[k] = ljc_perf_read(objs[k], sym);
    if (!ok) {
      LLVMDisposeMemoryBuffer(objs[k]);
      continue;
    }
    /* owned by the JIT now, even on error */
    ok = !llvm_error(LLVMOrcLLJITAddObjectFileWithRT(s->jit, c->rt, objs[k]), "cannot load compiled code");
  }
  for (int k = 0; ok && k < n; k++) {
    char sym[64];
    snprintf(sym, sizeof sym, "%s_k%d", name, k);
    LLVMOrcExecutorAddress addr = 0;
    ok = !llvm_error(LLVMOrcLLJITLookup(s->jit, &addr, sym), "cannot find a compiled kernel");
    fns[k] = (ljg_kernel_fn)(uintptr_t)addr;
    if (ok && s->flags & LJC_PERF) ljc_perf_map_add(addr, &perf[k]);
  }
  for (int k = 0; k < n; k++) free(perf[k].sym);
  free(perf);
  if (!ok) {
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(c->rt);
    if (err) LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(c->rt);
    free(c);
    return NULL;
  }
  c->key = key;
  c->nkernels = n;
  c->refs = 1;
  c->fns = memcpy(ljb_xalloc(((size_t)n + 1) * sizeof *fns), fns, (size_t)n * sizeof *fns);
  c->next = s->live;
  s->live = c;
  return c;
}

ljc_program *ljc_compile(ljc_session *s, const ljg_program *p, const ljg_graph *g, ljb_hash key,
                         ljg_kernel_fn *fns, ljc_texts *texts, ljc_objects *objs, ljc_compile_counts *counts) {
  if (counts) *counts = (ljc_compile_counts){0};
  pthread_mutex_lock(&s->lock);
  ljc_program *c = share(s, key, fns);
  if (c && !texts && !objs) {
    pthread_mutex_unlock(&s->lock);
    return c;
  }
  char name[40];
  program_name(key, name);
  LLVMMemoryBufferRef *bufs = ljb_xcalloc((size_t)p->nkernels + 1, sizeof *bufs);
  kernel_texts *kt = texts ? ljb_xcalloc((size_t)p->nkernels + 1, sizeof *kt) : NULL;
  bool built = build_objects(s, p, g, name, bufs, kt, counts);
  if (kt) join_texts(p, kt, texts);
  free(kt);
  if (built && objs) copy_objects(s, p, bufs, objs);
  if (built && !c) {
    c = link_objects(s, key, p->nkernels, bufs, fns);
  } else {
    /* failed, or only built for its texts and objects: the code is live already */
    for (int k = 0; k < p->nkernels; k++)
      if (bufs[k]) LLVMDisposeMemoryBuffer(bufs[k]);
  }
  free(bufs);
  pthread_mutex_unlock(&s->lock);
  if (!built && c) {
    ljc_program_free(c);
    c = NULL;
  }
  return c;
}

ljc_program *ljc_load(ljc_session *s, const ljg_program *p, ljb_hash key, const ljc_objects *objs,
                      ljg_kernel_fn *fns) {
  pthread_mutex_lock(&s->lock);
  ljc_program *c = share(s, key, fns);
  if (!c && load_routines(s, p, objs)) {
    LLVMMemoryBufferRef *bufs = ljb_xcalloc((size_t)p->nkernels + 1, sizeof *bufs);
    for (int k = 0; k < p->nkernels; k++)
      if (objs->size[k]) /* else in an earlier kernel's object */
        bufs[k] = LLVMCreateMemoryBufferWithMemoryRangeCopy(objs->data[k], objs->size[k], "lazyjit cache");
    c = link_objects(s, key, p->nkernels, bufs, fns);
    free(bufs);
  }
  pthread_mutex_unlock(&s->lock);
  return c;
}

void ljc_program_free(ljc_program *c) {
  if (!c) return;
  ljc_session *s = c->session;
  pthread_mutex_lock(&s->lock);
  if (--c->refs > 0) {
    pthread_mutex_unlock(&s->lock);
    return;
  }
  ljc_program **p = &s->live;
  while (*p != c) p = &(*p)->next;
  *p = c->next;
  LLVMErrorRef err = LLVMOrcResourceTrackerRemove(c->rt);
  if (err) LLVMConsumeError(err);
  LLVMOrcReleaseResourceTracker(c->rt);
  pthread_mutex_unlock(&s->lock);
  free(c->fns);
  free(c);
}
