/* lj_cache.c — lj-cache: looks after the persistent cache (LJ_CACHE_DIR): lists its entries
 * with what each holds and whether this machine and library can use it, sums the directory
 * up, and clears it. See `lj-cache --help` and docs/caching.md. */
#include "runtime/disk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: lj-cache [--dir DIR] COMMAND\n"
    "Looks after lazyjit's persistent cache of compiled graphs.\n"
    "  list    one line per entry: key, size, last use, graph nodes, kernels, and \"ok\" or\n"
    "          why this process could not use it (damaged, another CPU or build); a GEMM\n"
    "          routine's entry names the routine\n"
    "  stats   the directory, its entries, their size against LJ_CACHE_MAX_MB, how many this\n"
    "          process could use, oldest and newest use\n"
    "  clear   deletes every entry (and temporary files writers left)\n"
    "  --dir DIR  the cache directory (default: LJ_CACHE_DIR, else $XDG_CACHE_HOME/lazyjit,\n"
    "             else $HOME/.cache/lazyjit)\n";

static _Noreturn void die(const char *fmt, const char *arg) {
  fputs("lj-cache: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\n", stderr);
  exit(2);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The directory's entry (or temporary file) names, sorted; none when it does not exist (nothing
 * was written yet). Exits when it cannot be read. */
static char **names(const char *dir, bool temps, int *n) {
  DIR *dp = opendir(dir);
  *n = 0;
  if (!dp && errno == ENOENT) return ljb_xalloc(sizeof(char *));
  if (!dp) die("cannot read %s", dir);
  char **v = NULL;
  int cap = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    if (!(temps ? ljr_disk_is_temp(de->d_name) : ljr_disk_is_entry(de->d_name))) continue;
    if (*n == cap) v = ljb_xrealloc(v, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *v);
    v[(*n)++] = strdup(de->d_name);
  }
  closedir(dp);
  if (*n > 1) qsort(v, (size_t)*n, sizeof *v, by_name);
  return v ? v : ljb_xalloc(sizeof(char *));
}

static void free_names(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void when(int64_t t, char *buf, size_t cap) {
  time_t tt = (time_t)t;
  struct tm tm;
  strftime(buf, cap, "%Y-%m-%d %H:%M:%S", localtime_r(&tt, &tm));
}

static int list(ljr_runtime *rt, const char *dir) {
  int n;
  char **v = names(dir, false, &n);
  printf("%-32s %10s  %-19s %6s %7s  %s\n", "key", "bytes", "last use", "nodes", "kernels", "status");
  for (int i = 0; i < n; i++) {
    char path[1200], t[32];
    snprintf(path, sizeof path, "%s/%s", dir, v[i]);
    ljr_disk_entry e;
    if (!ljr_disk_inspect(rt, path, &e)) continue; /* deleted meanwhile */
    when(e.last_use, t, sizeof t);
    if (e.routine[0])
      printf("%.32s %10" PRId64 "  %s %6s %7s  %s (GEMM routine %s)\n", v[i], e.bytes, t, "-", "-",
             e.problem[0] ? e.problem : "ok", e.routine);
    else
      printf("%.32s %10" PRId64 "  %s %6d %7d  %s\n", v[i], e.bytes, t, e.nodes, e.kernels,
             e.problem[0] ? e.problem : "ok");
  }
  free_names(v, n);
  return 0;
}

static int stats(ljr_runtime *rt, const char *dir) {
  int n, ntemp;
  char **v = names(dir, false, &n);
  char **temps = names(dir, true, &ntemp);
  int64_t bytes = 0, usable = 0, oldest = INT64_MAX, newest = 0;
  int nusable = 0;
  for (int i = 0; i < n; i++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, v[i]);
    ljr_disk_entry e;
    if (!ljr_disk_inspect(rt, path, &e)) continue;
    bytes += e.bytes;
    if (!e.problem[0]) {
      nusable++;
      usable += e.bytes;
    }
    if (e.last_use < oldest) oldest = e.last_use;
    if (e.last_use > newest) newest = e.last_use;
  }
  int limit = rt->cfg.pub.cache_max_mb;
  printf("directory        %s%s\n", dir, rt->cfg.pub.cache_readonly ? " (read-only)" : "");
  printf("entries          %d (%.1f MiB)\n", n, (double)bytes / (1 << 20));
  if (limit)
    printf("limit            %d MiB (LJ_CACHE_MAX_MB), %.0f%% used\n", limit, 100.0 * (double)bytes / ((double)limit * (1 << 20)));
  else
    printf("limit            none (LJ_CACHE_MAX_MB=0)\n");
  printf("usable here      %d (%.1f MiB); the others are damaged or for another CPU or build\n", nusable,
         (double)usable / (1 << 20));
  if (n) {
    char a[32], b[32];
    when(oldest, a, sizeof a);
    when(newest, b, sizeof b);
    printf("last use         oldest %s, newest %s\n", a, b);
  }
  printf("temporary files  %d\n", ntemp);
  free_names(v, n);
  free_names(temps, ntemp);
  return 0;
}

static int clear(const char *dir) {
  int removed = 0, failed = 0;
  for (int pass = 0; pass < 2; pass++) {
    int n;
    char **v = names(dir, pass == 1, &n);
    for (int i = 0; i < n; i++) {
      char path[1200];
      snprintf(path, sizeof path, "%s/%s", dir, v[i]);
      if (unlink(path) == 0 || errno == ENOENT)
        removed++;
      else
        failed++;
    }
    free_names(v, n);
  }
  printf("removed %d files from %s\n", removed, dir);
  if (failed) fprintf(stderr, "lj-cache: %d files could not be removed\n", failed);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *cmd = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    }
    if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (!cmd && argv[i][0] != '-')
      cmd = argv[i];
    else
      die("unexpected argument %s (see --help)", argv[i]);
  }
  if (!cmd) die("%s", "a command is needed: list, stats or clear (see --help)");
  lj_config cfg = lj_config_default();
  if (dir) cfg.cache_dir = dir;
  if (lj_init(&cfg) != LJ_OK) die("%s", lj_last_error());
  ljr_runtime *rt = ljr_get();
  const char *d = rt->cfg.pub.cache_dir;
  if (!d) die("%s", "the persistent cache is off (LJ_CACHE_DIR is empty); give --dir");
  int rc;
  if (strcmp(cmd, "list") == 0)
    rc = list(rt, d);
  else if (strcmp(cmd, "stats") == 0)
    rc = stats(rt, d);
  else if (strcmp(cmd, "clear") == 0)
    rc = clear(d);
  else
    die("unknown command %s (see --help)", cmd);
  lj_shutdown();
  return rc;
}
