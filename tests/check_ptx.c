/* Check suite for core/ptx.c: hand-written PTX with known counts (loops,
 * nesting, trip counts, tensor-core and memory widths), PTX from NVRTC
 * (lines from .loc), malformed and truncated input, and the time for a
 * 5,000-line PTX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>

#include "compile/kopt_nvrtc.h"
#include "ptx.h"

static struct kopt_ptx *parse_ok(const char *text)
{
	struct kopt_ptx *p;
	char err[256];
	int rc = kopt_ptx_parse(text, strlen(text), &p, err, sizeof err);
	ck_assert_msg(rc == 0, "parse failed: %s", err);
	return p;
}

/* A tiled shape: a prologue, one loop of 16 trips, an epilogue. */
static const char *simple =
    ".version 8.5\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    "\t// .globl\tk\n"
    ".visible .entry k(\n"
    "\t.param .u64 k_param_0,\n"
    "\t.param .u64 k_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<3>;\n"
    "\t.reg .b32 \t%r<10>;\n"
    "\t.reg .f32 \t%f<20>;\n"
    "\t.reg .b64 \t%rd<8>;\n"
    "\t.shared .align 16 .b8 tile[1024];\n"
    "\n"
    "\tld.param.u64 \t%rd1, [k_param_0];\n"
    "\tmov.u32 \t%r1, 0;\n"
    "\tmov.f32 \t%f1, 0f00000000;\n"
    "$L__BB0_1:\n"
    "\tld.global.nc.v4.f32 \t{%f2, %f3, %f4, %f5}, [%rd1];\n"
    "\tst.shared.v4.f32 \t[tile], {%f2, %f3, %f4, %f5};\n"
    "\tbar.sync \t0;\n"
    "\tld.shared.f32 \t%f6, [tile+4];\n"
    "\tfma.rn.f32 \t%f1, %f6, %f2, %f1; // a comment\n"
    "\tadd.f32 \t%f1, %f1, %f3;\n"
    "\tex2.approx.f32 \t%f7, %f1;\n"
    "\tadd.s32 \t%r1, %r1, 1;\n"
    "\tsetp.lt.s32 \t%p1, %r1, 16;\n"
    "\t@%p1 bra \t$L__BB0_1;\n"
    "\tst.global.f32 \t[%rd1], %f1;\n"
    "\tret;\n"
    "\n"
    "}\n";

START_TEST(test_simple_loop)
{
	struct kopt_ptx *p = parse_ok(simple);
	ck_assert_uint_eq(p->n_functions, 1);
	const struct kopt_ptx_function *f = &p->functions[0];
	ck_assert_str_eq(f->name, "k");
	ck_assert_int_eq(f->is_entry, 1);
	ck_assert_int_eq(f->n_loops, 1);
	ck_assert_int_eq(f->regs_pred, 3);
	ck_assert_int_eq(f->regs_32, 30);
	ck_assert_int_eq(f->regs_64, 8);
	ck_assert_int_eq(f->smem_bytes, 1024);
	/* function, prologue, main loop, loop, epilogue */
	ck_assert_int_eq(f->n_regions, 5);
	const struct kopt_ptx_region *r = &p->regions[f->region];
	ck_assert_str_eq(r[1].name, "prologue");
	ck_assert_int_eq(r[1].work.insts, 3);
	ck_assert_str_eq(r[2].name, "main loop");
	ck_assert_int_eq(r[3].kind, KOPT_PTX_LOOP);
	ck_assert_int_eq(r[3].parent, f->region + 2);
	ck_assert_int_eq(r[3].depth, 2);
	ck_assert_int_eq(r[3].trip, 16);
	const struct kopt_ptx_work *w = &r[3].work;
	ck_assert_int_eq(w->ld_global, 1);
	ck_assert_int_eq(w->ld_global_bytes, 16);
	ck_assert_int_eq(w->st_shared_bytes, 16);
	ck_assert_int_eq(w->ld_shared_bytes, 4);
	ck_assert_int_eq(w->barriers, 1);
	ck_assert_int_eq(w->flops_f32, 3);
	ck_assert_int_eq(w->sfu, 1);
	ck_assert_int_eq(w->branches, 1);
	ck_assert_int_eq(w->cond_branches, 1);
	ck_assert_int_eq(r[3].weighted.flops_f32, 48);
	ck_assert_str_eq(r[4].name, "epilogue");
	ck_assert_int_eq(r[4].work.st_global_bytes, 4);
	ck_assert_int_eq(r[0].total.ld_global, 1);
	ck_assert_int_eq(r[0].weighted.ld_global_bytes, 16 * 16);
	ck_assert_int_eq(r[0].weighted.st_global, 1);
	kopt_ptx_free(p);
}
END_TEST

/* Nested loops: an outer one counting down from 4, an inner one of 8 with
 * tensor-core work; a .func with a loop whose exit is at its head. */
static const char *nested =
    ".version 8.5\n.target sm_90\n.address_size 64\n"
    ".func  (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n"
    "\tmov.u32 %r1, 0;\n"
    "$L__head:\n"
    "\tsetp.ge.s32 %p1, %r1, 10;\n"
    "\t@%p1 bra $L__done;\n"
    "\tmul.f64 %fd1, %fd1, %fd2;\n"
    "\tadd.s32 %r1, %r1, 2;\n"
    "\tbra.uni $L__head;\n"
    "$L__done:\n"
    "\tst.param.b32 [func_retval0], %r1;\n"
    "\tret;\n}\n"
    ".visible .entry mm()\n{\n"
    "\t.reg .pred %p<3>;\n\t.reg .b32 %r<30>;\n\t.reg .f32 %f<10>;\n"
    "\tmov.u32 %r2, 4;\n"
    "$L__BB1_1:\n"
    "\tcp.async.cg.shared.global [%r5], [%rd3], 16;\n"
    "\tcp.async.commit_group;\n"
    "\tcp.async.wait_group 0;\n"
    "\tbar.sync 0;\n"
    "\tmov.u32 %r3, 0;\n"
    "$L__BB1_2:\n"
    "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r6];\n"
    "\tldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r14, %r15}, [%r7];\n"
    "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r10, "
    "%r11, %r12, %r13}, {%r14, %r15}, {%f1, %f2, %f3, %f4};\n"
    "\tfma.rn.f16x2 %r20, %r21, %r22, %r20;\n"
    "\tadd.s32 %r3, %r3, 16;\n"
    "\tsetp.lt.u32 %p2, %r3, 128;\n"
    "\t@%p2 bra $L__BB1_2;\n"
    "\tadd.s32 %r2, %r2, -1;\n"
    "\tsetp.ne.s32 %p1, %r2, 0;\n"
    "\t@%p1 bra $L__BB1_1;\n"
    "\tst.global.v2.f32 [%rd1], {%f1, %f2};\n"
    "\tret;\n}\n";

START_TEST(test_nested_loops)
{
	struct kopt_ptx *p = parse_ok(nested);
	ck_assert_uint_eq(p->n_functions, 2);
	const struct kopt_ptx_function *h = &p->functions[0], *f = &p->functions[1];
	ck_assert_str_eq(h->name, "helper");
	ck_assert_int_eq(h->is_entry, 0);
	ck_assert_int_eq(h->n_loops, 1);
	const struct kopt_ptx_region *hr = &p->regions[h->region];
	ck_assert_int_eq(hr[3].trip, 5); /* 0, 2, 4, 6, 8 */
	ck_assert_int_eq(hr[3].work.flops_f64, 1);
	ck_assert_int_eq(hr[3].work.uni_branches, 1);

	ck_assert_str_eq(f->name, "mm");
	ck_assert_int_eq(f->n_loops, 2);
	const struct kopt_ptx_region *r = &p->regions[f->region];
	/* function, prologue, main loop, outer, inner, epilogue */
	ck_assert_int_eq(f->n_regions, 6);
	ck_assert_int_eq(r[3].trip, 4);
	ck_assert_int_eq(r[4].trip, 8);
	ck_assert_int_eq(r[4].depth, 3);
	ck_assert_int_eq(r[4].parent, f->region + 3);
	ck_assert_int_eq(r[3].work.cp_async, 1);
	ck_assert_int_eq(r[3].work.cp_async_bytes, 16);
	ck_assert_int_eq(r[3].work.barriers, 1);
	ck_assert_int_eq(r[4].work.ldmatrix, 2);
	ck_assert_int_eq(r[4].work.ld_shared_bytes, 16 + 8);
	ck_assert_int_eq(r[4].work.mma, 1);
	ck_assert_int_eq(r[4].work.flops_tc, 2 * 16 * 8 * 16 / 32);
	ck_assert_int_eq(r[4].work.flops_f16, 4);
	ck_assert_int_eq(r[3].total.mma, 1);
	ck_assert_int_eq(r[4].weighted.mma, 32);
	ck_assert_int_eq(r[0].weighted.mma, 32);
	ck_assert_int_eq(r[0].weighted.cp_async_bytes, 64);
	ck_assert_int_eq(r[5].work.st_global_bytes, 8);
	kopt_ptx_free(p);
}
END_TEST

START_TEST(test_mma_shapes)
{
	const char *a = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
	const char *b = "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16";
	const char *c = "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32";
	ck_assert_int_eq(kopt_ptx_mma_flops(a, strlen(a)), 4096);
	ck_assert_int_eq(kopt_ptx_mma_flops(b, strlen(b)), 2 * 64 * 128 * 16);
	ck_assert_int_eq(kopt_ptx_mma_flops(c, strlen(c)), 8192);
	ck_assert_int_eq(kopt_ptx_mma_flops("mov.u32", 7), 0);
}
END_TEST

/* wmma fragments move memory: a 16x16 f16 A fragment is 16 B a thread, a
 * 16x16 f32 D fragment 32 B (they counted as no work before). */
static const char *wmma_text =
    ".version 8.5\n.target sm_90\n.address_size 64\n"
    ".visible .entry w()\n{\n"
    "\t.reg .b32 %r<40>;\n\t.reg .f32 %f<10>;\n\t.reg .b64 %rd<4>;\n"
    "\twmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1], %r9;\n"
    "\twmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18}, [%rd2], %r9;\n"
    "\twmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd3], {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %r9;\n"
    "\tret;\n}\n";

START_TEST(test_wmma_memory)
{
	struct kopt_ptx *p = parse_ok(wmma_text);
	const struct kopt_ptx_region *r = &p->regions[p->functions[0].region];
	ck_assert_int_eq(r[0].total.ld_global, 1);
	ck_assert_int_eq(r[0].total.ld_global_bytes, 16);
	ck_assert_int_eq(r[0].total.ld_shared, 1);
	ck_assert_int_eq(r[0].total.ld_shared_bytes, 16);
	ck_assert_int_eq(r[0].total.st_global, 1);
	ck_assert_int_eq(r[0].total.st_global_bytes, 32);
	kopt_ptx_free(p);
}
END_TEST

static void expect_error(const char *text, size_t len, const char *needle)
{
	struct kopt_ptx *p = (struct kopt_ptx *)1;
	char err[256] = "";
	ck_assert_int_eq(kopt_ptx_parse(text, len, &p, err, sizeof err), -1);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err, needle) != NULL, "'%s' lacks '%s'", err, needle);
}

START_TEST(test_malformed)
{
	expect_error("", 0, "not PTX");
	expect_error("hello world\n", 12, "not PTX");
	expect_error(".version 8.5\n.target sm_90\n", 27, "no .entry");
	expect_error("a\0b", 3, "NUL");
	size_t n = strlen(simple);
	expect_error(simple, n - 3, "truncated");
	expect_error("}\n", 2, "without '{'");
	const char *bad_label = ".version 8.5\n.entry k()\n{\n\tbra.uni $L__nowhere;\n}\n";
	expect_error(bad_label, strlen(bad_label), "$L__nowhere");
}
END_TEST

/* Truncated at every offset and garbled at seeded positions: a result or
 * a sentence, never a crash (the sanitized build checks the memory). */
START_TEST(test_fuzz)
{
	size_t n = strlen(nested);
	char *buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	for (size_t cut = 0; cut <= n; cut++) {
		struct kopt_ptx *p;
		char err[256];
		if (kopt_ptx_parse(nested, cut, &p, err, sizeof err) == 0)
			kopt_ptx_free(p);
		else
			ck_assert_uint_gt(strlen(err), 0);
	}
	unsigned seed = 12345;
	static const char junk[] = "{};:@%$.\n/*[]!,0 x";
	for (int round = 0; round < 3000; round++) {
		memcpy(buf, nested, n + 1);
		for (int k = 0; k < 4; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % n;
			seed = seed * 1103515245u + 12345u;
			buf[at] = junk[(seed >> 8) % (sizeof junk - 1)];
		}
		struct kopt_ptx *p;
		char err[256];
		if (kopt_ptx_parse(buf, n, &p, err, sizeof err) == 0)
			kopt_ptx_free(p);
		else
			ck_assert_uint_gt(strlen(err), 0);
	}
	free(buf);
}
END_TEST

static const char *transpose_like =
    "#define TILE 32\n#define ROWS 8\n"
    "extern \"C\" __global__ void t(const float *in, float *out, int n)\n"
    "{\n"
    "\t__shared__ float tile[TILE][TILE + 1];\n"
    "\tint x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;\n"
    "#pragma unroll\n"
    "\tfor (int i = 0; i < TILE; i += ROWS)\n"
    "\t\ttile[threadIdx.y + i][threadIdx.x] = in[(y + i) * n + x];\n"
    "\t__syncthreads();\n"
    "#pragma unroll\n"
    "\tfor (int i = 0; i < TILE; i += ROWS)\n"
    "\t\tout[(x + i) * n + y] = tile[threadIdx.x][threadIdx.y + i];\n"
    "}\n"
    "extern \"C\" __global__ void loop(const float *in, float *out)\n"
    "{\n"
    "\tfloat acc = 0.0f;\n"
    "#pragma unroll 1\n"
    "\tfor (int k = 0; k < 64; k++)\n"
    "\t\tacc = fmaf(acc, in[k * 256 + threadIdx.x], 1.0f);\n"
    "\tout[threadIdx.x] = acc;\n"
    "}\n";

/* A 32-bit unsigned counter compared with a bound past 2^31 (written as a
 * negative immediate): 0, 1e9, 2e9 run, 3e9 stops. Read as signed it
 * stopped after one trip. */
static const char unsigned_loop[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry u(.param .u64 u_param_0)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<3>;\n\t.reg .f32 %f<3>;\n"
    "\tmov.u32 %r1, 0;\n"
    "$L__BB0_1:\n"
    "\tadd.f32 %f1, %f1, %f2;\n"
    "\tadd.s32 %r1, %r1, 1000000000;\n"
    "\tsetp.lt.u32 %p1, %r1, -1294967296;\n"
    "\t@%p1 bra $L__BB0_1;\n"
    "\tret;\n}\n";

START_TEST(test_unsigned_trip)
{
	struct kopt_ptx *p = parse_ok(unsigned_loop);
	const struct kopt_ptx_function *f = &p->functions[0];
	const struct kopt_ptx_region *r = &p->regions[f->region];
	const struct kopt_ptx_region *loop = NULL;
	for (int i = 0; i < f->n_regions; i++)
		if (r[i].kind == KOPT_PTX_LOOP)
			loop = &r[i];
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(loop->trip, 3);
	kopt_ptx_free(p);
}
END_TEST

/* Inline asm's wait loop, unrolled twice: each copy declares its labels and
 * a predicate again inside its own braces; each branch goes to the label of
 * its own scope (the first copy's was taken for both: one loop spanning
 * the two and the work between them). */
static const char scoped_labels[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry w(.param .u64 w_param_0)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .f32 %f<4>;\n"
    "\t{\n\t.reg .pred P1;\n\tWAIT:\n"
    "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2;\n"
    "\t@P1 bra DONE;\n\tbra WAIT;\n\tDONE:\n\t}\n"
    "\tfma.rn.f32 %f1, %f1, %f2, %f3;\n"
    "\t{\n\t.reg .pred P1;\n\tWAIT:\n"
    "\tmbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2;\n"
    "\t@P1 bra DONE;\n\tbra WAIT;\n\tDONE:\n\t}\n"
    "\tfma.rn.f32 %f1, %f1, %f2, %f3;\n"
    "\tret;\n}\n";

START_TEST(test_scoped_labels)
{
	struct kopt_ptx *p = parse_ok(scoped_labels);
	const struct kopt_ptx_function *f = &p->functions[0];
	ck_assert_int_eq(f->n_loops, 2);
	const struct kopt_ptx_region *r = &p->regions[f->region];
	for (int i = 0; i < f->n_regions; i++)
		if (r[i].kind == KOPT_PTX_LOOP)
			ck_assert_int_eq(r[i].work.flops_f32, 0); /* the fmas lie between the loops */
	ck_assert_int_eq(f->regs_pred, 2); /* the function's %p<2>, not each copy's P1 */
	kopt_ptx_free(p);
}
END_TEST

/* A counter's start known only on one path: the trip count is unknown. A
 * start copied from a register that holds a constant, set before an outer
 * loop that leaves it alone: trips 3 and 5. */
static const char trip_paths[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry t(.param .u64 t_param_0)\n{\n"
    "\t.reg .pred %p<8>;\n\t.reg .b32 %r<30>;\n\t.reg .f32 %f<4>;\n"
    "\tmov.u32 %r13, 0;\n"
    "\tmov.u32 %r18, %r13;\n"
    "$L__BB0_1:\n"
    "\tmul.f32 %f1, %f1, %f2;\n"
    "\tmov.u32 %r19, %r13;\n"
    "$L__BB0_2:\n"
    "\tadd.f32 %f1, %f1, %f3;\n"
    "\tadd.s32 %r19, %r19, 1;\n"
    "\tsetp.lt.u32 %p1, %r19, 5;\n"
    "\t@%p1 bra $L__BB0_2;\n"
    "\tadd.s32 %r18, %r18, 1;\n"
    "\tsetp.lt.u32 %p2, %r18, 3;\n"
    "\t@%p2 bra $L__BB0_1;\n"
    "\tsetp.eq.f32 %p5, %f1, %f2;\n"
    "\t@%p5 bra $L__BB0_T;\n"
    "\tmov.u32 %r22, 0;\n"
    "\tbra.uni $L__BB0_J;\n"
    "$L__BB0_T:\n"
    "\tmov.u32 %r22, 6;\n"
    "$L__BB0_J:\n"
    "\tmul.f32 %f2, %f2, %f2;\n"
    "$L__BB0_9:\n"
    "\tadd.f32 %f1, %f1, %f3;\n"
    "\tadd.s32 %r22, %r22, 1;\n"
    "\tsetp.lt.u32 %p6, %r22, 8;\n"
    "\t@%p6 bra $L__BB0_9;\n"
    "\tret;\n}\n";

START_TEST(test_trip_paths)
{
	struct kopt_ptx *p = parse_ok(trip_paths);
	const struct kopt_ptx_function *f = &p->functions[0];
	const struct kopt_ptx_region *r = &p->regions[f->region];
	long trips[3];
	int n = 0;
	for (int i = 0; i < f->n_regions; i++)
		if (r[i].kind == KOPT_PTX_LOOP && n < 3)
			trips[n++] = r[i].trip;
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(trips[0], 3);
	ck_assert_int_eq(trips[1], 5);
	ck_assert_int_le(trips[2], 0); /* 8 trips on one path, 2 on the other */
	kopt_ptx_free(p);
}
END_TEST

/* A bulk tensor copy with its group's commit and waits: one copy. An entry
 * calling a .func with shared arrays of its own: both sizes. */
static const char bulk_and_calls[] =
    ".version 8.0\n.target sm_90a\n.address_size 64\n"
    ".func (.param .b32 func_retval0) helper(.param .b32 helper_param_0)\n{\n"
    "\t.reg .b32 %r<3>;\n"
    "\t.shared .align 4 .b8 hbuf[2048];\n"
    "\tld.param.u32 %r1, [helper_param_0];\n"
    "\tst.shared.u32 [hbuf], %r1;\n"
    "\tst.param.b32 [func_retval0], %r1;\n"
    "\tret;\n}\n"
    ".visible .entry b(.param .u64 b_param_0)\n{\n"
    "\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n"
    "\t.shared .align 128 .b8 tile[1024];\n"
    "\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r1, %r2}], [tile];\n"
    "\tcp.async.bulk.commit_group;\n"
    "\tcp.async.bulk.wait_group.read 0;\n"
    "\tcp.async.bulk.wait_group 0;\n"
    "\t{ // callseq 0, 0\n"
    "\t.param .b32 param0;\n\tst.param.b32 [param0], %r1;\n"
    "\t.param .b32 retval0;\n"
    "\tcall.uni (retval0), \n\thelper, \n\t(\n\tparam0\n\t);\n"
    "\tld.param.b32 %r3, [retval0];\n"
    "\t} // callseq 0\n"
    "\tret;\n}\n";

START_TEST(test_bulk_and_calls)
{
	struct kopt_ptx *p = parse_ok(bulk_and_calls);
	ck_assert_uint_eq(p->n_functions, 2);
	const struct kopt_ptx_function *h = &p->functions[0], *e = &p->functions[1];
	ck_assert_int_eq(h->smem_bytes, 2048);
	ck_assert_int_eq(e->smem_bytes, 1024 + 2048);
	ck_assert_int_eq(p->regions[e->region].total.tma, 1);
	kopt_ptx_free(p);
}
END_TEST

START_TEST(test_nvrtc_ptx)
{
	const char *opts[] = {"-std=c++17"};
	struct kopt_nvrtc_job job = {.source = transpose_like, .name = "t.cu", .arch = "sm_90",
				     .options = opts, .n_options = 1};
	char *ptx, *log, err[256];
	ck_assert_int_eq(kopt_nvrtc_ptx(&job, &ptx, &log, NULL, err, sizeof err), 0);
	ck_assert_msg(ptx != NULL, "no PTX: %s", log);
	ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90"));
	ck_assert_ptr_nonnull(strstr(ptx, ".loc"));
	struct kopt_ptx *p = parse_ok(ptx);
	ck_assert_uint_eq(p->n_functions, 2);
	const struct kopt_ptx_function *t = &p->functions[0], *l = &p->functions[1];
	ck_assert_str_eq(t->name, "t");
	ck_assert_int_eq(t->n_loops, 0);
	ck_assert_int_eq(t->smem_bytes, 32 * 33 * 4);
	ck_assert_ptr_nonnull(t->src_file);
	ck_assert_ptr_nonnull(strstr(t->src_file, "t.cu"));
	const struct kopt_ptx_region *tr = &p->regions[t->region];
	ck_assert_str_eq(tr[1].name, "body");
	ck_assert_int_eq(tr[0].total.ld_global, 4);
	ck_assert_int_eq(tr[0].total.st_global, 4);
	ck_assert_int_eq(tr[0].total.ld_shared, 4);
	ck_assert_int_eq(tr[0].total.st_shared, 4);
	ck_assert_int_eq(tr[0].total.barriers, 1);
	/* the source lines of the kernel's body: 4 to 14 */
	ck_assert_int_ge(tr[0].src_first, 3);
	ck_assert_int_le(tr[0].src_last, 14);

	ck_assert_int_eq(l->n_loops, 1);
	const struct kopt_ptx_region *lr = &p->regions[l->region];
	const struct kopt_ptx_region *loop = NULL;
	for (int i = 0; i < l->n_regions; i++)
		if (lr[i].kind == KOPT_PTX_LOOP)
			loop = &lr[i];
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(loop->trip, 64);
	ck_assert_int_eq(loop->work.ld_global, 1);
	ck_assert_int_eq(loop->work.flops_f32, 2);
	ck_assert_int_eq(lr[0].weighted.flops_f32, 128);
	ck_assert_int_ge(loop->src_first, 18);
	ck_assert_int_le(loop->src_last, 20);
	kopt_ptx_free(p);
	free(ptx);
	free(log);

	/* a compile error: no PTX, the reason in the log */
	job.source = "extern \"C\" __global__ void k() { nope; }\n";
	ck_assert_int_eq(kopt_nvrtc_ptx(&job, &ptx, &log, NULL, err, sizeof err), 0);
	ck_assert_ptr_null(ptx);
	ck_assert_ptr_nonnull(strstr(log, "nope"));
	free(log);
}
END_TEST

/* CPU time of this process: the bound below holds on a loaded machine. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 5,000 lines and more: the simple kernel's function repeated under new
 * names. The parse takes well under 10 ms (about 1.5 ms of CPU in a
 * release build, docs/PTX.md); the assert is generous for sanitized builds
 * (20-50 ms there) and still far below what a quadratic pass would take. */
START_TEST(test_speed)
{
	size_t one = strlen(simple), copies = 200;
	char *big = malloc(one * copies + 64);
	ck_assert_ptr_nonnull(big);
	size_t n = 0;
	for (size_t i = 0; i < copies; i++) {
		const char *body = strstr(simple, ".visible");
		if (i == 0) {
			memcpy(big, simple, one);
			n = one;
			continue;
		}
		n += (size_t)sprintf(big + n, ".visible .entry k%zu(", i);
		const char *rest = strchr(body, '(') + 1;
		memcpy(big + n, rest, strlen(rest));
		n += strlen(rest);
	}
	big[n] = '\0';
	struct kopt_ptx *p = parse_ok(big);
	long lines = p->n_lines;
	ck_assert_int_ge(lines, 5000);
	ck_assert_uint_eq(p->n_functions, copies);
	kopt_ptx_free(p);
	double best = 1e9;
	for (int round = 0; round < 5; round++) {
		double t0 = cpu_now();
		p = parse_ok(big);
		double dt = cpu_now() - t0;
		kopt_ptx_free(p);
		best = dt < best ? dt : best;
	}
	fprintf(stderr, "check_ptx: %ld lines (%zu bytes) of PTX in %.3f ms\n", lines, n, best * 1e3);
	ck_assert_msg(best < 1.0, "parse took %.1f ms", best * 1e3);
	free(big);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ptx");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_simple_loop);
	tcase_add_test(tc, test_nested_loops);
	tcase_add_test(tc, test_unsigned_trip);
	tcase_add_test(tc, test_scoped_labels);
	tcase_add_test(tc, test_trip_paths);
	tcase_add_test(tc, test_bulk_and_calls);
	tcase_add_test(tc, test_mma_shapes);
	tcase_add_test(tc, test_wmma_memory);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_fuzz);
	tcase_add_test(tc, test_nvrtc_ptx);
	tcase_add_test(tc, test_speed);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
