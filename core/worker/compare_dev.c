/* Output comparisons on the device (data.h). A check used to copy every
 * output to the host and compare it there: for outputs of tens of MB that
 * is most of an evaluation (three comparisons: check 1, the last timed
 * launch, check 2). Here the reference's output stays on the device, each
 * word XOR a key stream so that a candidate scanning memory finds no answer
 * in it, and kopt_compare (harness.cu) reduces the comparison to one row of
 * sums per block (an integer output: kopt_compare_bits counts the words
 * that differ). An output compared on a region has its box's reference
 * kept, packed, and each timed launch's box is packed the same way by copies
 * (gather_box) before it is compared. The device path only ever accepts: an
 * output it does not decide alone (regions, in/out buffers, the spec's own
 * check), any
 * NaN/Inf or poison, and any result that does not pass at half the
 * tolerances goes to the host comparison, which decides and words the
 * message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"
#include "worker/numerics.h"
#include "worker/numerics_trivial.h"

/* kopt_compare's type codes; -1: an integer, compared bit for bit */
static int device_type(enum kopt_dtype t)
{
	switch (t) {
	case KOPT_F32:
		return 0;
	case KOPT_F16:
		return 1;
	case KOPT_BF16:
		return 2;
	case KOPT_F64:
		return 3;
	default:
		return -1;
	}
}

/* kopt_compare's element type for a timed launch's comparison: a float's
 * code, or an integer's (kopt_elem in harness.cu reads every dtype; the
 * whole-output comparison of check 1 keeps integers to identical()). */
static int sample_type(enum kopt_dtype t)
{
	return (int)t >= 0 && t < KOPT_DTYPE_COUNT ? (int)t : -1;
}

/* The elements an output's comparison covers: its region's box, packed in
 * row-major order as kopt_check_gather packs it, or the whole array. */
static size_t compared_count(const struct warg *a)
{
	if (a->nd <= 0)
		return a->count;
	size_t n = 1;
	for (int d = 0; d < a->nd; d++)
		n *= a->hi[d] - a->lo[d];
	return n;
}

/* A region is packed by one 3D copy per index of the dims outside its
 * innermost three; past this many copies per launch it is left to the
 * last timed launch's comparison (a batch of 4 launches queues them all
 * behind the spin kernel, so the stream's queue must hold them). */
#define BOX_COPIES_MAX 64

static size_t box_copies(const struct warg *a)
{
	return kopt_box_copies(kopt_dtype_size(a->type), a->nd, a->dims, a->lo, a->hi, NULL, 0);
}

/* An output whose reference is kept on the device (a region's box packed) ... */
static int uploaded(const struct warg *a)
{
	return kopt_worker_is_output(a) && a->compare && a->count > 0 && compared_count(a) > 0 &&
	       (a->nd == 0 || box_copies(a) <= BOX_COPIES_MAX);
}

/* ... and one whose comparison the device makes alone: the whole array, not
 * an in/out buffer, whose elements left as they started the host counts
 * (stale). */
static int eligible(const struct warg *a)
{
	return uploaded(a) && a->nd == 0 && a->copy_from < 0;
}

/* Packs output i's box from the candidate's buffer into w->box_dev[i] on
 * w->stream, by the copies kopt_box_copies plans (numerics.c, where the
 * plan is tested against kopt_check_gather's order on the host). */
static CUresult gather_box(struct worker *w, int i)
{
	const struct warg *a = &w->args[i];
	struct kopt_box_copy plan[BOX_COPIES_MAX];
	size_t n = kopt_box_copies(kopt_dtype_size(a->type), a->nd, a->dims, a->lo, a->hi, plan,
				   BOX_COPIES_MAX);
	if (n == 0 || n > BOX_COPIES_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	for (size_t k = 0; k < n && r == CUDA_SUCCESS; k++) {
		CUDA_MEMCPY3D c;
		memset(&c, 0, sizeof c);
		c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c.srcDevice = w->out_dev[i] + plan[k].src;
		c.srcPitch = plan[k].pitch;
		c.srcHeight = plan[k].height;
		c.dstDevice = w->box_dev[i] + plan[k].dst;
		c.dstPitch = plan[k].width;
		c.dstHeight = plan[k].rows;
		c.WidthInBytes = plan[k].width;
		c.Height = plan[k].rows;
		c.Depth = plan[k].depth;
		r = kopt_cu.cuMemcpy3DAsync(&c, w->stream);
	}
	return r;
}

/* An integer output: a clear pass is one identical to the reference, bit
 * for bit (kopt_compare_bits). 1 when identical, 0 when not, -1 on a CUDA
 * error. */
static int identical(struct worker *w, const struct inputset *s, int i)
{
	const struct warg *a = &w->args[i];
	size_t bytes = a->count * kopt_dtype_size(a->type);
	unsigned long long words = (bytes + 3) / 4;
	unsigned last_mask = bytes % 4 == 0 ? 0xffffffffu : (1u << (8 * (bytes % 4))) - 1u;
	unsigned long long want = (words + 255) / 256;
	unsigned blocks = want < KOPT_COMPARE_BLOCKS ? (unsigned)want : KOPT_COMPARE_BLOCKS;
	CUdeviceptr out = w->out_dev[i], ref = s->ref_masked[i], diff = w->compare_part;
	uint64_t key = s->ref_key[i];
	void *params[] = {&out, &ref, &key, &words, &last_mask, &diff};
	unsigned long long count = 0;
	CUresult r = kopt_cu.cuMemsetD8Async(diff, 0, 8, w->stream);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuLaunchKernel(w->compare_bits, blocks, 1, 1, 256, 1, 1, 0, w->stream,
					   params, NULL);
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 && r == CUDA_SUCCESS)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	if (r == CUDA_SUCCESS)
		r = kopt_worker_download(w, &count, diff, 8);
	if (kopt_worker_cu_check(r, "comparing the outputs on the GPU", w->log, sizeof w->log))
		return -1;
	return count == 0;
}

/* The same stream as kopt_mask_word in harness.cu (it says why two rounds). */
static uint64_t fmix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t mask_word(uint64_t key, uint64_t w)
{
	uint64_t k2 = fmix(key ^ 0x6a09e667f3bcc909ull);
	return (uint32_t)(fmix(fmix(key + w * 0x9e3779b97f4a7c15ull) ^ k2) >> 32);
}

void kopt_worker_free_reference(struct worker *w, struct inputset *s)
{
	for (int i = 0; s->ref_masked != NULL && i < w->nargs; i++) {
		if (s->ref_masked[i])
			kopt_cu.cuMemFree(s->ref_masked[i]);
		s->ref_masked[i] = 0;
	}
}

/* The box an output is compared on: its dims and [lo, hi) per dim, hashed
 * (FNV-1a); a region may follow the knobs, and a reference packed for one
 * box says nothing of another. */
static uint64_t box_signature(const struct warg *a)
{
	uint64_t h = 1469598103934665603ull;
	size_t v[1 + 3 * 8];
	int n = 0;
	v[n++] = (size_t)a->nd;
	for (int d = 0; d < a->nd && d < 8; d++) {
		v[n++] = a->dims[d];
		v[n++] = a->lo[d];
		v[n++] = a->hi[d];
	}
	const unsigned char *p = (const unsigned char *)v;
	for (size_t k = 0; k < (size_t)n * sizeof v[0]; k++)
		h = (h ^ p[k]) * 1099511628211ull;
	return h;
}

/* Output i's box buffer (grown when a region grows), and whether its
 * copies work here: a trial gather of the candidate's buffer (a pitch the
 * driver refuses leaves the region to the last launch's comparison). */
static int box_ready(struct worker *w, int i, size_t bytes)
{
	if (w->box_dev[i] != 0 && w->box_bytes[i] < bytes) {
		kopt_cu.cuMemFree(w->box_dev[i]);
		w->box_dev[i] = 0;
		w->box_bytes[i] = 0;
	}
	if (w->box_dev[i] == 0) {
		if (kopt_cu.cuMemAlloc(&w->box_dev[i], bytes) != CUDA_SUCCESS) {
			w->box_dev[i] = 0;
			return 0;
		}
		w->box_bytes[i] = bytes;
	}
	CUresult r = gather_box(w, i);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuStreamSynchronize(w->stream);
	if (r == CUDA_SUCCESS)
		return 1;
	kopt_cu.cuMemFree(w->box_dev[i]);
	w->box_dev[i] = 0;
	w->box_bytes[i] = 0;
	return 0;
}

void kopt_worker_upload_reference(struct worker *w, struct inputset *s)
{
	if (!w->compare_dev || s->ref_masked == NULL)
		return;
	kopt_worker_free_reference(w, s);
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!uploaded(a) || s->ref_out[i] == NULL)
			continue;
		size_t es = kopt_dtype_size(a->type), n = compared_count(a);
		size_t bytes = (n * es + 3) / 4 * 4, words = bytes / 4;
		/* a copy only where the GPU has room to spare: the input sets
		 * allocated later must never fail for it */
		size_t free_b = 0, total_b = 0;
		if (kopt_cu.cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS ||
		    (a->nd > 0 ? 2 : 1) * bytes > free_b / 4)
			continue;
		if (a->nd > 0 && !box_ready(w, i, bytes))
			continue;
		uint32_t *tmp = calloc(words ? words : 1, 4);
		if (tmp == NULL)
			continue;
		if (a->nd > 0)
			kopt_check_gather(es, s->ref_out[i], tmp, a->nd, a->dims, a->lo, a->hi);
		else
			memcpy(tmp, s->ref_out[i], n * es);
		w->nonce = w->nonce * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t key = w->nonce ^ (uint64_t)(uintptr_t)tmp;
		for (size_t k = 0; k < words; k++)
			tmp[k] ^= mask_word(key, k);
		CUdeviceptr d = 0;
		if (kopt_cu.cuMemAlloc(&d, bytes) == CUDA_SUCCESS &&
		    kopt_worker_upload(w, d, tmp, bytes) == CUDA_SUCCESS) {
			s->ref_masked[i] = d;
			s->ref_key[i] = key;
			s->ref_box[i] = a->nd > 0 ? box_signature(a) : 0;
		} else if (d) {
			kopt_cu.cuMemFree(d);
		}
		free(tmp);
	}
}

/* One output: the host's kopt_check_result from the blocks' rows, merged in
 * block order (the first element on ties, as the host's). */
static void merge(const double *part, unsigned blocks, size_t n, struct kopt_check_result *cr)
{
	double err2 = 0.0, ref2 = 0.0, nonfinite = 0.0;
	memset(cr, 0, sizeof *cr);
	cr->count = n;
	cr->first_bad = n;
	double worst = -1.0;
	for (unsigned b = 0; b < blocks; b++) {
		const double *p = part + 8 * (size_t)b;
		err2 += p[0];
		ref2 += p[1];
		nonfinite += p[5];
		if (p[6] >= 0.0 && (p[2] > cr->max_abs || (p[2] == cr->max_abs && p[6] < worst))) {
			cr->max_abs = p[2];
			cr->worst_got = p[3];
			cr->worst_want = p[4];
			worst = p[6];
		}
	}
	cr->nonfinite = (size_t)nonfinite;
	cr->worst_at = worst >= 0.0 ? (size_t)worst : 0;
	cr->ref_norm = sqrt(ref2);
	cr->rel_l2 = cr->ref_norm > 0.0 ? sqrt(err2) / cr->ref_norm : sqrt(err2);
}

double kopt_worker_output_tol(const struct warg *a, double job_tol)
{
	return a->tol_rel_l2 >= 0.0 ? a->tol_rel_l2
	       : job_tol >= 0.0	    ? job_tol
				    : kopt_check_default_rel_l2(a->type);
}

/* The outputs set s's comparison covers, when every one of them can be
 * compared on the device against an uploaded reference; else -1. */
static int device_outputs(const struct worker *w, const struct inputset *s)
{
	if (!w->compare_dev || s->ref_masked == NULL || !s->have_ref)
		return -1;
	int outs = 0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || !a->compare)
			continue;
		if (!eligible(a) || !s->ref_masked[i])
			return -1;
		outs++;
	}
	return outs;
}

int kopt_worker_compare_on_device(struct worker *w, const struct inputset *s, double tol_rel_l2,
				  double tol_max_abs, double *rel_l2, double *max_abs)
{
	if (device_outputs(w, s) < 0)
		return 0;
	static double part[KOPT_COMPARE_BLOCKS * 8];
	*rel_l2 = *max_abs = 0.0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || !a->compare)
			continue;
		unsigned long long n = a->count;
		int t = device_type(a->type);
		if (t < 0) { /* an integer output */
			int same = identical(w, s, i);
			if (same <= 0)
				return same;
			continue;
		}
		unsigned long long want_blocks = (n + 255) / 256;
		unsigned blocks = want_blocks < KOPT_COMPARE_BLOCKS ? (unsigned)want_blocks
								    : KOPT_COMPARE_BLOCKS;
		CUdeviceptr out = w->out_dev[i], ref = s->ref_masked[i];
		uint64_t key = s->ref_key[i];
		void *params[] = {&out, &ref, &key, &n, &t, &w->compare_part};
		CUresult r = kopt_cu.cuLaunchKernel(w->compare, blocks, 1, 1, 256, 1, 1, 0, w->stream,
						    params, NULL);
		if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 &&
		    r == CUDA_SUCCESS)
			r = CUDA_ERROR_LAUNCH_TIMEOUT;
		if (r == CUDA_SUCCESS)
			r = kopt_worker_download(w, part, w->compare_part, 8 * sizeof(double) * blocks);
		if (kopt_worker_cu_check(r, "comparing the outputs on the GPU", w->log,
					 sizeof w->log))
			return -1;
		struct kopt_check_result cr;
		merge(part, blocks, (size_t)n, &cr);
		if (cr.nonfinite > 0)
			return 0;
		double tol = kopt_worker_output_tol(a, tol_rel_l2);
		double tol_abs = a->tol_max_abs >= 0.0 ? a->tol_max_abs : tol_max_abs;
		char msg[8];
		/* only a clear pass: at half the tolerances (a sum in another order
		 * than the host's never decides a borderline case) */
		if (kopt_check_verdict(&cr, 0.5 * tol, tol_abs >= 0.0 ? 0.5 * tol_abs : -1.0, "", msg,
				       sizeof msg))
			return 0;
		if (cr.rel_l2 > *rel_l2)
			*rel_l2 = cr.rel_l2;
		if (cr.max_abs > *max_abs)
			*max_abs = cr.max_abs;
	}
	return 1;
}

/* --- every timed launch ------------------------------------------------ */

#define SAMPLE_BLOCKS KOPT_COMPARE_BLOCKS
/* a timed launch's output this far off is wrong whatever the nudge did */
#define SAMPLE_GROSS 1e-3

/* The blocks kopt_compare runs for an output of n elements in a sample. */
static unsigned sample_blocks(size_t n)
{
	size_t want = (n + 255) / 256;
	return want < SAMPLE_BLOCKS ? (unsigned)want : SAMPLE_BLOCKS;
}

/* How a timed launch's output i is compared: SAMPLE_BITS (kopt_compare_bits)
 * for an exact output, one of tolerance 0 without a max-abs bound (integer
 * or float: a sort of floats too), SAMPLE_FLOAT (kopt_compare) for any
 * other float output, SAMPLE_INT (kopt_compare over the integers as
 * doubles) for an integer one the spec lets be off (a relative tolerance,
 * a max-abs of 1 or more: a rounding step; it was not compared, and a
 * kernel that left 45 % of an i32 output unwritten on all but each batch's
 * last launch passed: tests/cheats/int_reltol_skip), SAMPLE_NONE for a
 * boxed output (a region) or one without a reference on the device; its
 * last timed launch is still compared. An
 * in/out buffer is compared too: each launch starts it from its input
 * again, so a launch skipped leaves that input. Each output is judged
 * alone: one that cannot be compared this way leaves the others compared. */
enum { SAMPLE_NONE, SAMPLE_FLOAT, SAMPLE_BITS, SAMPLE_INT };
static double output_tol_abs(const struct warg *a, double job_tol_abs)
{
	return a->tol_max_abs >= 0.0 ? a->tol_max_abs : job_tol_abs;
}

static int sample_kind(const struct worker *w, const struct inputset *s, int i)
{
	const struct warg *a = &w->args[i];
	if (!uploaded(a) || s->ref_masked == NULL || !s->ref_masked[i])
		return SAMPLE_NONE;
	/* a region: packed for this box, with room for it */
	if (a->nd > 0 &&
	    (!w->box_dev[i] || s->ref_box == NULL || s->ref_box[i] != box_signature(a) ||
	     w->box_bytes[i] < compared_count(a) * kopt_dtype_size(a->type)))
		return SAMPLE_NONE;
	double tol = kopt_worker_output_tol(a, w->sample_tol_rel_l2);
	double tol_abs = output_tol_abs(a, w->sample_tol_max_abs);
	if (tol == 0.0 && !(tol_abs > 0.0))
		return SAMPLE_BITS;
	/* an integer output whose max-abs tolerance is below 1 may differ
	 * nowhere (both tolerances must hold): exact, and compared as such on
	 * every timed launch, not left to the last one */
	if (!kopt_dtype_is_float(a->type) && tol_abs >= 0.0 && tol_abs < 1.0)
		return SAMPLE_BITS;
	if (!kopt_dtype_is_float(a->type))
		return sample_type(a->type) >= 0 ? SAMPLE_INT : SAMPLE_NONE;
	return device_type(a->type) >= 0 ? SAMPLE_FLOAT : SAMPLE_NONE;
}

void kopt_worker_samples_begin(struct worker *w, const struct inputset *s, double tol_rel_l2,
			       double tol_max_abs, int cap)
{
	w->sample_set = NULL;
	if (!w->compare_dev || s->ref_masked == NULL || !s->have_ref || cap <= 0)
		return;
	w->sample_tol_rel_l2 = tol_rel_l2;
	w->sample_tol_max_abs = tol_max_abs;
	int outs = 0;
	for (int i = 0; i < w->nargs; i++)
		if (kopt_worker_is_output(&w->args[i]) && w->args[i].compare &&
		    sample_kind(w, s, i) != SAMPLE_NONE)
			outs++;
	if (outs == 0)
		return;
	size_t bytes = (size_t)cap * (size_t)outs * SAMPLE_BLOCKS * 8 * sizeof(double);
	if (bytes > w->sample_part_bytes) {
		if (w->sample_part)
			kopt_cu.cuMemFree(w->sample_part);
		w->sample_part = 0;
		w->sample_part_bytes = 0;
		if (kopt_cu.cuMemAlloc(&w->sample_part, bytes) != CUDA_SUCCESS)
			return;
		w->sample_part_bytes = bytes;
	}
	w->sample_set = s;
	w->sample_cap = cap;
	w->sample_outputs = outs;
	w->sample_nudged = w->nudges;
}


CUresult kopt_worker_samples_enqueue(struct worker *w, int k)
{
	const struct inputset *s = w->sample_set;
	if (s == NULL || k < 0 || k >= w->sample_cap)
		return CUDA_SUCCESS;
	CUresult r = CUDA_SUCCESS;
	int o = 0;
	for (int i = 0; i < w->nargs && r == CUDA_SUCCESS; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || !a->compare)
			continue;
		int kind = sample_kind(w, s, i);
		if (kind == SAMPLE_NONE)
			continue;
		unsigned long long n = compared_count(a);
		int t = sample_type(a->type);
		CUdeviceptr out = w->out_dev[i], ref = s->ref_masked[i];
		if (a->nd > 0) {
			if ((r = gather_box(w, i)) != CUDA_SUCCESS)
				break;
			out = w->box_dev[i];
		}
		CUdeviceptr part = w->sample_part + ((size_t)k * (size_t)w->sample_outputs + (size_t)o) *
							SAMPLE_BLOCKS * 8 * sizeof(double);
		uint64_t key = s->ref_key[i];
		if (kind == SAMPLE_FLOAT || kind == SAMPLE_INT) {
			void *params[] = {&out, &ref, &key, &n, &t, &part};
			r = kopt_cu.cuLaunchKernel(w->compare, sample_blocks(n), 1, 1, 256, 1, 1,
						   0, w->stream, params, NULL);
		} else {
			/* the count of differing words, in the slot's first 8 bytes */
			size_t bytes = n * kopt_dtype_size(a->type);
			unsigned long long words = (bytes + 3) / 4;
			unsigned last_mask =
			    bytes % 4 == 0 ? 0xffffffffu : (1u << (8 * (bytes % 4))) - 1u;
			void *params[] = {&out, &ref, &key, &words, &last_mask, &part};
			r = kopt_cu.cuMemsetD8Async(part, 0, 8, w->stream);
			if (r == CUDA_SUCCESS)
				r = kopt_cu.cuLaunchKernel(w->compare_bits, sample_blocks(words), 1, 1,
							   256, 1, 1, 0, w->stream, params, NULL);
		}
		o++;
	}
	return r;
}

/* Whether a timed launch's exact output with `differ` of its `words`
 * words unlike the reference is wrong whatever the nudge did: on inputs
 * that were not nudged, any difference; on nudged ones (one low mantissa bit
 * of one float word, which moves an exact result only at a near tie: an
 * index, a threshold, the nudged value itself in a sort or passed through a
 * ReLU or a max), more than one word in 64 and two (a skipped launch leaves
 * the poison in all of them). An output of one or two words (a count, an
 * index) a nudge may move whole: its launches are judged by the last
 * launch's comparison and check 2's time (tests/honest_qa/quant_threshold).
 * less_exact_when_timed judges the smaller differences over all launches. */
static int bits_gross(unsigned long long differ, unsigned long long words, int nudged)
{
	if (!nudged)
		return differ > 0;
	return differ > words / 64 + 2;
}

/* The words of an exact output one nudge may move in an honest kernel, for
 * less_exact_when_timed: two (an element passed through, a count at a
 * threshold, an index at a tie; tests/honest_qa relu_pool_exact and prune24
 * differ in one word on half of their launches) and one in 4096. */
static unsigned long long nudge_words(unsigned long long words)
{
	return 2 + words / 4096;
}

/* A kernel held to the tolerance only on the launch compared last: the
 * last timed launch is compared at the tolerance itself, the others only
 * grossly (the nudge), and the last is always known (a batch's tail:
 * sampling stops after whole batches of 4; or the cap, when a kernel keeps
 * its timing noisy). So a kernel could compute the others in a cheaper,
 * coarser way (TF32 for f32, zeros for a sparse mask) within the gross bar.
 * To move the median it must do so on half of the launches at least. An
 * honest kernel's launches are alike but for the nudge, one low bit of one
 * input word, whose effect on a whole output is far below the tolerance
 * but at a near tie, and the last launch is one draw among them. So the
 * candidate is wrong when 2 in 5 of the launches before the last miss the
 * tolerance while the last one is off by less than half of each of
 * theirs (a float output), or differ from the reference in more words than
 * a nudge moves (nudge_words) and 8x the last one's (an exact output; an
 * honest kernel's nudged element can pass through to the output, so "any
 * word while the last none" failed honest ReLU and 2:4 pruning kernels on
 * half their launches). Needs 8 samples at least.
 * (tests/cheats/cap_last: TF32 on all but the last launch; tail_exact_tf32:
 * exact on every batch's tail; mask_zeros: zeros for a 6 % mask.) */
#define LESS_EXACT_SHARE 0.4
/* A float output's launches miss the tolerance "worse" than the last when
 * by more than twice its error: with 8x, a last launch made deliberately
 * inexact (0.7 of the tolerance) lifted the bar to 5.6 tolerances, and the
 * others ran at twice the tolerance (tests/cheats/eighth_gap). An honest
 * kernel's launches differ by the nudge, far below the tolerance, or by a
 * reduction's order, well within 2x. */
#define LESS_EXACT_FLOAT 2.0
static const char *less_exact_when_timed(struct worker *w, const struct inputset *s,
					 const double *part, size_t row, int n)
{
	if (n < KOPT_CHECKED_SAMPLES)
		return NULL;
	for (int i = 0, o = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || !a->compare)
			continue;
		int kind = sample_kind(w, s, i);
		if (kind == SAMPLE_NONE)
			continue;
		size_t at = (size_t)o * SAMPLE_BLOCKS * 8;
		o++;
		/* (an integer with a tolerance: a nudge at a threshold moves a
		 * count whole, so its launches differ from the last one honestly;
		 * it is held to the gross bar alone) */
		if (kind == SAMPLE_INT)
			continue;
		int worse = 0;
		char seen[160] = "";
		double tol = kopt_worker_output_tol(a, w->sample_tol_rel_l2);
		if (kind == SAMPLE_BITS) {
			unsigned long long last, d, some = 0;
			memcpy(&last, part + (size_t)(n - 1) * row + at, sizeof last);
			unsigned long long words = (compared_count(a) * kopt_dtype_size(a->type) + 3) / 4;
			if (last > nudge_words(words) || !w->sample_nudged)
				continue;
			unsigned long long bar = 8 * last > nudge_words(words) ? 8 * last : nudge_words(words);
			for (int k = 0; k < n - 1; k++) {
				memcpy(&d, part + (size_t)k * row + at, sizeof d);
				if (d > bar) {
					worse++;
					some = d;
				}
			}
			snprintf(seen, sizeof seen, "differ from the reference in more words than a nudge "
						    "moves (e.g. in %llu of %llu), the last one in %llu", some, words,
				 last);
		} else {
			if (!(tol > 0.0))
				continue;
			struct kopt_check_result last, cr;
			size_t count = compared_count(a);
			merge(part + (size_t)(n - 1) * row + at, sample_blocks(count), count, &last);
			double bar = LESS_EXACT_FLOAT * last.rel_l2 > tol ? LESS_EXACT_FLOAT * last.rel_l2 : tol;
			double some = 0.0;
			for (int k = 0; k < n - 1; k++) {
				merge(part + (size_t)k * row + at, sample_blocks(count), count, &cr);
				if (cr.rel_l2 > bar) {
					worse++;
					some = cr.rel_l2;
				}
			}
			snprintf(seen, sizeof seen, "are off by a relative L2 error above the tolerance %.3g "
						    "(e.g. %.3g), the last one by %.3g", tol, some, last.rel_l2);
		}
		if (worse >= LESS_EXACT_SHARE * (n - 1)) {
			snprintf(w->log, sizeof w->log,
				 "timed launches, output '%s': %d of the %d launches before the last one "
				 "%s: the kernel computes less exactly when timed than on the launch "
				 "compared last",
				 a->name, worse, n - 1, seen);
			return "wrong";
		}
	}
	return NULL;
}

const char *kopt_worker_samples_check(struct worker *w, int n)
{
	const struct inputset *s = w->sample_set;
	w->sample_set = NULL;
	if (s == NULL || n <= 0)
		return NULL;
	if (n > w->sample_cap)
		n = w->sample_cap;
	size_t row = (size_t)w->sample_outputs * SAMPLE_BLOCKS * 8;
	double *part = malloc((size_t)n * row * sizeof(double));
	if (part == NULL) /* (the last timed output is still compared) */
		return NULL;
	size_t bytes = (size_t)n * row * sizeof(double);
	if (kopt_worker_cu_check(kopt_worker_download(w, part, w->sample_part, bytes),
				 "reading the timed launches' comparisons", w->log, sizeof w->log)) {
		free(part);
		return "crash";
	}
	const char *status = NULL;
	for (int k = 0; k < n && status == NULL; k++) {
		int o = 0;
		for (int i = 0; i < w->nargs && status == NULL; i++) {
			const struct warg *a = &w->args[i];
			if (!kopt_worker_is_output(a) || !a->compare)
				continue;
			int kind = sample_kind(w, s, i);
			if (kind == SAMPLE_NONE)
				continue;
			const double *p = part + (size_t)k * row + (size_t)o * SAMPLE_BLOCKS * 8;
			if (kind == SAMPLE_BITS) {
				unsigned long long differ, words =
				    (compared_count(a) * kopt_dtype_size(a->type) + 3) / 4;
				memcpy(&differ, p, sizeof differ);
				if (bits_gross(differ, words, w->sample_nudged)) {
					snprintf(w->log, sizeof w->log,
						 "timed launch %d of %d, output '%s': %llu of its %llu "
						 "words differ from the reference: the kernel did less "
						 "on some timed launches than on the one compared last",
						 k + 1, n, a->name, differ, words);
					status = "wrong";
				}
				o++;
				continue;
			}
			struct kopt_check_result cr;
			merge(p, sample_blocks(compared_count(a)), compared_count(a), &cr);
			/* The cached reference is not the nudged inputs' one: a
			 * sensitive function (sin of a large argument, an f64
			 * reduction at 1e-12) moves past the tolerance on one nudged
			 * word. So a sample fails only grossly: NaN/Inf or poison,
			 * or a relative L2 error above SAMPLE_GROSS (or 4x the
			 * tolerance, if larger); what a skipped launch leaves (poison,
			 * a copy, zeros) is far past that, and the last timed launch
			 * is still held to the tolerance itself. */
			double tol = kopt_worker_output_tol(a, w->sample_tol_rel_l2);
			double gross = 4.0 * tol > SAMPLE_GROSS ? 4.0 * tol : SAMPLE_GROSS;
			/* an integer off by the spec's max-abs (a count moved whole by a
			 * nudge at a threshold) is within it, however large relatively */
			double tol_abs = output_tol_abs(a, w->sample_tol_max_abs);
			int within_abs = kind == SAMPLE_INT && tol_abs >= 1.0 && cr.max_abs <= 4.0 * tol_abs;
			char label[256];
			snprintf(label, sizeof label, "timed launch %d of %d, output '%s'", k + 1, n,
				 a->name);
			if (cr.nonfinite > 0) {
				snprintf(w->log, sizeof w->log,
					 "%s: %zu NaN/Inf elements (or elements left as the poison "
					 "written before the launch)",
					 label, cr.nonfinite);
				status = "wrong";
			} else if (!(cr.rel_l2 <= gross) && !within_abs) {
				snprintf(w->log, sizeof w->log,
					 "%s: relative L2 error %.3g, far above the tolerance %.3g (max abs "
					 "%.3g at index %zu: got %.6g, want %.6g): the kernel did less on "
					 "some timed launches than on the one compared last",
					 label, cr.rel_l2, tol, cr.max_abs, cr.worst_at, cr.worst_got,
					 cr.worst_want);
				status = "wrong";
			}
			o++;
		}
	}
	if (status == NULL)
		status = less_exact_when_timed(w, s, part, row, n);
	free(part);
	return status;
}

/* (data.h) The reply names the trivial outputs that pass in both checks,
 * so the engine can say the spec cannot tell them from an honest kernel. */
int kopt_worker_probe_trivial(struct worker *w, struct inputset *s, double tol_rel_l2,
			      double tol_max_abs)
{
	int v = s->variant != 0;
	if (w->trivial_probed[v])
		return 0;
	w->trivial_probed[v] = 1;
	char *words = w->trivial[v];
	words[0] = '\0';
	struct kopt_trivial_source src[64];
	int nsrc = 0;
	for (int i = 0; i < w->nargs && nsrc < 64; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_SCALAR && a->kind != ARG_TMAP && !kopt_worker_is_output(a) &&
		    s->host[i] != NULL)
			src[nsrc++] =
			    (struct kopt_trivial_source){a->name, a->type, s->host[i], a->count};
	}
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || !a->compare || s->ref_out[i] == NULL)
			continue;
		const void *ref = s->ref_out[i];
		size_t n = a->count;
		void *box = NULL;
		if (a->nd > 0) {
			if ((box = malloc(a->count * kopt_dtype_size(a->type) + 4)) == NULL)
				goto oom;
			n = kopt_check_gather(kopt_dtype_size(a->type), ref, box, a->nd, a->dims,
					      a->lo, a->hi);
			ref = box;
		}
		double tol_abs = a->tol_max_abs >= 0.0 ? a->tol_max_abs : tol_max_abs;
		/* an in/out buffer's own input too: a copy of it back unchanged
		 * is caught as stale, but one moved by a rounding step is not, and
		 * passes wherever the copy itself passes (the tolerance is wider
		 * than the update: tests/cheats/inout_nearcopy) */
		struct kopt_trivial_source own[64];
		int nown = 0;
		for (int k = 0; k < nsrc && a->nd == 0; k++)
			own[nown++] = src[k];
		int found = kopt_trivial_probe(a->type, ref, n, own, nown,
					       kopt_worker_output_tol(a, tol_rel_l2), tol_abs,
					       a->name, words, sizeof w->trivial[v]);
		free(box);
		if (found < 0)
			goto oom;
	}
	return 0;
oom:
	snprintf(w->log, sizeof w->log, "out of host memory (probing trivial outputs)");
	return -1;
}
