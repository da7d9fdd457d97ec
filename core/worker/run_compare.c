/* The comparisons of one run request (run.c): the inputs against their
 * pristine copy, each output against the reference's (only its region when
 * it has one; the poison check; the tolerance), the host copies the spec's
 * own check reads, and the output of the last timed launch on the very
 * inputs it read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"
#include "worker/numerics.h"
#include "worker/run_compare.h"

/* Compares the inputs on the device with their pristine copy (by hash, on
 * the device); restores them when they changed. Returns the number of
 * modified arguments (-1 on error). */
int kopt_worker_check_inputs(struct worker *w, struct inputset *s, char *which, size_t whichlen)
{
	uint64_t now[256];
	int modified = 0;
	which[0] = '\0';
	if (kopt_worker_hash_inputs(w, s, now) != 0)
		return -1;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_ARRAY || a->output || now[i] == s->hash[i])
			continue;
		if (modified++ == 0)
			snprintf(which, whichlen, "%s", a->name);
		if (kopt_worker_cu_check(
			kopt_worker_upload(w, s->dev[i], s->host[i], kopt_worker_arg_bytes(a)),
			"cuMemcpyHtoD", w->log, sizeof w->log))
			return -1;
	}
	return modified;
}

/* Compares output i (data: the candidate's or the reference's own host
 * copy) with the set's reference output: only its region when it has one,
 * without the poison check when it starts as a copy of an input, whose
 * elements the reference changed and data left as they started are counted
 * into *stale (when stale is not NULL). -1 when out of host memory. */
static int compare_one(struct worker *w, const struct inputset *s, int i, const void *data,
		       uint32_t poison, struct kopt_check_result *cr, size_t *stale)
{
	const struct warg *a = &w->args[i];
	const void *ref = s->ref_out[i], *init = a->copy_from >= 0 ? s->host[a->copy_from] : NULL;
	size_t n = a->count, es = kopt_dtype_size(a->type);
	void *box[3] = {NULL, NULL, NULL};
	if (a->nd > 0) {
		for (int k = 0; k < 3; k++)
			if ((box[k] = malloc(a->count * es + 4)) == NULL) {
				free(box[0]);
				free(box[1]);
				snprintf(w->log, sizeof w->log, "out of host memory");
				return -1;
			}
		n = kopt_check_gather(es, data, box[0], a->nd, a->dims, a->lo, a->hi);
		kopt_check_gather(es, ref, box[1], a->nd, a->dims, a->lo, a->hi);
		if (init != NULL)
			kopt_check_gather(es, init, box[2], a->nd, a->dims, a->lo, a->hi);
		data = box[0];
		ref = box[1];
		init = init != NULL ? box[2] : NULL;
	}
	kopt_check_compare(a->type, data, ref, n, poison, init == NULL, cr);
	if (stale != NULL && init != NULL) {
		size_t first;
		*stale = kopt_check_stale(a->type, data, ref, init, n, &first);
		if (*stale > 0)
			cr->first_bad = first;
	}
	if (a->nd > 0) { /* the messages name elements of the whole output */
		cr->first_bad = kopt_check_region_index(a->nd, a->dims, a->lo, a->hi, cr->first_bad);
		cr->worst_at = kopt_check_region_index(a->nd, a->dims, a->lo, a->hi, cr->worst_at);
	}
	for (int k = 0; k < 3; k++)
		free(box[k]);
	return 0;
}

/* Host copies of the set's inputs, the candidate's outputs and the
 * reference's, one raw file each (<dir>/<tag>.<name>.in|.out|.ref), for the
 * spec's own check, which the main process runs on them. */
static int dump_data(struct worker *w, const struct inputset *s, const char *dir, const char *tag)
{
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind == ARG_SCALAR)
			continue;
		size_t bytes = a->count * kopt_dtype_size(a->type);
		const void *what[2] = {a->output ? w->out_host[i] : s->host[i],
				       a->output ? s->ref_out[i] : NULL};
		const char *ext[2] = {a->output ? "out" : "in", "ref"};
		for (int k = 0; k < 2; k++) {
			if (what[k] == NULL)
				continue;
			char path[1400];
			snprintf(path, sizeof path, "%s/%s.%s.%s", dir, tag, a->name, ext[k]);
			FILE *f = fopen(path, "wb");
			int ok = f != NULL && fwrite(what[k], 1, bytes, f) == bytes;
			if (f != NULL && fclose(f) != 0)
				ok = 0;
			if (!ok) {
				snprintf(w->log, sizeof w->log, "cannot write '%s' for the spec's check",
					 path);
				return -1;
			}
		}
	}
	return 0;
}

/* Reads the outputs and compares them with the set's reference outputs,
 * running the reference first when the set has none yet. Returns NULL when
 * correct, "wrong" with w->log, or another status. */
const char *kopt_worker_compare_outputs(struct worker *w, struct inputset *s, const struct job *j,
				   const char *what, struct trial_out *to)
{
	memset(to, 0, sizeof *to);
	char which[160];
	int mod = kopt_worker_check_inputs(w, s, which, sizeof which);
	if (mod < 0)
		return "crash";
	if (mod > 0) {
		snprintf(w->log, sizeof w->log, "%s: the kernel modified its input '%s'", what,
			 which);
		return "wrong";
	}
	if (!s->have_ref) {
		if (!w->ref_loaded) {
			snprintf(w->log, sizeof w->log, "no reference kernel was loaded");
			return "error";
		}
		/* the reference runs after the candidate, in buffers of its own that
		 * are wiped once read, so no candidate ever finds its results */
		struct wparams p;
		if (kopt_worker_build_params_sel(w, s, &p, 1, j->ref_args) != 0 ||
		    kopt_worker_fill_constants(w, w->ref_mod, s) != 0) {
			kopt_worker_free_params(&p);
			return "error";
		}
		uint32_t ref_poison[256] = {0};
		CUresult r = CUDA_SUCCESS;
		for (int i = 0; i < w->nargs && r == CUDA_SUCCESS; i++) {
			const struct warg *a = &w->args[i];
			if (!kopt_worker_is_output(a))
				continue;
			if (a->copy_from >= 0) {
				r = kopt_cu.cuMemcpyDtoDAsync(w->ref_dev[i], s->dev[a->copy_from],
							      a->count * kopt_dtype_size(a->type),
							      w->stream);
				continue;
			}
			ref_poison[i] = kopt_check_poison_word(a->type, w->nonce++);
			r = kopt_cu.cuMemsetD32Async(w->ref_dev[i], ref_poison[i],
						     kopt_worker_arg_bytes(a) / 4, w->stream);
		}
		const char *st =
		    r != CUDA_SUCCESS
			? "crash"
			: kopt_worker_launch_and_wait(w, w->ref_fn, &j->ref_launch, p.ptrs, "reference", 0, NULL);
		kopt_worker_free_params(&p);
		if (st != NULL) {
			char tmp[sizeof w->log];
			snprintf(tmp, sizeof tmp, "%s", w->log);
			snprintf(w->log, sizeof w->log, "reference kernel failed: %.3000s", tmp);
			return strcmp(st, "timeout") == 0 || strcmp(st, "crash") == 0 ? st
										      : "error";
		}
		for (int i = 0; i < w->nargs; i++) {
			const struct warg *a = &w->args[i];
			if (!kopt_worker_is_output(a))
				continue;
			size_t bytes = a->count * kopt_dtype_size(a->type);
			free(s->ref_out[i]); /* a reference computed before (set_ref) */
			if ((s->ref_out[i] = malloc(bytes ? bytes : 4)) == NULL ||
			    kopt_worker_cu_check(
				kopt_worker_download(w, s->ref_out[i], w->ref_dev[i], bytes),
				"cuMemcpyDtoH (reference)", w->log, sizeof w->log) ||
			    kopt_worker_cu_check(kopt_cu.cuMemsetD32Async(
						     w->ref_dev[i], 0,
						     kopt_worker_arg_bytes(a) / 4, w->stream),
						 "wiping the reference's outputs", w->log,
						 sizeof w->log))
				return "error";
			if (!a->compare)
				continue; /* the spec's own check reads it */
			struct kopt_check_result cr;
			if (compare_one(w, s, i, s->ref_out[i], ref_poison[i], &cr, NULL) != 0)
				return "error";
			if (cr.unwritten > 0 || cr.nonfinite > 0) {
				snprintf(
				    w->log, sizeof w->log,
				    "the reference kernel left %zu elements of '%s' unwritten and "
				    "%zu NaN/Inf: fix the spec's reference",
				    cr.unwritten, a->name, cr.nonfinite);
				return "error";
			}
		}
		if (kopt_worker_check_inputs(w, s, which, sizeof which) != 0) {
			snprintf(w->log, sizeof w->log,
				 "the reference kernel modified its input '%s'", which);
			return "error";
		}
		s->have_ref = 1;
		/* (a warning about the spec only: out of memory there costs the
		 * warning, not the evaluation) */
		if (kopt_worker_probe_trivial(w, s, j->tol_rel_l2, j->tol_max_abs) != 0)
			w->log[0] = '\0';
		kopt_worker_upload_reference(w, s);
	}
	/* a clear pass is seen on the device, without copying the outputs */
	if (j->dump[0] == '\0') {
		double rel_l2, max_abs;
		int dev = kopt_worker_compare_on_device(w, s, j->tol_rel_l2, j->tol_max_abs, &rel_l2,
							&max_abs);
		if (dev < 0)
			return "crash";
		if (dev == 1) {
			to->compared = 1;
			to->rel_l2 = rel_l2;
			to->max_abs = max_abs;
			return NULL;
		}
	}
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (kopt_worker_is_output(a) &&
		    kopt_worker_cu_check(kopt_worker_download(w, w->out_host[i], w->out_dev[i],
							      a->count * kopt_dtype_size(a->type)),
					 "cuMemcpyDtoH (output)", w->log, sizeof w->log))
			return "crash";
	}
	const char *status = NULL;
	to->compared = 1;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a))
			continue;
		if (!a->compare)
			continue;
		struct kopt_check_result cr;
		size_t stale = 0;
		if (compare_one(w, s, i, w->out_host[i], w->poison[i], &cr, &stale) != 0)
			return "error";
		if (cr.rel_l2 > to->rel_l2)
			to->rel_l2 = cr.rel_l2;
		if (cr.max_abs > to->max_abs)
			to->max_abs = cr.max_abs;
		to->unwritten += cr.unwritten;
		to->nonfinite += cr.nonfinite;
		double tol = kopt_worker_output_tol(a, j->tol_rel_l2);
		double tol_abs = a->tol_max_abs >= 0.0 ? a->tol_max_abs : j->tol_max_abs;
		char label[200], msg[512];
		snprintf(label, sizeof label, "%s, output '%s'", what, a->name);
		if (status == NULL && stale > 0) {
			snprintf(w->log, sizeof w->log,
				 "%s: %zu of %zu elements the reference wrote still hold their initial "
				 "value (first at index %zu)",
				 label, stale, cr.count, cr.first_bad);
			status = "wrong";
		}
		if (status == NULL &&
		    kopt_check_verdict(&cr, tol, tol_abs, label, msg, sizeof msg)) {
			snprintf(w->log, sizeof w->log, "%s", msg);
			status = "wrong";
		}
	}
	/* (check 3's own dump: under "c1" it overwrote check 1's, and a spec's
	 * check failing on it named check 1) */
	const char *tag = strncmp(what, "check 2", 7) == 0   ? "c2"
			  : strncmp(what, "check 3", 7) == 0 ? "c3"
			  : strncmp(what, "timed", 5) == 0   ? "timed"
							     : "c1";
	if (j->dump[0] != '\0' && dump_data(w, s, j->dump, tag) != 0)
		return "error";
	return status;
}

/* The output of the last timed launch, still in the candidate's buffers,
 * against the reference on the very inputs that launch read. The checks
 * alone cannot see a kernel that tells a timed launch from a checked one (a
 * cold L2, launches back to back, state kept where kopt cannot list it: the
 * device heap, the padding between variables) and skips work only when
 * timed; here its skipped work is the output compared. The inputs are the
 * timing copy of set A, nudged (one low mantissa bit of one word per float
 * input): set A's cached reference is compared first, which an honest
 * kernel passes within the tolerance; only when that fails does the
 * reference run again on the nudged inputs, and that comparison decides.
 * So an honest kernel costs one output copy and one host comparison. */
/* kopt_hash's term for word x at index i (harness.cu): the hash of an
 * array is the sum of these, so one flipped word changes it by a known
 * amount. */
static uint64_t hash_term(uint32_t x, uint64_t i)
{
	uint64_t z = (uint64_t)x * 0x9e3779b97f4a7c15ull + i * 0xc2b2ae3d27d4eb4full;
	z ^= z >> 31;
	z *= 0xbf58476d1ce4e5b9ull;
	z ^= z >> 29;
	return z;
}

const char *kopt_worker_check_timed_output(struct worker *w, const struct inputset *ta,
				      const struct job *j, int nudge_slots, struct trial_out *to)
{
	static const char what[] = "timed run (the output of the last timed launch)";
	if (w->nargs > 256) {
		snprintf(w->log, sizeof w->log, "more than 256 arguments");
		return "error";
	}
	struct inputset v = *ta;
	uint64_t hash[256];
	void *host[256];
	void *flipped[16] = {0};
	int nudged = nudge_slots > 0;
	if (nudged) {
		/* the inputs must be set A's pristine ones but for the words the
		 * last nudges left flipped: anything else the kernel wrote into
		 * its timing inputs is seen (a kernel that stores answers in them);
		 * the host copies the spec's own check reads (the "timed" dump)
		 * are those inputs too */
		memcpy(hash, ta->hash, sizeof(uint64_t) * (size_t)w->nargs);
		memcpy(host, ta->host, sizeof(void *) * (size_t)w->nargs);
		for (int k = 0; k < nudge_slots && k < 16; k++) {
			int i = w->nudge_arg[k];
			uint64_t at = w->nudge_last[k];
			if (at == ~0ull)
				continue;
			uint32_t x;
			memcpy(&x, (const char *)ta->host[i] + 4 * at, 4);
			hash[i] = hash[i] - hash_term(x, at) + hash_term(x ^ 1u, at);
			size_t bytes = kopt_worker_arg_bytes(&w->args[i]);
			if ((flipped[k] = malloc(bytes ? bytes : 4)) != NULL) {
				memcpy(flipped[k], ta->host[i], bytes);
				((uint32_t *)flipped[k])[at] = x ^ 1u;
				host[i] = flipped[k];
			}
		}
		v.hash = hash;
		v.host = host;
	}
	const char *st = kopt_worker_compare_outputs(w, &v, j, what, to);
	if (st != NULL && nudged && strcmp(st, "wrong") == 0) {
		void *refs[256] = {0};
		v.ref_out = refs;
		v.have_ref = 0;
		v.ref_masked = NULL; /* the rerun's reference is compared on the host */
		st = kopt_worker_compare_outputs(w, &v, j, what, to);
		for (int i = 0; i < 256; i++)
			free(refs[i]);
		/* (the first comparison's message is not this candidate's log) */
		if (st == NULL)
			w->log[0] = '\0';
	}
	for (int k = 0; k < 16; k++)
		free(flipped[k]);
	return st;
}
