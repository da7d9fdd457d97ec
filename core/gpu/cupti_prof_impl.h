/* Internals shared by the two halves of kopt's CUPTI profiler (C++ only:
 * cupti_profiler_host.h cannot be compiled as C):
 *   cupti_prof.cc     the library (load, entry points, error sentences), the
 *                     device probe, shutdown
 *   cupti_session.cc  metric sets (host objects, cached config images) and
 *                     collection sessions with their passes
 * Not for use outside those two files. */
#ifndef KOPT_CUPTI_PROF_IMPL_H
#define KOPT_CUPTI_PROF_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include "gpu/cupti_prof.h"

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

/* The resolved entry points (kopt_cupti_load fills them). */
struct kopt_cupti_api {
#define KOPT_CUPTI_MEMBER(name) decltype(&::name) name;
	KOPT_CUPTI_FUNCS(KOPT_CUPTI_MEMBER)
#undef KOPT_CUPTI_MEMBER
};

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

/* The process's profiler state: one client per process (cupti_prof.h). */
struct kopt_cupti_state {
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
};

extern struct kopt_cupti_api kopt_cupti_api;
extern struct kopt_cupti_state kopt_cupti_state;

/* The short names both files use. */
static struct kopt_cupti_api &api = kopt_cupti_api;
static struct kopt_cupti_state &st = kopt_cupti_state;

/* "<call>: <sentence>" into err; returns -1. */
int kopt_cupti_fail(CUptiResult r, const char *call, char *err, size_t errlen);

static inline int fail(CUptiResult r, const char *call, char *err, size_t errlen)
{
	return kopt_cupti_fail(r, call, err, errlen);
}

/* Frees every cached metric-set configuration (cupti_session.cc). */
void kopt_cupti_configs_clear(void);

#endif
