/* perfmap.c — LJ_PERF: tells perf where the kernels are. Each compiled kernel gets a line
 * "<start> <size> <symbol>" (hex) in /tmp/perf-<pid>.map, the file perf reads for code that no
 * ELF file describes, so `perf report` and `perf top` name kernels instead of showing bare
 * addresses. Sizes come from the object file's symbol table. */
#include "codegen_llvm/ir.h"

#include <llvm-c/Object.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t ljc_object_symbol_size(LLVMMemoryBufferRef obj, const char *sym) {
  char *msg = NULL;
  LLVMBinaryRef bin = LLVMCreateBinary(obj, NULL, &msg);
  LLVMDisposeMessage(msg);
  if (!bin) return 0;
  uint64_t size = 0;
  LLVMSymbolIteratorRef it = LLVMObjectFileCopySymbolIterator(bin);
  for (; !LLVMObjectFileIsSymbolIteratorAtEnd(bin, it); LLVMMoveToNextSymbol(it))
    if (strcmp(LLVMGetSymbolName(it), sym) == 0) size = LLVMGetSymbolSize(it);
  LLVMDisposeSymbolIterator(it);
  LLVMDisposeBinary(bin);
  return size;
}

void ljc_perf_map_add(uint64_t start, uint64_t size, const char *sym) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
  pthread_mutex_lock(&lock);
  FILE *f = fopen(path, "a");
  if (f) {
    fprintf(f, "%" PRIx64 " %" PRIx64 " %s\n", start, size, sym);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
}
