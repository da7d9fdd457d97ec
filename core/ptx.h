#ifndef KOPT_PTX_H
#define KOPT_PTX_H
/* Static analysis of PTX text: functions, basic blocks, loops (back edges,
 * nesting, constant trip counts), and a region tree per function with the
 * static work of each region. A root primitive: plain C, no Lua.
 *
 * Regions of a function, as a tree (parent indices):
 *
 *   function                     the whole function (own work: none)
 *     prologue                   straight-line code before the first loop
 *     main loop                  code between the top-level loops (own work),
 *       loop                       the top-level loops, each with its
 *         loop                     nested loops
 *     epilogue                   straight-line code after the last loop
 *
 * A function without loops has one stage, "body". A block belongs to its
 * innermost loop; a loop is the textual block range from the target of a
 * back edge to the branch that makes it (the shape NVRTC emits), so an
 * irreducible graph is read as best it can be, never rejected.
 *
 * Work is static and per thread: what one pass through the region's own
 * blocks issues, each instruction once, predicated ones included. Bytes are
 * per thread too (ld.global.v4.f32: 16). FLOPs count FMA/MAD as 2 and
 * add/sub/mul as 1, times 2 for packed f16x2/bf16x2; a tensor-core
 * instruction counts its shape's 2*M*N*K divided by the threads that issue
 * it together (32 for mma/wmma, 128 for wgmma). `weighted` multiplies a
 * region's own work by the trip counts of its enclosing loops (unknown
 * counts as 1): an estimate of one thread's dynamic work. */
#include <stddef.h>

/* The work fields, in one place: X(name, doc). */
#define KOPT_PTX_WORK_FIELDS(X)                                                                    \
	X(insts, "instructions")                                                                   \
	X(ld_global, "global loads (ld.global, ldu.global)")                                       \
	X(ld_global_bytes, "bytes loaded from global memory")                                      \
	X(st_global, "global stores")                                                              \
	X(st_global_bytes, "bytes stored to global memory")                                        \
	X(ld_shared, "shared loads (ld.shared, ldmatrix)")                                         \
	X(ld_shared_bytes, "bytes loaded from shared memory")                                      \
	X(st_shared, "shared stores (st.shared, stmatrix)")                                        \
	X(st_shared_bytes, "bytes stored to shared memory")                                        \
	X(ldmatrix, "ldmatrix instructions (also counted as shared loads)")                        \
	X(cp_async, "cp.async global-to-shared copies")                                            \
	X(cp_async_bytes, "bytes copied by cp.async")                                              \
	X(tma, "cp.async.bulk copies (bytes not static)")                                          \
	X(ld_local, "local loads (stack, spills)")                                                 \
	X(st_local, "local stores")                                                                \
	X(ld_generic, "loads through generic addresses")                                           \
	X(st_generic, "stores through generic addresses")                                          \
	X(atomics, "atom / red")                                                                   \
	X(flops_f16, "f16 FLOPs (f16x2 counts 2)")                                                 \
	X(flops_bf16, "bf16 FLOPs")                                                                \
	X(flops_f32, "f32 FLOPs")                                                                  \
	X(flops_f64, "f64 FLOPs")                                                                  \
	X(flops_tc, "tensor-core FLOPs per thread")                                                \
	X(mma, "tensor-core instructions (mma, wmma.mma, wgmma.mma_async)")                        \
	X(sfu, "special functions (ex2, lg2, rsqrt, sqrt, rcp, sin, cos, tanh, div)")              \
	X(barriers, "barriers (bar.sync, barrier.sync, bar.arrive)")                              \
	X(branches, "branches")                                                                    \
	X(cond_branches, "predicated branches (divergent unless the predicate is uniform)")        \
	X(uni_branches, "branches marked .uni")                                                    \
	X(calls, "calls")

struct kopt_ptx_work {
#define KOPT_PTX_X(name, doc) long name;
	KOPT_PTX_WORK_FIELDS(KOPT_PTX_X)
#undef KOPT_PTX_X
};

enum kopt_ptx_region_kind { KOPT_PTX_FUNCTION, KOPT_PTX_STAGE, KOPT_PTX_LOOP };

struct kopt_ptx_region {
	int function;	/* index into kopt_ptx.functions */
	int parent;	/* region index; -1 for a function */
	int depth;	/* 0 function, 1 stage, 2 top-level loop, ... */
	enum kopt_ptx_region_kind kind;
	const char *name; /* "function", "prologue", "main loop", "epilogue", "body", "loop" */
	long trip;	/* loops: iterations when constant, -1 unknown; others 1 */
	int n_blocks;	/* own blocks */
	int ptx_first, ptx_last; /* PTX lines (1-based) of its own and nested blocks; 0: none */
	int src_first, src_last; /* source lines in the function's main file; 0: none */
	struct kopt_ptx_work work;     /* own blocks */
	struct kopt_ptx_work total;    /* own and nested regions */
	struct kopt_ptx_work weighted; /* own work times the enclosing trip counts */
};

struct kopt_ptx_function {
	char *name;	/* owned by the kopt_ptx */
	int is_entry;	/* .entry (a kernel) or .func */
	int region;	/* its function region */
	int n_regions;	/* regions from `region` on belong to it */
	int n_blocks;
	int n_loops;
	int ptx_first, ptx_last;
	const char *src_file; /* the main file of its .loc lines; NULL without -lineinfo */
	long regs_pred, regs_16, regs_32, regs_64; /* declared by .reg in the function's own
						      scope, by width */
	long smem_bytes; /* static .shared declared inside the function (an entry's: and in the
			    functions it calls) */
};

struct kopt_ptx {
	struct kopt_ptx_function *functions;
	size_t n_functions;
	struct kopt_ptx_region *regions;
	size_t n_regions;
	long n_lines;
	long n_insts;
	char **files; /* .file names by index (NULL where absent) */
	size_t n_files;
};

/* Inputs larger than this are refused (a PTX of a few MB is already huge). */
#define KOPT_PTX_MAX_BYTES (64u << 20)

/* Parses len bytes of PTX text into *out (set to NULL on entry; free it with
 * kopt_ptx_free). Returns 0, or -1 with one sentence in err: not PTX,
 * truncated (an unclosed function), a branch to an undefined label, too
 * large, out of memory. Deterministic; time linear in the text except the
 * trip-count search, bounded per loop. */
int kopt_ptx_parse(const char *text, size_t len, struct kopt_ptx **out, char *err, size_t errlen);

void kopt_ptx_free(struct kopt_ptx *p);

/* Tensor-core FLOPs of one instruction (per warp, or per warpgroup for
 * wgmma) from its opcode, e.g. "mma.sync.aligned.m16n8k16.row.col.f32..."
 * -> 4096; 0 when it names no shape. Exposed for tests. */
long kopt_ptx_mma_flops(const char *opcode, size_t len);

#endif
