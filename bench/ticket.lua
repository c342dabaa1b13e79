-- wrk: shoppers ask for their place, GET /sale/{sku}/ticket, each request
-- with the next of the valid shopper JWTs in the file $JWTS (one a line),
-- round and round: the flood of a crowd pressing again.
local auth = {}
for line in io.lines(os.getenv("JWTS")) do
  auth[#auth + 1] = "Bearer " .. line
end
local path = "/sale/" .. os.getenv("SKU") .. "/ticket"
local i = 0

function init(args)
  -- Threads start at different shoppers.
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  i = math.random(#auth)
end

function request()
  i = i % #auth + 1
  return wrk.format("GET", path, { ["Authorization"] = auth[i] })
end
