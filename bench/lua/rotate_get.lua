-- wrk script: GET the media of objects PREFIX%08u (0 <= u < COUNT) in bucket BUCKET, each wrk
-- thread walking the names from its own starting point, and print one JSON summary line.
-- Configured by environment: WRK_BUCKET, WRK_PREFIX (URL-encoded, e.g. "small%2F"), WRK_COUNT.
local bucket = os.getenv("WRK_BUCKET") or "bench"
local prefix = os.getenv("WRK_PREFIX") or "small%2F"
local count = tonumber(os.getenv("WRK_COUNT") or "1000")

local next_id = 0
function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
end

local i = 0
function init(args)
  i = ((tid or 0) * 7919) % count
end

function request()
  i = (i + 1) % count
  return wrk.format("GET", string.format("/storage/v1/b/%s/o/%s%08u?alt=media",
                                         bucket, prefix, i))
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,' ..
    '"write":%d,"status":%d,"timeout":%d,"lat_p50_us":%d,"lat_p99_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(99)))
end
