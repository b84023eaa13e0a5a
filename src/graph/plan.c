/* plan.c — the buffer plan: every TEMP slot gets an offset in one scratch arena.
 * A temp is live from the kernel that writes it to the last kernel that reads it; before a
 * kernel's outputs are placed, temps whose last reader ran earlier are freed, so an output
 * never overlaps the kernel's own inputs or its other outputs. Placement is first-fit over free ranges, 64-byte
 * aligned. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct range {
  int64_t off, len;
} range;

static int64_t align64(int64_t n) { return (n + 63) & ~(int64_t)63; }

static void kernel_reads(const ljg_kernel *k, void (*fn)(void *, int32_t), void *ctx) {
  for (int e = 0; e < k->nexprs; e++)
    if (k->exprs[e].kind == LJG_X_LOAD || k->exprs[e].kind == LJG_X_BUFFER) fn(ctx, k->exprs[e].slot);
}

typedef struct last_use_ctx {
  int32_t *last;
  int kernel;
} last_use_ctx;

static void note_read(void *ctx, int32_t slot) {
  last_use_ctx *c = ctx;
  c->last[slot] = c->kernel;
}

static int by_offset(const void *a, const void *b) {
  int64_t x = ((const range *)a)->off, y = ((const range *)b)->off;
  return (x > y) - (x < y);
}

/* Sorts free ranges and merges neighbours. */
static void coalesce(range *r, int *n) {
  if (*n > 1) qsort(r, (size_t)*n, sizeof *r, by_offset);
  int m = 0;
  for (int k = 0; k < *n; k++) {
    if (m > 0 && r[m - 1].off + r[m - 1].len == r[k].off)
      r[m - 1].len += r[k].len;
    else
      r[m++] = r[k];
  }
  *n = m;
}

static void add_output(int32_t *out, int *n, int32_t slot) {
  for (int j = 0; j < *n; j++)
    if (out[j] == slot) return;
  out[(*n)++] = slot;
}

/* The slots kernel k writes, listed once each: C of a matmul, a window's planes or image, a
 * trailing product's C2 and what each nest writes (a row-fused kernel has several); returns
 * how many. */
static int kernel_outputs(const ljg_kernel *k, int32_t *out) {
  int n = 0;
  int32_t own[3];
  for (int i = 0, nown = ljg_kernel_own_outputs(k, own); i < nown; i++) add_output(out, &n, own[i]);
  for (int s = 0; s < k->nnests; s++) add_output(out, &n, k->nests[s].out_slot);
  return n;
}

void ljg_plan(ljg_program *p) {
  int32_t *last = ljb_xalloc(((size_t)p->nslots + 1) * sizeof *last);
  for (int s = 0; s < p->nslots; s++) last[s] = -1;
  for (int i = 0; i < p->nkernels; i++) {
    last_use_ctx c = {last, i};
    kernel_reads(&p->kernels[i], note_read, &c);
  }
  LJB_VEC(range) free_list = {0};
  LJB_VEC(int32_t) live = {0};
  int64_t top = 0;
  for (int i = 0; i < p->nkernels; i++) {
    /* free temps whose last reader has run */
    for (int k = 0; k < live.n;) {
      int32_t s = live.a[k];
      if (last[s] < i) {
        range r = {p->slots[s].offset, align64(p->slots[s].nbytes)};
        ljb_vec_push(&free_list, r);
        live.a[k] = live.a[--live.n];
      } else {
        k++;
      }
    }
    int32_t *outs = ljb_xalloc(((size_t)p->kernels[i].nnests + 2) * sizeof *outs);
    int nout = kernel_outputs(&p->kernels[i], outs);
    coalesce(free_list.a, &free_list.n);
    for (int o = 0; o < nout; o++) {
      ljg_slot *s = &p->slots[outs[o]];
      if (s->kind != LJG_SLOT_TEMP) continue;
      int64_t need = align64(s->nbytes);
      int best = -1;
      for (int k = 0; k < free_list.n; k++)
        if (free_list.a[k].len >= need && (best < 0 || free_list.a[k].off < free_list.a[best].off))
          best = k;
      if (best >= 0) {
        s->offset = free_list.a[best].off;
        free_list.a[best].off += need;
        free_list.a[best].len -= need;
      } else {
        s->offset = top;
        top += need;
      }
      ljb_vec_push(&live, outs[o]);
    }
    free(outs);
  }
  /* temps no kernel writes (empty tensors) still get a valid offset */
  for (int s = 0; s < p->nslots; s++)
    if (p->slots[s].kind == LJG_SLOT_TEMP && p->slots[s].offset < 0) {
      p->slots[s].offset = top;
      top += align64(p->slots[s].nbytes);
    }
  p->scratch_bytes = top;
  ljb_vec_free(&free_list);
  ljb_vec_free(&live);
  free(last);
}
