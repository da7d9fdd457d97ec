/* A loaded module's mutable globals (cubin.h): their bytes at load, and the
 * check that no launch changed them (docs/TRUST.md, "Module state"). A
 * module may have a thousand: cooperative_groups leaves about 1040 libcu++
 * objects in a CUBIN, each in an allocation of its own as the driver reports
 * them (so no single copy can read several), and each is read or scanned
 * on its own (measured on an H200: about 0.04 s more per evaluation than a
 * kernel without them, docs/TRUST.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"

/* Is name one of the comma-separated names of list? */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p != '\0';) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p += len + (end != NULL);
	}
	return 0;
}

/* The globals of the CUBIN: up to a first batch in a static array, all of
 * them (on the heap) when there are more. Returns the count (0 for a
 * module that is no ELF image, PTX for the JIT) and the array in *out;
 * -1 when out of memory. */
static int list_globals(const struct job *j, struct kopt_cubin_global **out, int *heap)
{
	enum { FIRST = 256 };
	static struct kopt_cubin_global first[FIRST]; /* the worker is single-threaded */
	char err[256];
	*heap = 0;
	*out = first;
	int n = kopt_cubin_globals(j->cubin, j->cubin_len, first, FIRST, err, sizeof err);
	if (n <= FIRST)
		return n < 0 ? 0 : n;
	struct kopt_cubin_global *all = calloc((size_t)n, sizeof *all);
	if (all == NULL)
		return -1;
	int again = kopt_cubin_globals(j->cubin, j->cubin_len, all, n, err, sizeof err);
	if (again != n) {
		free(all);
		return -1;
	}
	*heap = 1;
	*out = all;
	return n;
}

CUresult kopt_worker_snapshot_globals(struct worker *w, struct wmodule *m, const struct job *j)
{
	struct kopt_cubin_global *found;
	int heap;
	int n = list_globals(j, &found, &heap);
	if (n < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = CUDA_SUCCESS;
	m->globals = calloc((size_t)n + 1, sizeof *m->globals);
	if (m->globals == NULL)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; r == CUDA_SUCCESS && i < n; i++) {
		if (found[i].too_long) {
			snprintf(w->log, sizeof w->log,
				 "the module has a global variable whose name is longer than %d "
				 "characters; kopt cannot follow it",
				 KOPT_GLOBAL_NAME_MAX - 1);
			r = CUDA_ERROR_INVALID_IMAGE;
			break;
		}
		struct mglobal *g = &m->globals[m->nglobals];
		memcpy(g->name, found[i].name, sizeof g->name);
		if (kopt_cu.cuModuleGetGlobal(&g->ptr, &g->size, m->mod, g->name) != CUDA_SUCCESS ||
		    g->size == 0)
			continue; /* optimised away */
		m->nglobals++;
		g->declared = listed(j->state, g->name);
		g->zero = !found[i].initialised; /* .nv.global is zeroed at load */
	}
	if (heap)
		free(found);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < m->nglobals; i++) {
		struct mglobal *g = &m->globals[i];
		if (g->zero)
			continue;
		if ((g->image = malloc(g->size)) == NULL)
			return CUDA_ERROR_OUT_OF_MEMORY;
		if ((r = kopt_cu.cuMemcpyDtoH(g->image, g->ptr, g->size)) != CUDA_SUCCESS)
			return r;
		g->zero = 1;
		for (size_t k = 0; k < g->size && g->zero; k++)
			g->zero = g->image[k] == 0;
	}
	/* a declared name the module lacks is no error: an edit may have removed
	 * the variable, and a misspelt one leaves the real variable undeclared,
	 * which kopt_worker_check_globals then names */
	return CUDA_SUCCESS;
}

/* Bytes of g that differ from its load-time image: zero-initialised ones
 * are scanned on the device (they can be large memo arrays), others copied
 * back. -1 when they cannot be read. */
static long long changed_bytes(struct worker *w, const struct mglobal *g)
{
	if (g->image == NULL) {
		unsigned long long words = g->size / 4, found[2] = {0, 0};
		struct scan run = {g->ptr, words, 0u};
		CUresult r = kopt_worker_scan_runs(w, &run, 1, found);
		unsigned char tail[4] = {0, 0, 0, 0};
		if (r == CUDA_SUCCESS && g->size % 4 != 0)
			r = kopt_cu.cuMemcpyDtoH(tail, g->ptr + words * 4, g->size % 4);
		if (r != CUDA_SUCCESS)
			return -1;
		/* the span from the first to the last changed word */
		long long changed = found[1] > 0 ? (long long)(found[1] - (words - found[0])) * 4 : 0;
		for (size_t k = 0; k < g->size % 4; k++)
			changed += tail[k] != 0;
		return changed;
	}
	unsigned char *now = malloc(g->size);
	if (now == NULL || kopt_cu.cuMemcpyDtoH(now, g->ptr, g->size) != CUDA_SUCCESS) {
		free(now);
		return -1;
	}
	long long changed = 0;
	for (size_t k = 0; k < g->size; k++)
		changed += now[k] != g->image[k];
	free(now);
	return changed;
}

const char *kopt_worker_check_globals(struct worker *w, const struct wmodule *m, const char *what)
{
	if (!w->check_globals)
		return NULL;
	for (int i = 0; i < m->nglobals; i++) {
		const struct mglobal *g = &m->globals[i];
		if (g->declared)
			continue;
		long long changed = changed_bytes(w, g);
		if (changed < 0) {
			snprintf(w->log, sizeof w->log, "%s: cannot read the module variable '%s'",
				 what, g->name);
			return "crash";
		}
		if (changed > 0) {
			snprintf(w->log, sizeof w->log,
				 "%s: the kernel kept state across launches in its module variable "
				 "'%s' (up to %lld of its %zu bytes changed since load); results that "
				 "depend "
				 "on earlier launches cannot be trusted (declare it in the spec's "
				 "kernel.state if the kernel needs it: kopt then resets it before "
				 "every launch)",
				 what, g->name, changed, g->size);
			return "wrong";
		}
	}
	return NULL;
}
