/* Results as bytes and the on-disk CUBIN cache; see kopt_nvrtc.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/kopt_nvrtc.h"
#include "sha256.h"
#include "sys.h"

#ifndef KOPT_VERSION
#define KOPT_VERSION "dev"
#endif

static const char magic[8] = {'K', 'O', 'P', 'T', 'R', 'E', 'S', '1'};
#define NUMBERS 8

static void hash_field(struct kopt_sha256 *h, const char *s)
{
	unsigned char len[8];
	uint64_t n = s ? strlen(s) : UINT64_MAX;
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(n >> (8 * i));
	kopt_sha256_update(h, len, sizeof len);
	if (s)
		kopt_sha256_update(h, s, strlen(s));
}

void kopt_nvrtc_cache_key(const struct kopt_nvrtc_job *job, char hex[65])
{
	struct kopt_sha256 h;
	kopt_sha256_init(&h);
	int major, minor;
	kopt_nvrtc_version(&major, &minor);
	char ver[64];
	snprintf(ver, sizeof ver, "kopt-cubin-3 kopt %s nvrtc %d.%d", KOPT_VERSION, major, minor);
	hash_field(&h, ver);
	hash_field(&h, job->arch);
	hash_field(&h, job->entry);
	hash_field(&h, job->name);
	char count[32];
	snprintf(count, sizeof count, "%zu", job->n_options);
	hash_field(&h, count);
	for (size_t i = 0; i < job->n_options; i++)
		hash_field(&h, job->options[i]);
	hash_field(&h, job->salt);
	hash_field(&h, job->source);
	unsigned char d[32];
	kopt_sha256_final(&h, d);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static unsigned char *put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (unsigned char)(v >> (8 * i));
	return p;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* NULL strings travel as UINT64_MAX lengths. */
static unsigned char *put_bytes(unsigned char *p, const void *s, uint64_t n, int present)
{
	p = put_u64(p, present ? n : UINT64_MAX);
	if (present && n) {
		memcpy(p, s, n);
		p += n;
	}
	return p;
}

unsigned char *kopt_nvrtc_result_pack(const struct kopt_nvrtc_result *res, size_t *size)
{
	size_t log_len = res->log ? strlen(res->log) : 0;
	size_t low_len = res->lowered ? strlen(res->lowered) : 0;
	size_t n = sizeof magic + 8 + NUMBERS * 8 + 8 + 3 * 8 + log_len + low_len + res->cubin_size;
	unsigned char *buf = malloc(n), *p = buf;
	if (buf == NULL)
		return NULL;
	memcpy(p, magic, sizeof magic);
	p = put_u64(p + sizeof magic, (uint64_t)res->ok);
	long nums[NUMBERS] = {res->regs,	res->barriers,	   res->smem_static,
			      res->local_bytes, res->spill_stores, res->spill_loads,
			      res->const_bytes, res->max_threads};
	for (int i = 0; i < NUMBERS; i++)
		p = put_u64(p, (uint64_t)(int64_t)nums[i]);
	uint64_t bits;
	memcpy(&bits, &res->compile_s, sizeof bits);
	p = put_u64(p, bits);
	p = put_bytes(p, res->log, log_len, res->log != NULL);
	p = put_bytes(p, res->lowered, low_len, res->lowered != NULL);
	p = put_bytes(p, res->cubin, res->cubin_size, res->cubin != NULL);
	*size = (size_t)(p - buf);
	return buf;
}

/* Reads a length-prefixed field into a fresh NUL-terminated copy. */
static int get_bytes(const unsigned char **p, const unsigned char *end, unsigned char **out,
		     size_t *len)
{
	*out = NULL;
	if (end - *p < 8)
		return -1;
	uint64_t n = get_u64(*p);
	*p += 8;
	if (n == UINT64_MAX)
		return 0;
	if ((uint64_t)(end - *p) < n)
		return -1;
	*out = malloc((size_t)n + 1);
	if (*out == NULL)
		return -1;
	memcpy(*out, *p, (size_t)n);
	(*out)[n] = '\0';
	*p += n;
	if (len)
		*len = (size_t)n;
	return 0;
}

int kopt_nvrtc_result_unpack(const unsigned char *buf, size_t size, struct kopt_nvrtc_result *res)
{
	kopt_nvrtc_result_init(res);
	const unsigned char *p = buf, *end = buf + size;
	if (size < sizeof magic + 8 * (NUMBERS + 2) || memcmp(buf, magic, sizeof magic) != 0)
		return -1;
	p += sizeof magic;
	res->ok = get_u64(p) != 0;
	p += 8;
	long *nums[NUMBERS] = {&res->regs,	  &res->barriers,     &res->smem_static,
			       &res->local_bytes, &res->spill_stores, &res->spill_loads,
			       &res->const_bytes, &res->max_threads};
	for (int i = 0; i < NUMBERS; i++, p += 8)
		*nums[i] = (long)(int64_t)get_u64(p);
	uint64_t bits = get_u64(p);
	memcpy(&res->compile_s, &bits, sizeof bits);
	p += 8;
	/* through locals of the right type: writing a char * via an
	 * unsigned char ** breaks strict aliasing, and -O3 then reads the old
	 * (NULL) log back */
	unsigned char *log = NULL, *lowered = NULL;
	int bad = get_bytes(&p, end, &log, NULL) != 0 || get_bytes(&p, end, &lowered, NULL) != 0 ||
		  get_bytes(&p, end, &res->cubin, &res->cubin_size) != 0 || p != end;
	res->log = (char *)log;
	res->lowered = (char *)lowered;
	if (bad) {
		kopt_nvrtc_result_release(res);
		return -1;
	}
	if (res->log == NULL && (res->log = strdup("")) == NULL) {
		kopt_nvrtc_result_release(res);
		return -1;
	}
	return 0;
}

static int entry_path(char *buf, size_t n, const char *dir, const char *key, const char *suffix)
{
	if (strlen(key) != 64 || strspn(key, "0123456789abcdef") != 64)
		return -1;
	return snprintf(buf, n, "%s/%.2s/%s%s", dir, key, key, suffix) < (int)n ? 0 : -1;
}

int kopt_nvrtc_cache_load(const char *dir, const char *key, struct kopt_nvrtc_result *res)
{
	kopt_nvrtc_result_init(res);
	char path[4096];
	if (entry_path(path, sizeof path, dir, key, ".kc") != 0)
		return 0;
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return 0;
	int hit = 0;
	unsigned char *buf = NULL;
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || st.st_size <= 0)
		goto out;
	buf = malloc((size_t)st.st_size);
	if (buf == NULL || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		goto out;
	hit = kopt_nvrtc_result_unpack(buf, (size_t)st.st_size, res) == 0;
out:
	free(buf);
	fclose(f);
	return hit;
}

int kopt_nvrtc_cache_store(const char *dir, const char *key, const struct kopt_nvrtc_result *res,
			   char *err, size_t errlen)
{
	char path[4096], tmp[4200], sub[4096];
	if (entry_path(path, sizeof path, dir, key, ".kc") != 0) {
		snprintf(err, errlen, "bad cache key or directory too long");
		return -1;
	}
	snprintf(sub, sizeof sub, "%s/%.2s", dir, key);
	if (kopt_sys_mkdir_p(sub, err, errlen) != 0)
		return -1;
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	size_t size;
	unsigned char *buf = kopt_nvrtc_result_pack(res, &size);
	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = -1;
	FILE *f = fopen(tmp, "wb");
	if (f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	int bad = fwrite(buf, 1, size, f) != size;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

int kopt_nvrtc_compile_cached(const struct kopt_nvrtc_job *job, const char *dir,
			      struct kopt_nvrtc_result *res, int *cached, char *err, size_t errlen)
{
	*cached = 0;
	char key[65];
	if (dir != NULL) {
		kopt_nvrtc_cache_key(job, key);
		if (kopt_nvrtc_cache_load(dir, key, res)) {
			*cached = 1;
			return 0;
		}
	}
	if (kopt_nvrtc_compile(job, res, err, errlen) != 0)
		return -1;
	char ignored[256];
	if (dir != NULL)
		kopt_nvrtc_cache_store(dir, key, res, ignored, sizeof ignored);
	return 0;
}
