// Specs a trivial kernel passes (tests/lua/test_gpu_trivial.lua): y = x * w.
// With w declared all ones and fixed (weak_copy.json), y is a copy of x in
// both checks; with a loose tolerance (weak_tolerance.json), y rounded to
// f16 or bf16 passes. kopt warns at the start of the run in both cases.
extern "C" __global__ void scale(const float *x, const float *w, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i] * w[i];
}
