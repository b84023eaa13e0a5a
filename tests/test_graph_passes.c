/* test_graph_passes.c — each graph pass on IR text: the graph after the pass must print
 * exactly as expected (constant folding through reshapes and expands, algebraic identities
 * and view folding, dead-code elimination with renumbering, batch sums of matmuls and their
 * orientation, large reductions over leading dims in two stages), the pipeline reaches a fixed
 * point (optimizing its output changes nothing), and what must stay (x + 0 on floats, integer division by zero, parameters, roots)
 * stays; the rewriter under the passes shares equal nodes however far it grows a graph. */
#include "test_util.h"

#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

typedef void (*pass_fn)(ljg_graph *g);

typedef struct pass_case {
  const char *name;
  pass_fn pass;
  const char *in, *want; /* want NULL: the pass leaves the graph as it is */
} pass_case;

static const pass_case cases[] = {
    {"fold: constants through reshape and expand", ljg_pass_fold,
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[] constant(), value=1\n"
     "  %2 = f32[1,1] reshape(%1)\n"
     "  %3 = f32[4,3] expand(%2)\n"
     "  %4 = f32[] constant(), value=2.5\n"
     "  %5 = f32[1,1] reshape(%4)\n"
     "  %6 = f32[4,3] expand(%5)\n"
     "  %7 = f32[4,3] add(%3, %6)\n"
     "  %8 = f32[4,3] log(%7)\n"
     "  %9 = f32[4,3] mul(%0, %8), ROOT=0\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[] constant(), value=1\n"
     "  %2 = f32[1,1] reshape(%1)\n"
     "  %3 = f32[4,3] expand(%2)\n"
     "  %4 = f32[] constant(), value=2.5\n"
     "  %5 = f32[1,1] reshape(%4)\n"
     "  %6 = f32[4,3] expand(%5)\n"
     "  %7 = f32[] constant(), value=3.5\n"
     "  %8 = f32[1,1] reshape(%7)\n"
     "  %9 = f32[4,3] expand(%8)\n"
     "  %10 = f32[] constant(), value=1.2527629137039185\n"
     "  %11 = f32[1,1] reshape(%10)\n"
     "  %12 = f32[4,3] expand(%11)\n"
     "  %13 = f32[4,3] mul(%0, %12), ROOT=0\n"
     "}\n"},
    {"fold: not through parameters; integer division by zero stays", ljg_pass_fold,
     "IR {\n"
     "  %0 = f32[] scalar(), param=0, value=2\n"
     "  %1 = f32[] constant(), value=3\n"
     "  %2 = f32[] add(%0, %1), ROOT=0\n"
     "  %3 = i32[] constant(), value=7\n"
     "  %4 = i32[] constant(), value=0\n"
     "  %5 = i32[] div_trunc(%3, %4), ROOT=1\n"
     "  %6 = i32[] constant(), value=-2\n"
     "  %7 = i32[] div_floor(%3, %6), ROOT=2\n"
     "  %8 = i32[] remainder(%3, %6), ROOT=3\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[] scalar(), param=0, value=2\n"
     "  %1 = f32[] constant(), value=3\n"
     "  %2 = f32[] add(%0, %1), ROOT=0\n"
     "  %3 = i32[] constant(), value=7\n"
     "  %4 = i32[] constant(), value=0\n"
     "  %5 = i32[] div_trunc(%3, %4), ROOT=1\n"
     "  %6 = i32[] constant(), value=-2\n"
     "  %7 = i32[] constant(), value=-4, ROOT=2\n"
     "  %8 = i32[] constant(), value=-1, ROOT=3\n"
     "}\n"},
    {"simplify: identities", ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[] constant(), value=1\n"
     "  %2 = f32[1,1] reshape(%1)\n"
     "  %3 = f32[4,3] expand(%2)\n"
     "  %4 = f32[4,3] mul(%0, %3)\n"
     "  %5 = f32[4,3] neg(%4)\n"
     "  %6 = f32[4,3] neg(%5)\n"
     "  %7 = f32[4,3] stop_gradient(%6)\n"
     "  %8 = f32[4,3] cast(%7)\n"
     "  %9 = f32[] constant(), value=0\n"
     "  %10 = f32[1,1] reshape(%9)\n"
     "  %11 = f32[4,3] expand(%10)\n"
     "  %12 = f32[4,3] sub(%8, %11), ROOT=0\n"
     "  %13 = f32[4,3] add(%8, %11), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0, ROOT=0\n"
     "  %1 = f32[] constant(), value=1\n"
     "  %2 = f32[1,1] reshape(%1)\n"
     "  %3 = f32[4,3] expand(%2)\n"
     "  %4 = f32[4,3] neg(%0)\n"
     "  %5 = f32[] constant(), value=0\n"
     "  %6 = f32[1,1] reshape(%5)\n"
     "  %7 = f32[4,3] expand(%6)\n"
     "  %8 = f32[4,3] add(%0, %7), ROOT=1\n"
     "}\n"},
    {"simplify: view chains", ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[12] reshape(%0)\n"
     "  %2 = f32[2,6] reshape(%1)\n"
     "  %3 = f32[3,4] permute(%0), perm=(1,0)\n"
     "  %4 = f32[4,3] permute(%3), perm=(1,0)\n"
     "  %5 = f32[2,6] reshape(%2), ROOT=0\n"
     "  %6 = f32[4,3] add(%4, %0), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[12] reshape(%0)\n"
     "  %2 = f32[2,6] reshape(%0), ROOT=0\n"
     "  %3 = f32[3,4] permute(%0), perm=(1,0)\n"
     "  %4 = f32[4,3] add(%0, %0), ROOT=1\n"
     "}\n"},
    {"simplify: a sum of products with factors the same along its dims sums the other operands; "
     "one term without such a factor keeps the sum whole",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[1,3] data(), param=1\n"
     "  %2 = f32[4,3] expand(%1)\n"
     "  %3 = f32[4,3] mul(%0, %2)\n"
     "  %4 = f32[1,1] data(), param=2\n"
     "  %5 = f32[4,3] expand(%4)\n"
     "  %6 = f32[4,3] mul(%5, %0)\n"
     "  %7 = f32[4,3] sub(%3, %6)\n"
     "  %8 = f32[4,3] neg(%7)\n"
     "  %9 = f32[1,3] sum(%8), dims=(0), ROOT=0\n"
     "  %10 = f32[4,1] sum(%6), dims=(1), ROOT=1\n"
     "  %11 = f32[4,3] sub(%3, %0)\n"
     "  %12 = f32[1,3] sum(%11), dims=(0), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[1,3] data(), param=1\n"
     "  %2 = f32[4,3] expand(%1)\n"
     "  %3 = f32[4,3] mul(%0, %2)\n"
     "  %4 = f32[1,1] data(), param=2\n"
     "  %5 = f32[4,3] expand(%4)\n"
     "  %6 = f32[4,3] mul(%5, %0)\n"
     "  %7 = f32[4,3] sub(%3, %6)\n"
     "  %8 = f32[4,3] neg(%7)\n"
     "  %9 = f32[1,3] sum(%0), dims=(0)\n"
     "  %10 = f32[1,3] mul(%9, %1)\n"
     "  %11 = f32[1,3] neg(%10)\n"
     "  %12 = f32[1,3] expand(%4)\n"
     "  %13 = f32[1,3] mul(%9, %12)\n"
     "  %14 = f32[1,3] add(%11, %13), ROOT=0\n"
     "  %15 = f32[4,1] sum(%0), dims=(1)\n"
     "  %16 = f32[4,1] expand(%4)\n"
     "  %17 = f32[4,1] mul(%15, %16), ROOT=1\n"
     "  %18 = f32[4,3] sub(%3, %0)\n"
     "  %19 = f32[1,3] sum(%18), dims=(0), ROOT=2\n"
     "}\n"},
    {"simplify: an im2col or col2im of 1x1 windows at every pixel is a reshape; strided, it stays",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[2,3,4,5] data(), param=0\n"
     "  %1 = f32[2,3,20] im2col(%0), window=(1,1,1,1,0,0,1,1), fill=0, ROOT=0\n"
     "  %2 = f32[2,3,6] im2col(%0), window=(1,1,2,2,0,0,1,1), fill=0, ROOT=1\n"
     "  %3 = f32[2,3,20] data(), param=1\n"
     "  %4 = f32[2,3,4,5] col2im(%3), window=(1,1,1,1,0,0,1,1), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[2,3,4,5] data(), param=0\n"
     "  %1 = f32[2,3,20] reshape(%0), ROOT=0\n"
     "  %2 = f32[2,3,6] im2col(%0), window=(1,1,2,2,0,0,1,1), fill=0, ROOT=1\n"
     "  %3 = f32[2,3,20] data(), param=1\n"
     "  %4 = f32[2,3,4,5] reshape(%3), ROOT=2\n"
     "}\n"},
    {"dce: unused nodes dropped, parameters kept, renumbered", ljg_pass_dce,
     "IR {\n"
     "  %0 = f32[4] data(), param=0\n"
     "  %1 = f32[4] exp(%0)\n"
     "  %2 = f32[4] data(), param=1\n"
     "  %3 = f32[4] log(%2)\n"
     "  %4 = f32[4] neg(%0), ROOT=0\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4] data(), param=0\n"
     "  %1 = f32[4] data(), param=1\n"
     "  %2 = f32[4] neg(%0), ROOT=0\n"
     "}\n"},
    {"simplify: a gather of a float elementwise node gathers its operands, a row's broadcast value as it is",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[4,6] data(), param=0\n"
     "  %1 = f32[4,1] amax(%0), dims=(1)\n"
     "  %2 = f32[4,6] expand(%1)\n"
     "  %3 = f32[4,6] sub(%0, %2)\n"
     "  %4 = f32[4,6] exp(%3)\n"
     "  %5 = i64[4,1] data(), param=1\n"
     "  %6 = f32[4,1] gather(%4, %5), dim=1, ROOT=0\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,6] data(), param=0\n"
     "  %1 = f32[4,1] amax(%0), dims=(1)\n"
     "  %2 = f32[4,6] expand(%1)\n"
     "  %3 = f32[4,6] sub(%0, %2)\n"
     "  %4 = f32[4,6] exp(%3)\n"
     "  %5 = i64[4,1] data(), param=1\n"
     "  %6 = f32[4,1] gather(%0, %5), dim=1\n"
     "  %7 = f32[4,1] sub(%6, %1)\n"
     "  %8 = f32[4,1] exp(%7), ROOT=0\n"
     "}\n"},
    {"simplify: a gather of an integer elementwise node stays (integer division reports errors)", ljg_pass_simplify,
     "IR {\n"
     "  %0 = i32[4,6] data(), param=0\n"
     "  %1 = i32[4,6] neg(%0)\n"
     "  %2 = i64[4,1] data(), param=1\n"
     "  %3 = i32[4,1] gather(%1, %2), dim=1, ROOT=0\n"
     "}\n",
     NULL},
    {"simplify: a permute moves below a reshape that only adds or drops size-1 dims", ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[64,300] data(), param=0\n"
     "  %1 = f32[300,64] permute(%0), perm=(1,0)\n"
     "  %2 = f32[1,300,64] reshape(%1)\n"
     "  %3 = f32[64,40] data(), param=1\n"
     "  %4 = f32[1,64,40] reshape(%3)\n"
     "  %5 = f32[1,300,40] matmul(%2, %4)\n"
     "  %6 = f32[300,40] reshape(%5)\n"
     "  %7 = f32[40,300] permute(%6), perm=(1,0), ROOT=0\n"
     "  %8 = f32[40,300] data(), param=2\n"
     "  %9 = f32[] scalar(), param=3, value=0.5\n"
     "  %10 = f32[1,1] reshape(%9)\n"
     "  %11 = f32[40,300] expand(%10)\n"
     "  %12 = f32[40,300] mul(%7, %11)\n"
     "  %13 = f32[40,300] sub(%8, %12), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[64,300] data(), param=0\n"
     "  %1 = f32[300,64] permute(%0), perm=(1,0)\n"
     "  %2 = f32[1,300,64] reshape(%1)\n"
     "  %3 = f32[64,40] data(), param=1\n"
     "  %4 = f32[1,64,40] reshape(%3)\n"
     "  %5 = f32[1,300,40] matmul(%2, %4)\n"
     "  %6 = f32[300,40] reshape(%5)\n"
     "  %7 = f32[1,40,300] permute(%5), perm=(0,2,1)\n"
     "  %8 = f32[40,300] reshape(%7), ROOT=0\n"
     "  %9 = f32[40,300] data(), param=2\n"
     "  %10 = f32[] scalar(), param=3, value=0.5\n"
     "  %11 = f32[1,1] reshape(%10)\n"
     "  %12 = f32[40,300] expand(%11)\n"
     "  %13 = f32[40,300] mul(%8, %12)\n"
     "  %14 = f32[40,300] sub(%9, %13), ROOT=1\n"
     "}\n"},
    {"simplify: a permute that moves only size-1 dims is a reshape (the elements keep their order)",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[4,1,3] data(), param=0\n"
     "  %1 = f32[1,4,3] permute(%0), perm=(1,0,2), ROOT=0\n"
     "  %2 = f32[3,1] data(), param=1\n"
     "  %3 = f32[1,3] permute(%2), perm=(1,0)\n"
     "  %4 = f32[1,3] exp(%3), ROOT=1\n"
     "  %5 = f32[3,1,4] permute(%0), perm=(2,1,0), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,1,3] data(), param=0\n"
     "  %1 = f32[1,4,3] reshape(%0), ROOT=0\n"
     "  %2 = f32[3,1] data(), param=1\n"
     "  %3 = f32[1,3] reshape(%2)\n"
     "  %4 = f32[1,3] exp(%3), ROOT=1\n"
     "  %5 = f32[3,1,4] permute(%0), perm=(2,1,0), ROOT=2\n"
     "}\n"},
    {"simplify: a permute that keeps a reshape's groups of dims whole and in order moves below it "
     "(a batch split in two, its matrices transposed; a merged pair of dims moved as one)",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[6,5,4] data(), param=0\n"
     "  %1 = f32[2,3,5,4] reshape(%0)\n"
     "  %2 = f32[2,3,4,5] permute(%1), perm=(0,1,3,2), ROOT=0\n"
     "  %3 = f32[2,3,1,4] data(), param=1\n"
     "  %4 = f32[6,4] reshape(%3)\n"
     "  %5 = f32[4,6] permute(%4), perm=(1,0), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[6,5,4] data(), param=0\n"
     "  %1 = f32[2,3,5,4] reshape(%0)\n"
     "  %2 = f32[6,4,5] permute(%0), perm=(0,2,1)\n"
     "  %3 = f32[2,3,4,5] reshape(%2), ROOT=0\n"
     "  %4 = f32[2,3,1,4] data(), param=1\n"
     "  %5 = f32[6,4] reshape(%4)\n"
     "  %6 = f32[4,2,1,3] permute(%4), perm=(3,0,2,1)\n"
     "  %7 = f32[4,6] reshape(%6), ROOT=1\n"
     "}\n"},
    {"simplify: a permute that splits a reshape's group of dims, or reverses it, stays above it",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[6,4] data(), param=0\n"
     "  %1 = f32[2,3,4] reshape(%0)\n"
     "  %2 = f32[3,2,4] permute(%1), perm=(1,0,2), ROOT=0\n"
     "  %3 = f32[2,4,3] permute(%1), perm=(0,2,1), ROOT=1\n"
     "}\n",
     NULL},
    {"simplify: an add of two cats empty along their dim stays (no part to add: a cat of none "
     "broke the graph)",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f64[0,3] data(), param=0\n"
     "  %1 = f64[0,3] data(), param=1\n"
     "  %2 = f64[0,3] cat(%0, %1), dim=0\n"
     "  %3 = f64[0,3] cat(%1, %0), dim=0\n"
     "  %4 = f64[0,3] add(%2, %3), ROOT=0\n"
     "}\n",
     NULL},
    {"simplify: an add of two cats along one dim is the cat of the adds of their parts, each cut "
     "where the other's begin (autograd's sum of the gradients of q, k and v sliced from one "
     "projection; a slice of a broadcast is a broadcast); cats along other dims stay",
     ljg_pass_simplify,
     "IR {\n"
     "  %0 = f32[] constant(), value=0\n"
     "  %1 = f32[1,1,1] reshape(%0)\n"
     "  %2 = f32[2,3,8] expand(%1)\n"
     "  %3 = f32[2,3,4] data(), param=0\n"
     "  %4 = f32[2,3,12] cat(%2, %3), dim=2\n"
     "  %5 = f32[2,3,4] expand(%1)\n"
     "  %6 = f32[2,3,4] data(), param=1\n"
     "  %7 = f32[2,3,12] cat(%5, %6, %5), dim=2\n"
     "  %8 = f32[2,3,12] add(%4, %7), ROOT=0\n"
     "  %9 = f32[2,6,4] cat(%3, %6), dim=1\n"
     "  %10 = f32[2,6,4] cat(%6, %3), dim=1\n"
     "  %11 = f32[4,3,4] cat(%3, %6), dim=0\n"
     "  %12 = f32[2,6,4] reshape(%11)\n"
     "  %13 = f32[2,6,4] add(%9, %10), ROOT=1\n"
     "  %14 = f32[2,6,4] add(%9, %12), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[] constant(), value=0\n"
     "  %1 = f32[1,1,1] reshape(%0)\n"
     "  %2 = f32[2,3,8] expand(%1)\n"
     "  %3 = f32[2,3,4] data(), param=0\n"
     "  %4 = f32[2,3,12] cat(%2, %3), dim=2\n"
     "  %5 = f32[2,3,4] expand(%1)\n"
     "  %6 = f32[2,3,4] data(), param=1\n"
     "  %7 = f32[2,3,12] cat(%5, %6, %5), dim=2\n"
     "  %8 = f32[2,3,4] add(%5, %5)\n"
     "  %9 = f32[2,3,4] add(%5, %6)\n"
     "  %10 = f32[2,3,4] add(%3, %5)\n"
     "  %11 = f32[2,3,12] cat(%8, %9, %10), dim=2, ROOT=0\n"
     "  %12 = f32[2,6,4] cat(%3, %6), dim=1\n"
     "  %13 = f32[2,6,4] cat(%6, %3), dim=1\n"
     "  %14 = f32[4,3,4] cat(%3, %6), dim=0\n"
     "  %15 = f32[2,6,4] reshape(%14)\n"
     "  %16 = f32[2,3,4] add(%3, %6)\n"
     "  %17 = f32[2,3,4] add(%6, %3)\n"
     "  %18 = f32[2,6,4] cat(%16, %17), dim=1, ROOT=1\n"
     "  %19 = f32[2,6,4] add(%12, %15), ROOT=2\n"
     "}\n"},
    {"matmul: a product summed over its batch is one matmul_sum, turned where that packs less "
     "(the rows of a weight gradient become the taps) or fills the register tiles better (3 "
     "columns of 8 lanes become 3 rows of a 6-row tile)", ljg_optimize,
     "IR {\n"
     "  %0 = f32[4,8,36] data(), param=0\n"
     "  %1 = f32[4,72,36] data(), param=1\n"
     "  %2 = f32[4,36,72] permute(%1), perm=(0,2,1)\n"
     "  %3 = f32[4,8,72] matmul(%0, %2)\n"
     "  %4 = f32[4,1,8,72] reshape(%3)\n"
     "  %5 = f32[1,1,8,72] sum(%4), dims=(0)\n"
     "  %6 = f32[8,72] reshape(%5), ROOT=0\n"
     "  %7 = f32[4,3,36] data(), param=2\n"
     "  %8 = f32[4,36,3] permute(%7), perm=(0,2,1)\n"
     "  %9 = i64[4,5,6] data(), param=3\n"
     "  %10 = i64[4,6,7] data(), param=4\n"
     "  %11 = i64[4,5,7] matmul(%9, %10)\n"
     "  %12 = i64[1,5,7] sum(%11), dims=(0), ROOT=1\n"
     "  %13 = f32[4,8,3] matmul(%0, %8)\n"
     "  %14 = f32[2,2,8,3] reshape(%13)\n"
     "  %15 = f32[1,1,8,3] sum(%14), dims=(0,1), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,8,36] data(), param=0\n"
     "  %1 = f32[4,72,36] data(), param=1\n"
     "  %2 = f32[4,36,8] permute(%0), perm=(0,2,1)\n"
     "  %3 = f32[1,72,8] matmul_sum(%1, %2)\n"
     "  %4 = f32[1,8,72] permute(%3), perm=(0,2,1)\n"
     "  %5 = f32[8,72] reshape(%4), ROOT=0\n"
     "  %6 = f32[4,3,36] data(), param=2\n"
     "  %7 = i64[4,5,6] data(), param=3\n"
     "  %8 = i64[4,6,7] data(), param=4\n"
     "  %9 = i64[1,5,7] matmul_sum(%7, %8), ROOT=1\n"
     "  %10 = f32[1,3,8] matmul_sum(%6, %2)\n"
     "  %11 = f32[1,8,3] permute(%10), perm=(0,2,1)\n"
     "  %12 = f32[1,1,8,3] reshape(%11), ROOT=2\n"
     "}\n"},
    {"matmul: a batch sum read only transposed is turned, so that its transpose is a reshape (a "
     "linear layer's weight gradient over a batch of sequences, d(Wᵀ) = Σ xᵀ·dY), unless the "
     "register tiles waste more turned (32 rows in tiles of 6) than the transposed copy costs",
     ljg_optimize,
     "IR {\n"
     "  %0 = f32[4,256,192] data(), param=0\n"
     "  %1 = f32[4,256,96] data(), param=1\n"
     "  %2 = f32[4,192,256] permute(%0), perm=(0,2,1)\n"
     "  %3 = f32[4,192,96] matmul(%2, %1)\n"
     "  %4 = f32[1,192,96] sum(%3), dims=(0)\n"
     "  %5 = f32[192,96] reshape(%4)\n"
     "  %6 = f32[96,192] permute(%5), perm=(1,0), ROOT=0\n"
     "  %7 = f32[4,256,64] data(), param=2\n"
     "  %8 = f32[4,256,32] data(), param=3\n"
     "  %9 = f32[4,64,256] permute(%7), perm=(0,2,1)\n"
     "  %10 = f32[4,64,32] matmul(%9, %8)\n"
     "  %11 = f32[1,64,32] sum(%10), dims=(0)\n"
     "  %12 = f32[64,32] reshape(%11)\n"
     "  %13 = f32[32,64] permute(%12), perm=(1,0), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,256,192] data(), param=0\n"
     "  %1 = f32[4,256,96] data(), param=1\n"
     "  %2 = f32[4,96,256] permute(%1), perm=(0,2,1)\n"
     "  %3 = f32[1,96,192] matmul_sum(%2, %0)\n"
     "  %4 = f32[96,192] reshape(%3), ROOT=0\n"
     "  %5 = f32[4,256,64] data(), param=2\n"
     "  %6 = f32[4,256,32] data(), param=3\n"
     "  %7 = f32[4,64,256] permute(%5), perm=(0,2,1)\n"
     "  %8 = f32[1,64,32] matmul_sum(%7, %6)\n"
     "  %9 = f32[1,32,64] permute(%8), perm=(0,2,1)\n"
     "  %10 = f32[32,64] reshape(%9), ROOT=1\n"
     "}\n"},
    {"matmul: a product of one column is turned, a row times the matrix transposed, whatever its "
     "operands' layouts (its C lies the same either way: a reshape); a single element, or an "
     "integer product, stays",
     ljg_optimize,
     "IR {\n"
     "  %0 = f32[300,64] data(), param=0\n"
     "  %1 = f32[1,300,64] reshape(%0)\n"
     "  %2 = f32[64] data(), param=1\n"
     "  %3 = f32[1,64,1] reshape(%2)\n"
     "  %4 = f32[1,300,1] matmul(%1, %3)\n"
     "  %5 = f32[300] reshape(%4), ROOT=0\n"
     "  %6 = f32[3,64,300] data(), param=2\n"
     "  %7 = f32[3,300,64] permute(%6), perm=(0,2,1)\n"
     "  %8 = f32[3,64,1] expand(%3)\n"
     "  %9 = f32[3,300,1] matmul(%7, %8), ROOT=1\n"
     "  %10 = f32[1,1,300] permute(%4), perm=(0,2,1)\n"
     "  %11 = f32[1,1,1] matmul(%10, %4), ROOT=2\n"
     "  %12 = i32[1,5,7] data(), param=3\n"
     "  %13 = i32[1,7,1] data(), param=4\n"
     "  %14 = i32[1,5,1] matmul(%12, %13), ROOT=3\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[300,64] data(), param=0\n"
     "  %1 = f32[64] data(), param=1\n"
     "  %2 = f32[1,64,1] reshape(%1)\n"
     "  %3 = f32[1,1,64] reshape(%1)\n"
     "  %4 = f32[64,300] permute(%0), perm=(1,0)\n"
     "  %5 = f32[1,64,300] reshape(%4)\n"
     "  %6 = f32[1,1,300] matmul(%3, %5)\n"
     "  %7 = f32[1,300,1] reshape(%6)\n"
     "  %8 = f32[300] reshape(%6), ROOT=0\n"
     "  %9 = f32[3,64,300] data(), param=2\n"
     "  %10 = f32[3,64,1] expand(%2)\n"
     "  %11 = f32[3,1,64] reshape(%10)\n"
     "  %12 = f32[3,1,300] matmul(%11, %9)\n"
     "  %13 = f32[3,300,1] reshape(%12), ROOT=1\n"
     "  %14 = f32[1,1,1] matmul(%6, %7), ROOT=2\n"
     "  %15 = i32[1,5,7] data(), param=3\n"
     "  %16 = i32[1,7,1] data(), param=4\n"
     "  %17 = i32[1,5,1] matmul(%15, %16), ROOT=3\n"
     "}\n"},
    {"matmul: a batch sum of 8 matrices or more, of 1024 products an element or more, sums each "
     "half of the batch, the two then added; fewer matrices, or fewer products, sum in one",
     ljg_optimize,
     "IR {\n"
     "  %0 = f32[8,16,256] data(), param=0\n"
     "  %1 = f32[8,256,32] data(), param=1\n"
     "  %2 = f32[8,16,32] matmul(%0, %1)\n"
     "  %3 = f32[1,16,32] sum(%2), dims=(0), ROOT=0\n"
     "  %4 = f32[6,16,256] data(), param=2\n"
     "  %5 = f32[6,256,32] data(), param=3\n"
     "  %6 = f32[6,16,32] matmul(%4, %5)\n"
     "  %7 = f32[1,16,32] sum(%6), dims=(0), ROOT=1\n"
     "  %8 = f32[8,64,100] data(), param=4\n"
     "  %9 = f32[8,100,64] data(), param=5\n"
     "  %10 = f32[8,64,64] matmul(%8, %9)\n"
     "  %11 = f32[1,64,64] sum(%10), dims=(0), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[8,16,256] data(), param=0\n"
     "  %1 = f32[8,256,32] data(), param=1\n"
     "  %2 = f32[2,16,32] matmul_sum(%0, %1)\n"
     "  %3 = f32[1,16,32] slice(%2), dim=0, start=0, step=1\n"
     "  %4 = f32[1,16,32] slice(%2), dim=0, start=1, step=1\n"
     "  %5 = f32[1,16,32] add(%3, %4), ROOT=0\n"
     "  %6 = f32[6,16,256] data(), param=2\n"
     "  %7 = f32[6,256,32] data(), param=3\n"
     "  %8 = f32[1,16,32] matmul_sum(%6, %7), ROOT=1\n"
     "  %9 = f32[8,64,100] data(), param=4\n"
     "  %10 = f32[8,100,64] data(), param=5\n"
     "  %11 = f32[1,64,64] matmul_sum(%9, %10), ROOT=2\n"
     "}\n"},
    {"matmul: a product used elsewhere too, or summed over other dims, keeps its sum", ljg_optimize,
     "IR {\n"
     "  %0 = f32[4,8,36] data(), param=0\n"
     "  %1 = f32[4,36,3] data(), param=1\n"
     "  %2 = f32[4,8,3] matmul(%0, %1)\n"
     "  %3 = f32[1,8,3] sum(%2), dims=(0), ROOT=0\n"
     "  %4 = f32[4,8,3] exp(%2), ROOT=1\n"
     "  %5 = f32[4,36,5] data(), param=2\n"
     "  %6 = f32[4,8,5] matmul(%0, %5)\n"
     "  %7 = f32[4,1,5] sum(%6), dims=(1), ROOT=2\n"
     "  %8 = f32[8,4,5] permute(%6), perm=(1,0,2)\n"
     "  %9 = f32[8,1,5] sum(%8), dims=(1), ROOT=3\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,8,36] data(), param=0\n"
     "  %1 = f32[4,36,3] data(), param=1\n"
     "  %2 = f32[4,8,3] matmul(%0, %1)\n"
     "  %3 = f32[1,8,3] sum(%2), dims=(0), ROOT=0\n"
     "  %4 = f32[4,8,3] exp(%2), ROOT=1\n"
     "  %5 = f32[4,36,5] data(), param=2\n"
     "  %6 = f32[4,8,5] matmul(%0, %5)\n"
     "  %7 = f32[4,1,5] sum(%6), dims=(1), ROOT=2\n"
     "  %8 = f32[8,4,5] permute(%6), perm=(1,0,2)\n"
     "  %9 = f32[8,1,5] sum(%8), dims=(1), ROOT=3\n"
     "}\n"},
    {"matmul: a product read only transposed is computed transposed (a linear layer's weight "
     "gradient: no transposing copy)", ljg_optimize,
     "IR {\n"
     "  %0 = f32[1,64,3136] data(), param=0\n"
     "  %1 = f32[1,3136,64] permute(%0), perm=(0,2,1)\n"
     "  %2 = f32[1,64,128] data(), param=1\n"
     "  %3 = f32[1,3136,128] matmul(%1, %2)\n"
     "  %4 = f32[1,128,3136] permute(%3), perm=(0,2,1)\n"
     "  %5 = f32[128,3136] reshape(%4), ROOT=0\n"
     "  %6 = f32[128,3136] data(), param=2\n"
     "  %7 = f32[128,3136] sub(%6, %5), ROOT=1\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[1,64,3136] data(), param=0\n"
     "  %1 = f32[1,64,128] data(), param=1\n"
     "  %2 = f32[1,128,64] permute(%1), perm=(0,2,1)\n"
     "  %3 = f32[1,128,3136] matmul(%2, %0)\n"
     "  %4 = f32[128,3136] reshape(%3), ROOT=0\n"
     "  %5 = f32[128,3136] data(), param=2\n"
     "  %6 = f32[128,3136] sub(%5, %4), ROOT=1\n"
     "}\n"},
    {"reduce: sums, means and maxima over leading dims in blocks of rows", ljg_pass_reduce,
     "IR {\n"
     "  %0 = f32[4096,1024] data(), param=0\n"
     "  %1 = f32[1,1024] sum(%0), dims=(0), ROOT=0\n"
     "  %2 = f32[64,128,256] data(), param=1\n"
     "  %3 = f32[1,1,256] mean(%2), dims=(0,1), ROOT=1\n"
     "  %4 = i64[1048576] data(), param=2\n"
     "  %5 = i64[1] amax(%4), dims=(0), ROOT=2\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4096,1024] data(), param=0\n"
     "  %1 = f32[64,64,1024] reshape(%0)\n"
     "  %2 = f32[64,1,1024] sum(%1), dims=(1)\n"
     "  %3 = f32[1,1,1024] sum(%2), dims=(0)\n"
     "  %4 = f32[1,1024] reshape(%3), ROOT=0\n"
     "  %5 = f32[64,128,256] data(), param=1\n"
     "  %6 = f32[64,1,256] mean(%5), dims=(1)\n"
     "  %7 = f32[1,1,256] mean(%6), dims=(0), ROOT=1\n"
     "  %8 = i64[1048576] data(), param=2\n"
     "  %9 = i64[64,16384] reshape(%8)\n"
     "  %10 = i64[64,1] amax(%9), dims=(1)\n"
     "  %11 = i64[1,1] amax(%10), dims=(0)\n"
     "  %12 = i64[1] reshape(%11), ROOT=2\n"
     "}\n"},
    {"reduce: what stays in one stage", ljg_pass_reduce,
     "IR {\n"
     "  %0 = f32[4096,1024] data(), param=0\n"
     "  %1 = i64[1,1024] argmax(%0), dims=(0), ROOT=0\n"
     "  %2 = f32[256,64,64] data(), param=1\n"
     "  %3 = f32[1,64,1] sum(%2), dims=(0,2), ROOT=1\n"
     "  %4 = bf16[4096,1024] data(), param=2\n"
     "  %5 = bf16[1,1024] sum(%4), dims=(0), ROOT=2\n"
     "  %6 = f32[4093,1024] data(), param=3\n"
     "  %7 = f32[1,1024] sum(%6), dims=(0), ROOT=3\n"
     "  %8 = f32[4096,255] data(), param=4\n"
     "  %9 = f32[1,255] sum(%8), dims=(0), ROOT=4\n"
     "  %10 = f32[4096,1024] sum(%0), dims=(), ROOT=5\n"
     "}\n", NULL},
    {"pipeline: a fixed point", ljg_optimize,
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[] constant(), value=1\n"
     "  %2 = f32[1,1] reshape(%1)\n"
     "  %3 = f32[4,3] expand(%2)\n"
     "  %4 = f32[4,3] add(%3, %3)\n"
     "  %5 = f32[4,3] div(%4, %4)\n"
     "  %6 = f32[4,3] mul(%0, %5)\n"
     "  %7 = f32[4,3] exp(%0)\n"
     "  %8 = f32[4,3] neg(%6), ROOT=0\n"
     "}\n",
     "IR {\n"
     "  %0 = f32[4,3] data(), param=0\n"
     "  %1 = f32[4,3] neg(%0), ROOT=0\n"
     "}\n"},
};

static char *run_pass(const char *name, const char *in, pass_fn pass) {
  ljg_graph g;
  ljg_graph_init(&g);
  ljg_binding *vals = NULL;
  ck_assert_msg(ljg_graph_parse(in, &g, &vals), "%s: %s", name, lj_last_error());
  pass(&g);
  ck_assert_msg(ljg_graph_verify(&g), "%s: %s", name, lj_last_error());
  char *text = ljg_graph_text(&g, vals);
  free(vals);
  ljg_graph_free(&g);
  return text;
}

START_TEST(test_pass_output) {
  const pass_case *c = &cases[_i];
  char *got = run_pass(c->name, c->in, c->pass);
  const char *want = c->want ? c->want : c->in;
  ck_assert_msg(strcmp(got, want) == 0, "%s: got\n%s\nwant\n%s", c->name, got, want);
  free(got);
}
END_TEST

/* The pipeline reaches a fixed point: optimizing its output changes nothing. */
START_TEST(test_pipeline_is_idempotent) {
  const pass_case *c = &cases[_i];
  char *once = run_pass(c->name, c->in, ljg_optimize);
  char *twice = run_pass(c->name, once, ljg_optimize);
  ck_assert_msg(strcmp(once, twice) == 0, "%s: once\n%s\ntwice\n%s", c->name, once, twice);
  free(once);
  free(twice);
}
END_TEST

/* A rewrite that adds many more nodes than the old graph had (the rewriter's table grows):
 * every new node gets its own index, and an equal node added again, before or after the
 * growth, is the one already there. */
START_TEST(test_rewriter_grows) {
  ljg_graph old;
  ljg_graph_init(&old);
  ljg_binding *vals = NULL;
  ck_assert(ljg_graph_parse("IR {\n  %0 = f32[3] data(), param=0\n  %1 = f32[3] neg(%0), ROOT=0\n}\n", &old, &vals));
  free(vals);
  ljg_rewriter rw;
  ljg_rw_init(&rw, &old);
  for (int i = 0; i < old.n; i++) rw.map[i] = ljg_rw_copy(&rw, &old, i);
  ljg_gnode neg = old.nodes[1];
  int32_t first[1] = {rw.map[1]};
  int chain[300];
  chain[0] = rw.map[1];
  for (int i = 1; i < 300; i++) {
    int32_t in[1] = {chain[i - 1]};
    chain[i] = ljg_rw_add(&rw, &neg, in);
    ck_assert_int_eq(chain[i], rw.out.n - 1);
  }
  ck_assert_int_eq(rw.out.n, 301);
  ck_assert_int_eq(ljg_rw_add(&rw, &neg, first), chain[1]);
  for (int i = 1; i < 300; i++) {
    int32_t in[1] = {chain[i - 1]};
    ck_assert_int_eq(ljg_rw_add(&rw, &neg, in), chain[i]);
  }
  ck_assert_int_eq(rw.out.n, 301);
  rw.map[1] = chain[299];
  ljg_rw_finish(&rw, &old);
  ck_assert(ljg_graph_verify(&old));
  ck_assert_int_eq(old.n, 301);
  ljg_graph_free(&old);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("graph_passes");
  TCase *tc = tu_tcase("passes");
  int n = (int)(sizeof cases / sizeof cases[0]);
  tcase_add_loop_test(tc, test_pass_output, 0, n);
  tcase_add_loop_test(tc, test_pipeline_is_idempotent, 0, n);
  tcase_add_test(tc, test_rewriter_grows);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run(suite()); }
