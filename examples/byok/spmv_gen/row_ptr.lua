-- CSR row pointers for `rows` rows and exactly `nnz` nonzeros: row weights
-- w = 0.05 + u^4 (u uniform: a few long rows, many short ones), the row
-- pointer the rounded cumulative share of nnz. A row is at most `cols` long
-- (checked). The structure is the problem: the spec marks it fixed.
return function(ctx)
  local rows, nnz, cols = ctx.sizes.rows, ctx.sizes.nnz, ctx.sizes.cols
  assert(ctx.n == rows + 1, "row_ptr has rows + 1 elements")
  local w, tot = {}, 0
  for i = 1, rows do
    local u = ctx.rng:uniform()
    w[i] = 0.05 + u * u * u * u
    tot = tot + w[i]
  end
  local rp, acc = { 0 }, 0
  for i = 1, rows do
    acc = acc + w[i]
    rp[i + 1] = math.floor(nnz * acc / tot + 0.5)
  end
  rp[rows + 1] = nnz
  for i = 1, rows do
    assert(rp[i + 1] - rp[i] <= cols, "a row longer than cols")
  end
  return rp
end
