// CASE int_tail: an exact integer output with a few elements never written.
// Problem: y[i] = (x[i] * 2654435761) >> 24 as u8, n odd. CHEAT=1 leaves the
// last 3 elements alone (they keep the poison kopt wrote before the launch),
// so it must be wrong; the comparison on the device sees a difference and
// the host comparison words it. CHEAT=0 is honest.
#ifndef CHEAT
#define CHEAT 1
#endif
extern "C" __global__ void cheat(const unsigned *x, unsigned char *y, int n)
{
	int stride = gridDim.x * blockDim.x;
	int end = CHEAT ? n - 3 : n;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < end; i += stride)
		y[i] = (unsigned char)((x[i] * 2654435761u) >> 24);
}
extern "C" __global__ void ref_hash(const unsigned *x, unsigned char *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = (unsigned char)((x[i] * 2654435761u) >> 24);
}
