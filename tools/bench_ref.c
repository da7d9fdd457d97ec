/* Reference ceilings measured the way kopt's worker measures candidates
 * (harness stream, L2 flushed before each sample, blocking kernel, events,
 * median), for the ratios in docs/PERFORMANCE.md:
 *
 *   bench_ref gemm M N K [GPU]   cuBLAS f16 x f16 -> f16, f32 accumulate, row-major
 *   bench_ref gemm_nt M N K [GPU] the same with B given as N x K: C = A B^T (the
 *                                layout of specs/matmul_f16_sm90.json)
 *                                C[M,N] = A[M,K] B[K,N]; prints TFLOP/s
 *   bench_ref copy BYTES [GPU]   device-to-device cuMemcpy; prints GB/s counting
 *                                bytes read + bytes written
 *
 * Output: one JSON object per run on stdout. Build: tools/build_bench_ref.sh.
 * libcuda and libcublas are dlopen'ed, as in kopt. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "gpu/cuda_driver.h"
#include "harness_ptx.h"

#define SAMPLES 40

static void die(const char *what, CUresult r)
{
	char buf[256];
	fprintf(stderr, "bench_ref: %s: %s\n", what, kopt_cuda_strerror(r, buf, sizeof buf));
	exit(1);
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS)                                                            \
			die(#call, r_);                                                            \
	} while (0)

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct ctx {
	struct kopt_cuda_device dev;
	CUstream stream;
	CUdeviceptr flush;
	size_t flush_bytes;
	CUfunction spin;
	volatile int *flag;
	CUdeviceptr flag_dev, timed_out_dev;
};

typedef void (*work_fn)(struct ctx *c, void *arg);

/* Median of SAMPLES runs of fn, each behind an L2 flush and the blocking kernel. */
static double time_median_ms(struct ctx *c, work_fn fn, void *arg, double *p10, double *p90)
{
	CUevent a, b;
	CK(kopt_cu.cuEventCreate(&a, CU_EVENT_DEFAULT));
	CK(kopt_cu.cuEventCreate(&b, CU_EVENT_DEFAULT));
	for (int i = 0; i < 3; i++)
		fn(c, arg);
	CK(kopt_cu.cuStreamSynchronize(c->stream));
	double v[SAMPLES];
	for (int s = 0; s < SAMPLES; s++) {
		*c->flag = 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		unsigned long long timeout = 2000000000ull;
		void *sargs[] = {&c->flag_dev, &timeout, &c->timed_out_dev};
		CK(kopt_cu.cuMemsetD32Async(c->flush, 0, c->flush_bytes / 4, c->stream));
		CK(kopt_cu.cuLaunchKernel(c->spin, 1, 1, 1, 1, 1, 1, 0, c->stream, sargs, NULL));
		CK(kopt_cu.cuEventRecord(a, c->stream));
		fn(c, arg);
		CK(kopt_cu.cuEventRecord(b, c->stream));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*c->flag = 1;
		CK(kopt_cu.cuStreamSynchronize(c->stream));
		float ms;
		CK(kopt_cu.cuEventElapsedTime(&ms, a, b));
		v[s] = ms;
	}
	qsort(v, SAMPLES, sizeof v[0], cmp);
	*p10 = v[SAMPLES / 10];
	*p90 = v[SAMPLES * 9 / 10];
	kopt_cu.cuEventDestroy(a);
	kopt_cu.cuEventDestroy(b);
	return (v[SAMPLES / 2 - 1] + v[SAMPLES / 2]) / 2;
}

struct copy_arg {
	CUdeviceptr src, dst;
	size_t bytes;
};

static void do_copy(struct ctx *c, void *p)
{
	struct copy_arg *a = p;
	CK(kopt_cu.cuMemcpyDtoDAsync(a->dst, a->src, a->bytes, c->stream));
}

struct gemm_arg {
	cublasHandle_t h;
	int m, n, k, nt;
	CUdeviceptr A, B, C;
	__typeof__(&cublasGemmEx) gemm;
};

static void do_gemm(struct ctx *c, void *p)
{
	struct gemm_arg *g = p;
	(void)c;
	float alpha = 1.0f, beta = 0.0f;
	/* row-major C = A B is column-major C^T = B^T A^T; with B stored N x K
	 * (nt), column-major B^T is that buffer transposed */
	cublasStatus_t s =
	    g->gemm(g->h, g->nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->m, g->k, &alpha,
		    (const void *)g->B, CUDA_R_16F, g->nt ? g->k : g->n, (const void *)g->A,
		    CUDA_R_16F, g->k, &beta, (void *)g->C, CUDA_R_16F, g->n, CUBLAS_COMPUTE_32F,
		    CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_ref: cublasGemmEx failed (%d)\n", (int)s);
		exit(1);
	}
}

static void *open_cublas(void)
{
	const char *home = getenv("CUDA_HOME");
	char path[512];
	void *h = dlopen("libcublas.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL && home != NULL) {
		snprintf(path, sizeof path, "%s/lib64/libcublas.so.13", home);
		h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	}
	if (h == NULL)
		h = dlopen("/usr/local/cuda/lib64/libcublas.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL) {
		fprintf(stderr, "bench_ref: cannot load libcublas.so.13: %s\n", dlerror());
		exit(1);
	}
	return h;
}

static void fill_f16(CUdeviceptr p, size_t n, unsigned seed)
{
	uint16_t *h = malloc(n * 2);
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		/* uniform in [-1,1) as f16: sign, exponent 14 or below, random mantissa */
		h[i] = (uint16_t)(((s >> 20) & 0x8000u) | (0x3800u + ((s >> 8) & 0x3ffu)));
	}
	CK(kopt_cu.cuMemcpyHtoD(p, h, n * 2));
	free(h);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench_ref gemm|gemm_nt M N K [GPU] | bench_ref copy BYTES [GPU]\n");
		return 2;
	}
	int is_nt = strcmp(argv[1], "gemm_nt") == 0;
	int is_gemm = strcmp(argv[1], "gemm") == 0 || is_nt;
	int gpu_arg = is_gemm ? 5 : 3;
	int gpu = argc > gpu_arg ? atoi(argv[gpu_arg]) : 0;
	char err[512];
	struct ctx c;
	memset(&c, 0, sizeof c);
	if (kopt_cuda_load(err, sizeof err) != 0 ||
	    kopt_cuda_device_info(gpu, &c.dev, err, sizeof err)) {
		fprintf(stderr, "bench_ref: %s\n", err);
		return 1;
	}
	CUdevice d;
	CUcontext ctx;
	CK(kopt_cu.cuDeviceGet(&d, gpu));
	CK(kopt_cu.cuDevicePrimaryCtxRetain(&ctx, d));
	CK(kopt_cu.cuCtxSetCurrent(ctx));
	CK(kopt_cu.cuStreamCreate(&c.stream, CU_STREAM_NON_BLOCKING));
	c.flush_bytes = ((size_t)c.dev.l2_bytes + 3) & ~(size_t)3;
	CK(kopt_cu.cuMemAlloc(&c.flush, c.flush_bytes));
	void *host;
	CK(kopt_cu.cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
	c.flag = host;
	CK(kopt_cu.cuMemHostGetDevicePointer(&c.flag_dev, host, 0));
	c.timed_out_dev = c.flag_dev + 32;
	CUmodule hm;
	CK(kopt_cu.cuModuleLoadData(&hm, kopt_harness_ptx));
	CK(kopt_cu.cuModuleGetFunction(&c.spin, hm, "kopt_spin"));
	double p10, p90, ms;
	if (is_gemm) {
		if (argc < 5) {
			fprintf(stderr, "usage: bench_ref gemm M N K [GPU]\n");
			return 2;
		}
		struct gemm_arg g;
		memset(&g, 0, sizeof g);
		g.m = atoi(argv[2]), g.n = atoi(argv[3]), g.k = atoi(argv[4]);
		g.nt = is_nt;
		void *lib = open_cublas();
		__typeof__(&cublasCreate_v2) create =
		    (__typeof__(&cublasCreate_v2))dlsym(lib, "cublasCreate_v2");
		__typeof__(&cublasSetStream_v2) set_stream =
		    (__typeof__(&cublasSetStream_v2))dlsym(lib, "cublasSetStream_v2");
		g.gemm = (__typeof__(&cublasGemmEx))dlsym(lib, "cublasGemmEx");
		if (!create || !set_stream || !g.gemm || create(&g.h) != CUBLAS_STATUS_SUCCESS ||
		    set_stream(g.h, (cudaStream_t)c.stream) != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "bench_ref: cuBLAS initialisation failed\n");
			return 1;
		}
		size_t ma = (size_t)g.m * (size_t)g.k, mb = (size_t)g.k * (size_t)g.n,
		       mc = (size_t)g.m * (size_t)g.n;
		CK(kopt_cu.cuMemAlloc(&g.A, ma * 2));
		CK(kopt_cu.cuMemAlloc(&g.B, mb * 2));
		CK(kopt_cu.cuMemAlloc(&g.C, mc * 2));
		fill_f16(g.A, ma, 1);
		fill_f16(g.B, mb, 2);
		ms = time_median_ms(&c, do_gemm, &g, &p10, &p90);
		double tflops = 2.0 * g.m * g.n * g.k / (ms * 1e-3) / 1e12;
		printf(
		    "{\"what\":\"cublas_gemm_f16%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"median_ms\":%.5f,"
		    "\"p10_ms\":%.5f,\"p90_ms\":%.5f,\"tflops\":%.2f,\"device\":\"%s\"}\n",
		    is_nt ? "_nt" : "", g.m, g.n, g.k, ms, p10, p90, tflops, c.dev.name);
	} else {
		struct copy_arg a;
		a.bytes = (size_t)strtoull(argv[2], NULL, 10);
		CK(kopt_cu.cuMemAlloc(&a.src, a.bytes));
		CK(kopt_cu.cuMemAlloc(&a.dst, a.bytes));
		CK(kopt_cu.cuMemsetD8Async(a.src, 0x3c, a.bytes, c.stream));
		ms = time_median_ms(&c, do_copy, &a, &p10, &p90);
		double gbps = 2.0 * (double)a.bytes / (ms * 1e-3) / 1e9;
		printf("{\"what\":\"d2d_copy\",\"bytes\":%zu,\"median_ms\":%.5f,\"p10_ms\":%.5f,"
		       "\"p90_ms\":%.5f,\"gbps\":%.1f,\"device\":\"%s\"}\n",
		       a.bytes, ms, p10, p90, gbps, c.dev.name);
	}
	return 0;
}
