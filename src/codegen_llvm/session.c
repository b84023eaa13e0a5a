/* session.c — the JIT session and the compile driver. A session holds the target machine
 * (host CPU and features unless LJ_CPU says otherwise) and one ORC LLJIT whose main JITDylib
 * also resolves process symbols (memset, memcpy, fmod). A program is compiled by lowering
 * its kernels into a fresh module, optimizing it, emitting an object file with the session's
 * target machine, and adding that object to the JIT under its own resource tracker, so
 * freeing the program frees its code. Compiles are serialized by the session lock. */
#include "codegen_llvm/ir.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ljc_session {
  LLVMTargetMachineRef tm;
  LLVMOrcLLJITRef jit;
  LLVMOrcJITDylibRef jd;
  char *triple, *cpu, *features;
  char target[1024];
  int opt_level;
  pthread_mutex_t lock;
};

struct ljc_program {
  ljc_session *session;
  LLVMOrcResourceTrackerRef rt;
};

static bool llvm_error(LLVMErrorRef err, const char *what) {
  if (!err) return false;
  char *msg = LLVMGetErrorMessage(err);
  ljb_error(LJ_ERR_COMPILE, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return true;
}

static LLVMTargetMachineRef make_tm(ljc_session *s) {
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(s->triple, &target, &msg)) {
    ljb_error(LJ_ERR_COMPILE, "LLVM has no target for %s: %s", s->triple, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  return LLVMCreateTargetMachine(target, s->triple, s->cpu, s->features, ljc_codegen_level(s->opt_level),
                                 LLVMRelocPIC, LLVMCodeModelSmall);
}

ljc_session *ljc_session_new(const char *cpu, int opt_level) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  ljc_session *s = ljb_xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  s->opt_level = opt_level;
  s->triple = LLVMGetDefaultTargetTriple();
  s->cpu = cpu && *cpu ? LLVMCreateMessage(cpu) : LLVMGetHostCPUName();
  s->features = cpu && *cpu ? LLVMCreateMessage("") : LLVMGetHostCPUFeatures();
  s->tm = make_tm(s);
  LLVMTargetMachineRef jit_tm = s->tm ? make_tm(s) : NULL;
  if (!jit_tm) goto fail;
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm));
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
  snprintf(s->target, sizeof s->target, "llvm-%u.%u.%u %s %s %s O%d", maj, min, patch, s->triple,
           s->cpu, s->features, opt_level);
  return s;
fail:
  ljc_session_free(s);
  return NULL;
}

void ljc_session_free(ljc_session *s) {
  if (!s) return;
  if (s->jit) LLVMOrcDisposeLLJIT(s->jit);
  if (s->tm) LLVMDisposeTargetMachine(s->tm);
  LLVMDisposeMessage(s->triple);
  LLVMDisposeMessage(s->cpu);
  LLVMDisposeMessage(s->features);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

const char *ljc_session_target(const ljc_session *s) { return s->target; }

/* Lowers and optimizes p into an object file in memory; NULL with the error set. */
static LLVMMemoryBufferRef build_object(ljc_session *s, const ljg_program *p, const char *name) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(name, ctx);
  LLVMSetTarget(mod, s->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(s->tm);
  LLVMSetModuleDataLayout(mod, td);
  LLVMDisposeTargetData(td);
  ljc_ir ir;
  ljc_ir_init(&ir, ctx, mod);
  ir.vec_bytes = ljc_vector_bytes(s->features);
  ljc_lower_program(&ir, p, name);
  ljc_ir_dispose(&ir);
  LLVMMemoryBufferRef obj = NULL;
  char *msg = NULL;
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    ljb_error(LJ_ERR_COMPILE, "lazyjit generated invalid LLVM IR (a bug): %s", msg);
  } else if (ljc_optimize(mod, s->tm, s->opt_level)) {
    LLVMDisposeMessage(msg);
    msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(s->tm, mod, LLVMObjectFile, &msg, &obj))
      ljb_error(LJ_ERR_COMPILE, "LLVM code generation failed: %s", msg ? msg : "");
  }
  LLVMDisposeMessage(msg);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return obj;
}

ljc_program *ljc_compile(ljc_session *s, const ljg_program *p, const char *name,
                         ljg_kernel_fn *fns) {
  pthread_mutex_lock(&s->lock);
  ljc_program *c = NULL;
  LLVMMemoryBufferRef obj = build_object(s, p, name);
  if (!obj) goto done;
  c = ljb_xcalloc(1, sizeof *c);
  c->session = s;
  c->rt = LLVMOrcJITDylibCreateResourceTracker(s->jd);
  if (llvm_error(LLVMOrcLLJITAddObjectFileWithRT(s->jit, c->rt, obj), "cannot load compiled code")) {
    LLVMOrcReleaseResourceTracker(c->rt);
    free(c);
    c = NULL;
    goto done;
  }
  for (int i = 0; i < p->nkernels; i++) {
    char sym[96];
    snprintf(sym, sizeof sym, "%s_k%d", name, i);
    LLVMOrcExecutorAddress addr = 0;
    if (llvm_error(LLVMOrcLLJITLookup(s->jit, &addr, sym), "cannot find a compiled kernel")) {
      pthread_mutex_unlock(&s->lock);
      ljc_program_free(c);
      return NULL;
    }
    fns[i] = (ljg_kernel_fn)(uintptr_t)addr;
  }
done:
  pthread_mutex_unlock(&s->lock);
  return c;
}

void ljc_program_free(ljc_program *c) {
  if (!c) return;
  pthread_mutex_lock(&c->session->lock);
  LLVMErrorRef err = LLVMOrcResourceTrackerRemove(c->rt);
  if (err) LLVMConsumeError(err);
  LLVMOrcReleaseResourceTracker(c->rt);
  pthread_mutex_unlock(&c->session->lock);
  free(c);
}
