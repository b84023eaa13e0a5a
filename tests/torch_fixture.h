/* torch_fixture.h — PyTorch fixture files (the tests/data/...fixtures.txt files in the format of
 * tests/data/fixture_format.py): loading the cases, uploading their inputs, and checking a
 * lazyjit result against PyTorch's output (dtype, shape and values). */
#ifndef LJ_TORCH_FIXTURE_H
#define LJ_TORCH_FIXTURE_H

#include <lazyjit.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct tf_tensor {
  lj_dtype dt;
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  int64_t n;
  double *vals;    /* float dtypes */
  int64_t *ivals;  /* integer and bool dtypes, exactly */
} tf_tensor;

enum { TF_MAX_SCALARS = 8, TF_MAX_IN = 6, TF_MAX_OUT = 3 };

typedef struct tf_case {
  char name[96], op[32];
  double scalars[TF_MAX_SCALARS];
  int nscalars;
  double tol, atol;
  tf_tensor in[TF_MAX_IN];
  int nin;
  bool expect_error;
  tf_tensor out[TF_MAX_OUT];
  int nout;
} tf_case;

/* Loads tests/data/<file> (exits with a message if it is malformed: this runs before the
 * suite, outside any test). */
tf_case *tf_load(const char *file, int *count);
/* Input t as a tensor on the default device. */
lj_tensor *tf_upload(const tf_tensor *t);
/* Asserts that r matches output k of c: dtype, shape, and values within c's tolerances
 * (exact cases bit for bit, NaN matches NaN). */
void tf_check(const tf_case *c, int k, lj_tensor *r);

#endif
