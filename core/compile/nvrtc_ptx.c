/* The PTX of a compile job, for analysis (kopt ptx, core/ptx.c): a second
 * NVRTC call made only when asked, so the hot path (NVRTC straight to
 * CUBIN, nvrtc.c) is unchanged. The job's real architecture becomes its
 * virtual one (sm_90a -> compute_90a) and -lineinfo is added, so every
 * instruction carries its source line (.loc). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "compile/kopt_nvrtc.h"

/* "--gpu-architecture=sm_90a" / "sm_90a" -> "--gpu-architecture=compute_90a" */
static void virtual_arch(const char *arch, char *out, size_t n)
{
	const char *eq = strchr(arch, '=');
	if (eq != NULL)
		arch = eq + 1;
	if (strncmp(arch, "sm_", 3) == 0)
		snprintf(out, n, "--gpu-architecture=compute_%s", arch + 3);
	else
		snprintf(out, n, "--gpu-architecture=%s", arch);
}

int kopt_nvrtc_ptx(const struct kopt_nvrtc_job *job, char **ptx, char **log, char **lowered,
		   char *err, size_t errlen)
{
	*ptx = NULL;
	*log = NULL;
	if (lowered != NULL)
		*lowered = NULL;
	int rc = -1;
	nvrtcProgram prog = NULL;
	char arch_opt[96];
	const char **opts = calloc(job->n_options + 3, sizeof *opts);
	if (opts == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t n = 0;
	const char *arch = job->arch ? job->arch : "sm_90";
	for (size_t i = 0; i < job->n_options; i++) {
		const char *o = job->options[i];
		if (strncmp(o, "--gpu-architecture", 18) == 0 || strncmp(o, "-arch", 5) == 0)
			arch = o;
		else if (strcmp(o, "-lineinfo") != 0 && strcmp(o, "--generate-line-info") != 0)
			opts[n++] = o;
	}
	virtual_arch(arch, arch_opt, sizeof arch_opt);
	opts[n++] = arch_opt;
	opts[n++] = "-lineinfo";
	opts[n++] = "--no-cache";
	nvrtcResult r = nvrtcCreateProgram(&prog, job->source, job->name ? job->name : "kernel.cu",
					   0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		snprintf(err, errlen, "nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
		goto out;
	}
	/* a template entry ("ns::k<float, 128>") is instantiated only when
	 * named, as for the CUBIN (nvrtc.c) */
	if (job->entry != NULL)
		nvrtcAddNameExpression(prog, job->entry);
	nvrtcResult cr = nvrtcCompileProgram(prog, (int)n, opts);
	size_t size = 0;
	if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0)
		size = 1;
	*log = calloc(size + 64, 1);
	if (*log == NULL) {
		snprintf(err, errlen, "out of memory for a %zu-byte log", size);
		goto out;
	}
	if (size > 1)
		nvrtcGetProgramLog(prog, *log);
	kopt_nvrtc_log_file_names(*log, job->name);
	if (cr != NVRTC_SUCCESS) {
		size_t len = strlen(*log);
		snprintf(*log + len, 64, "nvrtc: %s\n", nvrtcGetErrorString(cr));
		rc = 0;
		goto out;
	}
	if (nvrtcGetPTXSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
		snprintf(err, errlen, "NVRTC produced no PTX");
		goto out;
	}
	*ptx = malloc(size);
	if (*ptx == NULL) {
		snprintf(err, errlen, "out of memory for a %zu-byte PTX", size);
		goto out;
	}
	nvrtcGetPTX(prog, *ptx);
	(*ptx)[size - 1] = '\0';
	const char *name = NULL;
	if (lowered != NULL && job->entry != NULL &&
	    nvrtcGetLoweredName(prog, job->entry, &name) == NVRTC_SUCCESS && name != NULL) {
		*lowered = strdup(name);
		if (*lowered == NULL) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	rc = 0;
out:
	if (prog != NULL)
		nvrtcDestroyProgram(&prog);
	free(opts);
	if (rc != 0) {
		free(*ptx);
		free(*log);
		*ptx = *log = NULL;
		if (lowered != NULL) {
			free(*lowered);
			*lowered = NULL;
		}
	}
	return rc;
}
