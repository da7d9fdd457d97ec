/* Gaussian-process regression (gp.h): Matern 5/2, grid-chosen length scale
 * and noise, Cholesky of the kernel matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"

struct kopt_gp {
	size_t n, d;
	double scale, noise, lml;
	double y_mean, y_sd;
	double *X;     /* n*d, scaled by 1/scale */
	double *L;     /* n*n lower Cholesky factor of K + noise I */
	double *alpha; /* (K + noise I)^-1 (y - mean) / sd */
	double *work;  /* n, for predict's triangular solve */
};

/* Matern 5/2 of the distance r (already divided by the length scale). */
static double matern52(double r2)
{
	double r = sqrt(5.0 * r2);
	return (1.0 + r + r * r / 3.0) * exp(-r);
}

static double dist2(const double *a, const double *b, size_t d)
{
	double s = 0;
	for (size_t k = 0; k < d; k++) {
		double t = a[k] - b[k];
		s += t * t;
	}
	return s;
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

/* Solves L z = b (forward) into z. */
static void forward(const double *L, size_t n, const double *b, double *z)
{
	for (size_t i = 0; i < n; i++) {
		const double *ri = L + i * n;
		double t = b[i];
		for (size_t k = 0; k < i; k++)
			t -= ri[k] * z[k];
		z[i] = t / ri[i];
	}
}

/* Solves L^T x = z (backward) into x. */
static void backward(const double *L, size_t n, const double *z, double *x)
{
	for (size_t i = n; i-- > 0;) {
		double t = z[i];
		for (size_t k = i + 1; k < n; k++)
			t -= L[k * n + i] * x[k];
		x[i] = t / L[i * n + i];
	}
}

/* Factorises K + noise I for the points Xs (already scaled) into L and
 * solves for alpha; returns the log marginal likelihood, or -INFINITY when
 * the factorisation fails. D holds the pairwise squared distances. */
static double fit_one(const double *D, size_t n, double inv_scale2, double noise, const double *yt,
		      double *L, double *alpha, double *z)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			L[i * n + j] = matern52(D[i * n + j] * inv_scale2);
		L[i * n + i] = 1.0 + noise;
	}
	if (cholesky(L, n) != 0)
		return -INFINITY;
	forward(L, n, yt, z);
	backward(L, n, z, alpha);
	double fit = 0, logdet = 0;
	for (size_t i = 0; i < n; i++) {
		fit += yt[i] * alpha[i];
		logdet += log(L[i * n + i]);
	}
	return -0.5 * fit - logdet - 0.5 * (double)n * log(2 * M_PI);
}

struct kopt_gp *kopt_gp_fit(const double *X, const double *y, int n, int d,
			    const double *scales, int nscales,
			    const double *noises, int nnoises,
			    char *err, size_t errlen)
{
	if (n < 1 || d < 1 || nscales < 1 || nnoises < 1) {
		snprintf(err, errlen, "gp: need at least one point, one coordinate and one grid value (n=%d, d=%d)", n, d);
		return NULL;
	}
	for (int i = 0; i < n * d; i++)
		if (!isfinite(X[i])) {
			snprintf(err, errlen, "gp: point %d coordinate %d is not finite", i / d + 1, i % d + 1);
			return NULL;
		}
	for (int i = 0; i < n; i++)
		if (!isfinite(y[i])) {
			snprintf(err, errlen, "gp: target %d is not finite", i + 1);
			return NULL;
		}
	for (int i = 0; i < nscales; i++)
		if (!(scales[i] > 0) || !isfinite(scales[i])) {
			snprintf(err, errlen, "gp: length scale %d is not a positive number", i + 1);
			return NULL;
		}
	for (int i = 0; i < nnoises; i++)
		if (!(noises[i] > 0) || !isfinite(noises[i])) {
			snprintf(err, errlen, "gp: noise %d is not a positive number", i + 1);
			return NULL;
		}
	size_t un = (size_t)n, ud = (size_t)d;
	struct kopt_gp *gp = calloc(1, sizeof *gp);
	double *D = malloc(sizeof(double) * un * un);
	double *yt = malloc(sizeof(double) * un);
	double *Lt = malloc(sizeof(double) * un * un);
	double *at = malloc(sizeof(double) * un);
	if (gp) {
		gp->X = malloc(sizeof(double) * un * ud);
		gp->L = malloc(sizeof(double) * un * un);
		gp->alpha = malloc(sizeof(double) * un);
		gp->work = malloc(sizeof(double) * un);
	}
	if (!gp || !D || !yt || !Lt || !at || !gp->X || !gp->L || !gp->alpha || !gp->work) {
		snprintf(err, errlen, "gp: out of memory for %d points", n);
		free(D), free(yt), free(Lt), free(at);
		kopt_gp_free(gp);
		return NULL;
	}
	gp->n = un, gp->d = ud;
	double mean = 0, var = 0;
	for (size_t i = 0; i < un; i++)
		mean += y[i];
	mean /= n;
	for (size_t i = 0; i < un; i++)
		var += (y[i] - mean) * (y[i] - mean);
	/* (one point, or all equal: unit spread, so the prior's scale holds) */
	double sd = n > 1 && var > 0 ? sqrt(var / n) : 1.0;
	gp->y_mean = mean, gp->y_sd = sd;
	for (size_t i = 0; i < un; i++)
		yt[i] = (y[i] - mean) / sd;
	for (size_t i = 0; i < un; i++)
		for (size_t j = 0; j < i; j++)
			D[i * un + j] = dist2(X + i * ud, X + j * ud, ud);
	gp->lml = -INFINITY;
	for (int a = 0; a < nscales; a++)
		for (int b = 0; b < nnoises; b++) {
			double lml = fit_one(D, un, 1.0 / (scales[a] * scales[a]), noises[b], yt, Lt, at, gp->work);
			if (lml > gp->lml) {
				double *t = gp->L;
				gp->L = Lt, Lt = t;
				t = gp->alpha, gp->alpha = at, at = t;
				gp->lml = lml, gp->scale = scales[a], gp->noise = noises[b];
			}
		}
	free(D), free(yt), free(Lt), free(at);
	if (gp->lml == -INFINITY) {
		snprintf(err, errlen, "gp: the kernel matrix is not positive definite for any noise of the grid");
		kopt_gp_free(gp);
		return NULL;
	}
	for (size_t i = 0; i < un * ud; i++)
		gp->X[i] = X[i] / gp->scale;
	return gp;
}

void kopt_gp_predict(const struct kopt_gp *gp, const double *x, double *mean, double *sd)
{
	size_t n = gp->n, d = gp->d;
	double xs[64], *xv = xs, *heap = NULL;
	if (d > 64)
		xv = heap = malloc(sizeof(double) * d);
	if (!xv) {
		*mean = gp->y_mean, *sd = gp->y_sd;
		return;
	}
	for (size_t k = 0; k < d; k++)
		xv[k] = x[k] / gp->scale;
	double *kx = gp->work, m = 0;
	for (size_t i = 0; i < n; i++) {
		kx[i] = matern52(dist2(gp->X + i * d, xv, d));
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
	free(heap);
	double var = 1.0 - q;
	*mean = gp->y_mean + gp->y_sd * m;
	*sd = gp->y_sd * sqrt(var > 0 ? var : 0);
}

void kopt_gp_params(const struct kopt_gp *gp, double *scale, double *noise, double *lml)
{
	*scale = gp->scale, *noise = gp->noise, *lml = gp->lml;
}

void kopt_gp_free(struct kopt_gp *gp)
{
	if (!gp)
		return;
	free(gp->X), free(gp->L), free(gp->alpha), free(gp->work);
	free(gp);
}
