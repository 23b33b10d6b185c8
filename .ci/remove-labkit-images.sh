#!/usr/bin/env bash
# Remove labkit's images (labkit/*, labkit-test/*) and the containers made from them from the engine, so
# that the suite meets what a fresh machine's engine holds: nothing of labkit's. CI runs it; by hand it
# costs the next run a rebuild of the images (a few minutes).
set -euo pipefail
# By name, not id: the grader image is built FROM the lab image, and removing a parent by id is refused
# while its child exists (the lab image is committed on the CPU image too); given by name, the engine
# untags the parent and deletes it together with its last child.
images=$(docker images --format '{{.Repository}}:{{.Tag}}' | { grep -E '^labkit(-test)?/' || true; } | sort -u)
if [ -z "$images" ]; then
    echo "remove-labkit-images: the engine holds none of labkit's images" >&2
    exit 0
fi
for image in $images; do
    containers=$(docker ps -aq --filter "ancestor=$image")
    [ -z "$containers" ] || docker rm -f -v $containers >/dev/null
done
# shellcheck disable=SC2086  # one name per word
docker rmi $images >/dev/null
left=$(docker images --format '{{.Repository}}' | grep -cE '^labkit(-test)?/' || true)
if [ "$left" != 0 ]; then
    echo "remove-labkit-images: $left of labkit's images are still there:" >&2
    docker images | grep -E '^labkit(-test)?/' >&2
    exit 1
fi
echo "remove-labkit-images: removed $(echo "$images" | wc -l) image(s); the tests build what they need" >&2
