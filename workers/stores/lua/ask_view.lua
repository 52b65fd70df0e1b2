-- The ask record's view of one plan, alone (ask_view_common.lua says what it reads).
-- KEYS: 1 the dedupe key's asks, 2 the work's consents, 3 the work's declines, 4 the brake.
-- ARGV: 1 the prefix of an ask's hash key, 2 the prefix of a consent's key.
return ask_view(KEYS, ARGV)
