/* CUPTI metric sets and collections (see cupti_prof.h): host objects and
 * their cached config images per metric set, then sessions of user-replay
 * passes with auto-range. The library, the probe and the error sentences are
 * in cupti_prof.cc; the state both share is in cupti_prof_impl.h. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cupti_prof_impl.h"

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

struct kopt_cupti_session {
	struct config *cfg;
	CUpti_RangeProfiler_Object *obj;
	uint8_t *data;
	size_t data_size;
	int started;   /* inside a pass */
	int ran;       /* passes run */
	int submitted; /* CUPTI has every pass */
};

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

void kopt_cupti_configs_clear(void)
{
	for (int i = 0; i < KOPT_CUPTI_CONFIGS; i++)
		if (st.configs[i].key != NULL)
			config_free(&st.configs[i]);
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
