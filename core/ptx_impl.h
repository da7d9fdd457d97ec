/* Private to core/ptx*.c: the parser's types and the helpers its three
 * files share (ptx.c reads statements and builds regions, ptx_inst.c splits
 * and classifies one instruction, ptx_loops.c resolves labels and finds
 * loops' trip counts). Not a public interface: see ptx.h. */
#ifndef KOPT_PTX_IMPL_H
#define KOPT_PTX_IMPL_H

#include <stddef.h>

#include "ptx.h"

#define MAX_FILES 4096	  /* .file indices kept */
#define STMT_CAP 4096	  /* a statement longer than this is cut (the opcode is at its start) */
#define TRIP_CAP (1 << 20) /* iterations simulated before a trip count is "unknown" */

struct span {
	const char *s;
	size_t n;
};

struct inst {
	const char *s; /* the statement inside the text (or the statement buffer copy) */
	unsigned len;
	int line;
	int file, src; /* .loc: file index and line; 0 without */
};

struct block {
	int first, n; /* instruction range */
	struct span label;
	int label_scope;    /* the brace scope the label is declared in (0: the function's) */
	struct span target; /* bra's target; s NULL when none */
	int target_scope;   /* the scope the branch is in: a label is looked up from there out */
	int target_line;
	int cond;    /* the branch is predicated */
	int ends;    /* ends without falling through (unconditional bra, ret, exit) */
	int loop;    /* innermost loop, -1 none */
	int fwd_in;    /* a branch from an earlier block comes here (paths join) */
	int back_from; /* the last later block that branches here (a loop's latch), -1 none */
	int region;
	struct kopt_ptx_work work;
};

struct loop {
	int head, latch, parent, region;
	long trip;
};

struct parser {
	const char *text;
	size_t len;
	char *err;
	size_t errlen;
	struct kopt_ptx *out;
	size_t cap_functions, cap_regions;
	/* the function being read */
	int in_func;
	struct kopt_ptx_function fn;
	struct inst *insts;
	size_t n_insts, cap_insts;
	struct block *blocks;
	size_t n_blocks, cap_blocks;
	int open_block; /* the last block takes instructions */
	int any_target; /* an indirect branch (brx, bra to a register): any label may be a target */
	struct loop *loops;
	size_t n_loops, cap_loops;
	int *hash;
	size_t hash_cap;
	/* brace scopes of the function: inline asm's "{ ... }" may declare a
	 * label again (each unrolled copy of a wait loop), and a branch goes to
	 * the one of its nearest enclosing scope */
	int *scope_parent;
	size_t n_scopes, cap_scopes;
	int cur_scope;
	int cur_file, cur_src;
	int file_count[64];
	/* direct calls (caller's index in out->functions, callee's name): an
	 * entry's static shared memory includes its callees' */
	struct call {
		size_t caller;
		struct span callee;
	} *calls;
	size_t n_calls, cap_calls;
	/* copies of statements that span lines (rare: headers, long operand lists) */
	char **copies;
	size_t n_copies, cap_copies;
};

/* An instruction split into predicate, opcode and operands. */
struct parsed {
	struct span pred;
	int neg;
	struct span op;
	struct span ops[8];
	int nops;
};

/* --- ptx_inst.c: tokens and one instruction --- */
struct span ptx_trim(const char *s, size_t n);
int ptx_span_eq(struct span a, const char *lit);
int ptx_starts(const char *s, size_t n, const char *lit);
void ptx_split_inst(const char *s, size_t n, struct parsed *r);
int ptx_next_part(struct span op, size_t *pos, struct span *part);
struct span ptx_base_of(struct span op);
long ptx_access_bytes(struct span op);
int ptx_parse_int(struct span s, long long *v);
void ptx_classify(const struct parsed *in, struct kopt_ptx_work *w);
void ptx_work_add(struct kopt_ptx_work *a, const struct kopt_ptx_work *b, long times);

/* --- ptx_loops.c: labels and loops of the function being read --- */
int ptx_build_labels(struct parser *p);
int ptx_find_label(struct parser *p, struct span name, int from_scope);
long ptx_trip_count(struct parser *p, const struct loop *l);
int ptx_cmp_loops(const void *a, const void *b);

/* --- ptx.c --- */
int ptx_oom(struct parser *p);

#endif
