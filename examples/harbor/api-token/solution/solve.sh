#!/bin/bash
printf '%s' "${#API_TOKEN}" > /app/length.txt
