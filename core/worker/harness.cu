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
