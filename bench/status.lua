-- wrk: a waiting shopper polls its place, GET /sale/{sku}/status?token=...
-- with the valid ticket token in $TICKET and its sign-in in $POLLER_JWT,
-- as the page sends it (the same request is sent to the bare server, so
-- both carry the same bytes). A ticket polled this fast without the
-- sign-in is told 429 past the room's limit: a copy of a ticket holds no
-- one, and is slowed instead.
wrk.path = "/sale/" .. os.getenv("SKU") .. "/status?token=" .. os.getenv("TICKET")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("POLLER_JWT")
