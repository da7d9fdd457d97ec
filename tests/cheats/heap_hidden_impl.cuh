// heap_hidden's helper (HIDE=0): the device-heap record and block, as in
// tests/cheats/heap_xeval.cu. kopt's test for "this candidate allocates on
// the device heap" (backends/cuda.lua uses_heap) reads the candidate's own
// source file only, so an allocation in a header it includes is not seen.
#ifndef HEAP_HIDDEN_IMPL_CUH
#define HEAP_HIDDEN_IMPL_CUH
__device__ __forceinline__ void *hh_alloc(size_t bytes) { return malloc(bytes); }
__device__ __forceinline__ void hh_release(void *p) { free(p); }
#endif
