#ifndef KOPT_GP_H
#define KOPT_GP_H
/* Gaussian-process regression over points in the unit cube: the value model
 * a search strategy may use instead of a random forest (lua/kopt/gp.lua).
 * Matern 5/2 kernel with one length scale for every coordinate, signal
 * variance 1 on targets standardised to mean 0 and variance 1, and a noise
 * variance; the length scale and the noise are chosen from grids by the log
 * marginal likelihood. Everything is double precision and O(n^3) in the
 * number of points, which stays small (a search's measured states). */

struct kopt_gp;

/* Fits n points of d coordinates (X row-major, n*d values, each in [0,1])
 * to the targets y. Every pair (scales[i], noises[j]) is tried and the one
 * with the highest log marginal likelihood kept; with one scale and one
 * noise nothing is chosen. Returns NULL with a message in err when n or d is
 * below 1, a value is not finite, a grid value is not positive, or memory
 * runs out. A Cholesky factorisation that fails for a pair skips that pair
 * (a larger noise keeps the matrix positive definite). */
struct kopt_gp *kopt_gp_fit(const double *X, const double *y, int n, int d,
			    const double *scales, int nscales,
			    const double *noises, int nnoises,
			    char *err, size_t errlen);

/* Posterior mean and standard deviation of the latent function at x (d
 * coordinates), in the targets' own units. */
void kopt_gp_predict(const struct kopt_gp *gp, const double *x, double *mean, double *sd);

/* The chosen length scale, noise variance (in standardised units) and log
 * marginal likelihood. */
void kopt_gp_params(const struct kopt_gp *gp, double *scale, double *noise, double *lml);

void kopt_gp_free(struct kopt_gp *gp);

#endif
