// Reference for reduce_dim.cu: one thread per output, a plain loop over d
// (sums in double). Same OP_* defines. Launch: grid cdiv(B * I, 256), block 256.
#if defined(OP_ARGMAX)
typedef int out_t;
#else
typedef float out_t;
#endif

extern "C" __global__ void reduce_dim_ref(const float *x, out_t *out, int B, int D, int I)
{
	long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= (long)B * I)
		return;
	long b = t / I, i = t % I;
	const float *p = x + b * D * I + i;
#if defined(OP_SUM) || defined(OP_MEAN)
	double s = 0.0;
	for (int d = 0; d < D; d++)
		s += p[(long)d * I];
#if defined(OP_MEAN)
	s /= D;
#endif
	out[t] = (float)s;
#else
	float best = p[0];
	int at = 0;
	for (int d = 1; d < D; d++) {
		float v = p[(long)d * I];
#if defined(OP_MIN)
		if (v < best) {
#else
		if (v > best) {
#endif
			best = v;
			at = d;
		}
	}
#if defined(OP_ARGMAX)
	out[t] = at;
#else
	out[t] = best;
#endif
#endif
}
