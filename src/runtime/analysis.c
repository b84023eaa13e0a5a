/* analysis.c — LJ_DEBUG: why graphs compile and run. Level 1 prints a Compilation Analysis
 * block on stderr before every compile: its cause, graph hash, inputs, outputs, the user's call
 * site, and why the cache missed (the closest executable on the device and the first node
 * where the graphs part). Level 2 adds an Execution Analysis after every run and, every ten
 * steps after the first ten, warnings when graphs compile or values are read back more often
 * than a steady training loop would. */
#include "runtime/runtime.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW_STEPS = 10 };

static int level(void) { return ljr_get()->cfg.pub.debug; }

static void line(ljb_str *b, const char *block, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(ljb_str *b, const char *block, const char *fmt, ...) {
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  ljb_str_printf(b, "%s: %s\n", block, text);
}

static int count_params(const ljg_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n; i++) n += g->nodes[i].param >= 0;
  return n;
}

/* What differs between node i of g and node i of c (both exist). */
static void node_difference(ljb_str *b, const ljg_graph *g, const ljg_graph *c, int i) {
  const ljg_gnode *x = &g->nodes[i], *y = &c->nodes[i];
  char sx[LJB_SHAPE_STR_MAX], sy[LJB_SHAPE_STR_MAX];
  if (x->op != y->op) {
    ljb_str_printf(b, "op %s instead of %s", ljg_ops[x->op].name, ljg_ops[y->op].name);
  } else if (x->dtype != y->dtype) {
    ljb_str_printf(b, "dtype %s instead of %s", lj_dtype_name(x->dtype), lj_dtype_name(y->dtype));
  } else if (x->ndim != y->ndim || memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof *x->shape)) {
    ljb_str_printf(b, "shape %s instead of %s", ljb_shape_str(sx, x->ndim, x->shape),
                   ljb_shape_str(sy, y->ndim, y->shape));
  } else if (x->nin != y->nin || memcmp(ljg_in(g, x), ljg_in(c, y), (size_t)x->nin * sizeof(int32_t))) {
    ljb_str_puts(b, "operands (");
    for (int k = 0; k < x->nin; k++) ljb_str_printf(b, "%s%%%d", k ? ", " : "", ljg_in(g, x)[k]);
    ljb_str_puts(b, ") instead of (");
    for (int k = 0; k < y->nin; k++) ljb_str_printf(b, "%s%%%d", k ? ", " : "", ljg_in(c, y)[k]);
    ljb_str_puts(b, ")");
  } else if (x->param != y->param) {
    ljb_str_printf(b, "parameter %d instead of %d", x->param, y->param);
  } else if (x->op == LJG_OP_CONST) {
    ljb_str_printf(b, "value %.17g instead of %.17g (0, 1 and -1 are baked into graphs)", x->attr.f, y->attr.f);
  } else {
    ljb_str_puts(b, "attributes");
  }
}

/* Why g found no executable in d's cache: the closest one (the longest equal prefix in post
 * order, then the most equal nodes, then the nearest node count: a graph of the same nodes
 * with other roots before a longer one) and the first node that differs. */
static void cache_miss(ljb_str *b, const struct lj_device *d, const ljg_graph *g) {
  const ljr_exec *best = NULL;
  int best_at = -2, best_same = -1, best_extra = INT_MAX;
  for (const ljr_exec *e = d->cache.lru_head; e; e = e->lru_next) {
    int at = ljg_graph_first_difference(g, e->graph);
    if (at < 0) at = g->n + 1;
    int same = ljg_graph_same_nodes(g, e->graph), extra = abs(e->graph->n - g->n);
    if (at > best_at || (at == best_at && (same > best_same || (same == best_same && extra < best_extra))))
      best = e, best_at = at, best_same = same, best_extra = extra;
  }
  if (best_at > g->n) best_at = -1;
  if (!best) {
    line(b, "Compilation Analysis", "  Cache Miss: the first graph compiled on %s", d->name);
    return;
  }
  char hex[33];
  ljb_hash_hex(best->key, hex);
  line(b, "Compilation Analysis", "  Cache Miss: closest cached graph %.16s (%d nodes, compiled at sync %" PRIu64 "%s%s)",
       hex, best->graph->n, best->compiled_at, best->site ? " from " : "", best->site ? best->site : "");
  const ljg_graph *c = best->graph;
  ljb_str why = {0};
  if (best_at < 0) {
    ljb_str_puts(&why, "the graphs are equal (the executable was compiled for a different environment)");
  } else if (best_at < g->n && best_at < c->n) {
    char *mine = ljg_node_text(g, best_at, NULL), *theirs = ljg_node_text(c, best_at, NULL);
    ljb_str_printf(&why, "node %%%d differs: ", best_at);
    node_difference(&why, g, c, best_at);
    line(b, "Compilation Analysis", "  First Difference: %s", why.s);
    line(b, "Compilation Analysis", "    this graph: %s", mine);
    line(b, "Compilation Analysis", "    cached:     %s", theirs);
    free(mine);
    free(theirs);
    free(why.s);
    return;
  } else if (best_at < g->n) {
    char *mine = ljg_node_text(g, best_at, NULL);
    ljb_str_printf(&why, "this graph goes on past the cached graph's %d nodes, at %s", c->n, mine);
    free(mine);
  } else if (best_at < c->n) {
    ljb_str_printf(&why, "this graph ends after %d nodes; the cached graph has %d", g->n, c->n);
  } else if (g->nroots != c->nroots || memcmp(g->roots, c->roots, (size_t)g->nroots * sizeof *g->roots) != 0) {
    ljb_str_printf(&why, "the same nodes, other roots (%d outputs instead of %d)", g->nroots, c->nroots);
  } else {
    ljb_str_puts(&why, "the same nodes and roots, other donated buffers (lj_sync donates what lj_assign "
                       "replaced; lj_sync_tensors and reads do not)");
  }
  line(b, "Compilation Analysis", "  First Difference: %s", why.s);
  free(why.s);
}

/* The head of a block: cause, device and sync, graph hash, nodes, inputs, outputs. */
static void head(ljb_str *b, const char *block, const char *what, const struct lj_device *d, const ljg_graph *g,
                 ljb_hash key) {
  char hex[33];
  ljb_hash_hex(key, hex);
  line(b, block, "================================================================================");
  line(b, block, "%s Cause", what);
  line(b, block, "  %s", ljr_cause_name(d->cause));
  line(b, block, "Graph Info:");
  line(b, block, "  Device: %s, sync %" PRIu64, d->name, d->syncs);
  line(b, block, "  Graph Hash: %s", hex);
  line(b, block, "  Number of Graph Nodes: %d", g->n);
  line(b, block, "  Number of Graph Inputs: %d", count_params(g));
  line(b, block, "  Number of Graph Outputs: %d", g->nroots);
}

/* The call site, the end line, and the block on stderr. */
static void finish(ljb_str *b, const char *block) {
  const char *site = ljb_call_site();
  line(b, block, "Call Site: %s", site ? site : "unknown (no frame outside lazyjit)");
  line(b, block, "--------------------------------------------------------------------------------");
  fputs(b->s, stderr);
  free(b->s);
}

void ljr_analysis_compile(struct lj_device *d, const ljg_graph *g, ljb_hash key) {
  d->window_compiles++;
  if (level() < 1) return;
  ljb_str b = {0};
  head(&b, "Compilation Analysis", "Compilation", d, g, key);
  cache_miss(&b, d, g);
  finish(&b, "Compilation Analysis");
}

void ljr_analysis_execute(const struct lj_device *d, const ljr_exec *e, uint64_t ns) {
  if (level() < 2) return;
  ljb_str b = {0};
  head(&b, "Execution Analysis", "Execution", d, e->graph, e->key);
  line(&b, "Execution Analysis", "  Kernels: %d, run in %.3f ms", e->prog->nkernels, (double)ns / 1e6);
  finish(&b, "Execution Analysis");
}

void ljr_analysis_read(struct lj_device *d) { d->window_reads++; }

void ljr_analysis_step(struct lj_device *d) {
  d->steps++;
  if (++d->window_steps < WINDOW_STEPS) return;
  if (level() >= 2 && d->steps > WINDOW_STEPS) { /* the first window warms up */
    /* A steady loop compiles nothing and reads back at most a value or so per step. */
    if (d->window_compiles > 1)
      fprintf(stderr,
              "lazyjit: warning: CompileTime too frequent: %d compiles in %d steps on %s (graphs that "
              "change every step? LJ_DEBUG=1 says why each one missed the cache)\n",
              d->window_compiles, d->window_steps, d->name);
    if (d->window_reads > d->window_steps)
      fprintf(stderr,
              "lazyjit: warning: TransferFromDeviceTime too frequent: %d host reads in %d steps on %s "
              "(lj_item / lj_tensor_to_host inside the loop: each read ends the graph early)\n",
              d->window_reads, d->window_steps, d->name);
  }
  d->window_steps = d->window_compiles = d->window_reads = 0;
}
