import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.metadata.placement.ClusterDescriber;
import org.apache.kafka.metadata.placement.PartitionAssignment;
import org.apache.kafka.metadata.placement.PlacementSpec;
import org.apache.kafka.metadata.placement.StripedReplicaPlacer;
import org.apache.kafka.metadata.placement.TopicAssignment;
import org.apache.kafka.metadata.placement.UsableBroker;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * Kafka's own placement, as {@code kafka-reassign-partitions.sh --generate} computes it, on a kpo planning input.
 *
 * <p>Kafka 4.x's tool (org.apache.kafka.tools.reassign.ReassignPartitionsCommand#calculateAssignment) places every
 * partition of each topic afresh with the KRaft controller's {@link StripedReplicaPlacer}, over the brokers given to
 * {@code --broker-list}, ignoring where the replicas are today. This program does exactly that, on the same input the
 * kpo job reads (request.json, brokers.json, partitions as JSON lines), with a seeded Random so a bench run is
 * repeatable. {@code org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers}, which older tools used, is no longer
 * in the Kafka 4.x jars.
 *
 * <p>Usage: {@code KafkaPlacer <input-dir> <output.jsonl> [seed]}; prints {"placementSeconds":..,"partitions":..}.
 */
public final class KafkaPlacer {
    private static final ObjectMapper JSON = new ObjectMapper();

    private KafkaPlacer() {
    }

    public static void main(String[] args) throws IOException {
        Path input = Paths.get(args[0]);
        Path output = Paths.get(args[1]);
        long seed = args.length > 2 ? Long.parseLong(args[2]) : 42L;
        JsonNode request = JSON.readTree(input.resolve("request.json").toFile());
        List<UsableBroker> brokers = usableBrokers(request, JSON.readTree(input.resolve("brokers.json").toFile()));
        Map<String, int[]> topics = topics(input.resolve("partitions"), request);

        long started = System.nanoTime();
        StripedReplicaPlacer placer = new StripedReplicaPlacer(new Random(seed));
        ClusterDescriber cluster = new ClusterDescriber() {
            @Override
            public Iterator<UsableBroker> usableBrokers() {
                return brokers.iterator();
            }

            @Override
            public Uuid defaultDir(int brokerId) {
                return DirectoryId.MIGRATING;
            }
        };
        Map<String, List<PartitionAssignment>> placed = new TreeMap<>();
        for (Map.Entry<String, int[]> topic : topics.entrySet()) {
            int partitions = topic.getValue()[0];
            short factor = (short) topic.getValue()[1];
            TopicAssignment assignment = placer.place(new PlacementSpec(0, partitions, factor), cluster);
            placed.put(topic.getKey(), assignment.assignments());
        }
        double seconds = (System.nanoTime() - started) / 1e9;

        long count = 0;
        try (BufferedWriter out = Files.newBufferedWriter(output)) {
            for (Map.Entry<String, List<PartitionAssignment>> topic : placed.entrySet()) {
                List<PartitionAssignment> assignments = topic.getValue();
                for (int p = 0; p < assignments.size(); p++) {
                    ObjectNode row = JSON.createObjectNode();
                    row.put("topic", topic.getKey());
                    row.put("partition", p);
                    ArrayNode replicas = row.putArray("replicas");
                    assignments.get(p).replicas().forEach(replicas::add);
                    out.write(JSON.writeValueAsString(row));
                    out.write('\n');
                    count++;
                }
            }
        }
        System.out.println("{\"placementSeconds\":" + seconds + ",\"partitions\":" + count + "}");
    }

    /** The brokers --broker-list would name for the request's goal, with their racks (rack-aware unless asked). */
    private static List<UsableBroker> usableBrokers(JsonNode request, JsonNode brokers) {
        String goal = request.get("goal").asText();
        Set<Integer> concerned = new HashSet<>();
        request.path("brokers").forEach(b -> concerned.add(b.asInt()));
        boolean rackAware = request.path("rackAware").asBoolean(true);
        List<UsableBroker> usable = new ArrayList<>();
        for (JsonNode b : brokers) {
            int id = b.get("id").asInt();
            if (!b.path("alive").asBoolean(true)) {
                continue;
            }
            if (goal.equals("RemoveBrokers") && concerned.contains(id)) {
                continue;
            }
            if (goal.equals("Rebalance") && !concerned.isEmpty() && !concerned.contains(id)) {
                continue;
            }
            JsonNode rack = b.get("rack");
            Optional<String> rackName = rackAware && rack != null && !rack.isNull()
                ? Optional.of(rack.asText()) : Optional.empty();
            usable.add(new UsableBroker(id, rackName, false));
        }
        return usable;
    }

    /** Selected topics: name -> {partition count, replication factor}. */
    private static Map<String, int[]> topics(Path folder, JsonNode request) throws IOException {
        Set<String> named = new HashSet<>();
        request.path("topics").forEach(t -> named.add(t.asText()));
        Set<String> excluded = new HashSet<>();
        request.path("excludeTopics").forEach(t -> excluded.add(t.asText()));
        JsonNode patternNode = request.get("topicPattern");
        Pattern pattern = patternNode == null || patternNode.isNull() ? null : Pattern.compile(patternNode.asText());
        JsonNode factorNode = request.get("replicationFactor");
        int wantedFactor = factorNode == null || factorNode.isNull() ? 0 : factorNode.asInt();

        Map<String, int[]> topics = new TreeMap<>();
        List<Path> files = new ArrayList<>();
        if (Files.isDirectory(folder)) {
            try (DirectoryStream<Path> stream = Files.newDirectoryStream(folder)) {
                for (Path f : stream) {
                    String name = f.getFileName().toString();
                    if (!name.startsWith(".") && !name.startsWith("_")) {
                        files.add(f);
                    }
                }
            }
        } else {
            files.add(folder);
        }
        for (Path file : files) {
            try (BufferedReader in = Files.newBufferedReader(file)) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.isBlank()) {
                        continue;
                    }
                    JsonNode row = JSON.readTree(line);
                    String topic = row.get("topic").asText();
                    boolean chosen = (named.isEmpty() && pattern == null) || named.contains(topic)
                        || (pattern != null && pattern.matcher(topic).matches());
                    if (!chosen || excluded.contains(topic)) {
                        continue;
                    }
                    int partition = row.get("partition").asInt();
                    int factor = wantedFactor > 0 ? wantedFactor : row.get("replicas").size();
                    int[] shape = topics.computeIfAbsent(topic, t -> new int[] {0, 0});
                    shape[0] = Math.max(shape[0], partition + 1);
                    shape[1] = Math.max(shape[1], factor);
                }
            }
        }
        return topics;
    }
}
