/* test_runtime_persistent_cache.c — the persistent cache (LJ_CACHE_DIR): a second process
 * compiles nothing and computes the same bits, one whose graphs are new loads the GEMM
 * routines another built, processes share a directory, every kind of
 * unusable entry is ignored, counted and replaced, read-only mode, eviction by last use, the
 * default directory and the switch that turns it off; tools/lj-cache lists, sums up and
 * clears a directory. */
#include "test_util.h"
#include "runtime/runtime.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/lj_pcache_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void start(const char *cache_dir, bool readonly, int max_mb) {
  lj_config c = lj_config_default();
  c.cache_dir = cache_dir;
  c.cache_readonly = readonly;
  c.cache_max_mb = max_mb;
  ck_assert_int_eq(lj_init(&c), LJ_OK);
}

static int64_t counter(const char *name) { return lj_counter_value(name); }

/* Graph `variant` (its shape differs per variant): sum(exp(0.01 * arange)) as computed. */
static float compute(int variant) {
  lj_device *d = lj_default_device();
  lj_tensor *a = lj_arange(d, LJ_F32, 0, 64 + variant, 1);
  lj_tensor *s = lj_sum(lj_exp(lj_mul_scalar(a, 0.01)), 0, NULL, false);
  float v = 0;
  ck_assert_int_eq(lj_tensor_to_host(s, &v, sizeof v), LJ_OK);
  lj_tensor_release(s);
  lj_tensor_release(a);
  return v;
}

/* The entries with extension ext in dir: how many, and the path of the last one listed. */
static int entries_of(const char *ext, char *path, size_t cap) {
  char cmd[256], *out = NULL;
  snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\%s$'; ls %s | grep '\\%s$' | tail -1", dir, ext, dir, ext);
  tu_command(cmd, &out);
  int n = atoi(out);
  const char *nl = strchr(out, '\n');
  char name[64] = "";
  if (nl) sscanf(nl + 1, "%63s", name);
  if (path) snprintf(path, cap, "%s/%.40s", dir, name);
  free(out);
  return n;
}

/* Graphs' entries (*.ljc), GEMM routines' (*.ljo). */
static int entries(char *path, size_t cap) { return entries_of(".ljc", path, cap); }
static int routine_entries(char *path, size_t cap) { return entries_of(".ljo", path, cap); }

/* ---- processes ------------------------------------------------------------------------------- */

/* Runs the target program on dir (output into file when given); its output. It compiles the
 * GEMM routines it does not find in the cache, as on a CPU the library has none precompiled
 * for (test_runtime_precompiled). */
static char *run_target(const char *file) {
  static const char no_precompiled[] = "LJ_PRECOMPILED_ROUTINES=0";
  char cmd[512], *out = NULL;
  if (file)
    snprintf(cmd, sizeof cmd, "LJ_CACHE_DIR=%s %s %s > %s 2>&1", dir, no_precompiled, LJ_CACHE_TARGET, file);
  else
    snprintf(cmd, sizeof cmd, "LJ_CACHE_DIR=%s %s %s 2>&1", dir, no_precompiled, LJ_CACHE_TARGET);
  ck_assert_int_eq(tu_command(cmd, &out), 0);
  return out;
}

static long long field(const char *out, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "%s=", name);
  const char *p = strstr(out, key);
  ck_assert_msg(p, "no %s in:\n%s", name, out);
  return atoll(p + strlen(key));
}

/* The values part of the output (every line before the counters). */
static char *values(const char *out) {
  const char *end = strstr(out, "UncachedCompile=");
  ck_assert_ptr_nonnull(end);
  ck_assert_ptr_null(strstr(out, "error"));
  return strndup(out, (size_t)(end - out));
}

START_TEST(test_second_process_compiles_nothing) {
  make_dir();
  char *first = run_target(NULL), *second = run_target(NULL);
  long long compiled = field(first, "UncachedCompile");
  ck_assert_int_ge(compiled, 2); /* the training step and the read */
  ck_assert_int_eq(field(first, "PersistentCacheMiss"), compiled);
  ck_assert_int_eq(field(first, "PersistentCacheHit"), 0);
  ck_assert_int_eq(entries(NULL, 0), compiled);
  ck_assert_int_ge(field(first, "CompiledGemmRoutines"), 1);
  ck_assert_int_eq(field(second, "UncachedCompile"), 0);
  ck_assert_int_eq(field(second, "CompiledGemmRoutines"), 0);
  ck_assert_int_eq(field(second, "PersistentCacheHit"), compiled);
  ck_assert_int_eq(field(second, "PersistentCacheMiss"), 0);
  ck_assert_int_eq(field(second, "PersistentCacheDeserializeFailure"), 0);
  ck_assert_int_ge(field(first, "TwinKernels"), 1); /* loaded, they find their twins' code */
  /* the loaded programs update the parameters and Adam's state in place as compiled ones do */
  ck_assert_int_ge(field(first, "DonatedBuffers"), 4);
  ck_assert_int_eq(field(second, "DonatedBuffers"), field(first, "DonatedBuffers"));
  char *a = values(first), *b = values(second);
  ck_assert_str_eq(a, b); /* bit for bit */
  free(a);
  free(b);
  free(first);
  free(second);
  tu_remove_dir(dir);
}
END_TEST

START_TEST(test_two_processes_fill_one_directory) {
  make_dir();
  char cmd[1024], *out = NULL;
  snprintf(cmd, sizeof cmd, "LJ_CACHE_DIR=%s %s > %s/a.out 2>&1 & LJ_CACHE_DIR=%s %s > %s/b.out 2>&1 & wait",
           dir, LJ_CACHE_TARGET, dir, dir, LJ_CACHE_TARGET, dir);
  ck_assert_int_eq(tu_command(cmd, &out), 0);
  free(out);
  char path[128];
  snprintf(path, sizeof path, "%s/a.out", dir);
  char *a = tu_read_file(path, NULL);
  snprintf(path, sizeof path, "%s/b.out", dir);
  char *b = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(field(a, "PersistentCacheDeserializeFailure"), 0);
  ck_assert_int_eq(field(b, "PersistentCacheDeserializeFailure"), 0);
  /* each process compiled what it did not find; together they wrote every graph once */
  long long graphs = field(a, "UncachedCompile") + field(a, "PersistentCacheHit");
  ck_assert_int_eq(field(b, "UncachedCompile") + field(b, "PersistentCacheHit"), graphs);
  ck_assert_int_eq(entries(NULL, 0), graphs);
  char *third = run_target(NULL);
  ck_assert_int_eq(field(third, "UncachedCompile"), 0);
  ck_assert_int_eq(field(third, "PersistentCacheHit"), graphs);
  char *va = values(a), *vb = values(b), *vc = values(third);
  ck_assert_str_eq(va, vb);
  ck_assert_str_eq(va, vc);
  snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", dir);
  tu_command(cmd, &out);
  ck_assert_int_eq(atoi(out), 0); /* no temporary file left behind */
  free(out);
  free(va);
  free(vb);
  free(vc);
  free(a);
  free(b);
  free(third);
  tu_remove_dir(dir);
}
END_TEST

/* ---- unusable entries ------------------------------------------------------------------------- */

static unsigned char *load(const char *path, size_t *n) { return (unsigned char *)tu_read_file(path, n); }

static void save(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* Offset of header string i (0 library, 1 LLVM, 2 CPU, ...): its bytes, after its length. */
static size_t string_at(const unsigned char *p, int i) {
  size_t off = 8 + 4 + 16 + 8 + 16;
  for (int k = 0; k < i; k++) {
    uint32_t len;
    memcpy(&len, p + off, 4);
    off += 4 + len;
  }
  return off + 4;
}

typedef struct damage {
  const char *what;
  void (*apply)(const char *path, const char *other);
} damage;

static void truncate_half(const char *path, const char *other) {
  size_t n;
  unsigned char *p = load(path, &n);
  save(path, p, n / 2);
  free(p);
}

static void empty_file(const char *path, const char *other) { save(path, (const unsigned char *)"", 0); }

static void flip_payload(const char *path, const char *other) {
  size_t n;
  unsigned char *p = load(path, &n);
  p[n - 100] ^= 0x10; /* inside the last object file */
  save(path, p, n);
  free(p);
}

static void bad_magic(const char *path, const char *other) {
  size_t n;
  unsigned char *p = load(path, &n);
  p[0] = 'X';
  save(path, p, n);
  free(p);
}

static void other_format(const char *path, const char *other) {
  size_t n;
  unsigned char *p = load(path, &n);
  uint32_t v = 99;
  memcpy(p + 8, &v, 4);
  save(path, p, n);
  free(p);
}

static void change_string(const char *path, int i) {
  size_t n;
  unsigned char *p = load(path, &n);
  p[string_at(p, i)] ^= 1;
  save(path, p, n);
  free(p);
}

static void other_build(const char *path, const char *other) { change_string(path, 0); }
static void other_llvm(const char *path, const char *other) { change_string(path, 1); }
static void other_cpu(const char *path, const char *other) { change_string(path, 2); }
static void other_features(const char *path, const char *other) { change_string(path, 3); }

/* Another graph's entry under this graph's name. */
static void other_key(const char *path, const char *other) {
  size_t n;
  unsigned char *p = load(other, &n);
  save(path, p, n);
  free(p);
}

static const damage damages[] = {
    {"truncated", truncate_half},       {"empty", empty_file},
    {"damaged payload", flip_payload},  {"bad magic", bad_magic},
    {"other format", other_format},     {"other library build", other_build},
    {"other LLVM", other_llvm},         {"other CPU", other_cpu},
    {"other CPU features", other_features}, {"another graph's key", other_key},
};

START_TEST(test_unusable_entry_is_ignored_and_replaced) {
  const damage *dm = &damages[_i];
  make_dir();
  start(dir, false, 0);
  float want = compute(0);
  char entry[128], other[160];
  ck_assert_int_eq(entries(entry, sizeof entry), 1);
  compute(1);
  lj_shutdown();
  ck_assert_int_eq(entries(NULL, 0), 2);
  /* the other graph's entry, kept aside */
  snprintf(other, sizeof other, "%s/other", dir);
  char cmd[512], *out = NULL;
  snprintf(cmd, sizeof cmd, "cd %s && for f in *.ljc; do [ %s = \"%s/$f\" ] || mv \"$f\" other; done", dir, entry, dir);
  tu_command(cmd, &out);
  free(out);
  dm->apply(entry, other);

  start(dir, false, 0);
  int64_t fail = counter("PersistentCacheDeserializeFailure"), hit = counter("PersistentCacheHit"),
          compiles = counter("UncachedCompile");
  float got = compute(0);
  ck_assert_msg(got == want, "%s: %.9g, want %.9g", dm->what, got, want);
  ck_assert_msg(counter("PersistentCacheDeserializeFailure") == fail + 1, "%s: not counted as a failure", dm->what);
  ck_assert_int_eq(counter("PersistentCacheHit"), hit);
  ck_assert_int_eq(counter("UncachedCompile"), compiles + 1);
  lj_shutdown();

  /* the compile replaced the entry: the next process loads it */
  start(dir, false, 0);
  hit = counter("PersistentCacheHit");
  compiles = counter("UncachedCompile");
  ck_assert(compute(0) == want);
  ck_assert_msg(counter("PersistentCacheHit") == hit + 1, "%s: the entry was not replaced", dm->what);
  ck_assert_int_eq(counter("UncachedCompile"), compiles);
  tu_remove_dir(dir);
}
END_TEST

/* ---- read-only, last use, eviction -------------------------------------------------------------- */

static void set_age(const char *path, int seconds) {
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds;
  t[1] = t[0];
  ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

static time_t age(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return time(NULL) - st.st_mtime;
}

START_TEST(test_readonly_reads_but_never_writes) {
  make_dir();
  start(dir, true, 0);
  int64_t compiles = counter("UncachedCompile");
  float want = compute(0);
  ck_assert_int_eq(counter("UncachedCompile"), compiles + 1);
  ck_assert_int_eq(entries(NULL, 0), 0);
  lj_shutdown();
  start(dir, false, 0);
  compute(0);
  lj_shutdown();
  char entry[128];
  ck_assert_int_eq(entries(entry, sizeof entry), 1);
  set_age(entry, 1000);
  start(dir, true, 0);
  int64_t hit = counter("PersistentCacheHit");
  compiles = counter("UncachedCompile");
  ck_assert(compute(0) == want);
  ck_assert_int_eq(counter("PersistentCacheHit"), hit + 1);
  ck_assert_int_eq(counter("UncachedCompile"), compiles);
  ck_assert_int_ge(age(entry), 999); /* not even its last use is written */
  tu_remove_dir(dir);
}
END_TEST

/* Chains of `steps` means, each of the chain scaled less its mean so far: a kernel a mean, over
 * 64 values (compiled without the vectorizer) and over 8192 (with it). */
static void mean_chains(int steps, lj_tensor **out) {
  lj_device *d = lj_default_device();
  for (int c = 0; c < 2; c++) {
    lj_tensor *y = lj_arange(d, LJ_F32, 0, c ? 8192 : 64, 1);
    for (int i = 0; i < steps; i++)
      y = lj_sub(lj_mul_scalar(y, 0.75), lj_mean(y, 1, (const int[]){0}, true));
    out[c] = y;
  }
}

/* A graph of many kernels is compiled in groups of consecutive kernels (session.c), each
 * group's kernels that go through the same pipeline emitted into one object file: fewer
 * objects than kernels, the entry stores a group's object at its first kernel and none at the
 * others, and a later runtime that loads the entry computes the same bits. */
START_TEST(test_grouped_kernels_load) {
  make_dir();
  start(dir, false, 0);
  int cpus = ljr_online_cpus(); /* the runtime's compile threads (runtime.c) */
  int steps = 16 * (cpus < 16 ? cpus : 16);  /* groups of 2 kernels or more (group_size) */
  lj_scope_begin();
  lj_tensor *first[2], *again[2];
  mean_chains(steps, first);
  int kernels = lj_graph_kernel_count(2, first);
  ck_assert_int_ge(kernels, 2 * steps);
  int64_t compiled = counter("CompiledKernels"), objects = counter("KernelObjects");
  tu_check_interp_tol(2, first, 1e-4, 1e-3);
  ck_assert_int_eq(counter("CompiledKernels") - compiled, kernels);
  int64_t made = counter("KernelObjects") - objects;
  ck_assert_int_lt(made, kernels);
  ck_assert_int_ge(made, kernels / 8); /* GROUP_MAX */
  float a[64], b[64]; /* the first chain's values, from each runtime */
  ck_assert_int_eq(lj_tensor_to_host(first[0], a, sizeof a), LJ_OK);
  lj_scope_end();
  lj_shutdown();
  start(dir, false, 0);
  int64_t hits = counter("PersistentCacheHit"), compiles = counter("UncachedCompile");
  lj_scope_begin();
  mean_chains(steps, again);
  ck_assert_int_eq(lj_sync_tensors(2, again), LJ_OK); /* the graph tu_check_interp_tol synced */
  ck_assert_int_eq(lj_tensor_to_host(again[0], b, sizeof b), LJ_OK);
  lj_scope_end();
  ck_assert_int_ge(counter("PersistentCacheHit"), hits + 1);
  ck_assert_int_eq(counter("UncachedCompile"), compiles);
  ck_assert_mem_eq(a, b, sizeof a); /* bit for bit */
  tu_remove_dir(dir);
}
END_TEST

/* A stand-in entry of 600 KiB used `seconds` ago. */
static void filler(const char *name, int seconds) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s.ljc", dir, name);
  unsigned char *p = calloc(600 << 10, 1);
  save(path, p, 600 << 10);
  free(p);
  set_age(path, seconds);
}

static bool exists(const char *name) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s.ljc", dir, name);
  return access(path, F_OK) == 0;
}

START_TEST(test_eviction_goes_by_last_use) {
  make_dir();
  start(dir, false, 0);
  compute(0);
  lj_shutdown();
  char entry[128];
  ck_assert_int_eq(entries(entry, sizeof entry), 1);
  const char *f1 = "11111111111111111111111111111111", *f2 = "22222222222222222222222222222222",
             *f3 = "33333333333333333333333333333333";
  filler(f1, 300);
  set_age(entry, 250);
  filler(f2, 200);
  filler(f3, 100);
  /* a hit makes the entry the most recently used */
  start(dir, false, 1);
  int64_t hit = counter("PersistentCacheHit");
  compute(0);
  ck_assert_int_eq(counter("PersistentCacheHit"), hit + 1);
  ck_assert_int_le(age(entry), 5);
  /* a write past 1 MiB evicts the entries used longest ago: f1, then f2 (not the entry, which
     was older than f2 until it was used) */
  compute(1);
  lj_shutdown();
  ck_assert(!exists(f1));
  ck_assert(!exists(f2));
  ck_assert(exists(f3));
  ck_assert_int_eq(access(entry, F_OK), 0);
  ck_assert_int_eq(entries(NULL, 0), 3);
  tu_remove_dir(dir);
}
END_TEST

/* ---- where the cache is ------------------------------------------------------------------------- */

START_TEST(test_default_directory) {
  make_dir();
  char xdg[128], home[128], path[192];
  snprintf(xdg, sizeof xdg, "%s/xdg", dir);
  snprintf(home, sizeof home, "%s/home", dir);
  unsetenv("LJ_CACHE_DIR");
  setenv("XDG_CACHE_HOME", xdg, 1);
  setenv("HOME", home, 1);
  ck_assert_int_eq(lj_init(NULL), LJ_OK);
  compute(0);
  lj_shutdown();
  snprintf(path, sizeof path, "%s/lazyjit", xdg);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  unsetenv("XDG_CACHE_HOME");
  ck_assert_int_eq(lj_init(NULL), LJ_OK);
  compute(0);
  lj_shutdown();
  snprintf(path, sizeof path, "%s/.cache/lazyjit", home);
  ck_assert_int_eq(stat(path, &st), 0);
  /* LJ_CACHE_DIR="" turns it off */
  setenv("LJ_CACHE_DIR", "", 1);
  tu_remove_dir(home);
  ck_assert_int_eq(lj_init(NULL), LJ_OK);
  int64_t miss = counter("PersistentCacheMiss");
  compute(0);
  ck_assert_int_eq(counter("PersistentCacheMiss"), miss);
  lj_shutdown();
  ck_assert_int_ne(stat(home, &st), 0);
  tu_remove_dir(dir);
}
END_TEST

START_TEST(test_bad_configuration) {
  lj_config c = lj_config_default();
  c.cache_max_mb = -1;
  ck_assert_int_eq(lj_init(&c), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "cache_max_mb", "LJ_CACHE_MAX_MB", "-1", NULL);
  char long_dir[1100];
  memset(long_dir, 'a', sizeof long_dir - 1);
  long_dir[sizeof long_dir - 1] = 0;
  c = lj_config_default();
  c.cache_dir = long_dir;
  ck_assert_int_eq(lj_init(&c), LJ_ERR_ARG);
  tu_expect_error(LJ_ERR_ARG, "cache_dir", "too long", NULL);
}
END_TEST

START_TEST(test_unwritable_directory_is_no_cache) {
  start("/proc/lazyjit-cannot-be-here", false, 0);
  int64_t compiles = counter("UncachedCompile");
  float first = compute(0);
  ck_assert(compute(0) == first);
  ck_assert_int_eq(counter("UncachedCompile"), compiles + 1);
  ck_assert_int_eq(lj_last_status(), LJ_OK);
}
END_TEST

/* A process whose graphs are not in the cache compiles them, but loads the GEMM routines
 * another process built; a damaged routine entry is compiled again and replaced. */
START_TEST(test_new_graphs_load_routines) {
  make_dir();
  char *first = run_target(NULL);
  long long routines = field(first, "CompiledGemmRoutines");
  ck_assert_int_ge(routines, 1);
  ck_assert_int_eq(routine_entries(NULL, 0), routines);
  char cmd[256], *out = NULL;
  snprintf(cmd, sizeof cmd, "rm %s/*.ljc", dir);
  ck_assert_int_eq(tu_command(cmd, &out), 0);
  free(out);
  char *second = run_target(NULL);
  ck_assert_int_eq(field(second, "UncachedCompile"), field(first, "UncachedCompile"));
  ck_assert_int_eq(field(second, "CompiledGemmRoutines"), 0);
  char routine[128];
  routine_entries(routine, sizeof routine);
  flip_payload(routine, NULL);
  snprintf(cmd, sizeof cmd, "rm %s/*.ljc", dir);
  ck_assert_int_eq(tu_command(cmd, &out), 0);
  free(out);
  char *third = run_target(NULL);
  ck_assert_int_eq(field(third, "CompiledGemmRoutines"), 1);
  char *fourth = run_target(NULL); /* the entry was replaced, and the graphs are back */
  ck_assert_int_eq(field(fourth, "CompiledGemmRoutines"), 0);
  ck_assert_int_eq(field(fourth, "UncachedCompile"), 0);
  char *v[4] = {values(first), values(second), values(third), values(fourth)};
  for (int i = 1; i < 4; i++) ck_assert_str_eq(v[0], v[i]);
  for (int i = 0; i < 4; i++) free(v[i]);
  free(first);
  free(second);
  free(third);
  free(fourth);
  tu_remove_dir(dir);
}
END_TEST

/* ---- tools/lj-cache ------------------------------------------------------------------------------ */

static char *lj_cache(const char *args) {
  char cmd[512], *out = NULL;
  snprintf(cmd, sizeof cmd, "%s --dir %s %s 2>&1", LJ_CACHE_TOOL, dir, args);
  ck_assert_int_eq(tu_command(cmd, &out), 0);
  return out;
}

static int count_of(const char *text, const char *word) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
  return n;
}

START_TEST(test_lj_cache_tool) {
  make_dir();
  free(run_target(NULL));
  char entry[128];
  int n = entries(entry, sizeof entry), r = routine_entries(NULL, 0);
  ck_assert_int_ge(r, 1);
  char *out = lj_cache("list");
  ck_assert_int_eq(count_of(out, " ok\n"), n);
  ck_assert_int_eq(count_of(out, " ok (GEMM routine lj_gemm_f32_"), r);
  free(out);
  flip_payload(entry, NULL);
  out = lj_cache("list");
  ck_assert_int_eq(count_of(out, " ok\n"), n - 1);
  ck_assert_int_eq(count_of(out, "damaged"), 1);
  free(out);
  out = lj_cache("stats");
  char want[64];
  snprintf(want, sizeof want, "entries          %d ", n + r);
  ck_assert_msg(strstr(out, want), "%s", out);
  snprintf(want, sizeof want, "usable here      %d ", n + r - 1);
  ck_assert_msg(strstr(out, want), "%s", out);
  free(out);
  out = lj_cache("clear");
  ck_assert_msg(strstr(out, "removed"), "%s", out);
  free(out);
  ck_assert_int_eq(entries(NULL, 0), 0);
  ck_assert_int_eq(routine_entries(NULL, 0), 0);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "%s --dir %s frobnicate 2>&1", LJ_CACHE_TOOL, dir);
  ck_assert_int_eq(tu_command(cmd, &out), 2);
  ck_assert_msg(strstr(out, "unknown command frobnicate"), "%s", out);
  free(out);
  tu_remove_dir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_persistent_cache");
  TCase *tc = tu_tcase("processes");
  tcase_add_test(tc, test_second_process_compiles_nothing);
  tcase_add_test(tc, test_two_processes_fill_one_directory);
  tcase_add_test(tc, test_new_graphs_load_routines);
  suite_add_tcase(s, tc);
  tc = tu_tcase("entries");
  tcase_add_loop_test(tc, test_unusable_entry_is_ignored_and_replaced, 0, (int)(sizeof damages / sizeof *damages));
  tcase_add_test(tc, test_readonly_reads_but_never_writes);
  tcase_add_test(tc, test_eviction_goes_by_last_use);
  tcase_add_test(tc, test_grouped_kernels_load);
  suite_add_tcase(s, tc);
  tc = tu_tcase("config");
  tcase_add_test(tc, test_default_directory);
  tcase_add_test(tc, test_bad_configuration);
  tcase_add_test(tc, test_unwritable_directory_is_no_cache);
  suite_add_tcase(s, tc);
  tc = tu_tcase("lj-cache");
  tcase_add_test(tc, test_lj_cache_tool);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
