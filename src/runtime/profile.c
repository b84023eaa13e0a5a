/* profile.c — LJ_PROFILE_KERNELS: how long each kernel of an executable takes. The CPU
 * executor times every kernel launch (the thread pool's whole run of it, dispatch included);
 * the sums and the fastest time per kernel are kept with the executable, and when it is freed
 * (evicted, or at lj_shutdown) its Kernel Profile goes to stderr, the slowest kernel first, each
 * named as the dump's kernels.txt names it (LJ_DUMP_DIR), so the two read together. */
#include "runtime/runtime.h"

#include "codegen_llvm/codegen.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct ljr_profile {
  int nkernels;
  uint64_t *runs, *total_ns, *min_ns;
};

ljr_profile *ljr_profile_new(int nkernels) {
  ljr_profile *p = ljb_xcalloc(1, sizeof *p);
  p->nkernels = nkernels;
  p->runs = ljb_xcalloc((size_t)nkernels + 1, sizeof *p->runs);
  p->total_ns = ljb_xcalloc((size_t)nkernels + 1, sizeof *p->total_ns);
  p->min_ns = ljb_xcalloc((size_t)nkernels + 1, sizeof *p->min_ns);
  return p;
}

void ljr_profile_add(ljr_profile *p, int k, uint64_t ns) {
  if (!p->runs[k] || ns < p->min_ns[k]) p->min_ns[k] = ns;
  p->runs[k]++;
  p->total_ns[k] += ns;
}

/* order[0..n): the kernels by total time, the largest first (insertion: a few dozen kernels). */
static void by_total(const ljr_profile *p, int *order) {
  for (int k = 0; k < p->nkernels; k++) {
    int i = k;
    for (; i > 0 && p->total_ns[order[i - 1]] < p->total_ns[k]; i--) order[i] = order[i - 1];
    order[i] = k;
  }
}

void ljr_profile_report(ljr_exec *e) {
  ljr_profile *p = e->profile;
  if (!p) return;
  e->profile = NULL;
  uint64_t all = 0;
  for (int k = 0; k < p->nkernels; k++) all += p->total_ns[k];
  if (p->nkernels && p->runs[0]) {
    int *order = ljb_xalloc((size_t)p->nkernels * sizeof *order);
    by_total(p, order);
    char hex[33];
    ljb_hash_hex(e->key, hex);
    fprintf(stderr, "Kernel Profile: graph %s, %d kernels, %" PRIu64 " runs, %.3f ms a run (mean)\n", hex,
            p->nkernels, p->runs[0], (double)all * 1e-6 / (double)p->runs[0]);
    fprintf(stderr, "  kernel   runs   mean ms    min ms   share  computes\n");
    static const char *const kinds[] = {"loops", "matmul", "window"};
    for (int i = 0; i < p->nkernels; i++) {
      int k = order[i];
      const ljg_kernel *kr = &e->prog->kernels[k];
      uint64_t n = p->runs[k] ? p->runs[k] : 1;
      char routine[LJC_KERNEL_ROUTINES_MAX];
      bool calls = ljc_kernel_routine(kr, routine);
      fprintf(stderr, "  k%-6d %6" PRIu64 " %9.3f %9.3f %6.1f%%  %s %%%d (%s), %" PRId64 " tasks%s%s\n", k, p->runs[k],
              (double)p->total_ns[k] * 1e-6 / (double)n, (double)p->min_ns[k] * 1e-6,
              all ? 100.0 * (double)p->total_ns[k] / (double)all : 0.0, kinds[kr->kind], kr->node,
              ljg_ops[e->opt->nodes[kr->node].op].name, kr->ntasks, calls ? ", " : "", routine);
    }
    free(order);
  }
  free(p->runs);
  free(p->total_ns);
  free(p->min_ns);
  free(p);
}
