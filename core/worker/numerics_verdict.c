/* The verdict on a comparison (numerics.h: kopt_check_verdict): the one
 * sentence that says why an output fails its tolerances, with the values of
 * its worst element. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "worker/numerics.h"

/* The worst element's values, with digits enough to tell them apart (six
 * as a rule; 17 where six print the same, as for 64-bit integers). */
static void got_want(const struct kopt_check_result *res, char *got, char *want, size_t len)
{
	if (res->worst_int == 1) {
		snprintf(got, len, "%" PRId64, (int64_t)res->worst_got_bits);
		snprintf(want, len, "%" PRId64, (int64_t)res->worst_want_bits);
		return;
	}
	if (res->worst_int == 2) {
		snprintf(got, len, "%" PRIu64, res->worst_got_bits);
		snprintf(want, len, "%" PRIu64, res->worst_want_bits);
		return;
	}
	snprintf(got, len, "%.6g", res->worst_got);
	snprintf(want, len, "%.6g", res->worst_want);
	if (strcmp(got, want) == 0 && res->worst_got != res->worst_want) {
		int whole = res->worst_got == floor(res->worst_got) &&
			    res->worst_want == floor(res->worst_want) && fabs(res->worst_got) < 1e19 &&
			    fabs(res->worst_want) < 1e19;
		snprintf(got, len, whole ? "%.0f" : "%.17g", res->worst_got);
		snprintf(want, len, whole ? "%.0f" : "%.17g", res->worst_want);
	}
}

int kopt_check_verdict(const struct kopt_check_result *res, double rel_l2_tol, double max_abs_tol,
		       const char *what, char *msg, size_t msglen)
{
	char got[32], want[32];
	got_want(res, got, want, sizeof got);
	if (res->unwritten > 0) {
		snprintf(msg, msglen, "%s: %zu of %zu elements never written (first at %zu)", what,
			 res->unwritten, res->count, res->first_bad);
		return 1;
	}
	if (res->nonfinite > 0) {
		snprintf(msg, msglen, "%s: %zu NaN/Inf elements (first at %zu)", what,
			 res->nonfinite, res->first_bad);
		return 1;
	}
	if (!(res->rel_l2 <= rel_l2_tol)) {
		snprintf(
		    msg, msglen,
		    "%s: relative L2 error %.3g above tolerance %.3g (max abs %.3g at index %zu: "
		    "got %s, want %s)",
		    what, res->rel_l2, rel_l2_tol, res->max_abs, res->worst_at, got, want);
		return 1;
	}
	/* Without a max-abs tolerance from the spec, the element with the
	 * largest error may still be off by at most ELEMENT_FACTOR times the
	 * relative tolerance, relative to its own reference value or, for one
	 * near zero, to the reference's RMS: rounding stays far under that, while
	 * a few elements zeroed or left wrong (a dropped tail, a bad boundary
	 * tile) hide under a relative L2 budget such as bf16's 1e-2 when the
	 * output is large. */
	if (max_abs_tol < 0.0 && res->count > 0 && res->ref_norm > 0.0) {
		double rms = res->ref_norm / sqrt((double)res->count);
		double scale = fabs(res->worst_want) > rms ? fabs(res->worst_want) : rms;
		double bound = KOPT_CHECK_ELEMENT_FACTOR * rel_l2_tol * scale;
		if (!(res->max_abs <= bound)) {
			snprintf(msg, msglen,
				 "%s: element %zu is off by %.3g (got %s, want %s), more than "
				 "%g x the tolerance %.3g of its magnitude (or of the reference's "
				 "RMS %.3g), though the relative L2 error %.3g is within it",
				 what, res->worst_at, res->max_abs, got, want,
				 (double)KOPT_CHECK_ELEMENT_FACTOR, rel_l2_tol, rms, res->rel_l2);
			return 1;
		}
	}
	if (max_abs_tol >= 0.0 && !(res->max_abs <= max_abs_tol)) {
		snprintf(msg, msglen,
			 "%s: max abs error %.3g above tolerance %.3g (at index %zu: got %s, "
			 "want %s)",
			 what, res->max_abs, max_abs_tol, res->worst_at, got, want);
		return 1;
	}
	if (msglen > 0)
		msg[0] = '\0';
	return 0;
}
