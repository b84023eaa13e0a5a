/* twins.c — kernels of one program compiled once per distinct body. A kernel is an entry
 * function that loads its slots' pointers from the slot table by slot number and calls the
 * kernel's body with them (lower.c), so two kernels that differ only in the slots they use
 * (a transformer's layers: the same products, norms and activations on other buffers) have
 * bodies of the same code. After lowering, each body's text, its name and debug locations
 * left out, is hashed (128 bits) with the metadata its module defines, and finds its twin,
 * the first kernel with the same hash; a twin's module then keeps
 * its entry only, calling the first kernel's body, which that kernel's object exports. The
 * optimizer and code generator, most of a compile, see each body once. */
#include "codegen_llvm/ir.h"

#include <stdlib.h>
#include <string.h>

/* Removes every " !dbg !<n>" (a debug location or subprogram) from s, in place. */
static void drop_debug_refs(char *s) {
  static const char tag[] = ", !dbg !", tag2[] = " !dbg !";
  char *out = s;
  for (const char *in = s; *in;) {
    size_t skip = strncmp(in, tag, sizeof tag - 1) == 0    ? sizeof tag - 1
                  : strncmp(in, tag2, sizeof tag2 - 1) == 0 ? sizeof tag2 - 1
                                                            : 0;
    if (skip) {
      in += skip;
      while (*in >= '0' && *in <= '9') in++;
      continue;
    }
    *out++ = *in++;
  }
  *out = 0;
}

/* The line of text (a module's) that starts with "define" and names @body, or NULL. */
static char *define_line(char *text, const char *body) {
  size_t n = strlen(body);
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n'), *at = strncmp(line, "define ", 7) == 0 ? strstr(line, body) : NULL;
    if (at && (!nl || at < nl) && at[-1] == '@' && at[n] == '(') return line;
    line = nl ? nl + 1 : NULL;
  }
  return NULL;
}

bool ljc_body_hash(LLVMModuleRef mod, const char *body, ljb_hash *h) {
  /* the module printed once: the function's text (from its define line to the line that
   * closes it), and the metadata it refers to by number (loops' hints, aliasing scopes), the
   * lines that define metadata */
  char *text = LLVMPrintModuleToString(mod), *fn = define_line(text, body);
  if (!fn) {
    LLVMDisposeMessage(text);
    return false;
  }
  char *end = strstr(fn, "\n}\n");
  LJ_ASSERT(end);
  end[1] = 0; /* the closing brace, dropped in both kernels alike */
  memset(strstr(fn, body), '_', strlen(body));
  drop_debug_refs(fn);
  ljb_hasher x;
  ljb_hasher_init(&x, 0);
  ljb_hash_str(&x, fn);
  for (const char *line = end + 2; *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    if (line[0] == '!') ljb_hash_bytes(&x, line, n);
    line = nl ? nl + 1 : line + n;
  }
  LLVMDisposeMessage(text);
  *h = ljb_hasher_final(&x);
  return true;
}

void ljc_find_twins(int n, const ljb_hash *h, const bool *has, int *twin) {
  for (int k = 0; k < n; k++) {
    twin[k] = k;
    for (int j = 0; j < k && has[k]; j++)
      if (twin[j] == j && has[j] && ljb_hash_eq(h[j], h[k])) {
        twin[k] = j;
        break;
      }
  }
}

void ljc_share_body(LLVMModuleRef mod, const char *body) {
  LLVMValueRef fn = LLVMGetNamedFunction(mod, body);
  LJ_ASSERT(fn);
  LLVMSetLinkage(fn, LLVMExternalLinkage);
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  unsigned kind = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
}

/* Deletes the module's internal functions that nothing calls any more, until none is left. */
static void drop_unused_internals(LLVMModuleRef mod) {
  for (bool again = true; again;) {
    again = false;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod), next; fn; fn = next) {
      next = LLVMGetNextFunction(fn);
      if (LLVMGetLinkage(fn) == LLVMInternalLinkage && !LLVMGetFirstUse(fn)) {
        LLVMDeleteFunction(fn);
        again = true;
      }
    }
  }
}

void ljc_call_twin_body(LLVMModuleRef mod, const char *body, const char *twin_body) {
  LLVMValueRef fn = LLVMGetNamedFunction(mod, body);
  LJ_ASSERT(fn);
  LLVMValueRef decl = LLVMAddFunction(mod, twin_body, LLVMGlobalGetValueType(fn));
  LLVMReplaceAllUsesWith(fn, decl);
  LLVMDeleteFunction(fn);
  drop_unused_internals(mod);
}
