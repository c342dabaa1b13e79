-- wrk: a waiting shopper polls its place, GET /sale/{sku}/status?token=...
-- with the valid ticket token in $TICKET (the same request is sent to the
-- bare server, so both carry the same bytes).
wrk.path = "/sale/" .. os.getenv("SKU") .. "/status?token=" .. os.getenv("TICKET")
