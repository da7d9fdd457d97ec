/* Host-side data and correctness math; see check.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static const char *const dtype_names[KOPT_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i32",
							  "i64", "u32", "i8",	"u8"};
static const size_t dtype_sizes[KOPT_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 4, 1, 1};
static const char *const dist_names[KOPT_DIST_COUNT] = {"normal", "uniform", "uniform01",
							"constant", "arange"};

int kopt_dtype_parse(const char *name)
{
	for (int i = 0; i < KOPT_DTYPE_COUNT; i++)
		if (strcmp(name, dtype_names[i]) == 0)
			return i;
	return -1;
}

const char *kopt_dtype_name(enum kopt_dtype t)
{
	return (unsigned)t < KOPT_DTYPE_COUNT ? dtype_names[t] : "?";
}

size_t kopt_dtype_size(enum kopt_dtype t)
{
	return (unsigned)t < KOPT_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

int kopt_dtype_is_float(enum kopt_dtype t)
{
	return t == KOPT_F32 || t == KOPT_F16 || t == KOPT_BF16 || t == KOPT_F64;
}

int kopt_dist_parse(const char *name, double *value)
{
	if (strcmp(name, "zeros") == 0 || strcmp(name, "ones") == 0) {
		*value = name[0] == 'o' ? 1.0 : 0.0;
		return KOPT_DIST_CONSTANT;
	}
	for (int i = 0; i < KOPT_DIST_COUNT; i++)
		if (strcmp(name, dist_names[i]) == 0)
			return i;
	return -1;
}

const char *kopt_dist_name(enum kopt_dist d)
{
	return (unsigned)d < KOPT_DIST_COUNT ? dist_names[d] : "?";
}

enum kopt_dist kopt_dist_alternate(enum kopt_dist d)
{
	switch (d) {
	case KOPT_DIST_NORMAL:
		return KOPT_DIST_UNIFORM;
	case KOPT_DIST_UNIFORM:
	case KOPT_DIST_UNIFORM01:
		return KOPT_DIST_NORMAL;
	default:
		return d;
	}
}

/* --- fp16 / bf16 ------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t kopt_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return sign;
		man |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
		h++; /* may carry into the exponent, up to inf: correct */
	return (uint16_t)(sign | h);
}

float kopt_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0x1f)
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		if (man == 0)
			return bits_f32(sign);
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t kopt_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

float kopt_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/* --- typed access -------------------------------------------------------- */

double kopt_check_load(enum kopt_dtype t, const void *data, size_t i)
{
	const unsigned char *p = (const unsigned char *)data + i * dtype_sizes[t];
	switch (t) {
	case KOPT_F32: {
		float v;
		memcpy(&v, p, 4);
		return v;
	}
	case KOPT_F16: {
		uint16_t v;
		memcpy(&v, p, 2);
		return kopt_f16_to_f32(v);
	}
	case KOPT_BF16: {
		uint16_t v;
		memcpy(&v, p, 2);
		return kopt_bf16_to_f32(v);
	}
	case KOPT_F64: {
		double v;
		memcpy(&v, p, 8);
		return v;
	}
	case KOPT_I32: {
		int32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	case KOPT_I64: {
		int64_t v;
		memcpy(&v, p, 8);
		return (double)v;
	}
	case KOPT_U32: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	case KOPT_I8:
		return (double)(int8_t)*p;
	case KOPT_U8:
		return *p;
	default:
		return NAN;
	}
}

static double clampd(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void kopt_check_store(enum kopt_dtype t, void *data, size_t i, double v)
{
	unsigned char *p = (unsigned char *)data + i * dtype_sizes[t];
	switch (t) {
	case KOPT_F32: {
		float f = (float)v;
		memcpy(p, &f, 4);
		break;
	}
	case KOPT_F16: {
		uint16_t h = kopt_f32_to_f16((float)v);
		memcpy(p, &h, 2);
		break;
	}
	case KOPT_BF16: {
		uint16_t h = kopt_f32_to_bf16((float)v);
		memcpy(p, &h, 2);
		break;
	}
	case KOPT_F64:
		memcpy(p, &v, 8);
		break;
	case KOPT_I32: {
		int32_t x = (int32_t)clampd(nearbyint(v), -2147483648.0, 2147483647.0);
		memcpy(p, &x, 4);
		break;
	}
	case KOPT_I64: {
		int64_t x = (int64_t)clampd(nearbyint(v), -9.2e18, 9.2e18);
		memcpy(p, &x, 8);
		break;
	}
	case KOPT_U32: {
		uint32_t x = (uint32_t)clampd(nearbyint(v), 0.0, 4294967295.0);
		memcpy(p, &x, 4);
		break;
	}
	case KOPT_I8:
		*p = (unsigned char)(int8_t)clampd(nearbyint(v), -128.0, 127.0);
		break;
	case KOPT_U8:
		*p = (unsigned char)clampd(nearbyint(v), 0.0, 255.0);
		break;
	default:
		break;
	}
}

/* --- seeded generation --------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* [0,1) with 53 random bits */
static double unit(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

void kopt_check_fill(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
		     uint64_t seed, uint64_t stream)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dull ^ (stream + 1) * 0x9e3779b97f4a7c15ull;
	int is_float = kopt_dtype_is_float(t);
	int is_unsigned = t == KOPT_U32 || t == KOPT_U8;
	for (size_t i = 0; i < n; i++) {
		double v;
		switch (d) {
		case KOPT_DIST_NORMAL:
			if (i + 1 < n) {
				/* Box-Muller: one pair per two elements */
				double u1 = 1.0 - unit(&s), u2 = unit(&s);
				double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
				double scale = is_float ? 1.0 : 16.0;
				kopt_check_store(t, data, i, scale * r * cos(a));
				i++;
				v = scale * r * sin(a);
			} else {
				v = is_float ? 0.5 : 1.0;
			}
			break;
		case KOPT_DIST_UNIFORM:
			v = is_float ? 2.0 * unit(&s) - 1.0
				     : floor(unit(&s) * 129.0) - (is_unsigned ? 0.0 : 64.0);
			if (!is_float && is_unsigned)
				v = floor(v / 2.0);
			break;
		case KOPT_DIST_UNIFORM01:
			v = is_float ? unit(&s) : (double)(splitmix64(&s) & 1u);
			break;
		case KOPT_DIST_ARANGE:
			v = (double)i;
			if (t == KOPT_I8)
				v = (double)(int8_t)(uint8_t)i;
			else if (t == KOPT_U8)
				v = (double)(uint8_t)i;
			break;
		default:
			v = value;
			break;
		}
		kopt_check_store(t, data, i, v);
	}
}

/* --- poison ---------------------------------------------------------------- */

uint32_t kopt_check_poison_word(enum kopt_dtype t, uint64_t nonce)
{
	uint64_t s = nonce ^ 0x6b6f7074706f6973ull;
	uint32_t r = (uint32_t)splitmix64(&s);
	uint32_t sign = r & 0x80000000u;
	switch (t) {
	case KOPT_F32:
		return sign | 0x7fc00000u | (r & 0x3fffffu);
	case KOPT_F64:
		/* the word repeats, so both halves carry a NaN exponent */
		return sign | 0x7ff80000u | (r & 0x7ffffu);
	case KOPT_F16: {
		uint32_t h = (sign >> 16) | 0x7e00u | (r & 0x1ffu);
		return h | (h << 16);
	}
	case KOPT_BF16: {
		uint32_t h = (sign >> 16) | 0x7fc0u | (r & 0x3fu);
		return h | (h << 16);
	}
	default:
		return r;
	}
}

int kopt_check_is_poison(enum kopt_dtype t, const void *data, size_t i, uint32_t word)
{
	size_t size = dtype_sizes[t];
	const unsigned char *p = (const unsigned char *)data + i * size;
	/* buffers start 4-byte aligned, so element i sees these bytes of the word */
	unsigned char expect[8];
	for (size_t b = 0; b < size; b++) {
		size_t byte = (i * size + b) % 4;
		expect[b] = (unsigned char)(word >> (8 * byte));
	}
	return memcmp(p, expect, size) == 0;
}

/* --- comparison ----------------------------------------------------------- */

void kopt_check_compare(enum kopt_dtype t, const void *out, const void *ref, size_t n,
			uint32_t poison, int has_poison, struct kopt_check_result *res)
{
	memset(res, 0, sizeof *res);
	res->count = n;
	res->first_bad = n;
	double err2 = 0.0, ref2 = 0.0;
	for (size_t i = 0; i < n; i++) {
		double o = kopt_check_load(t, out, i), r = kopt_check_load(t, ref, i);
		int bad = 0;
		if (has_poison && kopt_check_is_poison(t, out, i, poison)) {
			res->unwritten++;
			bad = 1;
		}
		if (!isfinite(o)) {
			res->nonfinite++;
			bad = 1;
		}
		if (bad) {
			if (res->first_bad == n)
				res->first_bad = i;
			continue;
		}
		if (isfinite(r))
			ref2 += r * r;
		double e = fabs(o - r);
		if (!isfinite(e))
			e = INFINITY;
		if (e > res->max_abs)
			res->max_abs = e;
		err2 += e * e;
	}
	res->ref_norm = sqrt(ref2);
	res->rel_l2 = res->ref_norm > 0.0 ? sqrt(err2) / res->ref_norm : sqrt(err2);
}

double kopt_check_default_rel_l2(enum kopt_dtype t)
{
	switch (t) {
	case KOPT_F32:
		return 1e-5;
	case KOPT_F16:
		return 2e-3;
	case KOPT_BF16:
		return 1e-2;
	case KOPT_F64:
		return 1e-12;
	default:
		return 0.0;
	}
}

double kopt_check_tolerance_named(const char *precision)
{
	if (strcmp(precision, "tf32") == 0)
		return 5e-4;
	int t = kopt_dtype_parse(precision);
	return t >= 0 ? kopt_check_default_rel_l2((enum kopt_dtype)t) : -1.0;
}

int kopt_check_verdict(const struct kopt_check_result *res, double rel_l2_tol, double max_abs_tol,
		       const char *what, char *msg, size_t msglen)
{
	if (res->unwritten > 0) {
		snprintf(msg, msglen, "%s: %zu of %zu elements never written (first at %zu)", what,
			 res->unwritten, res->count, res->first_bad);
		return 1;
	}
	if (res->nonfinite > 0) {
		snprintf(msg, msglen, "%s: %zu NaN/Inf elements (first at %zu)", what, res->nonfinite,
			 res->first_bad);
		return 1;
	}
	if (!(res->rel_l2 <= rel_l2_tol)) {
		snprintf(msg, msglen, "%s: relative L2 error %.3g above tolerance %.3g (max abs %.3g)",
			 what, res->rel_l2, rel_l2_tol, res->max_abs);
		return 1;
	}
	if (max_abs_tol >= 0.0 && !(res->max_abs <= max_abs_tol)) {
		snprintf(msg, msglen, "%s: max abs error %.3g above tolerance %.3g", what, res->max_abs,
			 max_abs_tol);
		return 1;
	}
	if (msglen > 0)
		msg[0] = '\0';
	return 0;
}
