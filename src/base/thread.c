/* thread.c — starting the threads lazyjit runs work on, with a stack of their own size, and
 * whether the calling thread's stack has room for a job. */
#include "base/base.h"

int ljb_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  size_t size = 0;
  if (pthread_attr_init(&attr) != 0) return pthread_create(t, NULL, fn, arg);
  if (pthread_attr_getstacksize(&attr, &size) == 0 && size < LJB_THREAD_STACK)
    pthread_attr_setstacksize(&attr, LJB_THREAD_STACK);
  int rc = pthread_create(t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return rc;
}

bool ljb_stack_holds_jobs(void) {
  static _Thread_local signed char holds = -1;
  if (holds < 0) {
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      if (pthread_attr_getstacksize(&attr, &size) != 0) size = 0;
      pthread_attr_destroy(&attr);
    }
    holds = size >= LJB_JOB_STACK;
  }
  return holds;
}
