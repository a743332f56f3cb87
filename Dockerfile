# One kagent worker. Configure it with KAGENT_* variables (see README).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kagent ./kagent
RUN pip install --no-cache-dir .
ENV KAGENT_WEB_HOST=0.0.0.0 \
    KAGENT_DATA_DIR=/var/lib/kagent
EXPOSE 6066
CMD ["kagent", "worker"]
