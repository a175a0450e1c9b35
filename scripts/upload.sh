#!/usr/bin/env bash
# Uploads a directory of shards to s3://BUCKET[/PREFIX] with rclone, creating
# the bucket when needed. Needs the env printed by scripts/minio.sh start
# (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, SHARDFS_ENDPOINT_URL).
#   scripts/upload.sh DIR s3://BUCKET[/PREFIX]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -eq 2 ] || die "usage: $0 DIR s3://BUCKET[/PREFIX]"
dir=$1 dest=$2
[ -d "$dir" ] || die "$dir is not a directory"
case $dest in
s3://?*) path=${dest#s3://} ;;
*) die "destination must look like s3://bucket[/prefix], got $dest" ;;
esac
bucket=${path%%/*}

rclone_s3 mkdir ":s3:$bucket"
rclone_s3 copy --transfers 4 "$dir" ":s3:$path"
log "uploaded $(find "$dir" -type f | wc -l) files to $dest"
