-- vLLM --reasoning-parser deepseek_r1 when the model never writes </think>: everything lands in
-- message.reasoning_content and content is null
return { message = { role = "assistant", content = require("kopt.json").null, reasoning_content = [[Okay, the kernel is memory bound, so more threads per block should help. Final answer:
{"analysis":"memory bound","proposals":[{"method":"more_threads","changes":{"block_size_x":256},"reason":"more warps in flight","patch":null}]}]] } }
