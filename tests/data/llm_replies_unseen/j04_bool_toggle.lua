-- a 0/1 switch knob proposed as true
return { knobs = {{name="block_size_x", values={64,128,256,512}, family="block"}, {name="USE_LDG", values={0,1}, family="toggle"}},
 content = [==[{"analysis":"x","proposals":[{"method":"toggle_feature","changes":{"USE_LDG":true},"reason":"r","patch":null}]}]==] }
