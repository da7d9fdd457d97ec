-- the model writes its only JSON inside the reasoning block, then one closing sentence
return { content = [[<think>
The kernel is memory bound; more threads per block should help. I'll answer:
{"analysis":"memory bound","proposals":[{"method":"more_threads","changes":{"block_size_x":256},"reason":"more warps in flight","patch":null}]}
</think>

I proposed raising block_size_x to 256.]] }
