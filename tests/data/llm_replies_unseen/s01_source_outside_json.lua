return { content = [==[Here is a faster kernel. I keep the source outside the JSON so it is easier to read.

```cuda
#define BLOCK 256
extern "C" __global__ void synth_gelu_synth(float *__restrict__ y, const float *__restrict__ x, int n)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
```

```json
{
  "analysis": "one thread per element, fast tanh",
  "entry": "synth_gelu_synth",
  "knobs": [{"name": "BLOCK", "values": [128, 256, 512], "default": 256}],
  "constraints": [],
  "launch": {"grid": ["cdiv(n, BLOCK)", 1, 1], "block": ["BLOCK", 1, 1], "smem": 0}
}
```
]==] }
