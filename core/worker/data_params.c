/* The worker's kernel parameters (part of data.c's module, data.h): constant
 * symbols filled from the input set, scalars by value, arrays by the buffer
 * the launch uses, and tensor maps encoded over those buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"

/* Copies the set's constant-memory arguments into the module's symbols. */
int kopt_worker_fill_constants(struct worker *w, CUmodule mod, const struct inputset *s)
{
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_CONSTANT)
			continue;
		CUdeviceptr p;
		size_t size = 0, bytes = a->count * kopt_dtype_size(a->type);
		CUresult r = kopt_cu.cuModuleGetGlobal(&p, &size, mod, a->name);
		if (r != CUDA_SUCCESS) {
			snprintf(w->log, sizeof w->log,
				 "constant symbol '%s' not found in the module", a->name);
			return -1;
		}
		if (size < bytes) {
			snprintf(w->log, sizeof w->log,
				 "constant symbol '%s' holds %zu bytes, the spec gives %zu",
				 a->name, size, bytes);
			return -1;
		}
		if (kopt_worker_cu_check(kopt_worker_upload(w, p, s->host[i], bytes),
					 "cuMemcpyHtoD (constant)", w->log, sizeof w->log))
			return -1;
	}
	return 0;
}

static CUtensorMapDataType tmap_type(enum kopt_dtype t)
{
	switch (t) {
	case KOPT_F16:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
	case KOPT_BF16:
		return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	case KOPT_F64:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
	case KOPT_I32:
		return CU_TENSOR_MAP_DATA_TYPE_INT32;
	case KOPT_I64:
		return CU_TENSOR_MAP_DATA_TYPE_INT64;
	case KOPT_U32:
		return CU_TENSOR_MAP_DATA_TYPE_UINT32;
	case KOPT_I16:
	case KOPT_U16:
		return CU_TENSOR_MAP_DATA_TYPE_UINT16;
	case KOPT_U64:
		return CU_TENSOR_MAP_DATA_TYPE_UINT64;
	case KOPT_I8:
	case KOPT_U8:
		return CU_TENSOR_MAP_DATA_TYPE_UINT8;
	default:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	}
}

/* A tensor map over the buffer this launch gives tensor map a's array (the
 * set's input, the timing copy, or the candidate's or reference's output),
 * dense row-major, with a's box and swizzle; out-of-range boxes read zeros. */
static int encode_tmap(struct worker *w, const struct inputset *s, const struct warg *a,
		       int for_reference, unsigned char *out)
{
	const struct warg *arr = &w->args[a->tmap_of];
	if (arr->kind != ARG_ARRAY || kopt_dtype_size(arr->type) == 0) {
		snprintf(w->log, sizeof w->log, "tensor map '%s': argument %d is not an array", a->name,
			 a->tmap_of + 1);
		return -1;
	}
	CUdeviceptr base = !arr->output ? s->dev[a->tmap_of]
			   : for_reference ? w->ref_dev[a->tmap_of]
					   : w->out_dev[a->tmap_of];
	size_t esz = kopt_dtype_size(arr->type), total = 1;
	cuuint64_t strides[4];
	cuuint32_t ones[5] = {1, 1, 1, 1, 1};
	for (int k = 0; k < a->tmap_rank; k++) {
		if (k > 0)
			strides[k - 1] = (cuuint64_t)(total * esz);
		total *= a->tmap_dims[k];
	}
	if (total != arr->count) {
		snprintf(w->log, sizeof w->log,
			 "tensor map '%s': its dims hold %zu elements, '%s' has %zu", a->name, total,
			 arr->name, arr->count);
		return -1;
	}
	CUtensorMapSwizzle sw = a->tmap_swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
				: a->tmap_swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
				: a->tmap_swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
							: CU_TENSOR_MAP_SWIZZLE_NONE;
	CUtensorMap map __attribute__((aligned(64)));
	CUresult r = kopt_cu.cuTensorMapEncodeTiled(
	    &map, tmap_type(arr->type), (cuuint32_t)a->tmap_rank, (void *)(uintptr_t)base,
	    (const cuuint64_t *)a->tmap_dims, strides, a->tmap_box, ones,
	    CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		char buf[256];
		snprintf(w->log, sizeof w->log,
			 "tensor map '%s' (box %u x %u, swizzle %d): cuTensorMapEncodeTiled: %s",
			 a->name, a->tmap_box[a->tmap_rank > 1 ? 1 : 0], a->tmap_box[0],
			 a->tmap_swizzle, kopt_cuda_strerror(r, buf, sizeof buf));
		return -1;
	}
	memcpy(out, &map, sizeof map);
	return 0;
}

int kopt_worker_build_params(struct worker *w, const struct inputset *s, struct wparams *p,
			     int for_reference)
{
	p->slots = calloc((size_t)w->nargs, sizeof *p->slots);
	p->ptrs = calloc((size_t)w->nargs + 1, sizeof *p->ptrs);
	if (!p->slots || !p->ptrs) {
		snprintf(w->log, sizeof w->log, "out of host memory for the kernel parameters");
		return -1;
	}
	int k = 0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		union wslot *sl = &p->slots[k];
		if (a->kind == ARG_CONSTANT || !a->param)
			continue;
		if (a->kind == ARG_ARRAY) {
			sl->p = !a->output     ? s->dev[i]
				: for_reference ? w->ref_dev[i]
						: w->out_dev[i];
		} else if (a->kind == ARG_TMAP) {
			if (encode_tmap(w, s, a, for_reference, sl->tmap) != 0)
				return 1;
		} else {
			switch (a->type) {
			case KOPT_F32:
				sl->f = (float)a->value;
				break;
			case KOPT_F64:
				sl->d = a->value;
				break;
			case KOPT_F16:
				sl->h = kopt_f32_to_f16((float)a->value);
				break;
			case KOPT_BF16:
				sl->h = kopt_f32_to_bf16((float)a->value);
				break;
			case KOPT_I64:
				sl->i64 = a->ivalue;
				break;
			case KOPT_U32:
				sl->u32 = (uint32_t)a->ivalue;
				break;
			case KOPT_I8:
				sl->i8 = (int8_t)a->ivalue;
				break;
			case KOPT_U8:
				sl->u8 = (uint8_t)a->ivalue;
				break;
			case KOPT_I16:
				sl->i16 = (int16_t)a->ivalue;
				break;
			case KOPT_U16:
				sl->h = (uint16_t)a->ivalue;
				break;
			case KOPT_U64: /* (the same 8 bytes) */
				sl->i64 = a->ivalue;
				break;
			default:
				sl->i32 = (int32_t)a->ivalue;
				break;
			}
		}
		p->ptrs[k] = sl;
		k++;
	}
	return 0;
}

int kopt_worker_build_params_sel(struct worker *w, const struct inputset *s, struct wparams *p,
				 int for_reference, const char *sel)
{
	int rc = kopt_worker_build_params(w, s, p, for_reference);
	if (rc != 0 || sel == NULL || sel[0] == '\0')
		return rc;
	/* p's slots follow the parameters in the argument list's order */
	int slot_of[256], k = 0;
	for (int i = 0; i < w->nargs && i < 256; i++)
		slot_of[i] = w->args[i].kind != ARG_CONSTANT && w->args[i].param ? k++ : -1;
	size_t order[256];
	int n = kopt_worker_parse_sizes(sel, order, 256);
	if (n <= 0) {
		snprintf(w->log, sizeof w->log,
			 "arguments '%.200s': not a list of argument numbers (\"2,1,4\")", sel);
		return -1;
	}
	void **ptrs = calloc((size_t)n + 1, sizeof *ptrs);
	if (ptrs == NULL) {
		snprintf(w->log, sizeof w->log, "out of host memory for the kernel parameters");
		return -1;
	}
	for (int o = 0; o < n; o++) {
		size_t i = order[o];
		if (i < 1 || i > (size_t)w->nargs || i > 256 || slot_of[i - 1] < 0) {
			snprintf(w->log, sizeof w->log,
				 "arguments '%.200s': %zu is not a kernel parameter (1 to %d, not "
				 "constants nor param = false)",
				 sel, i, w->nargs);
			free(ptrs);
			return -1;
		}
		ptrs[o] = &p->slots[slot_of[i - 1]];
	}
	free(p->ptrs);
	p->ptrs = ptrs;
	return 0;
}

void kopt_worker_free_params(struct wparams *p)
{
	free(p->slots);
	free(p->ptrs);
}
