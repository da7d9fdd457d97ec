#ifndef KOPT_GP_H
#define KOPT_GP_H
/* Gaussian-process regression over points in the unit cube: the value model
 * a search strategy may use instead of a random forest (kopt.classic.gp).
 * Matern 5/2 kernel with a length scale per coordinate, signal variance 1 on
 * targets standardised to mean 0 and variance 1, and a noise variance.
 * Everything is double precision and O(n^3) in the number of points, which
 * stays small (a search's measured states). */
#include <stddef.h>

struct kopt_gp;

/* How kopt_gp_fit chooses the hyperparameters, by the log marginal
 * likelihood: first one length scale for every coordinate and the noise,
 * every pair of the two grids; then, with ard, each coordinate's own scale
 * by coordinate search (the scale times 1/4, 1/2, 2, 4 or 16, kept when the
 * likelihood rises; two sweeps over the coordinates). */
struct kopt_gp_grid {
	const double *scales;
	int nscales;
	const double *noises;
	int nnoises;
	int ard;
};

/* Fits n points of d coordinates (X row-major, n*d values in [0,1]) to the
 * targets y, choosing the hyperparameters as grid says. Returns NULL with a
 * message in err when n or d is below 1, a value is not finite, a grid value
 * is not positive, or memory runs out. A Cholesky factorisation that fails
 * (the matrix is not positive definite in floating point) skips that
 * choice; when every choice fails, NULL. */
struct kopt_gp *kopt_gp_fit(const double *X, const double *y, int n, int d,
			    const struct kopt_gp_grid *grid, char *err, size_t errlen);

/* The same with the hyperparameters given: scales (d values) and noise. */
struct kopt_gp *kopt_gp_refit(const double *X, const double *y, int n, int d,
			      const double *scales, double noise, char *err, size_t errlen);

/* Posterior mean and standard deviation of the latent function at x (d
 * coordinates), in the targets' own units. */
void kopt_gp_predict(const struct kopt_gp *gp, const double *x, double *mean, double *sd);

/* The hyperparameters: scales (d values written), the noise variance (in
 * standardised units) and the log marginal likelihood. */
void kopt_gp_params(const struct kopt_gp *gp, double *scales, double *noise, double *lml);

void kopt_gp_free(struct kopt_gp *gp);

#endif
