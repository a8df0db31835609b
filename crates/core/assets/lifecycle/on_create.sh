#!/bin/bash
# InstantStart lifecycle script for EKS-orchestrated SageMaker HyperPod nodes (on_create.sh).
#
# HyperPod runs this file as root on every new instance of a group (CreateCluster, and new
# groups of UpdateCluster), from the directory it downloaded LifeCycleConfig.SourceS3Uri to.
# The HyperPod AMI joins the node to the EKS cluster itself; an EKS-orchestrated group only
# needs a lifecycle script that exists, can be read by the execution role, and exits 0.
# This one is minimal on purpose: it records that it ran (and which version) in the log the
# HyperPod docs point at, and changes nothing on the node. A non-zero exit would fail the
# instance, so nothing here may fail except writing the log.
#
# Versioned with InstantStart (crates/core/assets/lifecycle/on_create.sh); uploaded to
# s3://<cluster bucket>/lifecycle/<sha256 prefix of this file>/on_create.sh, so a changed
# script is a new key and a node never runs a script other than the one its group names.
# See docs/lifecycle-scripts.md.
set -euo pipefail

readonly SCRIPT_VERSION="instantstart-on-create-1"
readonly LOG_DIR="/var/log/provision"
readonly LOG_FILE="${LOG_DIR}/provisioning.log"

mkdir -p "${LOG_DIR}"

log() {
  printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" | tee -a "${LOG_FILE}"
}

log "[start] on_create.sh (${SCRIPT_VERSION})"
log "host: $(hostname); resource config: ${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}"
log "[stop] on_create.sh: nothing else to do; the HyperPod AMI joins the node to EKS"
