/* Gaussian-process regression (gp.h): Matern 5/2 with a length scale per
 * coordinate, hyperparameters by grid and coordinate search on the log
 * marginal likelihood, Cholesky of the kernel matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"

struct kopt_gp {
	size_t n, d;
	double noise, lml;
	double y_mean, y_sd;
	double *inv2;  /* d: 1 / scale^2 per coordinate */
	double *X;     /* n*d */
	double *L;     /* n*n lower Cholesky factor of K + noise I */
	double *alpha; /* (K + noise I)^-1 (y - mean) / sd */
	double *work;  /* n, for predict's triangular solve */
};

/* What a fit works on: the points' squared differences per coordinate, the
 * standardised targets, and scratch for one factorisation. */
struct fit_data {
	size_t n, d;
	double *diff2; /* pairs i > j, row by row: (i*(i-1)/2 + j) * d + k */
	double *yt, *L, *alpha, *z;
};

static double matern52(double r2)
{
	double r = sqrt(5.0 * r2);
	return (1.0 + r + r * r / 3.0) * exp(-r);
}

/* In-place lower Cholesky of the n*n row-major A (the lower triangle is read
 * and written). Returns 0, or -1 when A is not positive definite. */
static int cholesky(double *A, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		double *rj = A + j * n;
		double s = rj[j];
		for (size_t k = 0; k < j; k++)
			s -= rj[k] * rj[k];
		if (!(s > 0))
			return -1;
		double l = sqrt(s);
		rj[j] = l;
		for (size_t i = j + 1; i < n; i++) {
			double *ri = A + i * n;
			double t = ri[j];
			for (size_t k = 0; k < j; k++)
				t -= ri[k] * rj[k];
			ri[j] = t / l;
		}
	}
	return 0;
}

/* Solves L z = b (forward), then L^T x = z (backward). */
static void solve(const double *L, size_t n, const double *b, double *z, double *x)
{
	for (size_t i = 0; i < n; i++) {
		const double *ri = L + i * n;
		double t = b[i];
		for (size_t k = 0; k < i; k++)
			t -= ri[k] * z[k];
		z[i] = t / ri[i];
	}
	for (size_t i = n; i-- > 0;) {
		double t = z[i];
		for (size_t k = i + 1; k < n; k++)
			t -= L[k * n + i] * x[k];
		x[i] = t / L[i * n + i];
	}
}

/* Factorises K + noise I into f->L and solves for f->alpha; returns the log
 * marginal likelihood, or -INFINITY when the factorisation fails. */
static double likelihood(struct fit_data *f, const double *inv2, double noise)
{
	size_t n = f->n, d = f->d;
	const double *dp = f->diff2;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++, dp += d) {
			double r2 = 0;
			for (size_t k = 0; k < d; k++)
				r2 += dp[k] * inv2[k];
			f->L[i * n + j] = matern52(r2);
		}
		f->L[i * n + i] = 1.0 + noise;
	}
	if (cholesky(f->L, n) != 0)
		return -INFINITY;
	solve(f->L, n, f->yt, f->z, f->alpha);
	double fit = 0, logdet = 0;
	for (size_t i = 0; i < n; i++) {
		fit += f->yt[i] * f->alpha[i];
		logdet += log(f->L[i * n + i]);
	}
	return -0.5 * fit - logdet - 0.5 * (double)n * log(2 * M_PI);
}

#define MAX_D 256

static int check_input(const double *X, const double *y, int n, int d, char *err, size_t errlen)
{
	if (n < 1 || d < 1 || d > MAX_D) {
		snprintf(err, errlen, "gp: need at least one point and 1 to %d coordinates (n=%d, d=%d)", MAX_D, n, d);
		return -1;
	}
	for (int i = 0; i < n * d; i++)
		if (!isfinite(X[i])) {
			snprintf(err, errlen, "gp: point %d coordinate %d is not finite", i / d + 1, i % d + 1);
			return -1;
		}
	for (int i = 0; i < n; i++)
		if (!isfinite(y[i])) {
			snprintf(err, errlen, "gp: target %d is not finite", i + 1);
			return -1;
		}
	return 0;
}

static int check_positive(const double *v, int count, const char *what, char *err, size_t errlen)
{
	for (int i = 0; i < count; i++)
		if (!(v[i] > 0) || !isfinite(v[i])) {
			snprintf(err, errlen, "gp: %s %d is not a positive number", what, i + 1);
			return -1;
		}
	return 0;
}

static void free_data(struct fit_data *f)
{
	free(f->diff2), free(f->yt), free(f->L), free(f->alpha), free(f->z);
}

/* The model shell and the fit's working data; standardises y and fills the
 * pairwise differences. NULL, with the message in err, when memory runs out. */
static struct kopt_gp *prepare(const double *X, const double *y, size_t n, size_t d, struct fit_data *f,
			       char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	f->n = n, f->d = d;
	f->diff2 = malloc(sizeof(double) * (n * (n - 1) / 2 * d + 1));
	f->yt = malloc(sizeof(double) * n);
	f->L = malloc(sizeof(double) * n * n);
	f->alpha = malloc(sizeof(double) * n);
	f->z = malloc(sizeof(double) * n);
	struct kopt_gp *gp = calloc(1, sizeof *gp);
	if (gp) {
		gp->inv2 = malloc(sizeof(double) * d);
		gp->X = malloc(sizeof(double) * n * d);
		gp->L = malloc(sizeof(double) * n * n);
		gp->alpha = malloc(sizeof(double) * n);
		gp->work = malloc(sizeof(double) * n);
	}
	if (!gp || !f->diff2 || !f->yt || !f->L || !f->alpha || !f->z || !gp->inv2 || !gp->X || !gp->L ||
	    !gp->alpha || !gp->work) {
		snprintf(err, errlen, "gp: out of memory for %zu points", n);
		free_data(f);
		kopt_gp_free(gp);
		return NULL;
	}
	gp->n = n, gp->d = d;
	memcpy(gp->X, X, sizeof(double) * n * d);
	double mean = 0, var = 0;
	for (size_t i = 0; i < n; i++)
		mean += y[i];
	mean /= (double)n;
	for (size_t i = 0; i < n; i++)
		var += (y[i] - mean) * (y[i] - mean);
	/* (one point, or all equal: unit spread, so the prior's scale holds) */
	double sd = n > 1 && var > 0 ? sqrt(var / (double)n) : 1.0;
	gp->y_mean = mean, gp->y_sd = sd;
	for (size_t i = 0; i < n; i++)
		f->yt[i] = (y[i] - mean) / sd;
	double *dp = f->diff2;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++, dp += d)
			for (size_t k = 0; k < d; k++) {
				double t = X[i * d + k] - X[j * d + k];
				dp[k] = t * t;
			}
	gp->lml = -INFINITY;
	return gp;
}

/* Tries inv2/noise; when its likelihood beats the model's, the model takes
 * it (the factor and alpha swapped in, inv2 and noise copied). */
static int try_params(struct kopt_gp *gp, struct fit_data *f, const double *inv2, double noise)
{
	double lml = likelihood(f, inv2, noise);
	if (!(lml > gp->lml))
		return 0;
	double *t = gp->L;
	gp->L = f->L, f->L = t;
	t = gp->alpha, gp->alpha = f->alpha, f->alpha = t;
	memcpy(gp->inv2, inv2, sizeof(double) * gp->d);
	gp->noise = noise, gp->lml = lml;
	return 1;
}

static struct kopt_gp *finish(struct kopt_gp *gp, struct fit_data *f, char *err, size_t errlen)
{
	free_data(f);
	if (gp->lml == -INFINITY) {
		snprintf(err, errlen, "gp: the kernel matrix is not positive definite for any choice of noise");
		kopt_gp_free(gp);
		return NULL;
	}
	return gp;
}

struct kopt_gp *kopt_gp_fit(const double *X, const double *y, int n, int d,
			    const struct kopt_gp_grid *grid, char *err, size_t errlen)
{
	if (check_input(X, y, n, d, err, errlen) != 0)
		return NULL;
	if (grid->nscales < 1 || grid->nnoises < 1) {
		snprintf(err, errlen, "gp: empty grid of length scales or noises");
		return NULL;
	}
	if (check_positive(grid->scales, grid->nscales, "length scale", err, errlen) != 0 ||
	    check_positive(grid->noises, grid->nnoises, "noise", err, errlen) != 0)
		return NULL;
	struct fit_data f;
	size_t ud = (size_t)d;
	struct kopt_gp *gp = prepare(X, y, (size_t)n, ud, &f, err, errlen);
	if (!gp)
		return NULL;
	double inv2[MAX_D];
	for (int a = 0; a < grid->nscales; a++)
		for (int b = 0; b < grid->nnoises; b++) {
			for (size_t k = 0; k < ud; k++)
				inv2[k] = 1.0 / (grid->scales[a] * grid->scales[a]);
			try_params(gp, &f, inv2, grid->noises[b]);
		}
	if (grid->ard && gp->lml > -INFINITY) {
		static const double factors[] = {0.25, 0.5, 2, 4, 16};
		for (int sweep = 0; sweep < 2; sweep++)
			for (size_t k = 0; k < ud; k++) {
				double start = gp->inv2[k];
				for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++) {
					memcpy(inv2, gp->inv2, sizeof(double) * ud);
					inv2[k] = start / (factors[i] * factors[i]);
					try_params(gp, &f, inv2, gp->noise);
				}
			}
	}
	return finish(gp, &f, err, errlen);
}

struct kopt_gp *kopt_gp_refit(const double *X, const double *y, int n, int d,
			      const double *scales, double noise, char *err, size_t errlen)
{
	if (check_input(X, y, n, d, err, errlen) != 0)
		return NULL;
	if (check_positive(scales, d, "length scale", err, errlen) != 0 ||
	    check_positive(&noise, 1, "noise", err, errlen) != 0)
		return NULL;
	struct fit_data f;
	size_t ud = (size_t)d;
	struct kopt_gp *gp = prepare(X, y, (size_t)n, ud, &f, err, errlen);
	if (!gp)
		return NULL;
	double inv2[MAX_D];
	for (size_t k = 0; k < ud; k++)
		inv2[k] = 1.0 / (scales[k] * scales[k]);
	try_params(gp, &f, inv2, noise);
	return finish(gp, &f, err, errlen);
}

void kopt_gp_predict(const struct kopt_gp *gp, const double *x, double *mean, double *sd)
{
	size_t n = gp->n, d = gp->d;
	double *kx = gp->work, m = 0;
	for (size_t i = 0; i < n; i++) {
		const double *xi = gp->X + i * d;
		double r2 = 0;
		for (size_t k = 0; k < d; k++) {
			double t = xi[k] - x[k];
			r2 += t * t * gp->inv2[k];
		}
		kx[i] = matern52(r2);
		m += kx[i] * gp->alpha[i];
	}
	/* var = k(x,x) - |L^-1 k|^2, solved in place over kx */
	double q = 0;
	for (size_t i = 0; i < n; i++) {
		const double *ri = gp->L + i * n;
		double t = kx[i];
		for (size_t k = 0; k < i; k++)
			t -= ri[k] * kx[k];
		kx[i] = t / ri[i];
		q += kx[i] * kx[i];
	}
	double var = 1.0 - q;
	*mean = gp->y_mean + gp->y_sd * m;
	*sd = gp->y_sd * sqrt(var > 0 ? var : 0);
}

void kopt_gp_params(const struct kopt_gp *gp, double *scales, double *noise, double *lml)
{
	for (size_t k = 0; k < gp->d; k++)
		scales[k] = 1.0 / sqrt(gp->inv2[k]);
	*noise = gp->noise, *lml = gp->lml;
}

void kopt_gp_free(struct kopt_gp *gp)
{
	if (!gp)
		return;
	free(gp->inv2), free(gp->X), free(gp->L), free(gp->alpha), free(gp->work);
	free(gp);
}
