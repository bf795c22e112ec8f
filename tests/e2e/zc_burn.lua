-- The CPU-heavy handler of the Apache runs of the zero-code HTTP checks
-- (mod_lua, LuaMapHandler "^/burn/[0-9]+$"): GET or POST /burn/MS spends MS
-- ms of CPU in a Lua loop, then answers 200 "ok". Nothing of traceprof.
function handle(r)
  local ms = tonumber(r.uri:match("^/burn/(%d+)$"))
  local stop = os.clock() + ms / 1000
  local x = 0
  while os.clock() < stop do
    for i = 1, 1000 do x = x + i % 7 end
  end
  r.content_type = "text/plain"
  r:puts("ok\n")
  return apache2.OK
end
