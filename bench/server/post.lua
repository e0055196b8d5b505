-- wrk script of bench/server: POSTs prebuilt JSON bodies (one per line of a file) to one route,
-- in turn, and prints one JSON line with requests/s, latency percentiles and errors at the end.
--   wrk -t1 -c64 -d30s --latency -s post.lua URL -- /v1/embeddings bodies.jsonl
local bodies, path, i = {}, "/v1/embeddings", 0

function init(args)
  path = args[1] or path
  for line in io.lines(args[2]) do bodies[#bodies + 1] = line end
  i = math.random(#bodies)
end

function request()
  i = i % #bodies + 1
  return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, bodies[i])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_s":%.3f,"requests_per_s":%.3f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"mean_ms":%.3f,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3, latency.mean / 1e3, e.connect, e.read, e.write, e.status, e.timeout))
end
