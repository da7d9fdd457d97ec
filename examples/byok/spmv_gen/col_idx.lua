-- Column indices of each row, sorted and distinct: the row's l entries are
-- spread over l equal strides of the columns, one random column in each.
-- Reads the row pointers generated before it (ctx.inputs.row_ptr, a 1-based
-- array of the rows + 1 values).
return function(ctx)
  local rp, cols = ctx.inputs.row_ptr, ctx.sizes.cols
  assert(rp, "row_ptr must be generated first")
  local rows = #rp - 1
  local ci, k = {}, 0
  for r = 1, rows do
    local l = rp[r + 1] - rp[r]
    if l > 0 then
      local step = cols // l
      for j = 0, l - 1 do
        k = k + 1
        ci[k] = j * step + ctx.rng:random(0, step - 1)
      end
    end
  end
  assert(k == ctx.n, "col_idx has nnz elements")
  return ci
end
