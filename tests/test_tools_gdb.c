/* test_tools_gdb.c — LJ_HLO_DEBUG as a user sees it: gdb, asked to break on a line of the
 * user's program that records ops, stops a second time inside the compiled kernel that runs
 * them, with the user's function and line on top of the kernel's frames. Without it the line
 * is only ever reached by the host code that records the ops. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The line of gdb_target.c that carries the marker comment. */
static int marked_line(void) {
  char *src = tu_read_file(LJ_GDB_TARGET_SRC, NULL);
  ck_assert(src);
  char *at = strstr(src, "/* gdb stops here */");
  ck_assert(at);
  int line = 1;
  for (const char *p = src; p < at; p++) line += *p == '\n';
  free(src);
  return line;
}

/* gdb's batch output for the target run with LJ_HLO_DEBUG=hlo_debug: break on `line`, run,
 * continue, print the stack at each stop. malloc'd. */
static char *debug_target(int line, int hlo_debug) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "env -u DEBUGINFOD_URLS gdb -q -nx -batch -ex 'set startup-with-shell off' "
           "-ex 'set environment LJ_HLO_DEBUG=%d' -ex 'set environment ASAN_OPTIONS=detect_leaks=0' "
           "-ex 'set breakpoint pending on' -ex 'break gdb_target.c:%d' -ex run -ex bt -ex continue "
           "-ex bt -ex continue %s 2>&1",
           hlo_debug, line, LJ_GDB_TARGET);
  char *out;
  tu_command(cmd, &out); /* its status is that of the last command, which fails when the
                            target has already exited */
  ck_assert_msg(strstr(out, "exited normally"), "the target did not run to its end:\n%s", out);
  return out;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

START_TEST(test_gdb_breaks_in_kernel) {
  int line = marked_line();
  char result[32];
  snprintf(result, sizeof result, "y[63] = %.6f\n", exp(0.5 * 63 / 64)); /* what the target prints */
  char at[64];
  snprintf(at, sizeof at, "gdb_target.c:%d\n", line);
  char *out = debug_target(line, 1);
  /* the second stop: the user's function at the marked line, inlined into the kernel */
  const char *second = strstr(out, "hit Breakpoint 1.2");
  ck_assert_msg(second, "gdb did not stop in a kernel:\n%s", out);
  const char *top = strstr(second, "#0  scaled_exp () at ");
  ck_assert_msg(top && strstr(top, at) == strchr(top, '\n') - strlen(at) + 1, "no user frame:\n%s", out);
  const char *k1 = strstr(top, "\n#1  lj_");
  ck_assert_msg(k1 && strstr(k1, "_body () at "), "no kernel frame under it:\n%s", out);
  ck_assert_int_eq(count(out, result), 1);
  free(out);
  out = debug_target(line, 0);
  ck_assert_int_eq(count(out, "hit Breakpoint 1"), 1);
  ck_assert_ptr_null(strstr(out, "_body () at "));
  ck_assert_int_eq(count(out, result), 1);
  free(out);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tools_gdb");
  TCase *tc = tu_tcase("gdb");
  tcase_add_test(tc, test_gdb_breaks_in_kernel);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
