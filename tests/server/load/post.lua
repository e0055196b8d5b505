-- wrk script: POSTs real sentences (one prebuilt JSON body per line of a file) to one route.
--   wrk ... -s post.lua URL -- /embed bodies.jsonl
local bodies, path, i = {}, "/embed", 0

function init(args)
  path = args[1] or path
  for line in io.lines(args[2]) do bodies[#bodies + 1] = line end
  i = math.random(#bodies)
end

function request()
  i = i % #bodies + 1
  return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, bodies[i])
end
