#!/bin/bash
# The reward is the share of the two parts done right.
score=0
if [ "$(tr -d '[:space:]' < /app/error_count.txt 2>/dev/null)" = "5" ]; then
  echo "error count: right"; score=$((score + 1))
else
  echo "error count: wrong ($(cat /app/error_count.txt 2>/dev/null))"
fi
if [ -z "$(find /app/tree -name '*.md' -type f -exec grep -l 'colour' {} +)" ] && grep -q 'Colour names' /app/tree/README.md \
   && [ "$(grep -c 'color' /app/tree/api/docs/guide.md)" = "1" ] && grep -q 'the color scheme' /app/tree/api/docs/guide.md; then
  echo "docs: fixed"; score=$((score + 1))
else
  echo "docs: not fixed"
fi
if [ "$score" = 2 ]; then echo 1 > /logs/verifier/reward.txt
elif [ "$score" = 1 ]; then echo 0.5 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
