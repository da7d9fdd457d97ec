/* A loaded module's mutable globals (cubin.h): their bytes at load, and the
 * check that no launch changed them (docs/TRUST.md, "Module state"). A
 * module may have a thousand: cooperative_groups leaves about 1040 libcu++
 * objects in a CUBIN, each an allocation of its own as the driver reports
 * them, so no single copy can read several. Where there are more than
 * GATHER_MIN small ones, a kernel (kopt_gather, harness.cu) packs them and
 * one copy reads them all; otherwise (and for large ones: memo arrays are
 * scanned on the device) each is read on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"

#define GATHER_MIN 16
#define GATHER_ONE_MAX ((size_t)64 << 10) /* larger ones are scanned on the device */

void kopt_worker_free_gather(struct worker *w, struct wmodule *m)
{
	if (!w->hung) {
		if (m->gather_list)
			kopt_cu.cuMemFree(m->gather_list);
		if (m->gather_dev)
			kopt_cu.cuMemFree(m->gather_dev);
	}
	free(m->gather_host);
	free(m->gather_list_host);
	m->gather_list = m->gather_dev = 0;
	m->gather_host = NULL;
	m->gather_list_host = NULL;
	m->ngather = 0;
}

/* Packs the small undeclared globals' bytes into m->gather_host (one kernel
 * and one copy). 0, or -1 when the gather is off or failed (then each is
 * read on its own). */
static int gather(struct worker *w, const struct wmodule *m)
{
	if (m->ngather == 0)
		return -1;
	CUdeviceptr list = m->gather_list, out = m->gather_dev;
	void *params[] = {&list, &out};
	/* the list again each time: device memory a kernel could reach */
	CUresult r = kopt_cu.cuMemcpyHtoDAsync(m->gather_list, m->gather_list_host,
					       (size_t)m->ngather * 3 * sizeof *m->gather_list_host,
					       w->stream);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuLaunchKernel(w->gather, (unsigned)m->ngather, 1, 1, 128, 1, 1, 0,
					    w->stream, params, NULL);
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 && r == CUDA_SUCCESS)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	if (r == CUDA_SUCCESS)
		r = kopt_worker_download(w, m->gather_host, m->gather_dev, m->gather_bytes);
	return r == CUDA_SUCCESS ? 0 : -1;
}

/* Plans the gather when the module has more than GATHER_MIN small
 * undeclared globals: their list on the device, and buffers for the packed
 * bytes. Leaves it off (each global read on its own) when anything fails. */
static void plan_gather(struct worker *w, struct wmodule *m)
{
	int n = 0;
	size_t bytes = 0;
	for (int i = 0; i < m->nglobals; i++) {
		struct mglobal *g = &m->globals[i];
		g->packed = -1;
		if (!g->declared && g->size <= GATHER_ONE_MAX) {
			g->packed = (long long)bytes;
			bytes += g->size;
			n++;
		}
	}
	if (n <= GATHER_MIN)
		return;
	unsigned long long *list = malloc((size_t)n * 3 * sizeof *list);
	m->gather_host = malloc(bytes);
	int k = 0;
	for (int i = 0; list != NULL && i < m->nglobals; i++) {
		const struct mglobal *g = &m->globals[i];
		if (g->packed < 0)
			continue;
		list[3 * k] = g->ptr;
		list[3 * k + 1] = g->size;
		list[3 * k + 2] = (unsigned long long)g->packed;
		k++;
	}
	size_t list_bytes = (size_t)n * 3 * sizeof *list;
	int ok = list != NULL && m->gather_host != NULL &&
		 kopt_cu.cuMemAlloc(&m->gather_list, list_bytes) == CUDA_SUCCESS &&
		 kopt_cu.cuMemAlloc(&m->gather_dev, bytes) == CUDA_SUCCESS &&
		 kopt_worker_upload(w, m->gather_list, list, list_bytes) == CUDA_SUCCESS;
	m->gather_list_host = list;
	m->ngather = n;
	m->gather_bytes = bytes;
	if (!ok)
		kopt_worker_free_gather(w, m);
}

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
	plan_gather(w, m);
	int packed = gather(w, m) == 0;
	for (int i = 0; i < m->nglobals; i++) {
		struct mglobal *g = &m->globals[i];
		if (g->zero)
			continue;
		if ((g->image = malloc(g->size)) == NULL)
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (packed && g->packed >= 0)
			memcpy(g->image, m->gather_host + g->packed, g->size);
		else if ((r = kopt_worker_download(w, g->image, g->ptr, g->size)) != CUDA_SUCCESS)
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
			r = kopt_worker_download(w, tail, g->ptr + words * 4, g->size % 4);
		if (r != CUDA_SUCCESS)
			return -1;
		/* the span from the first to the last changed word */
		long long changed = found[1] > 0 ? (long long)(found[1] - (words - found[0])) * 4 : 0;
		for (size_t k = 0; k < g->size % 4; k++)
			changed += tail[k] != 0;
		return changed;
	}
	unsigned char *now = malloc(g->size);
	if (now == NULL || kopt_worker_download(w, now, g->ptr, g->size) != CUDA_SUCCESS) {
		free(now);
		return -1;
	}
	long long changed = 0;
	for (size_t k = 0; k < g->size; k++)
		changed += now[k] != g->image[k];
	free(now);
	return changed;
}

/* The same from the bytes gathered at this check. */
static long long changed_packed(const struct wmodule *m, const struct mglobal *g)
{
	const unsigned char *now = m->gather_host + g->packed;
	long long changed = 0;
	for (size_t k = 0; k < g->size; k++)
		changed += now[k] != (g->image != NULL ? g->image[k] : 0);
	return changed;
}

const char *kopt_worker_check_globals(struct worker *w, const struct wmodule *m, const char *what)
{
	if (!w->check_globals)
		return NULL;
	int packed = gather(w, m) == 0;
	for (int i = 0; i < m->nglobals; i++) {
		const struct mglobal *g = &m->globals[i];
		if (g->declared)
			continue;
		long long changed = packed && g->packed >= 0 ? changed_packed(m, g) : changed_bytes(w, g);
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
