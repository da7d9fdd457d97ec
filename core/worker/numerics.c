/* Host-side data and correctness math; see check.h. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "worker/numerics.h"

static const char *const dtype_names[KOPT_DTYPE_COUNT] = {
    "f32", "f16", "bf16", "f64", "i32", "i64", "u32", "i8", "u8", "i16", "u16", "u64"};
static const size_t dtype_sizes[KOPT_DTYPE_COUNT] = {4, 2, 2, 8, 4, 8, 4, 1, 1, 2, 2, 8};
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

enum kopt_dist kopt_dist_alternate(enum kopt_dist d, enum kopt_dtype t, int fixed)
{
	switch (d) {
	case KOPT_DIST_NORMAL:
		return KOPT_DIST_UNIFORM;
	case KOPT_DIST_UNIFORM:
	case KOPT_DIST_UNIFORM01:
		return KOPT_DIST_NORMAL;
	case KOPT_DIST_CONSTANT:
		return kopt_dtype_is_float(t) && !fixed ? KOPT_DIST_NEAR : d;
	case KOPT_DIST_ARANGE:
		return kopt_dtype_is_float(t) && !fixed ? KOPT_DIST_NEAR_ARANGE : d;
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
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1u),
			 half = 1u << (shift - 1);
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
	case KOPT_I16: {
		int16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	case KOPT_U16: {
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	case KOPT_U64: {
		uint64_t v;
		memcpy(&v, p, 8);
		return (double)v;
	}
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
	case KOPT_I16: {
		int16_t x = (int16_t)clampd(nearbyint(v), -32768.0, 32767.0);
		memcpy(p, &x, 2);
		break;
	}
	case KOPT_U16: {
		uint16_t x = (uint16_t)clampd(nearbyint(v), 0.0, 65535.0);
		memcpy(p, &x, 2);
		break;
	}
	case KOPT_U64: {
		uint64_t x = (uint64_t)clampd(nearbyint(v), 0.0, 1.8e19);
		memcpy(p, &x, 8);
		break;
	}
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

/* The k-th output of splitmix64 started at s0: the generator is a counter,
 * so any range of a stream can be produced independently (and in parallel)
 * with the same numbers. */
static uint64_t mix_at(uint64_t s0, uint64_t k)
{
	uint64_t s = s0 + k * 0x9e3779b97f4a7c15ull;
	return splitmix64(&s);
}

/* [0,1) with 53 random bits */
static double unit_at(uint64_t s0, uint64_t k)
{
	return (double)(mix_at(s0, k) >> 11) * 0x1.0p-53;
}

struct fill_part {
	enum kopt_dtype t;
	void *data;
	size_t begin, end; /* begin is even */
	enum kopt_dist d;
	double value;
	double scale; /* draws times this (kopt_check_fill_sparse) */
	uint64_t s0;
	size_t forced; /* KOPT_DIST_NEAR: an element always moved; scaled, with `every` */
	uint64_t every; /* 0: scale every element; else see scale_at */
};

/* KOPT_DIST_NEAR: one element in NEAR_EVERY (and always `forced`) moves off
 * the constant c, to c(1 +- [0.5, 1)) or +-[0.5, 1) for c = 0. A sparse
 * change is what catches a kernel that samples the input to decide it is
 * constant: it must hit a moved element to notice (32 samples: 1.6 %
 * chance), while the moved ones still shift the output by about
 * sqrt(1/NEAR_EVERY) * 0.75 relative (1.7e-2, above every dtype's default
 * tolerance), so a kernel that never reads the input fails too. */
#define NEAR_EVERY 2048u

static double near_value(const struct fill_part *p, size_t i, double c)
{
	uint64_t r = mix_at(p->s0, i);
	if (i != p->forced && r % NEAR_EVERY != 0)
		return c;
	/* the low 11 bits chose the element: size and sign come from the rest */
	double m = 0.5 + 0.5 * (double)(r >> 12) * 0x1.0p-52;
	m = (r >> 11) & 1 ? m : -m;
	if (c == 0.0)
		return m;
	/* toward zero where away would pass the type's largest finite value */
	double largest = p->t == KOPT_F16 ? 65504.0 : p->t == KOPT_BF16 ? 3.38e38 : p->t == KOPT_F32 ? 3.4e38 : 1.7e308;
	if (fabs(c * (1.0 + fabs(m))) > largest)
		m = -fabs(m);
	return c * (1.0 + m);
}

/* Which elements the scale multiplies (the range probe's passes): every one
 * (every = 0), one in `every` by a hash of the index and the element
 * `forced` (the sparse pass), or `forced` alone (every = UINT64_MAX). A
 * kernel that samples a few inputs to decide whether they are all small
 * (and a shortcut safe) sees the whole-array pass's large values at once;
 * here it must hit one of the few, or the one, while the output still
 * depends on them (the per-element bound sees a single element off). */
static double scale_at(const struct fill_part *p, size_t i)
{
	if (p->every == 0 || i == p->forced)
		return p->scale;
	if (p->every == UINT64_MAX)
		return 1.0;
	return mix_at(p->s0 ^ 0x7370617273656ull, i) % p->every == 0 ? p->scale : 1.0;
}

static void *fill_range(void *arg)
{
	const struct fill_part *p = arg;
	enum kopt_dtype t = p->t;
	int is_float = kopt_dtype_is_float(t);
	int is_unsigned = t == KOPT_U32 || t == KOPT_U8 || t == KOPT_U16 || t == KOPT_U64;
	for (size_t i = p->begin; i < p->end; i++) {
		double v;
		switch (p->d) {
		case KOPT_DIST_NORMAL: {
			/* Box-Muller: element pair (i, i+1) from draws i and i+1 */
			double u1 = 1.0 - unit_at(p->s0, i), u2 = unit_at(p->s0, i + 1);
			double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
			double unit = is_float ? 1.0 : 16.0;
			if (i + 1 < p->end)
				kopt_check_store(t, p->data, i + 1, unit * scale_at(p, i + 1) * r * sin(a));
			v = unit * scale_at(p, i) * r * cos(a);
			kopt_check_store(t, p->data, i, v);
			i++;
			continue;
		}
		case KOPT_DIST_UNIFORM:
			v = unit_at(p->s0, i);
			/* (integers: [-64, 64], [0, 64] unsigned; the range probe
			 * widens them by its scale, the type's range clamping) */
			v = is_float	  ? scale_at(p, i) * (2.0 * v - 1.0)
			    : is_unsigned ? floor(v * (64.0 * scale_at(p, i) + 1.0))
					  : floor(v * (128.0 * scale_at(p, i) + 1.0)) - 64.0 * scale_at(p, i);
			break;
		case KOPT_DIST_UNIFORM01:
			v = is_float ? scale_at(p, i) * unit_at(p->s0, i)
				     : scale_at(p, i) * (double)(mix_at(p->s0, i) & 1u);
			break;
		case KOPT_DIST_NEAR:
			v = near_value(p, i, p->value);
			break;
		case KOPT_DIST_NEAR_ARANGE:
			v = near_value(p, i, (double)i);
			break;
		case KOPT_DIST_ARANGE:
			v = (double)i;
			if (t == KOPT_I8)
				v = (double)(int8_t)(uint8_t)i;
			else if (t == KOPT_U8)
				v = (double)(uint8_t)i;
			else if (t == KOPT_I16)
				v = (double)(int16_t)(uint16_t)i;
			else if (t == KOPT_U16)
				v = (double)(uint16_t)i;
			break;
		default:
			v = p->value;
			break;
		}
		kopt_check_store(t, p->data, i, v);
	}
	return NULL;
}

#define THREADS_MAX 16
#define CHUNK_MIN (1u << 20)

static size_t thread_count(size_t n)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t parts = n / CHUNK_MIN;
	if (parts > THREADS_MAX)
		parts = THREADS_MAX;
	if (cpus > 0 && parts > (size_t)cpus)
		parts = (size_t)cpus;
	return parts < 1 ? 1 : parts;
}

void kopt_check_fill(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
		     uint64_t seed, uint64_t stream)
{
	kopt_check_fill_scaled(t, data, n, d, value, 1.0, seed, stream);
}

void kopt_check_fill_scaled(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
			    double scale, uint64_t seed, uint64_t stream)
{
	kopt_check_fill_sparse(t, data, n, d, value, scale, 0, seed, stream);
}

void kopt_check_fill_sparse(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
			    double scale, uint64_t every, uint64_t seed, uint64_t stream)
{
	uint64_t s0 = seed * 0x2545f4914f6cdd1dull ^ (stream + 1) * 0x9e3779b97f4a7c15ull;
	size_t forced = n ? (size_t)(mix_at(s0 ^ 0x6e656172ull, 0) % n) : 0;
	size_t parts = thread_count(n);
	struct fill_part part[THREADS_MAX];
	pthread_t tid[THREADS_MAX];
	int started[THREADS_MAX] = {0};
	for (size_t k = 0; k < parts; k++) {
		size_t begin = (n * k / parts) & ~(size_t)1,
		       end = (n * (k + 1) / parts) & ~(size_t)1;
		if (k + 1 == parts)
			end = n;
		part[k] = (struct fill_part){t, data, begin, end, d, value, scale, s0, forced, every};
		if (k > 0)
			started[k] = pthread_create(&tid[k], NULL, fill_range, &part[k]) == 0;
	}
	fill_range(&part[0]);
	for (size_t k = 1; k < parts; k++) {
		if (started[k])
			pthread_join(tid[k], NULL);
		else
			fill_range(&part[k]);
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

struct compare_part {
	enum kopt_dtype t;
	const void *out, *ref;
	size_t begin, end;
	uint32_t poison;
	int has_poison;
	size_t nonfinite, unwritten, first_bad;
	double max_abs, err2, ref2;
	size_t worst;		 /* where max_abs was seen */
	double worst_o, worst_r; /* the values there */
};

static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static float f16_table[65536];

static void f16_table_init(void)
{
	for (uint32_t h = 0; h < 65536; h++)
		f16_table[h] = kopt_f16_to_f32((uint16_t)h);
}

/* One element's contribution; `left` says whether it still holds the poison. */
#define COMPARE_ONE(o, r, left)                                                                    \
	do {                                                                                       \
		int bad_ = 0;                                                                      \
		if (left) {                                                                        \
			p->unwritten++;                                                            \
			bad_ = 1;                                                                  \
		}                                                                                  \
		if (!isfinite(o)) {                                                                \
			p->nonfinite++;                                                            \
			bad_ = 1;                                                                  \
		}                                                                                  \
		if (bad_) {                                                                        \
			if (p->first_bad == (size_t)-1)                                            \
				p->first_bad = i;                                                  \
		} else {                                                                           \
			if (isfinite(r))                                                           \
				p->ref2 += (r) * (r);                                              \
			double e_ = fabs((o) - (r));                                               \
			if (!isfinite(e_))                                                         \
				e_ = INFINITY;                                                     \
			if (e_ > p->max_abs) {                                                     \
				p->max_abs = e_;                                                   \
				p->worst = i;                                                      \
				p->worst_o = (o);                                                  \
				p->worst_r = (r);                                                  \
			}                                                                          \
			p->err2 += e_ * e_;                                                        \
		}                                                                                  \
	} while (0)

/* Two different 64-bit integers above 2^53 can read as the same double;
 * the output's value is then moved one step of the double away from the
 * reference's, on the side the integers differ, so the error is not 0 (an
 * exact tolerance fails it; a loose one sees about the true difference). */
static double apart(enum kopt_dtype t, const unsigned char *o, const unsigned char *r, double rv)
{
	int above;
	if (t == KOPT_U64) {
		uint64_t a, b;
		memcpy(&a, o, 8);
		memcpy(&b, r, 8);
		above = a > b;
	} else {
		int64_t a, b;
		memcpy(&a, o, 8);
		memcpy(&b, r, 8);
		above = a > b;
	}
	return nextafter(rv, above ? INFINITY : -INFINITY);
}

static void *compare_range(void *arg)
{
	struct compare_part *p = arg;
	if (p->t == KOPT_F32) {
		const uint32_t *o32 = p->out;
		const float *of = p->out, *rf = p->ref;
		for (size_t i = p->begin; i < p->end; i++) {
			double o = of[i], r = rf[i];
			COMPARE_ONE(o, r, p->has_poison && o32[i] == p->poison);
		}
		return NULL;
	}
	if (p->t == KOPT_F16 || p->t == KOPT_BF16) {
		/* both halves of a 16-bit poison word are the same pattern */
		const uint16_t *o16 = p->out, *r16 = p->ref;
		uint16_t pw = (uint16_t)p->poison;
		int half = p->t == KOPT_F16;
		if (half)
			pthread_once(&f16_once, f16_table_init);
		for (size_t i = p->begin; i < p->end; i++) {
			double o = half ? f16_table[o16[i]] : kopt_bf16_to_f32(o16[i]);
			double r = half ? f16_table[r16[i]] : kopt_bf16_to_f32(r16[i]);
			COMPARE_ONE(o, r, p->has_poison && o16[i] == pw);
		}
		return NULL;
	}
	/* An integer's poison is a pattern that an honest value can take (one
	 * in 256 for a byte): an element holding it counts as unwritten only
	 * where the reference's differs, since one equal to the reference's is
	 * right whether the kernel wrote it or not. (A reference checked
	 * against itself therefore never shows unwritten integers: a broken one
	 * shows as every candidate wrong.) */
	size_t es = dtype_sizes[p->t];
	const unsigned char *ob = p->out, *rb = p->ref;
	for (size_t i = p->begin; i < p->end; i++) {
		double o = kopt_check_load(p->t, p->out, i), r = kopt_check_load(p->t, p->ref, i);
		if (o == r && (p->t == KOPT_I64 || p->t == KOPT_U64) &&
		    memcmp(ob + i * es, rb + i * es, es) != 0)
			o = apart(p->t, ob + i * es, rb + i * es, r);
		COMPARE_ONE(o, r,
			    p->has_poison && kopt_check_is_poison(p->t, p->out, i, p->poison) &&
				memcmp(ob + i * es, rb + i * es, es) != 0);
	}
	return NULL;
}

/* Large outputs are compared on several threads (the worker sits idle on the
 * GPU meanwhile); the partial sums are merged in a fixed order, so the result
 * does not depend on scheduling. */
void kopt_check_compare(enum kopt_dtype t, const void *out, const void *ref, size_t n,
			uint32_t poison, int has_poison, struct kopt_check_result *res)
{
	memset(res, 0, sizeof *res);
	res->count = n;
	res->first_bad = n;
	size_t parts = thread_count(n);
	struct compare_part part[THREADS_MAX];
	pthread_t tid[THREADS_MAX];
	int started[THREADS_MAX] = {0};
	for (size_t k = 0; k < parts; k++) {
		part[k] = (struct compare_part){t,
						out,
						ref,
						n * k / parts,
						n * (k + 1) / parts,
						poison,
						has_poison,
						0,
						0,
						(size_t)-1,
						0.0,
						0.0,
						0.0,
						0,
						0.0,
						0.0};
		if (k > 0)
			started[k] = pthread_create(&tid[k], NULL, compare_range, &part[k]) == 0;
	}
	compare_range(&part[0]);
	double err2 = 0.0, ref2 = 0.0;
	for (size_t k = 0; k < parts; k++) {
		if (k > 0) {
			if (started[k])
				pthread_join(tid[k], NULL);
			else
				compare_range(&part[k]);
		}
		res->nonfinite += part[k].nonfinite;
		res->unwritten += part[k].unwritten;
		if (part[k].first_bad != (size_t)-1 && res->first_bad == n)
			res->first_bad = part[k].first_bad;
		if (part[k].max_abs > res->max_abs) {
			res->max_abs = part[k].max_abs;
			res->worst_at = part[k].worst;
			res->worst_got = part[k].worst_o;
			res->worst_want = part[k].worst_r;
		}
		err2 += part[k].err2;
		ref2 += part[k].ref2;
	}
	res->ref_norm = sqrt(ref2);
	res->rel_l2 = res->ref_norm > 0.0 ? sqrt(err2) / res->ref_norm : sqrt(err2);
	if ((t == KOPT_I64 || t == KOPT_U64) && res->max_abs > 0.0 && res->worst_at < n) {
		res->worst_int = t == KOPT_I64 ? 1 : 2;
		memcpy(&res->worst_got_bits, (const unsigned char *)out + 8 * res->worst_at, 8);
		memcpy(&res->worst_want_bits, (const unsigned char *)ref + 8 * res->worst_at, 8);
	}
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

size_t kopt_check_stale(enum kopt_dtype t, const void *out, const void *ref, const void *init,
			size_t n, size_t *first)
{
	size_t es = kopt_dtype_size(t), stale = 0;
	const char *o = out, *r = ref, *in = init;
	*first = n;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(r + i * es, in + i * es, es) == 0 || memcmp(o + i * es, in + i * es, es) != 0)
			continue;
		if (stale++ == 0)
			*first = i;
	}
	return stale;
}
