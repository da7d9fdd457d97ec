/* The worker's data: the argument list of the problem, its output buffers,
 * the cached input sets (pristine host copy, device copy, device hash, the
 * reference's outputs), modules, constant symbols and kernel parameters.
 * See worker.c for how a request uses them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "worker_impl.h"

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
	for (int i = 0; s->host && i < w->nargs; i++) {
		free(s->host[i]);
		if (s->dev && s->dev[i])
			kopt_cu.cuMemFree(s->dev[i]);
		if (s->ref_out)
			free(s->ref_out[i]);
	}
	free(s->host);
	free(s->dev);
	free(s->ref_out);
	free(s->hash);
	memset(s, 0, sizeof *s);
}

void kopt_worker_free_problem(struct worker *w)
{
	for (int k = 0; k < KOPT_SETS; k++)
		free_set(w, &w->sets[k]);
	for (int i = 0; i < w->nargs; i++) {
		if (w->out_dev && w->out_dev[i])
			kopt_cu.cuMemFree(w->out_dev[i]);
		if (w->out_host && w->out_host[i])
			kopt_cu.cuMemFreeHost(w->out_host[i]);
	}
	free(w->out_dev);
	free(w->out_host);
	free(w->poison);
	free(w->args);
	w->out_dev = NULL;
	w->out_host = NULL;
	w->poison = NULL;
	w->args = NULL;
	w->nargs = 0;
	w->signature[0] = '\0';
}

/* Reads the argument list of a request; (re)allocates the outputs when the
 * list's shape changed. Scalar values are refreshed every time. */
int kopt_worker_setup_args(struct worker *w, const struct kopt_msgview *v, char *err, size_t errlen)
{
	int n = (int)kopt_msg_int(v, "nargs", 0);
	if (n <= 0 || n > 256) {
		snprintf(err, errlen, "request has %d arguments", n);
		return -1;
	}
	struct warg *args = calloc((size_t)n, sizeof *args);
	if (args == NULL) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	char sig[sizeof w->signature];
	size_t sl = 0;
	sig[0] = '\0';
	for (int i = 0; i < n; i++) {
		struct warg *a = &args[i];
		char key[64], buf[64];
#define KEY(field) (snprintf(key, sizeof key, "a%d.%s", i + 1, field), key)
		kopt_msg_cstr(v, KEY("name"), a->name, sizeof a->name, "?");
		int t = kopt_dtype_parse(kopt_msg_cstr(v, KEY("type"), buf, sizeof buf, "?"));
		const char *kind = kopt_msg_cstr(v, KEY("kind"), buf, sizeof buf, "array");
		a->kind = strcmp(kind, "scalar") == 0	  ? ARG_SCALAR
			  : strcmp(kind, "constant") == 0 ? ARG_CONSTANT
							  : ARG_ARRAY;
		int64_t count = kopt_msg_int(v, KEY("count"), 1);
		a->output = (int)kopt_msg_int(v, KEY("output"), 0);
		a->init_value = kopt_msg_num(v, KEY("init_value"), 0.0);
		int d = kopt_dist_parse(kopt_msg_cstr(v, KEY("init"), buf, sizeof buf, "normal"),
					&a->init_value);
		a->value = kopt_msg_num(v, KEY("value"), 0.0);
		a->ivalue = kopt_msg_int(v, KEY("value"), 0);
#undef KEY
		if (t < 0 || d < 0 || count < 0) {
			snprintf(err, errlen, "argument %d (%s): bad type, init or count", i + 1,
				 a->name);
			free(args);
			return -1;
		}
		a->type = (enum kopt_dtype)t;
		a->dist = (enum kopt_dist)d;
		a->count = a->kind == ARG_SCALAR ? 1 : (size_t)count;
		int wr = snprintf(sig + sl, sizeof sig - sl, "%s:%d:%d:%zu:%d:%d:%.17g;", a->name,
				  t, a->kind, a->count, a->output, d, a->init_value);
		if (wr > 0 && (size_t)wr < sizeof sig - sl)
			sl += (size_t)wr;
	}
	if (w->args != NULL && strcmp(sig, w->signature) == 0) {
		for (int i = 0; i < n; i++) {
			w->args[i].value = args[i].value;
			w->args[i].ivalue = args[i].ivalue;
		}
		free(args);
		return 0;
	}
	kopt_worker_free_problem(w);
	w->args = args;
	w->nargs = n;
	snprintf(w->signature, sizeof w->signature, "%s", sig);
	w->out_dev = calloc((size_t)n, sizeof *w->out_dev);
	w->out_host = calloc((size_t)n, sizeof *w->out_host);
	w->poison = calloc((size_t)n, sizeof *w->poison);
	if (!w->out_dev || !w->out_host || !w->poison)
		goto oom;
	for (int i = 0; i < n; i++) {
		size_t bytes = kopt_worker_arg_bytes(&args[i]);
		if (kopt_worker_is_output(&args[i])) {
			CUresult r = kopt_cu.cuMemAlloc(&w->out_dev[i], bytes ? bytes : 4);
			if (kopt_worker_cu_check(r, "cuMemAlloc (output)", err, errlen))
				return -1;
			r = kopt_cu.cuMemHostAlloc(&w->out_host[i], bytes ? bytes : 4, 0);
			if (kopt_worker_cu_check(r, "cuMemHostAlloc (output)", err, errlen))
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
		r = kopt_cu.cuMemcpyDtoH(out, w->hash_dev, 8 * (size_t)w->nargs);
	return kopt_worker_cu_check(r, "hashing the inputs", w->log, sizeof w->log);
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
	if (!s->host || !s->dev || !s->ref_out || !s->hash)
		goto oom;
	for (int i = 0; i < w->nargs; i++) {
		struct warg *a = &w->args[i];
		if (a->kind == ARG_SCALAR || kopt_worker_is_output(a))
			continue;
		size_t bytes = kopt_worker_arg_bytes(a);
		if ((s->host[i] = calloc(1, bytes ? bytes : 4)) == NULL)
			goto oom;
		enum kopt_dist d = variant ? kopt_dist_alternate(a->dist) : a->dist;
		kopt_check_fill(a->type, s->host[i], a->count, d, a->init_value, seed, (uint64_t)i);
		if (a->kind == ARG_ARRAY) {
			if (kopt_worker_cu_check(kopt_cu.cuMemAlloc(&s->dev[i], bytes ? bytes : 4),
						 "cuMemAlloc (input)", err, errlen) ||
			    kopt_worker_cu_check(kopt_cu.cuMemcpyHtoD(s->dev[i], s->host[i], bytes),
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
	m->loaded = 0;
}

CUresult kopt_worker_load(struct worker *w, struct wmodule *m, const char *cubin, const char *entry)
{
	m->loaded = 0;
	CUresult r = kopt_cu.cuModuleLoadData(&m->mod, cubin);
	if (r != CUDA_SUCCESS)
		return r;
	m->loaded = 1;
	r = kopt_cu.cuModuleGetFunction(&m->fn, m->mod, entry);
	if (r != CUDA_SUCCESS)
		kopt_worker_unload(w, m);
	return r;
}

/* Copies the set's constant-memory arguments into the module's symbols. */
int kopt_worker_fill_constants(struct worker *w, CUmodule mod, const struct inputset *s)
{
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_CONSTANT)
			continue;
		CUdeviceptr p;
		size_t size = 0, bytes = a->count * kopt_dtype_size(a->type);
		CUresult r = kopt_cu.cuModuleGetGlobal(&p, &size, mod, a->name);
		if (r != CUDA_SUCCESS) {
			snprintf(w->log, sizeof w->log,
				 "constant symbol '%s' not found in the module", a->name);
			return -1;
		}
		if (size < bytes) {
			snprintf(w->log, sizeof w->log,
				 "constant symbol '%s' holds %zu bytes, the spec gives %zu",
				 a->name, size, bytes);
			return -1;
		}
		if (kopt_worker_cu_check(kopt_cu.cuMemcpyHtoD(p, s->host[i], bytes),
					 "cuMemcpyHtoD (constant)", w->log, sizeof w->log))
			return -1;
	}
	return 0;
}

int kopt_worker_build_params(struct worker *w, const struct inputset *s, struct wparams *p)
{
	p->slots = calloc((size_t)w->nargs, sizeof *p->slots);
	p->ptrs = calloc((size_t)w->nargs + 1, sizeof *p->ptrs);
	if (!p->slots || !p->ptrs)
		return -1;
	int k = 0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		union wslot *sl = &p->slots[k];
		if (a->kind == ARG_CONSTANT)
			continue;
		if (a->kind == ARG_ARRAY) {
			sl->p = a->output ? w->out_dev[i] : s->dev[i];
		} else {
			switch (a->type) {
			case KOPT_F32:
				sl->f = (float)a->value;
				break;
			case KOPT_F64:
				sl->d = a->value;
				break;
			case KOPT_F16:
				sl->h = kopt_f32_to_f16((float)a->value);
				break;
			case KOPT_BF16:
				sl->h = kopt_f32_to_bf16((float)a->value);
				break;
			case KOPT_I64:
				sl->i64 = a->ivalue;
				break;
			case KOPT_U32:
				sl->u32 = (uint32_t)a->ivalue;
				break;
			case KOPT_I8:
				sl->i8 = (int8_t)a->ivalue;
				break;
			case KOPT_U8:
				sl->u8 = (uint8_t)a->ivalue;
				break;
			default:
				sl->i32 = (int32_t)a->ivalue;
				break;
			}
		}
		p->ptrs[k] = sl;
		k++;
	}
	return 0;
}

void kopt_worker_free_params(struct wparams *p)
{
	free(p->slots);
	free(p->ptrs);
}
