/* The worker's data: the argument list of the problem, its output buffers,
 * the cached input sets (pristine host copy, device copy, device hash, the
 * reference's outputs), modules, constant symbols and kernel parameters.
 * See run.c for how a request uses them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire.h"
#include "worker/data.h"

double kopt_worker_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int kopt_worker_wait(struct worker *w, CUstream s, int64_t timeout_ms, CUresult *res)
{
	double deadline = kopt_worker_now_ms() + (double)timeout_ms;
	int spins = 0;
	for (;;) {
		CUresult r = kopt_cu.cuStreamQuery(s);
		if (r == CUDA_SUCCESS)
			return 0;
		if (r != CUDA_ERROR_NOT_READY) {
			*res = r;
			return 2;
		}
		if (kopt_worker_now_ms() > deadline) {
			w->hung = 1;
			return 1;
		}
		if (++spins > 200) {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
	}
}

/* Every copy between the host and the device goes on the worker's stream
 * and is waited for. The plain cuMemcpyHtoD and cuMemcpyDtoH run on the
 * legacy stream, which does not order with w->stream (it is non-blocking),
 * and an upload from pageable memory may return before its DMA has landed:
 * the input hash launched next on w->stream then read inputs half copied,
 * and an honest kernel was later told it "modified its input". */
static CUresult finish_copy(struct worker *w, CUresult r)
{
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) == 1)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	return r;
}

CUresult kopt_worker_upload(struct worker *w, CUdeviceptr dst, const void *src, size_t bytes)
{
	return finish_copy(w, kopt_cu.cuMemcpyHtoDAsync(dst, src, bytes, w->stream));
}

CUresult kopt_worker_download(struct worker *w, void *dst, CUdeviceptr src, size_t bytes)
{
	return finish_copy(w, kopt_cu.cuMemcpyDtoHAsync(dst, src, bytes, w->stream));
}

CUresult kopt_worker_poison(struct worker *w)
{
	for (int i = 0; i < w->nargs; i++) {
		if (!kopt_worker_is_output(&w->args[i]))
			continue;
		int src = w->args[i].copy_from;
		if (src >= 0) {
			if (w->cur_set == NULL || w->cur_set->dev[src] == 0)
				return CUDA_ERROR_INVALID_VALUE;
			CUresult r = kopt_cu.cuMemcpyDtoDAsync(
			    w->out_dev[i], w->cur_set->dev[src],
			    w->args[i].count * kopt_dtype_size(w->args[i].type), w->stream);
			if (r != CUDA_SUCCESS)
				return r;
			continue;
		}
		w->poison[i] = kopt_check_poison_word(w->args[i].type, w->nonce++);
		CUresult r = kopt_cu.cuMemsetD32Async(
		    w->out_dev[i], w->poison[i], kopt_worker_arg_bytes(&w->args[i]) / 4, w->stream);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

int kopt_worker_cu_check(CUresult r, const char *what, char *err, size_t errlen)
{
	if (r == CUDA_SUCCESS)
		return 0;
	char buf[256];
	snprintf(err, errlen, "%s: %s", what, kopt_cuda_strerror(r, buf, sizeof buf));
	return -1;
}

static void free_set(struct worker *w, struct inputset *s)
{
	kopt_worker_free_reference(w, s);
	for (int i = 0; s->host && i < w->nargs; i++) {
		free(s->host[i]);
		if (s->dev && s->dev[i])
			kopt_worker_free_guarded(s->dev[i]);
		if (s->ref_out)
			free(s->ref_out[i]);
	}
	free(s->host);
	free(s->dev);
	free(s->ref_out);
	free(s->hash);
	free(s->ref_masked);
	free(s->ref_key);
	free(s->ref_box);
	memset(s, 0, sizeof *s);
}

void kopt_worker_free_problem(struct worker *w)
{
	for (int k = 0; k < KOPT_SETS; k++)
		free_set(w, &w->sets[k]);
	for (int i = 0; i < w->nargs; i++) {
		if (w->out_dev && w->out_dev[i])
			kopt_worker_free_guarded(w->out_dev[i]);
		if (w->ref_dev && w->ref_dev[i])
			kopt_worker_free_guarded(w->ref_dev[i]);
		if (w->scratch_dev && w->scratch_dev[i])
			kopt_worker_free_guarded(w->scratch_dev[i]);
		if (w->box_dev && w->box_dev[i])
			kopt_cu.cuMemFree(w->box_dev[i]);
		if (w->out_host && w->out_host[i])
			kopt_cu.cuMemFreeHost(w->out_host[i]);
	}
	free(w->out_dev);
	free(w->ref_dev);
	free(w->scratch_dev);
	free(w->box_dev);
	free(w->box_bytes);
	free(w->out_host);
	free(w->poison);
	free(w->args);
	w->out_dev = NULL;
	w->ref_dev = NULL;
	w->scratch_dev = NULL;
	w->box_dev = NULL;
	w->box_bytes = NULL;
	w->out_host = NULL;
	w->poison = NULL;
	w->args = NULL;
	w->nargs = 0;
	w->signature[0] = '\0';
}

int kopt_worker_parse_sizes(const char *text, size_t *out, int max)
{
	int n = 0;
	if (*text == '\0')
		return 0;
	for (const char *p = text;; p++) {
		/* strtoull would take a sign or leading spaces ("-1" wraps) */
		if (*p < '0' || *p > '9' || n == max)
			return -1;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (errno != 0 || v > SIZE_MAX)
			return -1;
		out[n++] = (size_t)v;
		p = end;
		if (*p == '\0')
			return n;
		if (*p != ',') /* also refuses a trailing comma: a digit must follow */
			return -1;
	}
}

static int parse_sizes(const char *text, size_t *out)
{
	return kopt_worker_parse_sizes(text, out, 8);
}

/* The verification fields of output a (compare, region, tolerances), read
 * every request: they change no buffer. -1 on a malformed region. */
static int read_verify(struct warg *a, const struct kopt_msgview *v, int i, int64_t count)
{
	/* kopt_msg_cstr fills each buffer, with the default "" when absent */
	char key[64], dims[256] = "", region[256] = "";
#define KEY(field) (snprintf(key, sizeof key, "a%d.%s", i + 1, field), key)
	a->compare = (int)kopt_msg_int(v, KEY("compare"), 1);
	a->tol_rel_l2 = kopt_msg_num(v, KEY("tol_rel_l2"), -1.0);
	a->tol_max_abs = kopt_msg_num(v, KEY("tol_max_abs"), -1.0);
	kopt_msg_cstr(v, KEY("dims"), dims, sizeof dims, "");
	kopt_msg_cstr(v, KEY("region"), region, sizeof region, "");
#undef KEY
	a->nd = 0;
	if (region[0] == '\0')
		return 0;
	int nd = parse_sizes(dims, a->dims);
	size_t prod = 1;
	const char *p = region;
	for (int d = 0; d < nd; d++) {
		char *end;
		a->lo[d] = (size_t)strtoull(p, &end, 10);
		if (*end != ':')
			return -1;
		a->hi[d] = (size_t)strtoull(end + 1, &end, 10);
		if (a->lo[d] >= a->hi[d] || a->hi[d] > a->dims[d] || (*end != ',' && *end != '\0'))
			return -1;
		prod *= a->dims[d];
		p = end + (*end == ',');
	}
	if (nd <= 0 || *p != '\0' || (int64_t)prod != count)
		return -1;
	a->nd = nd;
	return 0;
}

/* The tensor-map fields of argument a (kind tensormap), read every request
 * (the box follows the knobs). -1 when malformed. */
static int read_tmap(struct warg *a, const struct kopt_msgview *v, int i, int n)
{
	char key[64], dims[256] = "", box[256] = "";
	size_t d[8], b[8];
#define KEY(field) (snprintf(key, sizeof key, "a%d.%s", i + 1, field), key)
	a->tmap_of = (int)kopt_msg_int(v, KEY("of"), 0) - 1;
	a->tmap_swizzle = (int)kopt_msg_int(v, KEY("swizzle"), 0);
	kopt_msg_cstr(v, KEY("tmap_dims"), dims, sizeof dims, "");
	kopt_msg_cstr(v, KEY("box"), box, sizeof box, "");
#undef KEY
	int nd = parse_sizes(dims, d), nb = parse_sizes(box, b);
	if (a->tmap_of < 0 || a->tmap_of >= n || nd < 1 || nd > 5 || nb != nd)
		return -1;
	a->tmap_rank = nd;
	for (int k = 0; k < nd; k++) { /* the driver wants the innermost first */
		a->tmap_dims[k] = d[nd - 1 - k];
		a->tmap_box[k] = (uint32_t)b[nd - 1 - k];
	}
	return 0;
}

/* Reads the argument list of a request; (re)allocates the outputs when the
 * list's shape changed. Scalar values are refreshed every time. */
int kopt_worker_setup_args(struct worker *w, int n, const struct kopt_msgview *v, char *err,
			   size_t errlen)
{
	if (n <= 0 || n > 256) {
		snprintf(err, errlen, "request has %d arguments", n);
		return -1;
	}
	struct warg *args = calloc((size_t)n, sizeof *args);
	if (args == NULL) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	/* The shape of the list: equal signatures keep the buffers. One that
	 * does not fit is never equal to another, so a list that differs only
	 * past the cut cannot inherit buffers of another shape. */
	char sig[sizeof w->signature];
	size_t sl = 0;
	int sig_whole = 1;
	sig[0] = '\0';
	for (int i = 0; i < n; i++) {
		struct warg *a = &args[i];
		char key[64], buf[64];
#define KEY(field) (snprintf(key, sizeof key, "a%d.%s", i + 1, field), key)
		kopt_msg_cstr(v, KEY("name"), a->name, sizeof a->name, "?");
		int t = kopt_dtype_parse(kopt_msg_cstr(v, KEY("type"), buf, sizeof buf, "?"));
		const char *kind = kopt_msg_cstr(v, KEY("kind"), buf, sizeof buf, "array");
		a->kind = strcmp(kind, "scalar") == 0	   ? ARG_SCALAR
			  : strcmp(kind, "constant") == 0  ? ARG_CONSTANT
			  : strcmp(kind, "tensormap") == 0 ? ARG_TMAP
							   : ARG_ARRAY;
		int64_t count = kopt_msg_int(v, KEY("count"), 1);
		a->output = (int)kopt_msg_int(v, KEY("output"), 0);
		a->init_value = kopt_msg_num(v, KEY("init_value"), 0.0);
		a->scale = kopt_msg_num(v, KEY("scale"), 1.0);
		a->scale_every = (uint64_t)kopt_msg_int(v, KEY("scale_every"), 0);
		int d = kopt_dist_parse(kopt_msg_cstr(v, KEY("init"), buf, sizeof buf, "normal"),
					&a->init_value);
		a->value = kopt_msg_num(v, KEY("value"), 0.0);
		a->ivalue = kopt_msg_int(v, KEY("value"), 0);
		a->copy_from = (int)kopt_msg_int(v, KEY("copy"), 0) - 1;
		a->param = (int)kopt_msg_int(v, KEY("param"), 1);
		a->fixed = (int)kopt_msg_int(v, KEY("fixed"), 0);
		kopt_msg_cstr(v, KEY("file"), a->file, sizeof a->file, "");
		a->file_offset = kopt_msg_int(v, KEY("file_offset"), 0);
		kopt_msg_cstr(v, KEY("file_b"), a->file_b, sizeof a->file_b, "");
#undef KEY
		if (a->kind == ARG_TMAP && read_tmap(a, v, i, n) != 0) {
			snprintf(err, errlen, "argument %d (%s): bad tensor map (of, tmap_dims, box)",
				 i + 1, a->name);
			free(args);
			return -1;
		}
		if (read_verify(a, v, i, count) != 0) {
			snprintf(err, errlen, "argument %d (%s): bad region", i + 1, a->name);
			free(args);
			return -1;
		}
		if (t < 0 || d < 0 || count < 0) {
			snprintf(err, errlen, "argument %d (%s): bad type, init or count", i + 1,
				 a->name);
			free(args);
			return -1;
		}
		a->type = (enum kopt_dtype)t;
		a->dist = (enum kopt_dist)d;
		a->count = a->kind == ARG_SCALAR || a->kind == ARG_TMAP ? 1 : (size_t)count;
		int wr = snprintf(sig + sl, sizeof sig - sl, "%s:%d:%d:%zu:%d:%d:%.17g:%.17g/%llu:%d:%d:%d:%s@%lld:%s;",
				  a->name, t, a->kind, a->count, a->output, d, a->init_value, a->scale,
				  (unsigned long long)a->scale_every,
				  a->copy_from, a->param, a->fixed, a->file, (long long)a->file_offset,
				  a->file_b);
		if (wr > 0 && (size_t)wr < sizeof sig - sl)
			sl += (size_t)wr;
		else
			sig_whole = 0;
	}
	for (int i = 0; i < n; i++) {
		const struct warg *a = &args[i];
		int src = a->copy_from;
		if (src >= n || (src >= 0 && (!kopt_worker_is_output(a) || args[src].kind != ARG_ARRAY ||
					      args[src].output || args[src].type != a->type ||
					      args[src].count != a->count))) {
			snprintf(err, errlen,
				 "argument %d (%s): copy of argument %d, which is not an input array "
				 "of its type and size",
				 i + 1, a->name, src + 1);
			free(args);
			return -1;
		}
	}
	if (w->args != NULL && sig_whole && w->nargs == n && strcmp(sig, w->signature) == 0) {
		for (int i = 0; i < n; i++) {
			w->args[i].value = args[i].value;
			w->args[i].ivalue = args[i].ivalue;
			w->args[i].compare = args[i].compare;
			w->args[i].nd = args[i].nd;
			memcpy(w->args[i].dims, args[i].dims, sizeof args[i].dims);
			memcpy(w->args[i].lo, args[i].lo, sizeof args[i].lo);
			memcpy(w->args[i].hi, args[i].hi, sizeof args[i].hi);
			w->args[i].tol_rel_l2 = args[i].tol_rel_l2;
			w->args[i].tol_max_abs = args[i].tol_max_abs;
			w->args[i].tmap_of = args[i].tmap_of;
			w->args[i].tmap_rank = args[i].tmap_rank;
			w->args[i].tmap_swizzle = args[i].tmap_swizzle;
			memcpy(w->args[i].tmap_dims, args[i].tmap_dims, sizeof args[i].tmap_dims);
			memcpy(w->args[i].tmap_box, args[i].tmap_box, sizeof args[i].tmap_box);
		}
		free(args);
		return 0;
	}
	kopt_worker_free_problem(w);
	w->args = args;
	w->nargs = n;
	snprintf(w->signature, sizeof w->signature, "%s", sig_whole ? sig : "");
	w->out_dev = calloc((size_t)n, sizeof *w->out_dev);
	w->ref_dev = calloc((size_t)n, sizeof *w->ref_dev);
	w->scratch_dev = calloc((size_t)n, sizeof *w->scratch_dev);
	w->box_dev = calloc((size_t)n, sizeof *w->box_dev);
	w->box_bytes = calloc((size_t)n, sizeof *w->box_bytes);
	w->out_host = calloc((size_t)n, sizeof *w->out_host);
	w->poison = calloc((size_t)n, sizeof *w->poison);
	if (!w->out_dev || !w->ref_dev || !w->scratch_dev || !w->box_dev || !w->box_bytes || !w->out_host ||
	    !w->poison)
		goto oom;
	for (int i = 0; i < n; i++) {
		size_t bytes = kopt_worker_arg_bytes(&args[i]);
		if (kopt_worker_is_output(&args[i])) {
			CUresult r = kopt_worker_alloc_guarded(&w->out_dev[i], bytes);
			if (r == CUDA_SUCCESS)
				r = kopt_worker_alloc_guarded(&w->ref_dev[i], bytes);
			/* zero whenever a candidate runs (the reference's outputs are
			 * wiped once read): kopt_worker_guard_check holds it to that */
			if (r == CUDA_SUCCESS)
				r = kopt_cu.cuMemsetD32Async(w->ref_dev[i], 0, bytes / 4,
							      w->stream);
			if (kopt_worker_cu_check(r, "cuMemAlloc (output)", err, errlen))
				return -1;
			r = kopt_cu.cuMemHostAlloc(&w->out_host[i], bytes ? bytes : 4, 0);
			if (kopt_worker_cu_check(r, "cuMemHostAlloc (output)", err, errlen))
				return -1;
		} else if (args[i].kind == ARG_ARRAY) {
			CUresult r = kopt_worker_alloc_guarded(&w->scratch_dev[i], bytes);
			if (kopt_worker_cu_check(r, "cuMemAlloc (timing copy of the inputs)", err,
						 errlen))
				return -1;
		}
	}
	return 0;
oom:
	snprintf(err, errlen, "out of host memory");
	return -1;
}

/* kopt_hash of every input array of set s into out[arg] (0 for others). */
int kopt_worker_hash_inputs(struct worker *w, struct inputset *s, uint64_t *out)
{
	CUresult r = kopt_cu.cuMemsetD8Async(w->hash_dev, 0, 8 * (size_t)w->nargs, w->stream);
	for (int i = 0; r == CUDA_SUCCESS && i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_ARRAY || a->output)
			continue;
		unsigned long long words = kopt_worker_arg_bytes(a) / 4;
		CUdeviceptr dst = w->hash_dev + 8 * (CUdeviceptr)i;
		void *params[] = {&s->dev[i], &words, &dst};
		r = kopt_cu.cuLaunchKernel(w->hash, (unsigned)(4 * w->dev.sm_count), 1, 1, 256, 1,
					   1, 0, w->stream, params, NULL);
	}
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 &&
	    r == CUDA_SUCCESS)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	if (r == CUDA_SUCCESS)
		r = kopt_worker_download(w, out, w->hash_dev, 8 * (size_t)w->nargs);
	return kopt_worker_cu_check(r, "hashing the inputs", w->log, sizeof w->log);
}

/* The elements of a from its file: every input set reads the same bytes,
 * but set B (variant) reads file_b where the request gives one. */
static int read_data_file(const struct warg *a, int variant, void *dst, char *err, size_t errlen)
{
	size_t bytes = a->count * kopt_dtype_size(a->type);
	int second = variant && a->file_b[0] != '\0';
	const char *path = second ? a->file_b : a->file;
	long offset = second ? 0 : (long)a->file_offset;
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		snprintf(err, errlen, "argument '%s': cannot open '%s': %s", a->name, path,
			 strerror(errno));
		return -1;
	}
	size_t got = 0;
	int sought = fseek(f, offset, SEEK_SET) == 0;
	if (sought)
		got = fread(dst, 1, bytes, f);
	/* say whether the file is short or unreadable, not only that it failed */
	const char *why = !sought ? strerror(errno) : ferror(f) ? strerror(errno) : "the file ends first";
	fclose(f);
	if (sought && got == bytes)
		return 0;
	snprintf(err, errlen, "argument '%s': cannot read %zu bytes at offset %ld of '%s' (read %zu): %s",
		 a->name, bytes, offset, path, got, why);
	return -1;
}

/* The input set for (seed, variant): generated and uploaded on first use,
 * then cached (least recently used goes first). */
struct inputset *kopt_worker_get_set(struct worker *w, uint64_t seed, int variant, char *err,
				     size_t errlen)
{
	struct inputset *s = NULL;
	for (int k = 0; k < KOPT_SETS; k++)
		if (w->sets[k].valid && w->sets[k].seed == seed && w->sets[k].variant == variant)
			s = &w->sets[k];
	if (s != NULL) {
		s->used = ++w->clock;
		return s;
	}
	s = &w->sets[0];
	for (int k = 1; k < KOPT_SETS; k++)
		if (!w->sets[k].valid || (s->valid && w->sets[k].used < s->used))
			s = &w->sets[k];
	free_set(w, s);
	s->host = calloc((size_t)w->nargs, sizeof *s->host);
	s->dev = calloc((size_t)w->nargs, sizeof *s->dev);
	s->ref_out = calloc((size_t)w->nargs, sizeof *s->ref_out);
	s->hash = calloc((size_t)w->nargs, sizeof *s->hash);
	s->ref_masked = calloc((size_t)w->nargs, sizeof *s->ref_masked);
	s->ref_key = calloc((size_t)w->nargs, sizeof *s->ref_key);
	s->ref_box = calloc((size_t)w->nargs, sizeof *s->ref_box);
	if (!s->host || !s->dev || !s->ref_out || !s->hash || !s->ref_masked || !s->ref_key || !s->ref_box)
		goto oom;
	for (int i = 0; i < w->nargs; i++) {
		struct warg *a = &w->args[i];
		if (a->kind == ARG_SCALAR || a->kind == ARG_TMAP || kopt_worker_is_output(a))
			continue;
		size_t bytes = kopt_worker_arg_bytes(a);
		if ((s->host[i] = calloc(1, bytes ? bytes : 4)) == NULL)
			goto oom;
		enum kopt_dist d =
		    variant ? kopt_dist_alternate(a->dist, a->type, a->fixed) : a->dist;
		if (a->file[0] != '\0') {
			if (read_data_file(a, variant, s->host[i], err, errlen) != 0) {
				free_set(w, s);
				return NULL;
			}
		} else {
			kopt_check_fill_sparse(a->type, s->host[i], a->count, d, a->init_value,
					       a->scale, a->scale_every, seed, (uint64_t)i);
		}
		if (a->kind == ARG_ARRAY) {
			if (kopt_worker_cu_check(kopt_worker_alloc_guarded(&s->dev[i], bytes),
						 "cuMemAlloc (input)", err, errlen) ||
			    kopt_worker_cu_check(kopt_worker_upload(w, s->dev[i], s->host[i], bytes),
						 "cuMemcpyHtoD", err, errlen)) {
				free_set(w, s);
				return NULL;
			}
		}
	}
	if (kopt_worker_hash_inputs(w, s, s->hash) != 0) {
		snprintf(err, errlen, "%s", w->log);
		free_set(w, s);
		return NULL;
	}
	s->valid = 1;
	s->seed = seed;
	s->variant = variant;
	s->used = ++w->clock;
	return s;
oom:
	free_set(w, s);
	snprintf(err, errlen, "out of host memory for inputs");
	return NULL;
}

void kopt_worker_unload(struct worker *w, struct wmodule *m)
{
	if (m->loaded && !w->hung)
		kopt_cu.cuModuleUnload(m->mod);
	for (int i = 0; i < m->nglobals; i++)
		free(m->globals[i].image);
	free(m->globals);
	kopt_worker_free_gather(w, m);
	if (w->cur == m)
		w->cur = NULL;
	memset(m, 0, sizeof *m);
}

CUresult kopt_worker_load(struct worker *w, struct wmodule *m, const struct job *j)
{
	memset(m, 0, sizeof *m);
	w->log[0] = '\0';
	CUresult r = kopt_cu.cuModuleLoadData(&m->mod, j->cubin);
	if (r != CUDA_SUCCESS)
		return r;
	m->loaded = 1;
	r = kopt_cu.cuModuleGetFunction(&m->fn, m->mod, j->entry);
	if (r == CUDA_SUCCESS)
		r = kopt_worker_snapshot_globals(w, m, j);
	if (r != CUDA_SUCCESS)
		kopt_worker_unload(w, m);
	return r;
}

CUresult kopt_worker_before_launch(struct worker *w)
{
	CUresult r = kopt_worker_poison(w);
	for (int i = 0; r == CUDA_SUCCESS && w->cur != NULL && i < w->cur->nglobals; i++) {
		const struct mglobal *g = &w->cur->globals[i];
		if (!g->declared)
			continue;
		r = g->zero ? kopt_cu.cuMemsetD8Async(g->ptr, 0, g->size, w->stream)
			    : kopt_cu.cuMemcpyHtoDAsync(g->ptr, g->image, g->size, w->stream);
	}
	return r;
}

/* A pipeline's later kernels (j->stages: entry:gx,gy,gz:bx,by,bz:smem:args
 * separated by ';'), from the candidate's module, with parameters for s. */
static const char *prepare_stages(struct worker *w, const struct job *j, const struct inputset *s,
				  struct prepared *pr)
{
	char buf[sizeof j->stages];
	snprintf(buf, sizeof buf, "%s", j->stages);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ";", &save); tok != NULL; tok = strtok_r(NULL, ";", &save)) {
		if (pr->nstages == KOPT_MAX_STAGES) {
			snprintf(w->log, sizeof w->log, "a pipeline has at most %d kernels",
				 KOPT_MAX_STAGES + 1);
			return "error";
		}
		struct stage *sg = &pr->stages[pr->nstages];
		char entry[1024], args[256] = "";
		unsigned g[3], b[3], smem;
		if (sscanf(tok, "%1023[^:]:%u,%u,%u:%u,%u,%u:%u:%255s", entry, &g[0], &g[1], &g[2],
			   &b[0], &b[1], &b[2], &smem, args) < 8) {
			snprintf(w->log, sizeof w->log, "bad pipeline stage '%.200s'", tok);
			return "error";
		}
		pr->nstages++;
		memcpy(sg->l.grid, g, sizeof g);
		memcpy(sg->l.block, b, sizeof b);
		sg->l.smem = smem;
		char err[256];
		CUresult r = kopt_cu.cuModuleGetFunction(&sg->fn, pr->m.mod, entry);
		if (r != CUDA_SUCCESS) {
			snprintf(w->log, sizeof w->log, "pipeline kernel '%s': %s", entry,
				 kopt_cuda_strerror(r, err, sizeof err));
			return "launch_error";
		}
		/* the same limits as the first kernel's: a later kernel the device
		 * cannot run makes the config invalid, named, not a launch error */
		sg->l.cluster[0] = sg->l.cluster[1] = sg->l.cluster[2] = 1;
		sg->l.cooperative = 0;
		if (kopt_worker_launch_fits(w, sg->fn, &sg->l, NULL) != 0) {
			char why[1024];
			snprintf(why, sizeof why, "%.1000s", w->log);
			snprintf(w->log, sizeof w->log, "pipeline kernel '%.200s': %.1000s", entry, why);
			return "invalid";
		}
		int prc = kopt_worker_build_params_sel(w, s, &sg->p, 0, args);
		if (prc != 0) {
			char why[1024];
			snprintf(why, sizeof why, "%.1000s", w->log);
			snprintf(w->log, sizeof w->log, "pipeline kernel '%.200s': %.1000s", entry, why);
			return prc > 0 ? "invalid" : "error";
		}
	}
	return NULL;
}

void kopt_worker_launch_config(const struct launch *l, CUstream stream, CUlaunchConfig *cfg,
			       CUlaunchAttribute attr[2])
{
	memset(attr, 0, 2 * sizeof *attr);
	unsigned n = 0;
	if (l->cluster[0] * l->cluster[1] * l->cluster[2] > 1) {
		attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		attr[n].value.clusterDim.x = l->cluster[0];
		attr[n].value.clusterDim.y = l->cluster[1];
		attr[n].value.clusterDim.z = l->cluster[2];
		n++;
	}
	if (l->cooperative) {
		attr[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
		attr[n].value.cooperative = 1;
		n++;
	}
	memset(cfg, 0, sizeof *cfg);
	cfg->gridDimX = l->grid[0], cfg->gridDimY = l->grid[1], cfg->gridDimZ = l->grid[2];
	cfg->blockDimX = l->block[0], cfg->blockDimY = l->block[1], cfg->blockDimZ = l->block[2];
	cfg->sharedMemBytes = l->smem;
	cfg->hStream = stream;
	cfg->attrs = attr;
	cfg->numAttrs = n;
}

CUresult kopt_worker_launch(struct worker *w, CUfunction f, const struct launch *l, void **params)
{
	if (l->cluster[0] * l->cluster[1] * l->cluster[2] <= 1 && !l->cooperative)
		return kopt_cu.cuLaunchKernel(f, l->grid[0], l->grid[1], l->grid[2], l->block[0],
					      l->block[1], l->block[2], l->smem, w->stream, params,
					      NULL);
	CUlaunchAttribute attr[2];
	CUlaunchConfig cfg;
	kopt_worker_launch_config(l, w->stream, &cfg, attr);
	return kopt_cu.cuLaunchKernelEx(&cfg, f, params, NULL);
}

CUresult kopt_worker_launch_rest(struct worker *w)
{
	const struct prepared *pr = w->cur_pr;
	CUresult r = CUDA_SUCCESS;
	for (int k = 0; pr != NULL && r == CUDA_SUCCESS && k < pr->nstages; k++) {
		const struct stage *sg = &pr->stages[k];
		r = kopt_worker_launch(w, sg->fn, &sg->l, sg->p.ptrs);
	}
	return r;
}

const char *kopt_worker_prepare(struct worker *w, const struct job *j, const struct inputset *s,
				struct prepared *pr)
{
	memset(pr, 0, sizeof *pr);
	char buf[256];
	CUresult r = kopt_worker_load(w, &pr->m, j);
	if (r != CUDA_SUCCESS) {
		if (w->log[0] == '\0')
			snprintf(w->log, sizeof w->log, "loading the kernel '%s': %s", j->entry,
				 kopt_cuda_strerror(r, buf, sizeof buf));
		return kopt_cuda_error_is_sticky(r) ? "crash" : "launch_error";
	}
	if (j->launch.smem > 49152)
		kopt_cu.cuFuncSetAttribute(pr->m.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					   (int)j->launch.smem);
	/* (a function attribute: the module the resource check loaded is gone,
	 * so a cluster of 9 to 16 blocks is allowed again on this one) */
	if (j->launch.cluster[0] * j->launch.cluster[1] * j->launch.cluster[2] > 8)
		kopt_cu.cuFuncSetAttribute(pr->m.fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
					   1);
	int prc = kopt_worker_build_params_sel(w, s, &pr->p, 0, j->args1);
	if (prc != 0) /* a tensor map the driver refuses is the config's fault */
		return prc > 0 ? "invalid" : "error";
	const char *stage_status = prepare_stages(w, j, s, pr);
	if (stage_status != NULL)
		return stage_status;
	if (kopt_worker_fill_constants(w, pr->m.mod, s) != 0)
		return "launch_error";
	w->cur = &pr->m;
	w->cur_set = s;
	w->cur_pr = pr;
	return NULL;
}

void kopt_worker_release(struct worker *w, struct prepared *pr)
{
	w->cur_set = NULL;
	w->cur_pr = NULL;
	for (int k = 0; k < pr->nstages; k++)
		kopt_worker_free_params(&pr->stages[k].p);
	pr->nstages = 0;
	kopt_worker_free_params(&pr->p);
	kopt_worker_unload(w, &pr->m);
}
