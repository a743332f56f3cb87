# One kagent worker. Configure it with KAGENT_* variables (see README).

# Both stages start from the same image, pinned to a Python release: the build stage compiles the decoders'
# twins for that interpreter (a cp311 wheel), and the runtime stage must be the one that loads them.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# The wheel, with the decoders' compiled twins: building them needs a C compiler.
# setup.py keeps the built twins in build/twins/ by the digest of their source: the
# cache mount carries them from one image build to the next, so only a change to the
# decoders compiles them again.
FROM ${PYTHON_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY kagent ./kagent
RUN --mount=type=cache,target=/src/build/twins \
    pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# The runtime: the wheel and its dependencies, no compiler. EXTRAS names the package's extras to install
# with it: msk (Amazon's MSK IAM signer) by default, so that one image serves every overlay of
# deploy/kubernetes; build with --build-arg EXTRAS= for an image without it.
FROM ${PYTHON_IMAGE}
ARG EXTRAS=msk
COPY --from=build /wheels /wheels
RUN wheel="$(ls /wheels/kagent-*.whl)" \
    && pip install --no-cache-dir "${wheel}${EXTRAS:+[$EXTRAS]}" \
    && rm -rf /wheels
# A user of its own, by number (Kubernetes' runAsNonRoot can verify only a numeric USER), owning the one
# directory the worker writes; deploy/kubernetes runs the same uid with a read-only root filesystem.
RUN groupadd --system --gid 10001 kagent \
    && useradd --system --uid 10001 --gid kagent --home-dir /var/lib/kagent --shell /usr/sbin/nologin kagent \
    && install -d -o kagent -g kagent -m 0750 /var/lib/kagent
USER 10001:10001
WORKDIR /var/lib/kagent
ENV KAGENT_WEB_HOST=0.0.0.0 \
    KAGENT_DATA_DIR=/var/lib/kagent
EXPOSE 6066
# The slim image has no curl: Python asks /healthz (200 while the worker runs), at KAGENT_WEB_PORT.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('KAGENT_WEB_PORT', '6066'), timeout=4)"]
CMD ["kagent", "worker"]
