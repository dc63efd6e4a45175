// A plain Kafka Streams application, as a team would write one: it knows nothing of the monitor.
//
// Reads JSON values {"id": "...", "n": 123, ...} from a source topic, optionally drops the
// records whose "n" is a multiple of ten (its declared business rule, not a fault), and writes
// the rest, value unchanged and keyed by "id", to a sink topic. A value that is not such a JSON
// object is passed through under its original key (never dropped, never a crash).
//
//   java -cp <jars>:<classes> StreamsPipeline --bootstrap-servers HOST:PORT \
//       --application-id ID --source TOPIC --sink TOPIC --state-dir DIR \
//       --guarantee exactly_once_v2|at_least_once [--drop-every-tenth] [--commit-interval-ms MS]
//
// Says on stdout, one line each: "state <NEW> <OLD>" on every state change of the application.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsPipeline {
    private static final ObjectMapper JSON = new ObjectMapper();

    private StreamsPipeline() {}

    /** The record's JSON value, or null if it is not a JSON object. */
    static JsonNode parse(byte[] value) {
        if (value == null) {
            return null;
        }
        try {
            JsonNode node = JSON.readTree(value);
            return node != null && node.isObject() ? node : null;
        } catch (java.io.IOException notJson) {
            return null;
        }
    }

    /** The business rule: a record whose "n" is an integer multiple of ten is dropped. */
    static boolean keep(byte[] value) {
        JsonNode node = parse(value);
        if (node == null || !node.path("n").isIntegralNumber()) {
            return true;
        }
        return node.path("n").bigIntegerValue().remainder(BigInteger.TEN).signum() != 0;
    }

    /** The sink key: the value's "id" when it has one, else the source key. */
    static byte[] sinkKey(byte[] key, byte[] value) {
        JsonNode node = parse(value);
        if (node == null || !node.path("id").isTextual()) {
            return key;
        }
        return node.path("id").asText().getBytes(StandardCharsets.UTF_8);
    }

    static Topology topology(String source, String sink, boolean dropEveryTenth) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<byte[], byte[]> records =
                builder.stream(source, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
        if (dropEveryTenth) {
            records = records.filter((key, value) -> keep(value));
        }
        records.selectKey(StreamsPipeline::sinkKey)
                .to(sink, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return builder.build();
    }

    static Map<String, String> arguments(String[] args) {
        Map<String, String> found = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
            String name = args[i].substring(2);
            if (name.equals("drop-every-tenth")) {
                found.put(name, "true");
            } else if (i + 1 < args.length) {
                found.put(name, args[++i]);
            } else {
                throw new IllegalArgumentException("--" + name + " needs a value");
            }
        }
        for (String required :
                new String[] {
                    "bootstrap-servers", "application-id", "source", "sink", "state-dir", "guarantee"
                }) {
            if (!found.containsKey(required)) {
                throw new IllegalArgumentException("--" + required + " is required");
            }
        }
        String guarantee = found.get("guarantee");
        if (!guarantee.equals(StreamsConfig.EXACTLY_ONCE_V2)
                && !guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
            throw new IllegalArgumentException(
                    "--guarantee: expected exactly_once_v2 or at_least_once, got " + guarantee);
        }
        return found;
    }

    static Properties config(Map<String, String> args) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap-servers"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.get("guarantee"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        if (args.containsKey("commit-interval-ms")) {
            props.put(
                    StreamsConfig.COMMIT_INTERVAL_MS_CONFIG,
                    Long.parseLong(args.get("commit-interval-ms")));
        }
        // A killed instance's partitions move to its successor once its session expires.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return props;
    }

    public static void main(String[] argv) throws InterruptedException {
        Map<String, String> args;
        try {
            args = arguments(argv);
        } catch (IllegalArgumentException bad) {
            System.err.println("StreamsPipeline: " + bad.getMessage());
            System.exit(2);
            return;
        }
        Topology topology =
                topology(args.get("source"), args.get("sink"), args.containsKey("drop-every-tenth"));
        KafkaStreams streams = new KafkaStreams(topology, config(args));
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener(
                (now, before) -> {
                    System.out.println("state " + now + " " + before);
                    System.out.flush();
                    if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                        closed.countDown();
                    }
                });
        Runtime.getRuntime()
                .addShutdownHook(
                        new Thread(
                                () -> {
                                    streams.close(Duration.ofSeconds(30));
                                    closed.countDown();
                                }));
        streams.start();
        closed.await();
        streams.close(Duration.ofSeconds(30));
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
