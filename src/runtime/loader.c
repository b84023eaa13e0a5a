/* loader.c — the device loader (PyTorch/XLA's MpDeviceLoader): a background thread walks the
 * epochs' (seeded) sample orders, converts and normalizes each batch on the host and stages
 * it into fresh device buffers, keeping up to `prefetch` batches ready in a ring; the caller
 * wraps a staged batch into tensors and, every `barrier_every` batches of an epoch and at its
 * end, syncs the device.
 * The ring also carries an end-of-epoch marker after each epoch's last batch. */
#include "frontend/frontend.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct staged {
  ljr_buffer *x, *y; /* both NULL: the end of an epoch, or an error when st != LJ_OK */
  int64_t n;         /* samples in the batch */
  lj_status st;
  char msg[256];
} staged;

struct lj_loader {
  lj_device *dev;
  ljr_dataset_storage *data;
  int64_t start, count; /* the dataset's samples */
  lj_loader_options o;
  int64_t batches;      /* per epoch */
  /* the ring, guarded by lock */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  staged *ring;
  int head, len;
  bool stop;            /* set by free / shutdown */
  bool running;         /* the thread exists (joined when it stops) */
  pthread_t thread;
  /* the consumer's side */
  int64_t handed_out;   /* batches handed out this epoch (for barrier_every) */
  staged failed;        /* the producer's error, once seen: it stopped, so it stays */
  struct lj_loader *next_live;
};

/* Every loader with a running thread, so lj_shutdown can stop them before devices go. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static lj_loader *live_head;

lj_loader_options lj_loader_defaults(void) {
  return (lj_loader_options){.batch_size = 64, .shuffle = true, .mean = 0, .std = 1, .prefetch = 2};
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A uniform integer in [0, n) (rejection sampling: no modulo bias). */
static uint64_t uniform_below(uint64_t *s, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = splitmix64(s);
  while (r >= limit);
  return r % n;
}

/* Epoch e's order of the samples 0..count-1: identity, or a Fisher-Yates shuffle seeded by
 * (seed, e) only. */
static void epoch_order(const lj_loader *l, uint64_t epoch, int64_t *order) {
  for (int64_t i = 0; i < l->count; i++) order[i] = i;
  if (!l->o.shuffle) return;
  uint64_t s = l->o.seed ^ (epoch + 1) * 0xd1b54a32d192ed03ULL;
  splitmix64(&s);
  for (int64_t i = l->count - 1; i > 0; i--) {
    int64_t j = (int64_t)uniform_below(&s, (uint64_t)i + 1);
    int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

/* Converts samples order[0..n) into host arrays and copies them into new device buffers. */
static staged stage_batch(lj_loader *l, const int64_t *order, int64_t n, float *hx, int64_t *hy) {
  staged b = {.n = n};
  const ljr_dataset_storage *s = l->data;
  int64_t *at = hy; /* the absolute indices first, the labels then */
  for (int64_t i = 0; i < n; i++) at[i] = l->start + order[i];
  ljr_dataset_samples_f32(s, at, n, l->o.mean, l->o.std, hx);
  for (int64_t i = 0; i < n; i++) hy[i] = ljr_dataset_label(s, at[i]);
  size_t xbytes = (size_t)(n * s->sample_numel) * sizeof(float), ybytes = (size_t)n * sizeof(int64_t);
  uint64_t t0 = ljb_now_ns();
  b.x = ljr_buffer_new(l->dev, xbytes);
  b.y = b.x ? ljr_buffer_new(l->dev, ybytes) : NULL;
  if (!b.y) {
    ljr_buffer_release(b.x);
    b.x = NULL;
    b.st = lj_last_status() != LJ_OK ? lj_last_status() : LJ_ERR_OOM;
    snprintf(b.msg, sizeof b.msg, "lj_loader_next: staging a batch failed: %s", lj_last_error());
    lj_clear_error();
    return b;
  }
  l->dev->backend->to_device(l->dev, b.x->data, hx, xbytes);
  l->dev->backend->to_device(l->dev, b.y->data, hy, ybytes);
  ljr_sample(LJR_M_TransferToDeviceTime, (double)(ljb_now_ns() - t0));
  ljr_sample(LJR_M_InboundData, (double)(xbytes + ybytes));
  return b;
}

/* Waits for room in the ring and appends b; false (b dropped) when the loader stops. */
static bool push(lj_loader *l, staged b) {
  pthread_mutex_lock(&l->lock);
  while (!l->stop && l->len == l->o.prefetch) pthread_cond_wait(&l->changed, &l->lock);
  bool ok = !l->stop;
  if (ok) {
    l->ring[(l->head + l->len) % l->o.prefetch] = b;
    l->len++;
    pthread_cond_broadcast(&l->changed);
  }
  pthread_mutex_unlock(&l->lock);
  if (!ok) {
    ljr_buffer_release(b.x);
    ljr_buffer_release(b.y);
  }
  return ok;
}

static void *producer(void *arg) {
  lj_loader *l = arg;
  const ljr_dataset_storage *s = l->data;
  int64_t bs = l->o.batch_size;
  int64_t *order = malloc((size_t)(l->count + 1) * sizeof *order);
  float *hx = malloc((size_t)(bs * s->sample_numel + 1) * sizeof *hx);
  int64_t *hy = malloc((size_t)bs * sizeof *hy);
  if (!order || !hx || !hy) {
    staged err = {.st = LJ_ERR_OOM};
    snprintf(err.msg, sizeof err.msg, "lj_loader_next: cannot allocate the loader's host buffers");
    push(l, err);
  } else {
    bool running = true;
    for (uint64_t epoch = 0; running; epoch++) {
      epoch_order(l, epoch, order);
      for (int64_t b = 0; b < l->batches && running; b++) {
        int64_t n = l->count - b * bs < bs ? l->count - b * bs : bs;
        staged st = stage_batch(l, order + b * bs, n, hx, hy);
        running = push(l, st) && st.st == LJ_OK;
      }
      if (running) running = push(l, (staged){0});
    }
  }
  free(order);
  free(hx);
  free(hy);
  return NULL;
}

lj_loader *lj_loader_new(const lj_dataset *ds, lj_device *d, const lj_loader_options *opts) {
  static const char *op = "lj_loader_new";
  if (!ds) return ljb_null_arg(op, "ds"), NULL;
  if (!d) return ljb_null_arg(op, "d"), NULL;
  lj_loader_options o = opts ? *opts : lj_loader_defaults();
  if (o.batch_size < 1) return ljb_error(LJ_ERR_ARG, "%s: batch_size %lld must be >= 1", op, (long long)o.batch_size), NULL;
  if (o.prefetch < 1 || o.prefetch > 64)
    return ljb_error(LJ_ERR_ARG, "%s: prefetch %d must be in [1, 64]", op, o.prefetch), NULL;
  if (o.barrier_every < 0) return ljb_error(LJ_ERR_ARG, "%s: barrier_every %d must be >= 0", op, o.barrier_every), NULL;
  if (!(o.std > 0) || !isfinite(o.std) || !isfinite(o.mean))
    return ljb_error(LJ_ERR_ARG, "%s: normalization mean %g, std %g: std must be finite and > 0", op, o.mean, o.std),
           NULL;
  int64_t batches = o.drop_last ? ds->count / o.batch_size : (ds->count + o.batch_size - 1) / o.batch_size;
  if (batches == 0 && ds->count > 0)
    return ljb_error(LJ_ERR_ARG, "%s: drop_last with %lld samples leaves no full batch of %lld", op,
                     (long long)ds->count, (long long)o.batch_size),
           NULL;
  lj_loader *l = ljb_xcalloc(1, sizeof *l);
  l->dev = d;
  l->data = ds->s;
  atomic_fetch_add(&l->data->refs, 1);
  l->start = ds->start;
  l->count = ds->count;
  l->o = o;
  l->batches = batches;
  l->ring = ljb_xcalloc((size_t)o.prefetch, sizeof *l->ring);
  pthread_mutex_init(&l->lock, NULL);
  pthread_cond_init(&l->changed, NULL);
  pthread_mutex_lock(&live_lock);
  if (pthread_create(&l->thread, NULL, producer, l) != 0) {
    pthread_mutex_unlock(&live_lock);
    ljb_error(LJ_ERR_OOM, "%s: cannot start the loader thread", op);
    lj_loader_free(l);
    return NULL;
  }
  l->running = true;
  l->next_live = live_head;
  live_head = l;
  pthread_mutex_unlock(&live_lock);
  return l;
}

/* Stops l's thread and drops what it staged (live_lock held). */
static void stop_locked(lj_loader *l) {
  if (!l->running) return;
  pthread_mutex_lock(&l->lock);
  l->stop = true;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->lock);
  pthread_join(l->thread, NULL);
  l->running = false;
  for (; l->len > 0; l->len--, l->head = (l->head + 1) % l->o.prefetch) {
    ljr_buffer_release(l->ring[l->head].x);
    ljr_buffer_release(l->ring[l->head].y);
  }
  for (lj_loader **p = &live_head; *p; p = &(*p)->next_live)
    if (*p == l) {
      *p = l->next_live;
      break;
    }
}

void ljr_loaders_stop(void) {
  pthread_mutex_lock(&live_lock);
  while (live_head) stop_locked(live_head);
  pthread_mutex_unlock(&live_lock);
}

bool lj_loader_next(lj_loader *l, lj_tensor **x, lj_tensor **y) {
  static const char *op = "lj_loader_next";
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!l) return ljb_null_arg(op, "l"), false;
  if (!x || !y) return ljb_null_arg(op, x ? "y" : "x"), false;
  if (!l->running || ljr_current() == NULL) {
    ljb_error(LJ_ERR_DEVICE, "%s: the runtime was shut down after this loader was made; free it", op);
    return false;
  }
  if (l->failed.st != LJ_OK) {
    ljb_error(l->failed.st, "%s", l->failed.msg);
    return false;
  }
  if (l->o.barrier_every > 0 && l->handed_out > 0 && l->handed_out % l->o.barrier_every == 0) {
    lj_status st = ljf_sync(l->dev, LJR_CAUSE_LOADER);
    if (st != LJ_OK) return false;
  }
  pthread_mutex_lock(&l->lock);
  while (l->len == 0) pthread_cond_wait(&l->changed, &l->lock);
  staged b = l->ring[l->head];
  l->head = (l->head + 1) % l->o.prefetch;
  l->len--;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->lock);
  if (b.st != LJ_OK) {
    l->failed = b;
    ljb_error(b.st, "%s", b.msg);
    return false;
  }
  if (!b.x) { /* the end of the epoch: run what the last batches left pending */
    l->handed_out = 0;
    if (l->o.barrier_every > 0) ljf_sync(l->dev, LJR_CAUSE_LOADER);
    return false;
  }
  const ljr_dataset_storage *s = l->data;
  int64_t shape[LJ_MAX_DIMS + 1] = {b.n};
  memcpy(shape + 1, s->sample_shape, (size_t)s->sample_ndim * sizeof *shape);
  *x = ljf_tensor_from_buffer(l->dev, LJ_F32, s->sample_ndim + 1, shape, b.x);
  *y = ljf_tensor_from_buffer(l->dev, LJ_I64, 1, shape, b.y);
  ljr_buffer_release(b.x);
  ljr_buffer_release(b.y);
  l->handed_out++;
  return true;
}

int64_t lj_loader_batches(const lj_loader *l) { return l ? l->batches : 0; }

void lj_loader_free(lj_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&live_lock);
  stop_locked(l);
  pthread_mutex_unlock(&live_lock);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->changed);
  ljr_dataset_storage_release(l->data);
  free(l->ring);
  free(l);
}
