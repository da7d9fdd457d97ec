-- patch with double-escaped newlines: after JSON decode the diff has literal "\n" sequences
return { content = [[{"analysis":"x","proposals":[{"method":"loop_unrolling","changes":{},"reason":"r","patch":"--- a/kernel.cu\\n+++ b/kernel.cu\\n@@ -5,2 +5,2 @@\\n     if (i < n)\\n-        c[i] = a[i] + b[i];\\n+        c[i] = b[i] + a[i];\\n"}]}]] }
