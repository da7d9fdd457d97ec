/* CUPTI range profiling (see cupti_prof.h): the library, the error
 * sentences, the device probe and shutdown here; metric sets and collection
 * sessions in cupti_session.cc (shared state: cupti_prof_impl.h). C++ only
 * because cupti_profiler_host.h includes <string>; the code is C in style: no
 * exceptions, no allocation through new, no standard library beyond libc.
 *
 * Call sequence (CUDA 13 Host + Range Profiler APIs):
 *   probe:   cuptiProfilerInitialize, cuptiProfilerDeviceSupported,
 *            cuptiDeviceGetChipName, cuptiProfilerGetCounterAvailability
 *   config:  cuptiProfilerHostInitialize, ...HostConfigAddMetrics,
 *            ...HostGetConfigImage, ...HostGetNumOfPasses   (cached per set)
 *   session: cuptiRangeProfilerEnable, ...GetCounterDataSize,
 *            ...CounterDataImageInitialize, ...SetConfig(AutoRange,
 *            UserReplay), per pass { ...Start, <one launch>, ...Stop }
 *            until Stop reports every pass submitted, ...DecodeData,
 *            ...GetCounterDataInfo, cuptiProfilerHostEvaluateToGpuValues,
 *            cuptiRangeProfilerDisable
 * User replay rather than kernel replay: see cupti_prof.h.
 * User ranges are avoided on purpose: they add tens of microseconds of
 * profiler overhead to the "elapsed" denominators of every percentage. */
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cupti_prof_impl.h"

struct kopt_cupti_api kopt_cupti_api;
struct kopt_cupti_state kopt_cupti_state;

const char *kopt_cupti_strerror(int code, char *buf, size_t len)
{
	const char *what = NULL;
	switch (code) {
	case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
		what = "GPU performance counters are restricted to administrators by the NVIDIA "
		       "driver (module option NVreg_RestrictProfilingToAdminUsers=1, shown as "
		       "RmProfilingAdminOnly: 1 in /proc/driver/nvidia/params): run as root or with "
		       "CAP_SYS_ADMIN, or set 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
		       "in /etc/modprobe.d and reload the driver";
		break;
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
		what = "the hypervisor does not allow profiling on this virtual GPU";
		break;
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
		what = "profiling is not supported on this virtualized GPU";
		break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		what = "another profiler or tool (Nsight Compute, Nsight Systems, a debugger) is "
		       "already attached to this process";
		break;
	case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
		what = "profiling is not supported while confidential computing is on";
		break;
	case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
		what = "profiling is not supported on NVIDIA CMP devices";
		break;
	case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
		what = "profiling is not supported on this MIG instance";
		break;
	case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
		what = "profiling is not supported with SLI";
		break;
	case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
		what = "profiling is not supported under WSL with this driver";
		break;
	case CUPTI_ERROR_NOT_SUPPORTED:
		what = "profiling is not supported on this device or driver";
		break;
	case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
		what = "the legacy CUPTI profiler API is already in use in this process";
		break;
	default:
		break;
	}
	const char *name = NULL;
	if (st.load_state == 1 && api.cuptiGetResultString != NULL)
		api.cuptiGetResultString((CUptiResult)code, &name);
	if (what != NULL)
		snprintf(buf, len, "%s (CUPTI error %d)", what, code);
	else
		snprintf(buf, len, "%s (CUPTI error %d)", name != NULL ? name : "CUPTI call failed", code);
	return buf;
}

int kopt_cupti_fail(CUptiResult r, const char *call, char *err, size_t errlen)
{
	char msg[512];
	snprintf(err, errlen, "%s: %s", call, kopt_cupti_strerror((int)r, msg, sizeof msg));
	return -1;
}

static void *try_open(const char *path)
{
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* libcupti loads libnvperf_host.so by bare name; pre-loading it from the
 * directory libcupti came from makes that work without LD_LIBRARY_PATH. */
static void preload_nvperf(void *lib)
{
	char dir[PATH_MAX];
	if (dlinfo(lib, RTLD_DI_ORIGIN, dir) != 0)
		return;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/libnvperf_host.so", dir);
	st.nvperf = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

static void *open_cupti(char *tried, size_t triedlen)
{
	const char *env = getenv("KOPT_CUPTI_LIB");
	if (env != NULL && *env != '\0') {
		snprintf(tried, triedlen, "%s", env);
		return try_open(env);
	}
	void *h = try_open("libcupti.so.13");
	if (h != NULL)
		return h;
	const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"),
#ifdef KOPT_CUDA_HOME
			       KOPT_CUDA_HOME,
#endif
			       "/usr/local/cuda"};
	const char *subs[] = {"lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib",
			      "targets/sbsa-linux/lib"};
	snprintf(tried, triedlen, "libcupti.so.13");
	for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
		if (roots[i] == NULL || *roots[i] == '\0')
			continue;
		for (size_t j = 0; j < sizeof subs / sizeof *subs; j++) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/%s/libcupti.so.13", roots[i], subs[j]);
			if ((h = try_open(path)) != NULL)
				return h;
		}
	}
	size_t used = strlen(tried);
	snprintf(tried + used, triedlen - used, " (also under $CUDA_HOME and the toolkit's lib64)");
	return NULL;
}

int kopt_cupti_load(char *err, size_t errlen)
{
	if (st.load_state == 1)
		return 0;
	if (st.load_state == -1) {
		snprintf(err, errlen, "%s", st.load_err);
		return -1;
	}
	const char *env = getenv("KOPT_CUPTI_LIB");
	char tried[PATH_MAX + 64] = "";
	void *h = NULL;
	if (env != NULL && strcmp(env, "none") == 0) {
		snprintf(st.load_err, sizeof st.load_err,
			 "profiling is off: KOPT_CUPTI_LIB=none");
		goto out;
	}
	h = open_cupti(tried, sizeof tried);
	if (h == NULL) {
		const char *why = dlerror();
		snprintf(st.load_err, sizeof st.load_err,
			 "profiling unavailable: cannot load CUPTI (%s): %s", tried,
			 why != NULL ? why : "not found");
		goto out;
	}
#define KOPT_CUPTI_RESOLVE(name)                                                        \
	api.name = (decltype(api.name))dlsym(h, #name);                                \
	if (api.name == NULL) {                                                        \
		snprintf(st.load_err, sizeof st.load_err,                              \
			 "profiling unavailable: the loaded CUPTI lacks %s (CUDA 13's "  \
			 "Host and Range Profiler APIs are required)",                   \
			 #name);                                                         \
		dlclose(h);                                                            \
		h = NULL;                                                              \
		goto out;                                                              \
	}
	KOPT_CUPTI_FUNCS(KOPT_CUPTI_RESOLVE)
#undef KOPT_CUPTI_RESOLVE
	preload_nvperf(h);
	st.lib = h;
	st.load_state = 1;
	return 0;
out:
	memset(&api, 0, sizeof api);
	st.load_state = -1;
	snprintf(err, errlen, "%s", st.load_err);
	return -1;
}

static const char *support_word(CUpti_Profiler_Support_Level l)
{
	return l == CUPTI_PROFILER_CONFIGURATION_DISABLED ? "disabled" : "unsupported";
}

int kopt_cupti_probe(CUcontext ctx, CUdevice dev, int ordinal, struct kopt_cupti_info *out,
		     char *err, size_t errlen)
{
	if (out != NULL)
		memset(out, 0, sizeof *out);
	if (kopt_cupti_load(err, errlen) != 0)
		return -1;
	if (st.ctx == ctx && ctx != NULL) {
		if (out != NULL)
			*out = st.probe;
		return 0;
	}
	CUptiResult r;
	if (!st.initialized) {
		CUpti_Profiler_Initialize_Params ip;
		memset(&ip, 0, sizeof ip);
		ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
		if ((r = api.cuptiProfilerInitialize(&ip)) != CUPTI_SUCCESS)
			return fail(r, "profiling unavailable: cuptiProfilerInitialize", err, errlen);
		st.initialized = 1;
	}
	kopt_cupti_configs_clear();
	free(st.avail);
	st.avail = NULL;
	st.ctx = NULL;

	CUpti_Profiler_DeviceSupported_Params sp;
	memset(&sp, 0, sizeof sp);
	sp.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
	sp.cuDevice = dev;
	sp.api = CUPTI_PROFILER_RANGE_PROFILING;
	if ((r = api.cuptiProfilerDeviceSupported(&sp)) != CUPTI_SUCCESS)
		return fail(r, "profiling unavailable: cuptiProfilerDeviceSupported", err, errlen);
	if (sp.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
		const char *why = "the device does not support range profiling";
		char buf[160];
		if (sp.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
			why = "range profiling needs compute capability 7.0 or newer";
		else if (sp.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
			snprintf(buf, sizeof buf, "profiling is %s on this vGPU", support_word(sp.vGpu));
			why = buf;
		} else if (sp.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
			why = "profiling is not supported while confidential computing is on";
		else if (sp.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
			why = "profiling is not supported on NVIDIA CMP devices";
		else if (sp.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
			why = "profiling is not supported with SLI";
		else if (sp.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
			why = "profiling is not supported under WSL with this driver";
		snprintf(err, errlen, "profiling unavailable: %s", why);
		return -1;
	}

	CUpti_Device_GetChipName_Params cp;
	memset(&cp, 0, sizeof cp);
	cp.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
	cp.deviceIndex = (size_t)ordinal;
	if ((r = api.cuptiDeviceGetChipName(&cp)) != CUPTI_SUCCESS)
		return fail(r, "profiling unavailable: cuptiDeviceGetChipName", err, errlen);
	struct kopt_cupti_info pr;
	memset(&pr, 0, sizeof pr);
	snprintf(pr.chip, sizeof pr.chip, "%s", cp.pChipName != NULL ? cp.pChipName : "?");

	/* Counter availability: this is where the admin-only setting and a
	 * concurrent profiler show up. */
	CUpti_Profiler_GetCounterAvailability_Params ap;
	memset(&ap, 0, sizeof ap);
	ap.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
	ap.ctx = ctx;
	if ((r = api.cuptiProfilerGetCounterAvailability(&ap)) != CUPTI_SUCCESS)
		return fail(r, "profiling unavailable: counter availability", err, errlen);
	uint8_t *avail = (uint8_t *)malloc(ap.counterAvailabilityImageSize ? ap.counterAvailabilityImageSize : 1);
	if (avail == NULL) {
		snprintf(err, errlen, "profiling unavailable: out of memory");
		return -1;
	}
	ap.pCounterAvailabilityImage = avail;
	if ((r = api.cuptiProfilerGetCounterAvailability(&ap)) != CUPTI_SUCCESS) {
		free(avail);
		return fail(r, "profiling unavailable: counter availability", err, errlen);
	}

	CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params mp;
	memset(&mp, 0, sizeof mp);
	mp.structSize = CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE;
	mp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
	mp.pChipName = pr.chip;
	mp.pCounterAvailabilityImage = avail;
	if (api.cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(&mp) == CUPTI_SUCCESS)
		pr.max_metrics_per_pass = mp.maxMetricsPerPass > INT_MAX ? INT_MAX : (int)mp.maxMetricsPerPass;

	st.avail = avail;
	st.avail_size = ap.counterAvailabilityImageSize;
	st.probe = pr;
	st.ctx = ctx;
	if (out != NULL)
		*out = pr;
	return 0;
}

void kopt_cupti_shutdown(void)
{
	if (st.load_state != 1)
		return;
	kopt_cupti_configs_clear();
	free(st.avail);
	st.avail = NULL;
	st.ctx = NULL;
	if (st.initialized) {
		CUpti_Profiler_DeInitialize_Params p;
		memset(&p, 0, sizeof p);
		p.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
		api.cuptiProfilerDeInitialize(&p);
		st.initialized = 0;
	}
}
