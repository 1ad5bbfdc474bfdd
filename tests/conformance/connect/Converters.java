// Reads bytes with Kafka Connect's own converters and prints what a sink task gets from each.
//
//   java -cp '<connect jars>/*' Converters.java < requests.json > results.json
//
// requests: [{"class": "org.apache.kafka.connect.converters.LongConverter", "key": false,
//             "data": "<base64>" or null, "config": {"schemas.enable": "true"} (optional)}, ...]
// results:  one per request: {"value": String.valueOf(the value) or null, "typed": the value
//           rendered with its type (below), "schema": the Connect schema (below)} or
//           {"error": "<message>: <cause's message>"} where toConnectData threw.
// typed:    a struct as an object of its fields; a Decimal {"decimal": plain string}; a Date
//           {"date": days}; a Time {"time": ms of the day}; a Timestamp {"timestamp": ms};
//           bytes {"bytes": base64}; a map as [[key, value], ...] sorted by the key's text;
//           a float {"float": its value as a double}; other values as JSON has them.
// schema:   {"type": "INT32", "optional": true, "name": ..., "parameters": {...}, "fields":
//           [{"field": name, ...schema}], "items": schema, "keys": schema, "values": schema}.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.storage.Converter;

public class Converters {
    static final JsonNodeFactory F = JsonNodeFactory.instance;

    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        ArrayNode out = json.createArrayNode();
        for (JsonNode r : json.readTree(System.in)) {
            Converter c = (Converter) Class.forName(r.get("class").asText()).getDeclaredConstructor().newInstance();
            Map<String, Object> config = new HashMap<>();
            r.path("config").fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
            c.configure(config, r.path("key").asBoolean(false));
            byte[] data = r.get("data").isNull() ? null : Base64.getDecoder().decode(r.get("data").asText());
            ObjectNode o = out.addObject();
            try {
                SchemaAndValue got = c.toConnectData("t", data);
                if (got.value() == null) o.putNull("value"); else o.put("value", String.valueOf(got.value()));
                o.set("typed", render(got.schema(), got.value()));
                o.set("schema", schema(got.schema()));
            } catch (Exception e) {
                String cause = e.getCause() == null ? "" : e.getCause().getMessage();
                o.put("error", e.getMessage() + cause);
            }
        }
        System.out.println(json.writeValueAsString(out));
    }

    static JsonNode render(Schema s, Object v) {
        if (v == null) return F.nullNode();
        String name = s == null ? null : s.name();
        if (v instanceof BigDecimal) return F.objectNode().put("decimal", ((BigDecimal) v).toPlainString());
        if (v instanceof java.util.Date) {
            long ms = ((java.util.Date) v).getTime();
            if (Date.LOGICAL_NAME.equals(name)) return F.objectNode().put("date", Date.fromLogical(s, (java.util.Date) v));
            if (Time.LOGICAL_NAME.equals(name)) return F.objectNode().put("time", Time.fromLogical(s, (java.util.Date) v));
            return F.objectNode().put("timestamp", ms);
        }
        if (v instanceof byte[]) return F.objectNode().put("bytes", Base64.getEncoder().encodeToString((byte[]) v));
        if (v instanceof ByteBuffer) {
            ByteBuffer b = ((ByteBuffer) v).duplicate();
            byte[] a = new byte[b.remaining()];
            b.get(a);
            return F.objectNode().put("bytes", Base64.getEncoder().encodeToString(a));
        }
        if (v instanceof Struct) {
            ObjectNode o = F.objectNode();
            // What the converter put there: Struct.get would put a null field's default back.
            for (Field f : s.fields()) o.set(f.name(), render(f.schema(), ((Struct) v).getWithoutDefault(f.name())));
            return o;
        }
        if (v instanceof Map) {
            List<ArrayNode> pairs = new ArrayList<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                ArrayNode p = F.arrayNode();
                p.add(render(s == null ? null : s.keySchema(), e.getKey()));
                p.add(render(s == null ? null : s.valueSchema(), e.getValue()));
                pairs.add(p);
            }
            pairs.sort((a, b) -> a.get(0).toString().compareTo(b.get(0).toString()));
            ArrayNode arr = F.arrayNode();
            pairs.forEach(arr::add);
            return arr;
        }
        if (v instanceof List) {
            ArrayNode arr = F.arrayNode();
            for (Object x : (List<?>) v) arr.add(render(s == null ? null : s.valueSchema(), x));
            return arr;
        }
        if (v instanceof Float) return F.objectNode().put("float", (double) (Float) v);
        if (v instanceof Double) return F.numberNode((Double) v);
        if (v instanceof Long) return F.numberNode((Long) v);
        if (v instanceof Integer) return F.numberNode((Integer) v);
        if (v instanceof Short) return F.numberNode((Short) v);
        if (v instanceof Byte) return F.numberNode((Byte) v);
        if (v instanceof Boolean) return F.booleanNode((Boolean) v);
        return F.textNode(String.valueOf(v));
    }

    static JsonNode schema(Schema s) {
        if (s == null) return F.nullNode();
        ObjectNode o = F.objectNode();
        o.put("type", s.type().toString());
        o.put("optional", s.isOptional());
        if (s.name() != null) o.put("name", s.name());
        if (s.parameters() != null) {
            ObjectNode p = o.putObject("parameters");
            s.parameters().forEach(p::put);
        }
        switch (s.type()) {
            case STRUCT:
                ArrayNode fs = o.putArray("fields");
                for (Field f : s.fields()) {
                    ObjectNode fo = (ObjectNode) schema(f.schema());
                    fo.put("field", f.name());
                    fs.add(fo);
                }
                break;
            case ARRAY:
                o.set("items", schema(s.valueSchema()));
                break;
            case MAP:
                o.set("keys", schema(s.keySchema()));
                o.set("values", schema(s.valueSchema()));
                break;
            default:
                break;
        }
        return o;
    }
}
