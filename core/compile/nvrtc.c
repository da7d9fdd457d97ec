/* NVRTC to CUBIN with the ptxas resource report. See nvrtc.h for the
 * contract; the log format parsed here is ptxas 13's:
 *
 *   ptxas info    : Compiling entry function 'k' for 'sm_90'
 *   ptxas info    : Function properties for k
 *   ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1200 bytes
 * smem
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "compile/kopt_nvrtc.h"
#include "cubin.h"
#include "sys.h"

void kopt_nvrtc_result_init(struct kopt_nvrtc_result *res)
{
	memset(res, 0, sizeof *res);
	res->regs = res->barriers = res->smem_static = res->local_bytes = -1;
	res->spill_stores = res->spill_loads = res->const_bytes = res->max_threads = -1;
}

void kopt_nvrtc_result_release(struct kopt_nvrtc_result *res)
{
	free(res->cubin);
	free(res->log);
	free(res->lowered);
	kopt_nvrtc_result_init(res);
}

void kopt_nvrtc_version(int *major, int *minor)
{
	if (nvrtcVersion(major, minor) != NVRTC_SUCCESS)
		*major = *minor = 0;
}

/* The number right before `unit` in [line, end), e.g. "1200 bytes smem". */
static long number_before(const char *line, const char *end, const char *unit)
{
	size_t ulen = strlen(unit);
	for (const char *p = line; p + ulen <= end; p++) {
		if (memcmp(p, unit, ulen) != 0)
			continue;
		const char *q = p;
		while (q > line && q[-1] == ' ')
			q--;
		const char *digits = q;
		while (digits > line && digits[-1] >= '0' && digits[-1] <= '9')
			digits--;
		if (digits == q)
			continue;
		return strtol(digits, NULL, 10);
	}
	return -1;
}

static int line_has(const char *line, const char *end, const char *s)
{
	size_t n = strlen(s);
	for (const char *p = line; p + n <= end; p++)
		if (memcmp(p, s, n) == 0)
			return 1;
	return 0;
}

/* Picks the report block of one entry function and reads its numbers. */
void kopt_nvrtc_parse_log(const char *log, const char *entry, struct kopt_nvrtc_result *res)
{
	static const char marker[] = "Compiling entry function '";
	const char *block = NULL;
	for (const char *p = strstr(log, marker); p != NULL; p = strstr(p + 1, marker)) {
		const char *name = p + sizeof marker - 1;
		const char *quote = strchr(name, '\'');
		if (quote == NULL)
			break;
		if (entry == NULL || ((size_t)(quote - name) == strlen(entry) &&
				      memcmp(name, entry, (size_t)(quote - name)) == 0)) {
			block = quote;
			break;
		}
	}
	if (block == NULL)
		return;
	const char *block_end = strstr(block, marker);
	if (block_end == NULL)
		block_end = block + strlen(block);
	/* the block also reports the device functions it calls ("Function
	 * properties for helper"): only the entry's own stack line counts */
	static const char props[] = "Function properties for ";
	const char *fn = block;
	while (fn > log && fn[-1] != '\'')
		fn--;
	size_t fn_len = (size_t)(block - fn);
	int own = 1;
	for (const char *line = block; line < block_end;) {
		const char *eol = memchr(line, '\n', (size_t)(block_end - line));
		if (eol == NULL)
			eol = block_end;
		const char *pf = line_has(line, eol, props) ? strstr(line, props) : NULL;
		if (pf != NULL && pf < eol) {
			const char *name = pf + sizeof props - 1;
			size_t len = (size_t)(eol - name);
			while (len > 0 && (name[len - 1] == '\r' || name[len - 1] == ' '))
				len--;
			own = len == fn_len && memcmp(name, fn, fn_len) == 0;
		} else if (own && line_has(line, eol, "bytes stack frame")) {
			res->local_bytes = number_before(line, eol, "bytes stack frame");
			res->spill_stores = number_before(line, eol, "bytes spill stores");
			res->spill_loads = number_before(line, eol, "bytes spill loads");
		} else if (line_has(line, eol, "Used ") && line_has(line, eol, "registers")) {
			res->regs = number_before(line, eol, "registers");
			res->barriers = number_before(line, eol, "barriers");
			long smem = number_before(line, eol, "bytes smem");
			res->smem_static = smem < 0 ? 0 : smem;
			res->const_bytes = number_before(line, eol, "bytes cmem[0]");
		}
		line = eol + 1;
	}
}

/* .nv.info.<entry> is a list of attributes: format byte, attribute byte, a
 * 16-bit value or size, and (format 0x04) that many bytes of payload.
 * Attribute 0x05 (max threads) and 0x10 (required block shape) carry three
 * 32-bit extents from __launch_bounds__ / __maxnthreads__ / __reqntid__. The
 * section is found by the ELF walk of cubin.h. */
long kopt_nvrtc_cubin_max_threads(const unsigned char *elf, size_t size, const char *entry)
{
	struct kopt_elf e;
	struct kopt_elf_section info;
	if (elf == NULL || entry == NULL || size < 64 || elf[5] != 1 /* little-endian */ ||
	    kopt_elf_open(&e, elf, size) != 0)
		return -1;
	/* (a template entry's mangled name runs to hundreds of characters) */
	size_t want_size = strlen(entry) + sizeof ".nv.info.";
	char *want = malloc(want_size);
	if (want == NULL)
		return -1;
	snprintf(want, want_size, ".nv.info.%s", entry);
	int found = kopt_elf_find(&e, want, &info) == 0 && info.data != NULL;
	free(want);
	if (!found)
		return -1;
	long best = -1;
	for (uint64_t p = 0; p + 4 <= info.size;) {
		const unsigned char *a = info.data + p;
		uint64_t payload = a[0] == 0x04 ? kopt_elf_le(a + 2, 2) : 0;
		if (p + 4 + payload > info.size)
			break;
		if (a[0] == 0x04 && (a[1] == 0x05 || a[1] == 0x10) && payload == 12) {
			uint64_t t =
			    kopt_elf_le(a + 4, 4) * kopt_elf_le(a + 8, 4) * kopt_elf_le(a + 12, 4);
			if (t > 0 && (best < 0 || (long)t < best))
				best = (long)t;
		}
		p += 4 + payload;
	}
	return best;
}

/* The most threads a block can have with `regs` registers per thread on
 * sm_90: 64 Ki registers per block, allocated per warp in units of 256. */
static long register_limited_threads(long regs)
{
	if (regs <= 0)
		return 1024;
	if (regs > 65536 / 32) /* more than a block's file: not one warp fits */
		return 0;
	long per_warp = (regs * 32 + 255) / 256 * 256;
	long warps = 65536 / per_warp;
	return warps * 32 < 1024 ? warps * 32 : 1024;
}

long kopt_nvrtc_entry_max_threads(const unsigned char *cubin, size_t size, const char *entry, long regs)
{
	long bound = kopt_nvrtc_cubin_max_threads(cubin, size, entry);
	long limit = register_limited_threads(regs);
	return bound > 0 && bound < limit ? bound : limit;
}

static int is_ptxas_line(const char *line)
{
	return strncmp(line, "ptxas", 5) == 0;
}

/* A log past the cap keeps ptxas's report whole (every "ptxas" line: the
 * registers and spills of each kernel, which a pipeline's later kernels are
 * checked by) after as much of the compiler's messages as fits, in place.
 * 0 when the report alone would take half the cap (then the head is kept). */
static int keep_report(char *log, size_t n)
{
	size_t report = 0;
	for (const char *l = log; *l != '\0';) {
		const char *eol = strchr(l, '\n');
		size_t len = eol != NULL ? (size_t)(eol - l) + 1 : strlen(l);
		if (is_ptxas_line(l))
			report += len;
		l += len;
	}
	if (report == 0 || report > KOPT_NVRTC_LOG_CAP / 2)
		return 0;
	char *copy = malloc(n + 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, log, n + 1);
	char note[96];
	int t = snprintf(note, sizeof note, "[kopt: log cut at %d of %zu bytes; ptxas's report kept whole]\n",
			 KOPT_NVRTC_LOG_CAP, n);
	size_t head_room = KOPT_NVRTC_LOG_CAP - report - (size_t)t - 2, w = 0;
	int cut = 0;
	for (const char *l = copy; *l != '\0';) { /* the messages, whole lines, while they fit */
		const char *eol = strchr(l, '\n');
		size_t len = eol != NULL ? (size_t)(eol - l) + 1 : strlen(l);
		if (!is_ptxas_line(l) && !cut) {
			if (w + len <= head_room) {
				memcpy(log + w, l, len);
				w += len;
			} else {
				cut = 1;
			}
		}
		l += len;
	}
	if (w > 0 && log[w - 1] != '\n')
		log[w++] = '\n';
	memcpy(log + w, note, (size_t)t);
	w += (size_t)t;
	for (const char *l = copy; *l != '\0';) { /* then the report */
		const char *eol = strchr(l, '\n');
		size_t len = eol != NULL ? (size_t)(eol - l) + 1 : strlen(l);
		if (is_ptxas_line(l)) {
			memcpy(log + w, l, len);
			w += len;
		}
		l += len;
	}
	log[w] = '\0';
	free(copy);
	return 1;
}

/* Stores log (taking ownership), cut to the cap with a note. */
static void set_log(struct kopt_nvrtc_result *res, char *log)
{
	size_t n = strlen(log);
	if (n > KOPT_NVRTC_LOG_CAP && !keep_report(log, n)) {
		static const char note[] = "\n[kopt: log cut at %d of %zu bytes]\n";
		char tail[96];
		int t = snprintf(tail, sizeof tail, note, KOPT_NVRTC_LOG_CAP, n);
		memcpy(log + KOPT_NVRTC_LOG_CAP - (size_t)t, tail, (size_t)t + 1);
	}
	res->log = log;
}

void kopt_nvrtc_log_file_names(char *log, const char *name)
{
	const char *slash = name != NULL ? strrchr(name, '/') : NULL;
	if (log == NULL || slash == NULL)
		return;
	size_t dn = (size_t)(slash - name) + 1; /* the folder, with its '/' */
	char *w = log;
	for (const char *r = log; *r != '\0';) {
		if (strncmp(r, name, dn) == 0)
			r += dn;
		else
			*w++ = *r++;
	}
	*w = '\0';
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* The log of the same compile without ptxas's -v: with it, ptxas's own
 * error ("uses too much shared data") is left out of the log, and a failed
 * compile said nothing but NVRTC_ERROR_COMPILATION. NULL when it cannot be
 * had. */
static char *log_without_verbose(const struct kopt_nvrtc_job *job, const char **opts, size_t n)
{
	const char **quiet = calloc(n, sizeof *quiet);
	nvrtcProgram prog = NULL;
	char *log = NULL;
	size_t m = 0, size = 0;
	if (quiet == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(opts[i], "--ptxas-options=-v") != 0)
			quiet[m++] = opts[i];
	if (nvrtcCreateProgram(&prog, job->source, job->name ? job->name : "kernel.cu", 0, NULL,
			       NULL) == NVRTC_SUCCESS) {
		if (job->entry != NULL)
			nvrtcAddNameExpression(prog, job->entry);
		nvrtcCompileProgram(prog, (int)m, quiet);
		if (nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && size > 1 &&
		    (log = malloc(size)) != NULL) {
			nvrtcGetProgramLog(prog, log);
			kopt_nvrtc_log_file_names(log, job->name);
		}
		nvrtcDestroyProgram(&prog);
	}
	free(quiet);
	return log;
}

int kopt_nvrtc_compile(const struct kopt_nvrtc_job *job, struct kopt_nvrtc_result *res, char *err,
		       size_t errlen)
{
	kopt_nvrtc_result_init(res);
	int rc = -1;
	nvrtcProgram prog = NULL;
	char *log = NULL;
	char arch_opt[64];
	const char **opts = calloc(job->n_options + 3, sizeof *opts);
	if (opts == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t n = 0;
	int has_arch = 0;
	for (size_t i = 0; i < job->n_options; i++) {
		const char *o = job->options[i];
		if (strncmp(o, "--gpu-architecture", 18) == 0 || strncmp(o, "-arch", 5) == 0)
			has_arch = 1;
		opts[n++] = o;
	}
	if (job->arch != NULL && !has_arch) {
		snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", job->arch);
		opts[n++] = arch_opt;
	}
	opts[n++] = "--ptxas-options=-v";
	opts[n++] = "--no-cache";

	double t0 = kopt_sys_now();
	nvrtcResult r = nvrtcCreateProgram(&prog, job->source, job->name ? job->name : "kernel.cu",
					   0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		snprintf(err, errlen, "nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
		goto out;
	}
	if (job->entry != NULL)
		nvrtcAddNameExpression(prog, job->entry);
	nvrtcResult cr = nvrtcCompileProgram(prog, (int)n, opts);
	res->compile_s = kopt_sys_now() - t0;

	size_t log_size = 0;
	if (nvrtcGetProgramLogSize(prog, &log_size) != NVRTC_SUCCESS)
		log_size = 1;
	/* room for a note about a failure that the log does not mention */
	log = malloc(log_size + 256);
	if (log == NULL) {
		snprintf(err, errlen, "out of memory for a %zu-byte log", log_size);
		goto out;
	}
	log[0] = '\0';
	if (log_size > 1)
		nvrtcGetProgramLog(prog, log);
	kopt_nvrtc_log_file_names(log, job->name);
	size_t len = strlen(log);
	if (cr != NVRTC_SUCCESS) {
		char *quiet = strstr(log, "error") == NULL ? log_without_verbose(job, opts, n) : NULL;
		if (quiet != NULL && strstr(quiet, "error") != NULL) {
			char *both = malloc(len + strlen(quiet) + 258);
			if (both != NULL) {
				snprintf(both, len + strlen(quiet) + 2, "%s%s%s", log,
					 len && log[len - 1] != '\n' ? "\n" : "", quiet);
				free(log);
				log = both;
				len = strlen(log);
			}
		}
		free(quiet);
		snprintf(log + len, 256, "%snvrtc: %s\n", len && log[len - 1] != '\n' ? "\n" : "",
			 nvrtcGetErrorString(cr));
		set_log(res, log);
		log = NULL;
		rc = 0;
		goto out;
	}
	if (job->entry != NULL) {
		const char *lowered = NULL;
		if (nvrtcGetLoweredName(prog, job->entry, &lowered) != NVRTC_SUCCESS || !lowered) {
			snprintf(log + len, 256, "kopt: entry '%.120s' not found in the program\n",
				 job->entry);
			set_log(res, log);
			log = NULL;
			rc = 0;
			goto out;
		}
		res->lowered = dup_or_null(lowered);
	}
	size_t cubin_size = 0;
	if (nvrtcGetCUBINSize(prog, &cubin_size) != NVRTC_SUCCESS || cubin_size == 0) {
		snprintf(
		    log + len, 256,
		    "kopt: NVRTC produced no CUBIN (a virtual architecture such as compute_90?)\n");
		set_log(res, log);
		log = NULL;
		rc = 0;
		goto out;
	}
	res->cubin = malloc(cubin_size);
	if (res->cubin == NULL || (job->entry != NULL && res->lowered == NULL)) {
		snprintf(err, errlen, "out of memory for a %zu-byte cubin", cubin_size);
		goto out;
	}
	nvrtcGetCUBIN(prog, (char *)res->cubin);
	res->cubin_size = cubin_size;
	kopt_nvrtc_parse_log(log, res->lowered, res);
	res->max_threads = kopt_nvrtc_entry_max_threads(res->cubin, cubin_size, res->lowered, res->regs);
	set_log(res, log);
	log = NULL;
	res->ok = 1;
	rc = 0;
out:
	if (prog != NULL)
		nvrtcDestroyProgram(&prog);
	free(log);
	free(opts);
	if (rc != 0)
		kopt_nvrtc_result_release(res);
	return rc;
}
