/* routine_store.c — the GEMM routines' object files built in this process, by routine target
 * (all their code depends on: ljc_session_routine_target) and routine. A session that lacks a routine takes its
 * object from here before it would compile it, so a process compiles each routine once for a
 * target however many runtimes it starts and ends (lj_init after lj_shutdown, a benchmark's
 * fresh runtime per workload). Entries live as long as the process; there are at most
 * LJC_GEMM_NROUTINES per target. */
#include "codegen_llvm/ir.h"

#include "base/base.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct stored {
  char *target;
  int routine;
  char *bytes;
  size_t size;
  struct stored *next;
} stored;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static stored *entries;

static stored *find(const char *target, int r) {
  for (stored *e = entries; e; e = e->next)
    if (e->routine == r && strcmp(e->target, target) == 0) return e;
  return NULL;
}

char *ljc_routine_store_get(const char *target, int r, size_t *size) {
  pthread_mutex_lock(&lock);
  stored *e = find(target, r);
  char *copy = e ? memcpy(ljb_xalloc(e->size), e->bytes, e->size) : NULL;
  if (e) *size = e->size;
  pthread_mutex_unlock(&lock);
  return copy;
}

void ljc_routine_store_put(const char *target, int r, const char *bytes, size_t size) {
  pthread_mutex_lock(&lock);
  if (!find(target, r)) {
    size_t tn = strlen(target) + 1;
    stored *e = ljb_xalloc(sizeof *e);
    *e = (stored){memcpy(ljb_xalloc(tn), target, tn), r, memcpy(ljb_xalloc(size), bytes, size), size, entries};
    entries = e;
  }
  pthread_mutex_unlock(&lock);
}
