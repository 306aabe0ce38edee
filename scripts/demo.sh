#!/usr/bin/env bash
# README command 1: sets up and starts the agent serving the demo model (ResNet-18, random
# weights) on 127.0.0.1:8080. Stop it with Ctrl-C (a graceful shutdown).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cat <<'MSG'

Packrat is starting on 127.0.0.1:8080 (management 127.0.0.1:8081). Once it logs
"models loaded", try from another shell:

  curl -s localhost:8080/v2/models/demo
  scripts/demo_request.sh            # one 3x224x224 image through the binary tensor extension

MSG
exec build/bin/packrat-agent --config config/demo.yaml
