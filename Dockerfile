# streamdedup consumer image. Build: docker build -t streamdedup .
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streamdedup ./streamdedup
RUN pip install --no-cache-dir ".[redis]" \
    && useradd --system --uid 10001 streamdedup \
    && mkdir -p /data && chown streamdedup /data
USER streamdedup
VOLUME ["/data"]
ENV STREAMDEDUP_STORE=/data/store
EXPOSE 9464
ENTRYPOINT ["streamdedup"]
CMD ["run"]
