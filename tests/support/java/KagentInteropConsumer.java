import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A real Java consumer (Apache Kafka's KafkaConsumer, classic group protocol) for kagent's interop tests.
 *
 * <p>Arguments, each {@code --name=value}: {@code bootstrap}, {@code group}, {@code topic}, {@code client-id},
 * {@code assignor} (a class name of kafka-clients, e.g. {@code org.apache.kafka.clients.consumer.RangeAssignor}),
 * {@code rack} (client.rack; optional), {@code delay-ms} (processing time per record, default 0), {@code stop-at}
 * (comma-separated {@code partition:offset}: a partition's records at or past its offset are not processed and the
 * partition is paused, so that its commits stop there whoever holds it; partitions not named are read on),
 * {@code commit} ({@code sync}: commitSync of what each poll processed, the default; {@code async}: commitAsync;
 * {@code none}).
 *
 * <p>It prints one JSON object a line on stdout, each with an {@code event}:
 * <ul>
 *   <li>{@code assigned} and {@code revoked}, from its ConsumerRebalanceListener: the partitions the callback was
 *       given ({@code partitions}), {@code consumer.assignment()} during the callback ({@code holding}: after an
 *       assignment, everything it holds; during a revocation, still the partitions revoked), and its
 *       {@code member_id} and {@code generation} as {@code consumer.groupMetadata()} says then;</li>
 *   <li>{@code committed}: after each commitSync, the committed offsets of every partition it holds, as the
 *       broker answers them ({@code consumer.committed}), with its member id and generation;</li>
 *   <li>{@code closed}: it left the group.</li>
 * </ul>
 * Partitions are {@code [topic, partition]} pairs, sorted; committed offsets a map of {@code "topic/partition"}.
 * It reads commands from stdin, one a line: {@code stop} closes the consumer (leaving the group) and exits, as
 * does the end of stdin (so it never outlives the test that started it).
 */
public final class KagentInteropConsumer {
    private static final Comparator<TopicPartition> ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private KagentInteropConsumer() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = options(args);
        String topic = required(options, "topic");
        long delayMs = Long.parseLong(options.getOrDefault("delay-ms", "0"));
        Map<Integer, Long> stopAt = new HashMap<>();
        for (String pair : options.getOrDefault("stop-at", "").split(",")) {
            if (!pair.isEmpty()) {
                String[] parts = pair.split(":");
                stopAt.put(Integer.parseInt(parts[0]), Long.parseLong(parts[1]));
            }
        }
        String commit = options.getOrDefault("commit", "sync");
        if (!List.of("sync", "async", "none").contains(commit)) {
            throw new IllegalArgumentException("--commit must be sync, async or none, not " + commit);
        }

        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(options, "bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, required(options, "group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, required(options, "client-id"));
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, required(options, "assignor"));
        config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (options.containsKey("rack")) {
            config.put(ConsumerConfig.CLIENT_RACK_CONFIG, options.get("rack"));
        }

        AtomicBoolean stopping = new AtomicBoolean(false);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
            Thread commands = new Thread(() -> {
                try (BufferedReader in =
                        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                        // no other command
                    }
                } catch (Exception ignored) {
                    // stdin gone: stop as on "stop"
                }
                stopping.set(true);
                consumer.wakeup();
            }, "commands");
            commands.setDaemon(true);
            commands.start();

            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    report(consumer, "revoked", partitions);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    report(consumer, "assigned", partitions);
                }
            });

            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (org.apache.kafka.common.errors.WakeupException woken) {
                    break;
                }
                Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    TopicPartition partition = new TopicPartition(record.topic(), record.partition());
                    if (record.offset() >= stopAt.getOrDefault(record.partition(), Long.MAX_VALUE)) {
                        consumer.pause(List.of(partition)); // not processed, not committed
                        continue;
                    }
                    if (delayMs > 0) {
                        Thread.sleep(delayMs);
                    }
                    processed.put(partition, new OffsetAndMetadata(record.offset() + 1));
                }
                if (processed.isEmpty() || commit.equals("none")) {
                    continue;
                }
                if (commit.equals("async")) {
                    consumer.commitAsync(processed, (offsets, error) -> {
                        if (error != null) {
                            System.err.println("commitAsync failed: " + error);
                        }
                    });
                    continue;
                }
                try {
                    consumer.commitSync(processed);
                } catch (org.apache.kafka.common.errors.WakeupException woken) {
                    break;
                }
                reportCommitted(consumer);
            }
        }
        emit("{\"event\":\"closed\"}");
    }

    private static void report(KafkaConsumer<?, ?> consumer, String event, Collection<TopicPartition> partitions) {
        ConsumerGroupMetadata group = consumer.groupMetadata();
        emit("{\"event\":" + quoted(event)
                + ",\"member_id\":" + quoted(group.memberId())
                + ",\"generation\":" + group.generationId()
                + ",\"partitions\":" + partitionList(partitions)
                + ",\"holding\":" + partitionList(consumer.assignment()) + "}");
    }

    private static void reportCommitted(KafkaConsumer<?, ?> consumer) {
        Set<TopicPartition> holding = new HashSet<>(consumer.assignment());
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(holding);
        TreeMap<TopicPartition, OffsetAndMetadata> sorted = new TreeMap<>(ORDER);
        committed.forEach((partition, offset) -> {
            if (offset != null) {
                sorted.put(partition, offset);
            }
        });
        StringBuilder offsets = new StringBuilder("{");
        sorted.forEach((partition, offset) -> {
            if (offsets.length() > 1) {
                offsets.append(',');
            }
            offsets.append(quoted(partition.topic() + "/" + partition.partition())).append(':').append(offset.offset());
        });
        ConsumerGroupMetadata group = consumer.groupMetadata();
        emit("{\"event\":\"committed\",\"member_id\":" + quoted(group.memberId())
                + ",\"generation\":" + group.generationId()
                + ",\"offsets\":" + offsets + "}}");
    }

    private static String partitionList(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(ORDER);
        StringBuilder out = new StringBuilder("[");
        for (TopicPartition partition : sorted) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append('[').append(quoted(partition.topic())).append(',').append(partition.partition()).append(']');
        }
        return out.append(']').toString();
    }

    private static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (String arg : args) {
            if (!arg.startsWith("--") || !arg.contains("=")) {
                throw new IllegalArgumentException("arguments are --name=value, not " + arg);
            }
            int equals = arg.indexOf('=');
            options.put(arg.substring(2, equals), arg.substring(equals + 1));
        }
        return options;
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("--" + name + "= is required");
        }
        return value;
    }
}
