# One kagent worker. Configure it with KAGENT_* variables (see README).

# The wheel, with the decoders' compiled twins: building them needs a C compiler.
# setup.py keeps the built twins in build/twins/ by the digest of their source: the
# cache mount carries them from one image build to the next, so only a change to the
# decoders compiles them again.
FROM python:3.11-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY kagent ./kagent
RUN --mount=type=cache,target=/src/build/twins \
    pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV KAGENT_WEB_HOST=0.0.0.0 \
    KAGENT_DATA_DIR=/var/lib/kagent
EXPOSE 6066
CMD ["kagent", "worker"]
