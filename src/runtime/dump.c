/* dump.c — what the runtime writes out for a person to read: every executed graph appended to
 * LJ_SAVE_TENSORS_FILE (graph text, dot, optimized LLVM IR or assembly), every compiled
 * graph's files in LJ_DUMP_DIR, and the metrics report after every executed graph
 * (LJ_METRICS_FILE). Write failures are reported on stderr once per file and never fail a
 * sync. */
#include "runtime/runtime.h"
#include "codegen_llvm/codegen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the metrics file */
static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t metrics_step;

const char *ljr_cause_name(ljr_cause c) {
  switch (c) {
  case LJR_CAUSE_SYNC: return "user sync (lj_sync)";
  case LJR_CAUSE_SYNC_TENSORS: return "user sync (lj_sync_tensors)";
  case LJR_CAUSE_READ: return "value read (lj_tensor_to_host / lj_item)";
  case LJR_CAUSE_OPTIMIZER: return "optimizer step";
  case LJR_CAUSE_LOADER: return "device loader";
  case LJR_CAUSE_REPLAY: return "replayed graph";
  }
  return "?";
}

/* Says once per path (and error) that writing failed. */
static void write_failed(const char *path) {
  static char last[1024];
  pthread_mutex_lock(&failed_lock);
  bool first = strcmp(last, path) != 0;
  if (first) snprintf(last, sizeof last, "%s", path);
  pthread_mutex_unlock(&failed_lock);
  if (first) fprintf(stderr, "lazyjit: cannot write %s: %s\n", path, strerror(errno));
}

/* Appends (or with append false, writes) n bytes to path; "STDOUT" and "STDERR" name the
 * streams. */
static void write_bytes(const char *path, const void *p, size_t n, bool append) {
  bool out = strcmp(path, "STDOUT") == 0, err = strcmp(path, "STDERR") == 0;
  FILE *f = out ? stdout : err ? stderr : fopen(path, append ? "ab" : "wb");
  if (!f) {
    write_failed(path);
    return;
  }
  bool ok = fwrite(p, 1, n, f) == n;
  ok &= out || err ? fflush(f) == 0 : fclose(f) == 0;
  if (!ok) write_failed(path);
}

static void write_text(const char *path, const char *text, bool append) {
  write_bytes(path, text, strlen(text), append);
}

bool ljr_make_dirs(const char *dir) {
  char p[1024];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) return false;
      *s = '/';
    }
  return mkdir(p, 0777) == 0 || errno == EEXIST;
}

bool ljr_dump_keeps_texts(void) {
  const ljr_config *c = &ljr_get()->cfg;
  return c->pub.dump_dir || (c->pub.save_tensors_file && (c->save_fmt == LJR_FMT_LLVM || c->save_fmt == LJR_FMT_ASM));
}

void ljr_dump_compiled(const ljr_exec *e, const ljc_texts *t, const ljc_objects *objs) {
  const char *dir = ljr_get()->cfg.pub.dump_dir;
  if (!dir) return;
  if (!ljr_make_dirs(dir)) {
    write_failed(dir);
    return;
  }
  char hex[33];
  ljb_hash_hex(e->key, hex);
  char *graph = ljg_graph_text(e->graph, NULL);
  char *program = ljg_program_text(e->prog, e->opt), *lowering = ljc_lowering_text(e->prog, ljr_get()->cg);
  ljb_str text = {0};
  ljb_str_puts(&text, program);
  ljb_str_puts(&text, lowering);
  char *kernels = ljb_str_take(&text);
  free(program);
  free(lowering);
  const struct {
    const char *suffix, *text;
  } files[] = {{"graph.txt", graph},
               {"kernels.txt", kernels},
               {"ll", t ? t->ir : NULL},
               {"opt.ll", t ? t->ir_opt : NULL},
               {"s", t ? t->asm_text : NULL}};
  for (size_t i = 0; i < LJ_COUNT_OF(files); i++) {
    if (!files[i].text) continue;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.%s", dir, hex, files[i].suffix);
    write_text(path, files[i].text, false);
  }
  for (int k = 0; objs && k < objs->n; k++) {
    if (!objs->size[k]) continue; /* the kernel is in an earlier one's object */
    char path[1200], name[40];
    ljc_object_name(e->prog, k, name);
    snprintf(path, sizeof path, "%s/%s.%s.o", dir, hex, name);
    write_bytes(path, objs->data[k], objs->size[k], false);
  }
  free(graph);
  free(kernels);
}

/* The header line of a saved graph, in the comment syntax of its format. */
static void header(ljb_str *b, const char *comment, const struct lj_device *d, ljb_hash key) {
  char hex[33];
  ljb_hash_hex(key, hex);
  const char *site = ljb_call_site();
  ljb_str_printf(b, "%s[lazyjit graph] device=%s sync=%" PRIu64 " hash=%s cause=%s at=%s\n", comment,
                 d->name, d->syncs, hex, ljr_cause_name(d->cause), site ? site : "?");
}

static void save_graph(const struct lj_device *d, const ljg_graph *g, const ljg_binding *binds,
                       const ljr_exec *e) {
  const ljr_config *c = &ljr_get()->cfg;
  ljb_hash key = e ? e->key : ljr_graph_key(g);
  ljb_str b = {0};
  ljr_dump_fmt fmt = c->save_fmt;
  if ((fmt == LJR_FMT_LLVM || fmt == LJR_FMT_ASM) && !(e && e->texts)) fmt = LJR_FMT_TEXT;
  char *body = NULL;
  switch (fmt) {
  case LJR_FMT_TEXT:
    header(&b, "", d, key);
    body = ljg_graph_text(g, binds);
    ljb_str_puts(&b, body);
    break;
  case LJR_FMT_DOT:
    header(&b, "// ", d, key);
    body = ljg_graph_dot(g);
    ljb_str_puts(&b, body);
    break;
  case LJR_FMT_LLVM:
    header(&b, "; ", d, key);
    ljb_str_puts(&b, e->texts->ir_opt);
    break;
  case LJR_FMT_ASM:
    header(&b, "# ", d, key);
    ljb_str_puts(&b, e->texts->asm_text);
    break;
  }
  ljb_str_puts(&b, "\n");
  char path[1100];
  snprintf(path, sizeof path, "%s.%d", c->pub.save_tensors_file, d->ordinal);
  char *text = ljb_str_take(&b);
  write_text(path, text, true);
  free(text);
  free(body);
}

void ljr_dump_executed(const struct lj_device *d, const ljg_graph *g, const ljg_binding *binds,
                       const ljr_exec *e) {
  const ljr_config *c = &ljr_get()->cfg;
  if (c->pub.save_tensors_file) save_graph(d, g, binds, e);
  if (!c->pub.metrics_file) return;
  char *report = lj_metrics_report();
  pthread_mutex_lock(&lock);
  ljb_str b = {0};
  ljb_str_printf(&b, "[MetricsData; step=%" PRIu64 "]\n%s", ++metrics_step, report);
  char *text = ljb_str_take(&b);
  write_text(c->pub.metrics_file, text, true);
  pthread_mutex_unlock(&lock);
  free(text);
  free(report);
}
