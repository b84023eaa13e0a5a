/* perfmap.c — LJ_PERF: tells perf where the kernels are. Each compiled kernel gets a line
 * "<start> <size> <symbol>" (hex) in /tmp/perf-<pid>.map, the file perf reads for code that no
 * ELF file describes, so `perf report` and `perf top` name kernels instead of showing bare
 * addresses. Each function of the object (a kernel or routine and the helpers it calls) gets its
 * own line: offsets and sizes come from the object file's symbol table. */
#include "codegen_llvm/ir.h"

#include "base/base.h"

#include <llvm-c/Object.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ljc_perf_symbols ljc_perf_read(LLVMMemoryBufferRef obj, const char *sym) {
  ljc_perf_symbols out = {0};
  char *msg = NULL;
  LLVMBinaryRef bin = LLVMCreateBinary(obj, NULL, &msg);
  LLVMDisposeMessage(msg);
  if (!bin) return out;
  LLVMSectionIteratorRef sec = LLVMObjectFileCopySectionIterator(bin);
  char base_section[64] = "";
  uint64_t base = 0;
  for (int pass = 0; pass < 2; pass++) {
    LLVMSymbolIteratorRef it = LLVMObjectFileCopySymbolIterator(bin);
    for (; !LLVMObjectFileIsSymbolIteratorAtEnd(bin, it); LLVMMoveToNextSymbol(it)) {
      const char *name = LLVMGetSymbolName(it);
      uint64_t size = LLVMGetSymbolSize(it);
      LLVMMoveToContainingSection(sec, it);
      if (LLVMObjectFileIsSectionIteratorAtEnd(bin, sec)) continue;
      const char *section = LLVMGetSectionName(sec);
      if (pass == 0) {
        if (strcmp(name, sym) != 0) continue;
        snprintf(base_section, sizeof base_section, "%s", section ? section : "");
        base = LLVMGetSymbolAddress(it);
      } else if (size > 0 && strcmp(section ? section : "", base_section) == 0) {
        out.sym = ljb_xrealloc(out.sym, (size_t)(out.n + 1) * sizeof *out.sym);
        struct ljc_perf_symbol *e = &out.sym[out.n++];
        e->offset = (int64_t)(LLVMGetSymbolAddress(it) - base);
        e->size = size;
        snprintf(e->name, sizeof e->name, "%s", name);
      }
    }
    LLVMDisposeSymbolIterator(it);
    if (!base_section[0]) break;
  }
  LLVMDisposeSectionIterator(sec);
  LLVMDisposeBinary(bin);
  return out;
}

void ljc_perf_map_add(uint64_t start, ljc_perf_symbols *syms) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
  pthread_mutex_lock(&lock);
  FILE *f = syms->n ? fopen(path, "a") : NULL;
  if (f) {
    for (int i = 0; i < syms->n; i++)
      fprintf(f, "%" PRIx64 " %" PRIx64 " %s\n", start + (uint64_t)syms->sym[i].offset, syms->sym[i].size,
              syms->sym[i].name);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
  free(syms->sym);
  *syms = (ljc_perf_symbols){0};
}
