/* alloc.c — checked allocation, the string builder and the bounds-checked byte reader. */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Noreturn void oom(size_t n) {
  fprintf(stderr, "lazyjit: out of memory allocating %zu bytes\n", n);
  abort();
}

void *ljb_xalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *ljb_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) oom(n * size);
  return p;
}

void *ljb_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}

static void str_grow(ljb_str *b, size_t extra) {
  if (b->n + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra + 1) cap *= 2;
  b->s = ljb_xrealloc(b->s, cap);
  b->cap = cap;
}

void ljb_str_printf(ljb_str *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  str_grow(b, (size_t)n);
  vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->n += (size_t)n;
}

void ljb_str_puts(ljb_str *b, const char *s) {
  size_t n = strlen(s);
  str_grow(b, n);
  memcpy(b->s + b->n, s, n + 1);
  b->n += n;
}

void ljb_str_put(ljb_str *b, const void *p, size_t n) {
  str_grow(b, n);
  memcpy(b->s + b->n, p, n);
  b->n += n;
  b->s[b->n] = 0;
}

void ljb_read(ljb_reader *r, void *dst, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = true;
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, r->p, n);
  r->p += n;
}

char *ljb_str_take(ljb_str *b) {
  str_grow(b, 0);
  char *s = b->s;
  s[b->n] = 0;
  b->s = NULL;
  b->n = b->cap = 0;
  return s;
}
