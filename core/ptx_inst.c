/* One PTX instruction: tokens, the split into predicate, opcode and
 * operands, and its static work (loads, stores, FLOPs by type, special
 * functions, barriers), for ptx.c. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_impl.h"

/* --- tokens --- */

static int is_ident(int c)
{
	return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.';
}

struct span ptx_trim(const char *s, size_t n)
{
	while (n > 0 && isspace((unsigned char)*s))
		s++, n--;
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	struct span r = {s, n};
	return r;
}

int ptx_span_eq(struct span a, const char *lit)
{
	size_t n = strlen(lit);
	return a.n == n && memcmp(a.s, lit, n) == 0;
}

int ptx_starts(const char *s, size_t n, const char *lit)
{
	size_t m = strlen(lit);
	return n >= m && memcmp(s, lit, m) == 0 && (n == m || !is_ident((unsigned char)s[m]));
}


void ptx_split_inst(const char *s, size_t n, struct parsed *r)
{
	memset(r, 0, sizeof *r);
	struct span t = ptx_trim(s, n);
	s = t.s;
	n = t.n;
	size_t i = 0;
	if (n > 0 && s[0] == '@') {
		i = 1;
		if (i < n && s[i] == '!')
			r->neg = 1, i++;
		size_t b = i;
		while (i < n && !isspace((unsigned char)s[i]))
			i++;
		r->pred.s = s + b;
		r->pred.n = i - b;
		while (i < n && isspace((unsigned char)s[i]))
			i++;
	}
	size_t b = i;
	while (i < n && !isspace((unsigned char)s[i]))
		i++;
	r->op.s = s + b;
	r->op.n = i - b;
	int depth = 0;
	size_t start = i;
	for (; i <= n; i++) {
		int c = i < n ? s[i] : ',';
		if (c == '{' || c == '[' || c == '(')
			depth++;
		else if ((c == '}' || c == ']' || c == ')') && depth > 0)
			depth--;
		else if (c == ',' && (depth == 0 || i == n)) {
			if (r->nops < 8) {
				struct span o = ptx_trim(s + start, i - start);
				if (o.n > 0 || r->nops > 0)
					r->ops[r->nops++] = o;
			}
			start = i + 1;
		}
	}
}

/* The opcode's parts: "ld.global.v4.f32" -> ld, global, v4, f32. */
int ptx_next_part(struct span op, size_t *pos, struct span *part)
{
	if (*pos >= op.n)
		return 0;
	size_t b = *pos, i = b;
	while (i < op.n && op.s[i] != '.')
		i++;
	part->s = op.s + b;
	part->n = i - b;
	*pos = i + 1;
	return 1;
}

static int has_part(struct span op, const char *lit)
{
	size_t pos = 0;
	struct span part;
	while (ptx_next_part(op, &pos, &part))
		if (ptx_span_eq(part, lit))
			return 1;
	return 0;
}

static int has_part_prefix(struct span op, const char *lit)
{
	size_t pos = 0, m = strlen(lit);
	struct span part;
	while (ptx_next_part(op, &pos, &part))
		if (part.n >= m && memcmp(part.s, lit, m) == 0)
			return 1;
	return 0;
}

struct span ptx_base_of(struct span op)
{
	size_t pos = 0;
	struct span part = {op.s, 0};
	ptx_next_part(op, &pos, &part);
	return part;
}

/* Element bytes and vector width from the type parts; 0 when none. */
long ptx_access_bytes(struct span op)
{
	static const struct {
		const char *t;
		long bytes;
	} types[] = {
	    {"b8", 1},	 {"u8", 1},   {"s8", 1},      {"b16", 2},    {"u16", 2}, {"s16", 2},
	    {"f16", 2},	 {"bf16", 2}, {"b32", 4},     {"u32", 4},    {"s32", 4}, {"f32", 4},
	    {"f16x2", 4}, {"bf16x2", 4}, {"b64", 8},   {"u64", 8},    {"s64", 8}, {"f64", 8},
	    {"b128", 16},
	};
	long elem = 0, vec = 1;
	size_t pos = 0;
	struct span part;
	while (ptx_next_part(op, &pos, &part)) {
		if (ptx_span_eq(part, "v2"))
			vec = 2;
		else if (ptx_span_eq(part, "v4"))
			vec = 4;
		else if (ptx_span_eq(part, "v8"))
			vec = 8;
		for (size_t k = 0; k < sizeof types / sizeof *types; k++)
			if (ptx_span_eq(part, types[k].t))
				elem = types[k].bytes;
	}
	return elem * vec;
}

int ptx_parse_int(struct span s, long long *v)
{
	if (s.n == 0 || s.n > 30)
		return 0;
	char buf[32];
	memcpy(buf, s.s, s.n);
	buf[s.n] = '\0';
	char *end;
	long long x = strtoll(buf, &end, 0);
	if (end == buf)
		return 0;
	if (*end == 'U' || *end == 'u')
		end++;
	if (*end != '\0')
		return 0;
	*v = x;
	return 1;
}

long kopt_ptx_mma_flops(const char *opcode, size_t len)
{
	struct span op = {opcode, len};
	size_t pos = 0;
	struct span part;
	while (ptx_next_part(op, &pos, &part)) {
		long m = 0, n = 0, k = 0;
		char buf[48];
		if (part.n == 0 || part.n >= sizeof buf || part.s[0] != 'm')
			continue;
		memcpy(buf, part.s, part.n);
		buf[part.n] = '\0';
		int used = 0;
		if (sscanf(buf, "m%ldn%ldk%ld%n", &m, &n, &k, &used) == 3 && (size_t)used == part.n &&
		    m > 0 && n > 0 && k > 0 && m <= 1024 && n <= 1024 && k <= 1024)
			return 2 * m * n * k;
	}
	return 0;
}

/* Bytes one thread moves with a wmma.load/.store: the fragment's matrix
 * (a: m x k, b: k x n, c and d: m x n) over the warp's 32 threads; 0 for
 * a shape or a type it cannot read (sub-byte types). */
static long wmma_fragment_bytes(struct span op)
{
	long m = 0, n = 0, k = 0, elem = 0;
	char which = 0;
	size_t pos = 0;
	struct span part;
	while (ptx_next_part(op, &pos, &part)) {
		char buf[48];
		int used = 0;
		if (part.n == 1 && strchr("abcd", part.s[0]) != NULL)
			which = part.s[0];
		if (part.n > 0 && part.n < sizeof buf && part.s[0] == 'm') {
			memcpy(buf, part.s, part.n);
			buf[part.n] = '\0';
			if (sscanf(buf, "m%ldn%ldk%ld%n", &m, &n, &k, &used) != 3 || (size_t)used != part.n)
				m = n = k = 0;
		}
		if (ptx_span_eq(part, "f16") || ptx_span_eq(part, "bf16"))
			elem = 2;
		else if (ptx_span_eq(part, "f32") || ptx_span_eq(part, "tf32") || ptx_span_eq(part, "s32"))
			elem = 4;
		else if (ptx_span_eq(part, "f64"))
			elem = 8;
		else if (ptx_span_eq(part, "s8") || ptx_span_eq(part, "u8"))
			elem = 1;
	}
	if (m <= 0 || n <= 0 || k <= 0 || m > 1024 || n > 1024 || k > 1024 || elem == 0)
		return 0;
	long elems = which == 'a' ? m * k : which == 'b' ? k * n : m * n;
	return elems * elem / 32;
}

/* One load or store of `bytes` per thread, by its state space. */
static void count_access(struct kopt_ptx_work *w, struct span op, int st, long bytes)
{
	if (has_part(op, "global")) {
		if (st)
			w->st_global++, w->st_global_bytes += bytes;
		else
			w->ld_global++, w->ld_global_bytes += bytes;
	} else if (has_part_prefix(op, "shared")) {
		if (st)
			w->st_shared++, w->st_shared_bytes += bytes;
		else
			w->ld_shared++, w->ld_shared_bytes += bytes;
	} else if (has_part(op, "local")) {
		if (st)
			w->st_local++;
		else
			w->ld_local++;
	} else if (st) {
		w->st_generic++;
	} else {
		w->ld_generic++;
	}
}

/* Adds one instruction's static work to w. */
void ptx_classify(const struct parsed *in, struct kopt_ptx_work *w)
{
	struct span op = in->op, base = ptx_base_of(op);
	w->insts++;
	if (ptx_span_eq(base, "ld") || ptx_span_eq(base, "ldu") || ptx_span_eq(base, "st")) {
		if (has_part(op, "param") || has_part(op, "const"))
			return;
		count_access(w, op, ptx_span_eq(base, "st"), ptx_access_bytes(op));
	} else if (ptx_span_eq(base, "wmma") && (has_part(op, "load") || has_part(op, "store"))) {
		/* a fragment: the warp moves its matrix, each thread a 32nd */
		count_access(w, op, has_part(op, "store"), wmma_fragment_bytes(op));
	} else if (ptx_span_eq(base, "ldmatrix") || ptx_span_eq(base, "stmatrix")) {
		long x = has_part(op, "x4") ? 4 : has_part(op, "x2") ? 2 : 1;
		if (ptx_span_eq(base, "ldmatrix"))
			w->ld_shared++, w->ldmatrix++, w->ld_shared_bytes += 4 * x;
		else
			w->st_shared++, w->st_shared_bytes += 4 * x;
	} else if (ptx_span_eq(base, "cp")) {
		if (has_part(op, "bulk")) {
			/* copies only: the group's commit and waits, and a
			 * prefetch into L2, move nothing into shared memory */
			if (!has_part(op, "commit_group") && !has_part(op, "wait_group") &&
			    !has_part(op, "prefetch"))
				w->tma++;
		} else if (has_part(op, "async") && has_part_prefix(op, "shared") &&
			   has_part(op, "global")) {
			long long b = 0;
			w->cp_async++;
			if (in->nops >= 3 && ptx_parse_int(in->ops[2], &b) && b > 0 && b <= 16)
				w->cp_async_bytes += (long)b;
		}
	} else if (ptx_span_eq(base, "atom") || ptx_span_eq(base, "red")) {
		w->atomics++;
	} else if (ptx_span_eq(base, "mma") || ptx_span_eq(base, "wgmma") ||
		   (ptx_span_eq(base, "wmma") && has_part(op, "mma"))) {
		long f = kopt_ptx_mma_flops(op.s, op.n);
		if (ptx_span_eq(base, "wgmma") && !has_part(op, "mma_async"))
			return; /* fence, commit_group, wait_group */
		w->mma++;
		w->flops_tc += f / (ptx_span_eq(base, "wgmma") ? 128 : 32);
	} else if (ptx_span_eq(base, "fma") || ptx_span_eq(base, "mad") || ptx_span_eq(base, "add") ||
		   ptx_span_eq(base, "sub") || ptx_span_eq(base, "mul")) {
		long per = ptx_span_eq(base, "fma") || ptx_span_eq(base, "mad") ? 2 : 1;
		if (has_part(op, "f32"))
			w->flops_f32 += per;
		else if (has_part(op, "f64"))
			w->flops_f64 += per;
		else if (has_part(op, "f16"))
			w->flops_f16 += per;
		else if (has_part(op, "f16x2"))
			w->flops_f16 += 2 * per;
		else if (has_part(op, "bf16"))
			w->flops_bf16 += per;
		else if (has_part(op, "bf16x2"))
			w->flops_bf16 += 2 * per;
	} else if (ptx_span_eq(base, "ex2") || ptx_span_eq(base, "lg2") || ptx_span_eq(base, "rsqrt") ||
		   ptx_span_eq(base, "sqrt") || ptx_span_eq(base, "rcp") || ptx_span_eq(base, "sin") ||
		   ptx_span_eq(base, "cos") || ptx_span_eq(base, "tanh") ||
		   (ptx_span_eq(base, "div") && (has_part(op, "f32") || has_part(op, "f64")))) {
		w->sfu++;
	} else if ((ptx_span_eq(base, "bar") && !has_part(op, "warp")) || ptx_span_eq(base, "barrier")) {
		w->barriers++;
	} else if (ptx_span_eq(base, "bra") || ptx_span_eq(base, "brx")) {
		w->branches++;
		if (in->pred.n > 0)
			w->cond_branches++;
		if (has_part(op, "uni"))
			w->uni_branches++;
	} else if (ptx_span_eq(base, "call")) {
		w->calls++;
	}
}

void ptx_work_add(struct kopt_ptx_work *a, const struct kopt_ptx_work *b, long times)
{
#define KOPT_PTX_X(name, doc) a->name += b->name * times;
	KOPT_PTX_WORK_FIELDS(KOPT_PTX_X)
#undef KOPT_PTX_X
}
