/* CUPTI range profiling (see cupti_prof.h). C++ only because
 * cupti_profiler_host.h includes <string>; the code is C in style: no
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

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include "cupti_prof.h"

const char *const kopt_cupti_default_metrics[] = {
	"gpu__time_duration.sum",
	"sm__cycles_elapsed.avg.per_second",
	"dram__throughput.avg.pct_of_peak_sustained_elapsed",
	"sm__throughput.avg.pct_of_peak_sustained_elapsed",
	"sm__warps_active.avg.pct_of_peak_sustained_active",
	"l1tex__t_sector_hit_rate.pct",
	"lts__t_sector_hit_rate.pct",
	"dram__bytes_read.sum",
	"dram__bytes_write.sum",
	"lts__throughput.avg.pct_of_peak_sustained_elapsed",
	"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
	NULL,
};

#define KOPT_CUPTI_FUNCS(X)                                                    \
	X(cuptiGetResultString)                                                \
	X(cuptiProfilerInitialize)                                             \
	X(cuptiProfilerDeInitialize)                                           \
	X(cuptiProfilerDeviceSupported)                                        \
	X(cuptiDeviceGetChipName)                                              \
	X(cuptiProfilerGetCounterAvailability)                                 \
	X(cuptiProfilerHostInitialize)                                         \
	X(cuptiProfilerHostDeinitialize)                                       \
	X(cuptiProfilerHostConfigAddMetrics)                                   \
	X(cuptiProfilerHostGetConfigImageSize)                                 \
	X(cuptiProfilerHostGetConfigImage)                                     \
	X(cuptiProfilerHostGetNumOfPasses)                                     \
	X(cuptiProfilerHostEvaluateToGpuValues)                                \
	X(cuptiProfilerHostGetMaxNumHardwareMetricsPerPass)                    \
	X(cuptiRangeProfilerEnable)                                            \
	X(cuptiRangeProfilerDisable)                                           \
	X(cuptiRangeProfilerGetCounterDataSize)                                \
	X(cuptiRangeProfilerCounterDataImageInitialize)                        \
	X(cuptiRangeProfilerSetConfig)                                         \
	X(cuptiRangeProfilerStart)                                             \
	X(cuptiRangeProfilerStop)                                              \
	X(cuptiRangeProfilerDecodeData)                                        \
	X(cuptiRangeProfilerGetCounterDataInfo)

static struct {
#define KOPT_CUPTI_MEMBER(name) decltype(&::name) name;
	KOPT_CUPTI_FUNCS(KOPT_CUPTI_MEMBER)
#undef KOPT_CUPTI_MEMBER
} api;

/* A metric set's configuration: the host object evaluates values, the image
 * programs the counters. */
struct config {
	char *key; /* names joined by '\n'; NULL = free slot */
	char **names;
	size_t n;
	CUpti_Profiler_Host_Object *host;
	uint8_t *image;
	size_t image_size;
	int passes;
	unsigned used;
};

#define KOPT_CUPTI_CONFIGS 8

static struct {
	int load_state; /* 0 not tried, 1 loaded, -1 failed */
	char load_err[600];
	void *lib, *nvperf;
	int initialized;
	CUcontext ctx; /* the probed context, NULL before */
	struct kopt_cupti_info probe;
	uint8_t *avail;
	size_t avail_size;
	struct config configs[KOPT_CUPTI_CONFIGS];
	unsigned clock;
} st;

struct kopt_cupti_session {
	struct config *cfg;
	CUpti_RangeProfiler_Object *obj;
	uint8_t *data;
	size_t data_size;
	int started;   /* inside a pass */
	int ran;       /* passes run */
	int submitted; /* CUPTI has every pass */
};

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

/* "<call>: <sentence>" into err; returns -1. */
static int fail(CUptiResult r, const char *call, char *err, size_t errlen)
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

static void config_free(struct config *c)
{
	if (c->host != NULL) {
		CUpti_Profiler_Host_Deinitialize_Params p;
		memset(&p, 0, sizeof p);
		p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
		p.pHostObject = c->host;
		api.cuptiProfilerHostDeinitialize(&p);
	}
	for (size_t i = 0; c->names != NULL && i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c->image);
	free(c->key);
	memset(c, 0, sizeof *c);
}

static void configs_clear(void)
{
	for (int i = 0; i < KOPT_CUPTI_CONFIGS; i++)
		if (st.configs[i].key != NULL)
			config_free(&st.configs[i]);
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
	configs_clear();
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

static CUptiResult host_new(CUpti_Profiler_Host_Object **host)
{
	CUpti_Profiler_Host_Initialize_Params hp;
	memset(&hp, 0, sizeof hp);
	hp.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
	hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
	hp.pChipName = st.probe.chip;
	hp.pCounterAvailabilityImage = st.avail;
	CUptiResult r = api.cuptiProfilerHostInitialize(&hp);
	*host = r == CUPTI_SUCCESS ? hp.pHostObject : NULL;
	return r;
}

static CUptiResult host_add(CUpti_Profiler_Host_Object *host, const char **names, size_t n)
{
	CUpti_Profiler_Host_ConfigAddMetrics_Params p;
	memset(&p, 0, sizeof p);
	p.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
	p.pHostObject = host;
	p.ppMetricNames = names;
	p.numMetrics = n;
	return api.cuptiProfilerHostConfigAddMetrics(&p);
}

static void host_free(CUpti_Profiler_Host_Object *host)
{
	CUpti_Profiler_Host_Deinitialize_Params p;
	memset(&p, 0, sizeof p);
	p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
	p.pHostObject = host;
	api.cuptiProfilerHostDeinitialize(&p);
}

/* Names the metrics CUPTI rejects, one at a time. */
static void name_unknown(const char *const *names, size_t n, char *err, size_t errlen)
{
	size_t used = (size_t)snprintf(err, errlen, "unknown metric name(s) on %s:", st.probe.chip);
	int found = 0;
	for (size_t i = 0; i < n && used < errlen; i++) {
		CUpti_Profiler_Host_Object *h = NULL;
		if (host_new(&h) != CUPTI_SUCCESS)
			break;
		const char *one[1] = {names[i]};
		if (host_add(h, one, 1) != CUPTI_SUCCESS) {
			used += (size_t)snprintf(err + used, errlen - used, " '%s'", names[i]);
			found = 1;
		}
		host_free(h);
	}
	if (!found && used < errlen)
		snprintf(err + used, errlen - used, " none alone; the set as a whole was rejected");
}

int kopt_cupti_check_metrics(const char *const *names, size_t n, int *ok, char *err,
			     size_t errlen)
{
	if (kopt_cupti_load(err, errlen) != 0)
		return -1;
	if (st.ctx == NULL) {
		snprintf(err, errlen, "profiling: kopt_cupti_probe was not called");
		return -1;
	}
	int accepted = 0;
	for (size_t i = 0; i < n; i++) {
		CUpti_Profiler_Host_Object *h = NULL;
		CUptiResult r = host_new(&h);
		if (r != CUPTI_SUCCESS)
			return fail(r, "cuptiProfilerHostInitialize", err, errlen);
		const char *one[1] = {names[i]};
		ok[i] = host_add(h, one, 1) == CUPTI_SUCCESS;
		accepted += ok[i];
		host_free(h);
	}
	return accepted;
}

static struct config *config_get(const char *const *names, size_t n, char *err, size_t errlen)
{
	size_t keylen = 1;
	for (size_t i = 0; i < n; i++)
		keylen += strlen(names[i]) + 1;
	char *key = (char *)malloc(keylen);
	if (key == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	key[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(key, names[i]);
		strcat(key, "\n");
	}
	struct config *slot = &st.configs[0];
	for (int i = 0; i < KOPT_CUPTI_CONFIGS; i++) {
		struct config *c = &st.configs[i];
		if (c->key != NULL && strcmp(c->key, key) == 0) {
			free(key);
			c->used = ++st.clock;
			return c;
		}
		if (c->key == NULL || (slot->key != NULL && c->used < slot->used))
			slot = c;
	}
	if (slot->key != NULL)
		config_free(slot);

	struct config c;
	memset(&c, 0, sizeof c);
	c.key = key;
	CUptiResult r;
	CUpti_Profiler_Host_GetConfigImageSize_Params sp;
	CUpti_Profiler_Host_GetConfigImage_Params ip;
	CUpti_Profiler_Host_GetNumOfPasses_Params pp;
	c.names = (char **)calloc(n, sizeof *c.names);
	if (c.names == NULL)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if ((c.names[c.n++] = strdup(names[i])) == NULL)
			goto oom;
	if ((r = host_new(&c.host)) != CUPTI_SUCCESS) {
		fail(r, "cuptiProfilerHostInitialize", err, errlen);
		goto bad;
	}
	if ((r = host_add(c.host, (const char **)c.names, n)) != CUPTI_SUCCESS) {
		if (r == CUPTI_ERROR_INVALID_PARAMETER || r == CUPTI_ERROR_INVALID_METRIC_NAME)
			name_unknown(names, n, err, errlen);
		else
			fail(r, "cuptiProfilerHostConfigAddMetrics", err, errlen);
		goto bad;
	}
	memset(&sp, 0, sizeof sp);
	sp.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
	sp.pHostObject = c.host;
	if ((r = api.cuptiProfilerHostGetConfigImageSize(&sp)) != CUPTI_SUCCESS) {
		fail(r, "cuptiProfilerHostGetConfigImageSize", err, errlen);
		goto bad;
	}
	c.image_size = sp.configImageSize;
	if ((c.image = (uint8_t *)malloc(c.image_size ? c.image_size : 1)) == NULL)
		goto oom;
	memset(&ip, 0, sizeof ip);
	ip.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
	ip.pHostObject = c.host;
	ip.configImageSize = c.image_size;
	ip.pConfigImage = c.image;
	if ((r = api.cuptiProfilerHostGetConfigImage(&ip)) != CUPTI_SUCCESS) {
		fail(r, "cuptiProfilerHostGetConfigImage", err, errlen);
		goto bad;
	}
	memset(&pp, 0, sizeof pp);
	pp.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
	pp.configImageSize = c.image_size;
	pp.pConfigImage = c.image;
	if (api.cuptiProfilerHostGetNumOfPasses(&pp) == CUPTI_SUCCESS)
		c.passes = pp.numOfPasses > INT_MAX ? INT_MAX : (int)pp.numOfPasses;
	c.used = ++st.clock;
	*slot = c;
	return slot;
oom:
	snprintf(err, errlen, "out of memory");
bad:
	config_free(&c);
	return NULL;
}

static int check_ready(CUcontext ctx, const char *const *names, size_t n, char *err, size_t errlen)
{
	if (kopt_cupti_load(err, errlen) != 0)
		return -1;
	if (st.ctx == NULL || st.ctx != ctx) {
		snprintf(err, errlen, "profiling: kopt_cupti_probe was not called for this context");
		return -1;
	}
	if (n == 0 || n > KOPT_CUPTI_MAX_METRICS) {
		snprintf(err, errlen, "profiling: between 1 and %d metrics per collection, got %zu",
			 KOPT_CUPTI_MAX_METRICS, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (names[i] == NULL || names[i][0] == '\0') {
			snprintf(err, errlen, "profiling: metric %zu has no name", i + 1);
			return -1;
		}
	}
	return 0;
}

int kopt_cupti_num_passes(const char *const *names, size_t n, int *passes, char *err,
			  size_t errlen)
{
	*passes = 0;
	if (check_ready(st.ctx, names, n, err, errlen) != 0)
		return -1;
	struct config *c = config_get(names, n, err, errlen);
	if (c == NULL)
		return -1;
	*passes = c->passes;
	return 0;
}

static void session_free(struct kopt_cupti_session *s)
{
	if (s->obj != NULL) {
		CUpti_RangeProfiler_Disable_Params dp;
		memset(&dp, 0, sizeof dp);
		dp.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
		dp.pRangeProfilerObject = s->obj;
		api.cuptiRangeProfilerDisable(&dp);
	}
	free(s->data);
	free(s);
}

int kopt_cupti_session_begin(CUcontext ctx, const char *const *names, size_t n,
			     struct kopt_cupti_session **out, char *err, size_t errlen)
{
	*out = NULL;
	if (check_ready(ctx, names, n, err, errlen) != 0)
		return -1;
	struct config *c = config_get(names, n, err, errlen);
	if (c == NULL)
		return -1;
	struct kopt_cupti_session *s = (struct kopt_cupti_session *)calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->cfg = c;
	CUptiResult r;
	CUpti_RangeProfiler_Enable_Params ep;
	memset(&ep, 0, sizeof ep);
	ep.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
	ep.ctx = ctx;
	if ((r = api.cuptiRangeProfilerEnable(&ep)) != CUPTI_SUCCESS) {
		fail(r, "cuptiRangeProfilerEnable", err, errlen);
		goto bad;
	}
	s->obj = ep.pRangeProfilerObject;

	{
		CUpti_RangeProfiler_GetCounterDataSize_Params dp;
		memset(&dp, 0, sizeof dp);
		dp.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
		dp.pRangeProfilerObject = s->obj;
		dp.pMetricNames = (const char **)c->names;
		dp.numMetrics = c->n;
		dp.maxNumOfRanges = 1;
		dp.maxNumRangeTreeNodes = 1;
		if ((r = api.cuptiRangeProfilerGetCounterDataSize(&dp)) != CUPTI_SUCCESS) {
			fail(r, "cuptiRangeProfilerGetCounterDataSize", err, errlen);
			goto bad;
		}
		s->data_size = dp.counterDataSize;
		if ((s->data = (uint8_t *)malloc(s->data_size ? s->data_size : 1)) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto bad;
		}
	}
	{
		CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip;
		memset(&ip, 0, sizeof ip);
		ip.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
		ip.pRangeProfilerObject = s->obj;
		ip.counterDataSize = s->data_size;
		ip.pCounterData = s->data;
		if ((r = api.cuptiRangeProfilerCounterDataImageInitialize(&ip)) != CUPTI_SUCCESS) {
			fail(r, "cuptiRangeProfilerCounterDataImageInitialize", err, errlen);
			goto bad;
		}
	}
	{
		CUpti_RangeProfiler_SetConfig_Params cp;
		memset(&cp, 0, sizeof cp);
		cp.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
		cp.pRangeProfilerObject = s->obj;
		cp.configSize = c->image_size;
		cp.pConfig = c->image;
		cp.counterDataImageSize = s->data_size;
		cp.pCounterDataImage = s->data;
		cp.range = CUPTI_AutoRange;
		cp.replayMode = CUPTI_UserReplay;
		cp.maxRangesPerPass = 1;
		cp.numNestingLevels = 1;
		cp.minNestingLevel = 1;
		cp.passIndex = 0;
		cp.targetNestingLevel = 1;
		if ((r = api.cuptiRangeProfilerSetConfig(&cp)) != CUPTI_SUCCESS) {
			fail(r, "cuptiRangeProfilerSetConfig", err, errlen);
			goto bad;
		}
	}
	*out = s;
	return 0;
bad:
	session_free(s);
	return -1;
}

int kopt_cupti_pass_begin(struct kopt_cupti_session *s, char *err, size_t errlen)
{
	if (s->started || s->submitted) {
		snprintf(err, errlen, "profiling: %s", s->started ? "a pass is already open"
								  : "every pass has already run");
		return -1;
	}
	CUpti_RangeProfiler_Start_Params sp;
	memset(&sp, 0, sizeof sp);
	sp.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
	sp.pRangeProfilerObject = s->obj;
	CUptiResult r = api.cuptiRangeProfilerStart(&sp);
	if (r != CUPTI_SUCCESS)
		return fail(r, "cuptiRangeProfilerStart", err, errlen);
	s->started = 1;
	return 0;
}

int kopt_cupti_pass_end(struct kopt_cupti_session *s, int *done, char *err, size_t errlen)
{
	*done = 0;
	if (!s->started) {
		snprintf(err, errlen, "profiling: no pass is open");
		return -1;
	}
	s->started = 0;
	CUpti_RangeProfiler_Stop_Params sp;
	memset(&sp, 0, sizeof sp);
	sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
	sp.pRangeProfilerObject = s->obj;
	CUptiResult r = api.cuptiRangeProfilerStop(&sp);
	if (r != CUPTI_SUCCESS)
		return fail(r, "cuptiRangeProfilerStop", err, errlen);
	s->ran++;
	s->submitted = sp.isAllPassSubmitted != 0;
	*done = s->submitted;
	int need = s->cfg->passes > 0 ? s->cfg->passes : 1;
	if (!s->submitted && s->ran >= need + 2) {
		snprintf(err, errlen, "profiling: %d passes run and CUPTI still wants more "
			 "(the set needs %d; was exactly one kernel launched in each?)", s->ran, need);
		return -1;
	}
	return 0;
}

int kopt_cupti_session_end(struct kopt_cupti_session *s, double *values, int *passes, char *err,
			   size_t errlen)
{
	int rc = -1;
	CUptiResult r;
	struct config *c = s->cfg;
	CUpti_RangeProfiler_DecodeData_Params dp;
	CUpti_RangeProfiler_GetCounterDataInfo_Params ip;
	CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
	for (size_t i = 0; i < c->n; i++)
		values[i] = NAN;
	if (s->started) {
		int done = 0;
		char ignored[256];
		kopt_cupti_pass_end(s, &done, ignored, sizeof ignored);
	}
	if (passes != NULL)
		*passes = s->ran;
	if (!s->submitted) {
		snprintf(err, errlen, "profiling: %d of the %d passes ran", s->ran, c->passes);
		goto out;
	}
	memset(&dp, 0, sizeof dp);
	dp.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
	dp.pRangeProfilerObject = s->obj;
	if ((r = api.cuptiRangeProfilerDecodeData(&dp)) != CUPTI_SUCCESS) {
		fail(r, "cuptiRangeProfilerDecodeData", err, errlen);
		goto out;
	}
	memset(&ip, 0, sizeof ip);
	ip.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
	ip.pCounterDataImage = s->data;
	ip.counterDataImageSize = s->data_size;
	if ((r = api.cuptiRangeProfilerGetCounterDataInfo(&ip)) != CUPTI_SUCCESS) {
		fail(r, "cuptiRangeProfilerGetCounterDataInfo", err, errlen);
		goto out;
	}
	if (ip.numTotalRanges == 0) {
		snprintf(err, errlen, "profiling: no kernel ran between session begin and end%s",
			 dp.numOfRangeDropped ? " (its range was dropped)" : "");
		goto out;
	}
	memset(&ev, 0, sizeof ev);
	ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
	ev.pHostObject = c->host;
	ev.pCounterDataImage = s->data;
	ev.counterDataImageSize = s->data_size;
	ev.rangeIndex = 0;
	ev.ppMetricNames = (const char **)c->names;
	ev.numMetrics = c->n;
	ev.pMetricValues = values;
	if ((r = api.cuptiProfilerHostEvaluateToGpuValues(&ev)) != CUPTI_SUCCESS) {
		fail(r, "cuptiProfilerHostEvaluateToGpuValues", err, errlen);
		goto out;
	}
	rc = 0;
out:
	session_free(s);
	return rc;
}

int kopt_cupti_profile(CUcontext ctx, const char *const *names, size_t n,
		       kopt_cupti_launch_fn launch, void *ud, double *values, int *passes, char *err,
		       size_t errlen)
{
	struct kopt_cupti_session *s = NULL;
	if (kopt_cupti_session_begin(ctx, names, n, &s, err, errlen) != 0)
		return -1;
	int done = 0;
	while (!done) {
		if (kopt_cupti_pass_begin(s, err, errlen) != 0 || launch(ud, err, errlen) != 0 ||
		    kopt_cupti_pass_end(s, &done, err, errlen) != 0) {
			double scratch[KOPT_CUPTI_MAX_METRICS];
			char ignored[256];
			kopt_cupti_session_end(s, scratch, NULL, ignored, sizeof ignored);
			return -1;
		}
	}
	return kopt_cupti_session_end(s, values, passes, err, errlen);
}

void kopt_cupti_shutdown(void)
{
	if (st.load_state != 1)
		return;
	configs_clear();
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
