#!/bin/bash
touch /app/done
