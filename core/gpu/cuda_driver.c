/* libcuda through dlopen + cuGetProcAddress_v2; see cuda_driver.h. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda_driver.h"

struct kopt_cuda_api kopt_cu;

/* Per entry: does the prototype cuda.h declares for the plain name equal the
 * ABI we request? Where it does not (the CUDA 13.0 trap), the table's PFN type
 * is the only correct one; if a toolkit upgrade changes either side, the
 * build stops here and the entry's version must be re-checked. */
#define KOPT_CUDA_ASSERT(name, ver, same)                                                          \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), PFN_##name##_v##ver) ==     \
			   (same),                                                                 \
		       #name ": cuda.h prototype vs PFN_" #name "_v" #ver " changed");
KOPT_CUDA_FUNCS(KOPT_CUDA_ASSERT)
#undef KOPT_CUDA_ASSERT

struct entry {
	const char *name;
	int version;
	void **slot;
};

static const struct entry entries[] = {
#define KOPT_CUDA_ENTRY(name, ver, same) {#name, ver, (void **)&kopt_cu.name},
    KOPT_CUDA_FUNCS(KOPT_CUDA_ENTRY)
#undef KOPT_CUDA_ENTRY
};

static int load_state;	     /* 0 not tried, 1 ok, -1 failed */
static char load_error[512]; /* the sentence, kept for every later caller */
static int driver_version;

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(load_error, sizeof load_error, fmt, ap);
	va_end(ap);
	load_state = -1;
	return -1;
}

static int load_once(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *why = dlerror();
		return fail("no NVIDIA driver found (dlopen libcuda.so.1: %s): GPU commands are "
			    "unavailable here; use --backend replay:FILE to run on recorded "
			    "measurements",
			    why ? why : "unknown error");
	}
	PFN_cuGetProcAddress_v12000 gpa =
	    (PFN_cuGetProcAddress_v12000)(uintptr_t)dlsym(h, "cuGetProcAddress_v2");
	PFN_cuDriverGetVersion_v2020 version =
	    (PFN_cuDriverGetVersion_v2020)(uintptr_t)dlsym(h, "cuDriverGetVersion");
	if (gpa == NULL || version == NULL)
		return fail(
		    "the NVIDIA driver is older than CUDA 12.0 (no cuGetProcAddress_v2): GPU "
		    "commands need an R580+ driver; use --backend replay:FILE");
	if (version(&driver_version) != CUDA_SUCCESS)
		driver_version = 0;
	int needed = 0;
	for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
		if (entries[i].version > needed)
			needed = entries[i].version;
	if (driver_version < needed)
		return fail("the NVIDIA driver supports CUDA %d.%d, kopt needs CUDA 13.0 (an R580+ "
			    "driver); use --backend replay:FILE to run on recorded measurements",
			    driver_version / 1000, driver_version % 1000 / 10);
	for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
		CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
		*entries[i].slot = NULL;
		CUresult r = gpa(entries[i].name, entries[i].slot, entries[i].version,
				 CU_GET_PROC_ADDRESS_DEFAULT, &q);
		if (r != CUDA_SUCCESS || *entries[i].slot == NULL)
			return fail("the NVIDIA driver lacks %s (ABI %d, status %d); use --backend "
				    "replay:FILE to run on recorded measurements",
				    entries[i].name, entries[i].version, (int)q);
	}
	CUresult r = kopt_cu.cuInit(0);
	if (r != CUDA_SUCCESS) {
		char buf[256];
		kopt_cuda_strerror(r, buf, sizeof buf);
		return fail("the NVIDIA driver is present but cuInit failed (%s): GPU commands are "
			    "unavailable here; use --backend replay:FILE",
			    buf);
	}
	load_state = 1;
	return 0;
}

int kopt_cuda_load(char *err, size_t errlen)
{
	if (load_state == 0)
		load_once();
	if (load_state < 0) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s", load_error);
		return -1;
	}
	return 0;
}

const char *kopt_cuda_strerror(CUresult r, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;
	if (load_state == 1) {
		if (kopt_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS)
			name = NULL;
		if (kopt_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS)
			text = NULL;
	}
	snprintf(buf, len, "%s (%d)%s%s", name ? name : "CUDA error", (int)r, text ? ": " : "",
		 text ? text : "");
	return buf;
}

int kopt_cuda_error_is_sticky(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return 1;
	default:
		return 0;
	}
}

static int cu_fail(CUresult r, const char *what, char *err, size_t errlen)
{
	char buf[256];
	snprintf(err, errlen, "%s: %s", what, kopt_cuda_strerror(r, buf, sizeof buf));
	return -1;
}

int kopt_cuda_device_count(int *count, char *err, size_t errlen)
{
	*count = 0;
	if (kopt_cuda_load(err, errlen) != 0)
		return -1;
	CUresult r = kopt_cu.cuDeviceGetCount(count);
	if (r == CUDA_ERROR_NO_DEVICE) {
		*count = 0;
		return 0;
	}
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceGetCount", err, errlen);
	return 0;
}

int kopt_cuda_device_info(int index, struct kopt_cuda_device *dev, char *err, size_t errlen)
{
	memset(dev, 0, sizeof *dev);
	if (kopt_cuda_load(err, errlen) != 0)
		return -1;
	CUdevice d;
	CUresult r = kopt_cu.cuDeviceGet(&d, index);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceGet", err, errlen);
	dev->index = index;
	dev->driver_version = driver_version;
	if ((r = kopt_cu.cuDeviceGetName(dev->name, (int)sizeof dev->name, d)) != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceGetName", err, errlen);
	if (kopt_cu.cuDeviceGetPCIBusId(dev->pci_bus_id, (int)sizeof dev->pci_bus_id, d) !=
	    CUDA_SUCCESS)
		dev->pci_bus_id[0] = '\0';
	if ((r = kopt_cu.cuDeviceTotalMem(&dev->mem_bytes, d)) != CUDA_SUCCESS)
		return cu_fail(r, "cuDeviceTotalMem", err, errlen);
	static const struct {
		CUdevice_attribute a;
		size_t off;
	} attrs[] = {
#define A(attr, field) {attr, offsetof(struct kopt_cuda_device, field)}
	    A(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cc_major),
	    A(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cc_minor),
	    A(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sm_count),
	    A(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, l2_bytes),
	    A(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, clock_khz),
	    A(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, mem_clock_khz),
	    A(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, mem_bus_width),
	    A(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, max_threads_block),
	    A(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, max_threads_sm),
	    A(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, max_smem_block),
	    A(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, max_smem_optin),
	    A(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, max_smem_sm),
	    A(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, max_regs_block),
	    A(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, max_regs_sm),
	    A(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, max_blocks_sm),
	    A(CU_DEVICE_ATTRIBUTE_WARP_SIZE, warp_size),
	    A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, max_grid[0]),
	    A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, max_grid[1]),
	    A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, max_grid[2]),
	    A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, max_block[0]),
	    A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, max_block[1]),
	    A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, max_block[2]),
#undef A
	};
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
		int *field = (int *)(void *)((char *)dev + attrs[i].off);
		if ((r = kopt_cu.cuDeviceGetAttribute(field, attrs[i].a, d)) != CUDA_SUCCESS)
			return cu_fail(r, "cuDeviceGetAttribute", err, errlen);
	}
	return 0;
}
