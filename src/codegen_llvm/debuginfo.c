/* debuginfo.c — LJ_HLO_DEBUG: the user's call sites as DWARF in the generated code. Every
 * instruction a graph node lowers to carries the node's call site (LJ_IR_DEBUG's "function
 * (file:line)") as its location, inside an inlined copy of the user's function placed at the
 * kernel's own call site, so gdb breaks in a kernel at the user's line and its backtrace reads
 * "train_step () at train.c:42" inlined into "lj_<hash>_k0_body"; perf annotate shows the same
 * lines. Nodes without a call site (made by rewrites, or frames without line info) take the
 * location of the kernel itself. */
#include "codegen_llvm/ir.h"

#include <llvm-c/DebugInfo.h>

#include <stdlib.h>
#include <string.h>

/* A parsed call site: pointers into the node's location text. */
typedef struct site {
  const char *fn, *file;
  size_t fnlen, filelen;
  unsigned line;
} site;

typedef struct user_fn {
  site s;
  LLVMMetadataRef sp;
} user_fn;

struct ljc_dbg {
  LLVMContextRef ctx;
  LLVMDIBuilderRef di;
  LLVMMetadataRef cu, fn_type, none; /* none: the file of code without a call site */
  const ljg_graph *g;
  LLVMMetadataRef sp;   /* the subprogram of the function being emitted */
  LLVMMetadataRef home; /* the kernel's location in it: where user code is inlined */
  LLVMMetadataRef *at;  /* per graph node: its location in the current function, once made */
  user_fn *users;
  int nusers;
};

/* "fn (file:line)" → fn, file, line; false for anything else (no line info). */
static bool parse_site(const char *loc, site *s) {
  if (!loc) return false;
  size_t n = strlen(loc);
  const char *open = strstr(loc, " (");
  if (!open || n < 2 || loc[n - 1] != ')') return false;
  const char *colon = strrchr(loc, ':');
  if (!colon || colon < open) return false;
  char *end;
  unsigned long line = strtoul(colon + 1, &end, 10);
  if (end != loc + n - 1 || end == colon + 1 || line == 0 || line > 0xffffffu) return false;
  *s = (site){loc, open + 2, (size_t)(open - loc), (size_t)(colon - open - 2), (unsigned)line};
  return true;
}

static LLVMMetadataRef file_of(ljc_dbg *d, const char *path, size_t len) {
  size_t dir = len;
  while (dir > 0 && path[dir - 1] != '/') dir--;
  return LLVMDIBuilderCreateFile(d->di, path + dir, len - dir, path, dir ? dir - 1 : 0);
}

static LLVMMetadataRef subprogram(ljc_dbg *d, const char *name, size_t len, LLVMMetadataRef file, unsigned line,
                                  bool local) {
  return LLVMDIBuilderCreateFunction(d->di, file, name, len, name, len, file, line, d->fn_type, local, 1, line,
                                     LLVMDIFlagPrototyped, 1);
}

/* The inlined subprogram standing for the user's function of site s (one per name and file). */
static LLVMMetadataRef user_subprogram(ljc_dbg *d, const site *s) {
  for (int i = 0; i < d->nusers; i++) {
    const site *u = &d->users[i].s;
    if (u->fnlen == s->fnlen && u->filelen == s->filelen && !memcmp(u->fn, s->fn, s->fnlen) &&
        !memcmp(u->file, s->file, s->filelen))
      return d->users[i].sp;
  }
  d->users = ljb_xrealloc(d->users, ((size_t)d->nusers + 1) * sizeof *d->users);
  LLVMMetadataRef sp = subprogram(d, s->fn, s->fnlen, file_of(d, s->file, s->filelen), s->line, false);
  d->users[d->nusers++] = (user_fn){*s, sp};
  return sp;
}

static LLVMMetadataRef location_of(ljc_dbg *d, int node) {
  if (node < 0 || node >= d->g->n) return d->home;
  if (d->at[node]) return d->at[node];
  site s;
  LLVMMetadataRef loc = d->home;
  if (parse_site(d->g->nodes[node].loc, &s))
    loc = LLVMDIBuilderCreateDebugLocation(d->ctx, s.line, 0, user_subprogram(d, &s), d->home);
  return d->at[node] = loc;
}

void ljc_dbg_begin(ljc_ir *ir, const ljg_graph *g) {
  if (!g) return;
  ljc_dbg *d = ljb_xcalloc(1, sizeof *d);
  d->g = g;
  d->ctx = ir->ctx;
  d->di = LLVMCreateDIBuilder(ir->mod);
  d->at = ljb_xcalloc((size_t)g->n + 1, sizeof *d->at);
  d->none = LLVMDIBuilderCreateFile(d->di, "<lazyjit>", 9, "", 0);
  static const char producer[] = "lazyjit";
  d->cu = LLVMDIBuilderCreateCompileUnit(d->di, LLVMDWARFSourceLanguageC11, d->none, producer, sizeof producer - 1,
                                         1, "", 0, 0, "", 0, LLVMDWARFEmissionFull, 0, 0, 0, "", 0, "", 0);
  d->fn_type = LLVMDIBuilderCreateSubroutineType(d->di, d->none, NULL, 0, LLVMDIFlagZero);
  LLVMAddModuleFlag(ir->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version", 18,
                    LLVMValueAsMetadata(LLVMConstInt(ir->i32, LLVMDebugMetadataVersion(), 0)));
  LLVMAddModuleFlag(ir->mod, LLVMModuleFlagBehaviorWarning, "Dwarf Version", 13,
                    LLVMValueAsMetadata(LLVMConstInt(ir->i32, 4, 0)));
  ir->dbg = d;
}

void ljc_dbg_function(ljc_ir *ir, LLVMValueRef fn, int node) {
  ljc_dbg *d = ir->dbg;
  if (!d) return;
  size_t len;
  const char *name = LLVMGetValueName2(fn, &len);
  site s;
  bool located = node >= 0 && node < d->g->n && parse_site(d->g->nodes[node].loc, &s);
  LLVMMetadataRef file = located ? file_of(d, s.file, s.filelen) : d->none;
  unsigned line = located ? s.line : 0;
  d->sp = subprogram(d, name, len, file, line, LLVMGetLinkage(fn) == LLVMInternalLinkage);
  LLVMSetSubprogram(fn, d->sp);
  d->home = LLVMDIBuilderCreateDebugLocation(ir->ctx, line, 0, d->sp, NULL);
  memset(d->at, 0, ((size_t)d->g->n + 1) * sizeof *d->at);
  LLVMSetCurrentDebugLocation2(ir->b, d->home);
}

void ljc_dbg_at(ljc_ir *ir, int node) {
  if (ir->dbg) LLVMSetCurrentDebugLocation2(ir->b, location_of(ir->dbg, node));
}

void ljc_dbg_end(ljc_ir *ir) {
  ljc_dbg *d = ir->dbg;
  if (!d) return;
  LLVMDIBuilderFinalize(d->di);
  LLVMDisposeDIBuilder(d->di);
  free(d->at);
  free(d->users);
  free(d);
  ir->dbg = NULL;
}
