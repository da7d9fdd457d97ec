/* PTX text to functions, blocks, loops and a region tree with static work.
 * See ptx.h for the contract. One pass over the text collects each
 * function's instructions and blocks; at the function's closing brace its
 * labels are resolved (a hash table), back edges found, loops nested and
 * their trip counts searched, and the regions filled. Nothing here trusts
 * the input: every read is bounded by the text's length, every table grows
 * through one checked helper, and a malformed text is a sentence in err. */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_impl.h"

/* One growing array: *items of *n used, *cap allocated, of size each. */
static int grow(void **items, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = realloc(*items, c * size);
	if (p == NULL)
		return -1;
	*items = p;
	*cap = c;
	return 0;
}

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err, p->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int ptx_oom(struct parser *p)
{
	return fail(p, "out of memory while reading the PTX");
}


/* --- blocks --- */

static int new_block(struct parser *p)
{
	if (grow((void **)&p->blocks, &p->cap_blocks, p->n_blocks, sizeof *p->blocks) != 0)
		return ptx_oom(p);
	struct block *b = &p->blocks[p->n_blocks++];
	memset(b, 0, sizeof *b);
	b->first = (int)p->n_insts;
	b->loop = -1;
	b->back_from = -1;
	p->open_block = 1;
	return 0;
}

static int add_label(struct parser *p, struct span name)
{
	if (!p->open_block || p->blocks[p->n_blocks - 1].n > 0 ||
	    p->blocks[p->n_blocks - 1].label.s != NULL)
		if (new_block(p) != 0)
			return -1;
	p->blocks[p->n_blocks - 1].label = name;
	p->blocks[p->n_blocks - 1].label_scope = p->cur_scope;
	return 0;
}

static long count_regs(struct span rest)
{
	/* ".b32 %r<40>" -> 40; ".b32 %a, %b" -> 2 */
	const char *lt = memchr(rest.s, '<', rest.n);
	if (lt != NULL) {
		long long v = 0;
		const char *gt = memchr(lt, '>', rest.n - (size_t)(lt - rest.s));
		struct span num = {lt + 1, gt ? (size_t)(gt - lt - 1) : 0};
		return ptx_parse_int(num, &v) && v > 0 && v < 1000000 ? (long)v : 0;
	}
	long n = 1;
	for (size_t i = 0; i < rest.n; i++)
		n += rest.s[i] == ',';
	return n;
}

static void declare(struct parser *p, struct span st)
{
	/* registers of the function's own scope: inline asm's "{ .reg .pred
	 * p; ... }" declares its own in every unrolled copy */
	if (ptx_starts(st.s, st.n, ".reg") && p->cur_scope == 0) {
		struct span rest = ptx_trim(st.s + 4, st.n - 4);
		long n = count_regs(rest);
		if (ptx_starts(rest.s, rest.n, ".pred"))
			p->fn.regs_pred += n;
		else if (ptx_starts(rest.s, rest.n, ".b64") || ptx_starts(rest.s, rest.n, ".u64") ||
			 ptx_starts(rest.s, rest.n, ".s64") || ptx_starts(rest.s, rest.n, ".f64"))
			p->fn.regs_64 += n;
		else if (ptx_starts(rest.s, rest.n, ".b128"))
			p->fn.regs_64 += 2 * n;
		else if (ptx_starts(rest.s, rest.n, ".b32") || ptx_starts(rest.s, rest.n, ".u32") ||
			 ptx_starts(rest.s, rest.n, ".s32") || ptx_starts(rest.s, rest.n, ".f32"))
			p->fn.regs_32 += n;
		else
			p->fn.regs_16 += n;
	} else if (ptx_starts(st.s, st.n, ".shared")) {
		struct span op = {st.s, 0};
		while (op.n < st.n && !isspace((unsigned char)st.s[op.n]))
			op.n++;
		/* ".shared .align 4 .b8 name[4224]": the type is a later word */
		long elem = 0;
		const char *q = st.s;
		const char *end = st.s + st.n;
		while (q < end) {
			while (q < end && isspace((unsigned char)*q))
				q++;
			struct span word = {q, 0};
			while (q < end && !isspace((unsigned char)*q))
				q++;
			word.n = (size_t)(q - word.s);
			if (word.n > 1 && word.s[0] == '.') {
				struct span t = {word.s + 1, word.n - 1};
				long b = ptx_access_bytes(t);
				if (b > 0)
					elem = b;
			}
		}
		long size = elem;
		for (const char *b = memchr(st.s, '[', st.n); b != NULL && size > 0;
		     b = memchr(b + 1, '[', (size_t)(end - b - 1))) {
			const char *c = memchr(b, ']', (size_t)(end - b));
			long long v = 0;
			struct span num = {b + 1, c ? (size_t)(c - b - 1) : 0};
			if (!ptx_parse_int(num, &v) || v < 0 || v > (1LL << 32)) {
				size = 0; /* extern (dynamic) or unknown */
				break;
			}
			size *= (long)v;
			if (c == NULL || c + 1 >= end)
				break;
		}
		p->fn.smem_bytes += size;
	}
}

static int add_inst(struct parser *p, struct span st, int line)
{
	if (st.s[0] == '.') {
		declare(p, st);
		return 0;
	}
	if (!p->open_block && new_block(p) != 0)
		return -1;
	if (grow((void **)&p->insts, &p->cap_insts, p->n_insts, sizeof *p->insts) != 0)
		return ptx_oom(p);
	struct inst *in = &p->insts[p->n_insts++];
	in->s = st.s;
	in->len = (unsigned)st.n;
	in->line = line;
	in->file = p->cur_file;
	in->src = p->cur_src;
	if (p->cur_file > 0 && p->cur_file < 64)
		p->file_count[p->cur_file]++;
	struct block *b = &p->blocks[p->n_blocks - 1];
	b->n++;
	struct parsed ps;
	ptx_split_inst(st.s, st.n, &ps);
	ptx_classify(&ps, &b->work);
	struct span base = ptx_base_of(ps.op);
	if (ptx_span_eq(base, "bra")) {
		if (ps.nops >= 1) {
			b->target = ps.ops[0];
			b->target_line = line;
			b->target_scope = p->cur_scope;
		}
		b->cond = ps.pred.n > 0;
		b->ends = !b->cond;
		p->open_block = 0;
		if (ps.nops >= 1 && ps.ops[0].n > 0 && ps.ops[0].s[0] == '%')
			p->any_target = 1; /* to an address in a register */
	} else if (ptx_span_eq(base, "brx") || ptx_span_eq(base, "ret") || ptx_span_eq(base, "exit") ||
		   ptx_span_eq(base, "trap")) {
		p->any_target |= ptx_span_eq(base, "brx");
		b->ends = ps.pred.n == 0;
		p->open_block = 0;
	}
	if (ptx_span_eq(base, "call")) {
		/* "call.uni (retval0), name, (param0);" or "call.uni name, (...);";
		 * a call through a register names no function */
		for (int k = 0; k < ps.nops; k++) {
			if (ps.ops[k].n == 0 || ps.ops[k].s[0] == '(')
				continue;
			if (ps.ops[k].s[0] != '%') {
				if (grow((void **)&p->calls, &p->cap_calls, p->n_calls, sizeof *p->calls) != 0)
					return ptx_oom(p);
				p->calls[p->n_calls++] = (struct call){p->out->n_functions, ps.ops[k]};
			}
			break;
		}
	}
	return 0;
}


static int add_region(struct parser *p, enum kopt_ptx_region_kind kind, const char *name,
		      int parent, int depth)
{
	struct kopt_ptx *o = p->out;
	if (grow((void **)&o->regions, &p->cap_regions, o->n_regions, sizeof *o->regions) != 0)
		return ptx_oom(p), -1;
	struct kopt_ptx_region *r = &o->regions[o->n_regions];
	memset(r, 0, sizeof *r);
	r->function = (int)o->n_functions;
	r->parent = parent;
	r->depth = depth;
	r->kind = kind;
	r->name = name;
	r->trip = 1;
	return (int)o->n_regions++;
}

static void widen(int *lo, int *hi, int a, int b)
{
	if (a <= 0)
		return;
	if (*lo == 0 || a < *lo)
		*lo = a;
	if (b > *hi)
		*hi = b;
}

static int end_function(struct parser *p, int line)
{
	struct kopt_ptx *o = p->out;
	if (ptx_build_labels(p) != 0)
		return -1;
	p->n_loops = 0;
	for (size_t b = 0; b < p->n_blocks; b++) {
		struct block *bl = &p->blocks[b];
		if (bl->target.s == NULL || bl->target.n == 0 || bl->target.s[0] == '%')
			continue;
		int t = ptx_find_label(p, bl->target, bl->target_scope);
		if (t < 0)
			return fail(p, "malformed PTX: the branch at line %d goes to '%.*s', which function '%s' does not define",
				    bl->target_line, (int)(bl->target.n > 80 ? 80 : bl->target.n),
				    bl->target.s, p->fn.name);
		if ((size_t)t > b) {
			p->blocks[t].fwd_in = 1;
			continue;
		}
		if ((int)b > p->blocks[t].back_from)
			p->blocks[t].back_from = (int)b;
		size_t k = 0;
		while (k < p->n_loops && p->loops[k].head != t)
			k++;
		if (k == p->n_loops) {
			if (grow((void **)&p->loops, &p->cap_loops, p->n_loops, sizeof *p->loops) != 0)
				return ptx_oom(p);
			p->loops[p->n_loops++] = (struct loop){t, (int)b, -1, -1, -1};
		} else if ((int)b > p->loops[k].latch) {
			p->loops[k].latch = (int)b;
		}
	}
	if (p->n_loops > 1)
		qsort(p->loops, p->n_loops, sizeof *p->loops, ptx_cmp_loops);
	/* nesting: the innermost earlier loop that contains this one */
	for (size_t k = 0; k < p->n_loops; k++) {
		int par = k > 0 ? (int)k - 1 : -1;
		while (par >= 0 && p->loops[par].latch < p->loops[k].latch)
			par = p->loops[par].parent;
		p->loops[k].parent = par;
		for (int b = p->loops[k].head; b <= p->loops[k].latch; b++)
			p->blocks[b].loop = (int)k;
	}
	for (size_t k = 0; k < p->n_loops; k++)
		p->loops[k].trip = ptx_trip_count(p, &p->loops[k]);

	/* regions */
	int fr = add_region(p, KOPT_PTX_FUNCTION, "function", -1, 0);
	if (fr < 0)
		return -1;
	int first_head = -1, last_latch = -1;
	for (size_t k = 0; k < p->n_loops; k++)
		if (p->loops[k].parent < 0) {
			if (first_head < 0)
				first_head = p->loops[k].head;
			if (p->loops[k].latch > last_latch)
				last_latch = p->loops[k].latch;
		}
	int pro = -1, mainr = -1, epi = -1, body = -1;
	if (p->n_loops == 0) {
		body = add_region(p, KOPT_PTX_STAGE, "body", fr, 1);
		if (body < 0)
			return -1;
	} else {
		if (first_head > 0 && (pro = add_region(p, KOPT_PTX_STAGE, "prologue", fr, 1)) < 0)
			return -1;
		if ((mainr = add_region(p, KOPT_PTX_STAGE, "main loop", fr, 1)) < 0)
			return -1;
		for (size_t k = 0; k < p->n_loops; k++) {
			struct loop *l = &p->loops[k];
			int par = l->parent < 0 ? mainr : p->loops[l->parent].region;
			l->region = add_region(p, KOPT_PTX_LOOP, "loop", par,
					       o->regions[par].depth + 1);
			if (l->region < 0)
				return -1;
			o->regions[l->region].trip = l->trip;
		}
		if ((size_t)last_latch + 1 < p->n_blocks &&
		    (epi = add_region(p, KOPT_PTX_STAGE, "epilogue", fr, 1)) < 0)
			return -1;
	}
	/* the main file: the one most instructions' .loc name */
	int main_file = 0;
	for (int f = 1; f < 64; f++)
		if (p->file_count[f] > p->file_count[main_file])
			main_file = f;
	for (size_t b = 0; b < p->n_blocks; b++) {
		struct block *bl = &p->blocks[b];
		int r = bl->loop >= 0		       ? p->loops[bl->loop].region
			: body >= 0		       ? body
			: (int)b < first_head	       ? pro
			: (int)b <= last_latch || epi < 0 ? mainr
						       : epi;
		struct kopt_ptx_region *rg = &o->regions[r];
		rg->n_blocks++;
		ptx_work_add(&rg->work, &bl->work, 1);
		for (int i = bl->first; i < bl->first + bl->n; i++) {
			const struct inst *in = &p->insts[i];
			widen(&rg->ptx_first, &rg->ptx_last, in->line, in->line);
			if (main_file > 0 && in->file == main_file)
				widen(&rg->src_first, &rg->src_last, in->src, in->src);
		}
	}
	/* totals and ranges upwards (children follow their parents), weights downwards */
	size_t r0 = (size_t)fr, r1 = o->n_regions;
	for (size_t r = r0; r < r1; r++)
		o->regions[r].total = o->regions[r].work;
	for (size_t r = r1; r-- > r0 + 1;) {
		struct kopt_ptx_region *c = &o->regions[r], *par = &o->regions[c->parent];
		ptx_work_add(&par->total, &c->total, 1);
		widen(&par->ptx_first, &par->ptx_last, c->ptx_first, c->ptx_last);
		widen(&par->src_first, &par->src_last, c->src_first, c->src_last);
	}
	long *mult = calloc(r1 - r0, sizeof *mult);
	if (mult == NULL)
		return ptx_oom(p);
	for (size_t r = r0; r < r1; r++) {
		struct kopt_ptx_region *c = &o->regions[r];
		long m = c->parent < 0 ? 1 : mult[(size_t)c->parent - r0];
		if (c->kind == KOPT_PTX_LOOP && c->trip > 0)
			m = m > (1L << 40) / c->trip ? (1L << 40) : m * c->trip;
		mult[r - r0] = m;
		ptx_work_add(&c->weighted, &c->work, m);
	}
	for (size_t r = r1; r-- > r0 + 1;)
		ptx_work_add(&o->regions[o->regions[r].parent].weighted, &o->regions[r].weighted, 1);
	/* the function region's weighted work is the sum of its children's */
	free(mult);

	struct kopt_ptx_function *fn = &p->fn;
	fn->region = fr;
	fn->n_regions = (int)(r1 - r0);
	fn->n_blocks = (int)p->n_blocks;
	fn->n_loops = (int)p->n_loops;
	fn->ptx_last = line;
	fn->src_file = (const char *)(intptr_t)main_file; /* resolved when the text ends */
	if (grow((void **)&o->functions, &p->cap_functions, o->n_functions, sizeof *o->functions) != 0)
		return ptx_oom(p);
	o->functions[o->n_functions++] = *fn;
	o->n_insts += (long)p->n_insts;
	memset(&p->fn, 0, sizeof p->fn);
	return 0;
}

/* An entry's static shared memory with that of every function it reaches
 * by direct calls (ptxas allocates a .func's shared arrays in each kernel
 * that calls it), each counted once. */
static int add_callee_shared(struct parser *p)
{
	struct kopt_ptx *o = p->out;
	if (p->n_calls == 0)
		return 0;
	char *seen = malloc(o->n_functions);
	size_t *stack = malloc(o->n_functions * sizeof *stack);
	if (seen == NULL || stack == NULL) {
		free(seen);
		free(stack);
		return ptx_oom(p);
	}
	for (size_t e = 0; e < o->n_functions; e++) {
		if (!o->functions[e].is_entry)
			continue;
		memset(seen, 0, o->n_functions);
		size_t n = 0;
		long extra = 0;
		seen[e] = 1;
		stack[n++] = e;
		while (n > 0) {
			size_t f = stack[--n];
			for (size_t c = 0; c < p->n_calls; c++) {
				if (p->calls[c].caller != f)
					continue;
				for (size_t g = 0; g < o->n_functions; g++) {
					if (seen[g] || strlen(o->functions[g].name) != p->calls[c].callee.n ||
					    memcmp(o->functions[g].name, p->calls[c].callee.s,
						   p->calls[c].callee.n) != 0)
						continue;
					seen[g] = 1;
					extra += o->functions[g].smem_bytes;
					stack[n++] = g;
				}
			}
		}
		o->functions[e].smem_bytes += extra;
	}
	free(seen);
	free(stack);
	return 0;
}

/* A brace scope inside the function being read (its body is scope 0). */
static int open_scope(struct parser *p)
{
	if (grow((void **)&p->scope_parent, &p->cap_scopes, p->n_scopes, sizeof *p->scope_parent) != 0)
		return ptx_oom(p);
	p->scope_parent[p->n_scopes] = p->n_scopes ? p->cur_scope : -1;
	p->cur_scope = (int)p->n_scopes++;
	return 0;
}

static int begin_function(struct parser *p, struct span header, int line)
{
	/* ".visible .entry name(" or ".func (.param .b32 r) name(" */
	const char *s = header.s, *end = header.s + header.n;
	const char *kw = NULL;
	int entry = 0;
	for (const char *q = s; q + 5 <= end && kw == NULL; q++) {
		if (q + 6 <= end && memcmp(q, ".entry", 6) == 0)
			kw = q + 6, entry = 1;
		else if (memcmp(q, ".func", 5) == 0)
			kw = q + 5;
	}
	if (kw == NULL) {
		p->in_func = 0; /* a .section or an initializer: its braces are skipped */
		return 0;
	}
	while (kw < end && isspace((unsigned char)*kw))
		kw++;
	if (kw < end && *kw == '(') { /* .func's return parameters */
		int depth = 0;
		for (; kw < end; kw++) {
			depth += *kw == '(';
			depth -= *kw == ')';
			if (depth == 0) {
				kw++;
				break;
			}
		}
		while (kw < end && isspace((unsigned char)*kw))
			kw++;
	}
	const char *n0 = kw;
	while (kw < end && (isalnum((unsigned char)*kw) || *kw == '_' || *kw == '$'))
		kw++;
	if (kw == n0)
		return fail(p, "malformed PTX: the function at line %d has no name", line);
	memset(&p->fn, 0, sizeof p->fn);
	p->fn.name = malloc((size_t)(kw - n0) + 1);
	if (p->fn.name == NULL)
		return ptx_oom(p);
	memcpy(p->fn.name, n0, (size_t)(kw - n0));
	p->fn.name[kw - n0] = '\0';
	p->fn.is_entry = entry;
	p->fn.ptx_first = line;
	p->in_func = 1;
	p->any_target = 0;
	p->n_insts = p->n_blocks = 0;
	p->n_scopes = 0;
	if (open_scope(p) != 0)
		return -1;
	p->open_block = 0;
	p->cur_file = p->cur_src = 0;
	memset(p->file_count, 0, sizeof p->file_count);
	return 0;
}

/* ".loc 1 34 5" or ".loc 1 20 5, function_name $L, inlined_at 1 60 3" */
static void read_loc(struct parser *p, struct span st)
{
	const char *s = st.s + 4, *end = st.s + st.n;
	for (const char *q = s; q + 10 <= end; q++)
		if (memcmp(q, "inlined_at", 10) == 0)
			s = q + 10;
	long f = 0, l = 0;
	char buf[64];
	size_t n = (size_t)(end - s) < sizeof buf - 1 ? (size_t)(end - s) : sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (sscanf(buf, "%ld %ld", &f, &l) == 2 && f > 0 && f < MAX_FILES && l >= 0 && l < (1L << 30)) {
		p->cur_file = (int)f;
		p->cur_src = (int)l;
	}
}

/* ".file 1 "name"" (optionally ", time, size") */
static int read_file_dir(struct parser *p, struct span st)
{
	char buf[32];
	const char *q = memchr(st.s, '"', st.n);
	size_t n = q ? (size_t)(q - st.s) : st.n;
	if (n >= sizeof buf)
		return 0;
	memcpy(buf, st.s, n);
	buf[n] = '\0';
	long idx = 0;
	if (sscanf(buf, ".file %ld", &idx) != 1 || idx <= 0 || idx >= MAX_FILES || q == NULL)
		return 0;
	const char *e = memchr(q + 1, '"', st.n - (size_t)(q + 1 - st.s));
	if (e == NULL)
		return 0;
	struct kopt_ptx *o = p->out;
	if ((size_t)idx >= o->n_files) {
		char **f = realloc(o->files, ((size_t)idx + 1) * sizeof *f);
		if (f == NULL)
			return ptx_oom(p);
		for (size_t i = o->n_files; i <= (size_t)idx; i++)
			f[i] = NULL;
		o->files = f;
		o->n_files = (size_t)idx + 1;
	}
	free(o->files[idx]);
	o->files[idx] = malloc((size_t)(e - q));
	if (o->files[idx] == NULL)
		return ptx_oom(p);
	memcpy(o->files[idx], q + 1, (size_t)(e - q - 1));
	o->files[idx][e - q - 1] = '\0';
	return 0;
}

/* A statement split over lines is copied into one buffer, so spans stay
 * contiguous; the copies live until the parse ends. */
static int keep_copy(struct parser *p, const char *buf, size_t n, struct span *out)
{
	if (grow((void **)&p->copies, &p->cap_copies, p->n_copies, sizeof *p->copies) != 0)
		return ptx_oom(p);
	char *c = malloc(n + 1);
	if (c == NULL)
		return ptx_oom(p);
	memcpy(c, buf, n);
	c[n] = '\0';
	p->copies[p->n_copies++] = c;
	out->s = c;
	out->n = n;
	return 0;
}

static int statement(struct parser *p, struct span st, int line, int depth)
{
	if (st.n == 0)
		return 0;
	if (depth == 0) {
		if (ptx_starts(st.s, st.n, ".file"))
			return read_file_dir(p, st);
		return 0; /* module-scope declarations */
	}
	if (!p->in_func)
		return 0;
	if (ptx_starts(st.s, st.n, ".loc")) {
		read_loc(p, st);
		return 0;
	}
	return add_inst(p, st, line);
}

static int parse(struct parser *p)
{
	const char *t = p->text, *end = t + p->len;
	int line = 0, depth = 0, in_comment = 0;
	char stmt[STMT_CAP];
	size_t sn = 0;
	int stmt_line = 0, multi = 0;
	int saw_version = 0;
	while (t < end) {
		const char *eol = memchr(t, '\n', (size_t)(end - t));
		if (eol == NULL)
			eol = end;
		line++;
		const char *s = t;
		t = eol + 1;
		/* directives that end with the line, not with ';' */
		struct span whole = ptx_trim(s, (size_t)(eol - s));
		if (!in_comment && sn == 0 &&
		    (ptx_starts(whole.s, whole.n, ".loc") || ptx_starts(whole.s, whole.n, ".file") ||
		     ptx_starts(whole.s, whole.n, ".version") || ptx_starts(whole.s, whole.n, ".target") ||
		     ptx_starts(whole.s, whole.n, ".address_size"))) {
			saw_version |= ptx_starts(whole.s, whole.n, ".version");
			if (statement(p, whole, line, depth) != 0)
				return -1;
			continue;
		}
		const char *seg = s; /* start of the statement's piece on this line */
		for (const char *c = s; c <= eol; c++) {
			int ch = c < eol ? *c : '\n';
			if (in_comment) {
				if (ch == '*' && c + 1 < eol && c[1] == '/') {
					in_comment = 0;
					c++;
					seg = c + 1;
				}
				continue;
			}
			int cut = ch == '\n' || ch == ';' || ch == '{' || ch == '}' ||
				  (ch == '/' && c + 1 < eol && (c[1] == '/' || c[1] == '*'));
			if (!cut && ch == ':' && sn == 0) {
				/* a label: "name:" at the start of a statement */
				struct span l = ptx_trim(seg, (size_t)(c - seg));
				int ok = l.n > 0;
				for (size_t i = 0; i < l.n && ok; i++)
					ok = isalnum((unsigned char)l.s[i]) || l.s[i] == '_' ||
					     l.s[i] == '$';
				if (ok && depth > 0 && p->in_func) {
					if (add_label(p, l) != 0)
						return -1;
					seg = c + 1;
				}
				continue;
			}
			if (!cut)
				continue;
			/* the piece seg..c joins the statement */
			struct span piece = ptx_trim(seg, (size_t)(c - seg));
			if (piece.n > 0) {
				if (sn == 0)
					stmt_line = line;
				else
					multi = 1;
				if (sn > 0 && sn < STMT_CAP)
					stmt[sn++] = ' ';
				size_t take = piece.n < STMT_CAP - sn ? piece.n : STMT_CAP - sn;
				memcpy(stmt + sn, piece.s, take);
				sn += take;
			}
			struct span st = {NULL, 0};
			int done = ch == ';' || ch == '{' || ch == '}';
			if (done && sn > 0) {
				if (!multi && piece.n == sn)
					st = piece; /* in the text itself */
				else if (keep_copy(p, stmt, sn, &st) != 0)
					return -1;
			}
			if (ch == ';') {
				if (st.n > 0 && statement(p, st, stmt_line, depth) != 0)
					return -1;
				sn = 0, multi = 0;
			} else if (ch == '{') {
				if (depth == 0) {
					if (begin_function(p, st.n ? st : (struct span){"", 0}, line) != 0)
						return -1;
				} else if (st.n > 0 && statement(p, st, stmt_line, depth) != 0) {
					return -1;
				}
				if (depth > 1000)
					return fail(p, "malformed PTX: braces nested deeper than 1000 at line %d", line);
				if (depth > 0 && p->in_func && open_scope(p) != 0)
					return -1;
				depth++;
				sn = 0, multi = 0;
			} else if (ch == '}') {
				if (depth == 0)
					return fail(p, "malformed PTX: '}' without '{' at line %d", line);
				if (st.n > 0 && statement(p, st, stmt_line, depth) != 0)
					return -1;
				sn = 0, multi = 0;
				if (depth > 1 && p->in_func && p->cur_scope > 0)
					p->cur_scope = p->scope_parent[p->cur_scope];
				if (--depth == 0 && p->in_func) {
					if (end_function(p, line) != 0)
						return -1;
					p->in_func = 0;
				}
			} else if (ch == '/') {
				if (c[1] == '*') {
					in_comment = 1;
					c++;
					continue;
				}
				break; /* a line comment: the rest of the line */
			}
			seg = c + 1;
		}
	}
	p->out->n_lines = line;
	if (p->in_func)
		return fail(p, "truncated PTX: function '%s' is not closed (no '}' before the end)",
			    p->fn.name);
	if (p->out->n_functions == 0)
		return fail(p, saw_version ? "the PTX has no .entry or .func with a body"
					   : "not PTX: no .version directive and no .entry or .func");
	if (depth != 0 || sn > 0)
		return fail(p, "truncated PTX: the text ends inside a statement or a block");
	return 0;
}

void kopt_ptx_free(struct kopt_ptx *o)
{
	if (o == NULL)
		return;
	for (size_t i = 0; i < o->n_functions; i++)
		free(o->functions[i].name);
	for (size_t i = 0; i < o->n_files; i++)
		free(o->files[i]);
	free(o->files);
	free(o->functions);
	free(o->regions);
	free(o);
}

int kopt_ptx_parse(const char *text, size_t len, struct kopt_ptx **out, char *err, size_t errlen)
{
	*out = NULL;
	if (len > KOPT_PTX_MAX_BYTES) {
		snprintf(err, errlen, "the PTX is %zu bytes, more than the %u kopt reads", len,
			 KOPT_PTX_MAX_BYTES);
		return -1;
	}
	if (memchr(text, '\0', len) != NULL) {
		snprintf(err, errlen, "not PTX: the text holds a NUL byte (a binary file?)");
		return -1;
	}
	struct parser p;
	memset(&p, 0, sizeof p);
	p.text = text;
	p.len = len;
	p.err = err;
	p.errlen = errlen;
	p.out = calloc(1, sizeof *p.out);
	int rc = -1;
	if (p.out == NULL) {
		snprintf(err, errlen, "out of memory while reading the PTX");
		goto out;
	}
	rc = parse(&p);
	if (rc == 0)
		rc = add_callee_shared(&p);
	if (rc == 0)
		for (size_t i = 0; i < p.out->n_functions; i++) {
			size_t f = (size_t)(intptr_t)p.out->functions[i].src_file;
			p.out->functions[i].src_file =
			    f > 0 && f < p.out->n_files ? p.out->files[f] : NULL;
		}
out:
	if (rc != 0) {
		free(p.fn.name);
		if (p.out != NULL) {
			for (size_t i = 0; i < p.out->n_functions; i++)
				p.out->functions[i].src_file = NULL;
			kopt_ptx_free(p.out);
		}
	} else {
		*out = p.out;
	}
	for (size_t i = 0; i < p.n_copies; i++)
		free(p.copies[i]);
	free(p.copies);
	free(p.insts);
	free(p.blocks);
	free(p.loops);
	free(p.hash);
	free(p.scope_parent);
	free(p.calls);
	return rc;
}
