-- The design's counter script (section 6.1), verbatim: the raw Redis
-- reference bench/gates.sh runs with redis-benchmark.
-- KEYS[1] = stock:{sale}   KEYS[2] = buyers:{sale}   ARGV[1] = userId
local left = tonumber(redis.call('GET', KEYS[1]))                     -- (1)
if not left or left <= 0 then return -1 end                           -- (2)
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -2 end  -- (3)
redis.call('DECR', KEYS[1])                                           -- (4)
redis.call('SADD', KEYS[2], ARGV[1])                                  -- (5)
return 1
