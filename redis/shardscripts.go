package redis

import "github.com/redis/rueidis"

// The scripts of a sale split over shards (ShardedGate). Each shard is a
// sale of the plain gate, under its own hash tag ({saleID:k}), so the plain
// gate's scripts take its reserves, restocks, rebuilds and pauses; the
// scripts here add what only shards need, each on one shard's keys:
//
//	meta     also: inc (the sale's incarnation: changed by a load or a full
//	         rebuild, so transfers of an older one are refused), gen (the
//	         epoch the shard was last built at), total and shards (the
//	         sale's), xseq (counts transfer steps, for consistent reads
//	         across shards), minadm (see the reserve script)
//	xout     hash: transfer id → "to\x1fn\x1fgen", every debit ever made
//	         here, so a repeated debit is recognised
//	xpend    hash: the same, for the debits not yet seen credited
//	xin      hash: transfer id → "from\x1fn", every credit taken here
//	xpeer    hash: shard → the lowest gen of it whose transfers are still
//	         credited here (raised when that shard is rebuilt)
//	claims   hash: payment fingerprint → "reservation\x1fshard", the
//	         instruments homed on this shard and the live hold using each
//
// A shard whose counter is missing, not loaded, or written by another
// cluster node than the one serving it (see scripts.go) is "not usable":
// nothing moves units in or out of it.

// shardFieldsLua sets a shard's sale-wide fields, only where missing
// unless ARGV[5] is '1', and counts a transfer step.
//
//	KEYS: 1 meta
//	ARGV: 1 inc, 2 gen, 3 total, 4 shards, 5 overwrite
const shardFieldsLua = `
local f = {'inc', ARGV[1], 'gen', ARGV[2], 'total', ARGV[3], 'shards', ARGV[4]}
for i = 1, #f, 2 do
  if ARGV[5] == '1' or redis.call('HEXISTS', KEYS[1], f[i]) == 0 then
    redis.call('HSET', KEYS[1], f[i], f[i + 1])
  end
end
redis.call('HINCRBY', KEYS[1], 'xseq', 1)
return 1
`

// shardStateLua reads a shard in one step:
// {usable, counter, paused, epoch, allotment, won, restocked, audited, gen,
// xseq, total, shards, inc, then per pending debit: id, "to\x1fn\x1fgen"}.
//
//	KEYS: 1 ctr, 2 meta, 3 xpend, 4 layout 1's stock
const shardStateLua = `
local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[2], 'loaded', 'paused', 'epoch', 'initial', 'won', 'restocked', 'audited',
  'gen', 'xseq', 'total', 'shards', 'inc', 'node')
local usable = 1
if not stock or m[1] ~= '1' or redis.call('EXISTS', KEYS[4]) == 1 or
  (m[13] and m[13] ~= redis.pcall('CLUSTER', 'MYID')) then usable = 0 end
local out = {usable, stock or '0', m[2] or '0', m[3] or '0', m[4] or '0', m[5] or '0', m[6] or '0',
  m[7] or '0', m[8] or '0', m[9] or '0', m[10] or '0', m[11] or '0', m[12] or ''}
local p = redis.call('HGETALL', KEYS[3])
for i = 1, #p do out[#out + 1] = p[i] end
return out
`

// xseqLua reads a shard's transfer step count and whether it took the
// credits of the transfer ids given, in one step: {xseq, 1 or 0 each}.
//
//	KEYS: 1 meta, 2 xin
//	ARGV: transfer ids
const xseqLua = `
local out = {tonumber(redis.call('HGET', KEYS[1], 'xseq') or '0')}
for i = 1, #ARGV do out[#out + 1] = redis.call('HEXISTS', KEYS[2], ARGV[i]) end
return out
`

// transferOutLua debits n units for a transfer to another shard, and
// records the debit as in flight. It returns {code, counter, gen}: 1
// debited; 0 this transfer was debited before (nothing done); -1 another
// incarnation of the sale; -2 not usable; -3 paused, or the counter
// disagrees with the shard's bookkeeping (a shard that may not sell may
// not give either); -4 fewer than n units left.
//
//	KEYS: 1 ctr, 2 meta, 3 audit, 4 xout, 5 xpend, 6 layout 1's stock
//	ARGV: 1 transfer id, 2 to shard, 3 n, 4 inc, 5 source, 6 now ms,
//	      7 audit max length
const transferOutLua = `
local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[2], 'loaded', 'paused', 'node', 'inc', 'gen', 'initial', 'won', 'restocked')
if not stock or m[1] ~= '1' or redis.call('EXISTS', KEYS[6]) == 1 or
  (m[3] and m[3] ~= redis.pcall('CLUSTER', 'MYID')) then return {-2, 0, '0'} end
local left = tonumber(stock)
local gen = m[5] or '0'
if m[4] ~= ARGV[4] then return {-1, left, gen} end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return {0, left, gen} end
if m[2] == '1' or left + tonumber(m[7] or '0') - tonumber(m[8] or '0') ~= tonumber(m[6] or '0') then
  return {-3, left, gen}
end
local n = tonumber(ARGV[3])
if left < n then return {-4, left, gen} end
left = redis.call('DECRBY', KEYS[1], n)
local e = ARGV[2] .. '\31' .. ARGV[3] .. '\31' .. gen
redis.call('HSET', KEYS[4], ARGV[1], e)
redis.call('HSET', KEYS[5], ARGV[1], e)
redis.call('HINCRBY', KEYS[2], 'initial', -n)
redis.call('HINCRBY', KEYS[2], 'audited', -n)
redis.call('HINCRBY', KEYS[2], 'xseq', 1)
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'op', 'transfer-out', 'source', ARGV[5],
  'delta', -n, 'counter', left, 'res', ARGV[1], 'at', ARGV[6], 'seq', seq)
return {1, left, gen}
`

// transferInLua credits a transfer's units, once per transfer id. It
// returns 1 credited; 0 credited before (nothing done); -1 refused for
// good (another incarnation of the sale, or the sending shard was rebuilt
// since the debit, which its rebuild accounted for); -2 not usable now, or
// being rebuilt (try again later). Only -1 lets the sender take the units
// back, so it must be final: incarnations are random and never return,
// and a fence only rises.
//
//	KEYS: 1 ctr, 2 meta, 3 audit, 4 xin, 5 xpeer, 6 layout 1's stock
//	ARGV: 1 transfer id, 2 from shard, 3 n, 4 gen of the debit, 5 inc,
//	      6 source, 7 now ms, 8 audit max length
const transferInLua = `
local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[2], 'loaded', 'node', 'inc')
if not stock or m[1] ~= '1' or not m[3] or redis.call('EXISTS', KEYS[6]) == 1 or
  (m[2] and m[2] ~= redis.pcall('CLUSTER', 'MYID')) then return -2 end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return 0 end
if m[3] ~= ARGV[5] then return -1 end
local floor = redis.call('HGET', KEYS[5], ARGV[2])
if floor and tonumber(ARGV[4]) < tonumber(floor) then return -1 end
local n = tonumber(ARGV[3])
local left = redis.call('INCRBY', KEYS[1], n)
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2] .. '\31' .. ARGV[3])
redis.call('HINCRBY', KEYS[2], 'initial', n)
redis.call('HINCRBY', KEYS[2], 'audited', n)
redis.call('HINCRBY', KEYS[2], 'xseq', 1)
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'op', 'transfer-in', 'source', ARGV[6],
  'delta', n, 'counter', left, 'res', ARGV[1], 'at', ARGV[7], 'seq', seq)
return 1
`

// transferEndLua ends a debit in flight: finished (its credit was seen) or,
// with ARGV[2] '1', refunded (the units come back to this shard's
// counter). It returns 1 done, 0 nothing in flight under the id, -2 not
// usable (a refund waits).
//
//	KEYS: 1 ctr, 2 meta, 3 audit, 4 xpend, 5 layout 1's stock
//	ARGV: 1 transfer id, 2 refund, 3 source, 4 now ms, 5 audit max length
const transferEndLua = `
local e = redis.call('HGET', KEYS[4], ARGV[1])
if not e then return 0 end
if ARGV[2] == '1' then
  local m = redis.call('HMGET', KEYS[2], 'loaded', 'node')
  if not redis.call('GET', KEYS[1]) or m[1] ~= '1' or redis.call('EXISTS', KEYS[5]) == 1 or
    (m[2] and m[2] ~= redis.pcall('CLUSTER', 'MYID')) then return -2 end
  local a = string.find(e, '\31', 1, true)
  local b = string.find(e, '\31', a + 1, true)
  local n = tonumber(string.sub(e, a + 1, b - 1))
  local left = redis.call('INCRBY', KEYS[1], n)
  redis.call('HINCRBY', KEYS[2], 'initial', n)
  redis.call('HINCRBY', KEYS[2], 'audited', n)
  local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'op', 'transfer-refund', 'source', ARGV[3],
    'delta', n, 'counter', left, 'res', ARGV[1], 'at', ARGV[4], 'seq', seq)
end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'xseq', 1)
return 1
`

// fenceLua runs on every shard that keeps selling while others are rebuilt:
// it refuses, from now on, credits of transfers those others debited
// before their rebuild (their rebuild counts what they had), and advances
// the shard's epoch to the rebuild's, keeping admissions of the older
// epochs (the shard's spent admissions are intact) from minadm on.
//
//	KEYS: 1 meta, 2 xpeer
//	ARGV: 1 epoch, then the rebuilt shards
const fenceLua = `
for i = 2, #ARGV do
  local f = redis.call('HGET', KEYS[2], ARGV[i])
  if not f or tonumber(f) < tonumber(ARGV[1]) then redis.call('HSET', KEYS[2], ARGV[i], ARGV[1]) end
end
local e = redis.call('HGET', KEYS[1], 'epoch')
if e and tonumber(e) < tonumber(ARGV[1]) then
  if not redis.call('HGET', KEYS[1], 'minadm') then redis.call('HSET', KEYS[1], 'minadm', e) end
  redis.call('HSET', KEYS[1], 'epoch', ARGV[1])
end
redis.call('HINCRBY', KEYS[1], 'xseq', 1)
return 1
`

// wipeShardLua begins a shard's rebuild: paused from this step on (the
// plain gate's rebuild then takes it out of service while it writes the
// holds, and records the counter it replaces), its transfer ledgers and
// claims gone (the rebuild recomputes what they stood for from the record
// and the other shards), and no incarnation until the rebuild sets it
// again, so that no unit moves in or out before its new allotment is set.
//
//	KEYS: 1 meta, 2 xout, 3 xpend, 4 xin, 5 xpeer, 6 claims
const wipeShardLua = `
redis.call('HSET', KEYS[1], 'paused', 1)
redis.call('HDEL', KEYS[1], 'inc')
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HINCRBY', KEYS[1], 'xseq', 1)
return 1
`

// claimLua claims a payment instrument homed on this shard for a
// reservation on shard ARGV[3]. It returns 1 claimed (or claimed by this
// reservation already), 0 claimed by another reservation, -2 not usable.
//
//	KEYS: 1 ctr, 2 meta, 3 claims, 4 layout 1's stock
//	ARGV: 1 fingerprint, 2 reservation id, 3 the reservation's shard
const claimLua = `
local m = redis.call('HMGET', KEYS[2], 'loaded', 'node')
if not redis.call('GET', KEYS[1]) or m[1] ~= '1' or redis.call('EXISTS', KEYS[4]) == 1 or
  (m[2] and m[2] ~= redis.pcall('CLUSTER', 'MYID')) then return -2 end
local c = redis.call('HGET', KEYS[3], ARGV[1])
if c then
  if string.sub(c, 1, #ARGV[2] + 1) == ARGV[2] .. '\31' then return 1 end
  return 0
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. '\31' .. ARGV[3])
return 1
`

// releaseLua drops an instrument's claim if it still names the
// reservation, and reports whether it did.
//
//	KEYS: 1 claims
//	ARGV: 1 fingerprint, 2 reservation id
const releaseLua = `
local c = redis.call('HGET', KEYS[1], ARGV[1])
if c and string.sub(c, 1, #ARGV[2] + 1) == ARGV[2] .. '\31' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
`

// heldLua reports, for each reservation id, whether the shard holds it.
//
//	KEYS: 1 book
//	ARGV: reservation ids
const heldLua = `
local out = {}
for i = 1, #ARGV do out[i] = redis.call('HEXISTS', KEYS[1], ARGV[i]) end
return out
`

// claimsAddLua writes claims, for a rebuild.
//
//	KEYS: 1 claims
//	ARGV: fingerprint, "reservation\x1fshard", ...
const claimsAddLua = `
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
`

var (
	shardFieldsScript = rueidis.NewLuaScript(shardFieldsLua)
	shardStateScript  = rueidis.NewLuaScriptReadOnly(shardStateLua)
	xseqScript        = rueidis.NewLuaScriptReadOnly(xseqLua)
	transferOutScript = rueidis.NewLuaScript(transferOutLua)
	transferInScript  = rueidis.NewLuaScript(transferInLua)
	transferEndScript = rueidis.NewLuaScript(transferEndLua)
	fenceScript       = rueidis.NewLuaScript(fenceLua)
	wipeShardScript   = rueidis.NewLuaScript(wipeShardLua)
	claimScript       = rueidis.NewLuaScript(claimLua)
	releaseScript     = rueidis.NewLuaScript(releaseLua)
	claimsAddScript   = rueidis.NewLuaScript(claimsAddLua)
	heldScript        = rueidis.NewLuaScriptReadOnly(heldLua)
)
