/* config.c — lj_config: defaults, the LJ_* environment (each variable also accepted under its
 * PyTorch/XLA spelling where the seed documents name one), and validation. The environment
 * is read here and nowhere else, once per lj_config_default call. */
#include "runtime/runtime.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef enum env_type { ENV_INT, ENV_BOOL, ENV_STRING } env_type;

typedef struct env_var {
  const char *name;
  const char *alias; /* PyTorch/XLA spelling, or NULL */
  env_type type;
  size_t offset;     /* of the field in lj_config */
} env_var;

#define FIELD(f) offsetof(lj_config, f)
static const env_var env_vars[] = {
    {"LJ_NUM_DEVICES", NULL, ENV_INT, FIELD(num_devices)},
    {"LJ_NUM_THREADS", NULL, ENV_INT, FIELD(num_threads)},
    {"LJ_OPT_LEVEL", NULL, ENV_INT, FIELD(opt_level)},
    {"LJ_CPU", NULL, ENV_STRING, FIELD(cpu)},
    {"LJ_COMPILATION_CACHE_SIZE", NULL, ENV_INT, FIELD(compilation_cache_size)},
    {"LJ_DISABLE_FUSION", NULL, ENV_BOOL, FIELD(disable_fusion)},
    {"LJ_NO_SPECIAL_SCALARS", NULL, ENV_BOOL, FIELD(no_special_scalars)},
    {"LJ_SYNC_TENSORS_OPBYOP", "XLA_SYNC_TENSORS_OPBYOP", ENV_BOOL, FIELD(sync_tensors_opbyop)},
};

static int online_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
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
  c.num_threads = online_cpus();
  c.opt_level = 2;
  c.cpu = NULL;
  c.compilation_cache_size = 1024;
  for (size_t i = 0; i < LJ_COUNT_OF(env_vars); i++) {
    const env_var *v = &env_vars[i];
    const char *s = getenv(v->name);
    if (!s && v->alias) s = getenv(v->alias);
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
  if (c.cpu && strlen(c.cpu) >= sizeof out->cpu) {
    ljb_error(LJ_ERR_ARG, "lj_init: cpu (LJ_CPU) name is too long");
    return false;
  }
  memset(out, 0, sizeof *out);
  out->pub = c;
  if (c.cpu) strcpy(out->cpu, c.cpu);
  out->pub.cpu = out->cpu[0] ? out->cpu : NULL;
  return true;
}
