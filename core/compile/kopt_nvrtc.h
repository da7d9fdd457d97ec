/* Named kopt_nvrtc.h, not nvrtc.h: core/ is on the include path and would
 * shadow the toolkit's <nvrtc.h>. */
#ifndef KOPT_NVRTC_H
#define KOPT_NVRTC_H
#include <stddef.h>

/* NVRTC straight to CUBIN, with the resource report of ptxas parsed out of
 * the log. A compile error is a result (ok == 0 and the log), not a failure
 * of the call: kopt_nvrtc_compile fails only when kopt itself cannot go on
 * (out of memory).
 *
 * Every compile passes `--ptxas-options=-v` (the resource report) and
 * `--no-cache`: NVRTC 13 keeps a disk cache of its own when a driver is
 * present, and a hit returns an empty log, so the report would vanish.
 * kopt's own cache (lua/kopt/compile.lua) stores the parsed report instead. */

/* The stored log is cut to this many bytes (head kept, a note appended);
 * parsing always sees the whole log. */
#define KOPT_NVRTC_LOG_CAP (64 * 1024)

struct kopt_nvrtc_job {
	const char *source; /* NUL-terminated CUDA C++ */
	const char *name;   /* file name used in diagnostics; NULL: "kernel.cu" */
	const char *entry;  /* kernel name; NULL: none (no lowered name, first report) */
	const char *arch;   /* "sm_90", "sm_90a"; NULL: the options choose */
	const char *const *options;
	size_t n_options;
	const char *salt; /* hashed into the cache key only, never given to NVRTC: e.g. a
			   * digest of the headers the source includes; NULL: none */
};

/* Resource fields are -1 when the log did not report them. */
struct kopt_nvrtc_result {
	int ok;
	unsigned char *cubin; /* owned; NULL unless ok */
	size_t cubin_size;
	char *log;     /* owned, NUL-terminated, never NULL after compile */
	char *lowered; /* owned: the entry's symbol in the cubin; NULL without entry */
	long regs;     /* registers per thread */
	long barriers;
	long smem_static;  /* bytes of static __shared__ */
	long local_bytes;  /* stack frame: local arrays and spills */
	long spill_stores; /* bytes */
	long spill_loads;  /* bytes */
	long const_bytes;  /* cmem[0] (parameters and constants) */
	long max_threads;  /* estimate: launch bounds and the sm_90 register file */
	double compile_s;  /* wall time of the NVRTC call */
};

/* Compiles job into res (cleared on entry; release it with
 * kopt_nvrtc_result_release in every case). Returns 0 when res holds a
 * result, successful or not; -1 with a message in err when kopt ran out of
 * memory. */
int kopt_nvrtc_compile(const struct kopt_nvrtc_job *job, struct kopt_nvrtc_result *res, char *err,
		       size_t errlen);

void kopt_nvrtc_result_release(struct kopt_nvrtc_result *res);

/* Clears every field to "unknown" (ok 0, pointers NULL, numbers -1). */
void kopt_nvrtc_result_init(struct kopt_nvrtc_result *res);

/* Parses the ptxas report for `entry` (NULL: the first entry function) out
 * of log into res's resource fields. Exposed for tests. */
void kopt_nvrtc_parse_log(const char *log, const char *entry, struct kopt_nvrtc_result *res);

/* Reads the launch bounds of `entry` from a CUBIN's .nv.info section:
 * the product of its maximum block shape, or -1 when it has none. */
long kopt_nvrtc_cubin_max_threads(const unsigned char *cubin, size_t size, const char *entry);

/* The most threads a block of `entry` may have: its launch bounds, and
 * what its registers (`regs` per thread) leave of the register file. */
long kopt_nvrtc_entry_max_threads(const unsigned char *cubin, size_t size, const char *entry, long regs);

/* The PTX of job, for analysis: a separate NVRTC call to the virtual
 * architecture of job->arch (sm_90 -> compute_90; an arch option in the
 * job's options wins over job->arch) with -lineinfo; no cache, no CUBIN.
 * On return 0, *log is the compiler's log (caller frees) and *ptx the
 * NUL-terminated PTX (caller frees), or NULL when the source did not
 * compile (the reason in *log). With job->entry and lowered not NULL,
 * *lowered is the entry's symbol in the PTX (caller frees; a template entry
 * is instantiated for it), or NULL. Returns -1 with a message in err when
 * kopt cannot go on (out of memory, no PTX); then all are NULL. */
int kopt_nvrtc_ptx(const struct kopt_nvrtc_job *job, char **ptx, char **log, char **lowered,
		   char *err, size_t errlen);

/* Drops the folder of the program's name (a real path, so that NVRTC looks
 * for quoted #includes next to the kernel) wherever the log quotes it: the
 * messages name the kernel's file alone. In place. */
void kopt_nvrtc_log_file_names(char *log, const char *name);

/* NVRTC's version. */
void kopt_nvrtc_version(int *major, int *minor);

/* --- Results as bytes, and the on-disk CUBIN cache (nvrtc_cache.c) ---
 *
 * A result serializes to one self-describing byte string (magic, numbers,
 * log, lowered name, cubin). The same bytes travel over the compile pool's
 * pipes and lie in the cache, one file per key: <dir>/<key[0..1]>/<key>.kc,
 * written to a temporary name and renamed, so readers never see half a file
 * and concurrent writers of one key are harmless. Compile errors are cached
 * too (they are as deterministic as successes). */

/* SHA-256 (hex) of everything that decides the output: a format tag, the
 * kopt version, NVRTC's version, arch, entry, file name, every option in
 * order, the salt and the source. Headers reached through #include are not
 * read here: the caller puts their digest in the salt. */
void kopt_nvrtc_cache_key(const struct kopt_nvrtc_job *job, char hex[65]);

/* Serializes res into a malloc'ed buffer (caller frees); NULL when out of
 * memory. */
unsigned char *kopt_nvrtc_result_pack(const struct kopt_nvrtc_result *res, size_t *size);

/* Parses bytes made by _pack into res (cleared on entry; release it).
 * Returns 0, or -1 when the bytes are not a result (truncated, other
 * version) or memory ran out. */
int kopt_nvrtc_result_unpack(const unsigned char *buf, size_t size, struct kopt_nvrtc_result *res);

/* Returns 1 and fills res on a hit, 0 on a miss (absent or unreadable). */
int kopt_nvrtc_cache_load(const char *dir, const char *key, struct kopt_nvrtc_result *res);

/* Stores res under key, creating directories as needed. Returns 0, or -1
 * with a message in err. */
int kopt_nvrtc_cache_store(const char *dir, const char *key, const struct kopt_nvrtc_result *res,
			   char *err, size_t errlen);

/* kopt_nvrtc_compile through the cache in dir (NULL: no cache): a hit sets
 * *cached to 1 and compiles nothing; a miss compiles and stores the result.
 * A cache that cannot be written costs the store, not the result. */
int kopt_nvrtc_compile_cached(const struct kopt_nvrtc_job *job, const char *dir,
			      struct kopt_nvrtc_result *res, int *cached, char *err, size_t errlen);

#endif
