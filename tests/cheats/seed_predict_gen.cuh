// seed_predict's copy of kopt's input generator (core/worker/numerics.c,
// kopt_check_fill_sparse at scale 1, and the seeds of sets A, B and C in
// core/worker/run.c): every input a check draws is a public function of the
// request's seed, which is the run's --seed (default 1) plus one for every
// 64 evaluations. Written so that a host compiler can test it too.
#ifndef SEED_PREDICT_GEN_CUH
#define SEED_PREDICT_GEN_CUH
#ifdef __CUDACC__
#define SP_FN __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
#define SP_FN static inline
#endif
typedef unsigned long long sp_u64;

SP_FN sp_u64 sp_mix_at(sp_u64 s0, sp_u64 k)
{
	sp_u64 z = s0 + k * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

SP_FN double sp_unit_at(sp_u64 s0, sp_u64 k) { return (double)(sp_mix_at(s0, k) >> 11) * 0x1.0p-53; }

// the stream seed of argument `arg` in the set drawn with `seed`
SP_FN sp_u64 sp_s0(sp_u64 seed, sp_u64 arg) { return seed * 0x2545f4914f6cdd1dull ^ (arg + 1) * 0x9e3779b97f4a7c15ull; }

// the seeds of check 2's set B and check 3's set C (run.c other_set, check3)
SP_FN sp_u64 sp_seed_b(sp_u64 seed) { return seed * 0x9e3779b97f4a7c15ull + 7; }
SP_FN sp_u64 sp_seed_c(sp_u64 seed) { return seed * 0xbf58476d1ce4e5b9ull + 11; }

// element i of an f32 input drawn uniform01
SP_FN float sp_u01(sp_u64 s0, sp_u64 i) { return (float)sp_unit_at(s0, i); }

// element i of an f32 input drawn normal (Box-Muller on the pair i & ~1)
SP_FN float sp_normal(sp_u64 s0, sp_u64 i)
{
	sp_u64 e = i & ~1ull;
	double u1 = 1.0 - sp_unit_at(s0, e), u2 = sp_unit_at(s0, e + 1);
	double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
	return (float)(i & 1 ? r * sin(a) : r * cos(a));
}
#endif
