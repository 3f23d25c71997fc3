#!/bin/bash
if [ "$(cat /app/length.txt 2>/dev/null)" = "${#API_TOKEN}" ] && [ -n "$API_TOKEN" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
