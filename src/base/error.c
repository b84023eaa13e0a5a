/* error.c — the thread-local status and message behind lj_last_status / lj_last_error. */
#include "base/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local lj_status tl_status;
static _Thread_local char tl_msg[1024];

void ljb_verror(lj_status s, const char *fmt, va_list ap) {
  tl_status = s;
  vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
}

void ljb_error(lj_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ljb_verror(s, fmt, ap);
  va_end(ap);
}

void ljb_null_arg(const char *op, const char *arg) {
  if (tl_status == LJ_OK) ljb_error(LJ_ERR_ARG, "%s: argument %s is NULL", op, arg);
}

char *ljb_shape_str(char *buf, int ndim, const int64_t *shape) {
  size_t n = 0;
  buf[n++] = '[';
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(buf + n, LJB_SHAPE_STR_MAX - n, "%s%" PRId64, i ? "," : "", shape[i]);
  buf[n++] = ']';
  buf[n] = 0;
  return buf;
}

_Noreturn void ljb_assert_fail(const char *cond, const char *file, int line) {
  fprintf(stderr, "lazyjit: internal error: assertion `%s` failed at %s:%d\n", cond, file, line);
  abort();
}

lj_status lj_last_status(void) { return tl_status; }
const char *lj_last_error(void) { return tl_msg; }

void lj_clear_error(void) {
  tl_status = LJ_OK;
  tl_msg[0] = 0;
}

#define STATUS(s) [s] = #s
static const char *const status_names[] = {
    STATUS(LJ_OK),          STATUS(LJ_ERR_ARG),     STATUS(LJ_ERR_SHAPE),
    STATUS(LJ_ERR_DTYPE),   STATUS(LJ_ERR_DEVICE),  STATUS(LJ_ERR_OOM),
    STATUS(LJ_ERR_IO),      STATUS(LJ_ERR_COMPILE), STATUS(LJ_ERR_RUNTIME),
    STATUS(LJ_ERR_UNSUPPORTED), STATUS(LJ_ERR_DISTRIBUTED),
};
#undef STATUS

const char *lj_status_str(lj_status s) {
  if ((unsigned)s < LJ_COUNT_OF(status_names) && status_names[s]) return status_names[s];
  return "unknown status";
}
