// Runs records through Kafka Connect's own transforms and predicates, configured as a
// connector's `transforms` / `predicates` settings configure them, and prints what comes out.
//
//   java -cp '<connect-transforms jars>/*' Harness.java < requests.json > results.json
//
// requests: a list of requests (one JVM start for many chains), each
//          {"config": {"transforms": "a", "transforms.a.type": "...", ...},
//           "converter": "string" (the default), "json" (Connect's JsonConverter with
//                        schemas.enable=false reads each key and value, as a sink worker would)
//                        or "json-schemas" (schemas.enable=true: each key and value is an
//                        envelope, read into a value with its Connect schema), or
//                        "string-converter" (Connect's StringConverter: a string with its
//                        optional string schema; results written as "json-schemas" writes them),
//           "records": [{"topic": t, "partition": p, "offset": o, "key": k, "value": v,
//                        "headers": [[name, value-or-null], ...]}, ...]}
// results: for each request, one entry per record, null where the chain dropped it, else the record as it left
//          the chain in the same form ({"topic", "partition", "offset", "key", "value",
//          "headers"}; a header's value as Connect's SimpleHeaderConverter writes it; with
//          "json-schemas", a key and value as JsonConverter writes them with their schemas:
//          {"schema": ..., "payload": ...}), or
//          {"error": "<class>: <message>"} where a stage threw.
// A transform applies to a record as Connect's TransformationStage applies it: when it has no
// predicate, or when the predicate's test differs from `negate`.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.storage.StringConverter;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

public class Harness {
    static final String T = "org.apache.kafka.connect.transforms.";
    static final SimpleHeaderConverter HEADERS = new SimpleHeaderConverter();

    // Short names as Connect's plugin aliases give them: the simple class name (nested classes
    // with their outer class: InsertField$Value).
    static String fullName(String type) {
        if (type.contains(".")) return type;
        for (String p : List.of("Filter", "DropHeaders")) if (type.equals(p)) return T + p;
        for (String p : List.of("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone")) if (type.equals(p)) return T + "predicates." + p;
        return T + type;
    }

    record Stage(Transformation<SinkRecord> transform, Predicate<SinkRecord> predicate, boolean negate) {}

    static Map<String, String> under(Map<String, String> config, String prefix, String... skip) {
        Map<String, String> out = new HashMap<>();
        for (var e : config.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                String key = e.getKey().substring(prefix.length());
                if (!List.of(skip).contains(key)) out.put(key, e.getValue());
            }
        }
        return out;
    }

    static List<String> aliases(Map<String, String> config, String key) {
        List<String> out = new ArrayList<>();
        for (String a : config.getOrDefault(key, "").split(",")) if (!a.isBlank()) out.add(a.trim());
        return out;
    }

    @SuppressWarnings("unchecked")
    static <T> T make(String type, Map<String, String> config) throws Exception {
        Object made = Class.forName(fullName(type)).getDeclaredConstructor().newInstance();
        if (made instanceof Transformation<?> t) t.configure(config);
        if (made instanceof Predicate<?> p) p.configure(config);
        return (T) made;
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        ArrayNode results = json.createArrayNode();
        for (JsonNode request : json.readTree(System.in)) results.add(run(json, request));
        System.out.println(json.writeValueAsString(results));
    }

    static ArrayNode run(ObjectMapper json, JsonNode request) throws Exception {
        Map<String, String> config = new HashMap<>();
        request.get("config").fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
        Map<String, Predicate<SinkRecord>> predicates = new HashMap<>();
        for (String alias : aliases(config, "predicates")) {
            String prefix = "predicates." + alias + ".";
            predicates.put(alias, make(config.get(prefix + "type"), under(config, prefix, "type")));
        }
        List<Stage> stages = new ArrayList<>();
        for (String alias : aliases(config, "transforms")) {
            String prefix = "transforms." + alias + ".";
            Transformation<SinkRecord> t = make(config.get(prefix + "type"), under(config, prefix, "type", "predicate", "negate"));
            String predicate = config.get(prefix + "predicate");
            boolean negate = Boolean.parseBoolean(config.getOrDefault(prefix + "negate", "false"));
            stages.add(new Stage(t, predicate == null ? null : predicates.get(predicate), negate));
        }
        JsonConverter keys = null, values = null;
        String converter = request.has("converter") ? request.get("converter").asText() : "string";
        boolean strings = converter.equals("string-converter");
        boolean schemas = converter.equals("json-schemas") || strings;
        if (converter.equals("json") || schemas) {
            // StringConverter's results are written with their schemas, as envelopes.
            Map<String, String> options = Map.of("schemas.enable", String.valueOf(schemas));
            keys = new JsonConverter();
            keys.configure(options, true);
            values = new JsonConverter();
            values.configure(options, false);
        }
        // What reads each key and value: StringConverter, the JsonConverters, or nothing (the
        // text as it is, with no schema).
        Converter keyReader = keys, valueReader = values;
        if (strings) {
            StringConverter keyStrings = new StringConverter();
            keyStrings.configure(Map.of(), true);
            StringConverter valueStrings = new StringConverter();
            valueStrings.configure(Map.of(), false);
            keyReader = keyStrings;
            valueReader = valueStrings;
        }
        ArrayNode out = json.createArrayNode();
        for (JsonNode r : request.get("records")) {
            ConnectHeaders headers = new ConnectHeaders();
            for (JsonNode h : r.get("headers")) headers.addString(h.get(0).asText(), h.get(1).isNull() ? null : h.get(1).asText());
            String topic = r.get("topic").asText();
            Object key = r.get("key").isNull() ? null : r.get("key").asText();
            Object value = r.get("value").isNull() ? null : r.get("value").asText();
            Schema keySchema = null, valueSchema = null;
            if (keyReader != null) {
                SchemaAndValue k = keyReader.toConnectData(topic, key == null ? null : ((String) key).getBytes(StandardCharsets.UTF_8));
                SchemaAndValue v = valueReader.toConnectData(topic, value == null ? null : ((String) value).getBytes(StandardCharsets.UTF_8));
                key = k.value();
                value = v.value();
                keySchema = k.schema();
                valueSchema = v.schema();
            }
            long timestamp = r.has("timestamp") ? r.get("timestamp").asLong() : 0L;
            SinkRecord record = new SinkRecord(
                topic, r.get("partition").asInt(), keySchema, key, valueSchema, value,
                r.get("offset").asLong(), timestamp, org.apache.kafka.common.record.TimestampType.CREATE_TIME, headers);
            try {
                for (Stage s : stages) {
                    if (record == null) break;
                    if (s.predicate() == null || s.predicate().test(record) != s.negate()) record = s.transform().apply(record);
                }
                if (record == null) {
                    out.addNull();
                    continue;
                }
                ObjectNode o = out.addObject();
                o.put("topic", record.topic());
                o.put("partition", record.kafkaPartition());
                o.put("offset", record.kafkaOffset());
                if (schemas) {
                    o.set("key", envelope(json, keys, record.topic(), record.keySchema(), record.key()));
                    o.set("value", envelope(json, values, record.topic(), record.valueSchema(), record.value()));
                } else {
                    o.putPOJO("key", record.key());
                    o.putPOJO("value", record.value());
                }
                ArrayNode hs = o.putArray("headers");
                for (Iterator<Header> it = record.headers().iterator(); it.hasNext();) {
                    Header h = it.next();
                    // As a sink's header converter writes it: Connect's SimpleHeaderConverter.
                    byte[] bytes = HEADERS.fromConnectHeader(record.topic(), h.key(), h.schema(), h.value());
                    hs.addArray().add(h.key()).add(bytes == null ? null : new String(bytes, StandardCharsets.UTF_8));
                }
            } catch (Exception e) {
                out.addObject().put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
        return out;
    }

    // A key or value with its schema, as JsonConverter (schemas.enable=true) writes it.
    static JsonNode envelope(ObjectMapper json, JsonConverter converter, String topic, Schema schema, Object value) throws Exception {
        byte[] bytes = converter.fromConnectData(topic, schema, value);
        return bytes == null ? json.nullNode() : json.readTree(bytes);
    }
}
