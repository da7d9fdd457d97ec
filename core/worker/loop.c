/* The GPU worker process (worker.h): start-up, the message loop and the
 * replies. A "run" request is decoded here once (request.h) and evaluated by
 * run.c; its reply is sent here, and after a crash or a timeout the worker
 * exits, since its context is unusable. Floor "loop", the top of the worker:
 * includes run and what is below it, and nothing includes it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "gpu/cupti_timer.h"
#include "wire.h"
#include "worker/data.h"
#include "worker/harness_ptx.h"
#include "worker/reply.h"
#include "worker/request.h"
#include "worker/run.h"
#include "worker/worker.h"

static int in_fd = -1, out_fd = -1;

/* --- replies --------------------------------------------------------------- */

static void send_msg(struct kopt_msg *m)
{
	char err[256];
	if (m->failed || kopt_wire_write(out_fd, m->buf, m->len, err, sizeof err) != 0) {
		fprintf(stderr, "kopt worker: cannot reply: %s\n",
			m->failed ? "message too large" : err);
		_exit(1);
	}
	kopt_msg_release(m);
}

static void send_error(const char *op, const char *log)
{
	struct kopt_msg m = {0};
	kopt_msg_put_cstr(&m, "op", op);
	kopt_msg_put_cstr(&m, "log", log);
	send_msg(&m);
}

/* --- start-up ---------------------------------------------------------------- */

static int start(struct worker *w, int device, char *err, size_t errlen)
{
	if (kopt_cuda_load(err, errlen) != 0 ||
	    kopt_cuda_device_info(device, &w->dev, err, errlen) != 0)
		return -1;
	void *p = NULL;
	if (kopt_worker_cu_check(kopt_cu.cuDeviceGet(&w->cudev, device), "cuDeviceGet", err,
				 errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuDevicePrimaryCtxRetain(&w->ctx, w->cudev),
				 "cuDevicePrimaryCtxRetain", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuCtxSetCurrent(w->ctx), "cuCtxSetCurrent", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING),
				 "cuStreamCreate", err, errlen))
		return -1;
	/* twice the L2, whole 128-byte lines (the sweep's unit); four times
	 * measured the same on an H200 (docs/TRUST.md) */
	w->flush_bytes = (2 * (size_t)w->dev.l2_bytes + 127) & ~(size_t)127;
	if (kopt_worker_cu_check(kopt_cu.cuMemAlloc(&w->flush, w->flush_bytes),
				 "cuMemAlloc (L2 flush)", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuMemHostAlloc(
				     &p, 256, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
				 "cuMemHostAlloc", err, errlen))
		return -1;
	memset(p, 0, 256);
	w->flag = (volatile int *)p;
	w->spin_timed_out = (int *)((char *)p + 64);
	w->stamps = (unsigned long long *)(void *)((char *)p + 128);
	CUdeviceptr base;
	if (kopt_worker_cu_check(kopt_cu.cuMemHostGetDevicePointer(&base, p, 0),
				 "cuMemHostGetDevicePointer", err, errlen))
		return -1;
	w->flag_dev = base;
	w->spin_timed_out_dev = base + 64;
	w->stamps_dev = base + 128;
	if (kopt_worker_cu_check(kopt_cu.cuModuleLoadData(&w->harness, kopt_harness_ptx),
				 "loading the harness kernels", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuModuleGetFunction(&w->spin, w->harness, "kopt_spin"),
				 "kopt_spin", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuModuleGetFunction(&w->stamp, w->harness, "kopt_stamp"),
				 "kopt_stamp", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuModuleGetFunction(&w->hash, w->harness, "kopt_hash"),
				 "kopt_hash", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuModuleGetFunction(&w->guard_scan, w->harness, "kopt_guard_scan"),
		"kopt_guard_scan", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuModuleGetFunction(&w->nudge, w->harness, "kopt_nudge"),
				 "kopt_nudge", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuModuleGetFunction(&w->compare, w->harness, "kopt_compare"),
		"kopt_compare", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuModuleGetFunction(&w->compare_bits, w->harness, "kopt_compare_bits"),
		"kopt_compare_bits", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuModuleGetFunction(&w->gather, w->harness, "kopt_gather"),
				 "kopt_gather", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuModuleGetFunction(&w->flush_sweep, w->harness, "kopt_flush_sweep"),
		"kopt_flush_sweep", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuModuleGetFunction(&w->flush_discard, w->harness, "kopt_flush_discard"),
		"kopt_flush_discard", err, errlen) ||
	    kopt_worker_cu_check(
		kopt_cu.cuMemAlloc(&w->compare_part, 8 * sizeof(double) * KOPT_COMPARE_BLOCKS),
		"cuMemAlloc (comparison)", err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuMemAlloc(&w->hash_dev, 8 * 256), "cuMemAlloc (hashes)",
				 err, errlen) ||
	    kopt_worker_cu_check(kopt_cu.cuMemAlloc(&w->guard_dev, 16 * 2 * 256),
				 "cuMemAlloc (guard scan)", err, errlen))
		return -1;
	w->nonce = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	if (getrandom(&w->secret, sizeof w->secret, 0) != (ssize_t)sizeof w->secret)
		w->secret = w->nonce * 0x9e3779b97f4a7c15ull ^ (uint64_t)clock();
	/* KOPT_VERIFY_OFF=globals,guards,timed turns those defences off: for
	 * tests that show the others catch what they must alone, and to measure
	 * their cost */
	const char *off = getenv("KOPT_VERIFY_OFF");
	w->check_globals = off == NULL || strstr(off, "globals") == NULL;
	w->check_guards = off == NULL || strstr(off, "guards") == NULL;
	w->check_timed = off == NULL || strstr(off, "timed") == NULL;
	/* scrub: local and shared memory are not cleared before each
	 * candidate (to show what the scrub stops, and to measure its cost) */
	w->scrub_on = off == NULL || strstr(off, "scrub") == NULL;
	if (kopt_cu.cuCtxGetLimit(&w->scrub_stack, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS)
		w->scrub_stack = 0; /* read again at the first scrub */
	/* devcmp: every comparison on the host, as before compare_dev.c (to
	 * measure what it saves) */
	w->compare_dev = off == NULL || strstr(off, "devcmp") == NULL;
	/* KOPT_TIMER=events keeps CUPTI out of the worker entirely */
	const char *timer = getenv("KOPT_TIMER");
	if (timer != NULL && strcmp(timer, "events") == 0)
		snprintf(w->cupti_note, sizeof w->cupti_note, "KOPT_TIMER=events");
	else
		w->cupti = kopt_cupti_timer_open(w->cupti_note, sizeof w->cupti_note) == 0;
	return 0;
}

static void put_device(struct kopt_msg *m, const struct worker *w)
{
	const struct kopt_cuda_device *d = &w->dev;
	kopt_msg_put_cstr(m, "name", d->name);
	kopt_msg_put_cstr(m, "pci_bus_id", d->pci_bus_id);
	kopt_msg_put_int(m, "index", d->index);
	kopt_msg_put_int(m, "cc_major", d->cc_major);
	kopt_msg_put_int(m, "cc_minor", d->cc_minor);
	kopt_msg_put_int(m, "sm_count", d->sm_count);
	kopt_msg_put_int(m, "mem_bytes", (int64_t)d->mem_bytes);
	kopt_msg_put_int(m, "l2_bytes", d->l2_bytes);
	kopt_msg_put_int(m, "clock_khz", d->clock_khz);
	kopt_msg_put_int(m, "driver_version", d->driver_version);
	kopt_msg_put_int(m, "pid", getpid());
	kopt_msg_put_cstr(m, "timer", w->cupti ? "cupti" : "events");
	kopt_msg_put_cstr(m, "timer_note", w->cupti_note);
}

/* Sends the result and, after a crash or timeout, ends the worker. */
static void finish(struct worker *w, struct kopt_msg *m, const char *status)
{
	KOPT_REPLY_STR(m, status, status);
	KOPT_REPLY_STR(m, log, w->log);
	send_msg(m);
	if (strcmp(status, "crash") == 0 || strcmp(status, "timeout") == 0)
		_exit(3);
}

/* One "run" request: decoded once, evaluated (run.c), answered. */
static void handle_run(struct worker *w, const struct kopt_msgview *v)
{
	struct kopt_msg m = {0};
	struct kopt_request rq;
	kopt_request_decode(v, &rq);
	w->log[0] = '\0';
	KOPT_REPLY_STR(&m, op, "result");
	KOPT_REPLY_INT(&m, id, rq.id);
	w->scrub_ms = 0.0;
	const char *status = kopt_worker_run(w, &rq, v, &m);
	if (w->scrub_ms > 0.0)
		KOPT_REPLY_NUM(&m, scrub_ms, w->scrub_ms);
	finish(w, &m, status);
}

static void handle_set_ref(struct worker *w, const struct kopt_msgview *v)
{
	size_t len = 0;
	const char *cubin = kopt_msg_bytes(v, "cubin", &len);
	char entry[1024];
	kopt_msg_cstr(v, "entry", entry, sizeof entry, "");
	if (w->ref_loaded) {
		kopt_cu.cuModuleUnload(w->ref_mod);
		w->ref_loaded = 0;
	}
	for (int k = 0; k < KOPT_SETS; k++) {
		w->sets[k].have_ref = 0;
		kopt_worker_free_reference(w, &w->sets[k]);
	}
	struct wmodule m;
	struct job rj;
	memset(&rj, 0, sizeof rj);
	rj.cubin = cubin;
	rj.cubin_len = len;
	snprintf(rj.entry, sizeof rj.entry, "%s", entry);
	CUresult r = cubin ? kopt_worker_load(w, &m, &rj) : CUDA_ERROR_INVALID_IMAGE;
	if (r != CUDA_SUCCESS) {
		char buf[256], log[512];
		snprintf(log, sizeof log, "loading the reference kernel '%.200s': %s", entry,
			 kopt_cuda_strerror(r, buf, sizeof buf));
		send_error("error", log);
		return;
	}
	w->ref_mod = m.mod;
	w->ref_fn = m.fn;
	w->ref_loaded = 1;
	w->trivial_probed[0] = w->trivial_probed[1] = 0; /* a new reference: probe again */
	for (int i = 0; i < m.nglobals; i++) /* the module stays; its snapshot is not needed */
		free(m.globals[i].image);
	free(m.globals);
	kopt_worker_free_gather(w, &m);
	/* the reference's launch comes with each request: allow what any may
	 * ask (a cluster of 9 to 16 blocks, dynamic shared memory above 48 KB) */
	int smem_static = 0;
	kopt_cu.cuFuncGetAttribute(&smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, m.fn);
	if (w->dev.cc_major >= 9)
		kopt_cu.cuFuncSetAttribute(m.fn,
					   CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
	if (w->dev.max_smem_optin > smem_static + 49152)
		kopt_cu.cuFuncSetAttribute(m.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					   w->dev.max_smem_optin - smem_static);
	struct kopt_msg out = {0};
	kopt_msg_put_cstr(&out, "op", "ok");
	send_msg(&out);
}

int kopt_worker_main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "kopt: %s is internal (the GPU worker)\n", KOPT_WORKER_ARG);
		return 2;
	}
	/* Ctrl-C and a SIGTERM to the process group (timeout, systemd, Slurm)
	 * are the main process's: it stops between evaluations, so the
	 * candidate measured here finishes and is recorded (killed, it was
	 * recorded as a crash). The worker ends when main closes the pipe, is
	 * stopped with SIGKILL, or dies with main. */
	pid_t parent = getppid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		return 0;
	int device = atoi(argv[2]);
	in_fd = atoi(argv[3]);
	out_fd = atoi(argv[4]);
	int bandless = argc > 5 && strcmp(argv[5], KOPT_WORKER_BANDLESS) == 0;
	if (bandless)
		kopt_worker_set_bandless();
	/* kernels' printf and driver chatter must not reach kopt's stdout */
	dup2(2, 1);
	struct worker *w = calloc(1, sizeof *w);
	char err[512];
	if (w == NULL || start(w, device, err, sizeof err) != 0) {
		send_error("error", w == NULL ? "out of memory" : err);
		free(w);
		return 1;
	}
	if (bandless) /* (no bands to arm or scan) */
		w->check_guards = 0;
	struct kopt_msg ready = {0};
	kopt_msg_put_cstr(&ready, "op", "ready");
	put_device(&ready, w);
	send_msg(&ready);
	for (;;) {
		unsigned char *buf;
		size_t len;
		if (kopt_wire_read(in_fd, &buf, &len, -1, err, sizeof err) != 0)
			break; /* main went away */
		struct kopt_msgview v;
		if (kopt_msgview_parse(&v, buf, len, err, sizeof err) != 0) {
			send_error("error", err);
			free(buf);
			continue;
		}
		char op[32];
		kopt_msg_cstr(&v, "op", op, sizeof op, "");
		int quit = 0;
		if (strcmp(op, "run") == 0) {
			handle_run(w, &v);
		} else if (strcmp(op, "set_ref") == 0) {
			handle_set_ref(w, &v);
		} else if (strcmp(op, "ping") == 0) {
			struct kopt_msg m = {0};
			kopt_msg_put_cstr(&m, "op", "ready");
			put_device(&m, w);
			send_msg(&m);
		} else if (strcmp(op, "quit") == 0) {
			quit = 1;
		} else {
			snprintf(err, sizeof err, "unknown request '%s'", op);
			send_error("error", err);
		}
		kopt_msgview_release(&v);
		free(buf);
		if (quit)
			break;
	}
	kopt_worker_free_problem(w);
	free(w);
	return 0;
}
