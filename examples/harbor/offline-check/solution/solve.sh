#!/bin/bash
# Tries the network for real, with bash's /dev/tcp (no curl or wget needed).
if timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; then
  echo reachable > /app/network.txt
else
  echo unreachable > /app/network.txt
fi
