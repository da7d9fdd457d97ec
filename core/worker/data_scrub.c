/* Local and shared memory overwritten before each candidate (docs/TRUST.md,
 * "Memory a candidate finds"). Both keep their bytes across kernels and
 * modules of one context: a thread that lands on the hardware slot an
 * earlier kernel's thread used reads what that thread left in its stack, so
 * a candidate could keep answers there (keyed on its inputs' contents) for
 * the next candidate of the same input sets, and have its check 2 served
 * from them (tests/cheats/residue_xeval: 62x on an H200, uncharged).
 *
 * The scrub runs a kernel whose stack frame covers what the candidate can
 * reach (its own frame plus the context's stack limit) on every thread
 * slot of every multiprocessor, writing zeros through it; then one with the
 * largest dynamic shared memory a block may have, on every multiprocessor.
 * The frame size is fixed in a kernel's code, so the kernel is PTX written
 * here for the size needed (rounded up to a bucket, a few modules kept). */
#include <stdio.h>
#include <string.h>

#include "worker/data.h"

#define SCRUB_BLOCK 256
#define SCRUB_MAX_FRAME ((size_t)512 << 10) /* the most local memory a thread may have */

/* The kernels for one frame size; %zu (twice) is the size in bytes. */
static const char SCRUB_PTX[] = ".version 7.0\n"
				".target sm_75\n"
				".address_size 64\n"
				".extern .shared .align 16 .b8 kopt_scrub_dyn[];\n"
				".visible .entry kopt_scrub_local()\n"
				".maxntid 256, 1, 1\n"
				".maxnreg 32\n"
				"{\n"
				"  .local .align 16 .b8 frame[%zu];\n"
				"  .reg .pred %%p<2>;\n"
				"  .reg .b32 %%r<4>;\n"
				"  .reg .b64 %%rd<4>;\n"
				"  mov.u32 %%r1, 0;\n"
				"  mov.u64 %%rd1, frame;\n"
				/* through a generic address: a volatile store cannot be dropped as
				 * dead, and st.local takes no .volatile */
				"  cvta.local.u64 %%rd1, %%rd1;\n"
				"  mov.u32 %%r2, 0;\n"
				"$Lloop:\n"
				"  cvt.u64.u32 %%rd2, %%r2;\n"
				"  add.u64 %%rd3, %%rd1, %%rd2;\n"
				"  st.volatile.v4.u32 [%%rd3], {%%r1, %%r1, %%r1, %%r1};\n"
				"  add.u32 %%r2, %%r2, 16;\n"
				"  setp.lt.u32 %%p1, %%r2, %zu;\n"
				"  @%%p1 bra $Lloop;\n"
				"  ret;\n"
				"}\n"
				".visible .entry kopt_scrub_shared(.param .u32 bytes)\n"
				"{\n"
				"  .reg .pred %%p<2>;\n"
				"  .reg .b32 %%r<8>;\n"
				"  mov.u32 %%r1, 0;\n"
				"  ld.param.u32 %%r3, [bytes];\n"
				"  mov.u32 %%r4, %%tid.x;\n"
				"  shl.b32 %%r2, %%r4, 4;\n"
				"  mov.u32 %%r5, %%ntid.x;\n"
				"  shl.b32 %%r5, %%r5, 4;\n"
				"  mov.u32 %%r6, kopt_scrub_dyn;\n"
				"  setp.ge.u32 %%p1, %%r2, %%r3;\n"
				"  @%%p1 bra $Ldone;\n"
				"$Lsloop:\n"
				"  add.u32 %%r7, %%r6, %%r2;\n"
				"  st.volatile.shared.v4.u32 [%%r7], {%%r1, %%r1, %%r1, %%r1};\n"
				"  add.u32 %%r2, %%r2, %%r5;\n"
				"  setp.lt.u32 %%p1, %%r2, %%r3;\n"
				"  @%%p1 bra $Lsloop;\n"
				"$Ldone:\n"
				"  ret;\n"
				"}\n";

/* A frame of at least `need` bytes (and 1 KiB; at most the 512 KiB a thread
 * may have), in buckets no more than a quarter above `need`, so few modules
 * serve a run. */
size_t kopt_worker_scrub_frame(size_t need)
{
	size_t step = 256;
	while (step * 8 <= need) /* (so step <= need / 4) */
		step *= 2;
	size_t frame = (need + step - 1) / step * step;
	if (frame < 1024)
		frame = 1024;
	return frame < SCRUB_MAX_FRAME ? frame : SCRUB_MAX_FRAME;
}

/* The scrub kernels for `frame` bytes: cached, else written and loaded (the
 * least recently used one unloaded when all slots are taken). */
static struct scrub_kernels *kernels_for(struct worker *w, size_t frame, CUresult *r)
{
	struct scrub_kernels *k = NULL, *oldest = &w->scrub[0];
	for (int i = 0; i < KOPT_SCRUB_MODULES; i++) {
		if (w->scrub[i].frame == frame)
			k = &w->scrub[i];
		if (w->scrub[i].used < oldest->used)
			oldest = &w->scrub[i];
	}
	*r = CUDA_SUCCESS;
	if (k == NULL) {
		k = oldest;
		if (k->frame != 0)
			kopt_cu.cuModuleUnload(k->mod);
		memset(k, 0, sizeof *k);
		char ptx[sizeof SCRUB_PTX + 64];
		snprintf(ptx, sizeof ptx, SCRUB_PTX, frame, frame);
		*r = kopt_cu.cuModuleLoadData(&k->mod, ptx);
		if (*r != CUDA_SUCCESS)
			return NULL;
		k->frame = frame;
		*r = kopt_cu.cuModuleGetFunction(&k->local, k->mod, "kopt_scrub_local");
		if (*r == CUDA_SUCCESS)
			*r = kopt_cu.cuModuleGetFunction(&k->shared, k->mod, "kopt_scrub_shared");
		if (*r == CUDA_SUCCESS && w->dev.max_smem_optin > w->dev.max_smem_block)
			*r = kopt_cu.cuFuncSetAttribute(
			    k->shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			    w->dev.max_smem_optin);
		if (*r != CUDA_SUCCESS) {
			kopt_cu.cuModuleUnload(k->mod);
			memset(k, 0, sizeof *k);
			return NULL;
		}
	}
	k->used = ++w->clock;
	return k;
}

int kopt_worker_scrub(struct worker *w, size_t reach)
{
	if (!w->scrub_on)
		return 0;
	double t0 = kopt_worker_now_ms();
	/* the candidate's frame plus the stack limit as the context started,
	 * and at least the context's stack limit now: the driver raises it to
	 * the largest frame launched and keeps it, so a kernel that grows its
	 * stack (alloca, recursion) reaches that far below its own frame. (Not
	 * the sum of the two: our own scrub raises the limit to its frame, and
	 * each scrub would then grow the next.) */
	if (w->scrub_stack == 0 &&
	    kopt_cu.cuCtxGetLimit(&w->scrub_stack, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS)
		w->scrub_stack = 1024;
	size_t frame = kopt_worker_scrub_frame(reach + w->scrub_stack);
	size_t now = 0;
	if (kopt_cu.cuCtxGetLimit(&now, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS) {
		now = (now + 255) / 256 * 256;
		if (now > frame)
			frame = now < SCRUB_MAX_FRAME ? now : SCRUB_MAX_FRAME;
	}
	CUresult r;
	struct scrub_kernels *k = kernels_for(w, frame, &r);
	const struct kopt_cuda_device *d = &w->dev;
	/* every thread slot of every multiprocessor holds a thread of the first
	 * wave; the second covers a slot the block scheduler left empty */
	unsigned slots = (unsigned)(d->max_threads_sm > 0 ? d->max_threads_sm : 2048);
	unsigned blocks = 2 * (unsigned)d->sm_count * ((slots + SCRUB_BLOCK - 1) / SCRUB_BLOCK);
	if (k != NULL)
		r = kopt_cu.cuLaunchKernel(k->local, blocks, 1, 1, SCRUB_BLOCK, 1, 1, 0, w->stream,
					   NULL, NULL);
	unsigned smem = (unsigned)(d->max_smem_optin > d->max_smem_block ? d->max_smem_optin
									 : d->max_smem_block);
	void *params[] = {&smem};
	unsigned threads = (unsigned)(d->max_threads_block > 0 ? d->max_threads_block : 1024);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuLaunchKernel(k->shared, 2 * (unsigned)d->sm_count, 1, 1, threads, 1,
					   1, smem, w->stream, params, NULL);
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 &&
	    r == CUDA_SUCCESS)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	char what[96];
	snprintf(what, sizeof what, "clearing local memory (%zu bytes a thread) and shared memory",
		 frame);
	w->scrub_ms += kopt_worker_now_ms() - t0;
	return kopt_worker_cu_check(r, what, w->log, sizeof w->log);
}
