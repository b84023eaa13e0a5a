/* disk_cache.c — the persistent cache: entries written, checked, loaded and evicted (the
 * format and its rules are in disk_cache.h). */
#include "runtime/disk_cache.h"
#include "codegen_llvm/codegen.h"
#include "lj_build_id.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = "LJCACHE";
#define LIBRARY "lazyjit " LJ_VERSION_STRING "+" LJ_BUILD_ID

/* ---- names and files ------------------------------------------------------------------------ */

/* The key a file name starts with (32 lowercase hex digits, as ljb_hash_hex writes it). */
static bool key_of_name(const char *name, ljb_hash *key) {
  uint64_t w[2] = {0, 0};
  for (int i = 0; i < 32; i++) {
    char c = name[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    w[i / 16] = w[i / 16] << 4 | (uint64_t)d;
  }
  *key = (ljb_hash){w[1], w[0]};
  return true;
}

/* The extensions of a graph's entry and of a GEMM routine's. */
static const char graph_ext[] = ".ljc", routine_ext[] = ".ljo";

bool ljr_disk_is_entry(const char *name) {
  ljb_hash k;
  return key_of_name(name, &k) && (strcmp(name + 32, graph_ext) == 0 || strcmp(name + 32, routine_ext) == 0);
}

bool ljr_disk_is_temp(const char *name) {
  ljb_hash k;
  return key_of_name(name, &k) && (strncmp(name + 32, graph_ext, 4) == 0 || strncmp(name + 32, routine_ext, 4) == 0) &&
         strncmp(name + 36, ".tmp.", 5) == 0;
}

static bool is_routine_entry(const char *name) {
  size_t n = strlen(name);
  return n >= 4 && strcmp(name + n - 4, routine_ext) == 0;
}

static void entry_path(const ljr_runtime *rt, ljb_hash key, const char *ext, char *path, size_t cap) {
  char hex[33];
  ljb_hash_hex(key, hex);
  snprintf(path, cap, "%s/%s%s", rt->cfg.pub.cache_dir, hex, ext);
}

/* The key of GEMM routine `name`'s entry: the routine and all the code depends on. */
static ljb_hash routine_key(const ljr_runtime *rt, const char *name) {
  ljb_hasher h;
  ljb_hasher_init(&h, LJR_DISK_FORMAT);
  ljb_hash_str(&h, "GEMM routine");
  ljb_hash_str(&h, name);
  ljb_hash_str(&h, LIBRARY);
  ljb_hash_str(&h, ljc_session_target(rt->cg));
  return ljb_hasher_final(&h);
}

/* The whole file (malloc'd, size in *n, its status in *st), or NULL with errno set. */
static unsigned char *read_file(const char *path, size_t *n, struct stat *st) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  unsigned char *buf = NULL;
  if (fstat(fd, st) == 0) {
    buf = ljb_xalloc((size_t)st->st_size + 1);
    size_t got = 0;
    ssize_t r = 1;
    while (got < (size_t)st->st_size && (r = read(fd, buf + got, (size_t)st->st_size - got)) > 0) got += (size_t)r;
    *n = got;
    if (r < 0) {
      free(buf);
      buf = NULL;
    }
  }
  int saved = errno;
  close(fd);
  errno = saved;
  return buf;
}

/* ---- header ---------------------------------------------------------------------------------- */

/* The five strings of a header, in order (disk_cache.h). */
typedef struct strings {
  const char *s[5];
} strings;

static strings host_strings(const ljr_runtime *rt) {
  return (strings){{LIBRARY, ljc_session_llvm(rt->cg), ljc_session_cpu(rt->cg),
                    ljc_session_features(rt->cg), ljc_session_target(rt->cg)}};
}

static const char *const string_names[5] = {"library build", "LLVM version", "CPU", "CPU features",
                                            "code generation target"};

static ljb_hash checksum(const void *p, size_t n) {
  ljb_hasher h;
  ljb_hasher_init(&h, LJR_DISK_FORMAT);
  ljb_hash_bytes(&h, p, n);
  return ljb_hasher_final(&h);
}

static void put_string(ljb_str *b, const char *s) {
  uint32_t n = (uint32_t)strlen(s);
  ljb_str_put(b, &n, sizeof n);
  ljb_str_put(b, s, n);
}

static void write_header(ljb_str *b, const ljr_runtime *rt, ljb_hash key, const ljb_str *payload) {
  uint32_t format = LJR_DISK_FORMAT;
  uint64_t size = payload->n;
  ljb_hash sum = checksum(payload->s, payload->n);
  ljb_str_put(b, magic, sizeof magic);
  ljb_str_put(b, &format, sizeof format);
  ljb_str_put(b, &key, sizeof key);
  ljb_str_put(b, &size, sizeof size);
  ljb_str_put(b, &sum, sizeof sum);
  strings s = host_strings(rt);
  for (int i = 0; i < 5; i++) put_string(b, s.s[i]);
}

static bool get_string(ljb_reader *r, char *buf, size_t cap) {
  uint32_t n;
  ljb_read(r, &n, sizeof n);
  if (r->bad || n >= cap || (size_t)(r->end - r->p) < n) {
    r->bad = true;
    buf[0] = 0;
    return false;
  }
  ljb_read(r, buf, n);
  buf[n] = 0;
  return true;
}

/* Reads the header of the entry in buf[0..n) into *e and points *payload at the payload;
 * the problem ("" when none) goes to e->problem. */
static void read_header(const unsigned char *buf, size_t n, ljr_disk_entry *e, ljb_reader *payload) {
  ljb_reader r = {buf, buf + n, false};
  char m[sizeof magic];
  uint64_t size = 0;
  ljb_hash sum = {0};
  ljb_read(&r, m, sizeof m);
  ljb_read(&r, &e->format, sizeof e->format);
  if (r.bad || memcmp(m, magic, sizeof magic) != 0) {
    snprintf(e->problem, sizeof e->problem, "not a lazyjit cache entry (bad magic)");
    return;
  }
  if (e->format != LJR_DISK_FORMAT) {
    snprintf(e->problem, sizeof e->problem, "format %u, this library reads format %d", e->format, LJR_DISK_FORMAT);
    return;
  }
  ljb_read(&r, &e->key, sizeof e->key);
  ljb_read(&r, &size, sizeof size);
  ljb_read(&r, &sum, sizeof sum);
  char *fields[5] = {e->library, e->llvm, e->cpu, e->features, e->target};
  size_t caps[5] = {sizeof e->library, sizeof e->llvm, sizeof e->cpu, sizeof e->features, sizeof e->target};
  for (int i = 0; i < 5; i++) get_string(&r, fields[i], caps[i]);
  if (r.bad) {
    snprintf(e->problem, sizeof e->problem, "truncated header");
    return;
  }
  if ((uint64_t)(r.end - r.p) != size) {
    snprintf(e->problem, sizeof e->problem, "truncated or padded: payload is %zu bytes, the header says %llu",
             (size_t)(r.end - r.p), (unsigned long long)size);
    return;
  }
  if (!ljb_hash_eq(checksum(r.p, size), sum)) {
    snprintf(e->problem, sizeof e->problem, "damaged: the payload's checksum does not match");
    return;
  }
  *payload = r;
}

/* Whether this process can use entry e, found under key: the problem into e->problem. */
static void check_host(const ljr_runtime *rt, ljb_hash key, ljr_disk_entry *e) {
  if (e->problem[0]) return;
  if (!ljb_hash_eq(e->key, key)) {
    snprintf(e->problem, sizeof e->problem, "holds another graph key than its name");
    return;
  }
  strings host = host_strings(rt);
  const char *fields[5] = {e->library, e->llvm, e->cpu, e->features, e->target};
  for (int i = 0; i < 5; i++)
    if (strcmp(fields[i], host.s[i]) != 0) {
      snprintf(e->problem, sizeof e->problem, "written for another %s (%.60s; this process: %.60s)",
               string_names[i], fields[i], host.s[i]);
      return;
    }
}

/* ---- payload --------------------------------------------------------------------------------- */

/* A payload read back: the graphs and program (owned), the objects (pointing into the file). */
typedef struct parts {
  ljg_graph *graph, *opt;
  ljg_program *prog;
  ljc_objects objs;
} parts;

static void parts_free(parts *p) {
  if (p->graph) ljg_graph_free(p->graph);
  if (p->opt) ljg_graph_free(p->opt);
  free(p->graph);
  free(p->opt);
  ljg_program_free(p->prog);
  free(p->objs.data);
  free(p->objs.size);
  memset(p, 0, sizeof *p);
}

/* Reads the payload into *p; false with the problem in e->problem. */
static bool read_payload(ljb_reader *r, parts *p, ljr_disk_entry *e) {
  memset(p, 0, sizeof *p);
  p->graph = ljb_xcalloc(1, sizeof *p->graph);
  p->opt = ljb_xcalloc(1, sizeof *p->opt);
  const char *bad = NULL;
  if (!ljg_graph_read(r, p->graph))
    bad = "its graph is malformed";
  else if (!ljg_graph_read(r, p->opt) || p->opt->nparams != p->graph->nparams ||
           p->opt->nroots != p->graph->nroots)
    bad = "its optimized graph is malformed";
  else if (!(p->prog = ljg_program_read(r, p->opt)))
    bad = "its program is malformed";
  if (!bad) {
    uint32_t n;
    ljb_read(r, &n, sizeof n);
    if (r->bad || n != (uint32_t)(p->prog->nkernels + ljc_program_routines(p->prog))) {
      bad = "its object files do not match its kernels";
    } else {
      p->objs.n = (int)n;
      p->objs.data = ljb_xcalloc((size_t)n + 1, sizeof *p->objs.data);
      p->objs.size = ljb_xcalloc((size_t)n + 1, sizeof *p->objs.size);
      for (uint32_t k = 0; k < n && !r->bad; k++) {
        uint64_t size;
        ljb_read(r, &size, sizeof size);
        if (r->bad || size > (uint64_t)(r->end - r->p)) {
          r->bad = true;
          break;
        }
        p->objs.data[k] = (char *)r->p;
        p->objs.size[k] = (size_t)size;
        r->p += size;
      }
      if (r->bad || r->p != r->end) bad = "its object files are truncated";
    }
  }
  e->nodes = p->graph->n;
  e->kernels = p->prog ? p->prog->nkernels : -1;
  if (!bad) return true;
  snprintf(e->problem, sizeof e->problem, "%s", bad);
  parts_free(p);
  return false;
}

/* A GEMM routine's entry's payload: its name (into e->routine) and its object file (pointing
 * into the entry); false with the problem in e->problem. */
static bool read_routine_payload(ljb_reader *r, ljr_disk_entry *e, const char **obj, size_t *size) {
  uint64_t n = 0;
  if (get_string(r, e->routine, sizeof e->routine)) ljb_read(r, &n, sizeof n);
  if (r->bad || n != (uint64_t)(r->end - r->p)) {
    snprintf(e->problem, sizeof e->problem, "its object file is truncated");
    return false;
  }
  *obj = (const char *)r->p;
  *size = (size_t)n;
  return true;
}

/* ---- load ------------------------------------------------------------------------------------ */

/* LJ_DEBUG: why an entry was not used, or written. */
static void debug_note(const ljr_runtime *rt, const char *path, const char *what, const char *why) {
  if (rt->cfg.pub.debug >= 1) fprintf(stderr, "lazyjit: persistent cache: %s %s: %s\n", what, path, why);
}

/* The entry for key with extension ext (its path into path): the file (malloc'd) with its
 * header in *e, the problem in e->problem if this process cannot use it, and *payload at its
 * payload; NULL when there is none or it cannot be read (LJ_DEBUG says why). */
static unsigned char *read_entry(const ljr_runtime *rt, ljb_hash key, const char *ext, char path[1100],
                                 ljr_disk_entry *e, ljb_reader *payload) {
  entry_path(rt, key, ext, path, 1100);
  size_t n = 0;
  struct stat st;
  unsigned char *buf = read_file(path, &n, &st);
  if (!buf) {
    if (errno != ENOENT) debug_note(rt, path, "cannot read", strerror(errno));
    return NULL;
  }
  memset(e, 0, sizeof *e);
  read_header(buf, n, e, payload);
  check_host(rt, key, e);
  return buf;
}

/* Loads the code of an entry read into *p into a new executable; NULL with the problem in
 * e->problem (the thread's error as it was). */
static ljr_exec *make_exec(ljr_runtime *rt, ljb_hash key, parts *p, ljr_disk_entry *e) {
  ljr_exec *x = ljb_xcalloc(1, sizeof *x);
  x->key = key;
  x->fns = ljb_xcalloc((size_t)p->prog->nkernels + 1, sizeof *x->fns);
  lj_status prev = lj_last_status();
  char prev_msg[512];
  snprintf(prev_msg, sizeof prev_msg, "%s", lj_last_error());
  x->code = ljc_load(rt->cg, p->prog, key, &p->objs, x->fns);
  if (!x->code) {
    snprintf(e->problem, sizeof e->problem, "%s", lj_last_error());
    if (prev != LJ_OK)
      ljb_error(prev, "%s", prev_msg);
    else
      lj_clear_error();
    free(x->fns);
    free(x);
    return NULL;
  }
  x->graph = p->graph;
  x->opt = p->opt;
  x->prog = p->prog;
  p->graph = p->opt = NULL;
  p->prog = NULL;
  return x;
}

ljr_exec *ljr_disk_load(ljr_runtime *rt, ljb_hash key, const ljg_graph *g) {
  if (!rt->cfg.pub.cache_dir || ljr_dump_keeps_texts()) return NULL;
  uint64_t t0 = ljb_now_ns();
  char path[1100];
  ljr_disk_entry e;
  ljb_reader payload = {0};
  unsigned char *buf = read_entry(rt, key, graph_ext, path, &e, &payload);
  if (!buf) {
    ljr_count(LJR_C_PersistentCacheMiss, 1);
    return NULL;
  }
  parts p = {0};
  ljr_exec *x = NULL;
  bool other_graph = false;
  if (!e.problem[0] && read_payload(&payload, &p, &e)) {
    other_graph = !ljg_graph_equal(p.graph, g); /* a key collision: not this graph's entry */
    if (!other_graph) x = make_exec(rt, key, &p, &e);
    parts_free(&p);
  }
  free(buf);
  if (other_graph) {
    ljr_count(LJR_C_PersistentCacheMiss, 1);
    return NULL;
  }
  if (!x) {
    debug_note(rt, path, "ignored", e.problem);
    ljr_count(LJR_C_PersistentCacheDeserializeFailure, 1);
    return NULL;
  }
  if (!rt->cfg.pub.cache_readonly) utimensat(AT_FDCWD, path, NULL, 0); /* its last use */
  uint64_t ns = ljb_now_ns() - t0;
  ljr_count(LJR_C_PersistentCacheHit, 1);
  ljr_sample(LJR_M_PersistentCacheLoadTime, (double)ns);
  char what[64];
  snprintf(what, sizeof what, "%d kernels in %.2f ms", x->prog->nkernels, (double)ns * 1e-6);
  debug_note(rt, path, "loaded", what);
  return x;
}

/* ---- store and evict --------------------------------------------------------------------------- */

typedef struct file_info {
  char name[64];
  int64_t bytes;
  struct timespec used;
} file_info;

static int older_first(const void *a, const void *b) {
  const file_info *x = a, *y = b;
  if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
  if (x->used.tv_nsec != y->used.tv_nsec) return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* A writer that died leaves its temporary file; one this old is not being written any more. */
enum { STALE_TEMP_SECONDS = 3600 };

/* Deletes the entries used longest ago while the directory holds more than LJ_CACHE_MAX_MB,
 * never `keep` (the entry just written), and temporary files left by writers that died. */
static void evict(const ljr_runtime *rt, const char *keep) {
  const char *dir = rt->cfg.pub.cache_dir;
  DIR *dp = opendir(dir);
  if (!dp) return;
  LJB_VEC(file_info) files = {0};
  int64_t total = 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (struct dirent *de; (de = readdir(dp));) {
    bool entry = ljr_disk_is_entry(de->d_name), temp = ljr_disk_is_temp(de->d_name);
    struct stat st;
    if ((!entry && !temp) || fstatat(dirfd(dp), de->d_name, &st, 0) != 0) continue;
    if (temp) {
      if (now.tv_sec - st.st_mtim.tv_sec > STALE_TEMP_SECONDS) unlinkat(dirfd(dp), de->d_name, 0);
      continue;
    }
    file_info f = {.bytes = st.st_size, .used = st.st_mtim};
    snprintf(f.name, sizeof f.name, "%.40s", de->d_name); /* 32 hex digits + ".ljc" */
    ljb_vec_push(&files, f);
    total += st.st_size;
  }
  int64_t limit = (int64_t)rt->cfg.pub.cache_max_mb << 20;
  if (limit > 0 && total > limit) {
    qsort(files.a, (size_t)files.n, sizeof *files.a, older_first);
    for (int i = 0; i < files.n && total > limit; i++) {
      if (strcmp(files.a[i].name, keep) == 0) continue;
      if (unlinkat(dirfd(dp), files.a[i].name, 0) == 0 || errno == ENOENT) total -= files.a[i].bytes;
    }
  }
  ljb_vec_free(&files);
  closedir(dp);
}

static bool write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

/* Writes an entry (header and payload) under key with extension ext, unless the cache is off or
 * read-only; then evicts beyond LJ_CACHE_MAX_MB. A directory that cannot be written is no
 * cache: failures are reported with LJ_DEBUG only. */
static void write_entry(ljr_runtime *rt, ljb_hash key, const char *ext, const ljb_str *payload) {
  const char *dir = rt->cfg.pub.cache_dir;
  if (!dir || rt->cfg.pub.cache_readonly) return;
  if (!ljr_make_dirs(dir)) {
    debug_note(rt, dir, "cannot create", strerror(errno));
    return;
  }
  ljb_str header = {0};
  write_header(&header, rt, key, payload);
  static atomic_uint serial;
  char path[1100], tmp[1200];
  entry_path(rt, key, ext, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&serial, 1));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, header.s, header.n) && write_all(fd, payload->s, payload->n);
  int saved = errno;
  if (fd >= 0) ok &= close(fd) == 0;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) {
    debug_note(rt, path, "cannot write", strerror(saved ? saved : errno));
    unlink(tmp);
  }
  free(ljb_str_take(&header));
  if (ok) evict(rt, path + strlen(dir) + 1);
}

void ljr_disk_store(ljr_runtime *rt, const ljr_exec *e, const ljc_objects *objs) {
  if (!rt->cfg.pub.cache_dir || rt->cfg.pub.cache_readonly || !objs) return;
  ljb_str payload = {0};
  ljg_graph_write(&payload, e->graph);
  ljg_graph_write(&payload, e->opt);
  ljg_program_write(&payload, e->prog);
  uint32_t n = (uint32_t)objs->n;
  ljb_str_put(&payload, &n, sizeof n);
  for (int k = 0; k < objs->n; k++) {
    uint64_t size = objs->size[k];
    ljb_str_put(&payload, &size, sizeof size);
    ljb_str_put(&payload, objs->data[k], objs->size[k]);
  }
  write_entry(rt, e->key, graph_ext, &payload);
  free(ljb_str_take(&payload));
}

/* ---- GEMM routines ------------------------------------------------------------------------------ */

/* Routine `name`'s object file for this process's target (malloc'd, its size in *size), or
 * NULL: the cache is off, holds none, or holds one this process cannot use (LJ_DEBUG says
 * why; the routine is compiled and its entry replaced). Marks the entry used. */
static char *routine_load(void *ctx, const char *name, size_t *size) {
  ljr_runtime *rt = ctx;
  if (!rt->cfg.pub.cache_dir) return NULL;
  ljb_hash key = routine_key(rt, name);
  char path[1100];
  ljr_disk_entry e;
  ljb_reader payload = {0};
  unsigned char *buf = read_entry(rt, key, routine_ext, path, &e, &payload);
  if (!buf) return NULL;
  const char *obj;
  size_t n;
  char *out = NULL;
  if (!e.problem[0] && read_routine_payload(&payload, &e, &obj, &n)) {
    if (strcmp(e.routine, name) != 0)
      snprintf(e.problem, sizeof e.problem, "holds GEMM routine %s", e.routine);
    else
      out = memcpy(ljb_xalloc(n + 1), obj, n), *size = n;
  }
  free(buf);
  if (!out) {
    debug_note(rt, path, "ignored", e.problem);
    return NULL;
  }
  if (!rt->cfg.pub.cache_readonly) utimensat(AT_FDCWD, path, NULL, 0);
  debug_note(rt, path, "loaded", name);
  return out;
}

/* Writes routine `name`'s object file into its entry. */
static void routine_store(void *ctx, const char *name, const char *obj, size_t size) {
  ljr_runtime *rt = ctx;
  ljb_str payload = {0};
  put_string(&payload, name);
  uint64_t n = size;
  ljb_str_put(&payload, &n, sizeof n);
  ljb_str_put(&payload, obj, size);
  write_entry(rt, routine_key(rt, name), routine_ext, &payload);
  free(ljb_str_take(&payload));
}

ljc_routine_cache ljr_disk_routines(ljr_runtime *rt) { return (ljc_routine_cache){rt, routine_load, routine_store}; }

/* ---- inspection (tools/lj-cache) -------------------------------------------------------------- */

bool ljr_disk_inspect(ljr_runtime *rt, const char *path, ljr_disk_entry *out) {
  memset(out, 0, sizeof *out);
  out->nodes = out->kernels = -1;
  struct stat st;
  size_t n = 0;
  unsigned char *buf = read_file(path, &n, &st);
  if (!buf) return false;
  out->bytes = st.st_size;
  out->last_use = st.st_mtim.tv_sec;
  ljb_reader payload = {0};
  read_header(buf, n, out, &payload);
  const char *base = strrchr(path, '/');
  parts p;
  const char *obj;
  size_t size;
  if (out->problem[0])
    ;
  else if (is_routine_entry(path))
    read_routine_payload(&payload, out, &obj, &size);
  else if (read_payload(&payload, &p, out))
    parts_free(&p);
  ljb_hash named = {0};
  if (!key_of_name(base ? base + 1 : path, &named) && !out->problem[0])
    snprintf(out->problem, sizeof out->problem, "not named by its key");
  check_host(rt, named, out);
  free(buf);
  return true;
}
