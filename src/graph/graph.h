/* graph.h — the graph stage: op table, trace nodes (hash-consed, per-device arena), the
 * canonical graph a sync collects, graph passes, fusion into kernels, the buffer plan, the
 * text/dot printers and parser, and the reference interpreter. Prefix ljg_. */
#ifndef LJ_GRAPH_H
#define LJ_GRAPH_H

#include "base/base.h"

struct ljr_buffer;

/* ---- op table (ops.def) ------------------------------------------------------------- */

typedef enum ljg_op {
#define X(name, str, arity, kind, attrs, types) LJG_OP_##name,
#include "graph/ops.def"
#undef X
  LJG_NUM_OPS
} ljg_op;

typedef enum ljg_kind {
  LJG_LEAF,     /* data, scalar parameter, constant */
  LJG_INDEXED,  /* a leaf whose value depends on its index (iota, random) */
  LJG_ELEMWISE, /* same-shape operands, one value per element */
  LJG_VIEW,     /* a re-indexing of its operand */
  LJG_REDUCE,
  LJG_CAT,
  LJG_MATMUL,
  LJG_WINDOW,   /* im2col / col2im */
  LJG_INDEX     /* gather / scatter_add */
} ljg_kind;

/* Which attribute fields an op uses (printed, parsed, hashed). */
typedef enum ljg_attrs {
  LJG_A_NONE,
  LJG_A_VALUE, /* f: the scalar's or constant's value */
  LJG_A_PERM,  /* a[0..ndim): the permutation */
  LJG_A_SLICE, /* a[0] dim, a[1] start, a[2] step */
  LJG_A_DIMS,  /* a[0]: bit mask of reduced dims */
  LJG_A_DIM,   /* a[0]: dim */
  LJG_A_BOUND, /* a[0]: exclusive upper bound; a[1]: the op whose index it checks, named by its
                  errors (0: none, the check's own name) */
  LJG_A_WINDOW /* a[0..7]: kh, kw, sh, sw, ph, pw, dh, dw; f: padding value */
} ljg_attrs;

/* The dtypes an op's values may have: an elementwise op's operands (where's cond aside), a
 * matmul's, col2im's and scatter_add's result. */
typedef enum ljg_types {
  LJG_T_ANY,    /* every dtype */
  LJG_T_NUMBER, /* every dtype but bool */
  LJG_T_FLOAT   /* floats only: the frontend computes integers and bool in f32 */
} ljg_types;

typedef struct ljg_opinfo {
  const char *name;
  int arity;
  ljg_kind kind;
  ljg_attrs attrs;
  ljg_types types;
} ljg_opinfo;

extern const ljg_opinfo ljg_ops[LJG_NUM_OPS];
/* Op by printed name; -1 if unknown. */
int ljg_op_by_name(const char *name);
/* Whether elementwise op op gives bool whatever its operands' dtype (comparisons, logic,
 * isnan). */
bool ljg_op_gives_bool(int op);
/* Whether no gradient flows through a node of op with result dtype dt: leaves, stop_gradient,
 * and results that are not floats. */
bool ljg_op_blocks_grad(int op, lj_dtype dt);

/* dtype.c: facts about dtypes and the host conversions of 16-bit floats. */
bool ljg_dtype_is_float(lj_dtype dt);
bool ljg_dtype_is_signed(lj_dtype dt);
/* An index's dtype (gather's and scatter_add's index, argmax's result): i64, or i32 or i8
 * where the frontend knows the indices are small (max-pool's window positions). */
bool ljg_dtype_is_index(lj_dtype dt);
bool ljg_dtype_valid(int dt);
int ljg_dtype_bits(lj_dtype dt);
/* dtype by name ("f32"); -1 if unknown. */
int ljg_dtype_by_name(const char *name);
float ljg_bf16_to_f32(uint16_t h);
uint16_t ljg_f32_to_bf16(float f); /* round to nearest even; NaN stays NaN */
float ljg_f16_to_f32(uint16_t h);
uint16_t ljg_f32_to_f16(float f); /* round to nearest even */
/* One element at p of dtype dt as double / int64 (ints exactly), and the stores back.
 * Float stores round (bf16/f16 through f32); integer stores wrap. */
double ljg_load_f64(lj_dtype dt, const void *p, int64_t i);
int64_t ljg_load_i64(lj_dtype dt, const void *p, int64_t i);
void ljg_store_f64(lj_dtype dt, void *p, int64_t i, double v);
void ljg_store_i64(lj_dtype dt, void *p, int64_t i, int64_t v);
/* Float to integer as x86 truncation does (PyTorch's behaviour on this platform). */
int64_t ljg_float_to_int(lj_dtype to, double v);

static inline int64_t ljg_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* ---- trace nodes (node.c) ------------------------------------------------------------- */

typedef struct ljg_attr {
  int64_t a[LJ_MAX_DIMS];
  double f;
} ljg_attr;

/* A node of a device's pending graph: a small record in the trace arena. Nodes are
 * hash-consed: recording an op equal to an existing node (same op, dtype, shape, attributes,
 * operands) returns the existing node. Scalar parameters are never shared (each use is its
 * own parameter slot); data nodes are shared per buffer. */
typedef struct ljg_node {
  ljb_hash hash;            /* identity hash for hash-consing (operand identity) */
  uint32_t id;              /* creation order in the trace */
  uint16_t op;
  uint8_t dtype, ndim;
  int32_t nin;
  struct ljg_node **in;
  int64_t shape[LJ_MAX_DIMS];
  ljg_attr attr;
  /* DATA: its buffer. Any other node: the buffer a sync computed for it, after which later
   * graphs use it as data instead of recomputing it. One reference, dropped at reset. */
  struct ljr_buffer *data;
  const char *loc;          /* user call site (LJ_IR_DEBUG, ljb_call_site) or NULL */
  struct ljg_node *chain;   /* next node in the same hash-cons bucket */
  uint64_t lhash;           /* local description: op, dtype, shape, identity attributes */
  uint64_t walk;            /* collect.c: walk stamp */
  int32_t index;            /* collect.c: canonical index during a walk */
  /* Autograd's bookkeeping (frontend/autograd.c): grad_below, a tensor that requires grad
   * lies below through ops gradients flow through (set on the leaves' nodes and on values
   * computed from them, propagated by every node made outside ljg_trace.no_grad); grad_lost,
   * a value a sync computed from such tensors, whose graph is gone. */
  bool grad_below, grad_lost;
} ljg_node;

/* A device's trace: the arena its nodes live in and the hash-cons table. */
typedef struct ljg_trace {
  ljb_arena arena;
  ljg_node **table;
  uint32_t table_cap;
  uint64_t epoch;           /* bumped at every reset: tensors' cached nodes go stale */
  uint64_t walk;            /* collect.c: last walk stamp */
  uint64_t scalar_seq;      /* unique ids that keep scalar parameters apart */
  LJB_VEC(ljg_node *) by_id; /* every node, by id (replaying a walk finds nodes by id) */
  LJB_VEC(ljg_node *) held; /* nodes holding a buffer reference */
  bool call_sites;          /* LJ_IR_DEBUG: new nodes record the user's call site (loc) */
  bool no_grad;             /* nodes made meanwhile (a backward pass) never set grad_below */
  bool any_grad;            /* some node has grad_below: new nodes look at their operands' */
} ljg_trace;

void ljg_trace_init(ljg_trace *t);
/* Drops every node and the buffer references they hold. */
void ljg_trace_reset(ljg_trace *t);
/* Drops the buffer references of the nodes that none of live[0..n) reaches through operands:
 * no op can read them any more, while the trace lives on for the pending ones. */
void ljg_trace_release_unreached(ljg_trace *t, int n, ljg_node *const *live);
void ljg_trace_free(ljg_trace *t);
/* The node for op(in...) with the given result type and attributes (hash-consed). attr may
 * be NULL (all zero). */
ljg_node *ljg_node_make(ljg_trace *t, ljg_op op, lj_dtype dt, int ndim, const int64_t *shape,
                        int nin, ljg_node *const *in, const ljg_attr *attr);
/* The data node of buffer b (one per buffer per trace; takes a reference to b). */
ljg_node *ljg_node_data(ljg_trace *t, struct ljr_buffer *b, lj_dtype dt, int ndim,
                        const int64_t *shape);
/* A fresh scalar parameter node (never shared): value f for float dtypes, i otherwise. The
 * value sits in attr.f / attr.a[1]; attr.a[0] is the sequence number that keeps it apart. */
ljg_node *ljg_node_scalar(ljg_trace *t, lj_dtype dt, double f, int64_t i);
/* Records that n's value is in buffer b (takes a reference). */
void ljg_node_set_data(ljg_trace *t, ljg_node *n, struct ljr_buffer *b);

/* ---- canonical graphs (collect.c) ------------------------------------------------------ */

/* A node of a collected graph: operands are indices of earlier nodes (post-order). */
typedef struct ljg_gnode {
  uint16_t op;
  uint8_t dtype, ndim;
  int32_t nin;
  int32_t in0;    /* operands are g->operands[in0 .. in0+nin) */
  int32_t param;  /* DATA and SCALAR: parameter index; otherwise -1 */
  int64_t shape[LJ_MAX_DIMS];
  ljg_attr attr;  /* SCALAR's value is a binding, not part of the graph's identity */
  const char *loc;
} ljg_gnode;

/* A self-contained graph in canonical (post-order) form: what a sync compiles and caches. */
typedef struct ljg_graph {
  int n, cap;
  ljg_gnode *nodes;
  int nops, ops_cap;
  int32_t *operands;
  int nroots, roots_cap;
  int32_t *roots;   /* node index of each root, in root order (a node may repeat) */
  int32_t *donors;  /* per root: the DATA parameter whose buffer may receive the root's value
                       (buffer donation: the caller lets the run overwrite it), or -1 */
  int nparams, params_cap;
  int32_t *params;  /* node index of each parameter, in first-use order */
  char *strings;    /* call-site strings owned by the graph (NULL when none) */
} ljg_graph;

/* What a parameter is bound to when the graph runs: a DATA parameter's buffer, or a SCALAR
 * parameter's value (f for float dtypes, i for integer and bool dtypes). */
typedef struct ljg_binding {
  struct ljr_buffer *buf; /* borrowed from the trace */
  double f;
  int64_t i;
} ljg_binding;

typedef LJB_VEC(ljg_binding) ljg_binding_vec;

static inline const int32_t *ljg_in(const ljg_graph *g, const ljg_gnode *n) {
  return g->operands + n->in0;
}
static inline int64_t ljg_gnumel(const ljg_gnode *n) { return ljg_numel(n->ndim, n->shape); }

void ljg_graph_init(ljg_graph *g);
void ljg_graph_free(ljg_graph *g);
void ljg_graph_clear(ljg_graph *g);
ljg_graph *ljg_graph_clone(const ljg_graph *g);
/* Appends a node (operands copied); returns its index. */
int ljg_graph_add(ljg_graph *g, const ljg_gnode *proto, const int32_t *in);
/* Appends node `node` to g's roots, with the parameter it may be written into (-1: none). */
void ljg_graph_add_root(ljg_graph *g, int32_t node, int32_t donor);
/* Collects the graph that computes roots[0..n) into g (cleared first), walking operands in
 * order; data nodes and nodes with a computed buffer become DATA parameters, scalar nodes
 * SCALAR parameters, in first-use order. binds (may be NULL) receives one binding per
 * parameter. */
void ljg_collect(ljg_trace *t, int n, ljg_node *const *roots, ljg_graph *g,
                 ljg_binding_vec *binds);

/* The walk ljg_collect makes, kept: the trace nodes below the roots in canonical post-order,
 * the roots' indices, and the walk key, a hash of each node's local description
 * (ljg_node.lhash, or its type for a parameter) and operand indices. Equal walk keys collect
 * equal graphs up to hash collisions, which ljg_walk_matches rules out: a sync seen before
 * finds its executable without building its graph. */
typedef struct ljg_walk {
  LJB_VEC(ljg_node *) order;
  LJB_VEC(int32_t) roots;
  LJB_VEC(int32_t) donors; /* per root: the index of its donor's node in order, or -1 */
  ljb_hash key;
} ljg_walk;
/* donors (NULL: none) gives each root the node of a buffer the run may write the root's value
 * into (the value the root replaces, lj_assign), or NULL. A donor that is not a DATA parameter
 * of the walked graph, or differs from its root in dtype or size, is dropped. */
void ljg_walk_run(ljg_trace *t, int n, ljg_node *const *roots, ljg_node *const *donors,
                  ljg_walk *w, ljg_binding_vec *binds);
void ljg_walk_free(ljg_walk *w);
/* The walk's graph, into g (cleared first). */
void ljg_walk_graph(const ljg_walk *w, ljg_graph *g);
/* Whether the walk's graph equals g, compared node by node without building it; valid until
 * the next walk of the trace. */
bool ljg_walk_matches(const ljg_walk *w, const ljg_graph *g);
/* Replays a walk: whether the trace below roots[0..n) (with donors, as ljg_walk_run takes
 * them) is g again with the node ids it had (ids[i]: the id of g's node i when it was
 * walked), checked node by node in g's order against the nodes those ids name now: their
 * descriptions, operands, roots and donors. A program
 * that records the same step again gives its nodes the same ids (the trace restarts at every
 * sync that leaves nothing pending), so a step seen before is recognized without the walk's
 * chain of dependent loads. On success binds holds one binding per parameter, as a walk
 * leaves it. */
bool ljg_replay(const ljg_trace *t, const uint32_t *ids, const ljg_graph *g, int n,
                ljg_node *const *roots, ljg_node *const *donors, ljg_binding_vec *binds);
/* The attribute words that are part of a node's identity (scalar values are not). */
int ljg_identity_attrs(int op, int ndim, const ljg_attr *a, int64_t out[LJ_MAX_DIMS + 2]);
/* A node's local hash (ljg_node.lhash): op, dtype, shape and identity attributes. */
uint64_t ljg_local_hash(int op, int dt, int ndim, const int64_t *shape, const ljg_attr *attr);

/* The graph key: env seed + every node's op, dtype, shape, attributes and operand indices +
 * the roots and their donors. Two graphs have the same key exactly when they compute the same function of
 * their parameters (up to hash collisions, which ljg_graph_equal rules out). */
ljb_hash ljg_graph_key(const ljg_graph *g, ljb_hash env_seed);
bool ljg_graph_equal(const ljg_graph *a, const ljg_graph *b);
/* Index of the first node where a and b differ, or -1 when equal (used to explain misses). */
int ljg_graph_first_difference(const ljg_graph *a, const ljg_graph *b);
/* How many nodes are equal at the same index in a and b. */
int ljg_graph_same_nodes(const ljg_graph *a, const ljg_graph *b);
/* Structural checks: operand arity, dtypes and shapes consistent with each op. Returns false
 * and sets LJ_ERR_ARG with the node when not (the parser and passes use it). */
bool ljg_graph_verify(const ljg_graph *g);
/* The output size of a window (attrs a[0..7]) over an h x w image; false if the attributes
 * are invalid or the window does not fit. */
bool ljg_window_out(const int64_t *a, int64_t h, int64_t w, int64_t *oh, int64_t *ow);

/* ---- passes (rewrite.c, pass_*.c, passes.c) ------------------------------------------- */

/* Builds a new graph from an old one node by node, sharing equal nodes (CSE). A pass maps
 * each old node to a new index: either a node it adds or one that already stands for it. */
typedef struct ljg_rewriter {
  ljg_graph out;
  int32_t *map;          /* old index -> new index */
  int32_t *table;        /* CSE hash table of new indices (-1 empty) */
  int table_cap;
} ljg_rewriter;
void ljg_rw_init(ljg_rewriter *rw, const ljg_graph *old);
/* Adds proto(in...) to the new graph unless an equal node exists; returns its index.
 * Parameters are always added (they are never merged). */
int ljg_rw_add(ljg_rewriter *rw, const ljg_gnode *proto, const int32_t *in);
/* Adds old node i with its operands mapped. */
int ljg_rw_copy(ljg_rewriter *rw, const ljg_graph *old, int i);
/* Replaces old with the new graph (roots mapped) and frees the rewriter. */
void ljg_rw_finish(ljg_rewriter *rw, ljg_graph *old);
/* Whether node idx is a constant seen through reshapes and expands; *v gets its value. */
bool ljg_uniform_const(const ljg_graph *g, int idx, double *v);
/* Adds the constant v of dtype dt and the given shape: a 0-d constant, reshaped to ndim dims
 * of 1 and expanded to shape (as far as needed); returns its index. */
int ljg_rw_const(ljg_rewriter *rw, lj_dtype dt, double v, int ndim, const int64_t *shape);

/* Each pass rewrites g in place and keeps parameters and roots (their values unchanged). */
void ljg_pass_simplify(ljg_graph *g);   /* algebraic identities, view folding */
void ljg_pass_fold(ljg_graph *g);       /* constant folding of constant-only subgraphs */
void ljg_pass_matmul(ljg_graph *g);     /* 16-bit float products in f32; batch sums into matmul_sum; steps' and summed products joined; (Bᵀ·Aᵀ)ᵀ where it pays */
void ljg_pass_dce(ljg_graph *g);        /* drops nodes no root uses; renumbers */
void ljg_pass_reduce(ljg_graph *g);     /* long reductions over leading dims in two stages */
/* The pipeline: simplify, fold, dce, matmul, dce, reduce, simplify, dce, with the verifier after each. */
void ljg_optimize(ljg_graph *g);

/* ---- text and dot (text.c, dot.c) ------------------------------------------------------ */

/* binds may be NULL; when given, scalar values are printed from it. */
char *ljg_graph_text(const ljg_graph *g, const ljg_binding *binds);
/* Node i's line of the text (without indent and newline), malloc'd. */
char *ljg_node_text(const ljg_graph *g, int i, const ljg_binding *binds);
char *ljg_graph_dot(const ljg_graph *g);
/* Parses the first graph in text; when binds is given it receives a malloc'd array of
 * g->nparams bindings with the scalar values of the text (buffers NULL). Returns false with
 * LJ_ERR_ARG and the line number on a syntax or structural error. */
bool ljg_graph_parse(const char *text, ljg_graph *g, ljg_binding **binds);

/* ---- reference interpreter (interp.c) -------------------------------------------------- */

/* Runs g on the host with plain loops (f64 accumulation, int64 for integers): inputs[p] is
 * the host data of DATA parameter p, scalars[p] the value of SCALAR parameter p (other
 * entries unused). outputs[r] receives root r (caller-allocated, numel × dtype size).
 * Returns LJ_ERR_RUNTIME for an integer division by zero, like compiled code. */
lj_status ljg_interpret(const ljg_graph *g, const void *const *inputs,
                        const ljg_binding *scalars, void *const *outputs);

/* ---- views (view.c) ---------------------------------------------------------------------- */

/* A strided view: maps an index of `shape` to offset + sum(idx[d] * stride[d]). */
typedef struct ljg_view1 {
  int ndim;
  int64_t shape[LJ_MAX_DIMS];
  int64_t stride[LJ_MAX_DIMS];
  int64_t offset;
} ljg_view1;

enum { LJG_MAX_VIEWS = 4 };
/* A stack of strided views (a shape tracker): v[n-1] maps an index of the top shape to a
 * linear position in the shape of v[n-2] (row-major), and so on down to v[0], whose result
 * is the element offset in the buffer. One level means the offset is affine in the index. */
typedef struct ljg_view {
  int n;
  ljg_view1 v[LJG_MAX_VIEWS];
} ljg_view;

void ljg_view_contiguous(ljg_view *v, int ndim, const int64_t *shape);
const ljg_view1 *ljg_view_top(const ljg_view *v);
/* Whether two views address the same elements in the same order (level by level). */
bool ljg_view_equal(const ljg_view *a, const ljg_view *b);
/* Whether v is one level that reads its shape's elements one after another from offset 0. */
bool ljg_view_row_major(const ljg_view *v);
/* Whether level t has shape (ndim dims) and walks it in row-major order from its offset. */
bool ljg_view1_walks(const ljg_view1 *t, int ndim, const int64_t *shape);
/* A transposed read (x.t(), a permute): the first dim t before the last, j, along which v,
 * one level, is contiguous, with both t and j at least min long and j neither contiguous nor
 * broadcast; -1 when v is no such read. The lowering reads such an operand of an elementwise
 * nest in tiles. */
int ljg_view_transposed_dim(const ljg_view *v, int64_t min);
void ljg_view_permute(ljg_view *v, const int64_t *perm);
void ljg_view_expand(ljg_view *v, const int64_t *shape);
void ljg_view_slice(ljg_view *v, int dim, int64_t start, int64_t step, int64_t len);
/* Returns false when the reshape needs more than LJG_MAX_VIEWS levels. */
bool ljg_view_reshape(ljg_view *v, int ndim, const int64_t *shape);
/* Applies a graph view node (RESHAPE/PERMUTE/EXPAND/SLICE) to v; false on overflow. */
bool ljg_view_apply(ljg_view *v, const ljg_gnode *op);
/* The first node below i that is not a view op (i itself when it is none). */
int32_t ljg_strip_views(const ljg_graph *g, int32_t i);
/* The view of node src's buffer seen through the chain of view nodes from top down to src;
 * false when the chain is too long or needs more than LJG_MAX_VIEWS levels. */
bool ljg_chain_view(const ljg_graph *g, int32_t top, int32_t src, ljg_view *v);
/* The same through node `past` on the chain, not a view node: an elementwise op of one
 * operand that keeps its shape (a cast), which views commute with. */
bool ljg_chain_view_past(const ljg_graph *g, int32_t top, int32_t src, int32_t past, ljg_view *v);
/* The im2col node (zero fill, [N, C·KH·KW, OH·OW]) that matmul operand x is, seen whole
 * through reshapes (a convolution's B; the A of its weight gradient turned, Σ cols·dYᵀ) or,
 * when transposed, through a transpose of its last two dims (that gradient's B before it is
 * turned, dY·colsᵀ); -1 when it is not. */
int32_t ljg_cols_operand(const ljg_graph *g, int32_t x, bool transposed);
/* Offset of index idx under v (host-side evaluation, for tests and the interpreter). */
int64_t ljg_view_offset(const ljg_view *v, const int64_t *idx);

/* ---- kernel IR (fuse.c) ------------------------------------------------------------------ */

/* Kernel expressions: a DAG evaluated once per point of a loop nest's iteration space. */
typedef enum ljg_xkind {
  LJG_X_LOAD,   /* buffer slot, through view: element at view(offset of the point) */
  LJG_X_SCALAR, /* scalar slot */
  LJG_X_CONST,  /* value */
  LJG_X_INDEX,  /* IOTA/RAND_*: a function of view(point) = the leaf's own linear index */
  LJG_X_OP,     /* elementwise op of in[0..nin) */
  LJG_X_BUFFER, /* a buffer operand (slot, view) read by GATHER, not by itself */
  LJG_X_GATHER  /* BUFFER in[1] at the point with dim aux replaced by the value of in[0] */
} ljg_xkind;

typedef struct ljg_kexpr {
  uint8_t kind;
  uint8_t dtype;
  uint16_t op;
  int8_t nin;
  int32_t in[3];
  int32_t slot;
  int32_t view;
  int32_t node;  /* graph node, for messages */
  int32_t aux;   /* GATHER: the dim; INDEX_CHECK: unused (bound in value) */
  double value;
} ljg_kexpr;

/* A loop nest: iterate over shape; dims whose bit is set in rmask are reduced with rop (the
 * reduced dims come last). The value of expression `value` at each point goes to slot
 * out_slot at offset out_view(point), reduced points combined. A kernel split across threads
 * splits the nest's first row_dims dims (at least 1) as one index, row-major: the nest's
 * rows. */
typedef struct ljg_nest {
  int ndim;
  int row_dims;
  int64_t shape[LJ_MAX_DIMS];
  uint32_t rmask;
  int16_t rop;        /* LJG_OP_SUM..ARGMIN, or -1 */
  int32_t value;
  int32_t out_slot;
  int32_t out_view;   /* index in the kernel's views; reduced dims have stride 0 */
  uint8_t out_dtype;
  int64_t rcount;     /* number of reduced points (MEAN divides by it) */
  int32_t scatter_index; /* >= 0: scatter-add at the point with dim scatter_dim replaced by
                            the value of this expression (the out view covers the whole output) */
  int32_t scatter_dim;
} ljg_nest;

typedef enum ljg_kkind { LJG_K_LOOPS, LJG_K_MATMUL, LJG_K_WINDOW } ljg_kkind;

/* A MATMUL whose B is contiguous along n and whose k is at most LJG_MATMUL_DIRECT_K reads B
 * where it is; longer ones pack it, block of rows by block of rows, unless few rows share it
 * (ljg_matmul_b_in_place). */
enum { LJG_MATMUL_DIRECT_K = 16 };
/* Whether a matmul of m rows a matrix over `batch` matrices, k by n, of dtype dt, reads B
 * (seen through view b, [batch, K, N]) where it is rather than packed (codegen_llvm/gemm.c's
 * DIRECT variant): B contiguous along n, and k at most LJG_MATMUL_DIRECT_K, or few rows sharing
 * B (a matrix's, or the batch's where B is the same for all): each register tile of rows reads
 * B's panels where they lie, and packing them costs more than it saves while those reads stay
 * in the caches (pass_matmul.c). */
bool ljg_matmul_b_in_place(const ljg_view1 *b, int64_t batch, int64_t m, int64_t k, int64_t n, lj_dtype dt);
/* A MATMUL kernel of at most LJG_MATMUL_COL_SPLIT_ROWS rows of C (over all its matrices),
 * f32 or f64, whose nests allow it (fuse.c's nests_by_columns), splits its columns between
 * threads instead of its rows when that gives as many tasks as its rows or
 * LJG_MATMUL_COL_SPLIT_TASKS: its tasks are blocks of LJG_MATMUL_COL_TASK columns, each
 * computed for every row. Split by rows, every thread packs all of B, and one row is one task
 * (a matrix-vector product ran on one thread). Two threads, x·Wᵀ for a W of 512×784: 64 rows
 * 0.138 -> 0.120 ms, 128 rows 0.243 -> 0.225, 256 rows 0.457 -> 0.424. */
enum { LJG_MATMUL_COL_TASK = 64, LJG_MATMUL_COL_SPLIT_ROWS = 256, LJG_MATMUL_COL_SPLIT_TASKS = 8 };
/* Rows of C a matmul kernel's register tile holds with 16 vector registers (codegen_llvm/gemm.c;
 * 8 with AVX-512's 32); the orientation of batch sums (pass_matmul.c) counts the rows a
 * product leaves unused in its last tile. */
enum { LJG_MATMUL_TILE_ROWS = 6 };

/* The convolutions that go through Winograd's transforms (codegen_llvm/winograd.c): f32, a
 * window (im2col attributes) of 3×3 or 5×5, stride and dilation 1, at least
 * LJG_WINOGRAD_MIN_CHANNELS channels in and LJG_WINOGRAD_MIN_ROWS out (the transforms do not
 * pay for fewer). */
enum { LJG_WINOGRAD_MIN_CHANNELS = 8, LJG_WINOGRAD_MIN_ROWS = 8 };
static inline bool ljg_winograd_window(const int64_t *w) {
  return (w[0] == 3 || w[0] == 5) && w[1] == w[0] && w[2] == 1 && w[3] == 1 && w[6] == 1 && w[7] == 1;
}

/* Which operand of a matmul kernel is an im2col packed from its image (implicit GEMM): A, B,
 * or B the im2col transposed (its rows of k window positions, its columns taps: a grouped
 * convolution's weight gradient, dY·colsᵀ for each image). */
typedef enum ljg_mm_cols { LJG_MM_COLS_NONE, LJG_MM_COLS_A, LJG_MM_COLS_B, LJG_MM_COLS_BT } ljg_mm_cols;

/* The operand (0: A, 1: B) that an implicit GEMM's im2col is, for mm_cols c (not NONE). */
static inline int ljg_mm_cols_operand(int c) { return c == LJG_MM_COLS_A ? 0 : 1; }

/* A kernel: one compiled function. LOOPS kernels run their nests in order and split the
 * first nest dim that is not reduced (the task dim) across threads; MATMUL kernels compute
 * C[b,m,:] = A[b,m,:] · B[b,:,:] for one (b, m) row per task; WINDOW kernels run im2col or
 * col2im for one (n, c) image plane per task (row-fused, also nests over the same rows). */
typedef struct ljg_kernel {
  ljg_kkind kind;
  int32_t node;       /* the graph node it computes */
  int nnests;
  ljg_nest *nests;
  int nexprs;
  ljg_kexpr *exprs;
  int nviews;
  ljg_view *views;
  int task_dim;       /* LOOPS, and a MATMUL with nests: the split dim of every nest (-1: one
                         task) */
  int64_t ntasks;
  int64_t row_block;  /* after row fusion: the nests run in order on blocks of this many rows
                         (a MATMUL kernel computes the block's rows of C first, the window runs
                         after the first win_at nests), not one after another over the task
                         range (0) */
  int64_t task_rows;  /* a LOOPS kernel after row fusion: 0, or a task is task_rows rows that the
                         nests before per_task_at run on (in blocks of row_block rows), and
                         the nests from per_task_at then run on the task itself: a column sum
                         in blocks of rows over what those rows read (fuse_rows.c) */
  int per_task_at;
  int64_t col_block;  /* a row-fused LOOPS kernel of wide rows: 0, or each block of rows runs its
                         nests on this many columns at a time, every nest's last kept dim (of one
                         length in all of them) cut alike (fuse_rows.c's column_block) */
  double work;        /* rough cost: points × expression size, for the threading decision */
  /* MATMUL */
  int64_t mm_b, mm_m, mm_n, mm_k; /* mm_b: the matrices A and B hold */
  int32_t mm_a, mm_bm;  /* kexpr LOADs of A and B (their views give the strides); of mm_dtype,
                           or both bf16 for an f32 product (ljg_fuse_options.bf16_dot) */
  int32_t mm_out_slot;
  uint8_t mm_dtype;
  int64_t mm_sum;       /* 0; or (MATMUL_SUM) C holds this many matrices, each the products
                           summed over one of as many equal runs of the batch: the tasks are
                           the rows (or column blocks) of each in turn */
  uint8_t mm_col_tasks; /* 0: tasks are rows of C; else blocks of this many columns of C,
                           every row each (ntasks: the blocks): LJG_MATMUL_COL_TASK, or
                           LJG_TAPS_COL_TASK for the taps routine */
  uint8_t mm_no_winograd; /* a convolution's products summed as they are, never through
                             Winograd's transforms (ljg_fuse_options.no_winograd) */
  int64_t mm_task_rows; /* rows of C a task computes: 1, or a col2im's KH·KW when it joined
                           (its tasks are image planes, each the sum of that many rows) */
  int64_t mm_a_period;  /* 0; or A's LOAD reads this many matrices, which repeat along the
                           batch: matrix b's A is matrix b mod mm_a_period's (a grouped
                           convolution's weight, [G, M, K], for the N·G matrices of its images'
                           groups, never copied for each image) */
  /* Implicit GEMM: operand A or B (mm_cols) is the im2col of the image [N, C, H, W] that
   * its LOAD (mm_a or mm_bm) reads, with window mm_win (kh, kw, sh, sw, ph, pw, dh, dw; fill
   * 0) and OH × OW windows: the matmul routine packs it from the image. */
  uint8_t mm_cols; /* ljg_mm_cols */
  int64_t mm_win[8];
  int64_t mm_img[4];
  int64_t mm_oh, mm_ow;
  /* A weight gradient of the taps routine (ljg_taps_dw) whose B is a 2×2 max-pool's gradient,
   * unpooled where it is read (fuse_unpool.c): mm_bm then loads the pooled gradient G as
   * [batch, pooled positions, columns], and B's element (b, y·OW + x, n) is G's (b,
   * (y/2)·OW/2 + x/2, n) where the position mm_unpool_at loads there (i8, in its 2×2 window)
   * is 2·(y%2) + x%2 and, when mm_unpool_mask >= 0, that load's element is above 0 (a relu's
   * gradient); 0 elsewhere. Both views are G's. -1: B is read as it is. */
  int32_t mm_unpool_at, mm_unpool_mask;
  /* The window: im2col or col2im of the LOAD win_src into win_out_slot, an (n, c) image
   * plane a task. A WINDOW kernel's own op; a row-fused MATMUL kernel's when the pooling of
   * its rows (an im2col of what its nests wrote) joined it. */
  int16_t win_op;         /* LJG_OP_IM2COL or LJG_OP_COL2IM; LJG_OP_DATA: none */
  int16_t win_at;         /* row-fused: the window runs after this many nests (the last: on
                             what the block's nests wrote) */
  int32_t win_src, win_out_slot;
  uint8_t win_dtype;
  int64_t win[8];         /* kh, kw, sh, sw, ph, pw, dh, dw */
  double win_fill;
  int64_t win_img[4];     /* N, C, H, W */
  int64_t win_oh, win_ow;
  /* A trailing product (fuse_rows.c): a row-fused MATMUL kernel's second matmul, run on each
   * block's rows after its nests, C2 = A2·B2 over the same rows b·M + m (mm_b matrices of
   * mm_m rows): A2 what a nest wrote, read at its own row, [mm_b, mm_m, tm_k] (attention's
   * probabilities, softmax(Q·Kᵀ), then their product with V: the probabilities stay a LOCAL
   * block instead of a tensor in memory). tm_a and tm_bm its operands' LOADs, C2 contiguous
   * [mm_b, mm_m, tm_n] in tm_out_slot. ljg_trailing_product gives it as a kernel of its own. */
  uint8_t tm;             /* 1: the kernel has one */
  uint8_t tm_dtype;
  int64_t tm_n, tm_k;
  int32_t tm_a, tm_bm, tm_out_slot;
} ljg_kernel;

/* Elements a block of rows should hold in its widest nest: 16 KiB of f32 (half of L1). A
 * row-fused loops kernel's blocks (graph/fuse_rows.c) and the parts of a matmul kernel's
 * block its nests run on at a time (codegen_llvm/lower.c) are this size at most. */
enum { LJG_ROW_BLOCK_ELEMS = 4096 };
/* The least an operand read transposed takes along both dims to be read in tiles (a
 * vector's most lanes, whatever the target): codegen_llvm/lower.c reads it so, and
 * graph/fuse_rows.c keeps the elementwise kernels that read one apart. */
enum { LJG_TILE_MIN = 16 };
/* The bytes a row-fused loops kernel's nests should read in one block, each slot's rows
 * counted once: what the block reads from memory and then again from L1. */
enum { LJG_ROW_BLOCK_BYTES = 16 << 10 };
/* The most input channels a weight gradient takes the taps routine with (taps.c reads dY once
 * a channel). */
enum { LJG_TAPS_MAX_CHANNELS = 3 };
/* The columns of C (output channels) a task of the taps routine computes: its register tile's
 * at most (codegen_llvm/taps.c). By columns, the 32 of MNISTNet's conv1 are 16 tasks, where
 * its 9 rows split 4 and 5 between two threads, and 14 and 18 columns with them. */
enum { LJG_TAPS_COL_TASK = 2 };
_Static_assert(LJG_MATMUL_COL_TASK <= UINT8_MAX && LJG_TAPS_COL_TASK <= UINT8_MAX,
               "a column task's width fits ljg_kernel.mm_col_tasks");
/* Whether matmul kernel k is a weight gradient the taps routine computes (codegen_llvm/
 * taps.c): Σ_b im2col(x_b)·dY_bᵀ of an f32 3×3 window of column stride 1 over at most
 * LJG_TAPS_MAX_CHANNELS channels (A the im2col), both images' rows contiguous, nothing fused
 * into it. */
bool ljg_taps_dw(const ljg_kernel *k);

/* Kernel k's trailing product (ljg_kernel.tm) as a MATMUL kernel of its own into *out: k's
 * expressions and views, its mm_* fields the product's, no nests, window or blocks. */
void ljg_trailing_product(const ljg_kernel *k, ljg_kernel *out);

/* Marks in used[] (k->nexprs entries) the expressions a nest's values and scatter indices are
 * computed from. */
void ljg_nest_exprs(const ljg_kernel *k, const ljg_nest *nest, bool *used);
/* Whether a nest of k other than nests first .. last reads slot. */
bool ljg_nests_read(const ljg_kernel *k, int32_t slot, int first, int last);

/* Whether a reduction nest with nkept leading kept dims runs in column order: its values lie
 * closer together along the last kept dim than along the last reduced one, where they are not
 * contiguous (a reduction over a leading dim, or over windows laid out in rows), so
 * codegen_llvm/lower.c runs the reduced dims outside a loop over the last kept dim. A column
 * sum of every other column of [512, 2048], one thread: plain (a value a line read for each
 * column) 1.1 ms, in column order 0.27. Decided by the loads the value reads (one the
 * same all along the kept dim, a depthwise convolution's weight, has no say: in column order
 * it is one scalar; nor one the same along the last reduced dim, batch norm's mean of each
 * channel in a sum over the channel's values: one scalar in the plain order). */
bool ljg_column_order(const ljg_kernel *k, const ljg_nest *nest, int nkept);

static inline bool ljg_kernel_has_window(const ljg_kernel *k) {
  return k->win_op == LJG_OP_IM2COL || k->win_op == LJG_OP_COL2IM;
}

/* Whether matmul kernel k reads B where it is (ljg_matmul_b_in_place; never an im2col's). */
static inline bool ljg_kernel_b_in_place(const ljg_kernel *k) {
  const ljg_view *b = &k->views[k->exprs[k->mm_bm].view];
  return (k->mm_cols == LJG_MM_COLS_NONE || k->mm_cols == LJG_MM_COLS_A) && b->n == 1 &&
         ljg_matmul_b_in_place(&b->v[0], k->mm_b, k->mm_m, k->mm_k, k->mm_n, (lj_dtype)k->mm_dtype);
}

/* Whether expression x reads slot's elements (a LOAD, or a BUFFER a GATHER reads). */
static inline bool ljg_expr_reads(const ljg_kexpr *x, int32_t slot) {
  return (x->kind == LJG_X_LOAD || x->kind == LJG_X_BUFFER) && x->slot == slot;
}

/* Whether expression x is the constant 0 (of either sign). */
static inline bool ljg_expr_is_zero(const ljg_kexpr *x) { return x->kind == LJG_X_CONST && x->value == 0; }

/* Whether expression e of kernel k is where(x > 0, v, 0), a relu's gradient (x the relu's
 * input or output): sets *x and *v. */
bool ljg_relu_gradient(const ljg_kernel *k, int32_t e, int32_t *x, int32_t *v);

/* Whether kernel k writes slot: as a matmul's C, a window's output, a trailing product's C2,
 * or a nest's but nest `skip` (-1: none). */
bool ljg_kernel_writes(const ljg_kernel *k, int32_t slot, int skip);
/* The slots kernel k writes other than through its nests, into out[3]: its matmul's C, its
 * window's output, its trailing product's C2, those it has; how many. */
int ljg_kernel_own_outputs(const ljg_kernel *k, int32_t out[3]);
/* Whether nest s of matmul kernel k is elementwise over C's points (C's rows its leading dims,
 * C's columns its last): with column tasks (ljg_kernel.mm_col_tasks), a task runs it on its
 * columns of every row, and the first task runs the kernel's other nests whole. */
bool ljg_column_nest(const ljg_kernel *k, int s);

/* A WINDOW kernel's elements per task: the (n, c) plane of windows (KH·KW rows of OH·OW
 * columns) and of the image (H·W); its output is the first for im2col, the second for col2im.
 * Row fusion sizes LOCAL slots and the lowering addresses planes by these. */
static inline int64_t ljg_window_cols_plane(const ljg_kernel *k) { return k->win[0] * k->win[1] * k->win_oh * k->win_ow; }
static inline int64_t ljg_window_image_plane(const ljg_kernel *k) { return k->win_img[2] * k->win_img[3]; }

/* Buffer slots an executable binds at run time. */
typedef enum ljg_slotkind {
  LJG_SLOT_PARAM,  /* DATA parameter's buffer */
  LJG_SLOT_SCALAR, /* SCALAR parameter's value (8 bytes in the scalar block) */
  LJG_SLOT_OUTPUT, /* a root's buffer: fresh, or its donor's (param >= 0: ljg_donate) */
  LJG_SLOT_TEMP,   /* an intermediate at offset in the scratch arena */
  LJG_SLOT_LOCAL   /* an intermediate of one row-fused kernel, written and read a block of
                      rows at a time: only the current block exists, on the stack of the
                      thread running it (nbytes: one block of row_bytes rows) */
} ljg_slotkind;

typedef struct ljg_slot {
  uint8_t kind;
  uint8_t dtype;
  int32_t param;    /* PARAM/SCALAR: parameter index; OUTPUT: the donor parameter or -1 */
  int32_t node;     /* graph node whose value it holds */
  int64_t nbytes;
  int64_t offset;   /* TEMP: offset in the scratch arena */
  int64_t row_bytes; /* LOCAL: bytes per row */
} ljg_slot;

/* Data-dependent errors found by compiled code, reported at the sync. */
typedef enum ljg_kerr_code { LJG_KERR_NONE, LJG_KERR_DIV_ZERO, LJG_KERR_INDEX } ljg_kerr_code;
typedef struct ljg_kerr {
  int32_t code;
  int32_t node;
  int64_t value, bound;
} ljg_kerr;

/* The kernel function ABI: slots[i] is the address of slot i. */
typedef void (*ljg_kernel_fn)(void *const *slots, int64_t begin, int64_t end, ljg_kerr *err);

/* A fused program: kernels in execution order over a slot table. */
typedef struct ljg_program {
  ljb_arena arena;     /* owns kernels, exprs, views */
  int nkernels;
  ljg_kernel *kernels;
  int nslots;
  ljg_slot *slots;
  int32_t *root_slot;  /* slot of each root */
  int nroots;
  int64_t scratch_bytes;
} ljg_program;

typedef struct ljg_fuse_options {
  bool disable_fusion;
  bool no_winograd; /* lj_config.winograd off: every matmul kernel's mm_no_winograd */
  bool bf16_dot;    /* the target has bf16 dot products: f32 matmuls of bf16 values cast to f32
                       read the bf16 buffers (fuse.c, bf16_operands) */
} ljg_fuse_options;

/* Fuses the (optimized) graph into kernels and plans their buffers. */
ljg_program *ljg_fuse(const ljg_graph *g, const ljg_fuse_options *opt);
void ljg_program_free(ljg_program *p);
/* Whether a kernel of p other than k (a kernel of p, or a copy of one: the same expressions)
 * reads or writes slot. */
bool ljg_slot_used_elsewhere(const ljg_program *p, const ljg_kernel *k, int32_t slot);
/* Human-readable kernels (for dumps and tests' failure messages). malloc'd. */
char *ljg_program_text(const ljg_program *p, const ljg_graph *g);

/* plan.c: assigns TEMP slots offsets in one scratch arena, reusing memory whose last reader
 * has run. */
void ljg_plan(ljg_program *p);
/* Buffer donation (donate.c): each root with a donor whose writing nest can work in place
 * gets its OUTPUT slot's param set to the donor, the nest's loads of the donor redirected to
 * the slot. Runs after row fusion. */
void ljg_donate(ljg_program *p, const ljg_graph *g);
/* Unpooling (fuse_unpool.c): a 2×2 max-pool's gradient that only a taps weight gradient and
 * sums over its positions read is not written: they read the pooled gradient instead
 * (ljg_kernel.mm_unpool_at), and its kernel is removed. Runs after row fusion, before
 * donation and the plan. */
void ljg_fuse_unpool(ljg_program *p, const ljg_graph *g);
/* Row fusion (fuse_rows.c): neighbouring loop kernels over the same rows, each reading the
 * others' results only at its own row, become one kernel run block of rows by block. */
void ljg_fuse_rows(ljg_program *p);

/* ---- binary records (serialize.c), for the persistent cache ------------------------------- */

/* Appends g (without call sites) to out. */
void ljg_graph_write(ljb_str *out, const ljg_graph *g);
/* Reads a graph written by ljg_graph_write into g (initialized here); false, with g empty,
 * when the record is malformed: truncated, a count or index out of range. */
bool ljg_graph_read(ljb_reader *in, ljg_graph *g);
/* Appends p (kernels, slots, roots, scratch size) to out. */
void ljg_program_write(ljb_str *out, const ljg_program *p);
/* Reads a program written by ljg_program_write for graph g; NULL when the record is
 * malformed or its slots do not fit g (parameters, roots) or its scratch arena. */
ljg_program *ljg_program_read(ljb_reader *in, const ljg_graph *g);

#endif
