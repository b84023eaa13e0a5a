/* callsite.c — the user's call site: the first frame of the current stack outside lazyjit,
 * symbolized as "function (file:line)" from the DWARF line tables of the process's modules
 * (elfutils libdwfl). A frame is lazyjit's when its line info points into lazyjit's source
 * tree, or, without line info, when it lies in lazyjit's shared object or its symbol carries a
 * lazyjit prefix (lj_, ljb_, ljf_, ljg_, ljr_, ljc_). Every return address
 * is classified and symbolized once; the texts are interned and live until the process ends. */
#include "base/base.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

enum { MAX_FRAMES = 64 };

typedef struct site {
  uintptr_t pc;     /* return address; 0 = empty */
  bool library;
  const char *text; /* user frames: "function (file:line)" */
} site;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *dwfl;
static site *sites;
static size_t nsites, cap;
static char src_root[1024]; /* lazyjit's source tree, from this file's own path */
static void *own_base;      /* lazyjit's module, when it is not the main program */

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

/* Reports the process's modules (again after a dlopen); false when libdwfl cannot. */
static bool report_modules(void) {
  if (!dwfl) dwfl = dwfl_begin(&callbacks);
  if (!dwfl) return false;
  dwfl_report_begin(dwfl);
  int rc = dwfl_linux_proc_report(dwfl, getpid());
  dwfl_report_end(dwfl, NULL, NULL);
  return rc == 0;
}

static void init_once(void) {
  const char *f = __FILE__, *cut = strstr(f, "base/callsite.c");
  size_t n = cut ? (size_t)(cut - f) : 0;
  if (n < sizeof src_root) memcpy(src_root, f, n);
  Dl_info self, prog;
  if (dladdr((void *)(uintptr_t)ljb_call_site, &self) &&
      !(dladdr((void *)getauxval(AT_ENTRY), &prog) && prog.dli_fbase == self.dli_fbase))
    own_base = self.dli_fbase;
  void *warm[1];
  backtrace(warm, 1); /* loads the unwinder before any lock is held */
  report_modules();
}

static bool has_library_prefix(const char *name) {
  static const char *const prefixes[] = {"lj_", "ljb_", "ljf_", "ljg_", "ljr_", "ljc_"};
  for (size_t i = 0; name && i < LJ_COUNT_OF(prefixes); i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return true;
  return false;
}

/* The innermost function (inlined or not) containing addr in mod, or NULL. */
static const char *function_name(Dwfl_Module *mod, Dwarf_Addr addr) {
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
  Dwarf_Die *scopes = NULL;
  int n = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
  const char *name = NULL;
  for (int i = 0; i < n && !name; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) name = dwarf_diename(&scopes[i]);
  }
  free(scopes);
  return name ? name : dwfl_module_addrname(mod, addr);
}

/* Classifies and symbolizes the frame whose return address is pc. */
static site describe(uintptr_t pc) {
  site s = {.pc = pc};
  Dwarf_Addr addr = pc - 1; /* inside the call instruction */
  Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, addr) : NULL;
  if (!mod && report_modules()) mod = dwfl_addrmodule(dwfl, addr);
  const char *fn = mod ? function_name(mod, addr) : NULL;
  Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, addr) : NULL;
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  Dl_info info;
  if (file)
    s.library = src_root[0] && strncmp(file, src_root, strlen(src_root)) == 0;
  else
    s.library = (own_base && dladdr((void *)addr, &info) && info.dli_fbase == own_base) ||
                has_library_prefix(fn);
  if (s.library) return s;
  ljb_str b = {0};
  if (file)
    ljb_str_printf(&b, "%s (%s:%d)", fn ? fn : "??", file, lineno);
  else if (mod) {
    Dwarf_Addr start = 0;
    const char *name = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    ljb_str_printf(&b, "%s (%s+%#jx)", fn ? fn : "??", name ? name : "??", (uintmax_t)(addr - start));
  } else
    ljb_str_printf(&b, "?? (%#jx)", (uintmax_t)addr);
  s.text = ljb_str_take(&b);
  return s;
}

/* The cached description of pc (added on first sight). Called with the lock held. */
static const site *lookup(uintptr_t pc) {
  if (2 * (nsites + 1) > cap) {
    size_t ncap = cap ? 2 * cap : 256;
    site *nt = ljb_xcalloc(ncap, sizeof *nt);
    for (size_t i = 0; i < cap; i++)
      if (sites[i].pc) {
        size_t j = ljb_mix64(sites[i].pc) & (ncap - 1);
        while (nt[j].pc) j = (j + 1) & (ncap - 1);
        nt[j] = sites[i];
      }
    free(sites);
    sites = nt;
    cap = ncap;
  }
  size_t j = ljb_mix64(pc) & (cap - 1);
  while (sites[j].pc && sites[j].pc != pc) j = (j + 1) & (cap - 1);
  if (!sites[j].pc) {
    sites[j] = describe(pc);
    nsites++;
  }
  return &sites[j];
}

const char *ljb_call_site(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_once);
  void *pcs[MAX_FRAMES];
  int n = backtrace(pcs, MAX_FRAMES);
  const char *text = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 1; i < n && !text; i++) {
    const site *s = lookup((uintptr_t)pcs[i]);
    if (!s->library) text = s->text;
  }
  pthread_mutex_unlock(&lock);
  return text;
}
