-- "launch_bounds" proposal whose patch is just the new signature line
return { show_new = true, content = [==[{"analysis":"x","proposals":[{"method":"launch_bounds","changes":{},"reason":"cap registers","patch":"extern \"C\" __global__ void __launch_bounds__(256) vector_add(float *c, const float *a, const float *b, int n)"}]}]==] }
