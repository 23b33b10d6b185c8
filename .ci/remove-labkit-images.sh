#!/usr/bin/env bash
# Remove labkit's images (labkit/*, labkit-test/*) and the containers made from them from the engine, so
# that the suite meets what a fresh machine's engine holds: nothing of labkit's. CI runs it; by hand it
# costs the next run a rebuild of the images (a few minutes).
set -euo pipefail
images=$(docker images --format '{{.Repository}}:{{.Tag}} {{.ID}}' | awk '$1 ~ /^labkit(-test)?\// {print $2}' | sort -u)
if [ -z "$images" ]; then
    echo "remove-labkit-images: the engine holds none of labkit's images" >&2
    exit 0
fi
for image in $images; do
    containers=$(docker ps -aq --filter "ancestor=$image")
    [ -z "$containers" ] || docker rm -f -v $containers >/dev/null
done
# shellcheck disable=SC2086  # one id per word
docker rmi -f $images >/dev/null
echo "remove-labkit-images: removed $(echo "$images" | wc -l) image(s); the tests build what they need" >&2
