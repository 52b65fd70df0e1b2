-- A stage's Celery message, written by the script whose write calls for it, so that the write
-- and the message land together or neither does (workers/broker.py `celery_message`: Celery's
-- task protocol 2, JSON, as kombu's Redis transport stores it). `template` is the message
-- with "@body@" where its body goes; the body is the task's one argument `payload` (a JSON
-- object) and Celery's trailing `embed` object, `[[payload], {}, embed]`, as a JSON string.
-- "body" is the template's first key: the first "@body@" is the slot, whatever the payload or
-- the ids after it hold.
local function celery_message(template, payload, embed)
  local body = cjson.encode('[[' .. payload .. '], {}, ' .. embed .. ']')
  local i, j = string.find(template, '"@body@"', 1, true)
  return string.sub(template, 1, i - 1) .. body .. string.sub(template, j + 1)
end
