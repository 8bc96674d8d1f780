-- requires:
-- Walking a thread's namespaces in bounded steps from a cursor the client holds.
-- Used by the read-only walks (export_thread, check_thread).
--
-- The cursor is { rc, on, ns, at }: rc is the SSCAN cursor of the batch of the thread root
-- that holds ns; on is "1" when ns is the namespace the walk stopped in (a namespace may be
-- "", so it needs the flag) and at the visitor's own position inside it ("": its start).
-- Namespaces of one batch are visited in sorted order, so a walk resumes after the ones it has
-- done. SSCAN's guarantee holds: every namespace present for the whole walk is visited.

-- visit(ns, at) returns nil when it is done with ns, or the position to resume at when its
-- budget ran out. Returns the cursor to go on from, or nil when every namespace is done.
local function walk_namespaces(root, cursor, visit)
  local rc, on, current, at = cursor[1], cursor[2] == "1", cursor[3], cursor[4]
  while true do
    local reply = redis.call("SSCAN", root, rc, "COUNT", 100)
    local batch = reply[2]
    table.sort(batch)
    for _, ns in ipairs(batch) do
      if not on or ns >= current then
        local resume = (on and ns == current) and at or ""
        on = false
        local stop = visit(ns, resume)
        if stop then return { rc, "1", ns, stop } end
      end
    end
    on = false
    if reply[1] == "0" then return nil end
    rc = reply[1]
  end
end
