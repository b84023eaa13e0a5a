/* arena.c — chunked bump allocator. Allocations are 16-byte aligned and zeroed; reset
 * keeps the newest chunk so a steady-state trace reuses its memory. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

struct ljb_arena_chunk {
  ljb_arena_chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_MIN_CHUNK = 64 * 1024 };

void *ljb_arena_alloc(ljb_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  ljb_arena_chunk *c = a->head;
  if (!c || c->used + n > c->size) {
    size_t size = ARENA_MIN_CHUNK;
    if (c && c->size * 2 > size) size = c->size * 2;
    while (size < n) size *= 2;
    c = ljb_xalloc(sizeof(ljb_arena_chunk) + size);
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  a->used_total += n;
  memset(p, 0, n);
  return p;
}

void ljb_arena_reset(ljb_arena *a) {
  ljb_arena_chunk *c = a->head;
  if (!c) return;
  ljb_arena_chunk *rest = c->next;
  while (rest) {
    ljb_arena_chunk *next = rest->next;
    free(rest);
    rest = next;
  }
  c->next = NULL;
  c->used = 0;
  a->used_total = 0;
}

void ljb_arena_free(ljb_arena *a) {
  ljb_arena_reset(a);
  free(a->head);
  a->head = NULL;
}
