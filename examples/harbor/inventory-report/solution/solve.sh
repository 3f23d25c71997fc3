#!/bin/bash
set -e
mkdir -p /app/report
tail -n +2 /app/inventory.csv | awk -F, '{ s += $3 } END { print s }' > /app/report/total.txt
tail -n +2 /app/inventory.csv | cut -d, -f2 | sort -u > /app/report/warehouses.txt
tail -n +2 /app/inventory.csv | awk -F, '$3 == 0 { print $1 }' | sort > /app/report/empty.txt
