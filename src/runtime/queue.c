/* queue.c — async execution. Each device has an executor thread that runs the jobs syncs
 * submit, one after another in submission order, with the device's thread pool; a sync
 * returns once its job is queued, so the host traces the next step while this one runs.
 * Output buffers are allocated at submission and carry their job's sequence number: later
 * jobs read them in queue order, host reads wait for that job (ljr_buffer_wait). A job that
 * fails marks its outputs failed (jobs reading them fail too, without running) and leaves its
 * error for the next barrier or read on the device to report. Waiting spins briefly before
 * sleeping, as the thread pool does; the executor stays awake longer when jobs have been
 * coming in quick succession.
 *
 * A job runs on the syncing thread instead (run_here) when the host waited for the job before
 * it: a host that waits for every step has nothing to do while it runs, and handing the job
 * to the executor and its end back cost more than a short run (a 4x4 matmul step, sync then
 * lj_wait, one thread: 5.3 -> 1.2 us; the hand-over's cache lines passed between cores, and
 * the lines of buffers both threads count references on). It does so for long runs too: the
 * executor, asleep while the host runs the jobs, was woken onto the CPU where the host then
 * spun waiting for it, and the next runs went at one thread's speed on two (sigmoid over 1M
 * floats: 0.07 -> 0.15 ms, in half the processes, with short runs alone kept there). A host
 * that goes on tracing while its steps run keeps them on the executor; one that changes its
 * mind loses one run's overlap. With several devices every job goes to its executor, so that
 * one device's run does not hold up the host's sync of the next. */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next job, or NULL when the queue stops. Stays awake a while (ljr_awake_ns) before
 * sleeping. */
static ljr_job *next_job(struct lj_device *d) {
  ljr_queue *q = &d->queue;
  uint64_t t0 = ljb_now_ns(), awake = ljr_awake_ns(q->gap_ns);
  for (int i = 0; i < LJR_SPIN_ITERATIONS && !atomic_load(&q->head_ready) && !atomic_load(&q->stop); i++)
    ljr_spin_step(i);
  while (!atomic_load(&q->head_ready) && !atomic_load(&q->stop) && ljb_now_ns() - t0 < awake) sched_yield();
  pthread_mutex_lock(&q->lock);
  while ((!q->head || q->paused) && !atomic_load(&q->stop)) {
    q->sleeping = true;
    pthread_cond_wait(&q->wake, &q->lock);
    q->sleeping = false;
  }
  ljr_job *j = q->head;
  q->gap_ns = ljb_now_ns() - t0;
  if (j && !atomic_load(&q->stop)) {
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    atomic_store(&q->head_ready, q->head != NULL);
  } else {
    j = NULL;
  }
  pthread_mutex_unlock(&q->lock);
  return j;
}

static void *executor(void *arg) {
  struct lj_device *d = arg;
  ljr_queue *q = &d->queue;
  for (ljr_job *j; (j = next_job(d));) {
    uint64_t seq = j->seq;
    ljr_job_run(d, j);
    atomic_store(&q->done, seq);
    if (atomic_load(&q->waiters) > 0) {
      pthread_mutex_lock(&q->lock);
      pthread_cond_broadcast(&q->finished);
      pthread_mutex_unlock(&q->lock);
    }
  }
  return NULL;
}

void ljr_queue_start(struct lj_device *d) {
  ljr_queue *q = &d->queue;
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->wake, NULL);
  pthread_cond_init(&q->finished, NULL);
  q->started = ljb_thread_start(&q->thread, executor, d) == 0;
}

void ljr_queue_stop(struct lj_device *d) {
  ljr_queue *q = &d->queue;
  ljr_queue_pause(d, false);
  ljr_queue_wait(d, q->submitted);
  pthread_mutex_lock(&q->lock);
  atomic_store(&q->stop, true);
  pthread_cond_broadcast(&q->wake);
  pthread_mutex_unlock(&q->lock);
  if (q->started) pthread_join(q->thread, NULL);
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->wake);
  pthread_cond_destroy(&q->finished);
}

uint64_t ljr_queue_next(const struct lj_device *d) { return d->queue.submitted + 1; }

/* Whether a job runs on the syncing thread: no executor thread, or (above) the host waited for
 * the job before, none is in flight, the queue is not held back and the thread's stack has
 * room for the job's kernels (a thread of 256 KiB ran a 512³ matmul's packing past its stack's
 * end: wrong results, or a crash). */
static bool run_here(const ljr_queue *q) {
  return !q->started || (q->runs_here && q->host_waited && !q->paused && atomic_load(&q->done) == q->submitted &&
                         ljb_stack_holds_jobs());
}

void ljr_queue_submit(struct lj_device *d, ljr_job *j) {
  ljr_queue *q = &d->queue;
  LJ_ASSERT(j->seq == ljr_queue_next(d));
  bool here = run_here(q);
  q->submitted = j->seq;
  q->host_waited = false;
  if (here) {
    if (q->started) ljr_count(LJR_C_InlineRuns, 1);
    ljr_job_run(d, j);
    atomic_store(&q->done, q->submitted);
    return;
  }
  j->next = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->tail) q->tail->next = j;
  else q->head = j;
  q->tail = j;
  atomic_store(&q->head_ready, !q->paused);
  bool wake = q->sleeping && !q->paused;
  pthread_mutex_unlock(&q->lock);
  if (wake) pthread_cond_signal(&q->wake); /* after the unlock: the executor wakes to a free lock */
}

void ljr_queue_wait(struct lj_device *d, uint64_t seq) {
  ljr_queue *q = &d->queue;
  uint64_t t0 = ljb_now_ns();
  for (int i = 0; atomic_load(&q->done) < seq && (i < LJR_SPIN_ITERATIONS || ljb_now_ns() - t0 < q->wait_spin_ns); i++)
    ljr_spin_step(i);
  if (atomic_load(&q->done) >= seq) return;
  pthread_mutex_lock(&q->lock);
  atomic_fetch_add(&q->waiters, 1);
  while (atomic_load(&q->done) < seq) pthread_cond_wait(&q->finished, &q->lock);
  atomic_fetch_sub(&q->waiters, 1);
  pthread_mutex_unlock(&q->lock);
}

void ljr_queue_pause(struct lj_device *d, bool paused) {
  ljr_queue *q = &d->queue;
  pthread_mutex_lock(&q->lock);
  q->paused = paused;
  atomic_store(&q->head_ready, q->head && !paused);
  if (!paused) pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
}

void ljr_queue_fail(struct lj_device *d, lj_status st, const char *msg) {
  ljr_queue *q = &d->queue;
  pthread_mutex_lock(&q->lock);
  if (atomic_load(&q->error) == LJ_OK) {
    snprintf(q->error_msg, sizeof q->error_msg, "%s", msg);
    atomic_store(&q->error, st);
  }
  pthread_mutex_unlock(&q->lock);
}

lj_status ljr_queue_take_error(struct lj_device *d) {
  ljr_queue *q = &d->queue;
  if (atomic_load(&q->error) == LJ_OK) return LJ_OK; /* every sync asks: no lock for the answer */
  pthread_mutex_lock(&q->lock);
  lj_status st = atomic_exchange(&q->error, LJ_OK);
  ljb_error(st, "%s", q->error_msg);
  pthread_mutex_unlock(&q->lock);
  return st;
}

lj_status ljr_queue_finish(struct lj_device *d) {
  ljr_queue_wait(d, d->queue.submitted);
  d->queue.host_waited = true;
  return ljr_queue_take_error(d);
}

lj_status ljr_buffer_wait(ljr_buffer *b, const char *op) {
  struct lj_device *d = b->dev;
  if (b->seq > atomic_load(&d->queue.done)) ljr_queue_wait(d, b->seq);
  if (b->seq == d->queue.submitted) d->queue.host_waited = true;
  lj_status st = ljr_queue_take_error(d);
  if (st != LJ_OK) return st;
  if (atomic_load(&b->status) != LJ_OK) {
    ljb_error(LJ_ERR_RUNTIME,
              "%s: the value was not computed: the graph computing it failed (reported at an earlier "
              "barrier or read)",
              op);
    return LJ_ERR_RUNTIME;
  }
  return LJ_OK;
}
