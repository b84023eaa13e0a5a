/* test_runtime_precompiled.c — the GEMM routines the library was built with
 * (ljc_precompiled_routines, tools/lj_precompile.c): built with LJ_PRECOMPILE_ROUTINES on,
 * the table holds every routine once, for this host's routine target (the tests run where
 * the library was built), each object file the bytes a session compiles now; a runtime takes
 * a matmul's routine from it (PrecompiledGemmRoutines) and compiles none, unless
 * LJ_PRECOMPILED_ROUTINES is off or the target differs (another CPU), where it compiles it;
 * the results are the same. Built with it off, the table is empty. */
#include "test_util.h"

#include "codegen_llvm/codegen.h"
#include "codegen_llvm/ir.h"

#include <stdlib.h>
#include <string.h>

static const ljc_precompiled *table = &ljc_precompiled_routines;

static int64_t compiled(void) { return lj_counter_value("CompiledGemmRoutines"); }
static int64_t precompiled(void) { return lj_counter_value("PrecompiledGemmRoutines"); }

/* A session for cpu (NULL: the host) as lj_init starts one by default. */
static ljc_session *session_for(const char *cpu) {
  ljc_session *s = ljc_session_new(cpu, lj_config_default().opt_level, 0, 1, 0);
  ck_assert_ptr_nonnull(s);
  return s;
}

static ljc_session *host_session(void) { return session_for(NULL); }

/* Whether the table was built for the routine target of cpu (NULL: the host). */
static bool table_matches(const char *cpu) {
  ljc_session *s = session_for(cpu);
  bool same = table->n && strcmp(table->target, ljc_session_routine_target(s)) == 0;
  ljc_session_free(s);
  return same;
}

START_TEST(test_table_holds_every_routine_for_this_host) {
#if LJ_TEST_PRECOMPILED
  ck_assert_int_gt(table->n, 0);
  ljc_session *s = host_session();
  ck_assert_str_eq(table->target, ljc_session_routine_target(s));
  bool bf16_dot = ljc_session_bf16_dot(s);
  ljc_session_free(s);
  int defined = 0;
  for (int r = 0; r < LJC_GEMM_NROUTINES; r++) {
    if (!ljc_gemm_routine_defined(r, bf16_dot)) continue;
    defined++;
    int found = 0;
    for (int i = 0; i < table->n; i++) found += table->routine[i] == r;
    ck_assert_int_eq(found, 1);
  }
  ck_assert_int_eq(table->n, defined);
  ck_assert_int_ge(defined, 20);
  for (int i = 1; i < table->n; i++) ck_assert_uint_eq(table->offset[i], table->offset[i - 1] + table->size[i - 1]);
#else
  ck_assert_int_eq(table->n, 0);
#endif
}
END_TEST

/* The table's object of routine r is what a host session compiles now (the code generation is
 * deterministic, and the table was built from these sources). */
static void check_same_object(ljc_session *s, int r) {
  int i = 0;
  while (i < table->n && table->routine[i] != r) i++;
  ck_assert_int_lt(i, table->n);
  size_t size = 0;
  char *obj = ljc_session_build_routine(s, r, &size);
  ck_assert_ptr_nonnull(obj);
  ck_assert_uint_eq(size, table->size[i]);
  ck_assert(memcmp(obj, table->data + table->offset[i], size) == 0);
  free(obj);
}

START_TEST(test_objects_are_what_a_session_compiles) {
  if (!table_matches(NULL)) return; /* test_table_holds_every_routine_for_this_host says why */
  ljc_session *s = host_session();
  check_same_object(s, LJC_GEMM_DIRECT);
  check_same_object(s, 2 * LJC_GEMM_NVARIANTS + LJC_GEMM_TAPS_DW);
  check_same_object(s, LJC_GEMM_NVARIANTS + LJC_GEMM_ROWS); /* f64 */
  ljc_session_free(s);
}
END_TEST

/* One matmul (f32, B contiguous along n: the rows routine) in a fresh runtime of cfg, checked
 * against the interpreter; the routines it took: compiled in *c, precompiled in *p. */
static void matmul_in_runtime(const lj_config *cfg, int64_t *c, int64_t *p) {
  ck_assert_int_eq(lj_init(cfg), LJ_OK);
  int64_t c0 = compiled(), p0 = precompiled();
  lj_tensor *a = tu_tensor(LJ_F32, LJ_SHAPE(37, 80), TU_ANY, 1), *b = tu_tensor(LJ_F32, LJ_SHAPE(80, 45), TU_ANY, 2);
  tu_check1(lj_relu(lj_matmul(a, b)), 1e-4);
  *c = compiled() - c0;
  *p = precompiled() - p0;
  lj_tensor_release(a);
  lj_tensor_release(b);
  lj_shutdown();
}

START_TEST(test_runtime_takes_routine_from_table) {
  lj_config cfg = lj_config_default();
  cfg.precompiled_routines = true;
  bool from_table = table_matches(cfg.cpu && *cfg.cpu ? cfg.cpu : NULL); /* LJ_CPU may name another */
  int64_t c, p;
  matmul_in_runtime(&cfg, &c, &p);
  ck_assert_int_eq(c, !from_table);
  ck_assert_int_eq(p, from_table);
  /* a later runtime of the process: from the table again, else from the process's store */
  matmul_in_runtime(&cfg, &c, &p);
  ck_assert_int_eq(c, 0);
  ck_assert_int_eq(p, from_table);
}
END_TEST

/* A fresh runtime of cfg compiles its matmul's routine and takes none from the table. */
static void check_compiles(const lj_config *cfg) {
  int64_t c, p;
  matmul_in_runtime(cfg, &c, &p);
  ck_assert_int_eq(c, 1);
  ck_assert_int_eq(p, 0);
}

START_TEST(test_off_compiles) {
  lj_config cfg = lj_config_default();
  cfg.precompiled_routines = false;
  check_compiles(&cfg);
}
END_TEST

/* Another target (a CPU named; LLVM's haswell here) does not match the table's: compiled. */
START_TEST(test_other_target_compiles) {
  if (!tu_host_runs("haswell")) return;
  lj_config cfg = lj_config_default();
  cfg.cpu = "haswell";
  check_compiles(&cfg);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_precompiled");
  TCase *tc = tu_tcase("table");
  tcase_add_test(tc, test_table_holds_every_routine_for_this_host);
  tcase_add_test(tc, test_objects_are_what_a_session_compiles);
  suite_add_tcase(s, tc);
  tc = tu_tcase("runtime");
  tcase_add_test(tc, test_runtime_takes_routine_from_table);
  tcase_add_test(tc, test_off_compiles);
  tcase_add_test(tc, test_other_target_compiles);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
