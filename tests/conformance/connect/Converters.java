// Reads bytes with Kafka Connect's own converters and prints what a sink task gets from each.
//
//   java -cp '<connect jars>/*' Converters.java < requests.json > results.json
//
// requests: [{"class": "org.apache.kafka.connect.converters.LongConverter", "key": false,
//             "data": "<base64>" or null}, ...]
// results:  one per request: {"value": String.valueOf(the value) or null} or
//           {"error": "<message>: <cause's message>"} where toConnectData threw.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Base64;
import java.util.Map;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.storage.Converter;

public class Converters {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        ArrayNode out = json.createArrayNode();
        for (JsonNode r : json.readTree(System.in)) {
            Converter c = (Converter) Class.forName(r.get("class").asText()).getDeclaredConstructor().newInstance();
            c.configure(Map.of(), r.path("key").asBoolean(false));
            byte[] data = r.get("data").isNull() ? null : Base64.getDecoder().decode(r.get("data").asText());
            ObjectNode o = out.addObject();
            try {
                SchemaAndValue got = c.toConnectData("t", data);
                if (got.value() == null) o.putNull("value"); else o.put("value", String.valueOf(got.value()));
            } catch (Exception e) {
                String cause = e.getCause() == null ? "" : e.getCause().getMessage();
                o.put("error", e.getMessage() + cause);
            }
        }
        System.out.println(json.writeValueAsString(out));
    }
}
