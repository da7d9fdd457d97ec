-- nested object double-encoded as a JSON string (json_object mode, some local models)
return { content = [==[{"analysis":"x","proposals":[{"method":"more_threads","changes":"{\"block_size_x\": 256}","reason":"r","patch":null}]}]==] }
