#!/bin/bash
# The task declares no network: the right answer is that nothing is reachable.
if [ "$(cat /app/network.txt 2>/dev/null)" = "unreachable" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "network.txt: $(cat /app/network.txt 2>/dev/null)"
  echo 0 > /logs/verifier/reward.txt
fi
