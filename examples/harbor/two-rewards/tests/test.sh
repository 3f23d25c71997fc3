#!/bin/bash
# Wrong on purpose: a verifier must write reward.txt or reward.json, not both.
echo 1 > /logs/verifier/reward.txt
echo '{"reward": 1}' > /logs/verifier/reward.json
