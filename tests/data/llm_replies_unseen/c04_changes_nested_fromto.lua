return { content = [[{"analysis":"x","proposals":[{"method":"more_threads","changes":{"block_size_x":{"from":128,"to":256}},"reason":"r","patch":null}]}]] }
