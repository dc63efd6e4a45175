// A transactional copier as a team would write one with Kafka's Java clients: it knows nothing
// of the monitor.
//
// Reads a source topic read_committed (or, with --isolation read_uncommitted, as a misconfigured
// copier does: the source's aborted records too) in a consumer group and copies each polled batch, key,
// value and headers unchanged, to a sink topic inside one transaction that also carries the
// batch's consumed offsets (sendOffsetsToTransaction). A drawn share of the transactions is
// aborted on purpose after its records are in the log; the batch is then read again from the
// positions it started at and copied in a later transaction.
//
//   java -cp <kafka jars>:<classes> TxnCopier --bootstrap-servers HOST:PORT --group ID \
//       --source TOPIC --sink TOPIC --transactional-id ID --abort-percent P [--seed S] \
//       [--isolation read_committed|read_uncommitted]
//
// Says on stdout, one line each: "ready" once initTransactions returned and partitions are
// assigned, "committed <records>" and "aborted <records>" per transaction, "fenced" when a newer
// instance with its transactional.id took over (then it exits with 3).

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnCopier {
    private static final int EXIT_FENCED = 3;

    private TxnCopier() {}

    static Map<String, String> arguments(String[] args) {
        Map<String, String> found = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            found.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        return found;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // A SIGKILLed member leaves the group when this runs out: the smallest a broker allows.
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        // A killed instance's open transaction is aborted by the next one's initTransactions;
        // the timeout only bounds how long one left by a last, unrestarted instance stays open.
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    public static void main(String[] args) {
        Map<String, String> a = arguments(args);
        String source = a.get("source");
        String sink = a.get("sink");
        int abortPercent = Integer.parseInt(a.getOrDefault("abort-percent", "0"));
        Random random = a.containsKey("seed") ? new Random(Long.parseLong(a.get("seed"))) : new Random();
        KafkaConsumer<byte[], byte[]> consumer = consumer(
                a.get("bootstrap-servers"), a.get("group"), a.getOrDefault("isolation", "read_committed"));
        KafkaProducer<byte[], byte[]> producer = producer(a.get("bootstrap-servers"), a.get("transactional-id"));
        producer.initTransactions();
        // Per partition, the position the last committed transaction sent to the group.
        Map<TopicPartition, Long> committed = new HashMap<>();
        consumer.subscribe(List.of(source), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                committed.clear();
                System.out.println("ready " + partitions.size());
            }
        });
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                // Positions, not last offsets + 1: a position moves past control markers and
                // aborted records too, so the group's commit reaches the source's LSO.
                Map<TopicPartition, OffsetAndMetadata> moved = new HashMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    long position = consumer.position(tp);
                    if (!Long.valueOf(position).equals(committed.get(tp))) {
                        moved.put(tp, new OffsetAndMetadata(position));
                    }
                }
                if (records.isEmpty() && moved.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, Long> first = new HashMap<>();
                producer.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(sink, null, r.key(), r.value(), r.headers()));
                    first.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
                }
                try {
                    producer.sendOffsetsToTransaction(moved, consumer.groupMetadata());
                    if (!records.isEmpty() && random.nextInt(100) < abortPercent) {
                        producer.flush(); // the aborted records are in the log, not only in memory
                        producer.abortTransaction();
                        first.forEach(consumer::seek);
                        System.out.println("aborted " + records.count());
                    } else {
                        producer.commitTransaction();
                        moved.forEach((tp, at) -> committed.put(tp, at.offset()));
                        System.out.println("committed " + records.count());
                    }
                } catch (ProducerFencedException fenced) {
                    throw fenced;
                } catch (KafkaException abortable) {
                    // The group moved on (a rebalance): drop the batch, read it again.
                    System.out.println("abortable " + abortable);
                    producer.abortTransaction();
                    committed.clear();
                    rewind(consumer);
                }
            }
        } catch (ProducerFencedException fenced) {
            System.out.println("fenced");
            System.exit(EXIT_FENCED);
        }
    }

    /** Each assigned partition back to its committed offset (its beginning when none). */
    static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata at = committed.get(tp);
            if (at == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, at.offset());
            }
        }
    }
}
