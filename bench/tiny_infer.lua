-- wrk script: POST one row to the tiny MLP with the KServe v2 binary tensor extension.
-- Used by bench/throughput.sh.
local header = '{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32",' ..
               '"parameters":{"binary_data_size":64}}],' ..
               '"parameters":{"binary_data_output":true}}'
local row = string.rep(string.char(0, 0, 128, 63), 16)  -- sixteen 1.0f, little endian
wrk.method = "POST"
wrk.body = header .. row
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = tostring(#header)

local failures = 0
function response(status, headers, body)
  if status ~= 200 then failures = failures + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("non-200 responses: %d\n", summary.errors.status))
  for _, p in pairs({50, 90, 99}) do
    io.write(string.format("p%d: %.0f us\n", p, latency:percentile(p)))
  end
end
