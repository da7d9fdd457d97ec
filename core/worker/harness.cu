// Blocks the stream until the host sets *flag (or timeout_ns passes), so the
// timed work queued behind it starts without launch gaps (nvbench's method).
extern "C" __global__ void kopt_spin(volatile int *flag, unsigned long long timeout_ns, int *timed_out)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	while (*flag == 0) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		if (t - t0 > timeout_ns) { *timed_out = 1; break; }
	}
}
// The block that lands on SM 0 records clock64 and globaltimer.
extern "C" __global__ void kopt_stamp(unsigned long long *out)
{
	unsigned smid;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
	if (smid == 0 && threadIdx.x == 0) {
		unsigned long long t;
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		out[0] = clock64();
		out[1] = t;
	}
}
// An order-independent 64-bit hash of n 32-bit words (each word mixed with
// its index, then summed): the worker hashes every input once after upload
// and again after each candidate run, so a modified input is found without
// copying it back to the host.
extern "C" __global__ void kopt_hash(const unsigned *p, unsigned long long n, unsigned long long *out)
{
	unsigned long long acc = 0;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		unsigned long long z = p[i] * 0x9e3779b97f4a7c15ull + i * 0xc2b2ae3d27d4eb4full;
		z ^= z >> 31;
		z *= 0xbf58476d1ce4e5b9ull;
		z ^= z >> 29;
		acc += z;
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_down_sync(0xffffffffu, acc, o);
	if ((threadIdx.x & 31) == 0)
		atomicAdd(out, acc);
}
// Scans one guard region of n words that should all hold `word`: out[0] is
// the largest (n - i) and out[1] the largest (i + 1) over the words i that
// differ, i.e. how far before the region's end and past its start a stray
// write reached (both 0 when the region is intact).
extern "C" __global__ void kopt_guard_scan(const unsigned *p, unsigned long long n, unsigned word,
                                           unsigned long long *out)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		if (p[i] != word) {
			atomicMax(&out[0], n - i);
			atomicMax(&out[1], i + 1);
		}
	}
}
// Timing inputs that never repeat: flips the lowest bit of word `flip` of a
// float input (one ulp of one element) and undoes the previous sample's flip,
// so no two timed launches see the same input bytes.
extern "C" __global__ void kopt_nudge(unsigned *p, unsigned long long undo, unsigned long long flip)
{
	if (undo != ~0ull)
		p[undo] ^= 1u;
	p[flip] ^= 1u;
}
// The key stream that masks a reference output kept on the device: word w
// of the reference is stored XOR this, so a candidate that scans device
// memory finds no answer in it (the key is passed only to kopt_compare).
// Two rounds of the splitmix64 finaliser with a second key mixed in
// between, of which only 32 bits are used: one round alone is a bijection,
// so a kernel that knew a few reference values could invert it and read the
// whole key back.
__device__ __forceinline__ unsigned long long kopt_fmix(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned kopt_mask_word(unsigned long long key, unsigned long long w)
{
	unsigned long long k2 = kopt_fmix(key ^ 0x6a09e667f3bcc909ull);
	return (unsigned)(kopt_fmix(kopt_fmix(key + w * 0x9e3779b97f4a7c15ull) ^ k2) >> 32);
}
// Element i of an array of kopt dtype t (enum kopt_dtype: 0 f32, 1 f16,
// 2 bf16, 3 f64, 4 i32, 5 i64, 6 u32, 7 i8, 8 u8, 9 i16, 10 u16, 11 u64),
// unmasked with key when masked. Integers are compared as doubles when the
// spec gives them a tolerance (a rounding step); exact ones word for word.
__device__ __forceinline__ double kopt_elem(const unsigned *p, unsigned long long i, int t,
                                           unsigned long long key, int masked)
{
	if (t == 5 || t == 11) {
		unsigned lo = p[2 * i], hi = p[2 * i + 1];
		if (masked) {
			lo ^= kopt_mask_word(key, 2 * i);
			hi ^= kopt_mask_word(key, 2 * i + 1);
		}
		unsigned long long u = (unsigned long long)hi << 32 | lo;
		return t == 5 ? (double)(long long)u : (double)u;
	}
	if (t == 4 || t == 6) {
		unsigned v = p[i];
		if (masked)
			v ^= kopt_mask_word(key, i);
		return t == 4 ? (double)(int)v : (double)v;
	}
	if (t == 7 || t == 8) {
		unsigned v = p[i >> 2];
		if (masked)
			v ^= kopt_mask_word(key, i >> 2);
		unsigned b = (v >> (8 * (i & 3))) & 0xffu;
		return t == 7 ? (double)(signed char)b : (double)b;
	}
	if (t == 9 || t == 10) {
		unsigned v = p[i >> 1];
		if (masked)
			v ^= kopt_mask_word(key, i >> 1);
		unsigned short h = (unsigned short)((i & 1) ? v >> 16 : v & 0xffffu);
		return t == 9 ? (double)(short)h : (double)h;
	}
	if (t == 3) {
		unsigned lo = p[2 * i], hi = p[2 * i + 1];
		if (masked) {
			lo ^= kopt_mask_word(key, 2 * i);
			hi ^= kopt_mask_word(key, 2 * i + 1);
		}
		return __hiloint2double((int)hi, (int)lo);
	}
	if (t == 0) {
		unsigned v = p[i];
		if (masked)
			v ^= kopt_mask_word(key, i);
		return (double)__uint_as_float(v);
	}
	unsigned v = p[i >> 1];
	if (masked)
		v ^= kopt_mask_word(key, i >> 1);
	unsigned short h = (unsigned short)((i & 1) ? v >> 16 : v & 0xffffu);
	if (t == 2)
		return (double)__uint_as_float((unsigned)h << 16);
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return (double)f;
}
// The comparison of a candidate's float output with the (masked) reference,
// as the host's kopt_check_compare makes it: per block, part[8 b + k] gets
// the sum of squared errors (0), of squared reference values (1), the
// largest error (2) with the got (3) and want (4) values and index (6) of
// its first element, and the count of NaN/Inf outputs (5). A fixed grid and
// a fixed reduction order make the sums the same on every run.
extern "C" __global__ void kopt_compare(const unsigned *out, const unsigned *ref, unsigned long long key,
                                        unsigned long long n, int t, double *part)
{
	double err2 = 0.0, ref2 = 0.0, maxe = 0.0, got = 0.0, want = 0.0;
	unsigned long long worst = ~0ull, nonfinite = 0;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		double o = kopt_elem(out, i, t, 0, 0), r = kopt_elem(ref, i, t, key, 1);
		if (!isfinite(o)) {
			nonfinite++;
			continue;
		}
		if (isfinite(r))
			ref2 += r * r;
		double e = fabs(o - r);
		if (!isfinite(e))
			e = INFINITY;
		if (e > maxe) {
			maxe = e;
			worst = i;
			got = o;
			want = r;
		}
		err2 += e * e;
	}
	__shared__ double s_err2[256], s_ref2[256], s_max[256], s_got[256], s_want[256];
	__shared__ unsigned long long s_idx[256], s_nf[256];
	unsigned t_ = threadIdx.x;
	s_err2[t_] = err2, s_ref2[t_] = ref2, s_max[t_] = maxe, s_got[t_] = got, s_want[t_] = want;
	s_idx[t_] = worst, s_nf[t_] = nonfinite;
	__syncthreads();
	for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
		if (t_ < h) {
			unsigned u = t_ + h;
			s_err2[t_] += s_err2[u];
			s_ref2[t_] += s_ref2[u];
			s_nf[t_] += s_nf[u];
			if (s_max[u] > s_max[t_] || (s_max[u] == s_max[t_] && s_idx[u] < s_idx[t_])) {
				s_max[t_] = s_max[u];
				s_got[t_] = s_got[u];
				s_want[t_] = s_want[u];
				s_idx[t_] = s_idx[u];
			}
		}
		__syncthreads();
	}
	if (t_ == 0) {
		double *p = part + 8 * (unsigned long long)blockIdx.x;
		p[0] = s_err2[0], p[1] = s_ref2[0], p[2] = s_max[0], p[3] = s_got[0], p[4] = s_want[0];
		p[5] = (double)s_nf[0];
		p[6] = s_idx[0] == ~0ull ? -1.0 : (double)s_idx[0];
		p[7] = 0.0;
	}
}
// An exact comparison (integer outputs): the count of the `words` 32-bit
// words of out that differ from the masked reference's into *diff; in the
// last word only the bytes of last_mask count (past the output's end the
// buffer holds poison).
extern "C" __global__ void kopt_compare_bits(const unsigned *out, const unsigned *ref, unsigned long long key,
                                             unsigned long long words, unsigned last_mask,
                                             unsigned long long *diff)
{
	unsigned long long c = 0;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
		unsigned d = out[i] ^ ref[i] ^ kopt_mask_word(key, i);
		if (i == words - 1)
			d &= last_mask;
		c += d != 0;
	}
	for (int o = 16; o > 0; o >>= 1)
		c += __shfl_down_sync(0xffffffffu, c, o);
	if ((threadIdx.x & 31) == 0 && c != 0)
		atomicAdd(diff, c);
}
// Module variables gathered for one copy (data_globals.c): block b copies
// the bytes of entry b of list ({source address, bytes, offset in out}).
// A module that includes cooperative_groups has about a thousand, each an
// allocation of its own, which no single copy can read.
extern "C" __global__ void kopt_gather(const unsigned long long *list, unsigned char *out)
{
	const unsigned long long *e = list + 3ull * blockIdx.x;
	const unsigned char *src = (const unsigned char *)e[0];
	unsigned long long size = e[1], at = e[2];
	for (unsigned long long k = threadIdx.x; k < size; k += blockDim.x)
		out[at + k] = src[k];
}
// The L2 flush between timed samples (bench.c, kopt_worker_flush_l2):
// kopt_flush_sweep reads a buffer of twice the L2's size with the
// evict_last policy, which replaces the lines of that priority, those a
// kernel loaded with evict_last itself included (a plain memset, of normal
// priority, left them in place: a candidate that hinted its input
// evict_last was timed warm); a memset then replaces the normal lines, and
// kopt_flush_discard drops the buffer's lines, so the timed kernel starts
// on an empty L2 with nothing to write back.
extern "C" __global__ void kopt_flush_sweep(const unsigned *p, unsigned long long lines)
{
	unsigned long long pol;
	asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride) {
		asm volatile("{ .reg .b32 v; ld.global.L2::cache_hint.u32 v, [%0], %1; }" : : "l"(p + 32 * i), "l"(pol));
	}
}
extern "C" __global__ void kopt_flush_discard(const unsigned *p, unsigned long long lines)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride)
		asm volatile("discard.global.L2 [%0], 128;" : : "l"(p + 32 * i) : "memory");
}
