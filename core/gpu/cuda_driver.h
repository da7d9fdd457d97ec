/* libcuda loaded at run time.
 *
 * kopt never links libcuda: it dlopen()s "libcuda.so.1" and resolves every
 * entry point through cuGetProcAddress_v2 with the ABI version written next to
 * it in KOPT_CUDA_FUNCS, typed by the matching PFN_<name>_v<version> of
 * cudaTypedefs.h. The plain cuda.h prototype is not always the ABI that a
 * versioned request returns (CUDA 13.0: cuCtxSynchronize, cuCtxGetDevice and
 * cuStreamGetCtx), so a call through `__typeof__(cuX)` can pass the wrong
 * arguments; cuda_driver.c asserts at compile time, per entry, whether the
 * cuda.h prototype and the requested ABI agree.
 *
 * Without a driver, kopt_cuda_load fails with one sentence that says so and
 * points at the replay backend; nothing else in kopt needs the driver. */
#ifndef KOPT_CUDA_DRIVER_H
#define KOPT_CUDA_DRIVER_H

#include <stddef.h>

#include <cuda.h>
#include <cudaTypedefs.h>

/* X(name, abi_version, cuda_h_prototype_matches) */
#define KOPT_CUDA_FUNCS(X)                                                     \
	X(cuInit, 2000, 1)                                                     \
	X(cuDriverGetVersion, 2020, 1)                                         \
	X(cuGetErrorName, 6000, 1)                                             \
	X(cuGetErrorString, 6000, 1)                                           \
	X(cuDeviceGetCount, 2000, 1)                                           \
	X(cuDeviceGet, 2000, 1)                                                \
	X(cuDeviceGetName, 2000, 1)                                            \
	X(cuDeviceGetAttribute, 2000, 1)                                       \
	X(cuDeviceTotalMem, 3020, 1)                                           \
	X(cuDeviceGetPCIBusId, 4010, 1)                                        \
	X(cuDevicePrimaryCtxRetain, 7000, 1)                                   \
	X(cuDevicePrimaryCtxRelease, 11000, 1)                                 \
	X(cuCtxSetCurrent, 4000, 1)                                            \
	X(cuCtxSynchronize, 13000, 0)                                          \
	X(cuCtxGetLimit, 3010, 1)                                              \
	X(cuModuleLoadData, 2000, 1)                                           \
	X(cuModuleUnload, 2000, 1)                                             \
	X(cuModuleGetFunction, 2000, 1)                                        \
	X(cuModuleGetGlobal, 3020, 1)                                          \
	X(cuFuncGetAttribute, 2020, 1)                                         \
	X(cuFuncSetAttribute, 9000, 1)                                         \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050, 1)                \
	X(cuOccupancyMaxActiveClusters, 11070, 1)                              \
	X(cuMemGetInfo, 3020, 1)                                               \
	X(cuMemAlloc, 3020, 1)                                                 \
	X(cuMemFree, 3020, 1)                                                  \
	X(cuMemHostAlloc, 2020, 1)                                             \
	X(cuMemHostGetDevicePointer, 3020, 1)                                  \
	X(cuMemFreeHost, 2000, 1)                                              \
	X(cuMemcpyDtoDAsync, 3020, 1)                                          \
	X(cuMemcpy3DAsync, 3020, 1)                                            \
	X(cuMemcpyHtoDAsync, 3020, 1)                                          \
	X(cuMemcpyDtoHAsync, 3020, 1)                                          \
	X(cuMemsetD8Async, 3020, 1)                                            \
	X(cuMemsetD32Async, 3020, 1)                                           \
	X(cuStreamCreate, 2000, 1)                                             \
	X(cuStreamDestroy, 4000, 1)                                            \
	X(cuStreamQuery, 2000, 1)                                              \
	X(cuStreamSynchronize, 2000, 1)                                        \
	X(cuEventCreate, 2000, 1)                                              \
	X(cuEventDestroy, 4000, 1)                                             \
	X(cuEventRecord, 2000, 1)                                              \
	X(cuEventQuery, 2000, 1)                                               \
	X(cuEventSynchronize, 2000, 1)                                         \
	X(cuEventElapsedTime, 12080, 1)                                        \
	X(cuLaunchKernel, 4000, 1)                                              \
	X(cuLaunchKernelEx, 11060, 1)                                          \
	X(cuTensorMapEncodeTiled, 12000, 1)

/* The resolved entry points: call as kopt_cu.cuLaunchKernel(...). Only valid
 * after kopt_cuda_load succeeded. */
struct kopt_cuda_api {
#define KOPT_CUDA_MEMBER(name, ver, same) PFN_##name##_v##ver name;
	KOPT_CUDA_FUNCS(KOPT_CUDA_MEMBER)
#undef KOPT_CUDA_MEMBER
};
extern struct kopt_cuda_api kopt_cu;

/* Facts about one device, read through cuDeviceGetAttribute. */
struct kopt_cuda_device {
	int index;
	char name[256];
	char pci_bus_id[32];
	int cc_major, cc_minor;
	int sm_count;
	size_t mem_bytes;
	int l2_bytes;
	int clock_khz, mem_clock_khz, mem_bus_width;
	int max_threads_block, max_threads_sm;
	int max_smem_block, max_smem_optin, max_smem_sm;
	int max_regs_block, max_regs_sm;
	int max_blocks_sm;
	int warp_size;
	int max_grid[3], max_block[3];
	int driver_version; /* e.g. 13000 */
};

/* Loads libcuda and calls cuInit(0). Idempotent and thread-compatible (call
 * it once before threads start). On failure returns -1 with one sentence in
 * err: no driver, a driver too old for the ABIs in KOPT_CUDA_FUNCS, or cuInit
 * failing (e.g. no device). */
int kopt_cuda_load(char *err, size_t errlen);

/* Number of visible devices (0 is not an error). Requires kopt_cuda_load. */
int kopt_cuda_device_count(int *count, char *err, size_t errlen);

/* Fills *dev for device `index`. Requires kopt_cuda_load. */
int kopt_cuda_device_info(int index, struct kopt_cuda_device *dev, char *err, size_t errlen);

/* "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access ..." into buf;
 * works before loading too (then only the number). Returns buf. */
const char *kopt_cuda_strerror(CUresult r, char *buf, size_t len);

/* True for errors after which the context is unusable (illegal address, trap,
 * misaligned access, ...): the process must end. */
int kopt_cuda_error_is_sticky(CUresult r);

#endif
