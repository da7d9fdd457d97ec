#ifndef KOPT_SHA256_H
#define KOPT_SHA256_H
#include <stddef.h>
#include <stdint.h>

/* SHA-256 (FIPS 180-4). Used for state hashes and the compile cache key, where
 * a collision would silently reuse a wrong measurement or binary. */
struct kopt_sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t fill;
};

void kopt_sha256_init(struct kopt_sha256 *s);
void kopt_sha256_update(struct kopt_sha256 *s, const void *data, size_t n);
void kopt_sha256_final(struct kopt_sha256 *s, unsigned char out[32]);
/* hex must hold 65 bytes; it is NUL-terminated. */
void kopt_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
