/* Regions of an output (verify.outputs.X.region, first): the box packed
 * on the host (kopt_check_gather), the copies that pack it on the device
 * (kopt_box_copies, compare_dev.c), and a box element's index in the whole
 * array. Declared in numerics.h. */
#include <string.h>

#include "worker/numerics.h"

size_t kopt_check_gather(size_t elem, const void *src, void *dst, int nd, const size_t *dims,
			 const size_t *lo, const size_t *hi)
{
	if (nd <= 0)
		return 0;
	for (int d = 0; d < nd; d++)
		if (lo[d] >= hi[d] || hi[d] > dims[d])
			return 0;
	/* the innermost run is contiguous: copy it whole, walk the outer indices */
	size_t idx[8] = {0}, run = (hi[nd - 1] - lo[nd - 1]) * elem, n = 0;
	for (int d = 0; d < nd - 1; d++)
		idx[d] = lo[d];
	for (;;) {
		size_t off = 0;
		for (int d = 0; d < nd - 1; d++)
			off = off * dims[d] + idx[d];
		off = off * dims[nd - 1] + lo[nd - 1];
		memcpy((char *)dst + n * elem, (const char *)src + off * elem, run);
		n += hi[nd - 1] - lo[nd - 1];
		int d = nd - 2;
		while (d >= 0 && ++idx[d] == hi[d]) {
			idx[d] = lo[d];
			d--;
		}
		if (d < 0)
			break;
	}
	return n;
}

size_t kopt_box_copies(size_t elem, int nd, const size_t *dims, const size_t *lo, const size_t *hi,
		       struct kopt_box_copy *out, size_t max)
{
	size_t dim[3], low[3], ext[3], copies = 1;
	for (int k = 0; k < 3; k++) { /* k = 0: innermost */
		int d = nd - 1 - k;
		dim[k] = d >= 0 ? dims[d] : 1;
		low[k] = d >= 0 ? lo[d] : 0;
		ext[k] = d >= 0 ? hi[d] - lo[d] : 1;
	}
	for (int d = 0; d < nd; d++) {
		if (hi[d] <= lo[d])
			return 0;
		if (d + 3 < nd)
			copies *= hi[d] - lo[d];
	}
	size_t slab = dim[0] * dim[1] * dim[2] * elem, packed = ext[0] * ext[1] * ext[2] * elem;
	size_t first = (low[2] * dim[1] * dim[0] + low[1] * dim[0] + low[0]) * elem;
	size_t idx[8], outer = nd > 3 ? (size_t)(nd - 3) : 0;
	for (size_t d = 0; d < outer; d++)
		idx[d] = lo[d];
	for (size_t k = 0; k < copies && k < max; k++) {
		size_t off = 0;
		for (size_t d = 0; d < outer; d++)
			off = off * dims[d] + idx[d];
		out[k] = (struct kopt_box_copy){off * slab + first, k * packed, dim[0] * elem, dim[1],
						 ext[0] * elem,	       ext[1],	   ext[2]};
		for (size_t d = outer; d > 0; d--) { /* the odometer, innermost outer dim first */
			if (++idx[d - 1] < hi[d - 1])
				break;
			idx[d - 1] = lo[d - 1];
		}
	}
	return copies;
}

size_t kopt_check_region_index(int nd, const size_t *dims, const size_t *lo, const size_t *hi,
			       size_t k)
{
	size_t box = 1, whole = 1;
	for (int d = 0; d < nd; d++) {
		box *= hi[d] - lo[d];
		whole *= dims[d];
	}
	if (nd <= 0 || k >= box)
		return whole;
	size_t off = 0, stride = 1;
	for (int d = nd - 1; d >= 0; d--) {
		size_t ext = hi[d] - lo[d];
		off += (lo[d] + k % ext) * stride;
		k /= ext;
		stride *= dims[d];
	}
	return off;
}
