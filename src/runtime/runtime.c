/* runtime.c — the runtime object: started by lj_init or on first use, it owns the
 * configuration, the LLVM session and the devices. lj_shutdown frees everything. */
#include "runtime/runtime.h"
#include "runtime/disk_cache.h"
#include "codegen_llvm/codegen.h"

#include <stdlib.h>
#include <string.h>

static ljr_runtime *_Atomic g_runtime;
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;

static ljb_hash env_seed(const ljr_runtime *rt) {
  ljb_hasher h;
  ljb_hasher_init(&h, 0x6c617a796a6974ULL);
  ljb_hash_str(&h, "lazyjit " LJ_VERSION_STRING);
  ljb_hash_str(&h, ljc_session_target(rt->cg));
  ljb_hash_u64(&h, (uint64_t)rt->cfg.pub.opt_level);
  ljb_hash_u64(&h, (uint64_t)rt->cfg.pub.disable_fusion);
  ljb_hash_u64(&h, (uint64_t)rt->cfg.pub.winograd);
  return ljb_hasher_final(&h);
}

static lj_status start(const lj_config *cfg) {
  ljr_runtime *rt = ljb_xcalloc(1, sizeof *rt);
  if (!ljr_config_load(&rt->cfg, cfg)) {
    free(rt);
    return lj_last_status();
  }
  unsigned flags = (rt->cfg.pub.perf ? LJC_PERF : 0) | (rt->cfg.pub.hlo_debug ? LJC_DEBUG_INFO : 0) |
                   (rt->cfg.pub.precompiled_routines ? LJC_PRECOMPILED : 0);
  /* compiles use every CPU the process may run on, however few threads run the kernels: a
   * compile is a burst before a step, not a load beside it */
  int cpus = ljr_online_cpus(), compile_threads = cpus > rt->cfg.pub.num_threads ? cpus : rt->cfg.pub.num_threads;
  rt->cg = ljc_session_new(rt->cfg.pub.cpu, rt->cfg.pub.opt_level, (int64_t)rt->cfg.pub.nt_store_kb << 10,
                           compile_threads, flags);
  if (!rt->cg) {
    free(rt);
    return lj_last_status();
  }
  ljc_session_set_routine_cache(rt->cg, ljr_disk_routines(rt));
  rt->env_seed = env_seed(rt);
  rt->ndevices = rt->cfg.pub.num_devices;
  rt->devices = ljb_xcalloc((size_t)rt->ndevices, sizeof *rt->devices);
  for (int i = 0; i < rt->ndevices; i++) ljr_device_init(&rt->devices[i], i, &rt->cfg);
  atomic_store(&g_runtime, rt);
  return LJ_OK;
}

lj_status lj_init(const lj_config *cfg) {
  pthread_mutex_lock(&g_init_lock);
  lj_status st;
  if (atomic_load(&g_runtime)) {
    ljb_error(LJ_ERR_ARG, "lj_init: the runtime is already running (call lj_shutdown first)");
    st = LJ_ERR_ARG;
  } else {
    st = start(cfg);
  }
  pthread_mutex_unlock(&g_init_lock);
  return st;
}

ljr_runtime *ljr_current(void) { return atomic_load(&g_runtime); }

ljr_runtime *ljr_get(void) {
  ljr_runtime *rt = atomic_load(&g_runtime);
  if (LJ_LIKELY(rt)) return rt;
  pthread_mutex_lock(&g_init_lock);
  if (!atomic_load(&g_runtime)) start(NULL);
  pthread_mutex_unlock(&g_init_lock);
  return atomic_load(&g_runtime);
}

void lj_shutdown(void) {
  pthread_mutex_lock(&g_init_lock);
  ljr_runtime *rt = atomic_load(&g_runtime);
  if (rt) {
    ljr_loaders_stop();
    for (int i = 0; i < rt->ndevices; i++) ljr_device_free(&rt->devices[i]);
    free(rt->devices);
    ljc_session_free(rt->cg);
    free(rt);
    atomic_store(&g_runtime, NULL);
  }
  pthread_mutex_unlock(&g_init_lock);
}

int lj_device_count(void) {
  ljr_runtime *rt = ljr_get();
  return rt ? rt->ndevices : 0;
}

lj_device *lj_device_get(int ordinal) {
  ljr_runtime *rt = ljr_get();
  if (!rt) return NULL;
  if (ordinal < 0 || ordinal >= rt->ndevices) {
    ljb_error(LJ_ERR_DEVICE, "lj_device_get: no device %d (there are %d)", ordinal, rt->ndevices);
    return NULL;
  }
  return &rt->devices[ordinal];
}

lj_device *lj_default_device(void) { return lj_device_get(0); }
