-- one proposal per line (JSON Lines), no enclosing list
return { knobs = {{name="block_size_x", values={64,128,256,512}, family="block"}, {name="UNROLL", values={1,2,4}, family="unroll"}},
 content = '{"method": "more_threads", "changes": {"block_size_x": 256}, "reason": "a", "patch": null}\n{"method": "more_unroll", "changes": {"UNROLL": 4}, "reason": "b", "patch": null}\n' }
