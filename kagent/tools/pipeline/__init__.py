"""kagent's Spark pipeline: Kafka history into Parquet, at fleet scale, on PySpark 4.

Installed with the ``pipeline`` extra. Modules, one concern each:

- ``kafka_offsets`` (pure): where a Kafka read starts and ends.
- ``kafka_client``: aiokafka I/O for the reader: partition bounds, reads of offset ranges.
- ``kafka_source``: the ``kagent-kafka`` Spark data source (Python Data Source API), batch and streaming.
- ``coordinator_rows`` (pure): the Arrow kernel decoding coordinator records to derived-event rows.
- ``backfill``: the backfill job (offset commits and group generations, as Parquet).
- ``session``, ``progress``, ``cli``: the SparkSession, progress display and ``kagent pipeline`` commands.
"""
