-- an edits list of line-range objects whose "content" is the whole new entry function
return { kernel = "kernels/reduce.cu", entry = "reduce_rows", knobs = {{name="UNROLL", values={1,2,4,8}, family="unroll"}}, show_new = true,
  content = [==[{"analysis":"x","proposals":[{"method":"other","changes":{},"reason":"r","edits":[{"start_line":39,"end_line":41,"content":"extern \"C\" __global__ void __launch_bounds__(BLOCK_SIZE, 2)\n\treduce_rows(const float *__restrict__ x, float *__restrict__ y, int rows, int cols)\n{"}]}]}]==] }
