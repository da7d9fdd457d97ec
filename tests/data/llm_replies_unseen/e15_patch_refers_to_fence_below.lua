-- (llm_mode none / no grammar) JSON answer whose patch points at the full kernel fenced after it
return { content = [==[```json
{"analysis": "store path is fine; cap registers", "proposals": [{"method": "launch_bounds", "changes": {}, "reason": "cap registers", "patch": "see the full kernel below"}]}
```

Full kernel:
```cuda
// Test kernel for specs: c = a + b, one element per thread.
extern "C" __global__ void __launch_bounds__(512) vector_add(float *c, const float *a, const float *b, int n)
{
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
```
]==] }
