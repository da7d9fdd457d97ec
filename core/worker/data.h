/* The worker's data (data.c): the problem's argument list, the cached input
 * sets, device buffers with guard bands, loaded modules and their globals,
 * kernel parameters, a candidate prepared for launch, and struct worker, the
 * state of one worker process. Floor "data" of the worker: included by
 * bench, profile, run and loop; includes numerics and nothing above it. */
#ifndef KOPT_WORKER_DATA_H
#define KOPT_WORKER_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "cubin.h"
#include "gpu/cuda_driver.h"
#include "worker/numerics.h"

/* ARG_TMAP: a tensor map (CUtensorMap, by value) over another array argument,
 * encoded for the buffer each launch uses. */
enum { ARG_ARRAY, ARG_SCALAR, ARG_CONSTANT, ARG_TMAP };

struct warg {
	char name[128];
	enum kopt_dtype type;
	int kind;
	size_t count;
	int output;
	enum kopt_dist dist;
	double init_value;
	double scale; /* float draws times this (the range probe; 1 otherwise) */
	uint64_t scale_every; /* 0: every element; else kopt_check_fill_sparse's */
	double value;	/* scalar by value */
	int64_t ivalue; /* scalar, exact for integers */
	/* arrays: elements read from a file (raw, little-endian) instead of a
	 * distribution; the same bytes in every input set but set B where
	 * file_b is set (a generator's second draw, read whole) */
	char file[1024];
	int64_t file_offset;
	char file_b[1024];
	/* outputs: the input array (0-based) this one starts as a copy of, -1
	 * when it starts poisoned */
	int copy_from;
	int param; /* 0: not passed to the kernels (only the source of a copy) */
	int fixed; /* a constant kept in check 2 too (kopt_dist_alternate) */
	/* outputs: what is compared with the reference; refreshed every request */
	int compare;		 /* 0: only by the spec's own check (dumped) */
	int nd;			 /* > 0: only the box [lo, hi) of dims is compared */
	size_t dims[8], lo[8], hi[8];
	double tol_rel_l2, tol_max_abs; /* < 0: the request's */
	/* tensor maps: the array (0-based) mapped, its dims and the box copied,
	 * innermost first, and the swizzle span in bytes (0, 32, 64, 128);
	 * refreshed every request (the box follows the knobs) */
	int tmap_of, tmap_rank, tmap_swizzle;
	uint64_t tmap_dims[5];
	uint32_t tmap_box[5];
};

/* One set of inputs: the pristine host copy, the device copy the kernels
 * read, and the reference's outputs for it once computed. */
struct inputset {
	int valid;
	uint64_t seed;
	int variant; /* 0: the spec's distributions, 1: the alternate ones */
	void **host; /* per arg: inputs and constants; NULL for outputs/scalars */
	CUdeviceptr *dev;
	void **ref_out; /* per output arg, NULL until the reference ran */
	uint64_t *hash; /* per input array: kopt_hash of its device copy */
	/* per output: the reference's output on the device, each word XOR a
	 * key stream (compare_dev.c), and that key; 0 when not uploaded */
	CUdeviceptr *ref_masked;
	uint64_t *ref_key;
	/* per region output: the box its masked reference was packed for (a
	 * region may follow the knobs; compare_dev.c box_signature) */
	uint64_t *ref_box;
	int have_ref;
	uint64_t used; /* LRU stamp */
};

#define KOPT_SETS 3

/* cluster: thread-block cluster dims (1,1,1: none); cooperative: every
 * block resident at once, so blocks may wait for each other (a grid-wide
 * barrier). Either one launches with cuLaunchKernelEx. */
struct launch {
	unsigned grid[3], block[3], smem, cluster[3], cooperative;
};

/* Guard bands: every device buffer a candidate can reach (its inputs, the
 * timing copy of them, its outputs) sits between two guard regions filled
 * with a word that changes every run; the back one runs to the end of the
 * driver's 2 MiB allocation granule, so any write past a buffer's end that
 * does not fault lands in a guard and is seen. */
#define KOPT_GUARD_FRONT ((size_t)64 << 10)
#define KOPT_GUARD_BACK_MIN ((size_t)64 << 10)
#define KOPT_GUARD_GRANULE ((size_t)2 << 20)
#define KOPT_GUARD_MAX_REGIONS 1024

/* A module global (cubin.h) of a loaded candidate: its bytes right after
 * load, kept to reset it (declared state) or to see it changed (anything
 * else). */
struct mglobal {
	char name[KOPT_GLOBAL_NAME_MAX];
	CUdeviceptr ptr;
	size_t size;
	unsigned char *image;
	int declared; /* named in the request's state list: reset before every launch */
	int zero;     /* image is all zero bytes */
	long long packed; /* its offset in the module's gathered bytes, -1: read on its own */
};

struct wmodule {
	CUmodule mod;
	CUfunction fn;
	int loaded;
	struct mglobal *globals;
	int nglobals;
	/* a module with many small globals reads them with one gather kernel
	 * and one copy (data_globals.c): the list of {address, bytes, offset},
	 * the packed bytes on the device and on the host */
	int ngather;
	size_t gather_bytes;
	CUdeviceptr gather_list, gather_dev;
	unsigned long long *gather_list_host;
	unsigned char *gather_host;
};

union wslot {
	unsigned char tmap[128]; /* a CUtensorMap */
	CUdeviceptr p;
	int64_t i64;
	int32_t i32;
	uint32_t u32;
	float f;
	double d;
	uint16_t h;
	int16_t i16;
	int8_t i8;
	uint8_t u8;
};

/* Kernel parameters (arrays by pointer, scalars by value; constants are not
 * parameters). */
struct wparams {
	union wslot *slots;
	void **ptrs;
};

/* One candidate of a run request, as the worker uses it. */
struct job {
	const char *cubin;
	size_t cubin_len;
	char entry[1024]; /* the lowered name: C++ templates make long ones */
	char state[1024]; /* comma-separated module globals the kernel declares as state */
	struct launch launch, ref_launch;
	double tol_rel_l2, tol_max_abs;
	int nudge; /* timing: flip one low mantissa bit of a float input per sample */
	char dump[1024]; /* non-empty: folder for host copies of the checks' data */
	/* a pipeline: the first kernel's arguments, the reference's (1-based,
	 * comma-separated; empty: every parameter) and the kernels after the
	 * first (request_fields.h: stages) */
	char args1[256], ref_args[256], stages[8192];
};

/* A pipeline's kernels after the first, launched after it on the same
 * stream (kopt_worker_launch_rest) and timed with it. */
#define KOPT_MAX_STAGES 8
struct stage {
	CUfunction fn;
	struct launch l;
	struct wparams p;
};

/* A candidate ready to launch: a freshly loaded module with its dynamic
 * shared memory allowed, its globals snapshotted, parameters for one input
 * set and constants filled. The one way to get a launchable kernel, for
 * correctness trials, timing and profiling alike. */
struct prepared {
	struct wmodule m;
	struct wparams p;
	int nstages; /* a pipeline's kernels after the first */
	struct stage stages[KOPT_MAX_STAGES];
};

/* One frame size's scrub kernels (data_scrub.c). */
struct scrub_kernels {
	size_t frame; /* bytes of local memory a thread; 0: slot empty */
	CUmodule mod;
	CUfunction local, shared;
	uint64_t used; /* w->clock at its last use */
};
#define KOPT_SCRUB_MODULES 4

struct worker {
	struct kopt_cuda_device dev;
	CUdevice cudev;
	CUcontext ctx;
	CUstream stream;
	/* the L2 flush's buffer: twice the L2, swept and discarded between
	 * timed samples (kopt_worker_flush_l2) */
	CUdeviceptr flush;
	size_t flush_bytes;
	CUfunction flush_sweep, flush_discard;
	CUmodule harness;
	CUfunction spin, stamp, hash;
	CUfunction guard_scan, nudge, compare, compare_bits, gather;
	CUdeviceptr compare_part; /* KOPT_COMPARE_BLOCKS x 8 doubles (compare_dev.c) */
	/* every timed launch compared on the device (compare_dev.c): the set
	 * its inputs come from (NULL: off), the rows of each sample */
	const struct inputset *sample_set;
	CUdeviceptr sample_part;
	size_t sample_part_bytes;
	int sample_cap, sample_outputs, sample_nudged;
	double sample_tol_rel_l2, sample_tol_max_abs;
	int compare_dev;      /* 0 with KOPT_VERIFY_OFF=devcmp: every comparison on the host */
	/* per input-set variant (the spec's distributions, check 2's): the
	 * trivial outputs that pass against the first reference computed
	 * (numerics_trivial.h); later sets draw from the same distributions,
	 * so one probe of each serves the worker's life */
	char trivial[2][768];
	int trivial_probed[2];
	CUdeviceptr hash_dev;  /* 8 bytes per argument */
	CUdeviceptr guard_dev; /* 16 bytes per guard region */
	uint32_t guard_word;   /* the pattern the guards were last armed with */
	volatile int *flag;   /* host-mapped */
	CUdeviceptr flag_dev;
	unsigned long long *stamps; /* host-mapped: [4] clock, ns, clock, ns */
	CUdeviceptr stamps_dev;
	int *spin_timed_out;
	CUdeviceptr spin_timed_out_dev;

	/* the problem: argument list and its buffers */
	char signature[4096];
	struct warg *args;
	int nargs;
	CUdeviceptr *out_dev; /* per arg, outputs only */
	CUdeviceptr *ref_dev; /* per arg, outputs only: the reference's own outputs */
	CUdeviceptr *scratch_dev; /* per arg, input arrays only: the timing copy */
	CUdeviceptr *box_dev; /* per arg, region outputs only: a timed launch's box, packed */
	size_t *box_bytes;    /* per arg: box_dev's size */
	void **out_host;      /* per arg, outputs only: the candidate's output (pinned) */
	uint32_t *poison;     /* per arg: the word each output was last poisoned with */
	struct inputset sets[KOPT_SETS];
	uint64_t clock;
	uint64_t nonce;
	/* drawn from the kernel's random source at start, kept on the host: sets
	 * B and C are drawn from the request's seed mixed with it, so a kernel
	 * that reads set A (whose seed is public: --seed) cannot regenerate
	 * them and have check 2 answered before it sees its inputs */
	uint64_t secret;
	uint64_t check3_draws; /* set C's draws so far: each check 3 draws anew */
	/* the time an event pair around an empty launch reads (run.c's
	 * event_floor_ms: measured once), taken off check 2's and 3's event
	 * times before they are set against the CUPTI median; 0: not yet */
	double event_floor_ms;

	struct scrub_kernels scrub[KOPT_SCRUB_MODULES];
	size_t scrub_stack; /* the context's stack limit at the first scrub */
	size_t scrub_reach; /* the candidate in progress's largest frame */
	double scrub_ms;    /* time the scrubs of the request in progress took */

	CUmodule ref_mod;
	CUfunction ref_fn;
	int ref_loaded;

	int cupti;	      /* CUPTI activity timer available (cupti_timer.h) */
	char cupti_note[256]; /* why not, when not */
	const char *entry;    /* kernel being timed (its lowered name) */
	struct wmodule *cur;  /* module whose declared state is reset before launches */
	const struct inputset *cur_set; /* inputs of the launches to come: the
					 * source of outputs that start as copies */
	const struct prepared *cur_pr; /* its pipeline's later kernels */
	int check_globals;    /* 0 with KOPT_VERIFY_OFF=globals (to test the other defences alone) */
	int check_guards;     /* 0 with KOPT_VERIFY_OFF=guards (to measure what they cost) */
	int check_timed;      /* 0 with KOPT_VERIFY_OFF=timed: the last timed output is not compared */
	int scrub_on;	      /* 0 with KOPT_VERIFY_OFF=scrub: memory left as earlier kernels left it */
	int nudges;	      /* float input arrays of the timing copy, nudged per sample */
	CUdeviceptr nudge_ptr[16];
	/* nudge_words: the words a nudge may flip, one in every nudge_stride
	 * (2 for f64: the low word, so the flip is the element's lowest
	 * mantissa bit, not bit 32); nudge_last: the word flipped last */
	unsigned long long nudge_words[16], nudge_last[16];
	unsigned nudge_stride[16];
	int nudge_arg[16]; /* the argument each nudged array is */
	int64_t timeout_ms;   /* of the request in progress */
	int hung;	      /* a kernel outlived its deadline: it still runs, so no
			       * cuModuleUnload (it would wait for it); the worker exits */
	char log[4096];
};

static inline int kopt_worker_is_output(const struct warg *a)
{
	return a->kind == ARG_ARRAY && a->output;
}

/* Bytes of an array argument, rounded up to whole words (for cuMemsetD32). */
static inline size_t kopt_worker_arg_bytes(const struct warg *a)
{
	size_t b = a->count * kopt_dtype_size(a->type);
	return (b + 3) & ~(size_t)3;
}

struct kopt_msgview;

/* 0 when r is CUDA_SUCCESS, else -1 with "what: error" in err. */
int kopt_worker_cu_check(CUresult r, const char *what, char *err, size_t errlen);

/* Reads the request's n arguments (the a<i>.* fields of
 * KOPT_REQUEST_ARG_FIELDS in request_fields.h); (re)allocates outputs when
 * their shape changed (scalar values are refreshed every time). */
int kopt_worker_setup_args(struct worker *w, int n, const struct kopt_msgview *v, char *err,
			   size_t errlen);
void kopt_worker_free_problem(struct worker *w);

/* The input set for (seed, variant), generated and uploaded on first use,
 * then cached (LRU over KOPT_SETS). NULL with err set on failure. */
struct inputset *kopt_worker_get_set(struct worker *w, uint64_t seed, int variant, char *err,
				     size_t errlen);

/* kopt_hash of every input array of s, on the device, into out[arg]. */
int kopt_worker_hash_inputs(struct worker *w, struct inputset *s, uint64_t *out);

/* Loads j's cubin in a fresh module and snapshots its module globals; on
 * failure w->log says why when the CUresult alone does not. */
CUresult kopt_worker_load(struct worker *w, struct wmodule *m, const struct job *j);
void kopt_worker_unload(struct worker *w, struct wmodule *m);

/* NULL when the launch is ready, else a status with w->log set. */
const char *kopt_worker_prepare(struct worker *w, const struct job *j, const struct inputset *s,
				struct prepared *pr);
void kopt_worker_release(struct worker *w, struct prepared *pr);

/* data_globals.c: the module's globals with their load-time bytes (every
 * name of j->state marked declared), and NULL when no undeclared one
 * changed since load, else "wrong" with w->log naming it ("crash" when it
 * cannot be read). */
CUresult kopt_worker_snapshot_globals(struct worker *w, struct wmodule *m, const struct job *j);
void kopt_worker_free_gather(struct worker *w, struct wmodule *m);
const char *kopt_worker_check_globals(struct worker *w, const struct wmodule *m,
				      const char *what);

/* Copies the set's constant-memory arguments into the module's symbols
 * (w->log says what failed). */
int kopt_worker_fill_constants(struct worker *w, CUmodule mod, const struct inputset *s);

/* Parameters for set s, outputs in the candidate's buffers or, with
 * for_reference, in the reference's own. Returns 0; 1 when the driver
 * refuses a tensor map (the config's fault); -1 out of host memory or, for
 * _sel, a bad selection; w->log says which. Free with
 * kopt_worker_free_params, also on failure. */
int kopt_worker_build_params(struct worker *w, const struct inputset *s, struct wparams *p,
			     int for_reference);
/* The same for the arguments of `sel` only ("2,1,4": 1-based, in that order;
 * NULL or empty: every parameter), for a pipeline's kernels. */
int kopt_worker_build_params_sel(struct worker *w, const struct inputset *s, struct wparams *p,
				 int for_reference, const char *sel);

/* "a,b,c" (decimal digits only) into up to max sizes; the count (0 for
 * ""), or -1 when malformed: a sign, a space, an empty item, a trailing
 * comma, more than max items or a value past SIZE_MAX. */
int kopt_worker_parse_sizes(const char *text, size_t *out, int max);

/* A run of device words that should all hold one value. */
struct scan {
	CUdeviceptr ptr;
	unsigned long long words;
	unsigned word;
};

/* Scans n runs with kopt_guard_scan (harness.cu) and waits: found[2 i] is
 * the largest (words - k) and found[2 i + 1] the largest (k + 1) over the
 * words k of run i that differ, both 0 when it is intact. (Guard bands and
 * zero-initialised module variables.) */
CUresult kopt_worker_scan_runs(struct worker *w, struct scan *runs, int n,
			       unsigned long long *found);

/* l's launch with its cluster dimension and cooperative flag as attributes
 * (attr, two of them, must outlive cfg's use), for cuLaunchKernelEx and
 * cuOccupancyMaxActiveClusters. */
void kopt_worker_launch_config(const struct launch *l, CUstream stream, CUlaunchConfig *cfg,
			       CUlaunchAttribute attr[2]);

/* Whether f can be launched with l on this device: grid and block limits,
 * threads, registers, shared memory (allowing more than 48 KB when asked),
 * the cluster, at least one block per multiprocessor, a cooperative grid
 * resident at once. 0 when it can, else 1 with w->log saying why. When
 * blocks_out is not NULL: the blocks per multiprocessor, or -1 when a limit
 * checked before the occupancy refused the launch. */
int kopt_worker_launch_fits(struct worker *w, CUfunction f, const struct launch *l, int *blocks_out);

/* Launches f with l on w->stream: cuLaunchKernel, or cuLaunchKernelEx when l
 * has a cluster dimension or is cooperative. */
CUresult kopt_worker_launch(struct worker *w, CUfunction f, const struct launch *l, void **params);

/* Empties the L2 on w->stream before a timed sample (harness.cu,
 * kopt_flush_sweep and kopt_flush_discard). */
CUresult kopt_worker_flush_l2(struct worker *w);

/* Launches the later kernels of w->cur_pr's pipeline on w->stream (nothing
 * for a single kernel); called right after every launch of the first. */
CUresult kopt_worker_launch_rest(struct worker *w);
void kopt_worker_free_params(struct wparams *p);

/* Status of a wait: 0 done, 1 timeout, else the CUresult of the failure. */
int kopt_worker_wait(struct worker *w, CUstream s, int64_t timeout_ms, CUresult *res);

/* Overwrites local memory (reach bytes a thread, the candidate's largest
 * frame, plus the context's stack limit at start; at least the limit now)
 * on every thread slot, and shared memory on every multiprocessor, so a
 * kernel finds nothing an earlier one left there (data_scrub.c): before a
 * candidate's check 1, its timing and its checks 2 and 3. 0, or -1 with
 * w->log set. */
int kopt_worker_scrub(struct worker *w, size_t reach);
/* The frame the scrub uses for `need` bytes (a bucket at least that large,
 * up to the 512 KiB a thread may have). */
size_t kopt_worker_scrub_frame(size_t need);
/* Host-device copies on w->stream, waited for (data.c says why not the
 * plain cuMemcpyHtoD/DtoH); a copy that does not finish in a minute is
 * CUDA_ERROR_LAUNCH_TIMEOUT. */
CUresult kopt_worker_upload(struct worker *w, CUdeviceptr dst, const void *src, size_t bytes);
CUresult kopt_worker_download(struct worker *w, void *dst, CUdeviceptr src, size_t bytes);
/* compare_dev.c: the candidate's outputs compared with set s's reference on
 * the device (no copy to the host), for checks that pass with room to
 * spare. 1: every compared output passes, *rel_l2 and *max_abs the largest;
 * 0: the host must compare (an output the device path does not handle, no
 * reference on the device, or any doubt: a failure or a result near a
 * tolerance); -1: a CUDA error (w->log). */
#define KOPT_COMPARE_BLOCKS 1024
int kopt_worker_compare_on_device(struct worker *w, const struct inputset *s, double tol_rel_l2,
				  double tol_max_abs, double *rel_l2, double *max_abs);
/* Every timed launch checked: _begin (before the timing) turns it on for
 * the timing copy s of a set whose reference is on the device, when every
 * compared output is a float one with a tolerance above 0 (else off: the
 * last timed output is still compared); _enqueue (bench.c, after sample k's
 * end event, outside the timed window) queues the comparison of the
 * outputs as they are; _check (after the timing, n samples) fails the
 * candidate on any sample grossly off (below; its inputs were nudged, so
 * the cached reference is not theirs) or with NaN/Inf:
 * "wrong" with w->log, NULL when all pass or it was off, "crash" on a CUDA
 * error. */
void kopt_worker_samples_begin(struct worker *w, const struct inputset *s, double tol_rel_l2,
			       double tol_max_abs, int cap);
CUresult kopt_worker_samples_enqueue(struct worker *w, int k);
/* (a sample fails only grossly: NaN/Inf, poison, or a relative L2 error far
 * above the tolerance; compare_dev.c says why) */
const char *kopt_worker_samples_check(struct worker *w, int n);
/* Timed launches the check of launches less exact than the last one needs
 * (compare_dev.c); bench.c takes that many past its time cap while they
 * cost little. */
#define KOPT_CHECKED_SAMPLES 8

/* Uploads the masked copies of set s's reference outputs (s->ref_out);
 * an output that cannot be uploaded is left to the host. */
void kopt_worker_upload_reference(struct worker *w, struct inputset *s);
/* The relative L2 tolerance of output a: its own, else the request's
 * (job_tol, < 0: none), else its type's default. */
double kopt_worker_output_tol(const struct warg *a, double job_tol);
/* Finds which trivial outputs (all zeros, one value, a copy of an input,
 * the reference rounded to a narrower float type; numerics_trivial.h)
 * pass against set s's fresh reference, into w->trivial[s->variant], once
 * per variant. A region output is probed on its box, without copies. -1
 * (w->log) when out of memory. */
int kopt_worker_probe_trivial(struct worker *w, struct inputset *s, double tol_rel_l2,
			      double tol_max_abs);
/* Frees them. */
void kopt_worker_free_reference(struct worker *w, struct inputset *s);


/* Poisons every output buffer with a fresh word (async on w->stream); an
 * output that starts as a copy of an input gets that input of w->cur_set
 * instead. */
CUresult kopt_worker_poison(struct worker *w);

/* Before every launch of a candidate: outputs poisoned, the declared state
 * of w->cur reset to its load-time bytes. */
CUresult kopt_worker_before_launch(struct worker *w);

/* Device buffers with guard bands (KOPT_GUARD_*): data points past the front
 * guard. */
CUresult kopt_worker_alloc_guarded(CUdeviceptr *data, size_t bytes);
void kopt_worker_free_guarded(CUdeviceptr data);

/* A worker under the compute sanitizer allocates its buffers without guard
 * bands (and checks none): each buffer is then an allocation of its own
 * size, so memcheck sees a read past its end, which inside a band it took
 * for an access within the allocation (tests/cheats/oob_read). Set once,
 * before the first allocation. */
void kopt_worker_set_bandless(void);

/* Arms the guards of every buffer the candidate can reach with set s (its
 * outputs and s's input arrays) with a fresh word; kopt_worker_guard_check
 * then answers NULL, "wrong" with w->log ("wrote N bytes past the end of
 * 'y'"), or "crash". */
CUresult kopt_worker_guard_arm(struct worker *w, const struct inputset *s);
const char *kopt_worker_guard_check(struct worker *w, const struct inputset *s, const char *what);

/* The timing copy: s's inputs copied (device to device) into the scratch
 * buffers; view becomes s with the scratch buffers as its device copy. */
int kopt_worker_scratch_view(struct worker *w, const struct inputset *s, struct inputset *view);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
double kopt_worker_now_ms(void);

#endif
