/* lj_run.c — lj-run: replays one graph from a text dump (lj_tensors_text, LJ_SAVE_TENSORS_FILE
 * with many graphs, or an LJ_DUMP_DIR *.graph.txt). It parses the graph, binds its data
 * parameters to seeded random values (or to raw files), compiles it, runs it, prints compile
 * and run times and a checksum per output, and on request writes the outputs, the compile's
 * dump files (LLVM IR before/after optimization, assembly, objects) or compares with the
 * reference interpreter. See `lj-run --help` and docs/debugging.md. */
#include "graph/graph.h"
#include "runtime/runtime.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: lj-run [options] FILE\n"
    "Replays one graph of FILE (IR text: lj_tensors_text, LJ_SAVE_TENSORS_FILE, *.graph.txt).\n"
    "  --index N      the N-th graph of the file, from 0 (negative: from the end; default 0)\n"
    "  --hash H       the graph whose header says hash=H... (a prefix is enough)\n"
    "  --seed S       seed of the random inputs (default 0)\n"
    "  --inputs DIR   read DATA parameter k from DIR/param<k>.bin (raw, its dtype) instead\n"
    "  --outputs DIR  write output r to DIR/root<r>.bin (raw)\n"
    "  --runs N       timed runs after the first (default 10)\n"
    "  --threads N    threads of the device (default: LJ_NUM_THREADS or all)\n"
    "  --opt N        LLVM opt level 0..3 (default: LJ_OPT_LEVEL or 2)\n"
    "  --dump DIR     write the compile's files into DIR: <hash>.graph.txt, .kernels.txt,\n"
    "                 .ll (LLVM IR as lowered), .opt.ll (optimized), .s (assembly), .k<N>.o,\n"
    "                 .lj_gemm_*.o (the GEMM routines its matmuls call)\n"
    "  --interp       also run the reference interpreter and compare; exit 1 on a mismatch\n"
    "The graph is always compiled: lj-run does not use the persistent cache (LJ_CACHE_DIR).\n"
    "Random inputs: float parameters uniform in [-1, 1), integer and bool parameters 0 or 1;\n"
    "element i of parameter k is splitmix64(seed * 2^32 + k * 2^48 + i) mapped to that range.\n"
    "The timed runs go on as a training loop does: an output that replaces a parameter (DONOR=)\n"
    "is that parameter in the next run, written in place of it. A training step's graph can\n"
    "so sink into subnormal floats on such inputs, which x86 cores compute ~100x slower than\n"
    "others: LJ_FLUSH_DENORMAL=1 flushes them, for timings like those of real data.\n";

typedef struct options {
  int index, runs, threads, opt;
  const char *hash, *inputs, *outputs, *dump, *file;
  uint64_t seed;
  bool interp;
} options;

static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("lj-run: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\n", stderr);
  va_end(ap);
  exit(2);
}

/* The whole file, NUL-terminated (malloc'd); its size in *size. NULL if unreadable. */
static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    s = ljb_xalloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) {
      free(s);
      s = NULL;
    } else {
      s[n] = 0;
      if (size) *size = (size_t)n;
    }
  }
  fclose(f);
  return s;
}

/* The graph starting at the i-th "IR {" that begins a line of text (NULL past the last);
 * with i < 0, *count gets how many there are. */
static const char *nth_graph(const char *text, int i, int *count) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, "IR {")); p += 4)
    if (p == text || p[-1] == '\n') {
      if (n == i) return p;
      n++;
    }
  if (count) *count = n;
  return NULL;
}

/* The chosen graph's text (malloc'd): from its "IR {" to its closing brace. */
static char *choose(const char *text, const options *o) {
  int n = 0;
  nth_graph(text, -1, &n);
  if (n == 0) die("%s holds no graph (no line starting with \"IR {\")", o->file);
  const char *start;
  if (o->hash) {
    char key[48];
    snprintf(key, sizeof key, "hash=%s", o->hash);
    const char *h = strstr(text, key);
    if (!h) die("no graph header in %s says %s", o->file, key);
    start = nth_graph(h, 0, NULL);
    if (!start) die("the header with %s has no graph after it", key);
  } else {
    int i = o->index < 0 ? n + o->index : o->index;
    if (i < 0 || i >= n) die("--index %d: %s holds %d graph(s)", o->index, o->file, n);
    start = nth_graph(text, i, NULL);
  }
  const char *end = strstr(start, "\n}");
  size_t len = end ? (size_t)(end - start) + 2 : strlen(start);
  char *g = ljb_xalloc(len + 2);
  memcpy(g, start, len);
  g[len] = '\n';
  g[len + 1] = 0;
  return g;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static void fill_random(const ljg_gnode *n, int k, uint64_t seed, void *data, int64_t numel) {
  for (int64_t i = 0; i < numel; i++) {
    uint64_t r = splitmix64((seed << 32) + ((uint64_t)k << 48) + (uint64_t)i);
    if (ljg_dtype_is_float(n->dtype))
      ljg_store_f64(n->dtype, data, i, (double)(r >> 40) * 0x1p-23 - 1.0);
    else
      ljg_store_i64(n->dtype, data, i, (int64_t)(r >> 63));
  }
}

static int64_t numel_of(const ljg_gnode *n) {
  int64_t e = 1;
  for (int d = 0; d < n->ndim; d++) e *= n->shape[d];
  return e;
}

/* Binds every DATA parameter of g to a fresh buffer of d holding its input. */
static void bind_inputs(struct lj_device *d, const ljg_graph *g, ljg_binding *binds, const options *o) {
  for (int k = 0; k < g->nparams; k++) {
    const ljg_gnode *n = &g->nodes[g->params[k]];
    if (n->op != LJG_OP_DATA) continue;
    int64_t numel = numel_of(n);
    size_t bytes = (size_t)numel * lj_dtype_size(n->dtype);
    ljr_buffer *b = ljr_buffer_new(d, bytes);
    if (!b) die("%s", lj_last_error());
    if (o->inputs) {
      char path[1100];
      snprintf(path, sizeof path, "%s/param%d.bin", o->inputs, k);
      size_t size = 0;
      char *raw = read_file(path, &size);
      if (!raw) die("cannot read %s", path);
      if (size != bytes) die("%s holds %zu bytes; parameter %d (%%%d) needs %zu", path, size, k, g->params[k], bytes);
      memcpy(b->data, raw, bytes);
      free(raw);
    } else {
      fill_random(n, k, o->seed, b->data, numel);
    }
    binds[k].buf = b;
  }
}

static uint64_t checksum(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
  return h;
}

/* Runs g once and waits for the run to end (runs are queued); with donate, as a training
 * loop does (ljr_run_graph). */
static lj_status replay(lj_device *d, const ljg_graph *g, const ljg_binding *binds, bool donate, ljr_buffer **out) {
  lj_status st = ljr_run_graph(d, g, binds, donate, out, LJR_CAUSE_REPLAY);
  return st == LJ_OK ? lj_wait(d) : st;
}

/* The parameter root r's value replaces in the next run: its donor (the graph's check made it
 * data of the root's dtype and size), unless an earlier root replaces it already; else -1. */
static int32_t replaced(const ljg_graph *g, int r) {
  int32_t d = g->donors[r];
  for (int q = 0; q < r && d >= 0; q++)
    if (g->donors[q] == d) d = -1;
  return d;
}

/* The next run's parameters, as in a training loop: each root that replaces a parameter
 * becomes its value (the buffer the run wrote in its place, or a new one); the other roots
 * are dropped. */
static void feed_back(const ljg_graph *g, ljg_binding *binds, ljr_buffer **out) {
  for (int r = 0; r < g->nroots; r++) {
    int32_t d = replaced(g, r);
    if (d >= 0) {
      ljr_buffer_release(binds[d].buf);
      binds[d].buf = out[r];
    } else {
      ljr_buffer_release(out[r]);
    }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Compares the compiled outputs with the interpreter's; returns the number of elements
 * beyond tolerance (floats: |a - b| <= 1e-4 * max(1, |b|) in f32 and wider, 2e-2 in 16-bit
 * floats; integers exactly; NaN matches NaN). */
static int64_t compare_interp(const ljg_graph *g, const ljg_binding *binds, ljr_buffer **out) {
  const void **inputs = ljb_xcalloc((size_t)g->nparams + 1, sizeof *inputs);
  for (int k = 0; k < g->nparams; k++)
    if (binds[k].buf) inputs[k] = binds[k].buf->data;
  void **ref = ljb_xcalloc((size_t)g->nroots + 1, sizeof *ref);
  for (int r = 0; r < g->nroots; r++) {
    const ljg_gnode *n = &g->nodes[g->roots[r]];
    ref[r] = ljb_xcalloc((size_t)numel_of(n) + 1, lj_dtype_size(n->dtype));
  }
  if (ljg_interpret(g, inputs, binds, ref) != LJ_OK) die("the interpreter failed: %s", lj_last_error());
  int64_t bad = 0;
  for (int r = 0; r < g->nroots; r++) {
    const ljg_gnode *n = &g->nodes[g->roots[r]];
    double tol = lj_dtype_size(n->dtype) == 2 && ljg_dtype_is_float(n->dtype) ? 2e-2 : 1e-4;
    double worst = 0;
    int64_t bad_here = 0;
    for (int64_t i = 0; i < numel_of(n); i++) {
      double a = ljg_load_f64(n->dtype, out[r]->data, i), b = ljg_load_f64(n->dtype, ref[r], i);
      if (isnan(a) && isnan(b)) continue;
      double diff = a == b ? 0 : fabs(a - b);
      double allowed = ljg_dtype_is_float(n->dtype) ? tol * fmax(1.0, fabs(b)) : 0;
      if (!(diff <= allowed)) bad_here++;
      if (diff > worst || isnan(diff)) worst = diff;
    }
    printf("interp: output %d: max |difference| %.3g, %" PRId64 " element(s) beyond tolerance\n", r, worst,
           bad_here);
    bad += bad_here;
    free(ref[r]);
  }
  free(ref);
  free(inputs);
  return bad;
}

static void write_outputs(const ljg_graph *g, ljr_buffer **out, const char *dir) {
  for (int r = 0; r < g->nroots; r++) {
    char path[1100];
    snprintf(path, sizeof path, "%s/root%d.bin", dir, r);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(out[r]->data, 1, out[r]->nbytes, f) != out[r]->nbytes || fclose(f) != 0)
      die("cannot write %s", path);
  }
}

static options parse_args(int argc, char **argv) {
  options o = {.runs = 10};
  static const struct option longs[] = {
      {"index", required_argument, 0, 'i'}, {"hash", required_argument, 0, 'H'},
      {"seed", required_argument, 0, 's'},  {"inputs", required_argument, 0, 'I'},
      {"outputs", required_argument, 0, 'O'}, {"runs", required_argument, 0, 'r'},
      {"threads", required_argument, 0, 't'}, {"opt", required_argument, 0, 'o'},
      {"dump", required_argument, 0, 'd'},  {"interp", no_argument, 0, 'c'},
      {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
    switch (c) {
    case 'i': o.index = atoi(optarg); break;
    case 'H': o.hash = optarg; break;
    case 's': o.seed = strtoull(optarg, NULL, 0); break;
    case 'I': o.inputs = optarg; break;
    case 'O': o.outputs = optarg; break;
    case 'r': o.runs = atoi(optarg); break;
    case 't': o.threads = atoi(optarg); break;
    case 'o': o.opt = atoi(optarg) + 1; break;
    case 'd': o.dump = optarg; break;
    case 'c': o.interp = true; break;
    case 'h': fputs(usage, stdout); exit(0);
    default: fputs(usage, stderr); exit(2);
    }
  }
  if (optind != argc - 1) {
    fputs(usage, stderr);
    exit(2);
  }
  o.file = argv[optind];
  if (o.runs < 0) die("--runs must be >= 0");
  return o;
}

int main(int argc, char **argv) {
  options o = parse_args(argc, argv);
  char *text = read_file(o.file, NULL);
  if (!text) die("cannot read %s", o.file);
  char *chosen = choose(text, &o);
  free(text);
  lj_config cfg = lj_config_default();
  if (o.threads) cfg.num_threads = o.threads;
  if (o.opt) cfg.opt_level = o.opt - 1;
  if (o.dump) cfg.dump_dir = o.dump;
  cfg.cache_dir = ""; /* it measures compiles: never load one from the persistent cache */
  if (lj_init(&cfg) != LJ_OK) die("%s", lj_last_error());
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding *binds = NULL;
  if (!ljg_graph_parse(chosen, &g, &binds)) die("%s: %s", o.file, lj_last_error());
  free(chosen);
  struct lj_device *d = lj_default_device();
  bind_inputs(d, &g, binds, &o);
  char hex[33];
  ljb_hash_hex(ljr_graph_key(&g), hex);
  printf("graph %s: %d nodes, %d parameters, %d outputs, %d kernels\n", hex, g.n, g.nparams, g.nroots,
         ljr_kernel_count(&g));
  ljr_buffer **out = ljb_xcalloc((size_t)g.nroots + 1, sizeof *out);
  int64_t n0;
  double c0, c1;
  lj_metric_data("CompileTime", &n0, &c0);
  uint64_t t0 = ljb_now_ns();
  if (replay(d, &g, binds, false, out) != LJ_OK) die("%s", lj_last_error());
  double first_ms = (double)(ljb_now_ns() - t0) / 1e6;
  lj_metric_data("CompileTime", &n0, &c1);
  printf("compile: %.3f ms (first run with it: %.3f ms)\n", (c1 - c0) * 1e3, first_ms);
  /* the timed runs go on from the parameters each run updates; the first run's are kept for
   * the outputs' comparison with the interpreter */
  ljg_binding *runs = ljb_xcalloc((size_t)g.nparams + 1, sizeof *runs);
  for (int k = 0; k < g.nparams; k++) {
    runs[k] = binds[k];
    if (runs[k].buf) ljr_buffer_retain(runs[k].buf);
  }
  double *ms = ljb_xcalloc((size_t)o.runs + 1, sizeof *ms);
  ljr_buffer **again = ljb_xcalloc((size_t)g.nroots + 1, sizeof *again);
  for (int i = 0; i < o.runs; i++) {
    uint64_t t = ljb_now_ns();
    if (replay(d, &g, runs, true, again) != LJ_OK) die("%s", lj_last_error());
    ms[i] = (double)(ljb_now_ns() - t) / 1e6;
    feed_back(&g, runs, again);
  }
  free(again);
  for (int k = 0; k < g.nparams; k++) ljr_buffer_release(runs[k].buf);
  free(runs);
  if (o.runs) {
    qsort(ms, (size_t)o.runs, sizeof *ms, cmp_double);
    printf("run: median %.3f ms, min %.3f ms over %d runs\n", ms[o.runs / 2], ms[0], o.runs);
  }
  free(ms);
  for (int r = 0; r < g.nroots; r++) {
    const ljg_gnode *n = &g.nodes[g.roots[r]];
    char shape[LJB_SHAPE_STR_MAX];
    printf("output %d: %s%s, checksum %016" PRIx64 "\n", r, lj_dtype_name(n->dtype),
           ljb_shape_str(shape, n->ndim, n->shape), checksum(out[r]->data, out[r]->nbytes));
  }
  if (o.outputs) write_outputs(&g, out, o.outputs);
  if (o.dump) printf("dump: %s/%s.*\n", o.dump, hex);
  int64_t bad = o.interp ? compare_interp(&g, binds, out) : 0;
  for (int r = 0; r < g.nroots; r++) ljr_buffer_release(out[r]);
  free(out);
  for (int k = 0; k < g.nparams; k++) ljr_buffer_release(binds[k].buf);
  free(binds);
  ljg_graph_free(&g);
  lj_shutdown();
  return bad ? 1 : 0;
}
