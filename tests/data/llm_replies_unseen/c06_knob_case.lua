return { content = [[{"analysis":"x","proposals":[{"method":"more_threads","changes":{"BLOCK_SIZE_X":256},"reason":"r","patch":null}]}]] }
