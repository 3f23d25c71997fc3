#!/bin/bash
# Several metrics in reward.json: "reward" is the score, the others are kept beside it.
ok() { [ "$(cat "$1" 2>/dev/null)" = "$2" ] && echo 1 || echo 0; }
total=$(ok /app/report/total.txt "49")
warehouses=$(ok /app/report/warehouses.txt "$(printf 'east\nnorth\nsouth')")
empty=$(ok /app/report/empty.txt "$(printf 'A-101\nB-201')")
passed=$((total + warehouses + empty))
echo "total=$total warehouses=$warehouses empty=$empty"
reward=$(awk -v p="$passed" 'BEGIN { printf "%.4f", p / 3 }')
printf '{"reward": %s, "total_ok": %d, "warehouses_ok": %d, "empty_ok": %d, "files_passed": %d}\n' \
  "$reward" "$total" "$warehouses" "$empty" "$passed" > /logs/verifier/reward.json
