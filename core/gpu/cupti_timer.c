/* CUPTI activity kernel timestamps; see cupti_timer.h. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti_activity.h>

#include "gpu/cupti_prof.h"
#include "gpu/cupti_timer.h"

#define BUFFER_BYTES (1u << 20)
#define RECORDS_MAX 4096

static struct {
	int state; /* 0 not tried, 1 open, -1 unavailable */
	char err[512];
	__typeof__(&cuptiActivityRegisterCallbacks) register_callbacks;
	__typeof__(&cuptiActivityEnable) enable;
	__typeof__(&cuptiActivityDisable) disable;
	__typeof__(&cuptiActivityFlushAll) flush_all;
	__typeof__(&cuptiActivityGetNextRecord) next_record;
	char name[512]; /* the kernel being timed */
	uint64_t start[RECORDS_MAX], end[RECORDS_MAX];
	int count;
	int overflow;
} T;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, BUFFER_BYTES);
	*size = *buffer ? BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	(void)ctx, (void)stream, (void)size;
	CUpti_Activity *rec = NULL;
	while (T.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(void *)rec;
		if (k->name == NULL || strcmp(k->name, T.name) != 0)
			continue;
		if (T.count == RECORDS_MAX) {
			T.overflow = 1;
			continue;
		}
		T.start[T.count] = k->start;
		T.end[T.count] = k->end;
		T.count++;
	}
	free(buffer);
}

int kopt_cupti_timer_open(char *err, size_t errlen)
{
	if (T.state == 0) {
		T.state = -1;
		void *h = NULL;
		if (kopt_cupti_load(T.err, sizeof T.err) == 0)
			h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
		else if (T.err[0] == '\0')
			snprintf(T.err, sizeof T.err, "libcupti.so.13 not found");
		if (h != NULL) {
#define SYM(field, name) (T.field = (__typeof__(T.field))dlsym(h, name))
			if (SYM(register_callbacks, "cuptiActivityRegisterCallbacks") &&
			    SYM(enable, "cuptiActivityEnable") &&
			    SYM(disable, "cuptiActivityDisable") &&
			    SYM(flush_all, "cuptiActivityFlushAll") &&
			    SYM(next_record, "cuptiActivityGetNextRecord") &&
			    T.register_callbacks(buffer_requested, buffer_completed) ==
				CUPTI_SUCCESS)
				T.state = 1;
			else
				snprintf(T.err, sizeof T.err, "CUPTI activity API unavailable");
#undef SYM
		} else if (T.err[0] == '\0') {
			snprintf(T.err, sizeof T.err, "libcupti.so.13 is not loaded");
		}
	}
	if (T.state < 0) {
		snprintf(err, errlen, "%s", T.err);
		return -1;
	}
	return 0;
}

int kopt_cupti_timer_begin(const char *name)
{
	if (T.state != 1)
		return -1;
	snprintf(T.name, sizeof T.name, "%s", name);
	T.count = 0;
	T.overflow = 0;
	return T.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS ? 0 : -1;
}

int kopt_cupti_timer_take(double *out, int max)
{
	if (T.state != 1 || T.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != CUPTI_SUCCESS ||
	    T.overflow)
		return -1;
	/* records arrive per buffer, not necessarily in launch order */
	for (int i = 1; i < T.count; i++)
		for (int j = i; j > 0 && T.start[j] < T.start[j - 1]; j--) {
			uint64_t s = T.start[j], e = T.end[j];
			T.start[j] = T.start[j - 1], T.end[j] = T.end[j - 1];
			T.start[j - 1] = s, T.end[j - 1] = e;
		}
	int n = T.count < max ? T.count : max;
	for (int i = 0; i < n; i++)
		out[i] = (double)(T.end[i] - T.start[i]) / 1e6;
	int got = T.count;
	T.count = 0;
	return got;
}

void kopt_cupti_timer_end(void)
{
	if (T.state == 1) {
		T.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		T.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		T.count = 0;
	}
}
