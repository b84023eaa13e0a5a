/* pipeline.c — the LLVM pass pipeline kernels go through before code generation. */
#include "codegen_llvm/ir.h"

#include <llvm-c/Error.h>
#include <llvm-c/Transforms/PassBuilder.h>

static const char *pipeline_for(int opt_level) {
  switch (opt_level) {
  case 0: return "default<O0>";
  case 1: return "default<O1>";
  case 3: return "default<O3>";
  default: return "default<O2>";
  }
}

bool ljc_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level) {
  LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(o, opt_level >= 1);
  LLVMPassBuilderOptionsSetSLPVectorization(o, opt_level >= 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(o, opt_level >= 1);
  LLVMPassBuilderOptionsSetLoopUnrolling(o, opt_level >= 1);
  LLVMErrorRef err = LLVMRunPasses(mod, pipeline_for(opt_level), tm, o);
  LLVMDisposePassBuilderOptions(o);
  if (!err) return true;
  char *msg = LLVMGetErrorMessage(err);
  ljb_error(LJ_ERR_COMPILE, "LLVM pass pipeline failed: %s", msg);
  LLVMDisposeErrorMessage(msg);
  return false;
}
