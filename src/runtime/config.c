/* config.c — lj_config: defaults, the LJ_* environment (each variable also accepted under its
 * PyTorch/XLA spelling where the seed documents name one), and validation. The environment
 * is read here and nowhere else, once per lj_config_default call. */
#include "runtime/runtime.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef enum env_type { ENV_INT, ENV_BOOL, ENV_STRING } env_type;

typedef struct env_var {
  const char *name;
  const char *alias[2]; /* PyTorch/XLA spellings, or NULL */
  env_type type;
  size_t offset;        /* of the field in lj_config */
} env_var;

#define FIELD(f) offsetof(lj_config, f)
static const env_var env_vars[] = {
    {"LJ_NUM_DEVICES", {NULL}, ENV_INT, FIELD(num_devices)},
    {"LJ_NUM_THREADS", {NULL}, ENV_INT, FIELD(num_threads)},
    {"LJ_OPT_LEVEL", {NULL}, ENV_INT, FIELD(opt_level)},
    {"LJ_CPU", {NULL}, ENV_STRING, FIELD(cpu)},
    {"LJ_COMPILATION_CACHE_SIZE", {NULL}, ENV_INT, FIELD(compilation_cache_size)},
    {"LJ_DISABLE_FUSION", {NULL}, ENV_BOOL, FIELD(disable_fusion)},
    {"LJ_WINOGRAD", {NULL}, ENV_BOOL, FIELD(winograd)},
    {"LJ_NO_SPECIAL_SCALARS", {NULL}, ENV_BOOL, FIELD(no_special_scalars)},
    {"LJ_SYNC_TENSORS_OPBYOP", {"XLA_SYNC_TENSORS_OPBYOP", "SYNC_TENSORS_OPBYOP"}, ENV_BOOL,
     FIELD(sync_tensors_opbyop)},
    {"LJ_GET_TENSORS_OPBYOP", {"XLA_GET_TENSORS_OPBYOP", "GET_TENSORS_OPBYOP"}, ENV_BOOL,
     FIELD(get_tensors_opbyop)},
    {"LJ_SYNC_WAIT", {"XLA_SYNC_WAIT"}, ENV_BOOL, FIELD(sync_wait)},
    {"LJ_ENABLE_PARAM_ALIASING", {"XLA_ENABLE_PARAM_ALIASING"}, ENV_BOOL, FIELD(enable_param_aliasing)},
    {"LJ_METRICS_FILE", {"XLA_METRICS_FILE"}, ENV_STRING, FIELD(metrics_file)},
    {"LJ_SAVE_TENSORS_FILE", {"XLA_SAVE_TENSORS_FILE"}, ENV_STRING, FIELD(save_tensors_file)},
    {"LJ_SAVE_TENSORS_FMT", {"XLA_SAVE_TENSORS_FMT"}, ENV_STRING, FIELD(save_tensors_fmt)},
    {"LJ_DUMP_DIR", {NULL}, ENV_STRING, FIELD(dump_dir)},
    {"LJ_IR_DEBUG", {"XLA_IR_DEBUG"}, ENV_BOOL, FIELD(ir_debug)},
    {"LJ_HLO_DEBUG", {"XLA_HLO_DEBUG"}, ENV_BOOL, FIELD(hlo_debug)},
    {"LJ_DEBUG", {NULL}, ENV_INT, FIELD(debug)},
    {"LJ_PERF", {NULL}, ENV_BOOL, FIELD(perf)},
    {"LJ_PROFILE_KERNELS", {NULL}, ENV_BOOL, FIELD(profile_kernels)},
    {"LJ_PRECOMPILED_ROUTINES", {NULL}, ENV_BOOL, FIELD(precompiled_routines)},
    {"LJ_CACHE_DIR", {NULL}, ENV_STRING, FIELD(cache_dir)},
    {"LJ_CACHE_READONLY", {NULL}, ENV_BOOL, FIELD(cache_readonly)},
    {"LJ_CACHE_MAX_MB", {NULL}, ENV_INT, FIELD(cache_max_mb)},
    {"LJ_NT_STORE_KB", {NULL}, ENV_INT, FIELD(nt_store_kb)},
    {"LJ_FLUSH_DENORMAL", {NULL}, ENV_BOOL, FIELD(flush_denormal)},
};

int ljr_online_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The size of the last-level (L3) cache in KiB, from sysfs, else sysconf; 0 when neither says. */
static int l3_cache_kb(void) {
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f) {
    int kb = 0;
    char unit = 'K';
    int n = fscanf(f, "%d%c", &kb, &unit);
    fclose(f);
    if (n >= 1 && kb > 0) return unit == 'M' ? kb * 1024 : kb;
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes > 0) return (int)(bytes >> 10);
#endif
  return 0;
}

/* The default non-temporal store threshold: the L3's size, at most NT_STORE_MAX_KB. A virtual
 * machine's sysfs gives the whole socket's L3, which the socket's other cores and tenants share:
 * 260 MiB on a 2-core slice of a 5th-generation Xeon, where ordinary stores wrote a 64 MiB
 * output at about half the non-temporal stores' speed (relu(x*w+b)*0.5 over 16M floats, one
 * thread: 17.9 -> 13.7 ms with non-temporal stores; two threads 8.4 -> 6.0). 32 MiB is the L3
 * of the AMD machines whose measurements set the threshold at the L3's size. */
enum { NT_STORE_MAX_KB = 32 << 10 };

static int nt_store_default_kb(void) {
  int kb = l3_cache_kb();
  return kb < NT_STORE_MAX_KB ? kb : NT_STORE_MAX_KB;
}

static bool parse_bool(const char *s) {
  if (!*s || strcmp(s, "0") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
      strcasecmp(s, "off") == 0)
    return false;
  return true;
}

lj_config lj_config_default(void) {
  lj_config c;
  memset(&c, 0, sizeof c);
  c.num_devices = 1;
  c.num_threads = ljr_online_cpus();
  c.opt_level = 2;
  c.cpu = NULL;
  c.compilation_cache_size = 1024;
  c.cache_max_mb = 1024;
  c.nt_store_kb = nt_store_default_kb();
  c.enable_param_aliasing = true;
  c.winograd = true;
  c.precompiled_routines = true;
  for (size_t i = 0; i < LJ_COUNT_OF(env_vars); i++) {
    const env_var *v = &env_vars[i];
    const char *s = getenv(v->name);
    for (int a = 0; !s && a < 2 && v->alias[a]; a++) s = getenv(v->alias[a]);
    if (!s) continue;
    char *field = (char *)&c + v->offset;
    switch (v->type) {
    case ENV_INT: *(int *)field = atoi(s); break;
    case ENV_BOOL: *(bool *)field = parse_bool(s); break;
    case ENV_STRING: *(const char **)field = s; break;
    }
  }
  return c;
}

/* Copies *field into buf and points the field at the copy (NULL when empty); false with
 * LJ_ERR_ARG when it does not fit. */
static bool copy_string(char *buf, size_t cap, const char **field, const char *what) {
  const char *s = *field ? *field : "";
  if (strlen(s) >= cap) {
    ljb_error(LJ_ERR_ARG, "lj_init: %s is too long (%zu bytes, at most %zu)", what, strlen(s), cap - 1);
    return false;
  }
  strcpy(buf, s);
  *field = buf[0] ? buf : NULL;
  return true;
}

/* The persistent cache's directory: dir itself, the default for NULL, "" for off (and when
 * no default can be found). */
static void cache_dir(char *buf, size_t cap, const char *dir) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (dir)
    snprintf(buf, cap, "%s", dir);
  else if (xdg && *xdg)
    snprintf(buf, cap, "%s/lazyjit", xdg);
  else if (home && *home)
    snprintf(buf, cap, "%s/.cache/lazyjit", home);
  else
    buf[0] = 0;
}

bool ljr_config_load(ljr_config *out, const lj_config *cfg) {
  const lj_config c = cfg ? *cfg : lj_config_default();
  if (c.num_devices < 1 || c.num_devices > 64) {
    ljb_error(LJ_ERR_ARG, "lj_init: num_devices (LJ_NUM_DEVICES) is %d, must be 1..64",
              c.num_devices);
    return false;
  }
  if (c.num_threads < 1 || c.num_threads > 1024) {
    ljb_error(LJ_ERR_ARG, "lj_init: num_threads (LJ_NUM_THREADS) is %d, must be 1..1024",
              c.num_threads);
    return false;
  }
  if (c.opt_level < 0 || c.opt_level > 3) {
    ljb_error(LJ_ERR_ARG, "lj_init: opt_level (LJ_OPT_LEVEL) is %d, must be 0..3", c.opt_level);
    return false;
  }
  if (c.compilation_cache_size < 1) {
    ljb_error(LJ_ERR_ARG,
              "lj_init: compilation_cache_size (LJ_COMPILATION_CACHE_SIZE) is %d, must be >= 1",
              c.compilation_cache_size);
    return false;
  }
  if (c.debug < 0 || c.debug > 2) {
    ljb_error(LJ_ERR_ARG, "lj_init: debug (LJ_DEBUG) is %d, must be 0, 1 or 2", c.debug);
    return false;
  }
  if (c.nt_store_kb < 0) {
    ljb_error(LJ_ERR_ARG, "lj_init: nt_store_kb (LJ_NT_STORE_KB) is %d, must be >= 0 (0: never)", c.nt_store_kb);
    return false;
  }
  if (c.cache_max_mb < 0) {
    ljb_error(LJ_ERR_ARG, "lj_init: cache_max_mb (LJ_CACHE_MAX_MB) is %d, must be >= 0 (0: no limit)",
              c.cache_max_mb);
    return false;
  }
  if (c.cache_dir && strlen(c.cache_dir) >= sizeof out->cache_dir) {
    ljb_error(LJ_ERR_ARG, "lj_init: cache_dir (LJ_CACHE_DIR) is too long (%zu bytes, at most %zu)",
              strlen(c.cache_dir), sizeof out->cache_dir - 1);
    return false;
  }
  static const char *const fmts[] = {"text", "dot", "llvm", "asm", "hlo"};
  int fmt = c.save_tensors_fmt && *c.save_tensors_fmt ? -1 : LJR_FMT_TEXT;
  for (int i = 0; fmt < 0 && i < (int)LJ_COUNT_OF(fmts); i++)
    if (strcmp(c.save_tensors_fmt, fmts[i]) == 0) fmt = i == 4 ? LJR_FMT_LLVM : i;
  if (fmt < 0) {
    ljb_error(LJ_ERR_ARG,
              "lj_init: save_tensors_fmt (LJ_SAVE_TENSORS_FMT) is \"%s\", must be text, dot, llvm or asm",
              c.save_tensors_fmt);
    return false;
  }
  memset(out, 0, sizeof *out);
  out->pub = c;
  out->save_fmt = (ljr_dump_fmt)fmt;
  out->pub.save_tensors_fmt = fmts[fmt];
  cache_dir(out->cache_dir, sizeof out->cache_dir, c.cache_dir);
  out->pub.cache_dir = out->cache_dir[0] ? out->cache_dir : NULL;
  return copy_string(out->cpu, sizeof out->cpu, &out->pub.cpu, "cpu (LJ_CPU)") &&
         copy_string(out->metrics_file, sizeof out->metrics_file, &out->pub.metrics_file,
                     "metrics_file (LJ_METRICS_FILE)") &&
         copy_string(out->save_tensors_file, sizeof out->save_tensors_file, &out->pub.save_tensors_file,
                     "save_tensors_file (LJ_SAVE_TENSORS_FILE)") &&
         copy_string(out->dump_dir, sizeof out->dump_dir, &out->pub.dump_dir, "dump_dir (LJ_DUMP_DIR)");
}
