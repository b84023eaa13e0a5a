/* buffer.c — device buffers: refcounted, 64-byte aligned, recycled through a per-device
 * pool of size classes (four per power of two) so a training loop's steady state allocates
 * nothing from the system. Counts CreateDataHandles / DestroyDataHandles and tracks bytes in
 * use and the peak. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#define POOL_CACHE_LIMIT ((size_t)1 << 30)

/* Class and capacity for n bytes: capacities 64 * {4,5,6,7}/4 * 2^k. */
static int size_class(size_t n, size_t *cap) {
  if (n <= 64) {
    *cap = 64;
    return 0;
  }
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
  size_t base = (size_t)1 << k;
  size_t step = base / 4;
  size_t sub = (n - base + step - 1) / step; /* 1..4 */
  *cap = base + sub * step;
  return (k - 5) * 4 + (int)sub - 1;
}

void ljr_pool_init(ljr_pool *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
}

void ljr_pool_free(ljr_pool *p) {
  for (int c = 0; c < (int)LJ_COUNT_OF(p->free); c++) {
    ljr_buffer *b = p->free[c];
    while (b) {
      ljr_buffer *next = b->next;
      b->dev->backend->free(b->dev, b->data, b->capacity);
      free(b);
      b = next;
    }
    p->free[c] = NULL;
  }
  pthread_mutex_destroy(&p->lock);
}

ljr_buffer *ljr_buffer_new(struct lj_device *d, size_t nbytes) {
  size_t cap;
  int cls = size_class(nbytes, &cap);
  bool pooled = cls < (int)LJ_COUNT_OF(d->buffers.free);
  ljr_pool *p = &d->buffers;
  ljr_buffer *b = NULL;
  pthread_mutex_lock(&p->lock);
  if (pooled && p->free[cls]) {
    b = p->free[cls];
    p->free[cls] = b->next;
    p->cached_bytes -= b->capacity;
  }
  pthread_mutex_unlock(&p->lock);
  if (b) {
    ljr_count(LJR_C_BufferPoolHits, 1);
  } else {
    b = calloc(1, sizeof *b);
    void *data = b ? d->backend->alloc(d, cap) : NULL;
    if (!data) {
      free(b);
      ljb_error(LJ_ERR_OOM, "out of device memory allocating %zu bytes on %s", nbytes, d->name);
      return NULL;
    }
    b->data = data;
    b->capacity = cap;
    b->dev = d;
  }
  atomic_init(&b->refs, 1);
  atomic_init(&b->status, LJ_OK);
  b->seq = 0;
  b->size_class = pooled ? cls : -1;
  b->nbytes = nbytes;
  b->next = NULL;
  pthread_mutex_lock(&p->lock);
  p->in_use_bytes += b->capacity;
  if (p->in_use_bytes > p->peak_bytes) p->peak_bytes = p->in_use_bytes;
  pthread_mutex_unlock(&p->lock);
  ljr_count(LJR_C_CreateDataHandles, 1);
  return b;
}

ljr_buffer *ljr_buffer_retain(ljr_buffer *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void ljr_buffer_release(ljr_buffer *b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  ljr_count(LJR_C_DestroyDataHandles, 1);
  struct lj_device *d = b->dev;
  ljr_pool *p = &d->buffers;
  pthread_mutex_lock(&p->lock);
  p->in_use_bytes -= b->capacity;
  bool keep = b->size_class >= 0 && p->cached_bytes + b->capacity <= POOL_CACHE_LIMIT;
  if (keep) {
    b->next = p->free[b->size_class];
    p->free[b->size_class] = b;
    p->cached_bytes += b->capacity;
  }
  pthread_mutex_unlock(&p->lock);
  if (!keep) {
    d->backend->free(d, b->data, b->capacity);
    free(b);
  }
}
