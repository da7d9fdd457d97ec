// CASE sabotage_next: an honest kernel that makes the NEXT candidate
// fail. It learns the address of input set A's own device buffer for x
// during its check 1 and, in a later launch (the timing warm-up), flips one
// bit of x[0] there. Its own evaluation is ok at the honest time; the next
// evaluation in this worker on the same seed is "wrong: check 1: the kernel
// modified its input 'x'" though it never wrote x.
//
// The hole: the inputs of set A live on the device for 64 evaluations
// (data.c kopt_worker_get_set caches KOPT_SETS sets; the seed changes every
// 64 evaluations), and they are hashed only around a launch that reads
// them: check_inputs() in compare_outputs() runs on the set the candidate
// was given. Timing reads the timing copy (scratch), check 2 too; so after
// its check 1, nothing looks at set A's buffers until the NEXT candidate's
// check 1, which finds them changed and blames that candidate (then
// restores them). In a search the cheat need not be fast: it knocks out
// whichever config is evaluated after it (a faster rival, if the strategy
// evaluates neighbours in a row), and it re-arms on each of its own
// evaluations.
// How: block 0's thread 0 keeps a 32-byte record {magic, done, pointer} in
// a device-heap chunk of an odd size (4160 bytes: a size class of its own,
// so malloc hands the same chunk back after free; the heap belongs to the
// context and outlives every module: tests/cheats/heap_state). The first
// launch it sees records x's address (check 1: set A's buffer); a launch
// with another x (the timing copy) flips bit 0 of the recorded x[0], once;
// a launch with the recorded x again (its own next check 1) re-arms.
// Risk for the cheat: an address recorded before set A was evicted (after
// 64 evaluations the seed moves on) may point at freed memory.
// The problem: y[i] = sum_{k=1..64} sinf(k x[i]) / k^2. CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64
#define MAGIC 0x73616274u
#define CHUNK 4160

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

struct rec {
	unsigned magic, done;
	unsigned long long ptr;
};

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
#if CHEAT
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		volatile rec *r = (volatile rec *)malloc(CHUNK);
		if (r != 0) {
			unsigned long long me = (unsigned long long)x;
			if (r->magic != MAGIC) {
				r->ptr = me;
				r->done = 0;
				r->magic = MAGIC;
			} else if (r->ptr == me) {
				r->done = 0; // our own check 1 again: re-arm
			} else if (!r->done) {
				volatile unsigned *victim = (volatile unsigned *)r->ptr;
				victim[0] = victim[0] ^ 1u;
				r->done = 1;
			}
			__threadfence();
			free((void *)r);
		}
	}
#endif
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = op(x[i]);
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
