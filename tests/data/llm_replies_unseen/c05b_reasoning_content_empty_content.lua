return { message = { role = "assistant", content = "", reasoning = [[{"analysis":"memory bound","proposals":[{"method":"more_threads","changes":{"block_size_x":256},"reason":"r","patch":null}]}]] } }
