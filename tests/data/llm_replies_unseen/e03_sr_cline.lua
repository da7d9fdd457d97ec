-- Cline's newer search/replace dialect
return { content = [==[{"analysis":"x","proposals":[{"method":"other","changes":{},"reason":"r","patch":"------- SEARCH\n        c[i] = a[i] + b[i];\n=======\n        c[i] = b[i] + a[i];\n+++++++ REPLACE"}]}]==] }
