/* The Lua state's memory ceiling (memlimit.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memlimit.h"
#include "pool.h"

void *kopt_memlimit_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct kopt_memlimit *m = ud;
	size_t old = ptr != NULL ? osize : 0; /* without ptr, osize is a type tag */
	if (nsize > old && m->limit != 0) {
		/* Lua answers a refusal with a full collection and the same
		 * request again, and a refused retry either raises the error or,
		 * for a request Lua can do without (growing the string table),
		 * is dropped. A strategy whose live data grows at the limit while
		 * it makes strings had that string-table growth refused, with a
		 * full collection, at every new string, each small request still
		 * fitting: kopt spun for minutes instead of raising the error.
		 * So refused retries are counted, and after STRIKES of them with
		 * no room won back every request must leave a sixteenth of the
		 * limit free, which ends such a spin with the error; the squeeze
		 * lifts once it refused a retry (the error's handler needs
		 * memory) or there is room again. */
		int retry = m->refused && m->refused_ptr == ptr && m->refused_osize == osize &&
			    m->refused_nsize == nsize;
		size_t margin = m->limit - m->limit / 16;
		size_t ceiling = retry || m->squeeze ? margin : m->limit;
		m->refused = 0;
		if (m->used + (nsize - old) > ceiling) {
			m->hit = 1;
			if (!retry) {
				m->refused = 1;
				m->refused_ptr = ptr;
				m->refused_osize = osize;
				m->refused_nsize = nsize;
			} else if (m->squeeze) {
				m->squeeze = 0;
			} else if (++m->strikes >= KOPT_MEMLIMIT_STRIKES) {
				m->squeeze = 1;
				m->strikes = 0;
			}
			return NULL;
		}
		if (m->used + (nsize - old) <= margin)
			m->strikes = 0;
	}
	void *p = kopt_pool_realloc(m->pool, ptr, osize, nsize);
	if (p != NULL || nsize == 0)
		m->used = m->used - old + nsize;
	return p;
}

int kopt_memlimit_parse(const char *text, size_t *bytes)
{
	if (strcmp(text, "off") == 0) {
		*bytes = 0;
		return 0;
	}
	char *end = NULL;
	if (!isdigit((unsigned char)text[0]))
		return -1;
	double v = strtod(text, &end);
	double unit = 1.0;
	switch (*end) {
	case 'K': case 'k': unit = 1024.0; end++; break;
	case 'M': case 'm': unit = 1024.0 * 1024.0; end++; break;
	case 'G': case 'g': unit = 1024.0 * 1024.0 * 1024.0; end++; break;
	case 'T': case 't': unit = 1024.0 * 1024.0 * 1024.0 * 1024.0; end++; break;
	default: break;
	}
	if (unit > 1.0 && *end == 'i') /* 8GiB as well as 8G */
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || !(v >= 0.0) || v * unit > 1e18)
		return -1;
	*bytes = (size_t)(v * unit);
	return 0;
}

size_t kopt_memlimit_default(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return 0;
	return (size_t)pages / 4 * 3 * (size_t)page;
}

int kopt_memlimit_grant(struct kopt_memlimit *m)
{
	if (m->granted || m->limit == 0)
		return 0;
	m->granted = 1;
	m->refused = m->squeeze = m->strikes = 0;
	m->limit = m->base + m->reserve;
	return 1;
}

int kopt_memlimit_rearm(struct kopt_memlimit *m)
{
	if (!m->granted || m->used >= m->base)
		return 0;
	m->granted = 0;
	m->hit = 0;
	m->refused = m->squeeze = m->strikes = 0;
	m->limit = m->base;
	return 1;
}
