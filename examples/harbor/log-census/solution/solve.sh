#!/bin/bash
set -e
find /app/tree -name '*.log' -type f -exec cat {} + | grep -c ERROR > /app/error_count.txt
find /app/tree -name '*.md' -type f -exec sed -i 's/colour/color/g' {} +
