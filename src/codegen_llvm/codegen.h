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
 * call sites as DWARF and are registered with gdb's JIT interface. */
typedef enum ljc_flags { LJC_PERF = 1, LJC_DEBUG_INFO = 2 } ljc_flags;

/* A session for `cpu` (NULL: the host CPU and its features) at LLVM opt level 0..3 that
 * compiles the kernels of a program on up to `threads` threads, with ljc_flags. NULL with
 * LJ_ERR_COMPILE and LLVM's message if the target cannot be set up. */
ljc_session *ljc_session_new(const char *cpu, int opt_level, int threads, unsigned flags);
void ljc_session_free(ljc_session *s);
/* What the generated code depends on besides the graph: LLVM version, target triple, CPU
 * name and features, opt level, debug info. Part of every graph key. Borrowed. */
const char *ljc_session_target(const ljc_session *s);

/* The machine code of one program; freeing it removes its code from the JIT. */
typedef struct ljc_program ljc_program;

/* What a compile can leave behind for dumps (LJ_DUMP_DIR, LJ_SAVE_TENSORS_FMT): every
 * kernel's LLVM IR as lowered, after optimization, and its assembly, in kernel order, and
 * each kernel's object file. All malloc'd. */
typedef struct ljc_texts {
  char *ir, *ir_opt, *asm_text;
  int nobjs;
  char **obj;      /* kernel k's object file: obj[k], obj_size[k] bytes */
  size_t *obj_size;
} ljc_texts;
void ljc_texts_free(ljc_texts *t);

/* Compiles every kernel of p, each into a module and an object file of its own, on the
 * session's threads (symbols prefixed by `name`, which must be unique among the session's
 * live programs), and stores kernel k's entry point in fns[k]. g is the graph p was fused
 * from (its nodes' call sites become debug info with LJC_DEBUG_INFO). With texts non-NULL,
 * also fills it. NULL with LJ_ERR_COMPILE and LLVM's message on failure. */
ljc_program *ljc_compile(ljc_session *s, const ljg_program *p, const ljg_graph *g, const char *name,
                         ljg_kernel_fn *fns, ljc_texts *texts);
void ljc_program_free(ljc_program *c);

#endif
