/* Whether a launch fits the device and the kernel (data.h,
 * kopt_worker_launch_fits): grid and block limits, threads, shared memory
 * with the opt-in attribute above 48 KB, registers, thread-block clusters,
 * at least one resident block; cooperative grids all resident at once. */
#include <stdio.h>

#include "worker/data.h"

#define SMEM_DEFAULT_LIMIT 49152

/* A thread-block cluster the device can run: the grid a whole number of
 * clusters, at most 8 blocks (16 where the kernel may ask for more than the
 * portable size), and at least one cluster resident at a time. 0 when
 * possible (or no cluster), else 1 with w->log set. */
static int check_cluster(struct worker *w, CUfunction f, const struct launch *l)
{
	unsigned size = l->cluster[0] * l->cluster[1] * l->cluster[2];
	if (size <= 1)
		return 0;
	if (w->dev.cc_major < 9) {
		snprintf(w->log, sizeof w->log,
			 "thread-block clusters need compute capability 9.0 or later, this GPU is %d.%d",
			 w->dev.cc_major, w->dev.cc_minor);
		return 1;
	}
	for (int i = 0; i < 3; i++)
		if (l->cluster[i] == 0 || l->grid[i] % l->cluster[i] != 0) {
			snprintf(w->log, sizeof w->log,
				 "grid (%u,%u,%u) is not a whole number of clusters (%u,%u,%u)",
				 l->grid[0], l->grid[1], l->grid[2], l->cluster[0], l->cluster[1],
				 l->cluster[2]);
			return 1;
		}
	if (size > 16) {
		snprintf(w->log, sizeof w->log, "a cluster of %u blocks (at most 16)", size);
		return 1;
	}
	if (size > 8)
		kopt_cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
	CUlaunchAttribute attr[2];
	CUlaunchConfig cfg;
	kopt_worker_launch_config(l, NULL, &cfg, attr);
	int clusters = 0;
	CUresult r = kopt_cu.cuOccupancyMaxActiveClusters(&clusters, f, &cfg);
	if (r != CUDA_SUCCESS || clusters == 0) {
		char buf[256];
		snprintf(w->log, sizeof w->log,
			 "a cluster of %u blocks of %u threads and %u bytes of shared memory does not "
			 "fit on the GPU%s%s",
			 size, l->block[0] * l->block[1] * l->block[2], l->smem,
			 r != CUDA_SUCCESS ? ": " : "",
			 r != CUDA_SUCCESS ? kopt_cuda_strerror(r, buf, sizeof buf) : "");
		return 1;
	}
	return 0;
}

int kopt_worker_launch_fits(struct worker *w, CUfunction f, const struct launch *l, int *blocks_out)
{
	int regs = 0, smem_static = 0, max_threads = 0, blocks = 0;
	kopt_cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
	kopt_cu.cuFuncGetAttribute(&smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
	kopt_cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
	if (blocks_out != NULL)
		*blocks_out = -1; /* not asked yet: an earlier limit refused the launch */
	const struct kopt_cuda_device *d = &w->dev;
	uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	for (int i = 0; i < 3; i++) {
		if (l->grid[i] == 0 || l->block[i] == 0 || l->grid[i] > (unsigned)d->max_grid[i] ||
		    l->block[i] > (unsigned)d->max_block[i]) {
			snprintf(
			    w->log, sizeof w->log,
			    "launch grid (%u,%u,%u) block (%u,%u,%u) outside the device's limits",
			    l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
			    l->block[2]);
			return 1;
		}
	}
	if (threads > (uint64_t)max_threads) {
		snprintf(w->log, sizeof w->log,
			 "block of %llu threads exceeds the kernel's limit of %d (launch bounds or "
			 "%d registers per thread)",
			 (unsigned long long)threads, max_threads, regs);
		return 1;
	}
	if ((uint64_t)regs * threads > (uint64_t)d->max_regs_block) {
		snprintf(w->log, sizeof w->log, "%d registers x %llu threads exceed %d per block",
			 regs, (unsigned long long)threads, d->max_regs_block);
		return 1;
	}
	if ((uint64_t)smem_static + l->smem > (uint64_t)d->max_smem_optin) {
		snprintf(w->log, sizeof w->log,
			 "shared memory %d static + %u dynamic bytes exceeds the device's %d",
			 smem_static, l->smem, d->max_smem_optin);
		return 1;
	}
	if (l->smem > SMEM_DEFAULT_LIMIT || smem_static + (int)l->smem > SMEM_DEFAULT_LIMIT) {
		CUresult r = kopt_cu.cuFuncSetAttribute(
		    f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->smem);
		if (r != CUDA_SUCCESS) {
			char buf[256];
			snprintf(w->log, sizeof w->log,
				 "cannot allow %u bytes of dynamic shared memory: %s", l->smem,
				 kopt_cuda_strerror(r, buf, sizeof buf));
			return 1;
		}
	}
	if (check_cluster(w, f, l) != 0)
		return 1;
	CUresult r =
	    kopt_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, (int)threads, l->smem);
	if (blocks_out != NULL)
		*blocks_out = r == CUDA_SUCCESS ? blocks : 0;
	if (r != CUDA_SUCCESS || blocks == 0) {
		snprintf(w->log, sizeof w->log, "no block fits on a multiprocessor (occupancy 0)");
		return 1;
	}
	/* The driver refuses a cooperative grid that cannot be resident at once;
	 * saying so here names the numbers instead of a launch error. */
	uint64_t grid = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
	if (l->cooperative && grid > (uint64_t)blocks * (uint64_t)d->sm_count) {
		snprintf(w->log, sizeof w->log,
			 "a cooperative launch of %llu blocks needs them all resident, and at most "
			 "%d blocks per multiprocessor x %d multiprocessors = %llu fit",
			 (unsigned long long)grid, blocks, d->sm_count,
			 (unsigned long long)blocks * (unsigned long long)d->sm_count);
		return 1;
	}
	return 0;
}
