-- a local model answering one JSON object per proposal, each in its own fence
return { knobs = {{name="block_size_x", values={64,128,256,512}, family="block"}, {name="UNROLL", values={1,2,4}, family="unroll"}},
 content = [==[Here are two proposals.

Proposal 1:
```json
{"method": "more_threads", "changes": {"block_size_x": 256}, "reason": "more warps in flight", "patch": null}
```

Proposal 2:
```json
{"method": "more_unroll", "changes": {"UNROLL": 4}, "reason": "more loads in flight", "patch": null}
```
]==] }
