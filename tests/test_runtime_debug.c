/* test_runtime_debug.c — the debugging switches, each set through lj_config and checked by
 * its effect: LJ_IR_DEBUG call sites in dumps (the right function, file and line),
 * LJ_METRICS_FILE blocks that parse back to the counters, LJ_SAVE_TENSORS_FILE in every
 * format (the saved text parses back to the synced graph), LJ_DUMP_DIR files per compiled
 * graph, LJ_DEBUG's analyses (cause, call site, the node that made the cache miss) and
 * warnings, LJ_HLO_DEBUG's line info in the objects registered with gdb, LJ_PERF's map and
 * jitdump files; configuration errors and the PyTorch/XLA spellings of the variables. */
#include "test_util.h"

#include "graph/graph.h"
#include "runtime/runtime.h"

#include <dirent.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh temporary directory; remove_dir deletes it with what the test wrote in it. */
static char *temp_dir(void) {
  char *dir = strdup("/tmp/lj_test_debug_XXXXXX");
  ck_assert(mkdtemp(dir));
  return dir;
}

static void remove_dir(char *dir) {
  tu_remove_dir(dir);
  free(dir);
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static void init_with(lj_config cfg) { ck_assert_int_eq(lj_init(&cfg), LJ_OK); }

/* Records tanh(x) * 2 with the op calls on one line, whose number goes to *line. (Not as
 * the tail call: a tail call leaves no frame of its caller to find.) */
static __attribute__((noinline)) lj_tensor *record_here(lj_tensor *x, int *line) {
  *line = __LINE__; lj_tensor *y = lj_mul_scalar(lj_tanh(x), 2.0);
  ck_assert(y);
  return y;
}

START_TEST(test_ir_debug_call_sites) {
  for (int on = 0; on < 2; on++) {
    lj_config cfg = lj_config_default();
    cfg.ir_debug = on;
    init_with(cfg);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3, 4), TU_ANY, 1);
    int line;
    lj_tensor *y = record_here(x, &line);
    char *text = lj_tensors_text(1, &y);
    char want[64];
    snprintf(want, sizeof want, "test_runtime_debug.c:%d)", line);
    if (on) {
      /* every node names the user's function and line: tanh, the scalar, the mul, ... */
      ck_assert_int_ge(count(text, "location=record_here ("), 3);
      ck_assert_int_eq(count(text, "location="), count(text, want));
      ck_assert_int_eq(count(text, "location="), count(text, "\n") - 2);
      /* the printed locations parse back and print the same */
      ljg_graph g;
      ljg_graph_init(&g);
      ck_assert(ljg_graph_parse(text, &g, NULL));
      char *again = ljg_graph_text(&g, NULL);
      ck_assert_int_eq(count(again, want), count(text, want));
      free(again);
      ljg_graph_free(&g);
    } else {
      ck_assert_ptr_null(strstr(text, "location="));
    }
    free(text);
    lj_tensor_release(x);
    lj_tensor_release(y);
    lj_shutdown();
  }
}
END_TEST

/* Three syncs of a step: three blocks, numbered, each a full report whose counters are the
 * ones at that point. */
START_TEST(test_metrics_file) {
  char *dir = temp_dir(), path[256];
  snprintf(path, sizeof path, "%s/metrics.txt", dir);
  lj_config cfg = lj_config_default();
  cfg.metrics_file = path;
  init_with(cfg);
  lj_metrics_clear();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(8, 8), TU_ANY, 1);
  for (int step = 0; step < 3; step++) {
    lj_scope_begin();
    lj_assign(w, lj_tanh(lj_add_scalar(w, 0.5)));
    lj_scope_end();
    ck_assert_int_eq(lj_sync(lj_default_device()), LJ_OK);
  }
  char *text = tu_read_file(path, NULL);
  ck_assert(text);
  ck_assert_int_eq(count(text, "[MetricsData; step="), 3);
  const char *last = strstr(text, "[MetricsData; step=3]\n");
  ck_assert(last && strstr(text, "[MetricsData; step=1]\n") < last);
  long long marks = -1, hits = -1;
  const char *p = strstr(last, "Counter: MarkStep\n");
  ck_assert(p && sscanf(p, "Counter: MarkStep\n  Value: %lld", &marks) == 1);
  p = strstr(last, "Counter: CachedCompile\n");
  ck_assert(p && sscanf(p, "Counter: CachedCompile\n  Value: %lld", &hits) == 1);
  ck_assert_int_eq(marks, lj_counter_value("MarkStep"));
  ck_assert_int_eq(hits, 2);
  ck_assert(strstr(last, "Metric: CompileTime\n  TotalSamples: 1\n"));
  free(text);
  lj_tensor_release(w);
  lj_shutdown();
  remove_dir(dir);
}
END_TEST

/* Starts lazyjit saving every executed graph in format fmt into a file of a new temporary
 * directory (returned); the file device 0 writes into file. */
static char *start_saving(const char *fmt, char file[300]) {
  char *dir = temp_dir(), path[256];
  snprintf(path, sizeof path, "%s/graphs", dir);
  snprintf(file, 300, "%s.0", path);
  lj_config cfg = lj_config_default();
  cfg.save_tensors_file = path;
  cfg.save_tensors_fmt = fmt;
  init_with(cfg);
  return dir;
}

/* Each format of the save file: a header per executed graph naming the graph hash and the
 * cause; text parses back to the synced graph (same key), dot is Graphviz, llvm and asm are
 * the kernels' code. */
START_TEST(test_save_tensors_file) {
  static const char *const fmts[] = {"text", "dot", "llvm", "asm"};
  static const char *const marks[] = {"IR {", "digraph", "define void @lj_", ".text"};
  for (int f = 0; f < 4; f++) {
    char file[300], *dir = start_saving(fmts[f], file);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(5, 7), TU_ANY, 1);
    char hash[33];
    for (int step = 0; step < 2; step++) {
      lj_tensor *y = lj_softmax(lj_mul_scalar(x, 1.5 + step), 1);
      ck_assert_int_eq(lj_graph_hash(1, &y, hash), LJ_OK);
      float out[35];
      ck_assert_int_eq(lj_tensor_to_host(y, out, sizeof out), LJ_OK);
      lj_tensor_release(y);
    }
    char *text = tu_read_file(file, NULL);
    ck_assert_msg(text, "%s was not written", file);
    ck_assert_int_eq(count(text, "[lazyjit graph] device=lj:0 "), 2);
    char want[64];
    snprintf(want, sizeof want, "hash=%s cause=value read", hash);
    ck_assert_int_eq(count(text, want), 2);
    ck_assert_int_ge(count(text, marks[f]), 2);
    if (f == 0) {
      ljg_graph g;
      ljg_graph_init(&g);
      ljg_binding *binds = NULL;
      ck_assert(ljg_graph_parse(strstr(text, "sync=2"), &g, &binds));
      char hex[33];
      ljb_hash_hex(ljr_graph_key(&g), hex);
      ck_assert_str_eq(hex, hash);
      ck_assert(strstr(text, "value=2.5")); /* the second step's scalar */
      free(binds);
      ljg_graph_free(&g);
    }
    free(text);
    lj_tensor_release(x);
    lj_shutdown();
    remove_dir(dir);
  }
}
END_TEST

/* A kernel of a few points compiles without the loop vectorizer, one of many points with it:
 * the saved LLVM IR of log over 64 floats has no vector type, over 16384 it has (exp, with
 * AVX-512, calls a helper of vector type either way). */
START_TEST(test_small_kernels_scalar) {
  static const int64_t sizes[] = {64, 16384};
  for (int i = 0; i < 2; i++) {
    char file[300], *dir = start_saving("llvm", file);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(sizes[i]), TU_ANY, 1), *y = lj_log(x);
    tu_check1(y, 1e-6);
    char *text = tu_read_file(file, NULL);
    ck_assert_msg(text, "%s was not written", file);
    ck_assert_msg((count(text, " x float>") > 0) == (i == 1), "%lld points: %d vector types", (long long)sizes[i],
                  count(text, " x float>"));
    free(text);
    lj_tensor_release(x);
    lj_shutdown();
    remove_dir(dir);
  }
}
END_TEST

/* In a kernel worth vector code, a nest of a few points keeps its loops scalar: softmax over
 * [128, 128] vectorizes its four nests of 16384 points, but not the reciprocal over 128. */
START_TEST(test_small_nests_scalar) {
  char file[300], *dir = start_saving("llvm", file);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(128, 128), TU_ANY, 1), *y = lj_softmax(x, 1);
  tu_check1(y, 1e-5);
  char *text = tu_read_file(file, NULL);
  ck_assert_msg(text, "%s was not written", file);
  ck_assert_int_gt(count(text, " x float>"), 0);
  ck_assert_int_gt(count(text, "!\"llvm.loop.vectorize.enable\", i1 false"), 0);
  ck_assert_int_gt(count(text, "fdiv float"), 0);
  ck_assert_int_eq(count(text, "fdiv <"), 0);
  free(text);
  lj_tensor_release(x);
  lj_shutdown();
  remove_dir(dir);
}
END_TEST

static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* One set of files per compiled graph, named by its hash; a cached run writes nothing. The
 * object files are checked for their ELF magic. */
START_TEST(test_dump_dir) {
  char *dir = temp_dir(), sub[256];
  snprintf(sub, sizeof sub, "%s/a/b", dir); /* made on demand */
  lj_config cfg = lj_config_default();
  cfg.dump_dir = sub;
  init_with(cfg);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(6, 5), TU_ANY, 1);
  char hash[33];
  int files = 0;
  for (int step = 0; step < 2; step++) {
    lj_scope_begin();
    lj_tensor *y = lj_keep(lj_log_softmax(lj_tanh(x), 1));
    lj_scope_end();
    ck_assert_int_eq(lj_graph_hash(1, &y, hash), LJ_OK);
    ck_assert_int_eq(lj_sync(lj_default_device()), LJ_OK);
    lj_tensor_release(y);
    if (step == 0) files = files_in(sub);
    ck_assert_int_ge(files, 6); /* five texts and an object file per kernel */
    ck_assert_int_eq(files_in(sub), files);
  }
  static const char *const suffix[] = {"graph.txt", "kernels.txt", "ll", "opt.ll", "s"};
  static const char *const mark[] = {"tanh(%0)", "kernel", "define void @lj_", "define void @lj_", ".text"};
  for (int i = 0; i < 5; i++) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s.%s", sub, hash, suffix[i]);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text && strstr(text, mark[i]), "%s lacks %s", path, mark[i]);
    free(text);
  }
  char path[400];
  snprintf(path, sizeof path, "%s/%s.k0.o", sub, hash);
  char *obj = tu_read_file(path, NULL);
  ck_assert(obj && memcmp(obj, "\x7f" "ELF", 4) == 0);
  free(obj);
  lj_tensor_release(x);
  lj_shutdown();
  remove_dir(dir);
}
END_TEST

/* Runs fn with stderr going to a file; returns what it wrote. */
static char *capture_stderr(void (*fn)(void)) {
  char path[] = "/tmp/lj_test_stderr_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  char *text = tu_read_file(path, NULL);
  unlink(path);
  return text;
}

/* What fn writes to stderr with LJ_DEBUG at level (the runtime started for it). */
static char *debug_text(int level, void (*fn)(void)) {
  lj_config cfg = lj_config_default();
  cfg.debug = level;
  init_with(cfg);
  return capture_stderr(fn);
}

static int sync_line;

/* A loop whose batch grows after 12 steps and that reads a value back twice per step. */
static void changing_loop(void) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3), TU_ANY, 1);
  for (int step = 0; step < 24; step++) {
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(step < 12 ? 8 : 16, 4), TU_ANY, 2);
    lj_tensor *y = lj_tanh(lj_matmul(x, w));
    lj_item(lj_sum(y, 0, NULL, false));
    lj_item(lj_amax(y, 0, NULL, false));
    lj_assign(w, lj_add_scalar(w, 0.01));
    lj_scope_end();
    sync_line = __LINE__; lj_sync(d);
  }
  lj_tensor_release(w);
}

/* The same update synced by lj_sync (its buffer donated) and by lj_sync_tensors (not). */
static void donor_loop(void) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(4, 3), TU_ANY, 1);
  for (int step = 0; step < 2; step++) {
    lj_scope_begin();
    lj_assign(w, lj_add_scalar(w, 0.01));
    lj_scope_end();
    if (step == 0) lj_sync(d);
    else lj_sync_tensors(1, &w);
  }
  lj_tensor_release(w);
}

START_TEST(test_debug_donors) {
  char *text = debug_text(1, donor_loop);
  ck_assert_int_eq(count(text, "Compilation Analysis: Compilation Cause\n"), 2);
  ck_assert_int_eq(count(text, "First Difference: the same nodes and roots, other donated buffers"), 1);
  free(text);
  lj_shutdown();
}
END_TEST

START_TEST(test_debug_analysis) {
  lj_config cfg = lj_config_default();
  cfg.debug = 1;
  cfg.ir_debug = true;
  init_with(cfg);
  char *text = capture_stderr(changing_loop);
  /* three graphs at first (two reads, the step), the two reads again for the bigger batch */
  ck_assert_int_eq(count(text, "Compilation Analysis: Compilation Cause\n"), 5);
  ck_assert_int_eq(count(text, "Cache Miss: the first graph compiled on lj:0"), 1);
  ck_assert_int_eq(count(text, "value read (lj_tensor_to_host / lj_item)"), 4);
  ck_assert_int_eq(count(text, "  user sync (lj_sync)\n"), 1);
  char site[200];
  snprintf(site, sizeof site, "Call Site: changing_loop (%s:%d)", __FILE__, sync_line);
  ck_assert_int_eq(count(text, site), 1);
  /* the bigger batch: the closest graph differs first at the batch's data node */
  ck_assert_int_ge(count(text, "First Difference: node %0 differs: shape [16,4] instead of [8,4]"), 1);
  ck_assert_int_ge(count(text, "this graph: %0 = f32[16,4] data(), param=0, location=changing_loop ("), 1);
  ck_assert_ptr_null(strstr(text, "Execution Analysis"));
  ck_assert_ptr_null(strstr(text, "warning"));
  free(text);
  lj_shutdown();

  cfg.debug = 2;
  init_with(cfg);
  text = capture_stderr(changing_loop);
  ck_assert_int_eq(count(text, "Execution Analysis: Execution Cause\n"), 3 * 24);
  ck_assert_int_eq(count(text, "Kernels: "), 3 * 24);
  /* steps 11-20 hold the bigger batch's compiles; every window reads twice per step */
  ck_assert_int_eq(count(text, "warning: CompileTime too frequent: 2 compiles in 10 steps on lj:0"), 1);
  ck_assert_int_eq(count(text, "warning: TransferFromDeviceTime too frequent: 20 host reads in 10 steps"), 1);
  free(text);
  lj_shutdown();
}
END_TEST

/* Five steps of a matmul with a tanh and a sum, then lj_shutdown (which frees the executable). */
static void profiled_steps(void) {
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(30, 20), TU_ANY, 1);
  for (int step = 0; step < 5; step++) {
    lj_scope_begin();
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(80, 30), TU_ANY, 2 + (uint64_t)step);
    lj_item(lj_sum(lj_tanh(lj_matmul(x, w)), 0, NULL, false));
    lj_scope_end();
  }
  lj_tensor_release(w);
  lj_shutdown();
}

/* LJ_PROFILE_KERNELS: freed at lj_shutdown, the executable reports its five runs, each kernel
 * named as kernels.txt names it, with the GEMM routine the matmul kernel calls; without it,
 * nothing. */
START_TEST(test_profile_kernels) {
  lj_config cfg = lj_config_default();
  cfg.profile_kernels = true;
  init_with(cfg);
  char *text = capture_stderr(profiled_steps);
  ck_assert_int_eq(count(text, "Kernel Profile: graph "), 1);
  ck_assert_int_eq(count(text, " kernels, 5 runs, "), 1);
  ck_assert_int_eq(count(text, "  kernel   runs   mean ms    min ms   share  computes\n"), 1);
  ck_assert_int_ge(count(text, "matmul %"), 1);
  ck_assert_int_eq(count(text, ", lj_gemm_f32_rows\n"), 1);
  ck_assert_int_ge(count(text, "(sum)"), 1);
  free(text);
  init_with(lj_config_default());
  text = capture_stderr(profiled_steps);
  ck_assert_ptr_null(strstr(text, "Kernel Profile"));
  free(text);
}
END_TEST

/* Graphs that each miss the cache for another reason, compiled one after another; each is
 * synced from fresh tensors of x (f32[4]) and y (f64[4]). */
static void differences_loop(void) {
  lj_tensor *xt = tu_tensor(LJ_F32, LJ_SHAPE(4), TU_ANY, 1), *yt = tu_tensor(LJ_F64, LJ_SHAPE(4), TU_ANY, 2);
  lj_tensor *r[2];
  for (int g = 0; g < 10; g++) {
    lj_scope_begin();
    lj_tensor *e = lj_exp(xt);
    switch (g) {
    case 0: r[0] = lj_exp(e); break;                                /* [x, exp, exp] */
    case 1: r[0] = e; break;                                        /* ends early */
    case 2: r[0] = lj_exp(lj_exp(e)); break;                        /* goes on past */
    case 3: r[0] = lj_exp(lj_exp(yt)); break;                       /* another dtype */
    case 4: r[0] = lj_mul(e, xt); break;                            /* [x, exp, mul(%1, %0)] */
    case 5: r[0] = lj_mul(e, e); break;                             /* other operands */
    case 6: r[0] = lj_add_scalar(lj_slice(e, 0, 0, 2, 1), 1); break; /* [x, exp, slice, 1, ...] */
    case 7: r[0] = lj_add_scalar(lj_slice(e, 0, 2, 4, 1), 1); break; /* another slice */
    case 8: r[0] = lj_add_scalar(lj_slice(e, 0, 2, 4, 1), -1); break; /* another constant */
    default: r[0] = lj_exp(e), r[1] = e; break;                     /* case 0's nodes, two roots */
    }
    ck_assert_msg(lj_sync_tensors(g == 9 ? 2 : 1, r) == LJ_OK, "%s", lj_last_error());
    lj_scope_end();
  }
  lj_tensor_release(xt);
  lj_tensor_release(yt);
}

/* LJ_DEBUG's First Difference for each kind of difference between a graph and the closest
 * cached one. */
START_TEST(test_debug_first_difference) {
  char *text = debug_text(1, differences_loop);
  ck_assert_int_eq(count(text, "Compilation Analysis: Compilation Cause\n"), 10);
  static const char *const want[] = {
      "First Difference: this graph ends after 2 nodes; the cached graph has 3\n",
      "First Difference: this graph goes on past the cached graph's 3 nodes, at %3 = f32[4] exp(%2), ROOT=0\n",
      "First Difference: node %0 differs: dtype f64 instead of f32\n",
      "First Difference: node %2 differs: op mul instead of exp\n",
      "First Difference: node %2 differs: operands (%1, %1) instead of (%1, %0)\n",
      "First Difference: node %2 differs: attributes\n",
      "First Difference: node %3 differs: value -1 instead of 1 (0, 1 and -1 are baked into graphs)\n",
      "First Difference: the same nodes, other roots (2 outputs instead of 1)\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const char *got = strstr(text, "First Difference");
    ck_assert_msg(count(text, want[i]) == 1, "no '%s' (the first: '%.200s')", want[i], got ? got : "none");
  }
  free(text);
  lj_shutdown();
}
END_TEST

/* Three SGD steps of a linear model, each ended by the optimizer's barrier. */
static void optimizer_loop(void) {
  lj_device *d = lj_default_device();
  lj_tensor *w = tu_tensor(LJ_F32, LJ_SHAPE(3, 4), TU_ANY, 1);
  lj_tensor_set_requires_grad(w, true);
  lj_optim *opt = lj_optim_sgd(1, &w, (lj_sgd_options){.lr = 0.1});
  for (int step = 0; step < 3; step++) {
    lj_scope_begin();
    lj_optim_zero_grad(opt);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(2, 4), TU_ANY, 2);
    ck_assert_int_eq(lj_backward(lj_sum(lj_linear(x, w, NULL), 0, NULL, false)), LJ_OK);
    ck_assert_int_eq(lj_optimizer_step(opt, true), LJ_OK);
    lj_scope_end();
  }
  ck_assert_int_eq(lj_wait(d), LJ_OK);
  lj_optim_free(opt);
  lj_tensor_release(w);
}

/* The optimizer's barrier is named as the cause: of the one compile (LJ_DEBUG=1) and of every
 * run (LJ_DEBUG=2). */
START_TEST(test_debug_optimizer_cause) {
  char *text = debug_text(2, optimizer_loop);
  ck_assert_int_eq(count(text, "Compilation Analysis: Compilation Cause\nCompilation Analysis:   optimizer step\n"), 1);
  ck_assert_int_eq(count(text, "Execution Analysis: Execution Cause\nExecution Analysis:   optimizer step\n"), 3);
  free(text);
  lj_shutdown();
}
END_TEST

/* The GDB JIT interface, as gdb documents it: the JIT links every object it registers with
 * gdb into this list (LLVM defines the descriptor). */
struct jit_code_entry {
  struct jit_code_entry *next_entry, *prev_entry;
  const char *symfile_addr;
  uint64_t symfile_size;
};
struct jit_descriptor {
  uint32_t version, action_flag;
  struct jit_code_entry *relevant_entry, *first_entry;
};
extern struct jit_descriptor __jit_debug_descriptor;

static int registered_objects(void) {
  int n = 0;
  for (const struct jit_code_entry *e = __jit_debug_descriptor.first_entry; e; e = e->next_entry) n++;
  return n;
}

/* What gdb would read from the registered objects: does one of them define subprogram `fn`,
 * and is `line` of a file named `file` in its line table? */
typedef struct dwarf_find {
  const char *fn, *file;
  int line;
  bool found_fn, found_line;
} dwarf_find;

static void find_subprogram(Dwarf_Die *die, dwarf_find *f) {
  do {
    const char *name = dwarf_diename(die);
    if (dwarf_tag(die) == DW_TAG_subprogram && name && strcmp(name, f->fn) == 0) f->found_fn = true;
    Dwarf_Die child;
    if (dwarf_child(die, &child) == 0) find_subprogram(&child, f);
  } while (dwarf_siblingof(die, die) == 0);
}

/* Reads each registered object as gdb does: a relocatable ELF file whose debug sections
 * libdwfl relocates. */
static void search_registered(dwarf_find *f) {
  for (const struct jit_code_entry *e = __jit_debug_descriptor.first_entry; e; e = e->next_entry) {
    int fd = memfd_create("jit-object", 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, e->symfile_addr, e->symfile_size), (ssize_t)e->symfile_size);
    static char *debuginfo_path;
    static const Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf,
                                      .find_debuginfo = dwfl_standard_find_debuginfo,
                                      .section_address = dwfl_offline_section_address,
                                      .debuginfo_path = &debuginfo_path};
    Dwfl *dwfl = dwfl_begin(&cb);
    Dwfl_Module *mod = dwfl_report_offline(dwfl, "jit-object", "jit-object", fd);
    ck_assert_msg(mod, "libdwfl cannot read a registered object: %s", dwfl_errmsg(-1));
    dwfl_report_end(dwfl, NULL, NULL);
    Dwarf_Addr bias;
    for (Dwarf_Die *cu = NULL; (cu = dwfl_module_nextcu(mod, cu, &bias));) {
      Dwarf_Die die = *cu;
      find_subprogram(&die, f);
      Dwarf_Lines *lines;
      size_t nlines;
      if (dwarf_getsrclines(cu, &lines, &nlines) != 0) continue;
      for (size_t i = 0; i < nlines; i++) {
        Dwarf_Line *l = dwarf_onesrcline(lines, i);
        const char *src = dwarf_linesrc(l, NULL, NULL);
        const char *base = src ? strrchr(src, '/') : NULL;
        int lineno = 0;
        dwarf_lineno(l, &lineno);
        if (strcmp(base ? base + 1 : src ? src : "", f->file) == 0 && lineno == f->line) f->found_line = true;
      }
    }
    dwfl_end(dwfl);
  }
}

/* LJ_HLO_DEBUG: the kernels' objects are registered with gdb and their DWARF places the
 * kernel code at the user's line, inside the user's function (inlined into the kernel); the
 * values are those of the code without debug info. Off: nothing registered. */
START_TEST(test_hlo_debug) {
  float want[12];
  for (int on = 0; on < 2; on++) {
    int before = registered_objects();
    lj_config cfg = lj_config_default();
    cfg.hlo_debug = on;
    init_with(cfg);
    lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(3, 4), TU_ANY, 1);
    int line;
    lj_tensor *y = record_here(x, &line);
    char hash[33];
    ck_assert_int_eq(lj_graph_hash(1, &y, hash), LJ_OK);
    float got[12];
    ck_assert_int_eq(lj_tensor_to_host(y, on ? got : want, sizeof got), LJ_OK);
    if (on) {
      ck_assert_mem_eq(got, want, sizeof got);
      ck_assert_int_gt(registered_objects(), before);
      char kernel[64];
      snprintf(kernel, sizeof kernel, "lj_%.16s_k0_body", hash);
      dwarf_find user = {"record_here", "test_runtime_debug.c", line}, k = {kernel, "", 0};
      search_registered(&user);
      search_registered(&k);
      ck_assert_msg(user.found_fn && user.found_line, "no record_here at test_runtime_debug.c:%d", line);
      ck_assert_msg(k.found_fn, "no kernel %s", kernel);
    } else {
      ck_assert_int_eq(registered_objects(), before);
    }
    lj_tensor_release(x);
    lj_tensor_release(y);
    lj_shutdown();
  }
}
END_TEST

/* LJ_PERF: each kernel of a compiled graph has a line in perf's map file, named after the
 * graph hash, with a nonzero start and size, and a code-load record in a jitdump file. */
START_TEST(test_perf_map) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
  unlink(path);
  char *dir = temp_dir();
  setenv("JITDUMPDIR", dir, 1);
  lj_config cfg = lj_config_default();
  cfg.perf = true;
  init_with(cfg);
  lj_tensor *x = tu_tensor(LJ_F32, LJ_SHAPE(32, 16), TU_ANY, 1), *w = tu_tensor(LJ_F32, LJ_SHAPE(16, 8), TU_ANY, 2);
  lj_tensor *y = lj_softmax(lj_matmul(lj_tanh(x), w), 0);
  char hash[33];
  ck_assert_int_eq(lj_graph_hash(1, &y, hash), LJ_OK);
  int kernels = lj_graph_kernel_count(1, &y);
  ck_assert_int_ge(kernels, 2);
  ck_assert_int_eq(lj_sync_tensors(1, &y), LJ_OK);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f, "%s was not written", path);
  unsigned long long start, size;
  char name[128], want[64];
  int found = 0;
  while (fscanf(f, "%llx %llx %127s", &start, &size, name) == 3)
    for (int k = 0; k < kernels; k++) {
      snprintf(want, sizeof want, "lj_%.16s_k%d", hash, k);
      if (strcmp(name, want) == 0) {
        ck_assert(start != 0 && size > 0);
        found++;
      }
    }
  fclose(f);
  ck_assert_int_eq(found, kernels);
  unlink(path);
  /* the jitdump file: <JITDUMPDIR>/.debug/jit/<run>/jit-<pid>.dump, magic "JiTD" */
  char *run_dir = NULL;
  snprintf(path, sizeof path, "%s/.debug/jit", dir);
  DIR *dd = opendir(path);
  ck_assert_msg(dd, "no %s", path);
  for (struct dirent *de; (de = readdir(dd));)
    if (de->d_name[0] != '.') ck_assert_int_gt(asprintf(&run_dir, "%s/%s/jit-%ld.dump", path, de->d_name, (long)getpid()), 0);
  closedir(dd);
  ck_assert(run_dir);
  size_t size_dump;
  char *dump = tu_read_file(run_dir, &size_dump);
  ck_assert_uint_ge(size_dump, 4);
  ck_assert_int_eq(*(uint32_t *)dump, 0x4A695444);
  snprintf(want, sizeof want, "lj_%.16s_k0", hash);
  ck_assert(memmem(dump, size_dump, want, strlen(want) + 1));
  free(dump);
  free(run_dir);
  remove_dir(dir);
  lj_tensor_release(x);
  lj_tensor_release(w);
  lj_tensor_release(y);
  lj_shutdown();
}
END_TEST

START_TEST(test_config_errors) {
  lj_config cfg = lj_config_default();
  cfg.save_tensors_fmt = "hlo2";
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "save_tensors_fmt (LJ_SAVE_TENSORS_FMT)", "\"hlo2\"", "text, dot, llvm or asm",
                  NULL);
  cfg = lj_config_default();
  cfg.debug = 3;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "debug (LJ_DEBUG) is 3", NULL);
  char long_path[1100];
  memset(long_path, 'a', sizeof long_path - 1);
  long_path[sizeof long_path - 1] = 0;
  cfg = lj_config_default();
  cfg.dump_dir = long_path;
  ck_assert_int_eq(lj_init(&cfg), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "dump_dir (LJ_DUMP_DIR) is too long", NULL);
}
END_TEST

/* The seed documents' spellings are read when the LJ_ name is absent; the LJ_ name wins. */
START_TEST(test_env_aliases) {
  setenv("XLA_SAVE_TENSORS_FMT", "dot", 1);
  setenv("GET_TENSORS_OPBYOP", "1", 1);
  setenv("XLA_IR_DEBUG", "yes", 1);
  setenv("XLA_HLO_DEBUG", "1", 1);
  setenv("XLA_SYNC_WAIT", "true", 1);
  setenv("XLA_METRICS_FILE", "STDERR", 1);
  setenv("LJ_DEBUG", "2", 1);
  lj_config c = lj_config_default();
  ck_assert_str_eq(c.save_tensors_fmt, "dot");
  ck_assert(c.get_tensors_opbyop && c.ir_debug && c.hlo_debug && c.sync_wait && !c.sync_tensors_opbyop);
  ck_assert_str_eq(c.metrics_file, "STDERR");
  ck_assert_int_eq(c.debug, 2);
  setenv("LJ_SAVE_TENSORS_FMT", "asm", 1);
  setenv("LJ_IR_DEBUG", "off", 1);
  c = lj_config_default();
  ck_assert_str_eq(c.save_tensors_fmt, "asm");
  ck_assert(!c.ir_debug);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_debug");
  TCase *tc = tu_tcase("debug");
  tcase_add_test(tc, test_ir_debug_call_sites);
  tcase_add_test(tc, test_metrics_file);
  tcase_add_test(tc, test_save_tensors_file);
  tcase_add_test(tc, test_small_kernels_scalar);
  tcase_add_test(tc, test_small_nests_scalar);
  tcase_add_test(tc, test_dump_dir);
  tcase_add_test(tc, test_debug_analysis);
  tcase_add_test(tc, test_debug_first_difference);
  tcase_add_test(tc, test_debug_optimizer_cause);
  tcase_add_test(tc, test_debug_donors);
  tcase_add_test(tc, test_hlo_debug);
  tcase_add_test(tc, test_perf_map);
  tcase_add_test(tc, test_profile_kernels);
  tcase_add_test(tc, test_config_errors);
  tcase_add_test(tc, test_env_aliases);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
