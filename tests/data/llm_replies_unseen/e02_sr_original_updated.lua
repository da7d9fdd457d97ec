-- old aider dialect: <<<<<<< ORIGINAL / >>>>>>> UPDATED
return { content = [==[{"analysis":"x","proposals":[{"method":"other","changes":{},"reason":"r","patch":"<<<<<<< ORIGINAL\n        c[i] = a[i] + b[i];\n=======\n        c[i] = b[i] + a[i];\n>>>>>>> UPDATED"}]}]==] }
