/* Labels and loops of the function ptx.c is reading: a hash table of block
 * labels, and each loop's trip count when its counter's start, step and
 * bound are constants. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_impl.h"

/* --- a function's end: labels, loops, regions --- */

static size_t hash_span(struct span s)
{
	size_t h = 5381;
	for (size_t i = 0; i < s.n; i++)
		h = h * 33 + (unsigned char)s.s[i];
	return h;
}

int ptx_build_labels(struct parser *p)
{
	size_t cap = 16;
	while (cap < 2 * p->n_blocks + 1)
		cap *= 2;
	if (cap > p->hash_cap) {
		int *h = realloc(p->hash, cap * sizeof *h);
		if (h == NULL)
			return ptx_oom(p);
		p->hash = h;
		p->hash_cap = cap;
	}
	for (size_t i = 0; i < cap; i++)
		p->hash[i] = -1;
	for (size_t b = 0; b < p->n_blocks; b++) {
		struct span l = p->blocks[b].label;
		if (l.s == NULL)
			continue;
		size_t i = hash_span(l) & (cap - 1);
		while (p->hash[i] >= 0)
			i = (i + 1) & (cap - 1);
		p->hash[i] = (int)b;
	}
	return 0;
}

/* The block of label name as a branch in scope from_scope sees it: the
 * declaration in its nearest enclosing scope (any one when none encloses it). */
int ptx_find_label(struct parser *p, struct span name, int from_scope)
{
	size_t cap = 16;
	while (cap < 2 * p->n_blocks + 1)
		cap *= 2;
	int best = -1, best_dist = -1;
	for (size_t i = hash_span(name) & (cap - 1); p->hash[i] >= 0; i = (i + 1) & (cap - 1)) {
		const struct block *b = &p->blocks[p->hash[i]];
		if (b->label.n != name.n || memcmp(b->label.s, name.s, name.n) != 0)
			continue;
		int dist = 0, s = from_scope;
		while (s >= 0 && (size_t)s < p->n_scopes && s != b->label_scope)
			s = p->scope_parent[s], dist++;
		if (s != b->label_scope)
			dist = 1 << 30; /* not visible from the branch */
		if (best < 0 || dist < best_dist)
			best = p->hash[i], best_dist = dist;
	}
	return best;
}

int ptx_cmp_loops(const void *a, const void *b)
{
	const struct loop *x = a, *y = b;
	if (x->head != y->head)
		return x->head < y->head ? -1 : 1;
	return x->latch > y->latch ? -1 : x->latch < y->latch;
}

/* The instruction writes reg: its first operand, or one of a vector
 * destination's ("{%r1, %r2}"). */
static int writes(const struct parsed *ps, struct span reg)
{
	if (ps->nops == 0)
		return 0;
	struct span d = ps->ops[0];
	if (d.n == reg.n && memcmp(d.s, reg.s, reg.n) == 0)
		return 1;
	if (d.n < 2 || d.s[0] != '{')
		return 0;
	for (size_t i = 1; i < d.n;) {
		size_t j = i;
		while (j < d.n && d.s[j] != ',' && d.s[j] != '}')
			j++;
		struct span e = ptx_trim(d.s + i, j - i);
		if (e.n == reg.n && memcmp(e.s, reg.s, reg.n) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

/* Some instruction of [from, to) writes reg. */
static int written_in(struct parser *p, int from, int to, struct span reg)
{
	struct parsed ps;
	for (int i = from; i < to; i++) {
		ptx_split_inst(p->insts[i].s, p->insts[i].len, &ps);
		if (writes(&ps, reg))
			return 1;
	}
	return 0;
}

/* The constant reg holds before instruction `at` of block blk, read back
 * along the one path that reaches it: a mov of an immediate, or of a
 * register that holds one (NVRTC keeps a zero in a register and copies
 * it into each counter). 0 with *v set, or -1 when a predicated or other
 * write sets it, or paths join before its last write: a block entered by
 * a forward branch, or after an unconditional one, is where the walk
 * stops; a loop head is crossed only when its loop leaves reg alone. */
static int const_before(struct parser *p, int blk, int at, struct span reg, long long *v,
			int depth)
{
	struct parsed ps;
	for (;;) {
		const struct block *b = &p->blocks[blk];
		for (int i = at - 1; i >= b->first; i--) {
			ptx_split_inst(p->insts[i].s, p->insts[i].len, &ps);
			if (!writes(&ps, reg))
				continue;
			if (ps.pred.n > 0 || !ptx_span_eq(ptx_base_of(ps.op), "mov") || ps.nops != 2)
				return -1;
			if (ptx_parse_int(ps.ops[1], v))
				return 0;
			if (depth < 4 && ps.ops[1].n > 1 && ps.ops[1].s[0] == '%')
				return const_before(p, blk, i, ps.ops[1], v, depth + 1);
			return -1;
		}
		if (blk == 0 || p->blocks[blk - 1].ends || b->fwd_in ||
		    (b->label.s != NULL && p->any_target))
			return -1;
		if (b->back_from >= 0) {
			const struct block *latch = &p->blocks[b->back_from];
			if (written_in(p, b->first, latch->first + latch->n, reg))
				return -1;
		}
		blk--;
		at = p->blocks[blk].first + p->blocks[blk].n;
	}
}

/* The value as a register of the comparison's type holds it: its width
 * (a 32-bit counter wraps there) and its sign (setp.lt.u32 compares
 * unsigned). */
struct cmp_type {
	int bits, is_unsigned;
};

static long long as_type(struct cmp_type t, long long v)
{
	if (t.bits == 32)
		return t.is_unsigned ? (long long)(uint32_t)v : (long long)(int32_t)v;
	if (t.bits == 16)
		return t.is_unsigned ? (long long)(uint16_t)v : (long long)(int16_t)v;
	return v;
}

static int compare(struct span cmp, struct cmp_type t, long long a, long long b)
{
	a = as_type(t, a);
	b = as_type(t, b);
	if (t.is_unsigned && t.bits == 64) { /* the whole range of u64 */
		if (ptx_span_eq(cmp, "lt"))
			cmp = (struct span){"lo", 2};
		else if (ptx_span_eq(cmp, "le"))
			cmp = (struct span){"ls", 2};
		else if (ptx_span_eq(cmp, "gt"))
			cmp = (struct span){"hi", 2};
		else if (ptx_span_eq(cmp, "ge"))
			cmp = (struct span){"hs", 2};
	}
	if (ptx_span_eq(cmp, "eq"))
		return a == b;
	if (ptx_span_eq(cmp, "ne"))
		return a != b;
	if (ptx_span_eq(cmp, "lt"))
		return a < b;
	if (ptx_span_eq(cmp, "le"))
		return a <= b;
	if (ptx_span_eq(cmp, "gt"))
		return a > b;
	if (ptx_span_eq(cmp, "ge"))
		return a >= b;
	if (ptx_span_eq(cmp, "lo"))
		return (unsigned long long)a < (unsigned long long)b;
	if (ptx_span_eq(cmp, "ls"))
		return (unsigned long long)a <= (unsigned long long)b;
	if (ptx_span_eq(cmp, "hi"))
		return (unsigned long long)a > (unsigned long long)b;
	if (ptx_span_eq(cmp, "hs"))
		return (unsigned long long)a >= (unsigned long long)b;
	return -1;
}

static struct span mirror(struct span cmp)
{
	static const char *pairs[][2] = {{"lt", "gt"}, {"gt", "lt"}, {"le", "ge"}, {"ge", "le"},
					 {"lo", "hi"}, {"hi", "lo"}, {"ls", "hs"}, {"hs", "ls"}};
	for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
		if (ptx_span_eq(cmp, pairs[i][0])) {
			struct span r = {pairs[i][1], 2};
			return r;
		}
	return cmp;
}

/* The trip count of loop l when its counter starts, steps and ends at
 * constants: one register compared with an immediate by the branch that
 * continues (at the latch) or leaves (at the head), stepped once in the
 * loop by an immediate, set before the loop to a constant on the one path
 * into it (const_before). */
long ptx_trip_count(struct parser *p, const struct loop *l)
{
	const struct block *head = &p->blocks[l->head], *latch = &p->blocks[l->latch];
	int first = head->first, last = latch->first + latch->n; /* instructions of the loop */
	struct parsed br, ps;
	int test_at_head = 0, want;
	if (latch->cond && latch->n > 0) {
		ptx_split_inst(p->insts[last - 1].s, p->insts[last - 1].len, &br);
		want = !br.neg; /* continue when the predicate is (not) set */
	} else {
		/* leave from the head: its conditional branch to outside the loop */
		if (!head->cond || head->n == 0 || head == latch)
			return -1;
		const struct inst *b = &p->insts[head->first + head->n - 1];
		ptx_split_inst(b->s, b->len, &br);
		int t = br.nops > 0 ? ptx_find_label(p, br.ops[0], head->target_scope) : -1;
		if (t >= l->head && t <= l->latch)
			return -1;
		want = br.neg; /* continue when the exit is not taken */
		test_at_head = 1;
	}
	int at_set = -1, at_step = -1;
	long long bound = 0, step = 0, init = 0;
	struct span reg = {NULL, 0}, cmp = {NULL, 0}, type = {NULL, 0};
	struct cmp_type ct = {64, 0};
	for (int i = last - 1; i >= first && at_set < 0; i--) {
		ptx_split_inst(p->insts[i].s, p->insts[i].len, &ps);
		struct span base = ptx_base_of(ps.op);
		if (!ptx_span_eq(base, "setp") || !writes(&ps, br.pred) || ps.nops != 3)
			continue;
		size_t pos = 0;
		struct span part;
		ptx_next_part(ps.op, &pos, &part);
		ptx_next_part(ps.op, &pos, &cmp);
		ptx_next_part(ps.op, &pos, &type);
		if (type.n < 2 || !(type.s[0] == 'u' || type.s[0] == 's' || type.s[0] == 'b'))
			return -1; /* a float counter, or no type: not counted */
		ct.is_unsigned = type.s[0] != 's';
		ct.bits = atoi(type.s + 1) == 32 ? 32 : atoi(type.s + 1) == 16 ? 16 : 64;
		if (ptx_parse_int(ps.ops[2], &bound))
			reg = ps.ops[1];
		else if (ptx_parse_int(ps.ops[1], &bound))
			reg = ps.ops[2], cmp = mirror(cmp);
		else
			return -1;
		at_set = i;
	}
	if (at_set < 0 || reg.s == NULL || reg.s[0] != '%')
		return -1;
	for (int i = first; i < last; i++) {
		ptx_split_inst(p->insts[i].s, p->insts[i].len, &ps);
		if (!writes(&ps, reg))
			continue;
		struct span base = ptx_base_of(ps.op);
		long long c;
		if (at_step >= 0 || ps.nops != 3 || !(ptx_span_eq(base, "add") || ptx_span_eq(base, "sub")))
			return -1;
		if (ps.ops[1].n == reg.n && memcmp(ps.ops[1].s, reg.s, reg.n) == 0 &&
		    ptx_parse_int(ps.ops[2], &c))
			step = c;
		else if (ptx_span_eq(base, "add") && ps.ops[2].n == reg.n &&
			 memcmp(ps.ops[2].s, reg.s, reg.n) == 0 && ptx_parse_int(ps.ops[1], &c))
			step = c;
		else
			return -1;
		if (ptx_span_eq(base, "sub"))
			step = -step;
		at_step = i;
	}
	if (at_step < 0 || step == 0)
		return -1;
	/* the counter's start: entered only by falling through from the block
	 * before the head (no other branch into it), set there or on the one
	 * path back from it */
	if (l->head == 0 || head->fwd_in || p->any_target || p->blocks[l->head - 1].ends)
		return -1;
	const struct block *pre = &p->blocks[l->head - 1];
	if (const_before(p, l->head - 1, pre->first + pre->n, reg, &init, 0) != 0)
		return -1;
	long long v = init;
	if (test_at_head) {
		if (at_step < at_set)
			return -1;
		for (long n = 0; n <= TRIP_CAP; n++) {
			int c = compare(cmp, ct, v, bound);
			if (c < 0)
				return -1;
			if (c != want)
				return n;
			v += step;
			if (v > (1LL << 40) || v < -(1LL << 40))
				return -1;
		}
		return -1;
	}
	for (long n = 1; n <= TRIP_CAP; n++) {
		long long seen = at_set > at_step ? v + step : v;
		v += step;
		int c = compare(cmp, ct, seen, bound);
		if (c < 0)
			return -1;
		if (c != want)
			return n;
		if (v > (1LL << 40) || v < -(1LL << 40))
			return -1;
	}
	return -1;
}
