/* disk_cache.h — the persistent cache (LJ_CACHE_DIR): compiled graphs on disk, shared by every
 * process that uses the directory, so a program compiles a graph once per machine, not once
 * per run. Prefix ljr_disk_.
 *
 * One file per graph key, <dir>/<the key's 32 hex digits>.ljc, written whole to a temporary
 * file in the same directory and renamed into place: a reader sees an old entry or a new one,
 * never part of one, and processes may fill one directory at once. A file's modification
 * time is its last use (set when it is loaded); when a write takes the directory past
 * LJ_CACHE_MAX_MB, the entries used longest ago are deleted. Integers are in host byte order
 * (an entry is for one CPU anyway).
 *
 *   header
 *     magic           8 bytes   "LJCACHE\0"
 *     format          u32       LJR_DISK_FORMAT; another value is refused
 *     key             2 × u64   the graph key (lo, hi), the same as the file name's
 *     payload size    u64       bytes after the header: the file is exactly that long
 *     checksum        2 × u64   ljb_hasher (seed LJR_DISK_FORMAT) over the payload
 *     5 strings       u32 length, then the bytes:
 *                       library   lazyjit version "+" build id (a hash of its sources)
 *                       llvm      LLVM version
 *                       cpu       CPU name
 *                       features  CPU feature string
 *                       target    all the code depends on (ljc_session_target: LLVM,
 *                                 triple, CPU, features, opt level, debug info)
 *   payload
 *     graph           as collected (ljg_graph_write): compared with the graph being looked up
 *     optimized graph after the graph passes (ljg_graph_write): what the kernels compute
 *     program         kernels, slots (the buffer plan and the parameter and output mapping),
 *                     roots, scratch size (ljg_program_write)
 *     objects         u32 count (the program's kernels and the GEMM routines they call),
 *                     then per object a u64 size and the ELF object file: the kernels'
 *                     (size 0 for a kernel in an earlier kernel's object, its compile
 *                     group's), then the routines' (ljc_objects), so a process that loads
 *                     the entry need not compile the routines
 *
 * A GEMM routine (codegen's ljc_routine_cache) has an entry of its own, <dir>/<key>.ljo, the
 * key a hash of the routine's name, the library build and the target: the same header, and
 * as payload its name (u32 length, bytes), then a u64 size and its ELF object file. A process
 * that compiles new graphs loads the routines they call from these.
 *
 * An entry that does not match this process (format, library build, LLVM, CPU, target) or
 * is truncated or damaged (size, checksum, payload) is ignored, counted in
 * PersistentCacheDeserializeFailure, and replaced by the compile that follows. */
#ifndef LJ_DISK_CACHE_H
#define LJ_DISK_CACHE_H

#include "runtime/runtime.h"
#include "codegen_llvm/codegen.h"

enum { LJR_DISK_FORMAT = 6 };

/* The entry for key, loaded for graph g: a new executable with its code in the JIT; NULL when
 * the cache is off (or LJ_DUMP_DIR / LJ_SAVE_TENSORS_FMT=llvm|asm want a compile's texts),
 * when there is no entry (PersistentCacheMiss) or it cannot be used
 * (PersistentCacheDeserializeFailure; LJ_DEBUG says why on stderr). Counts PersistentCacheHit
 * (LJ_DEBUG names the entry) and marks the entry used. Leaves the thread's error alone. */
ljr_exec *ljr_disk_load(ljr_runtime *rt, ljb_hash key, const ljg_graph *g);
/* Writes e, whose kernels' object files are objs, unless the cache is off or read-only; then
 * evicts beyond LJ_CACHE_MAX_MB. A directory that cannot be written is no cache: failures are
 * reported with LJ_DEBUG only. */
void ljr_disk_store(ljr_runtime *rt, const ljr_exec *e, const struct ljc_objects *objs);

/* The GEMM routines' side of the cache, for the code generator (ljc_session_set_routine_cache):
 * a process whose graphs are new loads the routines another process built instead of compiling
 * them. Does nothing while the cache is off; writes nothing when it is read-only. */
ljc_routine_cache ljr_disk_routines(ljr_runtime *rt);

/* What tools/lj-cache shows of one entry. */
typedef struct ljr_disk_entry {
  ljb_hash key;
  uint32_t format;
  int64_t bytes;           /* file size */
  int64_t last_use;        /* modification time, seconds since the epoch */
  char library[64], llvm[32], cpu[64], features[1024], target[1280];
  int nodes, kernels;      /* of the graph as collected, of the program (-1: unreadable or a
                              routine's entry) */
  char routine[32];        /* a GEMM routine's entry: the routine ("" for a graph's entry) */
  char problem[160];       /* "" when the entry is intact and this process could load it */
} ljr_disk_entry;

/* Reads the entry at path (a directory entry of the cache) into *out: header, payload check
 * and whether rt's process could use it. False when the file cannot be read at all. */
bool ljr_disk_inspect(ljr_runtime *rt, const char *path, ljr_disk_entry *out);
/* Whether a directory entry's name is a cache entry ("<32 hex>.ljc", "<32 hex>.ljo") or a
 * temporary file a writer left ("<32 hex>.ljc.tmp.*", "<32 hex>.ljo.tmp.*"). */
bool ljr_disk_is_entry(const char *name);
bool ljr_disk_is_temp(const char *name);

#endif
