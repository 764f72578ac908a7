#!/usr/bin/env bash
# Prints the path of a docker client whose `docker build` is BuildKit's (deploy/'s Dockerfiles
# mount pip's cache): the default one where buildx is installed, else one that still takes
# DOCKER_BUILDKIT=1 (Debian's docker.io 20.10 does; a newer client without buildx falls back
# to the legacy builder, which cannot build them). Exit 1 when no client here can.
export DOCKER_BUILDKIT=1
for client in docker $(type -ap docker); do
    if printf 'FROM python:3.11-slim\nRUN --mount=type=cache,target=/c true\n' \
        | "$client" build -q --network host -t rl-check-buildkit - >/dev/null 2>&1; then
        docker rmi rl-check-buildkit >/dev/null 2>&1
        command -v "$client"
        exit 0
    fi
done
exit 1
