package redis

import "github.com/redis/rueidis"

// The gate's Lua scripts. Redis runs each one without interleaving, which is
// what makes each operation one atomic step; the reserve scripts are the
// only writers that take units from the stock key.
//
// Every key a script touches is passed in KEYS, and all of a sale's keys
// share the hash tag {saleID}, so the scripts run unchanged on Redis
// Cluster. Times arrive in ARGV as Unix milliseconds from the caller's
// clock; the scripts never call TIME, so tests can inject the clock.
//
// Values the scripts compare as strings (the epoch) are always written from
// ARGV, never from a Lua number, so "7" stays "7".
//
// Failover. Redis replicates asynchronously, so a replica promoted after
// its master died may lack writes the master acknowledged: a lost decrement
// is a unit sold twice. On Redis Cluster, Load and Rebuild record in meta
// the node id (CLUSTER MYID) of the master that wrote the counter, and
// every script that reads or moves it first compares that id with its own
// server's: a counter served by another node (a promoted replica, or a
// slot migrated elsewhere) is treated as not loaded, so the sale fails
// closed until a rebuild from the record, which records the new node. On
// one server CLUSTER MYID fails, no node is recorded and nothing is
// compared. A master restarted from its own persistence files keeps its
// node id, so run the gate's Redis without persistence (a restart then
// loses the counter, which is caught as not loaded) or with appendfsync
// always.

// verdict codes the reserve script returns: flashsale.Verdict values, plus
// two that Go finishes.
const (
	codeIdemHit      = 2  // a key is on record; Go tells replay from reuse
	codeDuplicateRes = -1 // the reservation id already holds units
)

// codeZero is the byte that stands for code 0 in the reserve script's
// string of codes: code c is the byte codeZero + c, so -1 is '0'.
const codeZero = '1'

// reserveFields is how many ARGV entries each reserve of a batch takes.
const reserveFields = 9

// reservePrelude opens the three reserve scripts: it reads the counter
// (ctr) and the sale's meta, and sets loaded unless the sale is not
// loaded here (no counter, not marked loaded, a sale of layout 1 (its
// stock key, KEYS[5], exists: see the package comment), or a counter
// written by another node than this one: see Failover above). Each script
// then answers "not loaded" in its own form. meta's fields are, by index:
// 1 loaded, 2 paused, 3 epoch, 4 initial, 5 won, 6 restocked, 7 node,
// 8 minadm.
const reservePrelude = `
local stock = redis.call('GET', KEYS[1])
local meta = redis.call('HMGET', KEYS[2], 'loaded', 'paused', 'epoch', 'initial', 'won', 'restocked', 'node', 'minadm')
local loaded = stock and meta[1] == '1' and redis.call('EXISTS', KEYS[5]) == 0 and
  not (meta[7] and meta[7] ~= redis.pcall('CLUSTER', 'MYID'))`

// reserveBatchLua decides a batch of reserves of one sale, one after the
// other in ARGV's order, each exactly as if it ran alone: a reserve sees the
// holds, buyers, keys and spent admissions of the wins before it in the
// batch. Redis runs the batch without interleaving, so each decision is
// still one atomic step with its checks; batching only shares the work
// every decision repeats (the script call, the reads of the counter and
// meta, one bulk read per hash, one write per hash, one audit entry).
// Checks run in the order of flashsale.Verdict; a batch without a win
// writes nothing.
//
//	KEYS: 1 ctr, 2 meta, 3 book, 4 audit, 5 layout 1's stock
//	ARGV: 1 audit max length, then reserveFields per reserve: reservation
//	      id, user field, quantity, instrument field ('' for none),
//	      admission field ('' for none), epoch, key field, encoded hold,
//	      now ms; then '1' if the reserves are apart (see apart in
//	      batch.go). The fields are the book's (see the package comment),
//	      made by Go, so the script joins no strings.
//
// A spent admission holds the time of the win that spent it, and stays for
// as long as the sale does: an admission is a shopper's one turn (see
// flashsale.Gate).
//
// It returns {epoch, counter before the batch, codes, stored holds...}
// (see the script's comment on its answer), or {'0'} alone when the sale is
// not loaded (or its counter is served by another node than the one that
// wrote it).
//
// The audit entry of a batch of several wins lists them: res, at and
// deltas hold each win's reservation id, time and delta joined by \31,
// seq is the first win's, and delta and counter are the batch's total and
// the counter after it. Gate.Audit reads it back as one entry per win.
const reserveBatchLua = reservePrelude + `
if not loaded then return {'0'} end
local left = tonumber(stock)
local epoch = meta[3]
local n = math.floor((#ARGV - 1) / 9)
-- Go appends '1' when no two reserves of the batch share a reservation
-- id, a shopper, a key, a card or an admission: then no reserve can meet
-- a win earlier in the batch, and the script keeps no account of the
-- batch's own wins (the w tables below), a few table writes and reads a
-- reserve.
local apart = #ARGV > 1 + n * 9
-- Locals, not globals, in the loops below.
local A, tonumber = ARGV, tonumber
-- Reserve i's fields (i from 0) are A[2 + 9i + k], k as listed above
-- from 0: 0 reservation id, 1 user, 2 quantity, 3 instrument, 4
-- admission, 5 epoch, 6 idem field, 7 encoded hold, 8 now.
--
-- One HMGET of the book reads every reserve's key field, then the
-- admission fields there are: idem[i + 1] is reserve i's stored hold,
-- spent[i] its admission's spend, false where nothing is stored.
local names, am, m = {}, {}, n
for i = 0, n - 1 do names[i + 1] = A[8 + i * 9] end
for i = 0, n - 1 do
  local a = A[6 + i * 9]
  if a ~= '' then m = m + 1; names[m] = a; am[m] = i end
end
local idem = redis.call('HMGET', KEYS[3], unpack(names))
local spent = {}
for j = n + 1, m do spent[am[j]] = idem[j] end
-- A counter that disagrees with the gate's own bookkeeping was written
-- behind the gate: sell nothing on it until a rebuild. Wins within the
-- batch keep the sum, so one look serves every reserve.
local paused = meta[2] == '1' or
  left + tonumber(meta[5] or '0') - tonumber(meta[6] or '0') ~= tonumber(meta[4] or '0')
-- Read only once a reserve gets as far as the limits: a batch of sold-out
-- answers never reads them. lim[i + 1] is reserve i's shopper's live
-- hold, lim[n + i + 1] its reservation id's, instr[i] its card's.
local lim, instr
-- What the batch's own wins wrote, for the reserves after them.
local wIdem, wBuyer, wInstr, wHeld, wAdm = {}, {}, {}, {}, {}
local wins, taken = {}, 0
-- The answer: the epoch, the counter before the batch, then a string of
-- one character per reserve, its code (from -1) as the byte 49 + code
-- ('1' + code: codeZero in Go), then the stored holds of the keys found on
-- record, in order. One string is far cheaper to build and to send than
-- three values per reserve; Go works each reserve's remaining units out
-- from the codes and quantities.
local char = {}
for code = -1, 9 do char[code] = string.char(49 + code) end
local codes, holds = {}, {}
local out = {epoch or '0', left}
for i = 0, n - 1 do
  local b = 2 + i * 9
  local code, prev, a = 0, idem[i + 1], A[b + 4]
  if not apart then prev = wIdem[A[b + 6]] or prev end
  if prev then
    code = 2
  elseif paused then
    code = 5
  elseif epoch ~= A[b + 5] and (not meta[8] or tonumber(A[b + 5]) < tonumber(meta[8]) or
      tonumber(A[b + 5]) > tonumber(epoch)) then
    -- A shard rebuilt on its own advances the epoch of the others but
    -- keeps their spent admissions, so they still take admissions from
    -- minadm on.
    code = 6
  elseif a ~= '' and (spent[i] or (not apart and wAdm[a])) then
    code = 7
  elseif left < 1 or (A[b + 2] ~= '1' and left < tonumber(A[b + 2])) then
    -- Quantities are at least 1 (Reserve refuses others), and nearly
    -- always 1: tonumber is the costly part of this check.
    code = 8
  else
    if not lim then
      names, m = {}, 2 * n
      local cm = {}
      for j = 0, n - 1 do names[j + 1], names[n + j + 1] = A[3 + j * 9], A[2 + j * 9] end
      for j = 0, n - 1 do
        local c = A[5 + j * 9]
        if c ~= '' then m = m + 1; names[m] = c; cm[m] = j end
      end
      lim, instr = redis.call('HMGET', KEYS[3], unpack(names)), {}
      for j = 2 * n + 1, m do instr[cm[j]] = lim[j] end
    end
    local c = A[b + 3]
    if lim[i + 1] or (c ~= '' and instr[i]) or (not apart and (wBuyer[A[b + 1]] or (c ~= '' and wInstr[c]))) then
      code = 9
    elseif lim[n + i + 1] or (not apart and wHeld[A[b]]) then
      code = -1
    else
      code = 1
      local q = 1
      if A[b + 2] ~= '1' then q = tonumber(A[b + 2]) end
      left, taken = left - q, taken + q
      if not apart then
        wIdem[A[b + 6]], wBuyer[A[b + 1]], wHeld[A[b]] = A[b + 7], true, true
        if c ~= '' then wInstr[c] = true end
        if a ~= '' then wAdm[a] = true end
      end
      wins[#wins + 1] = b
    end
  end
  codes[i + 1] = char[code]
  if prev then holds[#holds + 1] = prev end
end
out[3] = table.concat(codes)
for j = 1, #holds do out[3 + j] = holds[j] end
if #wins == 0 then return out end
left = redis.call('DECRBY', KEYS[1], taken)
-- Every field the wins write, in one HSET of the book: the hold, the
-- shopper's and the card's live hold, the key's answer, the spent
-- admission.
local w, m = {}, 0
local res, at, deltas = {}, {}, {}
local neg = {['1'] = '-1'}
for j, b in ipairs(wins) do
  local id, hold = A[b], A[b + 7]
  w[m + 1], w[m + 2], w[m + 3], w[m + 4], w[m + 5], w[m + 6] = id, hold, A[b + 1], id, A[b + 6], hold
  m = m + 6
  if A[b + 3] ~= '' then w[m + 1], w[m + 2] = A[b + 3], id; m = m + 2 end
  if A[b + 4] ~= '' then w[m + 1], w[m + 2] = A[b + 4], A[b + 8]; m = m + 2 end
  res[j], at[j], deltas[j] = id, A[b + 8], neg[A[b + 2]] or '-' .. A[b + 2]
end
redis.call('HSET', KEYS[3], unpack(w))
redis.call('HINCRBY', KEYS[2], 'won', taken)
local seq = redis.call('HINCRBY', KEYS[2], 'seq', #wins) - #wins + 1
-- By the audited delta, not to the counter: an unaudited write before
-- this one stays visible.
redis.call('HINCRBY', KEYS[2], 'audited', -taken)
if #wins == 1 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', A[1], '*', 'op', 'reserve', 'source', 'reserve',
    'delta', -taken, 'counter', left, 'res', res[1], 'at', at[1], 'seq', seq)
else
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', A[1], '*', 'op', 'reserve', 'source', 'reserve',
    'delta', -taken, 'counter', left, 'res', table.concat(res, '\31'), 'at', table.concat(at, '\31'),
    'deltas', table.concat(deltas, '\31'), 'seq', seq)
end
return out
`

// reserveOneLua decides one reserve: reserveBatchLua's decision for a
// batch of one, without the batch's bookkeeping, so that a reserve on a
// quiet sale costs Redis no more than before reserves were batched. The
// two must decide alike; TestBatchDecidesAsInOrder holds them to it.
// Every branch before the win returns before any write.
//
//	KEYS: as reserveBatchLua's
//	ARGV: as reserveBatchLua's, for one reserve: 1 audit max length,
//	      2 reservation id, 3 user field, 4 quantity, 5 instrument field,
//	      6 admission field, 7 epoch, 8 key field, 9 encoded hold, 10 now ms
//
// It returns {code, remaining, epoch[, stored hold]}.
const reserveOneLua = reservePrelude + `
if not loaded then return {4, 0, '0'} end
local left = tonumber(stock)
local epoch = meta[3]
local prev = redis.call('HGET', KEYS[3], ARGV[8])
if prev then return {2, left, epoch, prev} end
if meta[2] == '1' then return {5, left, epoch} end
if left + tonumber(meta[5] or '0') - tonumber(meta[6] or '0') ~= tonumber(meta[4] or '0') then
  return {5, left, epoch}
end
if epoch ~= ARGV[7] then
  local a = tonumber(ARGV[7])
  if not meta[8] or a < tonumber(meta[8]) or a > tonumber(epoch) then return {6, left, epoch} end
end
if ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[3], ARGV[6]) == 1 then return {7, left, epoch} end
local q = 1
if ARGV[4] ~= '1' then q = tonumber(ARGV[4]) end
if left < q then return {8, left, epoch} end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return {9, left, epoch} end
if ARGV[5] ~= '' and redis.call('HEXISTS', KEYS[3], ARGV[5]) == 1 then return {9, left, epoch} end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return {-1, left, epoch} end
left = redis.call('DECRBY', KEYS[1], q)
local w = {ARGV[2], ARGV[9], ARGV[3], ARGV[2], ARGV[8], ARGV[9]}
if ARGV[5] ~= '' then w[#w + 1] = ARGV[5]; w[#w + 1] = ARGV[2] end
if ARGV[6] ~= '' then w[#w + 1] = ARGV[6]; w[#w + 1] = ARGV[10] end
redis.call('HSET', KEYS[3], unpack(w))
redis.call('HINCRBY', KEYS[2], 'won', q)
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('HINCRBY', KEYS[2], 'audited', -q)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[1], '*', 'op', 'reserve', 'source', 'reserve',
  'delta', -q, 'counter', left, 'res', ARGV[2], 'at', ARGV[10], 'seq', seq)
return {1, left, epoch}
`

// soldOutFields is how many ARGV entries each reserve of a sold-out
// batch takes.
const soldOutFields = 3

// reserveSoldOutLua decides a batch of reserves of a sale whose counter
// the gate last saw at zero, with only what those decisions need: every
// reserve that gets past the idempotency key, the pause, the epoch and
// the admission is sold out, whatever its quantity, shopper or card, and
// nothing is written. If the counter is above zero after all (a restock,
// a rebuild), it decides nothing and answers {'1'}; the caller then sends
// the batch again with reserveBatchLua, so a unit that came back is never
// refused. Its decisions are reserveBatchLua's for a batch without wins;
// TestSoldOutBatchDecidesAsInOrder holds them to it.
//
//	KEYS: as reserveBatchLua's
//	ARGV: soldOutFields per reserve: key field, epoch, admission field
//
// It returns reserveBatchLua's answer, {'0'} alone when the sale is not
// loaded, or {'1'} alone when units are left.
const reserveSoldOutLua = reservePrelude + `
if not loaded then return {'0'} end
local left = tonumber(stock)
if left > 0 then return {'1'} end
local epoch = meta[3]
local n = #ARGV / 3
local A, tonumber = ARGV, tonumber
-- Reserve i's fields (i from 0) are A[1 + 3i + k]: k 0 key field, 1
-- epoch, 2 admission field. One HMGET of the book reads every key field,
-- then the admission fields there are: idem[i + 1] is reserve i's stored
-- hold, spent[i] its admission's spend.
local names, am, m = {}, {}, n
for i = 0, n - 1 do names[i + 1] = A[1 + i * 3] end
for i = 0, n - 1 do
  local a = A[3 + i * 3]
  if a ~= '' then m = m + 1; names[m] = a; am[m] = i end
end
local idem = redis.call('HMGET', KEYS[3], unpack(names))
local spent = {}
for j = n + 1, m do spent[am[j]] = idem[j] end
local paused = meta[2] == '1' or
  left + tonumber(meta[5] or '0') - tonumber(meta[6] or '0') ~= tonumber(meta[4] or '0')
-- Codes as reserveBatchLua writes them, the byte 49 + code: '3' a key on
-- record, '6' paused, '7' stale epoch, '8' admission spent, '9' sold out.
local codes, holds = {}, {}
for i = 0, n - 1 do
  local b = 1 + i * 3
  local code, prev, e = '9', idem[i + 1], A[b + 1]
  if prev then
    code = '3'
    holds[#holds + 1] = prev
  elseif paused then
    code = '6'
  elseif epoch ~= e and (not meta[8] or tonumber(e) < tonumber(meta[8]) or tonumber(e) > tonumber(epoch)) then
    code = '7'
  elseif spent[i] then
    code = '8'
  end
  codes[i + 1] = code
end
local out = {epoch or '0', left, table.concat(codes)}
for j = 1, #holds do out[3 + j] = holds[j] end
return out
`

// giveBackLua returns a hold's units to stock (Restock and Void) and,
// for Void, forgets the hold's key if the key still names it and un-spends
// the hold's admission. The admission is un-spent only if the hold was not
// voided before (its units were still held, or its key still named it):
// a repeated Void must not free an admission the shopper spent again since.
//
//	KEYS: 1 ctr, 2 meta, 3 book, 4 audit, 5 layout 1's stock
//	ARGV: 1 reservation id, 2 op, 3 source, 4 now ms, 5 audit max length,
//	      6 key field to forget ('' to keep keys), 7 admission field to
//	      un-spend ('' for none)
//
// It returns -1 if the sale is not loaded (or is layout 1's, or its
// counter is served by another node than the one that wrote it), 1 if
// units moved, else 0.
const giveBackLua = `
local m = redis.call('HMGET', KEYS[2], 'loaded', 'node')
if not redis.call('GET', KEYS[1]) or m[1] ~= '1' or redis.call('EXISTS', KEYS[5]) == 1 or
  (m[2] and m[2] ~= redis.pcall('CLUSTER', 'MYID')) then return -1 end
local moved = 0
local enc = redis.call('HGET', KEYS[3], ARGV[1])
if enc then
  -- An encoded hold is reservation, user, quantity, instrument, ... joined
  -- by \31.
  local f, i = {}, 1
  while #f < 4 do
    local j = string.find(enc, '\31', i, true)
    f[#f + 1] = string.sub(enc, i, (j or 0) - 1)
    if not j then break end
    i = j + 1
  end
  local q = tonumber(f[3])
  redis.call('HDEL', KEYS[3], ARGV[1])
  local left = redis.call('INCRBY', KEYS[1], q)
  -- The shopper or card may hold again under another reservation by now.
  local u = '\31u' .. f[2]
  if redis.call('HGET', KEYS[3], u) == ARGV[1] then redis.call('HDEL', KEYS[3], u) end
  if f[4] ~= '' then
    local c = '\31c' .. f[4]
    if redis.call('HGET', KEYS[3], c) == ARGV[1] then redis.call('HDEL', KEYS[3], c) end
  end
  redis.call('HINCRBY', KEYS[2], 'restocked', q)
  local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
  redis.call('HINCRBY', KEYS[2], 'audited', q)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'op', ARGV[2], 'source', ARGV[3],
    'delta', q, 'counter', left, 'res', ARGV[1], 'at', ARGV[4], 'seq', seq)
  moved = 1
end
local known = moved == 1
if ARGV[6] ~= '' then
  local prev = redis.call('HGET', KEYS[3], ARGV[6])
  if prev and string.sub(prev, 1, #ARGV[1] + 1) == ARGV[1] .. '\31' then
    redis.call('HDEL', KEYS[3], ARGV[6])
    known = true
  end
end
if known and ARGV[7] ~= '' then redis.call('HDEL', KEYS[3], ARGV[7]) end
return moved
`

// recordNodeLua records in meta (KEYS[2]) the node id of the Redis Cluster
// master running the script, or no node on one server.
const recordNodeLua = `
local me = redis.pcall('CLUSTER', 'MYID')
if type(me) == 'string' then redis.call('HSET', KEYS[2], 'node', me) else redis.call('HDEL', KEYS[2], 'node') end
`

// bookHeaderLua starts a sale's book (KEYS[3]) with one field whose value
// is longer than Redis stores in a listpack (hash-max-listpack-value, 64
// bytes by default), so the book is a hash table from its first field on.
// A listpack is scanned end to end on every lookup and insert, and the
// book, four fields a win, leaves one within a few hundred wins anyway;
// until then, a small sale's lookups (a sold-out batch reads two fields a
// reserve) cost several times a hash table's. The field starts with
// "\x1f", so it is no hold (Holds skips it).
const bookHeaderLua = `
redis.call('HSET', KEYS[3], '\31v', 'flashsale gate book, layout 2: a value this long keeps the hash out of a listpack')`

// loadLua loads a sale unless it is loaded or being rebuilt. A meta
// that says loaded while the stock key is gone is a damaged gate: it is
// left for a rebuild, never reloaded to the full initial stock.
//
//	KEYS: 1 ctr, 2 meta, 3 book, 4 audit, then layout 1's stock, held,
//	      buyers, instr, idem and adm (deleted)
//	ARGV: 1 initial, 2 epoch, 3 source, 4 now ms, 5 audit max length
const loadLua = `
local m = redis.call('HMGET', KEYS[2], 'loaded', 'rebuilding')
if m[1] == '1' or m[2] then return 0 end
redis.call('DEL', KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])
` + bookHeaderLua + `
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'initial', ARGV[1], 'epoch', ARGV[2], 'won', 0, 'restocked', 0,
  'audited', ARGV[1], 'loaded', 1)
redis.call('HDEL', KEYS[2], 'minadm')
` + recordNodeLua + `
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'op', 'load', 'source', ARGV[3],
  'delta', ARGV[1], 'counter', ARGV[1], 'res', '', 'at', ARGV[4], 'seq', seq)
return 1
`

// rebuildBeginLua marks the sale not loaded (so Reserve answers
// not_loaded and Restock ErrNotLoaded while holds are written), paused,
// and owned by this rebuild's token, and clears holds, keys and spent
// admissions, which the record's replace. It remembers the counter it
// replaces for the audit.
//
//	KEYS: 1 ctr, 2 meta, 3 book, 4 audit (unused), then layout 1's stock,
//	      held, buyers, instr, idem and adm (deleted)
//	ARGV: 1 token
//
// The counter replaced is this layout's, or layout 1's where its stock
// key exists (a sale moving to this layout).
const rebuildBeginLua = `
local old = 0
if redis.call('HGET', KEYS[2], 'loaded') == '1' then
  old = redis.call('GET', KEYS[5]) or redis.call('GET', KEYS[1]) or 0
end
redis.call('HSET', KEYS[2], 'loaded', 0, 'paused', 1, 'rebuilding', ARGV[1], 'rbold', old)
redis.call('DEL', KEYS[1], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])
` + bookHeaderLua + `
return 1
`

// rebuildAddLua writes one chunk of holds, if the rebuild still owns
// the sale.
//
//	KEYS: 1 meta, 2 book
//	ARGV: 1 token, then per hold: reservation id, user field, instrument
//	      field ('' for none), key field ('' for none), encoded hold
const rebuildAddLua = `
if redis.call('HGET', KEYS[1], 'rebuilding') ~= ARGV[1] then
  return redis.error_reply('ERR flashsale: another rebuild or a drop took over this sale')
end
for i = 2, #ARGV, 5 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 4], ARGV[i + 1], ARGV[i])
  if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i]) end
  if ARGV[i + 3] ~= '' then redis.call('HSET', KEYS[2], ARGV[i + 3], ARGV[i + 4]) end
end
return 1
`

// rebuildSpendLua writes one chunk of spent admissions, if the rebuild
// still owns the sale.
//
//	KEYS: 1 meta, 2 book
//	ARGV: 1 token, 2 now ms, then admission fields
const rebuildSpendLua = `
if redis.call('HGET', KEYS[1], 'rebuilding') ~= ARGV[1] then
  return redis.error_reply('ERR flashsale: another rebuild or a drop took over this sale')
end
for i = 3, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], ARGV[2]) end
return 1
`

// rebuildFinishLua sets the counter and loads the sale, paused, if the
// rebuild still owns it.
//
//	KEYS: 1 ctr, 2 meta, 3 audit
//	ARGV: 1 token, 2 initial, 3 epoch, 4 units held, 5 counter, 6 source,
//	      7 now ms, 8 audit max length
const rebuildFinishLua = `
if redis.call('HGET', KEYS[2], 'rebuilding') ~= ARGV[1] then
  return redis.error_reply('ERR flashsale: another rebuild or a drop took over this sale')
end
local old = tonumber(redis.call('HGET', KEYS[2], 'rbold'))
redis.call('SET', KEYS[1], ARGV[5])
redis.call('HSET', KEYS[2], 'initial', ARGV[2], 'epoch', ARGV[3], 'won', ARGV[4], 'restocked', 0,
  'audited', ARGV[5], 'loaded', 1, 'paused', 1)
redis.call('HDEL', KEYS[2], 'rebuilding', 'rbold', 'minadm')
` + recordNodeLua + `
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'op', 'rebuild', 'source', ARGV[6],
  'delta', tonumber(ARGV[5]) - old, 'counter', ARGV[5], 'res', '', 'at', ARGV[7], 'seq', seq)
return 1
`

// snapshotLua reads the counter and its bookkeeping in one step. It
// returns an empty array when the sale is not loaded (or its counter is
// served by another node than the one that wrote it), else
// {counter, paused, epoch, initial, won, restocked, audited}.
//
//	KEYS: 1 ctr, 2 meta, 3 layout 1's stock
const snapshotLua = `
local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[2], 'loaded', 'paused', 'epoch', 'initial', 'won', 'restocked', 'audited', 'node')
if not stock or m[1] ~= '1' or redis.call('EXISTS', KEYS[3]) == 1 or
  (m[8] and m[8] ~= redis.pcall('CLUSTER', 'MYID')) then return {} end
return {stock, m[2] or '0', m[3] or '0', m[4] or '0', m[5] or '0', m[6] or '0', m[7] or '0'}
`

// lookupLua returns the hold under an idempotency key, or nil when the
// key is unknown or the sale not loaded (or its counter is served by
// another node than the one that wrote it).
//
//	KEYS: 1 ctr, 2 meta, 3 book, 4 layout 1's stock
//	ARGV: 1 key field
const lookupLua = `
local m = redis.call('HMGET', KEYS[2], 'loaded', 'node')
if not redis.call('GET', KEYS[1]) or m[1] ~= '1' or redis.call('EXISTS', KEYS[4]) == 1 or
  (m[2] and m[2] ~= redis.pcall('CLUSTER', 'MYID')) then return false end
return redis.call('HGET', KEYS[3], ARGV[1])
`

// setPausedLua sets or clears the pause and audits it. It does not move
// the audited counter: a pause moves no units, and must not hide a write
// made behind the gate.
//
//	KEYS: 1 ctr, 2 meta, 3 audit
//	ARGV: 1 '1' or '0', 2 op, 3 source, 4 now ms, 5 audit max length
const setPausedLua = `
redis.call('HSET', KEYS[2], 'paused', ARGV[1])
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'op', ARGV[2], 'source', ARGV[3],
  'delta', 0, 'counter', redis.call('GET', KEYS[1]) or 0, 'res', '', 'at', ARGV[4], 'seq', seq)
return 1
`

// The scripts as rueidis runs them: EVALSHA, falling back to EVAL when the
// server lost its script cache (NOSCRIPT).
var (
	reserveOneScript     = rueidis.NewLuaScript(reserveOneLua)
	reserveBatchScript   = rueidis.NewLuaScript(reserveBatchLua)
	reserveSoldOutScript = rueidis.NewLuaScriptReadOnly(reserveSoldOutLua)
	giveBackScript       = rueidis.NewLuaScript(giveBackLua)
	loadScript           = rueidis.NewLuaScript(loadLua)
	rebuildBeginScript   = rueidis.NewLuaScript(rebuildBeginLua)
	rebuildAddScript     = rueidis.NewLuaScript(rebuildAddLua)
	rebuildSpendScript   = rueidis.NewLuaScript(rebuildSpendLua)
	rebuildFinishScript  = rueidis.NewLuaScript(rebuildFinishLua)
	snapshotScript       = rueidis.NewLuaScriptReadOnly(snapshotLua)
	lookupScript         = rueidis.NewLuaScriptReadOnly(lookupLua)
	setPausedScript      = rueidis.NewLuaScript(setPausedLua)
)

// scriptSources lists every script, for warming a server's script cache.
var scriptSources = []string{reserveOneLua, reserveBatchLua, reserveSoldOutLua, giveBackLua, loadLua, rebuildBeginLua, rebuildAddLua, rebuildSpendLua, rebuildFinishLua, snapshotLua, lookupLua, setPausedLua}
