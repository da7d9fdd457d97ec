// C = A * B^T on Hopper tensor cores (sm_90a): A is M x K and B is N x K,
// both row-major (K contiguous: the layout of a linear layer's weights), f16
// or bf16 in, f32 accumulate, C is M x N row-major in f16 (or f32 with
// C_F32=1).
//
// One CTA computes a BM x BN tile of C with BM = 64 * WG_M * CONSUMERS:
//  - warpgroup 0 is the producer: one thread issues the bulk tensor copies
//    (TMA) of A's and B's BK=64-wide slices into a ring of STAGES
//    shared-memory buffers, 128-byte swizzled, each stage completing on its
//    own "full" mbarrier;
//  - warpgroups 1..CONSUMERS wait on "full", run warpgroup MMAs
//    (wgmma.mma_async m64nBNk16, B and A from shared memory) on their
//    WG_M x 64 rows, keeping one k-tile's MMAs in flight, and arrive on a
//    stage's "empty" mbarrier once the MMAs that read it are done, which
//    hands the buffer back to the producer.
// Registers move from the producer to the consumers with setmaxnreg, so the
// accumulators (WG_M * BN / 2 floats per thread) stay in registers.
// Tiles are visited in groups of GROUP_M rows of tiles (L2 reuse of B). A
// CTA loops over tiles t = blockIdx.x, + gridDim.x, ...: launched with one
// CTA per tile it is the classic grid, with fewer (PERSISTENT=1 in the spec:
// one per SM) the producer loads the next tile while the consumers store
// this one.
//
// Kernel parameters: A, B, C, M, N, K, then tmA and tmB, tensor maps
// (CUtensorMap, 128 bytes, by value) that the worker builds over A with box
// {64 * WG_M rows, 64} and over B with box {BN rows, 64}, 128-byte swizzle;
// see specs/matmul_f16_sm90.json. M, N and K must be multiples of BM, BN
// and 64.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned long long u64;
typedef unsigned int u32;

#ifndef BN
#define BN 128
#endif
#ifndef WG_M
#define WG_M 1
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef AB_BF16
#define AB_BF16 0
#endif
#ifndef C_F32
#define C_F32 0
#endif

#define BK 64
#define BM (64 * WG_M * CONSUMERS)
#define THREADS (128 * (CONSUMERS + 1))

#if AB_BF16
typedef __nv_bfloat16 elem_t;
#define KOPT_AB "bf16"
#else
typedef __half elem_t;
#define KOPT_AB "f16"
#endif

#if BN != 64 && BN != 128 && BN != 256
#error "BN must be 64, 128 or 256"
#endif

// a CUtensorMap, byte for byte
struct __align__(64) tensor_map {
	unsigned long long words[16];
};

#define A_TILE_BYTES (64 * WG_M * BK * 2)
#define A_STAGE_BYTES (BM * BK * 2)
#define B_STAGE_BYTES (BN * BK * 2)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)

__device__ __forceinline__ u32 smem_u32(const void *p)
{
	return (u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(u64 *bar, int count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(u64 *bar, u32 bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
		     "r"(bytes));
}

__device__ __forceinline__ void mbar_arrive(u64 *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)));
}

__device__ __forceinline__ void mbar_wait(u64 *bar, int parity)
{
	asm volatile("{\n.reg .pred done;\n"
		     "WAIT_%=:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
		     "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
		     "r"(parity));
}

__device__ __forceinline__ void tma_load_2d(void *dst, const tensor_map *map, u64 *bar, int x,
					    int y)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
		     "l"((u64)map), "r"(smem_u32(bar)), "r"(x), "r"(y)
		     : "memory");
}

// Shared-memory matrix descriptor of a K-major tile with 128-byte swizzle:
// rows of 64 elements (128 bytes), groups of 8 rows 1024 bytes apart.
__device__ __forceinline__ u64 smem_desc(const void *p)
{
	u64 addr = smem_u32(p);
	u64 d = (addr & 0x3FFFF) >> 4;
	d |= (u64)1 << 16;          // leading byte offset (unused with this swizzle)
	d |= (u64)(1024 >> 4) << 32; // stride byte offset: 8 rows of 128 bytes
	d |= (u64)1 << 62;          // 128-byte swizzle
	return d;
}

__device__ __forceinline__ void wgmma_fence()
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void wgmma_n64(float *d, u64 da, u64 db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32." KOPT_AB "." KOPT_AB " "
		     "{"
		     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
		     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
		     "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
		       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
		       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
		       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		     : "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_n128(float *d, u64 da, u64 db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32." KOPT_AB "." KOPT_AB " "
		     "{"
		     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
		     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
		     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
		     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
		     "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
		       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
		       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
		       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
		       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
		       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
		       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		     : "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_n256(float *d, u64 da, u64 db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n256k16.f32." KOPT_AB "." KOPT_AB " "
		     "{"
		     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
		     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
		     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
		     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
		     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
		     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
		     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
		     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
		     "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
		       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
		       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
		       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
		       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
		       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
		       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
		       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
		       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
		       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
		       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
		       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
		       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
		       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
		       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
		     : "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_tile(float *d, u64 da, u64 db, int scale_d)
{
#if BN == 64
	wgmma_n64(d, da, db, scale_d);
#elif BN == 128
	wgmma_n128(d, da, db, scale_d);
#else
	wgmma_n256(d, da, db, scale_d);
#endif
}

// Tile t in launch order: GROUP_M rows of tiles at a time, column by column
// within a group, so CTAs running together share B's columns in L2.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int *tm, int *tn)
{
	const int per_group = GROUP_M * tiles_n;
	const int first_m = (t / per_group) * GROUP_M;
	const int rows = min(tiles_m - first_m, GROUP_M);
	*tm = first_m + (t % per_group) % rows;
	*tn = (t % per_group) / rows;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    matmul_sm90(const elem_t *A, const elem_t *B,
#if C_F32
		float *C,
#else
		__half *C,
#endif
		int M, int N, int K, const __grid_constant__ tensor_map tmA,
		const __grid_constant__ tensor_map tmB)
{
	// A and B are read through tmA and tmB only; the pointers keep the
	// argument list the reference's (which takes the first six)
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	// the swizzle pattern repeats every 1024 bytes: tiles start on that
	unsigned char *smem =
	    (unsigned char *)(((unsigned long long)smem_raw + 1023) & ~(unsigned long long)1023);
	__shared__ __align__(8) u64 full[STAGES], empty[STAGES];

	const int wg = threadIdx.x / 128;
	const int tid = threadIdx.x % 128;
	const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
	const int k_tiles = K / BK;

	if (threadIdx.x == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(&full[s], 1);
			mbar_init(&empty[s], CONSUMERS);
		}
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
	}
	__syncthreads();

	if (wg == 0) {
		asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
		if (tid == 0) {
			// `it` counts k-tiles over all of this CTA's tiles: it picks
			// the stage and the phase of its barriers
			int it = 0;
			for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
				int tile_m, tile_n;
				tile_coords(t, tiles_m, tiles_n, &tile_m, &tile_n);
				for (int kt = 0; kt < k_tiles; kt++, it++) {
					int s = it % STAGES;
					if (it >= STAGES)
						mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
					unsigned char *a = smem + s * STAGE_BYTES;
					unsigned char *b = a + A_STAGE_BYTES;
					mbar_expect_tx(&full[s], STAGE_BYTES);
					for (int c = 0; c < CONSUMERS; c++)
						tma_load_2d(a + c * A_TILE_BYTES, &tmA, &full[s], kt * BK,
							    tile_m * BM + c * 64 * WG_M);
					tma_load_2d(b, &tmB, &full[s], kt * BK, tile_n * BN);
				}
			}
		}
	} else {
		asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
		const int c = wg - 1;
		float acc[WG_M][BN / 2];
		int it = 0;
		for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
			int tile_m, tile_n;
			tile_coords(t, tiles_m, tiles_n, &tile_m, &tile_n);
#pragma unroll
			for (int m = 0; m < WG_M; m++)
#pragma unroll
				for (int i = 0; i < BN / 2; i++)
					acc[m][i] = 0.0f;
			for (int kt = 0; kt < k_tiles; kt++, it++) {
				int s = it % STAGES;
				mbar_wait(&full[s], (it / STAGES) & 1);
				unsigned char *a = smem + s * STAGE_BYTES + c * A_TILE_BYTES;
				unsigned char *b = smem + s * STAGE_BYTES + A_STAGE_BYTES;
				wgmma_fence();
#pragma unroll
				for (int k = 0; k < BK / 16; k++) {
					u64 db = smem_desc(b + k * 32);
#pragma unroll
					for (int m = 0; m < WG_M; m++)
						wgmma_tile(acc[m], smem_desc(a + m * 64 * BK * 2 + k * 32), db,
							   1);
				}
				wgmma_commit();
				// one group stays in flight: once the previous k-tile's MMAs
				// are done, its stage goes back to the producer
				wgmma_wait<1>();
				if (kt > 0 && tid == 0)
					mbar_arrive(&empty[(it - 1) % STAGES]);
			}
			wgmma_wait<0>();
			if (tid == 0)
				mbar_arrive(&empty[(it - 1) % STAGES]);
			// the producer is already loading the next tile while this one is
			// stored
			// epilogue: fragment i of an m64nBN tile sits at row
			// 16*warp + lane/4 (+8 for i%4 >= 2), column 8*(i/4) + 2*(lane%4) + i%2
			const int warp = tid / 32, lane = tid % 32;
#pragma unroll
			for (int m = 0; m < WG_M; m++) {
				const int row0 = tile_m * BM + c * 64 * WG_M + m * 64 + warp * 16 + lane / 4;
#pragma unroll
				for (int j = 0; j < BN / 8; j++) {
					const int col = tile_n * BN + j * 8 + 2 * (lane % 4);
#pragma unroll
					for (int h = 0; h < 2; h++) {
						size_t at = (size_t)(row0 + 8 * h) * N + col;
						float x = acc[m][4 * j + 2 * h], y = acc[m][4 * j + 2 * h + 1];
#if C_F32
						*(float2 *)&C[at] = make_float2(x, y);
#else
						*(__half2 *)&C[at] = __floats2half2_rn(x, y);
#endif
					}
				}
			}
		}
	}
}
