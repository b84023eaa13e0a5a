/* cache.c — the per-device executable cache: a hash table by graph key with an LRU list,
 * a second index by walk key (what a sync computes before building its graph), and the last
 * walk's node ids, which a sync replays before walking at all. Every lookup is confirmed by
 * comparing the stored graph with the collected one (or the walk, or the replayed trace), so
 * a key collision can only cost a compile, never run the wrong code. */
#include "runtime/runtime.h"
#include "codegen_llvm/codegen.h"

#include <stdlib.h>
#include <string.h>

void ljr_exec_free(ljr_exec *e) {
  if (!e) return;
  ljr_profile_report(e);
  ljc_program_free(e->code);
  ljg_program_free(e->prog);
  if (e->graph) ljg_graph_free(e->graph);
  if (e->opt) ljg_graph_free(e->opt);
  free(e->graph);
  free(e->opt);
  free(e->fns);
  free(e->walk_ids);
  if (e->texts) ljc_texts_free(e->texts);
  free(e->texts);
  free(e);
}

void ljr_cache_init(ljr_cache *c, int capacity) {
  memset(c, 0, sizeof *c);
  c->capacity = capacity;
  c->nbuckets = 64;
  while (c->nbuckets < 2 * capacity && c->nbuckets < (1 << 16)) c->nbuckets *= 2;
  c->buckets = ljb_xcalloc((size_t)c->nbuckets, sizeof *c->buckets);
  c->walk_buckets = ljb_xcalloc((size_t)c->nbuckets, sizeof *c->walk_buckets);
}

void ljr_cache_free(ljr_cache *c) {
  ljr_exec *e = c->lru_head;
  while (e) {
    ljr_exec *next = e->lru_next;
    ljr_exec_free(e);
    e = next;
  }
  free(c->buckets);
  free(c->walk_buckets);
  memset(c, 0, sizeof *c);
}

static void lru_unlink(ljr_cache *c, ljr_exec *e) {
  if (e->lru_prev) e->lru_prev->lru_next = e->lru_next;
  else c->lru_head = e->lru_next;
  if (e->lru_next) e->lru_next->lru_prev = e->lru_prev;
  else c->lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(ljr_cache *c, ljr_exec *e) {
  e->lru_prev = NULL;
  e->lru_next = c->lru_head;
  if (c->lru_head) c->lru_head->lru_prev = e;
  c->lru_head = e;
  if (!c->lru_tail) c->lru_tail = e;
}

static ljr_exec **bucket(ljr_cache *c, ljb_hash key) {
  return &c->buckets[key.lo & (uint64_t)(c->nbuckets - 1)];
}

static ljr_exec **walk_bucket(ljr_cache *c, ljb_hash key) {
  return &c->walk_buckets[key.lo & (uint64_t)(c->nbuckets - 1)];
}

static ljr_exec *touch(ljr_cache *c, ljr_exec *e) {
  if (c->lru_head != e) {
    lru_unlink(c, e);
    lru_push_front(c, e);
  }
  return e;
}

ljr_exec *ljr_cache_lookup(ljr_cache *c, ljb_hash key, const ljg_graph *g) {
  for (ljr_exec *e = *bucket(c, key); e; e = e->bucket_next)
    if (ljb_hash_eq(e->key, key) && ljg_graph_equal(e->graph, g)) return touch(c, e);
  return NULL;
}

ljr_exec *ljr_cache_lookup_walk(ljr_cache *c, ljb_hash walk_key) {
  for (ljr_exec *e = *walk_bucket(c, walk_key); e; e = e->walk_next)
    if (ljb_hash_eq(e->walk_key, walk_key)) return touch(c, e);
  return NULL;
}

static void walk_unlink(ljr_cache *c, ljr_exec *e) {
  if (!e->has_walk) return;
  ljr_exec **p = walk_bucket(c, e->walk_key);
  while (*p != e) p = &(*p)->walk_next;
  *p = e->walk_next;
  e->has_walk = false;
}

void ljr_cache_set_walk(ljr_cache *c, ljr_exec *e, const ljg_walk *w) {
  walk_unlink(c, e);
  ljr_exec **b = walk_bucket(c, w->key);
  e->walk_key = w->key;
  e->has_walk = true;
  e->walk_next = *b;
  *b = e;
  e->walk_ids = ljb_xrealloc(e->walk_ids, ((size_t)w->order.n + 1) * sizeof *e->walk_ids);
  for (int i = 0; i < w->order.n; i++) e->walk_ids[i] = w->order.a[i]->id;
}

/* How many of the most recently used executables a sync tries to replay: a training loop
 * alternates between a few graphs (the step, a loss read, an evaluation). */
enum { REPLAY_CANDIDATES = 4 };

ljr_exec *ljr_cache_replay(ljr_cache *c, const ljg_trace *t, int n, ljg_node *const *roots,
                           ljg_node *const *donors, ljg_binding_vec *binds) {
  int tried = 0;
  for (ljr_exec *e = c->lru_head; e && tried < REPLAY_CANDIDATES; e = e->lru_next) {
    if (!e->walk_ids) continue;
    tried++;
    if (ljg_replay(t, e->walk_ids, e->graph, n, roots, donors, binds)) return touch(c, e);
  }
  return NULL;
}

static void remove_entry(ljr_cache *c, ljr_exec *e) {
  ljr_exec **p = bucket(c, e->key);
  while (*p != e) p = &(*p)->bucket_next;
  *p = e->bucket_next;
  walk_unlink(c, e);
  lru_unlink(c, e);
  c->count--;
}

void ljr_cache_insert(ljr_cache *c, ljr_exec *e) {
  ljr_exec **b = bucket(c, e->key);
  e->bucket_next = *b;
  *b = e;
  lru_push_front(c, e);
  c->count++;
  while (c->count > c->capacity) {
    ljr_exec *victim = c->lru_tail;
    remove_entry(c, victim);
    ljr_exec_free(victim);
    ljr_count(LJR_C_CacheEvictions, 1);
  }
}
