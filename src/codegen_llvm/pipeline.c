/* pipeline.c — the LLVM pass pipeline kernels go through before code generation, per opt
 * level (LJ_OPT_LEVEL), and the code generation level that goes with it.
 *
 * Level 2, the default, was chosen by measurement (8 typical graphs: elementwise chains,
 * exp/erf, row and column sums, softmax, matmul, a CNN-like block; 1 thread):
 *   default<O2> + codegen Default: 204-226 ms total compile, 17.1-18.5 ms total run
 *   the short list below + codegen Less: 111-137 ms compile, 18.7-20.0 ms run
 * Kernels are already in loop-friendly form (rotated loops, noalias arguments), so the
 * vectorizer needs only SROA, InstCombine, CSE and LICM around it; a kernel too small for
 * vector code to pay (the caller decides) goes without the vectorizer, which about halves its
 * compile, and without InstCombine, which took half of the rest (MNISTNet's first step, one
 * CPU: 168.5-175.9 -> 160.6-164.4 ms), and through code generation level None (fast
 * instruction selection and register allocation, no machine scheduling): six such kernels of
 * that step, weight initialization's Philox rounds among them, took 26.7 ms of code
 * generation at Less and 4.2 at None; the whole step compiled on one CPU in 198-212 ms
 * before, 161-172 after. The steps' run times stayed the same (their small kernels' to the
 * microsecond).
 * Level 3 is LLVM's O3 for when run time matters more than compile time; levels 0-1 skip
 * vectorization. */
#include "codegen_llvm/ir.h"

#include <llvm-c/Error.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <string.h>

static const char *pipeline_for(int opt_level, bool vectorize, bool align) {
  switch (opt_level) {
  case 0: return "default<O0>";
  case 1: return "function(sroa,instcombine<no-verify-fixpoint>,simplifycfg,early-cse)";
  case 3: return "default<O3>";
  default:
    if (!vectorize) return "cgscc(inline),function(sroa,early-cse<memssa>,simplifycfg,loop-mssa(licm))";
    if (align)
      return "cgscc(inline),function(sroa,instcombine<no-verify-fixpoint>,simplifycfg,"
             "early-cse<memssa>,loop-mssa(licm),loop-vectorize,instcombine<no-verify-fixpoint>,"
             "simplifycfg,infer-alignment)";
    return "cgscc(inline),function(sroa,instcombine<no-verify-fixpoint>,simplifycfg,"
           "early-cse<memssa>,loop-mssa(licm),loop-vectorize,instcombine<no-verify-fixpoint>,"
           "simplifycfg)";
  }
}

LLVMCodeGenOptLevel ljc_codegen_level(int opt_level, bool vectorize) {
  switch (opt_level) {
  case 0: return LLVMCodeGenLevelNone;
  case 1: return LLVMCodeGenLevelLess;
  case 2: return vectorize ? LLVMCodeGenLevelLess : LLVMCodeGenLevelNone;
  default: return LLVMCodeGenLevelAggressive;
  }
}

/* Makes vmath.c's helpers (LJC_VM_PREFIX) inlinable, now that the loop vectorizer has seen
 * their calls whole. Whether the module has any. */
static bool release_vm_helpers(LLVMModuleRef mod) {
  static const char noinline[] = "noinline", always[] = "alwaysinline";
  unsigned no = LLVMGetEnumAttributeKindForName(noinline, sizeof noinline - 1);
  unsigned yes = LLVMGetEnumAttributeKindForName(always, sizeof always - 1);
  LLVMValueRef used = LLVMGetNamedGlobal(mod, "llvm.compiler.used"); /* vmath.c's keep_convention */
  if (used) LLVMDeleteGlobal(used);
  bool any = false;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) || strncmp(name, LJC_VM_PREFIX, sizeof LJC_VM_PREFIX - 1) != 0) continue;
    LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, no);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(LLVMGetModuleContext(mod), yes, 0));
    any = true;
  }
  return any;
}

bool ljc_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, bool vectorize, bool align) {
  vectorize &= opt_level >= 2;
  LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(o, vectorize);
  LLVMPassBuilderOptionsSetSLPVectorization(o, vectorize);
  LLVMPassBuilderOptionsSetLoopInterleaving(o, vectorize);
  LLVMPassBuilderOptionsSetLoopUnrolling(o, opt_level >= 2);
  LLVMErrorRef err = LLVMRunPasses(mod, pipeline_for(opt_level, vectorize, align), tm, o);
  if (!err && release_vm_helpers(mod))
    err = LLVMRunPasses(mod, opt_level >= 1 ? "always-inline,function(instcombine<no-verify-fixpoint>,simplifycfg)"
                                            : "always-inline",
                        tm, o);
  LLVMDisposePassBuilderOptions(o);
  if (!err) return true;
  char *msg = LLVMGetErrorMessage(err);
  ljb_error(LJ_ERR_COMPILE, "LLVM pass pipeline failed: %s", msg);
  LLVMDisposeErrorMessage(msg);
  return false;
}
